//! `proxy_pass` with variables end to end, on both runtimes: the upstream a variable names (an `upstream` block by
//! name, an implicit one by `host:port`), the URL's URI sent as is, the request's own target when the URL has
//! none, `Host` as the upstream's name; a name that is no upstream answers nginx's 502 (no resolver), a URL that
//! is not `http://` its 500.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

fn request_line(head: &str) -> &str {
    head.lines().next().unwrap_or_default()
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn run<R: Runtime>() {
    let a = Backend::start("a", Mode::Ok);
    let b = Backend::start("b", Mode::Ok);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  upstream one {{ server {a}; }}
  upstream two {{ server {b}; }}
  server {{
    listen {front};
    # makes the implicit upstream {b}
    location /static {{ proxy_pass http://{b}; }}
    location /by-arg {{ proxy_pass http://$arg_u; }}
    location /with-uri {{ proxy_pass http://$arg_u/fixed$is_args$args; }}
    location /bad {{ proxy_pass $arg_u; }}
    location /set {{
      set $target two;
      proxy_pass http://$target;
    }}
  }}
}}
"#,
        a = a.addr,
        b = b.addr,
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);
    let mut get = |target: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: front\r\n\r\n").as_bytes());
        c.read_response().expect("response")
    };

    // an upstream block by name (any case); no URI part: the request's target as sent
    let r = get("/by-arg/x%20y?u=ONE");
    assert_eq!((r.status, r.text().as_str()), (200, "a"));
    let head = a.last_head();
    assert_eq!(request_line(&head), "GET /by-arg/x%20y?u=ONE HTTP/1.0", "{head}");
    assert_eq!(header_of(&head, "host").as_deref(), Some("one"), "{head}");
    let r = get("/by-arg?u=two");
    assert_eq!((r.status, r.text().as_str()), (200, "b"));

    // the implicit upstream of another proxy_pass, by host:port
    let r = get(&format!("/by-arg?u={}", b.addr));
    assert_eq!((r.status, r.text().as_str()), (200, "b"));
    let head = b.last_head();
    assert_eq!(header_of(&head, "host"), Some(b.addr.to_string()), "{head}");

    // the URL's URI replaces the request's, as is
    let r = get("/with-uri/ignored?u=one");
    assert_eq!((r.status, r.text().as_str()), (200, "a"));
    assert_eq!(request_line(&a.last_head()), "GET /fixed?u=one HTTP/1.0");

    // a variable `set` made
    let r = get("/set/p");
    assert_eq!((r.status, r.text().as_str()), (200, "b"));
    assert_eq!(request_line(&b.last_head()), "GET /set/p HTTP/1.0");

    // no such upstream: a resolver would be needed (502); a port given to a named block is another name
    let before = (a.requests(), b.requests());
    assert_eq!(get("/by-arg?u=nowhere.example").status, 502);
    assert_eq!(get("/by-arg?u=one:8080").status, 502);
    // not http://: nginx's 500
    assert_eq!(get("/bad?u=ftp://one").status, 500);
    assert_eq!((a.requests(), b.requests()), before, "nothing went upstream");

    // the connection still serves
    let r = get("/by-arg?u=one");
    assert_eq!(r.status, 200);
    drop(proxy);
}

#[test]
fn tokio_proxy_pass_with_variables() {
    run::<Tokio>();
}

#[test]
fn glommio_proxy_pass_with_variables() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
