//! Long client timeouts (coarse deadlines, `runtime::deadline`) fire on both runtimes: not early, and not much
//! late; so does a short `keepalive_timeout` (the runtime's timer), and a graceful stop closes idle keepalive
//! connections at once. On glommio an idle connection parks after a tick (`Runtime::park_idle`): a parked one is
//! served when its next request comes, times out and is closed by a graceful stop as any other.

mod support;

use corelb_engine::config::model::*;
use corelb_engine::runtime::deadline::{COARSE_FROM, TICK};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::time::{Duration, Instant};
use support::*;

/// A timeout long enough to take the coarse path.
const WAIT: Duration = Duration::from_millis(700);

fn closes_idle_and_slow_clients<R: Runtime>() {
    assert!(WAIT >= COARSE_FROM);
    let listen = free_addr();
    let mut config = http_config(
        listen,
        vec![],
        vec![return_location(LocationMatch::Prefix("/".into()), 200, Some("ok"))],
    );
    if let Some(server) = config.http.as_mut().and_then(|h| h.servers.first_mut()) {
        server.client.keepalive_timeout = WAIT;
        server.client.client_header_timeout = WAIT;
        // the wait after a request is its location's (inherited from the server in a config file)
        for l in &mut server.locations {
            l.client.keepalive_timeout = WAIT;
        }
    }
    let _p = Proxy::start::<R>(config, 1);
    let late = WAIT + 20 * TICK; // generous: the machine may be loaded

    // keepalive_timeout: an idle connection after one request. The clock starts before the request: the proxy's
    // starts when it has answered, and a loaded machine may wake this thread long after that.
    let mut c = Client::connect(listen);
    let start = Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().map(|r| r.text()), Some("ok".to_string()));
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= WAIT - Duration::from_millis(20) && took < late,
        "keepalive close after {took:?}"
    );

    // client_header_timeout: half a head, then nothing
    let mut c = Client::connect(listen);
    let start = Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= WAIT - Duration::from_millis(20) && took < late,
        "header timeout after {took:?}"
    );

    // client_header_timeout: nothing at all (the wait for the first bytes, which holds no buffer), then a head sent
    // half-way through it, which must be whole by the timeout counted from the connection's start
    let mut c = Client::connect(listen);
    let start = Instant::now();
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= WAIT - Duration::from_millis(20) && took < late,
        "silent client closed after {took:?}"
    );
    let mut c = Client::connect(listen);
    let start = Instant::now();
    std::thread::sleep(WAIT / 2);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n");
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= WAIT - Duration::from_millis(20) && took < late,
        "header timeout after {took:?} (from the connection's start)"
    );
}

#[test]
fn tokio_long_client_timeouts_fire_in_time() {
    closes_idle_and_slow_clients::<Tokio>();
}

/// The glommio tests of this file, one at a time: the count of parked sockets is the process's.
static GLOMMIO: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn glommio_long_client_timeouts_fire_in_time() {
    if glommio_usable() {
        let _one = GLOMMIO.lock().unwrap_or_else(|e| e.into_inner());
        // (its keepalive connection, idle for 700 ms, parks after 50-100 ms: the timeout fires on a parked one)
        closes_idle_and_slow_clients::<Glommio>();
    }
}

/// A config answering `ok` on `listen` with `keepalive` as its `keepalive_timeout`.
fn keepalive_config(listen: std::net::SocketAddr, keepalive: Duration) -> Config {
    let mut config = http_config(
        listen,
        vec![],
        vec![return_location(LocationMatch::Prefix("/".into()), 200, Some("ok"))],
    );
    if let Some(server) = config.http.as_mut().and_then(|h| h.servers.first_mut()) {
        server.client.keepalive_timeout = keepalive;
        for l in &mut server.locations {
            l.client.keepalive_timeout = keepalive;
        }
    }
    config
}

/// A keepalive connection served once; the instant its request was sent.
fn served_once(listen: std::net::SocketAddr) -> (Client, Instant) {
    let mut c = Client::connect(listen);
    let start = Instant::now();
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().map(|r| r.text()), Some("ok".to_string()));
    (c, start)
}

fn short_keepalive_and_graceful_stop<R: Runtime>() {
    // a keepalive_timeout under the coarse deadlines' threshold: the runtime's timer
    let short = Duration::from_millis(200);
    assert!(short < COARSE_FROM);
    let listen = free_addr();
    let p = Proxy::start::<R>(keepalive_config(listen, short), 1);
    let (mut c, start) = served_once(listen);
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= short - Duration::from_millis(20) && took < short + 20 * TICK,
        "keepalive close after {took:?}"
    );
    // a connection served twice over idle waits, and pipelined requests answered in one burst
    let (mut c, _) = served_once(listen);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    for _ in 0..2 {
        assert_eq!(c.read_response().map(|r| r.text()), Some("ok".to_string()));
    }
    drop(p);

    // a graceful stop closes the idle keepalive connections long before their keepalive_timeout
    let listen = free_addr();
    let p = Proxy::start::<R>(keepalive_config(listen, Duration::from_secs(60)), 1);
    let mut idle: Vec<Client> = (0..3).map(|_| served_once(listen).0).collect();
    // a connection still waiting for its first request is not idle (as nginx's): it is served, then closed
    let mut first = Client::connect(listen);
    // (accepted once a later client is served)
    drop(served_once(listen));
    let start = Instant::now();
    p.shared.drain();
    for c in &mut idle {
        assert!(c.closed());
    }
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "idle connections closed {took:?} after the stop"
    );
    first.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = first.read_response().expect("the waiting connection's answer");
    assert_eq!(r.text(), "ok");
    // and its answer says the connection closes, as nginx's header filter says it once the worker is exiting
    assert_eq!(r.header("connection").as_deref(), Some("close"), "{}", r.head);
    assert!(first.closed());
}

#[test]
fn tokio_short_keepalive_and_graceful_stop_close_idle_connections() {
    short_keepalive_and_graceful_stop::<Tokio>();
}

#[test]
fn glommio_short_keepalive_and_graceful_stop_close_idle_connections() {
    if glommio_usable() {
        let _one = GLOMMIO.lock().unwrap_or_else(|e| e.into_inner());
        short_keepalive_and_graceful_stop::<Glommio>();
    }
}

/// Waits (up to 10 s) until `n` sockets are parked; whether they were.
fn parked_become(n: usize) -> bool {
    let start = Instant::now();
    while corelb_engine::runtime::glommio_rt::parked_sockets() != n {
        if start.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn glommio_parked_idle_connections_are_served_timed_out_and_stopped() {
    if !glommio_usable() {
        return;
    }
    let _one = GLOMMIO.lock().unwrap_or_else(|e| e.into_inner());
    let parked = corelb_engine::runtime::glommio_rt::parked_sockets;
    assert_eq!(parked(), 0);
    let listen = free_addr();
    let p = Proxy::start::<Glommio>(keepalive_config(listen, Duration::from_secs(60)), 1);
    let mut idle: Vec<Client> = (0..3).map(|_| served_once(listen).0).collect();
    assert!(parked_become(3), "{} parked", parked());
    // a parked connection's next request is answered, and it parks again
    for c in &mut idle {
        c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(c.read_response().map(|r| r.text()), Some("ok".to_string()));
    }
    assert!(parked_become(3), "{} parked", parked());
    // a head whose first part wakes a parked connection, then a pipelined pair's rest
    idle[0].send(b"GET / HTTP/1.1\r\nHo");
    assert!(parked_become(2), "{} parked", parked());
    idle[0].send(b"st: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    for _ in 0..2 {
        assert_eq!(idle[0].read_response().map(|r| r.text()), Some("ok".to_string()));
    }
    // a client that has sent nothing yet parks too, and is served
    let mut silent = Client::connect(listen);
    assert!(parked_become(4), "{} parked", parked());
    silent.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(silent.read_response().map(|r| r.text()), Some("ok".to_string()));
    assert!(parked_become(4), "{} parked", parked());
    // a client that closes while parked is let go
    drop(silent);
    assert!(parked_become(3), "{} parked", parked());
    // a graceful stop closes the parked ones at once
    let start = Instant::now();
    p.shared.drain();
    for c in &mut idle {
        assert!(c.closed());
    }
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "parked connections closed {took:?} after the stop"
    );
    assert!(parked_become(0), "{} parked", parked());
    drop(p);

    // keepalive_timeout ends a parked connection's wait in time
    let wait = Duration::from_millis(700);
    let listen = free_addr();
    let _p = Proxy::start::<Glommio>(keepalive_config(listen, wait), 1);
    let (mut c, start) = served_once(listen);
    assert!(parked_become(1), "{} parked", parked());
    assert!(c.closed());
    let took = start.elapsed();
    assert!(
        took >= wait - Duration::from_millis(20) && took < wait + 20 * TICK,
        "keepalive close after {took:?}"
    );
    assert!(parked_become(0), "{} parked", parked());
}
