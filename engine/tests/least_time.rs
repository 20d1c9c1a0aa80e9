//! `least_time` through the network on both runtimes: two real backends on loopback, one answering after a
//! bounded delay; once the first answers have been averaged into the zone, the fast one takes the requests.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, get, glommio_usable, Proxy};

/// Requests per run.
const N: usize = 20;

/// Serves `N` sequential requests through `least_time PARAMS` over a slow peer (listed first, so the opening tie
/// of two unmeasured peers goes to it by SWRR) and a fast one; returns the requests each backend saw.
fn run<R: Runtime>(params: &str) -> (usize, usize) {
    let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(150)));
    let fast = Backend::start("fast", Mode::Ok);
    let front = free_addr();
    let text = format!(
        "events {{}}\nhttp {{\n upstream u {{ least_time {params}; server {}; server {}; }}\n \
         server {{ listen {front}; location / {{ proxy_pass http://u; }} }}\n}}\n",
        slow.addr, fast.addr
    );
    let path = std::env::temp_dir().join("corelb-least-time.conf");
    let config = corelb_engine::config::parse_str(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);
    for i in 0..N {
        let r = get(front, "/").unwrap_or_else(|| panic!("request {i}: no response"));
        assert_eq!(r.status, 200, "request {i}");
    }
    (slow.requests(), fast.requests())
}

/// The first request ties (both unmeasured: eta 20) and goes to the slow peer; from then on its average of ~150 ms
/// (eta 160) loses to the fast one's (eta 20 or 40 on a loaded machine), so it sees one request, or a few if this
/// machine is slow enough to make the fast backend look slow too.
fn fast_peer_takes_the_requests<R: Runtime>() {
    for params in ["last_byte", "header", "last_byte inflight", "header inflight"] {
        let (slow, fast) = run::<R>(params);
        assert_eq!(slow + fast, N, "{params}");
        assert!(slow >= 1, "{params}: the opening tie goes to the first peer");
        assert!(slow <= 3, "{params}: the slow peer got {slow} of {N}");
    }
}

#[test]
fn tokio_least_time_prefers_the_fast_peer() {
    fast_peer_takes_the_requests::<Tokio>();
}

#[test]
fn glommio_least_time_prefers_the_fast_peer() {
    if glommio_usable() {
        fast_peer_takes_the_requests::<Glommio>();
    }
}
