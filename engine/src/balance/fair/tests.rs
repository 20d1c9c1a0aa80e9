use super::*;
use crate::balance::testkit::{line, Lab, NOW};
use crate::balance::{Attempt, Outcome};
use crate::config::model::{Method, ServerLine};

fn fair(no_rr: bool, weight_mode: WeightMode) -> Method {
    Method::Fair { no_rr, weight_mode }
}

fn seq(lab: &mut Lab, n: usize) -> String {
    (0..n)
        .map(|_| lab.serve(b"", NOW).unwrap_or_else(|| "-".into()))
        .collect()
}

/// `n` requests held open (each keeps its peer's `conns`), as picked; `-` for a 502.
fn held(lab: &Lab, n: usize) -> String {
    let mut shard = lab.shard.clone();
    let mut open = Vec::new();
    let mut out = String::new();
    for _ in 0..n {
        let mut a = Attempt::new(&lab.plan, 0, b"");
        out.push_str(
            &a.pick(&mut shard, b"", NOW)
                .map_or("-".into(), |p| p.server.to_string()),
        );
        open.push(a);
    }
    for mut a in open {
        a.report(Outcome::Success, &mut shard, NOW);
    }
    out
}

#[test]
fn idle_peers_take_turns_in_weight_order() {
    let mut lab = Lab::named(fair(false, WeightMode::Default), &[1, 1, 1]);
    assert_eq!(lab.plan.balancer.name(), "fair");
    assert_eq!(seq(&mut lab, 7), "abcabca");
    // the scan order is by weight, heaviest first, config order among equals
    let mut lab = Lab::named(fair(false, WeightMode::Default), &[1, 3, 2, 3]);
    assert_eq!(seq(&mut lab, 8), "bdcabdca");
}

#[test]
fn no_rr_starts_every_scan_at_the_first_peer() {
    let mut lab = Lab::named(fair(true, WeightMode::Default), &[1, 1, 1]);
    assert_eq!(seq(&mut lab, 4), "aaaa");
    // busy peers are passed over: held requests fill a, b, c in turn, then the busy pass starts
    assert_eq!(&held(&lab, 3), "abc");
}

#[test]
fn when_all_are_busy_the_less_busy_then_the_longest_unchosen_wins() {
    let lab = Lab::named(fair(false, WeightMode::Default), &[1, 1, 1]);
    // three idle picks, then the busy pass: all hold one, a was chosen longest ago; then a holds two
    assert_eq!(held(&lab, 9), "abcabcabc");
    // a failure on record keeps a peer out of the idle pass (max_fails=0: it stays usable for the busy one)
    let servers = ["a", "b", "c"]
        .map(|t| ServerLine {
            max_fails: 0,
            ..line(t)
        })
        .to_vec();
    let mut lab = Lab::new(fair(false, WeightMode::Default), servers);
    lab.peer(0).slot.record_failure(NOW);
    assert_eq!(seq(&mut lab, 4), "bcbc");
    assert_eq!(&held(&lab, 3), "bca", "b and c idle first, then a in the busy pass");
}

#[test]
fn peak_never_goes_past_the_weight() {
    let lab = Lab::named(fair(false, WeightMode::Peak), &[1, 2]);
    // b (weight 2) first in order: b idle, a idle, then only b has room (1 < 2), then nothing: 502
    assert_eq!(held(&lab, 4), "bab-");
}

#[test]
fn idle_no_rr_prefers_a_slightly_loaded_peer() {
    // weight 2: a peer is idle below 2 in flight; a loaded one beats an unloaded later one
    let lab = Lab::named(fair(true, WeightMode::Idle), &[2, 2]);
    let got = held(&lab, 4);
    assert_eq!(&got, "aabb");
    // without no_rr the cursor moves on: a (0), b (0: a loaded one with fewer would be needed to beat it), a (1,
    // first of its scan; b's 1 is not fewer), b (a is at its weight)
    let lab = Lab::named(fair(false, WeightMode::Idle), &[2, 2]);
    assert_eq!(held(&lab, 4), "abab");
}

#[test]
fn scores_saturate_at_the_module_s_bounds() {
    assert_eq!(COUNTER_MAX, 0xf_ffff);
    assert_eq!(NREQ_MAX, u64::MAX >> 20);
    let f = Fair::build(
        &Lab::named(fair(false, WeightMode::Default), &[1, 5, 5]).plan.primary,
        FairConf::default(),
    );
    assert_eq!(f.order(), [1, 2, 0]);
}
