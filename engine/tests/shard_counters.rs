//! The per-shard counters in the zone: every kind of bad input, client aborts, 502/504 answers, connections.

mod support;

use corelb_engine::config::model::HttpProxyConf;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::Runtime;
use corelb_shared_state::ShardStats;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::backend::{Backend, Mode};
use support::*;

/// One shard proxying `/` to an echo backend, `/slow` to a backend slower than the read timeout and `/dead` to a
/// peer that refuses connections.
fn counted_proxy<R: Runtime>() -> (Vec<Backend>, SocketAddr, Proxy) {
    let echo = Backend::start("echo", Mode::Echo);
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(1500)));
    let listen = free_addr();
    let timed = HttpProxyConf {
        read_timeout: Duration::from_millis(200),
        ..keepalive_proxy()
    };
    let slow_loc = proxy_location("/slow", 1, timed);
    let config = http_config(
        listen,
        vec![
            upstream("echo", vec![server_line(echo.addr)]),
            upstream("slow", vec![server_line(slow.addr)]),
            upstream("dead", vec![server_line(dead_addr())]),
        ],
        vec![
            proxy_location("/", 0, keepalive_proxy()),
            slow_loc,
            proxy_location("/dead", 2, keepalive_proxy()),
        ],
    );
    (vec![echo, slow], listen, Proxy::start::<R>(config, 1))
}

fn stats(p: &Proxy) -> ShardStats {
    let all = p.shared.zone.shard_stats();
    assert_eq!(all.len(), 1, "one shard, one slot");
    all[0]
}

/// Waits (at most 5 s) until the shard's counters satisfy `done`, and returns them.
fn wait_for(p: &Proxy, done: impl Fn(&ShardStats) -> bool) -> ShardStats {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let s = stats(p);
        if done(&s) || Instant::now() > end {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn status_of(listen: SocketAddr, raw: &[u8]) -> u16 {
    let mut c = Client::connect(listen);
    c.send(raw);
    c.read_response().map_or(0, |r| r.status)
}

fn every_kind_is_counted<R: Runtime>() {
    let (_backends, listen, p) = counted_proxy::<R>();
    let bad: Vec<Vec<u8>> =
        vec![
        b"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost a\r\n\r\n".to_vec(),
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            .to_vec(),
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n".to_vec(),
        [&b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: "[..], &[b'x'; 20_000], b"\r\n\r\n"].concat(),
    ];
    for raw in &bad {
        assert_eq!(status_of(listen, raw), 400, "{}", String::from_utf8_lossy(&raw[..40]));
    }
    let s = stats(&p);
    // Only the bad chunk size came with a good head (routed, then refused); the other four heads were refused.
    assert_eq!((s.bad_requests, s.requests), (5, 1), "{s:?}");

    // A bad chunk size in a body that is streamed (it arrives after the head was routed).
    let mut c = Client::connect(listen);
    c.send(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"zz\r\n");
    assert_eq!(c.read_response().map(|r| r.status), Some(400));
    let s = stats(&p);
    assert_eq!((s.bad_requests, s.requests), (6, 2), "{s:?}");

    // Clients gone mid-body and mid-head.
    {
        let mut c = Client::connect(listen);
        c.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nonly-a-little");
    }
    {
        let mut c = Client::connect(listen);
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\nX-Half: ");
    }
    let s = wait_for(&p, |s| s.client_aborts >= 2);
    assert_eq!((s.client_aborts, s.requests), (2, 3), "{s:?}");

    // 502 from a dead peer, 504 from a slow one, and a good request.
    assert_eq!(get(listen, "/dead").map(|r| r.status), Some(502));
    assert_eq!(get(listen, "/slow").map(|r| r.status), Some(504));
    assert_eq!(get(listen, "/").map(|r| r.status), Some(200));
    let s = wait_for(&p, |s| s.active == 0);
    let want = ShardStats {
        accepted: 11,
        active: 0,
        requests: 6,
        bad_requests: 6,
        client_aborts: 2,
        bad_gateway: 1,
        gateway_timeout: 1,
        // the event-loop lag is timing, not traffic: only its consistency is checked
        loop_lag_us: s.loop_lag_us,
        loop_lag_max_us: s.loop_lag_max_us,
        // nginx's count: every connection sent (some of) one request, refused heads and halves included; and every
        // connection has closed, so none is waiting, reading or writing
        http_requests: 11,
        ..ShardStats::default()
    };
    assert_eq!(s, want);
    assert!(s.loop_lag_max_us >= s.loop_lag_us, "{s:?}");
}

#[test]
fn tokio_shard_counts_bad_input_aborts_and_error_answers() {
    every_kind_is_counted::<corelb_engine::runtime::tokio_rt::Tokio>();
}

#[test]
fn glommio_shard_counts_bad_input_aborts_and_error_answers() {
    if glommio_usable() {
        every_kind_is_counted::<Glommio>();
    }
}

#[test]
fn open_connections_are_counted_while_open() {
    let (_backends, listen, p) = counted_proxy::<corelb_engine::runtime::tokio_rt::Tokio>();
    let mut clients: Vec<Client> = (0..3).map(|_| Client::connect(listen)).collect();
    for c in &mut clients {
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(c.read_response().map(|r| r.status), Some(200));
    }
    let s = stats(&p);
    assert_eq!((s.accepted, s.active, s.requests), (3, 3, 3), "{s:?}");
    drop(clients);
    let s = wait_for(&p, |s| s.active == 0);
    assert_eq!((s.accepted, s.active), (3, 0), "{s:?}");
}
