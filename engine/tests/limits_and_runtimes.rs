//! Cross-shard limits, the glommio runtime, stream proxying and graceful drain, end to end on loopback.

mod support;

use corelb_engine::config::model::*;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::backend::{tcp_echo, Backend, Gate, Mode};
use support::*;

#[test]
fn max_conns_holds_across_two_shards_under_200_concurrent_requests() {
    // Both backends hold every request until the test opens their gate: the proxy's two shards fill the 4 + 4
    // connections that max_conns allows, answer every other request 502 at once, and the 8 held ones get 200 once
    // the gate opens.
    const CLIENTS: usize = 200;
    let gate = Arc::new(Gate::default());
    let held: Vec<Backend> = (0..2)
        .map(|i| Backend::start(&format!("s{i}"), Mode::Held(gate.clone())))
        .collect();
    let listen = free_addr();
    let lines = held
        .iter()
        .map(|b| ServerLine {
            max_conns: 4,
            ..server_line(b.addr)
        })
        .collect();
    let _p = Proxy::start::<Tokio>(
        http_config(
            listen,
            vec![upstream("u", lines)],
            vec![proxy_location("/", 0, HttpProxyConf::default())],
        ),
        2,
    );
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let answered = answered.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(listen);
                c.conn
                    .set_read_timeout(Some(Duration::from_secs(120)))
                    .expect("timeout");
                c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                let status = c.read_response().map_or(0, |r| r.status);
                answered.fetch_add(1, Ordering::SeqCst);
                status
            })
        })
        .collect();
    // Every request is either answered or held at a backend (bounded: a failing proxy fails the test here).
    let settled = wait_until(Duration::from_secs(60), || {
        answered.load(Ordering::SeqCst) + held.iter().map(Backend::active).sum::<usize>() == CLIENTS
    });
    let active: Vec<usize> = held.iter().map(Backend::active).collect();
    gate.open();
    assert!(settled, "requests neither answered nor held: {active:?}");
    assert_eq!(active, [4, 4], "the held requests fill max_conns on both peers");
    let statuses: Vec<u16> = clients.into_iter().map(|h| h.join().unwrap_or(0)).collect();
    let count = |want: u16| statuses.iter().filter(|&&s| s == want).count();
    assert_eq!((count(200), count(502)), (8, CLIENTS - 8), "{statuses:?}");
    for b in &held {
        assert_eq!(b.max_active(), 4, "max_conns 4 at {}", b.name);
        assert_eq!(b.requests(), 4, "{}", b.name);
    }
}

#[test]
fn glommio_runtime_proxies_when_io_uring_is_available() {
    if !support::glommio_usable() {
        return;
    }
    let a = Backend::start("a", Mode::Ok);
    let b = Backend::start("b", Mode::Ok);
    let listen = free_addr();
    let ups = vec![upstream("u", vec![server_line(a.addr), server_line(b.addr)])];
    let _p = Proxy::start::<Glommio>(
        http_config(listen, ups, vec![proxy_location("/", 0, keepalive_proxy())]),
        1,
    );
    let mut c = Client::connect(listen);
    let mut seen = String::new();
    for _ in 0..6 {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        seen.push_str(&c.read_response().expect("response").text());
    }
    assert_eq!(seen, "ababab");
    let mut c = Client::connect(listen);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Corelb-Panic: 1\r\n\r\n");
    assert!(c.read_response().is_none());
    assert_eq!(
        get(listen, "/").expect("the glommio shard survived the panic").status,
        200
    );
}

fn stream_config(listen: std::net::SocketAddr, servers: Vec<ServerLine>) -> Config {
    Config {
        stream: Some(StreamConf {
            upstreams: vec![upstream("tcp", servers)],
            health: Default::default(),
            maps: Vec::new(),
            limit_zones: Default::default(),
            block_logs: Vec::new(),
            xdp: Vec::new(),
            servers: vec![StreamServer {
                listens: vec![Listen {
                    addr: listen,
                    proxy_protocol: false,
                    default_server: false,
                    ssl: false,
                    udp: false,
                    http2: false,
                    socket: Default::default(),
                    span: Span::default(),
                }],
                server_names: Vec::new(),
                upstream: Some(0),
                pass: None,
                ret: None,
                access_log: Vec::new(),
                error_log: Vec::new(),
                connect_timeout: Duration::from_secs(2),
                timeout: Duration::from_secs(5),
                next_upstream: true,
                next_upstream_tries: 0,
                upload_rate: None,
                download_rate: None,
                udp_requests: 0,
                udp_responses: None,
                half_close: true,
                realip: None,
                access: None,
                limits: Default::default(),
                proxy_protocol: false,
                proxy_protocol_timeout: std::time::Duration::from_secs(30),
                ssl: Default::default(),
                span: Span::default(),
            }],
        }),
        ..Config::default()
    }
}

fn stream_round_trip(listen: std::net::SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(listen).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(payload).expect("write");
    s.shutdown(Shutdown::Write).expect("half-close");
    let mut back = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match support::read_retrying(&mut s, &mut buf).expect("read until the proxy half-closes") {
            0 => break,
            n => back.extend_from_slice(&buf[..n]),
        }
    }
    back
}

#[test]
fn stream_proxy_retries_a_dead_peer_and_passes_half_close() {
    let (echo, stats) = tcp_echo();
    for rt in 0..2 {
        // an address of its own per runtime: the drained proxy may still hold the last one
        let listen = free_addr();
        let config = stream_config(listen, vec![server_line(dead_addr()), server_line(echo)]);
        let p = if rt == 0 || !support::glommio_usable() {
            Proxy::start::<Tokio>(config, 1)
        } else {
            Proxy::start::<Glommio>(config, 1)
        };
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        for _ in 0..3 {
            assert!(stream_round_trip(listen, &payload) == payload);
        }
        drop(p);
    }
    assert_eq!(stats.accepts.load(std::sync::atomic::Ordering::Relaxed), 6);
}

#[test]
fn graceful_drain_finishes_in_flight_requests() {
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(400)));
    let listen = free_addr();
    let p = Proxy::tokio(http_config(
        listen,
        vec![upstream("u", vec![server_line(slow.addr)])],
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    let in_flight = std::thread::spawn(move || get(listen, "/").map(|r| r.text()));
    // drain once the request is at the backend (in flight), not after a guessed delay
    assert!(
        wait_until(Duration::from_secs(30), || slow.requests() == 1),
        "the request never reached the backend"
    );
    p.shared.drain();
    assert_eq!(in_flight.join().ok().flatten().as_deref(), Some("slow"));
    assert!(
        wait_until(Duration::from_secs(30), || TcpStream::connect(listen).is_err()),
        "still accepting after the drain"
    );
}

#[test]
fn worker_connections_caps_open_connections_per_shard() {
    let listen = free_addr();
    let mut config = http_config(
        listen,
        vec![],
        vec![support::return_location(
            LocationMatch::Prefix("/".into()),
            200,
            Some("hi"),
        )],
    );
    config.main.worker_connections = 2;
    let _p = Proxy::tokio(config);
    let idle1 = Client::connect(listen);
    let _idle2 = Client::connect(listen);
    std::thread::sleep(Duration::from_millis(100));
    let mut third = Client::connect(listen);
    third
        .conn
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    third.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        third.read_response().is_none(),
        "not accepted while two connections are open"
    );
    drop(idle1);
    third
        .conn
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_eq!(third.read_response().expect("served once a slot is free").text(), "hi");
}

/// `proxy_half_close`: off (nginx's default), the session ends when the client ends its stream, so what the
/// backend writes after seeing that end never reaches the client; on, the end goes on as a half-close and the
/// backend's late answer comes back.
#[test]
fn stream_half_close_off_ends_the_session_on_either_end() {
    use std::io::Read;
    let backend = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = backend.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in backend.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                // read until the client's end arrives (or the proxy closes), then answer late
                while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
                let _ = conn.write_all(b"late");
            });
        }
    });
    for (half_close, want) in [(false, &b""[..]), (true, &b"late"[..])] {
        let listen = free_addr();
        let mut config = stream_config(listen, vec![server_line(addr)]);
        if let Some(s) = config.stream.as_mut().and_then(|s| s.servers.first_mut()) {
            s.half_close = half_close;
        }
        let _p = Proxy::start::<Tokio>(config, 1);
        assert_eq!(stream_round_trip(listen, b"x"), want, "proxy_half_close {half_close}");
    }
}
