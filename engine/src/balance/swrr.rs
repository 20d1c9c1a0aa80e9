//! The smooth weighted round-robin pass nginx runs for round robin, least_conn ties and consistent hashing.

use super::attempt::Tried;
use super::{PeerList, Weights};

/// One SWRR pass over `candidates`, which must be distinct indices into `list` in ascending order (nginx walks
/// its list front to back; a filter, such as "same `server` text" or "same conns/weight ratio", only removes
/// indices).
///
/// Each untried, usable candidate gets `current += effective` (the sum goes into `total`), then `effective` rises
/// by one while below the configured weight (the rise counts from the next pass on). The highest `current` wins,
/// with a strict `>` so the earliest index wins a tie; the winner then gives back `total`. `None` when no candidate
/// is usable: nothing changes then. Indices outside `list` or `weights` are skipped.
///
/// Slow start (nginx Plus): a peer in its ramp adds `min(effective, ramp)` instead of `effective`, where `ramp` is
/// [`Peer::ramp_weight`](super::Peer::ramp_weight) at `now`; `effective` itself keeps nginx's rules.
#[inline]
pub fn pass(
    list: &PeerList,
    weights: &mut Weights,
    tried: &Tried,
    now: u64,
    candidates: impl IntoIterator<Item = usize>,
) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    let mut total: i64 = 0;
    for i in candidates {
        let Some(peer) = list.candidate(i, tried, now) else {
            continue;
        };
        let (Some(cw), Some(ew)) = (weights.current.get_mut(i), weights.effective.get_mut(i)) else {
            continue;
        };
        let used = if peer.slow_start == 0 {
            *ew
        } else {
            (*ew).min(peer.ramp_weight(now))
        };
        *cw += used;
        total += used;
        if *ew < i64::from(peer.weight) {
            *ew += 1;
        }
        // Each index comes once, so the best's `current` cannot change after it is recorded here.
        let better = match best {
            None => true,
            Some((_, best_cw)) => *cw > best_cw,
        };
        if better {
            best = Some((i, *cw));
        }
    }
    let (winner, _) = best?;
    if let Some(cw) = weights.current.get_mut(winner) {
        *cw -= total;
    }
    Some(winner)
}

/// A pass over the whole list (round robin).
#[inline]
pub fn pass_all(list: &PeerList, weights: &mut Weights, tried: &Tried, now: u64) -> Option<usize> {
    pass(list, weights, tried, now, 0..list.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::{names, peer_list, weighted, Lab, NOW};
    use crate::balance::Outcome::{Failed, Success};
    use crate::balance::ShardState;
    use crate::config::model::{Method, ServerLine};
    use std::time::Duration;

    #[test]
    fn five_one_one_sequence_and_current_weights() {
        let list = peer_list(&[5, 1, 1]);
        let mut w = Weights::new(&list);
        let tried = Tried::default();
        let expected: [(usize, [i64; 3]); 7] = [
            (0, [-2, 1, 1]),
            (0, [-4, 2, 2]),
            (1, [1, -4, 3]),
            (0, [-1, -3, 4]),
            (2, [4, -2, -2]),
            (0, [2, -1, -1]),
            (0, [0, 0, 0]),
        ];
        for (pick, cw) in expected {
            assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), Some(pick));
            assert_eq!(w.current, cw);
        }
    }

    #[test]
    fn tried_and_filtered_peers_take_no_part() {
        let list = peer_list(&[5, 1, 1]);
        let mut w = Weights::new(&list);
        let mut tried = Tried::default();
        tried.insert(0);
        // a is tried: b and c tie on current 1, b (the earlier index) wins and gives back total 2.
        assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), Some(1));
        assert_eq!(w.current, [0, -1, 1]);
        // only c is a candidate
        assert_eq!(pass(&list, &mut w, &Tried::default(), 1_000_000, [2]), Some(2));
        assert_eq!(w.current, [0, -1, 1]);
        // nothing usable: no change
        tried.insert(1);
        tried.insert(2);
        assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), None);
        assert_eq!(w.current, [0, -1, 1]);
    }

    #[test]
    fn effective_weight_recovers_by_one_per_pass() {
        let list = peer_list(&[3, 1]);
        let mut w = Weights::new(&list);
        w.effective[0] = 0;
        let tried = Tried::default();
        // pass 1: cw [0,1] -> b; ew a 0->1
        assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), Some(1));
        assert_eq!((w.current.clone(), w.effective.clone()), (vec![0, 0], vec![1, 1]));
        // pass 2: cw [1,1] -> a (earliest on a tie); ew a 1->2
        assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), Some(0));
        assert_eq!((w.current.clone(), w.effective.clone()), (vec![-1, 1], vec![2, 1]));
        assert_eq!(pass_all(&list, &mut w, &tried, 1_000_000), Some(1));
        assert_eq!(w.effective, [3, 1]);
    }

    #[test]
    fn all_zero_effective_weights_pick_the_highest_current_unchanged() {
        let list = peer_list(&[1, 1]);
        let mut w = Weights {
            current: vec![0, 2],
            effective: vec![0, 0],
        };
        // the ew rise happens after the add, so this pass adds 0 and picks b; total 0
        assert_eq!(pass_all(&list, &mut w, &Tried::default(), 1_000_000), Some(1));
        assert_eq!(w.current, [0, 2]);
        assert_eq!(w.effective, [1, 1]);
    }

    /// Picks of `a` among `n` requests on a fresh shard, `t` seconds after `a` came back.
    fn a_share(method: Method, slow_start: u64, t: u64, n: usize) -> usize {
        let a = ServerLine {
            slow_start: Duration::from_secs(slow_start),
            ..weighted("a", 10)
        };
        let mut lab = Lab::new(method, vec![a, weighted("b", 10)]);
        lab.peer(0).slot.mark_recovered(NOW);
        (0..n)
            .filter(|_| lab.serve(b"", NOW + t).as_deref() == Some("a"))
            .count()
    }

    #[test]
    fn slow_start_ramps_a_recovered_peer_linearly_from_one() {
        // weight 10, slow_start=10s against a weight-10 peer: max(1, 10·t/10) of every (ramp + 10) picks.
        for method in [Method::RoundRobin, Method::LeastConn] {
            for (t, ramp) in [(0, 1), (1, 1), (3, 3), (5, 5), (9, 9), (10, 10), (60, 10)] {
                let n = (ramp + 10) * 3;
                assert_eq!(a_share(method.clone(), 10, t, n), ramp * 3, "{method:?} t={t}");
            }
        }
    }

    #[test]
    fn no_slow_start_no_ramp() {
        assert_eq!(a_share(Method::RoundRobin, 0, 0, 20), 10);
        // a peer that never came back (recovered_at 0) is not ramping either
        let a = ServerLine {
            slow_start: Duration::from_secs(10),
            ..weighted("a", 10)
        };
        let mut lab = Lab::new(Method::RoundRobin, vec![a, weighted("b", 10)]);
        let picks = (0..20).filter(|_| lab.serve(b"", NOW).as_deref() == Some("a")).count();
        assert_eq!(picks, 10);
    }

    #[test]
    fn the_first_pick_after_the_fail_window_starts_the_ramp() {
        let a = ServerLine {
            slow_start: Duration::from_secs(10),
            ..weighted("a", 10)
        };
        let mut lab = Lab::new(Method::RoundRobin, vec![a, weighted("b", 10)]);
        // a fails once (max_fails=1): out for fail_timeout=10s
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Success])), ["a", "b"]);
        assert_eq!(lab.peer(0).slot.recovered_at(), 0);
        let back = NOW + 11;
        let mut lab = Lab {
            shard: ShardState::seeded(&lab.plan, 7),
            plan: lab.plan,
        };
        // the first selection of a after its window (at full weight: not ramping yet) marks the recovery
        let first: Vec<_> = (0..2).filter_map(|_| lab.serve(b"", back)).collect();
        assert_eq!(first, ["a", "b"]);
        assert_eq!(lab.peer(0).slot.recovered_at(), back);
        // 5 s into the ramp: 5 of every 15 picks on a fresh shard
        let mut lab = Lab {
            shard: ShardState::seeded(&lab.plan, 7),
            plan: lab.plan,
        };
        let picks = (0..45)
            .filter(|_| lab.serve(b"", back + 5).as_deref() == Some("a"))
            .count();
        assert_eq!(picks, 15);
    }
}
