use super::*;
use crate::balance::testkit::{Lab, NOW};
use crate::balance::Attempt;
use crate::config::model::{Method, RandomTwo};

const NOW_MS: u64 = NOW * 1000;

fn ewma() -> Method {
    Method::Random {
        two: Some(RandomTwo::PeakEwma),
    }
}

/// `n` requests at `now_ms`, each done at once without a measurement, as a string of peer names.
fn seq(lab: &mut Lab, n: usize, now_ms: u64) -> String {
    (0..n)
        .map(|_| {
            let mut a = Attempt::new(&lab.plan, 0, b"");
            let got = a
                .pick_at(&mut lab.shard, b"", now_ms / 1000, now_ms)
                .map(|p| p.server.to_string());
            a.report(Outcome::Success, &mut lab.shard, now_ms / 1000);
            got.unwrap_or_default()
        })
        .collect()
}

#[test]
fn the_plan_observes_and_the_name_says_so() {
    let lab = Lab::named(ewma(), &[1, 1]);
    assert!(lab.plan.ewma && lab.plan.timed() && lab.plan.least_time.is_none());
    assert_eq!(lab.plan.balancer.name(), "random two ewma");
    let plain = Lab::named(Method::Random { two: None }, &[1, 1]);
    assert!(
        !plain.plan.ewma && !plain.plan.timed(),
        "nothing is timed for other methods"
    );
}

#[test]
fn the_cheaper_peer_of_the_two_is_kept() {
    let mut lab = Lab::named(ewma(), &[1, 1]);
    lab.peer(0).slot.ewma().observe(NOW_MS, 100.0);
    lab.peer(1).slot.ewma().observe(NOW_MS, 10.0);
    // with two peers both draws are a and b in some order: b (10) always
    assert_eq!(seq(&mut lab, 8, NOW_MS), "bbbbbbbb");
}

#[test]
fn unmeasured_idle_peers_tie_and_the_second_draw_wins() {
    let mut lab = Lab::named(ewma(), &[1, 1]);
    let picks = seq(&mut lab, 40, NOW_MS);
    assert!(picks.contains('a') && picks.contains('b'), "{picks}");
    // an unmeasured idle peer (load 0) beats any measured one
    lab.peer(0).slot.ewma().observe(NOW_MS, 1.0);
    assert_eq!(seq(&mut lab, 8, NOW_MS), "bbbbbbbb");
}

#[test]
fn pending_requests_multiply_the_cost() {
    let lab = Lab::named(ewma(), &[1, 1]);
    lab.peer(0).slot.ewma().observe(NOW_MS, 100.0);
    lab.peer(1).slot.ewma().observe(NOW_MS, 30.0);
    let mut shard = lab.shard.clone();
    // b takes requests while 30 x (pending + 1) <= 100: with 0, 1 and 2 pending (30, 60, 90); at 3 (120) a wins
    let mut held = Vec::new();
    let mut got = String::new();
    for _ in 0..4 {
        let mut a = Attempt::new(&lab.plan, 0, b"");
        let p = a.pick_at(&mut shard, b"", NOW, NOW_MS).map(|p| p.server.to_string());
        got.push_str(&p.unwrap_or_default());
        held.push(a);
    }
    assert_eq!(got, "bbba");
    assert_eq!(load(lab.peer(1), NOW_MS), 120.0);
    assert_eq!(load(lab.peer(0), NOW_MS), 200.0);
    for mut a in held {
        a.report(Outcome::Success, &mut shard, NOW);
    }
}

#[test]
fn an_unmeasured_busy_peer_carries_the_penalty() {
    let lab = Lab::named(ewma(), &[1, 1]);
    lab.peer(1).slot.ewma().observe(NOW_MS, 5_000.0);
    let mut shard = lab.shard.clone();
    let mut first = Attempt::new(&lab.plan, 0, b"");
    let p = first
        .pick_at(&mut shard, b"", NOW, NOW_MS)
        .map(|p| p.server.to_string());
    assert_eq!(p.as_deref(), Some("a"), "unmeasured and idle: 0");
    assert_eq!(load(lab.peer(0), NOW_MS), PENALTY + 1.0);
    let mut second = Attempt::new(&lab.plan, 0, b"");
    let p = second
        .pick_at(&mut shard, b"", NOW, NOW_MS)
        .map(|p| p.server.to_string());
    assert_eq!(
        p.as_deref(),
        Some("b"),
        "a busy unmeasured peer loses to any measured one"
    );
    first.report(Outcome::Success, &mut shard, NOW);
    second.report(Outcome::Success, &mut shard, NOW);
}

#[test]
fn weights_divide_the_load() {
    // a: 100 / weight 4 = 25 beats b: 30 / 1
    let mut lab = Lab::named(ewma(), &[4, 1]);
    lab.peer(0).slot.ewma().observe(NOW_MS, 100.0);
    lab.peer(1).slot.ewma().observe(NOW_MS, 30.0);
    let picks = seq(&mut lab, 40, NOW_MS);
    // draws are weighted 4:1, so some requests draw a twice (a repeat is not a second candidate: a is kept
    // after another draw of b); every pair of a and b keeps a
    assert_eq!(picks, "a".repeat(40));
}

#[test]
fn a_peak_decays_and_the_peer_gets_traffic_again() {
    let mut lab = Lab::named(ewma(), &[1, 1]);
    lab.peer(0).slot.ewma().observe(NOW_MS, 1_000.0);
    lab.peer(1).slot.ewma().observe(NOW_MS, 100.0);
    assert_eq!(seq(&mut lab, 4, NOW_MS + 20_000), "bbbb", "1000 e^-2 = 135 > 100");
    // 1000 e^-2.5 = 82 < b's 100 e^-2.5: both decay alike, so a stays dearer while nobody observes
    assert_eq!(seq(&mut lab, 4, NOW_MS + 25_000), "bbbb");
    // b observes 100 again at +25 s: its cost is 100, a's 82
    lab.peer(1).slot.ewma().observe(NOW_MS + 25_000, 100.0);
    assert_eq!(seq(&mut lab, 4, NOW_MS + 25_000), "aaaa");
}

#[test]
fn a_try_observes_its_header_time_or_its_time_to_fail() {
    let times = |response, header| TryTimes::Http { response, header };
    assert_eq!(round_trip(Outcome::Success, times(900, Some(40))), Some(40));
    assert_eq!(
        round_trip(Outcome::Success, times(900, Some(0))),
        Some(1),
        "under 1 ms counts as 1"
    );
    assert_eq!(round_trip(Outcome::Success, times(900, None)), None);
    assert_eq!(round_trip(Outcome::Next, times(900, Some(7))), Some(7));
    assert_eq!(round_trip(Outcome::Failed, times(60_000, None)), Some(60_000));
    let stream = TryTimes::Stream {
        response: 5_000,
        connect: 3,
        first_byte: Some(9),
    };
    assert_eq!(round_trip(Outcome::Success, stream), Some(3));
    assert_eq!(round_trip(Outcome::Failed, stream), Some(5_000));
    assert_eq!(round_trip(Outcome::Success, TryTimes::None), None);
    // through the attempt: a report with times lands in the zone
    let lab = Lab::named(ewma(), &[1, 1]);
    let mut shard = lab.shard.clone();
    let mut a = Attempt::new(&lab.plan, 0, b"");
    let peer = a.pick_at(&mut shard, b"", NOW, NOW_MS).map(|p| p.server.to_string());
    a.report_timed(Outcome::Success, &mut shard, NOW, times(70, Some(25)), NOW_MS + 70);
    let i = usize::from(peer.as_deref() == Some("b"));
    assert_eq!(lab.peer(i).slot.ewma().cost(NOW_MS + 70), Some(25.0));
    assert_eq!(lab.peer(1 - i).slot.ewma().cost(NOW_MS + 70), None);
}
