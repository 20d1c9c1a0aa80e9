//! `set $name VALUE` end to end, on both runtimes: values with variables and captures, `set` in a server and in an
//! `if`, the order of `set`/`if`/`return` in one script, a variable set in one location read by `add_header`,
//! `proxy_set_header` and an access log line, an unset variable read as empty, `$limit_rate` set and read, a
//! name used before (or away from) its `set`; and refused names in nginx's words with file:line.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, lines_when, Client, Proxy};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-set-vars-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("test dir");
    d
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn get(c: &mut Client, target: &str) -> support::Response {
    c.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    c.read_response().expect("response")
}

fn run<R: Runtime>() {
    let d = dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    let backend = Backend::start("b", Mode::Ok);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format s '$uri|$who|$tag|$never';
  upstream u {{ server {backend}; }}
  server {{
    listen {front};
    set $who "server-$arg_w";
    location /early {{
      # read before the location that sets it: empty here
      return 200 "[$tag]";
    }}
    location /order {{
      set $tag a;
      set $tag "${{tag}}b";
      if ($arg_x = 1) {{
        set $tag "${{tag}}-if";
      }}
      if ($tag = ab-if) {{
        return 200 "yes $tag $who";
      }}
      return 200 "no $tag $who";
    }}
    location ~ ^/cap/(\w+)/(.*)$ {{
      set $tag "$1+$2";
      add_header X-Tag $tag;
      return 200 "$tag";
    }}
    location /up {{
      set $tag "up-$request_method";
      proxy_set_header X-Tag $tag;
      proxy_set_header X-Who $who;
      add_header X-Tag $tag;
      proxy_pass http://u;
      access_log {dir}/s.log s;
    }}
    location /body {{
      set $copy "<$request_body>";
      add_header X-Body $copy;
      proxy_set_header X-Got $request_body;
      proxy_pass http://u;
    }}
    # $never is set only here: it is known everywhere, empty where this does not run
    location /unused {{ set $never x; }}
    location /rate {{
      set $limit_rate $arg_l;
      add_header X-Rate $limit_rate;
      return 200 OK;
    }}
  }}
}}
"#,
        backend = backend.addr,
        dir = d.display()
    );
    let config = corelb_engine::config::parse_str(&text, &d.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);

    // a script's steps in order: two sets, a set inside an if, an if reading it, then the return
    let r = get(&mut c, "/order?x=1&w=9");
    assert_eq!((r.status, r.text().as_str()), (200, "yes ab-if server-9"));
    let r = get(&mut c, "/order");
    assert_eq!((r.status, r.text().as_str()), (200, "no ab server-"));
    // one request's values do not leak into the next request of the connection
    let r = get(&mut c, "/early");
    assert_eq!((r.status, r.text().as_str()), (200, "[]"));

    // captures of the location's regex in a value; add_header reads the variable
    let r = get(&mut c, "/cap/one/two/three");
    assert_eq!((r.status, r.text().as_str()), (200, "one+two/three"));
    assert_eq!(r.header("x-tag").as_deref(), Some("one+two/three"));

    // proxied: the value goes upstream, into the answer's headers and into the access log
    let r = get(&mut c, "/up/x?w=7");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-tag").as_deref(), Some("up-GET"));
    let head = backend.last_head();
    assert_eq!(header_of(&head, "x-tag").as_deref(), Some("up-GET"), "{head}");
    assert_eq!(header_of(&head, "x-who").as_deref(), Some("server-7"), "{head}");

    // $request_body: the head first, the body a moment later; the location waits for it, reads it in a header
    // sent upstream and (through `set`) in its answer's header, and the body still goes upstream
    c.send(b"POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n");
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"hello");
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-body").as_deref(), Some("<hello>"));
    let head = backend.last_head();
    assert_eq!(header_of(&head, "x-got").as_deref(), Some("hello"), "{head}");
    assert_eq!(header_of(&head, "content-length").as_deref(), Some("5"), "{head}");
    // a body nginx would put in a temporary file (past what fits the first header buffer with the head, more than
    // `client_body_buffer_size` and a quarter) is streamed and the variable is empty
    let big = vec![b'y'; 24 * 1024];
    let mut req = format!(
        "POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        big.len()
    )
    .into_bytes();
    req.extend_from_slice(&big);
    c.send(&req);
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-body").as_deref(), Some("<>"));
    assert_eq!(header_of(&backend.last_head(), "x-got"), None);

    // $limit_rate: a size is read as nginx reads it, anything else leaves 0
    let r = get(&mut c, "/rate?l=40k");
    assert_eq!(r.header("x-rate").as_deref(), Some("40960"));
    let r = get(&mut c, "/rate?l=oops");
    assert_eq!(r.header("x-rate").as_deref(), Some("0"));

    drop(c);
    drop(proxy);
    assert_eq!(lines_when(&d.join("s.log"), 1), ["/up/x|server-7|up-GET|"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tokio_set_variables() {
    run::<Tokio>();
}

#[test]
fn glommio_set_variables() {
    if glommio_usable() {
        run::<Glommio>();
    }
}

/// `limit_rate`/`limit_rate_after` on a file and on a proxied answer, and `set $limit_rate` lifting it: a lower
/// bound on the time taken (never a tight one), and the bytes intact.
fn rates<R: Runtime>() {
    let d = dir(&format!(
        "rate-{}",
        std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt")
    ));
    let body = vec![b'x'; 5000];
    std::fs::write(d.join("big"), &body).expect("a file");
    let echo = Backend::start("e", Mode::Echo);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  server {{
    listen {front};
    root {root};
    limit_rate 2k;
    limit_rate_after 1k;
    location /big {{ }}
    location /echo {{ proxy_pass http://{echo}; }}
    location /lifted {{
      set $limit_rate 0;
      proxy_pass http://{echo};
    }}
  }}
}}
"#,
        root = d.display(),
        echo = echo.addr,
    );
    let config = corelb_engine::config::parse_str(&text, &d.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);
    // 2048 B/s after 1024 B, one second's worth at once: ~5000 B take at least 0.9 s more
    let t = Instant::now();
    c.send(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response().expect("response");
    let took = t.elapsed();
    assert_eq!((r.status, r.body.len()), (200, 5000));
    assert!(took >= Duration::from_millis(900), "{took:?}");
    let post = |path: &str| {
        let mut req = format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n").into_bytes();
        req.extend_from_slice(&body);
        req
    };
    let t = Instant::now();
    c.send(&post("/echo"));
    let r = c.read_response().expect("response");
    let took = t.elapsed();
    assert_eq!(r.body, body);
    assert!(took >= Duration::from_millis(900), "{took:?}");
    // `set $limit_rate 0`: no limit for this request (the limited one needs a second, this one milliseconds: the
    // bound is loose)
    let t = Instant::now();
    c.send(&post("/lifted"));
    let r = c.read_response().expect("response");
    let took = t.elapsed();
    assert_eq!(r.body, body);
    assert!(took < Duration::from_millis(800), "{took:?}");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tokio_limit_rate() {
    rates::<Tokio>();
}

#[test]
fn glommio_limit_rate() {
    if glommio_usable() {
        rates::<Glommio>();
    }
}

fn refused(body: &str) -> String {
    let text = format!("events {{}}\nhttp {{\n server {{\n  listen 127.0.0.1:1;\n{body}\n }}\n}}\n");
    match corelb_engine::config::parse_str(&text, Path::new("/etc/t.conf")) {
        Ok(_) => panic!("accepted: {body}"),
        Err(e) => e.to_string(),
    }
}

/// nginx 1.22's messages and lines (`nginx -t`).
#[test]
fn refused_names_in_nginx_words() {
    assert_eq!(
        refused("  location / { set $uri x; }"),
        "[emerg] the duplicate \"uri\" variable in /etc/t.conf:5"
    );
    assert_eq!(
        refused("  set tag x;"),
        "[emerg] invalid variable name \"tag\" in /etc/t.conf:5"
    );
    assert_eq!(
        refused("  set $a;"),
        "[emerg] invalid number of arguments in \"set\" directive in /etc/t.conf:5"
    );
    assert_eq!(
        refused("  location / { return 200 $nowhere; }"),
        "[emerg] unknown \"nowhere\" variable in /etc/t.conf:5"
    );
}
