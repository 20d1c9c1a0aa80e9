//! `random two least_time=MODE`: the power of two choices over nginx's `least_time` estimate. nginx Plus has the
//! directive but publishes no formula; this is corelb's definition.
//!
//! Two weighted random draws as nginx's `random two` makes them; the second is kept unless its `eta / weight` is
//! strictly higher than the first's, `eta` being exactly nginx 1.31's `least_time` estimate of the mode
//! ([`LeastTimeConf::eta`]: the zone's moving average, halved while the peer is left unpicked, rounded up to
//! 20 ms, capped at 5000 ms, times `1 + conns`), compared by cross-multiplication with the configured weights. The
//! averages are recorded as `least_time MODE` (without `inflight`) records them.

use super::least_time::LeastTimeConf;
use super::two_choice::Load;
use super::Peer;

/// The least_time load measure of one mode.
#[derive(Debug, Clone, Copy)]
pub struct LeastTimeLoad(pub LeastTimeConf);

impl Load for LeastTimeLoad {
    #[inline]
    fn heavier(&self, second: &Peer, first: &Peer, now: u64, _now_ms: u64) -> bool {
        let (e2, e1) = (u128::from(self.0.eta(second, now)), u128::from(self.0.eta(first, now)));
        e2 * u128::from(first.weight) > e1 * u128::from(second.weight)
    }

    fn name(&self) -> &'static str {
        "random two least_time"
    }
}

#[cfg(test)]
mod tests {
    use crate::balance::testkit::{Lab, NOW};
    use crate::balance::Outcome;
    use crate::config::model::{LeastTimeMode, Method, RandomTwo};
    use corelb_shared_state::TimeMetric;

    fn method(mode: LeastTimeMode) -> Method {
        Method::Random {
            two: Some(RandomTwo::LeastTime(mode)),
        }
    }

    /// Records `avg` and marks the peer just selected (an unpicked peer's average decays, as in nginx).
    fn learn(peer: &crate::balance::Peer, metric: TimeMetric, avg: u64) {
        peer.slot.times().record(metric, avg);
        peer.slot.note_selected(NOW, 10);
    }

    /// Picks of `n` requests, each done at once, as a string of peer names.
    fn seq(lab: &mut Lab, n: usize) -> String {
        (0..n).map(|_| lab.serve(b"", NOW).unwrap_or_default()).collect()
    }

    #[test]
    fn the_faster_of_the_two_draws_is_kept() {
        let mut lab = Lab::named(method(LeastTimeMode::LastByte), &[1, 1]);
        assert_eq!(lab.plan.balancer.name(), "random two least_time");
        let lt = lab.plan.least_time.expect("the averages are recorded");
        assert_eq!((lt.mode, lt.inflight), (LeastTimeMode::LastByte, false));
        learn(lab.peer(0), TimeMetric::Response, 300);
        learn(lab.peer(1), TimeMetric::Response, 30);
        // both draws of two peers are a and b in some order: b (40) always beats a (320)
        assert_eq!(seq(&mut lab, 8), "bbbbbbbb");
    }

    #[test]
    fn a_tie_keeps_the_second_draw_and_weights_divide_the_eta() {
        // 30 and 35 round up to the same 40 ms cluster: a tie, the second draw wins, so both get picks
        let mut lab = Lab::named(method(LeastTimeMode::Header), &[1, 1]);
        learn(lab.peer(0), TimeMetric::Header, 30);
        learn(lab.peer(1), TimeMetric::Header, 35);
        let picks = seq(&mut lab, 40);
        assert!(picks.contains('a') && picks.contains('b'), "{picks}");
        // b twice as slow (80 vs 40) with twice the weight: a tie again; with weight 1 it always loses
        let mut lab = Lab::named(method(LeastTimeMode::Header), &[1, 2]);
        learn(lab.peer(0), TimeMetric::Header, 30);
        learn(lab.peer(1), TimeMetric::Header, 70);
        let picks = seq(&mut lab, 40);
        assert!(picks.contains('a') && picks.contains('b'), "{picks}");
        let mut lab = Lab::named(method(LeastTimeMode::Header), &[1, 1]);
        learn(lab.peer(0), TimeMetric::Header, 30);
        learn(lab.peer(1), TimeMetric::Header, 70);
        assert_eq!(seq(&mut lab, 8), "aaaaaaaa");
    }

    #[test]
    fn requests_in_flight_multiply_the_eta() {
        let lab = Lab::named(method(LeastTimeMode::LastByte), &[1, 1]);
        learn(lab.peer(0), TimeMetric::Response, 30); // 40
        learn(lab.peer(1), TimeMetric::Response, 90); // 100
        let mut shard = lab.shard.clone();
        // a holds two requests: 40 x 3 = 120 > 100, so b is chosen
        let held: Vec<_> = (0..2)
            .map(|_| {
                let mut a = crate::balance::Attempt::new(&lab.plan, 0, b"");
                let got = a.pick(&mut shard, b"", NOW).map(|p| p.server.to_string());
                assert_eq!(got.as_deref(), Some("a"));
                a
            })
            .collect();
        let mut next = crate::balance::Attempt::new(&lab.plan, 0, b"");
        let got = next.pick(&mut shard, b"", NOW).map(|p| p.server.to_string());
        assert_eq!(got.as_deref(), Some("b"));
        next.report(Outcome::Success, &mut shard, NOW);
        for mut a in held {
            a.report(Outcome::Success, &mut shard, NOW);
        }
    }
}
