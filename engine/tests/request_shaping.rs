//! What goes upstream and whether the client connection stays, as the location says: `proxy_pass_request_headers`,
//! `proxy_pass_request_body`, `proxy_set_body`, `keepalive_time`, `keepalive_disable`, upstream `keepalive_time`;
//! through a running proxy on both runtimes, with a recording backend.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use support::recorder::Recorder;
use support::{free_addr, glommio_usable, Client, Proxy};

fn config(front: SocketAddr, backend: SocketAddr) -> corelb_engine::config::model::Config {
    let text = format!(
        r#"events {{}}
http {{
    upstream u {{ server {backend}; keepalive 4; }}
    upstream once {{ server {backend}; keepalive 4; keepalive_time 0; }}
    server {{
        listen {front};
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_pass_request_headers off;
        location /headers {{ proxy_pass http://u; proxy_pass_request_headers on; }}
        location /noheaders {{ proxy_pass http://u; }}
        location /nobody {{
            proxy_pass http://u;
            proxy_pass_request_headers on;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
        }}
        location /setbody {{ proxy_pass http://u; proxy_set_body "m=$request_method"; }}
        location /old {{ proxy_pass http://u; keepalive_time 0; }}
        location /safari {{ proxy_pass http://u; keepalive_disable safari; }}
        location /none {{ proxy_pass http://u; keepalive_disable none; }}
        location /once {{ proxy_pass http://once; }}
    }}
}}
"#
    );
    let path = std::env::temp_dir().join("corelb-request-shaping.conf");
    corelb_engine::config::parse_str(&text, &path).unwrap_or_else(|e| panic!("{e}"))
}

/// Sends `raw` on `c` and returns the `Connection` header of the answer (which must be a 200).
fn connection_of(c: &mut Client, raw: &str) -> String {
    c.send(raw.as_bytes());
    let r = c.read_response().unwrap_or_else(|| panic!("no answer to {raw:?}"));
    assert_eq!(r.status, 200, "{raw:?}");
    r.header("connection").unwrap_or_default()
}

fn shaping<R: Runtime>() {
    let rec = Recorder::start();
    let front = free_addr();
    let _proxy = Proxy::start::<R>(config(front, rec.addr), 1);
    let mut c = Client::connect(front);
    let post = |path: &str| format!("POST {path} HTTP/1.1\r\nHost: a\r\nX-Client: 1\r\nContent-Length: 5\r\n\r\nhello");
    for path in ["/headers", "/noheaders", "/nobody", "/setbody"] {
        assert_eq!(connection_of(&mut c, &post(path)), "keep-alive", "{path}");
    }
    let seen = rec.requests();
    let heads: Vec<&str> = seen.iter().map(|s| s.head.as_str()).collect();
    assert_eq!(seen.len(), 4, "{heads:?}");
    assert!(heads[0].contains("X-Client: 1\r\n"), "{}", heads[0]);
    assert_eq!(seen[0].body, b"hello");
    assert!(!heads[1].contains("X-Client"), "server-level off: {}", heads[1]);
    assert_eq!(seen[1].body, b"hello", "the body still goes");
    assert!(
        heads[2].contains("X-Client: 1\r\n") && !heads[2].contains("Content-Length"),
        "{}",
        heads[2]
    );
    assert_eq!(
        seen[2].body, b"",
        "body dropped, the client's next request still read right"
    );
    assert!(heads[3].contains("Content-Length: 6\r\n"), "{}", heads[3]);
    assert_eq!(seen[3].body, b"m=POST");

    let get = |path: &str, ua: &str| format!("GET {path} HTTP/1.1\r\nHost: a\r\nUser-Agent: {ua}\r\n\r\n");
    let safari = "Mac OS X Safari/7534.48.3";
    assert_eq!(connection_of(&mut c, &get("/headers", safari)), "keep-alive");
    assert_eq!(connection_of(&mut c, &get("/old", "x")), "close", "keepalive_time 0");
    let mut c = Client::connect(front);
    assert_eq!(connection_of(&mut c, &get("/safari", safari)), "close");
    let mut c = Client::connect(front);
    let msie_post = "POST /headers HTTP/1.1\r\nHost: a\r\nUser-Agent: MSIE 5.0\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        connection_of(&mut c, msie_post),
        "close",
        "keepalive_disable msie6 by default"
    );
    let mut c = Client::connect(front);
    let msie_post_none = msie_post.replace("/headers", "/none");
    assert_eq!(connection_of(&mut c, &msie_post_none), "keep-alive");

    // `keepalive_time 0` in the upstream: no connection goes back to the cache
    let accepts = rec.record.accepts.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(connection_of(&mut c, &get("/once", "x")), "keep-alive");
    }
    let after = rec.record.accepts.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(after - accepts, 3, "a fresh upstream connection for each request");
    let before = after;
    for _ in 0..3 {
        assert_eq!(connection_of(&mut c, &get("/headers", "x")), "keep-alive");
    }
    let reused = rec.record.accepts.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(reused <= 1, "upstream u keeps its connections: {reused} new");
}

#[test]
fn tokio_shapes_requests_and_keepalive_as_the_location_says() {
    shaping::<Tokio>();
}

#[test]
fn glommio_shapes_requests_and_keepalive_as_the_location_says() {
    if glommio_usable() {
        shaping::<Glommio>();
    }
}
