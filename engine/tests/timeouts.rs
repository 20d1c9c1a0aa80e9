//! Long client timeouts (coarse deadlines, `runtime::deadline`) fire on both runtimes: not early, and not much
//! late.

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
}

#[test]
fn tokio_long_client_timeouts_fire_in_time() {
    closes_idle_and_slow_clients::<Tokio>();
}

#[test]
fn glommio_long_client_timeouts_fire_in_time() {
    if glommio_usable() {
        closes_idle_and_slow_clients::<Glommio>();
    }
}
