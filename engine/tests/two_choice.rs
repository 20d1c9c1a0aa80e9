//! `random two ewma` and `random two least_time=MODE` through the network on both runtimes: three real backends
//! on loopback, one answering after a bounded delay; once its first answer is measured it loses every pair.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, get, glommio_usable, Proxy};

/// Requests per run.
const N: usize = 30;

/// Serves `N` sequential requests through `random two LOAD` over a slow peer and two fast ones; returns the
/// requests the slow backend and the fast ones saw.
fn run<R: Runtime>(load: &str) -> (usize, usize) {
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(150)));
    let fast = [Backend::start("fast1", Mode::Ok), Backend::start("fast2", Mode::Ok)];
    let front = free_addr();
    let text = format!(
        "events {{}}\nhttp {{\n upstream u {{ random two {load}; server {}; server {}; server {}; }}\n \
         server {{ listen {front}; location / {{ proxy_pass http://u; }} }}\n}}\n",
        slow.addr, fast[0].addr, fast[1].addr
    );
    let path = std::env::temp_dir().join("corelb-two-choice.conf");
    let config = corelb_engine::config::parse_str(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);
    for i in 0..N {
        let r = get(front, "/").unwrap_or_else(|| panic!("{load}: request {i}: no response"));
        assert_eq!(r.status, 200, "{load}: request {i}");
    }
    (slow.requests(), fast.iter().map(Backend::requests).sum())
}

/// Every request succeeds; the slow peer takes a request only while it is unmeasured (a tie with an unmeasured fast
/// peer): at most the few before its first answer is in, never its third of the traffic.
fn slow_peer_gets_little<R: Runtime>() {
    for load in ["ewma", "least_time=header", "least_time=last_byte"] {
        let (slow, fast) = run::<R>(load);
        assert_eq!(slow + fast, N, "{load}");
        assert!(slow <= 3, "{load}: the slow peer got {slow} of {N}");
    }
}

#[test]
fn tokio_two_choice_avoids_the_slow_peer() {
    slow_peer_gets_little::<Tokio>();
}

#[test]
fn glommio_two_choice_avoids_the_slow_peer() {
    if glommio_usable() {
        slow_peer_gets_little::<Glommio>();
    }
}
