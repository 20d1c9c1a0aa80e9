//! Picks computed by hand from nginx's formulas: `rt` rounded up to the next 20 ms (`rt += 20 - rt % 20`, so 100
//! becomes 120 and 30 becomes 40), capped at 5000, times `1 + conns`, compared as `eta * best.weight < best_eta *
//! weight`.

use super::*;
use crate::balance::testkit::{line, weighted, Lab, NOW};
use crate::balance::{Attempt, Outcome};
use crate::config::model::{Method, ServerLine};

const FT: u64 = 10;

fn method(mode: LeastTimeMode, inflight: bool) -> Method {
    Method::LeastTime { mode, inflight }
}

fn last_byte() -> Method {
    method(LeastTimeMode::LastByte, false)
}

/// A lab whose primary peers a, b, ... have `weights` and last_byte averages `avgs`, checked at `NOW` (so no
/// decay).
fn lab_with(m: Method, weights: &[u32], avgs: &[u64]) -> Lab {
    let lab = Lab::named(m, weights);
    for (peer, &avg) in lab.plan.primary.peers.iter().zip(avgs) {
        learn(peer, TimeMetric::Response, avg);
    }
    lab
}

fn learn(peer: &Peer, metric: TimeMetric, avg: u64) {
    if avg != 0 {
        peer.slot.times().record(metric, avg);
    }
    peer.slot.note_selected(NOW, FT);
}

fn seq(lab: &mut Lab, n: usize) -> String {
    (0..n).filter_map(|_| lab.serve(b"", NOW)).collect()
}

/// Holds `n` connections on each primary peer (leaked: the slots live as long as the test).
fn hold(lab: &Lab, conns: &[u32]) {
    for (peer, &n) in lab.plan.primary.peers.iter().zip(conns) {
        for _ in 0..n {
            std::mem::forget(peer.slot.try_acquire(0));
        }
    }
}

#[test]
fn eta_rounds_up_in_20_ms_steps_and_caps_at_5000() {
    let lab = lab_with(last_byte(), &[1; 8], &[0, 1, 19, 20, 100, 4980, 4999, 9000]);
    let lt = LeastTimeConf {
        mode: LeastTimeMode::LastByte,
        inflight: false,
    };
    let etas: Vec<u64> = lab.plan.primary.peers.iter().map(|p| lt.eta(p, NOW)).collect();
    assert_eq!(etas, [20, 20, 20, 40, 120, 5000, 5000, 5000]);
    hold(&lab, &[0, 0, 0, 0, 2]);
    assert_eq!(lt.eta(&lab.plan.primary.peers[4], NOW), 360, "120 x (1 + 2 conns)");
}

#[test]
fn the_lowest_average_wins_without_touching_weights() {
    let mut lab = lab_with(last_byte(), &[1, 1, 1], &[100, 30, 250]);
    // etas 120, 40, 260
    assert_eq!(seq(&mut lab, 4), "bbbb");
    assert_eq!(lab.cw(), [0, 0, 0]);
}

#[test]
fn close_times_share_a_cluster_and_round_robin() {
    // 25 and 30 both round to 40: a and b tie, c (120) takes no part
    let mut lab = lab_with(last_byte(), &[1, 1, 1], &[25, 30, 100]);
    assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
    assert_eq!(lab.cw(), [-1, 1, 0]);
    assert_eq!(seq(&mut lab, 5), "babab");
}

#[test]
fn weights_cross_multiply() {
    // a: eta 120 weight 2, b: eta 60 weight 1: 120 x 1 == 60 x 2, a tie, and SWRR 2:1 decides
    let mut lab = lab_with(last_byte(), &[2, 1], &[100, 50]);
    assert_eq!(seq(&mut lab, 6), "abaaba");
    // b one cluster slower (60 -> 80): 120 x 1 < 80 x 2, a alone and no weight moves
    let mut lab = lab_with(last_byte(), &[2, 1], &[100, 60]);
    assert_eq!(seq(&mut lab, 3), "aaa");
    assert_eq!(lab.cw(), [0, 0]);
}

#[test]
fn connections_multiply_the_estimate() {
    // a: 40 x (1 + 3) = 160, b: 120 x 1 = 120
    let mut lab = lab_with(last_byte(), &[1, 1], &[30, 100]);
    hold(&lab, &[3, 0]);
    assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
    // a: 40 x (1 + 2) = 120 ties with b: SWRR from a
    let mut lab = lab_with(last_byte(), &[1, 1], &[30, 100]);
    hold(&lab, &[2, 0]);
    assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
    assert_eq!(lab.cw(), [-1, 1]);
}

#[test]
fn slow_peers_lose_the_cap_and_fall_back_to_least_conn() {
    // both above 5000: equally bad, the fewer connections win
    let mut lab = lab_with(last_byte(), &[1, 1], &[9000, 6000]);
    hold(&lab, &[0, 1]);
    assert_eq!(seq(&mut lab, 3), "aaa");
}

#[test]
fn an_unchosen_peer_s_average_halves_per_fail_timeout_window() {
    let lab = Lab::named(last_byte(), &[1, 1]);
    let (a, b) = (&lab.plan.primary.peers[0], &lab.plan.primary.peers[1]);
    a.slot.times().record(TimeMetric::Response, 400);
    a.slot.note_selected(NOW - 21, FT);
    learn(b, TimeMetric::Response, 250);
    let lt = LeastTimeConf {
        mode: LeastTimeMode::LastByte,
        inflight: false,
    };
    // 21 s > fail_timeout 10: 400 >> (21 / 11) = 200 -> 220; b 260
    assert_eq!((lt.eta(a, NOW), lt.eta(b, NOW)), (220, 260));
    // exactly fail_timeout: no decay
    assert_eq!(lt.eta(a, NOW - 11), 420);
    // 33 s: 400 >> 3 = 50 -> 60; far past 64 windows: 0 -> 20
    assert_eq!(lt.eta(a, NOW + 12), 60);
    assert_eq!(lt.eta(a, NOW + 64 * 11), 20);
    let mut lab = lab;
    assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
    // the pick set `checked`: no decay any more, b is faster now
    assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
}

#[test]
fn backups_when_no_primary_qualifies() {
    let backup = |t: &str| ServerLine {
        backup: true,
        ..line(t)
    };
    let down = ServerLine {
        down: true,
        ..line("a")
    };
    let mut lab = Lab::new(last_byte(), vec![down, backup("b"), backup("c")]);
    learn(&lab.plan.backup.peers[0], TimeMetric::Response, 100);
    learn(&lab.plan.backup.peers[1], TimeMetric::Response, 30);
    assert_eq!(seq(&mut lab, 3), "ccc");
    assert_eq!(lab.shard.backup.current, [0, 0], "no tie on the backup list: no SWRR");
}

#[test]
fn tried_and_failed_peers_are_skipped() {
    let mut lab = lab_with(last_byte(), &[1, 1, 1], &[30, 100, 250]);
    // a fails (max_fails 1): b next in the same request, then b for the next ones
    let picks = lab.run(b"", NOW, &[Outcome::Failed, Outcome::Success]);
    assert_eq!(picks, [Some("a".to_string()), Some("b".to_string())]);
    assert_eq!(seq(&mut lab, 2), "bb");
}

#[test]
fn header_mode_compares_header_times() {
    let lab = Lab::named(method(LeastTimeMode::Header, false), &[1, 1]);
    learn(&lab.plan.primary.peers[0], TimeMetric::Header, 300);
    learn(&lab.plan.primary.peers[0], TimeMetric::Response, 10);
    learn(&lab.plan.primary.peers[1], TimeMetric::Header, 50);
    learn(&lab.plan.primary.peers[1], TimeMetric::Response, 900);
    let mut lab = lab;
    assert_eq!(seq(&mut lab, 2), "bb");
}

#[test]
fn inflight_requests_count_with_their_age() {
    for (inflight, second) in [(false, "a"), (true, "b")] {
        let lab = lab_with(method(LeastTimeMode::LastByte, inflight), &[1, 1], &[40, 100]);
        let mut shard = lab.shard.clone();
        // a (60) beats b (120); the request stays in flight
        let mut first = Attempt::new(&lab.plan, 0, b"");
        let a = first.pick_at(&mut shard, b"", NOW, 1_000).map(|p| p.server.to_string());
        assert_eq!(a.as_deref(), Some("a"));
        // 500 ms later: without inflight a is 60 x 2 = 120, a tie with b that SWRR gives to a; with it, a's
        // in-flight time 500 (0 / 1 + 500) makes it 520 x 2 = 1040
        let mut next = Attempt::new(&lab.plan, 0, b"");
        let got = next.pick_at(&mut shard, b"", NOW, 1_500).map(|p| p.server.to_string());
        assert_eq!(got.as_deref(), Some(second), "inflight {inflight}");
        let times = lab.plan.primary.peers[0].slot.times();
        assert_eq!(times.inflight_reqs(), u32::from(inflight));
        assert_eq!(times.inflight_time(), if inflight { 500 } else { 0 });
        // the first ends after 700 ms: its unit goes back and 700 goes into a's average (0.5 + 35 + 38 = 73)
        let done = TryTimes::Http {
            response: 700,
            header: Some(50),
        };
        first.report_timed(Outcome::Success, &mut shard, NOW, done, 1_700);
        assert_eq!(times.inflight_reqs(), 0);
        assert_eq!(times.avg(TimeMetric::Response), 73);
        assert_eq!(times.avg(TimeMetric::Header), 50);
        next.report(Outcome::Success, &mut shard, NOW);
    }
}

#[test]
fn only_successful_tries_with_a_header_are_averaged() {
    let lab = Lab::named(last_byte(), &[1, 1]);
    let mut shard = lab.shard.clone();
    let times = |i: usize| lab.plan.primary.peers[i].slot.times();
    let http = |header| TryTimes::Http { response: 200, header };
    for (outcome, measured) in [
        (Outcome::Failed, http(Some(10))),
        (Outcome::Next, http(Some(10))),
        (Outcome::Success, http(None)),
    ] {
        let mut at = Attempt::new(&lab.plan, 0, b"");
        assert!(at.pick_at(&mut shard, b"", NOW, 1_000).is_some());
        at.report_timed(outcome, &mut shard, NOW, measured, 1_200);
    }
    for i in 0..2 {
        assert_eq!(times(i).avg(TimeMetric::Response), 0, "peer {i}");
    }
}

#[test]
fn notify_records_the_mode_s_time_at_its_phase_and_frees_the_inflight_unit() {
    let lab = Lab::new(
        method(LeastTimeMode::Header, true),
        vec![weighted("a", 1), weighted("b", 1)],
    );
    let mut shard = lab.shard.clone();
    let mut at = Attempt::new(&lab.plan, 0, b"");
    let peer = at.pick_at(&mut shard, b"", NOW, 1_000).map(|p| p.slot.clone());
    let Some(slot) = peer else { panic!("a peer") };
    assert_eq!(slot.times().inflight_reqs(), 1);
    at.notify(Phase::Header, 80, 1_080);
    assert_eq!(slot.times().inflight_reqs(), 0);
    assert_eq!(slot.times().avg(TimeMetric::Header), 80);
    // the end records the response time, not the header again
    let done = TryTimes::Http {
        response: 900,
        header: Some(85),
    };
    at.report_timed(Outcome::Success, &mut shard, NOW, done, 1_900);
    assert_eq!(slot.times().avg(TimeMetric::Header), 80);
    assert_eq!(slot.times().avg(TimeMetric::Response), 900);
    assert_eq!(slot.times().inflight_reqs(), 0);
}

#[test]
fn stream_sessions_average_connect_first_byte_and_session_times() {
    let lt = LeastTimeConf {
        mode: LeastTimeMode::Connect,
        inflight: false,
    };
    let times = PeerTimes::default();
    let session = TryTimes::Stream {
        response: 3000,
        connect: 4,
        first_byte: Some(30),
    };
    lt.on_free(&times, Outcome::Success, session, 0, FreeCx::default());
    let got = [
        TimeMetric::Connect,
        TimeMetric::FirstByte,
        TimeMetric::Response,
        TimeMetric::Header,
    ]
    .map(|m| times.avg(m));
    assert_eq!(got, [4, 30, 3000, 0]);
    // with inflight, connect is notify's: skipped at the end
    let lt = LeastTimeConf { inflight: true, ..lt };
    let times = PeerTimes::default();
    lt.on_free(&times, Outcome::Success, session, 0, FreeCx::default());
    assert_eq!(times.avg(TimeMetric::Connect), 0);
    assert_eq!(times.avg(TimeMetric::Response), 3000);
}
