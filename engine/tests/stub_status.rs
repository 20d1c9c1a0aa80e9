//! `stub_status` end to end, on both runtimes and two shards: the exact page after a known sequence of
//! connections and requests (as nginx-tests' stub_status.t steps through them: the status request itself is
//! "writing", an idle connection "waiting", a half-sent head "reading", a request at the upstream "writing"),
//! pipelined requests, HEAD, and nginx's 405 for other methods.

mod support;

use corelb_engine::admin::stub_status::StubCounts;
use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::backend::{Backend, Gate, Mode};
use support::{free_addr, glommio_usable, wait_until, Client, Proxy};

fn page(active: u64, accepts: u64, requests: u64, rww: [u64; 3]) -> String {
    let [r, w, k] = rww;
    format!(
        "Active connections: {active} \nserver accepts handled requests\n {accepts} {accepts} {requests} \n\
         Reading: {r} Writing: {w} Waiting: {k} \n"
    )
}

/// The status page over a fresh connection, once the counters read `settled` (connections of earlier steps end
/// on their shard a moment after the client saw their last byte).
fn status(listen: SocketAddr, p: &Proxy, settled: impl Fn(&StubCounts) -> bool) -> String {
    let ok = wait_until(Duration::from_secs(5), || settled(&StubCounts::take(&p.shared)));
    assert!(ok, "counters never settled: {:?}", StubCounts::take(&p.shared));
    let resp = support::get(listen, "/stub").expect("a status answer");
    assert_eq!(resp.status, 200, "{}", resp.head);
    assert_eq!(resp.header("content-type").as_deref(), Some("text/plain"));
    resp.text()
}

fn counts_as_nginx<R: Runtime>() {
    let gate = Arc::new(Gate::default());
    let ok = Backend::start("ok", Mode::Ok);
    let held = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let listen = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            upstream held {{ server {held}; }}
            server {{
                listen {listen};
                location / {{ proxy_pass http://ok; }}
                location /held {{ proxy_pass http://held; }}
                location /stub {{ stub_status; }}
            }}
        }}",
        ok = ok.addr,
        held = held.addr,
    );
    let config = parse_str(&text, Path::new("/etc/corelb/stub.conf")).expect("config");
    let p = Proxy::start::<R>(config, 2);
    let idle = |c: &StubCounts| c.active == 0;

    // The first request: its own connection, "writing" while it is answered.
    assert_eq!(status(listen, &p, idle), page(1, 1, 1, [0, 1, 0]));

    // Two pipelined requests on one connection: 2 requests, 1 connection.
    let mut c = Client::connect(listen);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    for _ in 0..2 {
        assert_eq!(c.read_response().map(|r| r.status), Some(200));
    }
    assert!(c.closed());
    assert_eq!(status(listen, &p, idle), page(1, 3, 4, [0, 1, 0]));

    // An idle connection waits.
    let mut s = Client::connect(listen);
    let page_now = status(listen, &p, |c| c.active == 1 && c.waiting == 1);
    assert_eq!(page_now, page(2, 5, 5, [0, 1, 1]));

    // Half a head: reading (its request has begun).
    s.send(b"GET /held HTTP/1.1\r\n");
    let page_now = status(listen, &p, |c| c.reading == 1 && c.active == 1);
    assert_eq!(page_now, page(2, 6, 7, [1, 1, 0]));

    // The whole head, the request held at the upstream: writing.
    s.send(b"Host: a\r\n\r\n");
    let page_now = status(listen, &p, |c| c.writing == 1 && c.active == 1 && held.requests() == 1);
    assert_eq!(page_now, page(2, 7, 8, [0, 2, 0]));

    // Answered and kept alive: waiting again.
    gate.open();
    assert_eq!(s.read_response().map(|r| r.status), Some(200));
    let page_now = status(listen, &p, |c| c.waiting == 1 && c.active == 1);
    assert_eq!(page_now, page(2, 8, 9, [0, 1, 1]));
    drop(s);

    // HEAD: the head of the page, no body; another method: nginx's 405 page.
    let mut h = Client::connect(listen);
    h.send(b"HEAD /stub HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    let _ = h.conn.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a whole head");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let len = page(2, 9, 10, [0, 1, 0]).len();
    assert!(head.contains(&format!("\r\nContent-Length: {len}\r\n")), "{head}");
    assert_eq!(body, "");
    let mut pc = Client::connect(listen);
    pc.send(b"POST /stub HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab");
    let post = pc.read_response().expect("POST answer");
    drop(pc);
    assert_eq!(post.status, 405);
    assert_eq!(post.header("content-type").as_deref(), Some("text/html"));
    assert_eq!(
        post.text(),
        format!(
            "<html>\r\n<head><title>405 Not Allowed</title></head>\r\n<body>\r\n<center><h1>405 Not Allowed</h1>\
             </center>\r\n<hr><center>corelb/{}</center>\r\n</body>\r\n</html>\r\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(status(listen, &p, idle), page(1, 11, 12, [0, 1, 0]));
}

#[test]
fn counts_as_nginx_tokio() {
    counts_as_nginx::<Tokio>();
}

#[test]
fn counts_as_nginx_glommio() {
    if glommio_usable() {
        counts_as_nginx::<Glommio>();
    }
}

/// `stub_status` in the config: nginx's arguments check, a second line taken as nginx takes it, and the server
/// context (nginx's handler for requests no location matches) refused by name.
#[test]
fn stub_status_in_the_config() {
    let conf = |body: &str| format!("events {{}}\nhttp {{\n server {{ listen 127.0.0.1:18290; {body} }}\n}}\n");
    let parse = |body: &str| parse_str(&conf(body), Path::new("/etc/corelb/stub.conf")).map_err(|e| e.to_string());
    assert!(parse("location /s { stub_status; stub_status on; }").is_ok());
    assert_eq!(
        parse("location /s { stub_status a b; }").unwrap_err(),
        "[emerg] invalid number of arguments in \"stub_status\" directive in /etc/corelb/stub.conf:3"
    );
    assert_eq!(
        parse("stub_status;").unwrap_err(),
        "[emerg] \"stub_status\" directive is not supported by corelb in /etc/corelb/stub.conf:3"
    );
    assert_eq!(
        parse("location /s { api; stub_status; }").unwrap_err(),
        "[emerg] \"stub_status\" directive is duplicate in /etc/corelb/stub.conf:3"
    );
}
