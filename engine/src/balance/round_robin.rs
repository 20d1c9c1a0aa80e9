//! Round robin (nginx's default): smooth weighted round robin, the lone-server path, and the backup switch.

use super::{swrr, Balancer, Choice, ListKind, PickCx};

/// `round_robin`: the method used when an upstream names none, and every other method's fallback.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin;

impl Balancer for RoundRobin {
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        choose(cx)
    }

    fn name(&self) -> &'static str {
        "round_robin"
    }
}

/// nginx's `ngx_http_upstream_get_round_robin_peer`, which the other methods call as their fallback.
///
/// * A lone primary peer with no backup list (`single`) is taken unless it is down or at `max_conns`: no tried
///   bit, no `max_fails` check (the on-select step skips `tried` and `checked` for it too).
/// * Otherwise one SWRR pass over the current list's untried, usable peers.
/// * When nothing on the primary list is usable and a backup list exists, the request moves to it for good (its
///   tried set cleared) and the pass runs there. `None` is BUSY: a 502.
pub fn choose(cx: &mut PickCx<'_>) -> Option<Choice> {
    let kind = cx.attempt.list;
    if kind == ListKind::Primary && cx.plan.single {
        let peer = cx.plan.primary.peers.first()?;
        let takes = !peer.down && !peer.slot.is_blocked() && peer.slot.has_room(peer.max_conns);
        // A single upstream has no backup list, so a refusal is final.
        return takes.then_some(Choice { list: kind, index: 0 });
    }
    let list = cx.plan.list(kind);
    let weights = cx.shard.weights(kind);
    if let Some(index) = swrr::pass_all(list, weights, &cx.attempt.tried, cx.now) {
        return Some(Choice { list: kind, index });
    }
    on_backup(cx, choose)
}

/// The backup switch and the pass a method runs again there: `None` when the request cannot move. On the backup
/// list a request bound by `sticky` takes its bound peer first, as nginx's switch starts its pick over.
pub fn on_backup(cx: &mut PickCx<'_>, again: impl FnOnce(&mut PickCx<'_>) -> Option<Choice>) -> Option<Choice> {
    if !switch_to_backup(cx) {
        return None;
    }
    if let Some(c) = cx.plan.sticky.as_deref().and_then(|s| s.choose_bound(cx)) {
        return Some(c);
    }
    again(cx)
}

/// nginx's backup switch: moves a request that is still on the primary list to the backup list (clearing its
/// tried set), if the upstream has one. Returns whether it moved; a method then runs its own pass again.
pub fn switch_to_backup(cx: &mut PickCx<'_>) -> bool {
    if cx.attempt.list != ListKind::Primary || cx.plan.backup.is_empty() {
        return false;
    }
    cx.attempt.switch_to_backup();
    true
}

#[cfg(test)]
mod tests {
    use crate::balance::testkit::{line, names, weighted, Lab, NOW};
    use crate::balance::Outcome::{Failed, Success};
    use crate::config::model::{Method, ServerLine};
    use std::time::Duration;

    fn rr(weights: &[u32]) -> Lab {
        Lab::named(Method::RoundRobin, weights)
    }

    #[test]
    fn rr1_five_one_one_repeats_every_seven() {
        let mut lab = rr(&[5, 1, 1]);
        let expected_cw: [[i64; 3]; 7] = [
            [-2, 1, 1],
            [-4, 2, 2],
            [1, -4, 3],
            [-1, -3, 4],
            [4, -2, -2],
            [2, -1, -1],
            [0, 0, 0],
        ];
        let mut seq = String::new();
        for round in 0..2 {
            for cw in expected_cw {
                seq.push_str(&lab.serve(b"", NOW).unwrap_or_default());
                if round == 0 {
                    assert_eq!(lab.cw(), cw);
                }
            }
        }
        assert_eq!(seq, "aabacaaaabacaa");
    }

    #[test]
    fn rr2_failure_penalty_and_recovery() {
        let mut lab = rr(&[5, 1, 1]);
        // request 1: a fails (ew 5 -> 0), the retry picks b
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Success])), ["a", "b"]);
        assert_eq!((lab.ew(), lab.cw()), (vec![0, 1, 1], vec![-2, 0, 2]));
        assert_eq!(lab.peer(0).slot.fails(), 1);
        // request 2 at the same second: a is out
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("c"));
        assert_eq!((lab.ew(), lab.cw()), (vec![0, 1, 1], vec![-2, 1, 1]));
        // 11 s later a is usable again and its ew climbs back one per pass
        let later = NOW + 11;
        let expected = [
            ("b", [1, 1, 1], [-2, 0, 2]),
            ("c", [2, 1, 1], [-1, 1, 0]),
            ("b", [3, 1, 1], [1, -2, 1]),
            ("a", [4, 1, 1], [-1, -1, 2]),
        ];
        for (pick, ew, cw) in expected {
            assert_eq!(lab.serve(b"", later).as_deref(), Some(pick));
            assert_eq!((lab.ew(), lab.cw()), (ew.to_vec(), cw.to_vec()));
        }
        // a's success after the window (checked was bumped on selection) resets its fails
        assert_eq!(lab.peer(0).slot.fails(), 0);
    }

    #[test]
    fn one_to_two_weights_give_exactly_one_third() {
        let mut lab = rr(&[1, 2]);
        let mut counts = [0; 2];
        for _ in 0..300 {
            match lab.serve(b"", NOW).as_deref() {
                Some("a") => counts[0] += 1,
                Some("b") => counts[1] += 1,
                other => panic!("unexpected pick {other:?}"),
            }
        }
        assert_eq!(counts, [100, 200]);
    }

    fn with_backups() -> Lab {
        let backup = |t: &str| ServerLine {
            backup: true,
            ..line(t)
        };
        Lab::new(Method::RoundRobin, vec![line("a"), line("b"), backup("c"), backup("d")])
    }

    #[test]
    fn backup_only_when_no_primary_is_usable_and_the_request_stays_there() {
        let mut lab = with_backups();
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
        // both primaries fail: the request moves to the backups
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Failed, Success])), ["a", "b", "c"]);
        // next request: the primaries are failed, straight to backup (c then d by SWRR)
        assert_eq!(lab.serve(b"", NOW + 1).as_deref(), Some("d"));
        // a request on backup stays there even when the primaries recover during it
        let plan = &lab.plan;
        let mut attempt = crate::balance::Attempt::new(plan, 0, b"");
        let first = attempt.pick(&mut lab.shard, b"", NOW + 2).map(|p| p.server.to_string());
        assert_eq!(first.as_deref(), Some("c"));
        attempt.report(Failed, &mut lab.shard, NOW + 2);
        let second = attempt
            .pick(&mut lab.shard, b"", NOW + 20)
            .map(|p| p.server.to_string());
        assert_eq!(second.as_deref(), Some("d"), "the retry stays on the backup list");
        attempt.report(Success, &mut lab.shard, NOW + 20);
        drop(attempt);
        // a new request starts on primary again (b: a's ew was 0 and climbs back from this pass on)
        assert_eq!(lab.serve(b"", NOW + 20).as_deref(), Some("b"));
        assert_eq!(lab.ew(), [1, 1]);
    }

    #[test]
    fn down_peers_are_never_picked_nor_counted_in_tries() {
        let mut lab = Lab::new(
            Method::RoundRobin,
            vec![
                ServerLine {
                    down: true,
                    ..line("a")
                },
                line("b"),
                line("c"),
            ],
        );
        let picks: String = (0..6).filter_map(|_| lab.serve(b"", NOW)).collect();
        assert_eq!(picks, "bcbcbc");
        assert_eq!(lab.plan.initial_tries(0), 2);
        assert_eq!(names(&lab.run(b"", NOW, &[Failed; 5])), ["b", "c"]);
    }

    #[test]
    fn max_fails_window_scenario_from_the_verifier() {
        // docs/algorithms.md §3, verified: a dead peer with max_fails=2 fail_timeout=1s and a live one; t=0, then
        // four at t=3. The failures 3 s apart still add up (no sliding window).
        let dead = ServerLine {
            max_fails: 2,
            fail_timeout: Duration::from_secs(1),
            ..line("127.0.0.1:8089")
        };
        let mut lab = Lab::new(Method::RoundRobin, vec![dead, line("127.0.0.1:8082")]);
        let mut request = |now: u64| -> Vec<String> {
            let mut attempt = crate::balance::Attempt::new(&lab.plan, 0, b"");
            let mut out = Vec::new();
            while let Some(p) = attempt.pick(&mut lab.shard, b"", now) {
                out.push(p.server.to_string());
                let dead = p.server.ends_with("8089");
                attempt.report(if dead { Failed } else { Success }, &mut lab.shard, now);
                if !dead || attempt.tries_left() == 0 {
                    break;
                }
            }
            out
        };
        let seq: Vec<String> = [0, 3, 3, 3, 3].iter().map(|t| request(NOW + t).join(", ")).collect();
        assert_eq!(
            seq,
            [
                "127.0.0.1:8089, 127.0.0.1:8082",
                "127.0.0.1:8082",
                "127.0.0.1:8089, 127.0.0.1:8082",
                "127.0.0.1:8082",
                "127.0.0.1:8082",
            ]
        );
        let dead = &lab.plan.primary.peers[0].slot;
        assert_eq!((dead.fails(), dead.checked(), dead.accessed()), (2, NOW + 3, NOW + 3));
    }

    #[test]
    fn fails_are_not_a_sliding_window() {
        // a: max_fails=2. A failure at T and another at T+100, with no successful selection of a in between,
        // add up to 2 and exclude a for fail_timeout after the last one.
        let a = ServerLine {
            max_fails: 2,
            ..line("a")
        };
        let mut lab = Lab::new(Method::RoundRobin, vec![a, line("b")]);
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Success])), ["a", "b"]);
        assert_eq!(lab.serve(b"", NOW + 100).as_deref(), Some("b"));
        assert_eq!(names(&lab.run(b"", NOW + 100, &[Failed, Success])), ["a", "b"]);
        assert_eq!(lab.peer(0).slot.fails(), 2);
        // weight 1 / max_fails 2 = 0: no ew penalty
        assert_eq!(lab.ew(), [1, 1]);
        let excluded: String = (0..3).filter_map(|_| lab.serve(b"", NOW + 110)).collect();
        assert_eq!(excluded, "bbb");
        // past the window a is back (cw [-1,1]: b first); its success, selected after the window, clears fails
        let back: String = (0..2).filter_map(|_| lab.serve(b"", NOW + 111)).collect();
        assert_eq!(back, "ba");
        assert_eq!(lab.peer(0).slot.fails(), 0);
    }

    #[test]
    fn no_reset_when_every_peer_failed() {
        let mut lab = rr(&[1, 1]);
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Failed])), ["a", "b"]);
        // 502 until a fail_timeout passes (now - checked <= 10 excludes)
        assert_eq!(lab.serve(b"", NOW), None);
        assert_eq!(lab.serve(b"", NOW + 10), None);
        // both ew are 0 after the failures and climb back one per pass: cw [-1,1] -> b, b, then a
        let picks: String = (0..3).filter_map(|_| lab.serve(b"", NOW + 11)).collect();
        assert_eq!(picks, "bba");
        assert_eq!((lab.ew(), lab.cw()), (vec![1, 1], vec![-1, 1]));
    }

    #[test]
    fn single_peer_has_no_fail_accounting_and_no_retry() {
        let mut lab = Lab::new(Method::RoundRobin, vec![line("a")]);
        assert!(lab.plan.single);
        for _ in 0..3 {
            // one pick only: the failure sets tries to 0
            assert_eq!(names(&lab.run(b"", NOW, &[Failed, Failed])), ["a"]);
        }
        let slot = &lab.peer(0).slot;
        assert_eq!((slot.fails(), slot.checked(), slot.accessed()), (0, 0, 0));
        assert_eq!(slot.conns(), 0);
    }

    #[test]
    fn single_peer_refused_only_when_down_or_full() {
        let mut lab = Lab::new(
            Method::RoundRobin,
            vec![ServerLine {
                max_conns: 1,
                ..line("a")
            }],
        );
        let slot = lab.peer(0).slot.clone();
        // failed twice by an earlier config's accounting: still picked (no max_fails check on a single peer)
        slot.record_failure(NOW);
        slot.record_failure(NOW);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
        let held = slot.try_acquire(0);
        assert!(held.is_some());
        assert_eq!(lab.serve(b"", NOW), None);
        drop(held);
        let mut down = Lab::new(
            Method::RoundRobin,
            vec![ServerLine {
                down: true,
                ..line("a")
            }],
        );
        assert_eq!(down.serve(b"", NOW), None);
    }

    #[test]
    fn full_peers_are_skipped() {
        let mut lab = Lab::new(
            Method::RoundRobin,
            vec![
                ServerLine {
                    max_conns: 1,
                    ..weighted("a", 5)
                },
                line("b"),
                line("c"),
            ],
        );
        let slot = lab.peer(0).slot.clone();
        let held = slot.try_acquire(1);
        assert!(held.is_some());
        let picks: String = (0..4).filter_map(|_| lab.serve(b"", NOW)).collect();
        assert_eq!(picks, "bcbc");
        drop(held);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
        assert_eq!(slot.conns(), 0, "the guard gave the connection back");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn swrr_gives_each_peer_exactly_its_weight_per_cycle(
            weights in proptest::collection::vec(1u32..20, 2..12),
            cycles in 1usize..3,
        ) {
            let mut lab = rr(&weights);
            let total: u32 = weights.iter().sum();
            let mut counts = vec![0u32; weights.len()];
            for _ in 0..total as usize * cycles {
                let pick = lab.serve(b"", NOW).unwrap_or_default();
                let i = lab.plan.primary.peers.iter().position(|p| *p.server == *pick);
                proptest::prop_assert!(i.is_some(), "pick {:?}", pick);
                counts[i.unwrap_or_default()] += 1;
            }
            let want: Vec<u32> = weights.iter().map(|w| w * cycles as u32).collect();
            proptest::prop_assert_eq!(counts, want);
            // a whole cycle brings every current weight back to 0
            proptest::prop_assert!(lab.cw().iter().all(|&c| c == 0));
        }
    }
}
