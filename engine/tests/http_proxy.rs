//! End-to-end HTTP proxy tests on loopback: real sockets, Rust backends, the tokio runtime.

mod support;

use corelb_engine::config::model::*;
use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::*;

#[test]
fn proxies_round_robin_with_nginx_default_headers() {
    let a = Backend::start("a", Mode::Ok);
    let b = Backend::start("b", Mode::Ok);
    let listen = free_addr();
    let ups = vec![upstream("backend", vec![server_line(a.addr), server_line(b.addr)])];
    let _p = Proxy::tokio(http_config(
        listen,
        ups,
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    let mut c = Client::connect(listen);
    let mut names = Vec::new();
    for _ in 0..4 {
        c.send(b"GET /x?y=1 HTTP/1.1\r\nHost: front\r\nX-Client: 1\r\nKeep-Alive: 300\r\n\r\n");
        let r = c.read_response().expect("response");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("connection").as_deref(), Some("keep-alive"));
        // nginx's default `server_tokens on`: the name and version
        assert_eq!(
            r.header("server"),
            Some(format!("corelb/{}", env!("CARGO_PKG_VERSION")))
        );
        names.push(r.text());
    }
    assert_eq!(names, ["a", "b", "a", "b"]);
    let head = a.last_head();
    assert!(head.starts_with("GET /x?y=1 HTTP/1.0\r\n"), "{head}");
    assert!(
        head.contains("Host: backend\r\n") && head.contains("Connection: close\r\n"),
        "{head}"
    );
    assert!(
        head.contains("X-Client: 1\r\n") && !head.contains("Keep-Alive"),
        "{head}"
    );
    assert!(!head.to_ascii_lowercase().contains("x-forwarded-for"), "{head}");
}

#[test]
fn weighted_sequence_matches_nginx() {
    let backends: Vec<Backend> = ["a", "b", "c"].iter().map(|n| Backend::start(n, Mode::Ok)).collect();
    let mut lines: Vec<ServerLine> = backends.iter().map(|b| server_line(b.addr)).collect();
    lines[0].weight = 5;
    let listen = free_addr();
    let _p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", lines)],
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    let seq: String = (0..14).map(|_| get(listen, "/").expect("response").text()).collect();
    assert_eq!(seq, "aabacaaaabacaa");
}

#[test]
fn dead_peer_is_retried_and_then_skipped() {
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let ups = vec![upstream("u", vec![server_line(dead_addr()), server_line(ok.addr)])];
    let _p = Proxy::tokio(http_config(
        listen,
        ups,
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    for _ in 0..5 {
        assert_eq!(get(listen, "/").expect("response").text(), "ok");
    }
    assert_eq!(ok.requests(), 5);
}

#[test]
fn tries_limit_and_502_page() {
    let resets: Vec<Backend> = (0..3).map(|i| Backend::start(&format!("r{i}"), Mode::Reset)).collect();
    let listen = free_addr();
    let lines = resets.iter().map(|b| server_line(b.addr)).collect();
    let proxy = HttpProxyConf {
        next_upstream_tries: 2,
        ..HttpProxyConf::default()
    };
    let _p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", lines)],
        vec![proxy_location("/", 0, proxy)],
    ));
    let r = get(listen, "/").expect("response");
    assert_eq!(r.status, 502);
    assert_eq!(
        r.text(),
        format!(
            "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>corelb/{}</center>\r\n</body>\r\n</html>\r\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let accepts: usize = resets.iter().map(Backend::accepts).sum();
    assert_eq!(accepts, 2, "proxy_next_upstream_tries 2");
    // every peer has failed once now (max_fails 1): the third is tried by the next request, then none is left
    assert_eq!(get(listen, "/").expect("response").status, 502);
    assert_eq!(resets.iter().map(Backend::accepts).sum::<usize>(), 3);
    assert_eq!(get(listen, "/").expect("response").status, 502);
    assert_eq!(
        resets.iter().map(Backend::accepts).sum::<usize>(),
        3,
        "no live upstreams: nothing tried"
    );
}

#[test]
fn status_retry_passes_the_last_answer_through() {
    let a = Backend::start("A", Mode::Status(502));
    let b = Backend::start("B", Mode::Status(502));
    let listen = free_addr();
    let proxy = HttpProxyConf {
        next_upstream: NextUpstream {
            http_502: true,
            ..NextUpstream::default()
        },
        ..HttpProxyConf::default()
    };
    let ups = vec![upstream("u", vec![server_line(a.addr), server_line(b.addr)])];
    let _p = Proxy::tokio(http_config(listen, ups, vec![proxy_location("/", 0, proxy)]));
    // docs/algorithms.md §12: "A,B" -> "B, upstream-name" -> "upstream-name"
    let r = get(listen, "/").expect("response");
    assert_eq!((r.status, r.text().as_str()), (502, "B"));
    assert_eq!((a.requests(), b.requests()), (1, 1));
    let r = get(listen, "/").expect("response");
    assert_eq!(r.status, 502);
    assert!(
        r.text()
            .contains(concat!("<center>corelb/", env!("CARGO_PKG_VERSION"), "</center>")),
        "no live upstream: our page"
    );
    assert_eq!((a.requests(), b.requests()), (1, 2));
}

#[test]
fn post_is_not_retried_once_sent() {
    let r = Backend::start("r", Mode::Hangup);
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let ups = vec![upstream("u", vec![server_line(r.addr), server_line(ok.addr)])];
    let _p = Proxy::tokio(http_config(
        listen,
        ups,
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    let mut c = Client::connect(listen);
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    let resp = c.read_response().expect("response");
    assert_eq!(resp.status, 502, "{resp:?}");
    assert_eq!((r.requests(), ok.requests()), (1, 0));
    // a GET after the failure goes to the other peer
    assert_eq!(get(listen, "/").expect("response").text(), "ok");
}

#[test]
fn read_timeout_is_504() {
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(1500)));
    let listen = free_addr();
    let proxy = HttpProxyConf {
        read_timeout: Duration::from_millis(200),
        ..HttpProxyConf::default()
    };
    let _p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", vec![server_line(slow.addr)])],
        vec![proxy_location("/", 0, proxy)],
    ));
    let r = get(listen, "/").expect("response");
    assert_eq!(r.status, 504);
    assert!(r.text().contains("504 Gateway Time-out"));
}

#[test]
fn next_upstream_timeout_and_off_stop_the_retries() {
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(800)));
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let proxy = HttpProxyConf {
        read_timeout: Duration::from_millis(200),
        next_upstream_timeout: Duration::from_millis(100),
        ..HttpProxyConf::default()
    };
    let ups = vec![upstream("u", vec![server_line(slow.addr), server_line(ok.addr)])];
    let _p = Proxy::tokio(http_config(listen, ups, vec![proxy_location("/", 0, proxy)]));
    assert_eq!(get(listen, "/").expect("response").status, 504);
    assert_eq!(ok.requests(), 0, "proxy_next_upstream_timeout elapsed: no second try");

    let dead = dead_addr();
    let ok2 = Backend::start("ok2", Mode::Ok);
    let listen = free_addr();
    let proxy = HttpProxyConf {
        next_upstream: NextUpstream::OFF,
        ..HttpProxyConf::default()
    };
    let ups = vec![upstream("u", vec![server_line(dead), server_line(ok2.addr)])];
    let _p = Proxy::tokio(http_config(listen, ups, vec![proxy_location("/", 0, proxy)]));
    assert_eq!(
        get(listen, "/").expect("response").status,
        502,
        "off: the error is final"
    );
    // the failure still counted (max_fails 1): the dead peer is skipped now
    assert_eq!(get(listen, "/").expect("response").text(), "ok2");
    assert_eq!(get(listen, "/").expect("response").text(), "ok2");
}

#[test]
fn a_dead_address_refuses_connections_and_no_listener_can_take_it() {
    let dead = dead_addr();
    let kind = |r: std::io::Result<()>| r.map_err(|e| e.kind());
    assert_eq!(
        kind(TcpStream::connect(dead).map(drop)),
        Err(ErrorKind::ConnectionRefused)
    );
    // A std listener (SO_REUSEADDR, as the test backends bind) and a shard's listener (SO_REUSEADDR and
    // SO_REUSEPORT) are both refused the port.
    assert_eq!(kind(TcpListener::bind(dead).map(drop)), Err(ErrorKind::AddrInUse));
    let shard_like = || -> std::io::Result<()> {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.bind(&dead.into())?;
        s.listen(16)
    };
    assert_eq!(kind(shard_like()), Err(ErrorKind::AddrInUse));
    assert_ne!(dead_addr(), dead, "each call holds a port of its own");
    assert_eq!(
        kind(TcpStream::connect(dead).map(drop)),
        Err(ErrorKind::ConnectionRefused),
        "still dead"
    );
}

#[test]
fn a_free_address_takes_a_proxy_s_listeners_and_no_other_socket() {
    let free = free_addr();
    let kind = |r: std::io::Result<()>| r.map_err(|e| e.kind());
    // a socket with neither SO_REUSEADDR nor SO_REUSEPORT is refused the port
    let plain = || -> std::io::Result<()> {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        s.set_reuse_address(false)?;
        s.bind(&free.into())
    };
    assert_eq!(kind(plain()), Err(ErrorKind::AddrInUse));
    // the socket the shards share (SO_REUSEADDR) binds beside the holder, and so does a shard's own (`reuseport`)
    let shared = corelb_engine::runtime::shared_listen::SharedListeners::default();
    let dup = shared
        .duplicate(free, Default::default())
        .expect("the shared socket binds beside the holder");
    assert_eq!(dup.local_addr().ok(), Some(free));
    drop(dup);
    shared.close_all();
    let shard = corelb_engine::runtime::tokio_rt::reuseport_socket(free, 16).expect("a shard binds beside the holder");
    assert_eq!(shard.local_addr().ok(), Some(free));
    drop(shard);
    assert_eq!(
        kind(TcpStream::connect(free).map(drop)),
        Err(ErrorKind::ConnectionRefused),
        "the holder does not listen"
    );
}
