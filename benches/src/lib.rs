//! Shared helpers for the criterion benches: upstream plans built by hand from the config model, and request keys.

use corelb_engine::balance::ip_hash::client_key;
use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config::key::KeyTemplate;
use corelb_engine::config::model::{FairWeightMode, LeastTimeMode, Method, RandomTwo, ServerLine, UpstreamConf};
use corelb_shared_state::PeerSlot;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// A clock reading in epoch-like seconds.
pub const NOW: u64 = 1_000_000;

/// `n` server lines `10.x.y.z:8080` with nginx's defaults and `weight`, or weights cycling 1, 2, 3 when `weight`
/// is 0.
pub fn servers(n: usize, weight: u32) -> Vec<ServerLine> {
    (0..n)
        .map(|i| {
            let ip = Ipv4Addr::from(0x0a00_0000 + i as u32 + 1);
            let addr = SocketAddr::new(IpAddr::V4(ip), 8080);
            ServerLine {
                weight: if weight == 0 { i as u32 % 3 + 1 } else { weight },
                ..ServerLine::new(addr.to_string(), vec![addr])
            }
        })
        .collect()
}

/// The plan of an upstream with `method` over `servers`, each peer with a fresh slot.
pub fn plan(method: Method, servers: Vec<ServerLine>) -> UpstreamPlan {
    let conf = UpstreamConf::new("bench", method, servers);
    match UpstreamPlan::build_with(&conf, || Arc::new(PeerSlot::new())) {
        Ok(plan) => plan,
        Err(e) => panic!("bench upstream: {e}"),
    }
}

/// Every method, by the name the benches report.
pub fn methods() -> Vec<(&'static str, Method)> {
    let key = || match KeyTemplate::compile("$request_uri") {
        Ok(k) => k,
        Err(e) => panic!("bench key: {e}"),
    };
    vec![
        ("round_robin", Method::RoundRobin),
        ("ip_hash", Method::IpHash),
        (
            "hash",
            Method::Hash {
                key: key(),
                consistent: false,
            },
        ),
        (
            "hash_consistent",
            Method::Hash {
                key: key(),
                consistent: true,
            },
        ),
        ("hash_maglev", Method::Maglev { key: key() }),
        (
            "hash_bounded_load",
            Method::BoundedHash {
                key: key(),
                factor: 125,
            },
        ),
        (
            "fair",
            Method::Fair {
                no_rr: false,
                weight_mode: FairWeightMode::Default,
            },
        ),
        ("least_conn", Method::LeastConn),
        ("random", Method::Random { two: None }),
        (
            "random_two",
            Method::Random {
                two: Some(RandomTwo::LeastConn),
            },
        ),
        (
            "least_time",
            Method::LeastTime {
                mode: LeastTimeMode::Header,
                inflight: false,
            },
        ),
        (
            "random_two_ewma",
            Method::Random {
                two: Some(RandomTwo::PeakEwma),
            },
        ),
        (
            "random_two_least_time",
            Method::Random {
                two: Some(RandomTwo::LeastTime(LeastTimeMode::Header)),
            },
        ),
    ]
}

/// `n` request keys for `method`: client address bytes for `ip_hash`, URIs for `hash`, empty otherwise.
pub fn keys(method: &Method, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match method {
            Method::IpHash => {
                let mut buf = [0; 16];
                let ip = IpAddr::V4(Ipv4Addr::from(
                    0xc0a8_0000_u32.wrapping_add((i as u32).wrapping_mul(2_654_435_761)),
                ));
                client_key(ip, &mut buf).to_vec()
            }
            Method::Hash { .. } | Method::Maglev { .. } | Method::BoundedHash { .. } => {
                format!("/static/{i}/index.html").into_bytes()
            }
            _ => Vec::new(),
        })
        .collect()
}
