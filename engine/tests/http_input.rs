//! Bad input, panics and bodies: what reaches the backend and what the client gets.

mod support;

use corelb_engine::config::model::*;
use support::backend::{Backend, Mode};
use support::*;

fn echo_proxy() -> (Backend, std::net::SocketAddr, Proxy) {
    let echo = Backend::start("echo", Mode::Echo);
    let listen = free_addr();
    let proxy = keepalive_proxy();
    let p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", vec![server_line(echo.addr)])],
        vec![proxy_location("/", 0, proxy)],
    ));
    (echo, listen, p)
}

fn expect_400_and_close(listen: std::net::SocketAddr, raw: &[u8]) {
    let mut c = Client::connect(listen);
    c.send(raw);
    let r = c.read_response().expect("an answer");
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
    assert_eq!(r.header("connection").as_deref(), Some("close"));
    assert!(c.closed());
}

#[test]
fn bad_requests_get_400_and_never_reach_the_backend() {
    let (echo, listen, _p) = echo_proxy();
    expect_400_and_close(listen, b"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n");
    expect_400_and_close(listen, b"GET / HTTP/1.1\r\nHost a\r\n\r\n");
    expect_400_and_close(listen, b"GET / HTTP/1.1\r\n\r\n");
    expect_400_and_close(
        listen,
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    expect_400_and_close(
        listen,
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    );
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'x', 20_000));
    big.extend_from_slice(b"\r\n\r\n");
    expect_400_and_close(listen, &big);
    assert_eq!(echo.requests(), 0);
    // and the proxy still serves
    assert_eq!(get(listen, "/").expect("response").status, 200);
}

#[test]
fn bodies_stream_both_ways_in_both_framings() {
    let (echo, listen, _p) = echo_proxy();
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut c = Client::connect(listen);
    let mut req = format!("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    req.extend_from_slice(&body);
    c.send(&req);
    let r = c.read_response().expect("response");
    assert_eq!((r.status, r.body.len()), (200, body.len()));
    assert!(r.body == body);
    // chunked request body, chunked answer, same connection
    let mut req = b"POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in body.chunks(7000) {
        req.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        req.extend_from_slice(piece);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    c.send(&req);
    let r = c.read_response().expect("response");
    assert_eq!(r.header("transfer-encoding").as_deref(), Some("chunked"));
    assert!(r.body == body);
    // an HTTP/1.0 client gets the chunked answer de-chunked, and the connection closes
    let mut c = Client::connect(listen);
    c.send(b"POST /chunked HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    let r = c.read_response().expect("response");
    assert_eq!(
        (r.text().as_str(), r.header("connection").as_deref()),
        ("hello", Some("close"))
    );
    assert!(r.header("transfer-encoding").is_none());
    assert_eq!(echo.requests(), 3);
}

#[test]
fn client_gone_mid_body_disturbs_nothing() {
    let (echo, listen, _p) = echo_proxy();
    {
        let mut c = Client::connect(listen);
        c.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nonly-a-little");
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(get(listen, "/").expect("response").status, 200);
    assert_eq!(
        echo.requests(),
        1,
        "the truncated request never completed at the backend"
    );
}

#[test]
fn a_panicking_request_leaves_the_shard_serving() {
    let (echo, listen, _p) = echo_proxy();
    let mut idle = Client::connect(listen);
    idle.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(idle.read_response().expect("response").status, 200);
    let mut c = Client::connect(listen);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\nX-Corelb-Panic: 1\r\n\r\n");
    assert!(c.read_response().is_none(), "the panicking connection is closed");
    // the same (only) shard still accepts, and its other connections still work
    assert_eq!(get(listen, "/").expect("response").status, 200);
    idle.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(idle.read_response().expect("response").status, 200);
    assert_eq!(echo.requests(), 3);
}

#[test]
fn upstream_keepalive_reuses_and_survives_closed_connections() {
    let ka = Backend::start("ka", Mode::Ok);
    let closer = Backend::start("closer", Mode::CloseAfter);
    let listen = free_addr();
    let mut u1 = upstream("ka", vec![server_line(ka.addr)]);
    u1.keepalive = Some(4);
    let mut u2 = upstream("closer", vec![server_line(closer.addr)]);
    u2.keepalive = Some(4);
    let _p = Proxy::tokio(http_config(
        listen,
        vec![u1, u2],
        vec![
            proxy_location("/", 0, keepalive_proxy()),
            proxy_location("/c", 1, keepalive_proxy()),
        ],
    ));
    for _ in 0..10 {
        assert_eq!(get(listen, "/").expect("response").text(), "ka");
    }
    assert_eq!(
        (ka.accepts(), ka.requests()),
        (1, 10),
        "one upstream connection for ten requests"
    );
    assert!(!ka.last_head().to_ascii_lowercase().contains("connection:"));
    for _ in 0..5 {
        let r = get(listen, "/c").expect("response");
        assert_eq!((r.status, r.text().as_str()), (200, "closer"));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(closer.requests(), 5);
}

#[test]
fn fixed_answers_and_location_matching() {
    let listen = free_addr();
    let locs = vec![
        return_location(LocationMatch::Prefix("/".into()), 200, Some("root")),
        return_location(LocationMatch::Prefix("/a/".into()), 200, Some("prefix a")),
        return_location(LocationMatch::Prefix("/a/b/".into()), 200, Some("prefix ab")),
        return_location(LocationMatch::Exact("/a/b/".into()), 200, Some("exact")),
        return_location(LocationMatch::Prefix("/gone".into()), 404, None),
        return_location(LocationMatch::Prefix("/moved".into()), 301, Some("http://example.com/")),
    ];
    let _p = Proxy::tokio(http_config(listen, vec![], locs));
    let text = |path: &str| get(listen, path).expect("response").text();
    assert_eq!(text("/x"), "root");
    assert_eq!(text("/a/x"), "prefix a");
    assert_eq!(text("/a/b/c"), "prefix ab");
    assert_eq!(text("/a/b/"), "exact");
    let r = get(listen, "/gone").expect("response");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<title>404 Not Found</title>"));
    let r = get(listen, "/moved").expect("response");
    assert_eq!(
        (r.status, r.header("location").as_deref()),
        (301, Some("http://example.com/"))
    );
}

#[test]
fn a_bad_chunk_in_a_streamed_body_is_a_400() {
    let (_echo, listen, _p) = echo_proxy();
    let mut c = Client::connect(listen);
    c.send(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
    std::thread::sleep(std::time::Duration::from_millis(100));
    c.send(b"zz\r\n");
    let r = c.read_response().expect("an answer");
    assert_eq!((r.status, r.header("connection").as_deref()), (400, Some("close")));
    assert!(c.closed());
    assert_eq!(get(listen, "/").expect("response").status, 200);
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let (echo, listen, _p) = echo_proxy();
    let mut c = Client::connect(listen);
    c.send(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    let mut interim = [0u8; 25];
    std::io::Read::read_exact(&mut c.conn, &mut interim).expect("interim answer");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(b"hello");
    assert_eq!(c.read_response().expect("response").text(), "hello");
    assert!(
        !echo.last_head().to_ascii_lowercase().contains("expect"),
        "Expect is not passed upstream"
    );
}

#[test]
fn chunked_bodies_over_client_max_body_size_get_413() {
    let echo = Backend::start("echo", Mode::Echo);
    let listen = free_addr();
    let mut loc = proxy_location("/", 0, keepalive_proxy());
    loc.client.client_max_body_size = 1000;
    let _p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", vec![server_line(echo.addr)])],
        vec![loc],
    ));
    let chunk = |n: usize| {
        let mut c = format!("{n:x}\r\n").into_bytes();
        c.extend(std::iter::repeat_n(b'x', n));
        c.extend_from_slice(b"\r\n");
        c
    };
    // whole body in the first read: refused before any upstream is contacted
    let mut c = Client::connect(listen);
    let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend(chunk(600));
    req.extend(chunk(600));
    req.extend_from_slice(b"0\r\n\r\n");
    c.send(&req);
    assert_eq!(c.read_response().expect("answer").status, 413);
    assert_eq!(echo.requests(), 0);
    // streamed: refused once the limit is passed
    let mut c = Client::connect(listen);
    let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend(chunk(600));
    c.send(&req);
    std::thread::sleep(std::time::Duration::from_millis(100));
    c.send(&chunk(600));
    assert_eq!(c.read_response().expect("answer").status, 413);
    assert!(c.closed());
    // within the limit: passes
    let mut c = Client::connect(listen);
    let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend(chunk(900));
    req.extend_from_slice(b"0\r\n\r\n");
    c.send(&req);
    assert_eq!(c.read_response().expect("answer").body.len(), 900);
}
