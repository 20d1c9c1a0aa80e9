//! `keepalive_timeout T HEADER_T` end to end, on both runtimes: every kind of answer (a `return`, a static file,
//! a proxied response, an `api` endpoint, an error page) carries `Keep-Alive: timeout=HEADER_T` after
//! `Connection: keep-alive`, the second value inherited apart from the first (as nginx merges it); none on a
//! closing answer; and the wait for the next request is the last request's location's `keepalive_timeout`.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

const KEPT_9: &str = "\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\n";

fn run<R: Runtime>() {
    let dir = std::env::temp_dir().join(format!(
        "corelb-keepalive-header-{}-{}",
        std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    std::fs::write(dir.join("f.txt"), "file").expect("file");
    let backend = Backend::start("b", Mode::Ok);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  upstream u {{ server {backend}; }}
  server {{
    listen {front};
    root {root};
    keepalive_timeout 1 9;
    location = /ret {{ return 200 "r"; }}
    location /f.txt {{ }}
    location /p {{ proxy_pass http://u; }}
    location /api {{ api; }}
    location /long {{ keepalive_timeout 3s; return 200 "long"; }}
    location /none {{ keepalive_timeout 3s 0; return 200 "none"; }}
    location /zero {{ keepalive_timeout 0; return 200 "zero"; }}
  }}
}}
"#,
        backend = backend.addr,
        root = dir.display(),
    );
    let config = corelb_engine::config::parse_str(&text, &dir.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);
    let get = |c: &mut Client, target: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        c.read_response().unwrap_or_else(|| panic!("no response to {target}"))
    };
    let r = get(&mut c, "/ret");
    let date = r.header("date").expect("a Date line");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        r.head,
        format!(
            "HTTP/1.1 200 OK\r\nServer: corelb/{version}\r\nDate: {date}\r\nContent-Type: text/plain\r\n\
             Content-Length: 1\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\n\r\n"
        )
    );
    for (target, status) in [
        ("/ret", 200),
        ("/f.txt", 200),
        ("/p", 200),
        ("/api/9/nginx", 200),
        ("/missing", 404),
        ("/long", 200),
    ] {
        let r = get(&mut c, target);
        assert_eq!(r.status, status, "{target}");
        assert!(r.head.contains(KEPT_9), "{target}: {}", r.head);
        assert_eq!(r.head.matches("Keep-Alive").count(), 1, "{target}: {}", r.head);
    }
    // after `/long` the wait is its 3 s, not the server's 1 s
    std::thread::sleep(Duration::from_millis(1500));
    let r = get(&mut c, "/none");
    assert_eq!(r.text(), "none");
    assert!(r.head.contains("\r\nConnection: keep-alive\r\n"), "{}", r.head);
    assert!(
        !r.head.contains("Keep-Alive"),
        "a second value of 0 sends none: {}",
        r.head
    );
    let r = get(&mut c, "/zero");
    assert!(r.head.contains("\r\nConnection: close\r\n"), "{}", r.head);
    assert!(!r.head.contains("Keep-Alive"), "{}", r.head);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_keepalive_header() {
    run::<Tokio>();
}

#[test]
fn glommio_keepalive_header() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
