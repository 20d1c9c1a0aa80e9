//! `map` and the request variables end to end, on both runtimes: map values (exact, `hostnames` wildcards, regex
//! with captures, a map naming another, the default) and `$server_name`, `$request_id`, `$nginx_version`,
//! `$is_args`, `$request`... in `return` text, in a redirect's `Location`, in headers sent upstream, and in an
//! access log line with the upstream's answer variables; one `$request_id` per request, the same everywhere; and a
//! map of `$status` deciding, when the line is written, whether a request is logged (`access_log ... if=`).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::path::PathBuf;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, lines_when, Client, Proxy};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-map-vars-{tag}-{}", std::process::id()));
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

fn run<R: Runtime>() {
    let d = dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    std::fs::write(d.join("extra.map"), "from-include included;\n").expect("include file");
    let backend = Backend::start("b", Mode::Ok);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format v '$uri|$x|$site|$upstream_http_server|$upstream_response_length|$sent_http_content_length|'
               '$upstream_status|$request_id';
  map $arg_k $x {{
    default none;
    exact hit;
    ~^(?<word>[a-z]+)-(\d+)$ $2:$word;
    ~*^UP upper;
    other $site;
    include extra.map;
  }}
  map $status $loggable {{
    ~^[23] 0;
    default 1;
  }}
  map $loggable $kind {{
    1 error;
    default fine;
  }}
  log_format e '$status $loggable $kind $uri';
  access_log {dir}/errors.log e if=$loggable;
  map $http_host $site {{
    hostnames;
    default other;
    .example.com site;
    www.example.* tail;
  }}
  upstream u {{ server {backend}; }}
  server {{
    listen {front};
    server_name test.local alias.local;
    location /p {{
      proxy_set_header X-Map $x;
      proxy_set_header X-Site $site;
      proxy_set_header X-Id $request_id;
      proxy_set_header X-Sn $server_name;
      proxy_pass http://u;
      access_log {dir}/v.log v;
    }}
    location /r {{
      return 200 "x=$x site=$site sn=$server_name v=$nginx_version a=$is_args r=$request id=$request_id/$request_id";
    }}
    location /go {{ return 302 https://$host$request_uri; }}
  }}
}}
"#,
        backend = backend.addr,
        dir = d.display()
    );
    let config = corelb_engine::config::parse_str(&text, &d.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let version = env!("CARGO_PKG_VERSION");
    let mut c = Client::connect(front);
    let mut get = |target: &str, host: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        c.read_response().expect("response")
    };

    // `return` text: each map kind, and the request's own variables.
    for (target, host, x, site) in [
        ("/r?k=exact", "test.local", "hit", "other"),
        ("/r?k=EXACT", "a.example.com", "hit", "site"),
        ("/r?k=abc-42", "example.com", "42:abc", "site"),
        ("/r?k=UpPeR", "www.example.org", "upper", "tail"),
        ("/r?k=other", "www.example.co.uk", "tail", "tail"),
        ("/r?k=from-include", "example.com.", "included", "site"),
        ("/r?k=nothing", "Test.Local", "none", "other"),
    ] {
        let r = get(target, host);
        assert_eq!(r.status, 200, "{target}");
        let body = r.text();
        let (before_id, id) = body.rsplit_once(" id=").expect("an id");
        assert_eq!(
            before_id,
            format!("x={x} site={site} sn=test.local v={version} a=? r=GET {target} HTTP/1.1"),
            "{target} {host}"
        );
        let (a, b) = id.split_once('/').expect("two ids");
        assert_eq!(a, b, "one $request_id in every place of a request");
        assert!(a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
    let r = get("/r", "test.local");
    assert!(
        r.text().starts_with("x=none site=other sn=test.local v="),
        "{}",
        r.text()
    );
    assert!(r.text().contains(" a= r=GET /r HTTP/1.1 "), "{}", r.text());

    // A redirect with variables.
    let r = get("/go/a?b=1", "test.local");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location").as_deref(), Some("https://test.local/go/a?b=1"));

    // Headers sent upstream, and the access log line of the same request.
    let r = get("/p?k=xyz-7", "www.example.com");
    assert_eq!((r.status, r.text().as_str()), (200, "b"));
    let head = backend.last_head();
    assert_eq!(header_of(&head, "x-map").as_deref(), Some("7:xyz"), "{head}");
    assert_eq!(header_of(&head, "x-site").as_deref(), Some("site"), "{head}");
    assert_eq!(header_of(&head, "x-sn").as_deref(), Some("test.local"), "{head}");
    let id = header_of(&head, "x-id").expect("X-Id sent");
    assert!(id.len() == 32 && id.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
    let r2 = get("/p", "other.host");
    assert_eq!(r2.status, 200);
    let second = header_of(&backend.last_head(), "x-id").expect("X-Id sent");
    assert_ne!(second, id, "a new request draws a new id");
    // No `k` argument: the default.
    assert_eq!(header_of(&backend.last_head(), "x-map").as_deref(), Some("none"));

    // Logged only when the map of `$status` (evaluated when the line is written) says so.
    assert_eq!(get("/none", "test.local").status, 404);
    assert_eq!(get("/r", "test.local").status, 200);
    assert_eq!(get("/nothing/here", "test.local").status, 404);
    assert_eq!(
        lines_when(&d.join("errors.log"), 2),
        ["404 1 error /none", "404 1 error /nothing/here"]
    );

    drop(c);
    drop(proxy);
    let lines = lines_when(&d.join("v.log"), 2);
    assert_eq!(
        lines,
        [
            format!("/p|7:xyz|site|test|1|1|200|{id}"),
            format!("/p|none|other|test|1|1|200|{second}"),
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tokio_map_and_variables() {
    run::<Tokio>();
}

#[test]
fn glommio_map_and_variables() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
