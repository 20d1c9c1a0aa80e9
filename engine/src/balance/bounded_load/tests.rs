use super::*;
use crate::balance::testkit::{line, Lab, NOW};
use crate::balance::{Attempt, Outcome};
use crate::config::key::KeyTemplate;
use crate::config::model::{Method, ServerLine};

fn key() -> KeyTemplate {
    KeyTemplate::compile("$arg_k").expect("a valid template")
}

fn bounded(factor: u32) -> Method {
    Method::BoundedHash { key: key(), factor }
}

fn servers(n: usize) -> Vec<ServerLine> {
    (0..n).map(|i| line(&format!("10.0.0.{i}:80"))).collect()
}

#[test]
fn slots_are_haproxy_s() {
    let load = |in_flight, weight| Load { in_flight, weight };
    // nothing in flight, 4 peers of weight 1, 125 %: ceil(1 x 1.25) = 2 slots, 0 per weight, the rest rounds up
    assert_eq!(slots(load(0, 4), 1, 125), 1);
    // 9 in flight: ceil(10 x 1.25) = 13 = 3 x 4 + 1: 3 each, and the 1 rounds up to 1 more
    assert_eq!(slots(load(9, 4), 1, 125), 4);
    // weight 3 of 4: 13 / 4 = 3 per unit x 3 = 9, ceil(3 x 1 / 4) = 1 more
    assert_eq!(slots(load(9, 4), 3, 125), 10);
    // 100 in flight over 10 peers at 150 %: ceil(101 x 1.5) = 152 = 15 x 10 + 2 -> 15 + ceil(2 / 10) = 16
    assert_eq!(slots(load(100, 10), 1, 150), 16);
    assert_eq!(slots(load(0, 0), 1, 100), 1, "never 0");
}

#[test]
fn without_load_it_is_hash_consistent() {
    let plain = Method::Hash {
        key: key(),
        consistent: true,
    };
    let mut a = Lab::new(plain, servers(5));
    let mut b = Lab::new(bounded(125), servers(5));
    assert_eq!(b.plan.balancer.name(), "hash consistent balance_factor");
    for k in 0..300 {
        let key = format!("k{k}");
        assert_eq!(a.serve(key.as_bytes(), NOW), b.serve(key.as_bytes(), NOW), "{key}");
    }
}

/// Holds `keys.len()` requests open on `lab`, one per key in order, and returns the requests in flight per peer
/// after each pick, checking that no peer is above `factor % × average + 1` at any point.
fn hold_all(lab: &Lab, keys: &[String], factor: Option<u32>) -> Vec<u32> {
    let mut shard = lab.shard.clone();
    let mut held = Vec::new();
    let n = lab.plan.primary.len();
    for (t, key) in keys.iter().enumerate() {
        let mut a = Attempt::new(&lab.plan, 0, key.as_bytes());
        assert!(a.pick(&mut shard, key.as_bytes(), NOW).is_some(), "{key}");
        held.push(a);
        let total = t as f64 + 1.0;
        let max = lab.plan.primary.peers.iter().map(|p| p.slot.conns()).max().unwrap_or(0);
        if let Some(f) = factor {
            let bound = (f64::from(f) / 100.0 * total / n as f64).ceil() + 1.0;
            assert!(f64::from(max) <= bound, "after {total} requests: {max} > {bound}");
        }
    }
    let conns = lab.plan.primary.peers.iter().map(|p| p.slot.conns()).collect();
    for mut a in held {
        a.report(Outcome::Success, &mut shard, NOW);
    }
    conns
}

#[test]
fn skewed_keys_put_no_peer_above_the_factor_times_the_average() {
    // half the requests carry one hot key, the rest spread over 40 keys
    let keys: Vec<String> = (0..400)
        .map(|i| {
            if i % 2 == 0 {
                "hot".into()
            } else {
                format!("k{}", i % 40)
            }
        })
        .collect();
    // plain consistent hashing puts every hot request on one peer: over half the load
    let plain = Method::Hash {
        key: key(),
        consistent: true,
    };
    let conns = hold_all(&Lab::new(plain, servers(8)), &keys, None);
    assert!(conns.iter().any(|&c| c >= 200), "{conns:?}");
    for factor in [100, 125, 150, 200] {
        let lab = Lab::new(bounded(factor), servers(8));
        let conns = hold_all(&lab, &keys, Some(factor));
        assert_eq!(conns.iter().sum::<u32>(), 400);
        let bound = (f64::from(factor) / 100.0 * 50.0).ceil() as u32 + 1;
        assert!(conns.iter().all(|&c| c <= bound), "{factor}: {conns:?}");
    }
}

#[test]
fn a_full_peer_costs_no_miss() {
    let lab = Lab::new(bounded(150), servers(3));
    let mut shard = lab.shard.clone();
    // 30 held requests of one key: they spread over all three peers, with no request falling to round robin
    let mut held = Vec::new();
    for _ in 0..30 {
        let mut a = Attempt::new(&lab.plan, 0, b"one");
        assert!(a.pick(&mut shard, b"one", NOW).is_some());
        assert_eq!(a.state().misses, 0);
        held.push(a);
    }
    let conns: Vec<u32> = lab.plan.primary.peers.iter().map(|p| p.slot.conns()).collect();
    assert!(conns.iter().all(|&c| c <= 16), "{conns:?}");
    for mut a in held {
        a.report(Outcome::Success, &mut shard, NOW);
    }
}
