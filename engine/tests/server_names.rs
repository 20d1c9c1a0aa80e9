//! Server selection by `Host` end to end, on both runtimes, with the picks nginx 1.22 makes for the same config
//! (checked on loopback): exact names, the longest leading and trailing wildcards, regex names in config order
//! with their named groups as variables (in `return`, `add_header` and a header sent upstream), `server_name ""`
//! for a request without a host, the default server, and `$server_name` as nginx gives it.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

fn run<R: Runtime>() {
    let backend = Backend::start("b", Mode::Ok);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  upstream u {{ server {backend}; }}
  server {{ listen {front}; server_name default.test; return 200 "default $server_name"; }}
  server {{ listen {front}; server_name ""; return 200 "empty [$server_name]"; }}
  server {{ listen {front}; server_name "~^www\."  "~example"; return 200 "first-regex $server_name"; }}
  server {{ listen {front}; server_name www.example.*; return 200 "tail $server_name"; }}
  server {{ listen {front}; server_name *.example.com; return 200 "head $server_name"; }}
  server {{ listen {front}; server_name www.example.com; return 200 "exact $server_name"; }}
  server {{ listen {front}; server_name .dot.test; return 200 "dot $server_name"; }}
  server {{
    listen {front};
    server_name "~^(?<user>[a-z]+)-(?<num>[0-9]+)\.users\.test$";
    location /p {{
      proxy_set_header X-User $user;
      proxy_pass http://u;
    }}
    location / {{
      add_header X-Num $num;
      return 200 "user $user num $num sn $server_name";
    }}
  }}
}}
"#,
        backend = backend.addr,
    );
    let config =
        corelb_engine::config::parse_str(&text, std::path::Path::new("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);
    let mut get = |target: &str, host: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        c.read_response().expect("response")
    };
    for (host, body) in [
        ("www.example.com", "exact www.example.com"),
        ("WWW.Example.COM:8080", "exact www.example.com"),
        ("a.example.com", "head *.example.com"),
        ("a.b.example.com", "head *.example.com"),
        ("www.example.org", "tail www.example.*"),
        ("www.example", "first-regex ~^www\\."),
        ("my.example", "first-regex ~^www\\."),
        ("dot.test", "dot dot.test"),
        ("x.dot.test", "dot dot.test"),
        ("other.test", "default default.test"),
        (
            "Bob-42.Users.Test",
            "user bob num 42 sn ~^(?<user>[a-z]+)-(?<num>[0-9]+)\\.users\\.test$",
        ),
    ] {
        let r = get("/", host);
        assert_eq!((r.status, r.text().as_str()), (200, body), "{host}");
    }
    let r = get("/", "ann-7.users.test");
    assert_eq!(r.header("x-num").as_deref(), Some("7"));
    let r = get("/p", "eve-1.users.test");
    assert_eq!((r.status, r.text().as_str()), (200, "b"));
    let head = backend.last_head();
    assert!(head.contains("\r\nX-User: eve\r\n"), "{head}");

    // HTTP/1.0 without a Host: the server named "" (nginx's empty host), not the default one.
    let mut c = Client::connect(front);
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    let r = c.read_response().expect("response");
    assert_eq!((r.status, r.text().as_str()), (200, "empty []"));
    drop(proxy);
}

#[test]
fn tokio_server_names() {
    run::<Tokio>();
}

#[test]
fn glommio_server_names() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
