//! `random [two [least_conn]]`: a weighted random peer, or the less loaded of two, over ranges built at load.

use super::attempt::AttemptState;
use super::ranges::WeightRanges;
use super::{round_robin, two_choice, Balancer, Choice, ListKind, PeerList, PickCx};
use rand::RngCore;

/// `random` or `random two [least_conn]`.
#[derive(Debug, Clone, Default)]
pub struct Random {
    /// The primary list's weight ranges, built at load as nginx builds them per worker.
    ranges: WeightRanges,
    two: bool,
}

impl Random {
    /// The ranges of `primary`; `two` selects `random two least_conn`.
    pub fn build(primary: &PeerList, two: bool) -> Random {
        Random {
            ranges: WeightRanges::new(primary),
            two,
        }
    }

    /// The weight ranges.
    pub fn ranges(&self) -> &WeightRanges {
        &self.ranges
    }

    /// One draw ([`two_choice::draw`]).
    fn draw(&self, rng: &mut impl RngCore) -> usize {
        two_choice::draw(&self.ranges, rng)
    }

    /// Plain `random`: draws until an untried, usable peer comes up. `None` after more than 20 misses.
    fn walk_one(
        list: &PeerList,
        attempt: &mut AttemptState,
        now: u64,
        draw: &mut impl FnMut() -> usize,
    ) -> Option<usize> {
        loop {
            let i = draw();
            if list.candidate(i, &attempt.tried, now).is_some() {
                return Some(i);
            }
            if attempt.miss() {
                return None;
            }
        }
    }

    /// `random two`: [`two_choice::walk_two`], the second kept unless its `conns / weight` is strictly higher
    /// than the first's (by cross-multiplication with the configured weights).
    fn walk_two(
        list: &PeerList,
        attempt: &mut AttemptState,
        now: u64,
        draw: &mut impl FnMut() -> usize,
    ) -> Option<usize> {
        two_choice::walk_two(list, attempt, now, draw, |second, first| {
            u64::from(second.slot.conns()) * u64::from(first.weight)
                > u64::from(first.slot.conns()) * u64::from(second.weight)
        })
    }
}

impl Balancer for Random {
    /// nginx's `ngx_http_upstream_get_random_peer` / `get_random2_peer`. A lone server, or more than 20 misses in
    /// the request, go to round robin (which also is the only way to a backup list).
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        if cx.attempt.misses_exhausted()
            || cx.plan.single
            || cx.attempt.list != ListKind::Primary
            || self.ranges.total() == 0
        {
            return round_robin::choose(cx);
        }
        let list = &cx.plan.primary;
        let rng = &mut cx.shard.rng;
        let mut draw = || self.draw(rng);
        let found = if self.two {
            Self::walk_two(list, cx.attempt, cx.now, &mut draw)
        } else {
            Self::walk_one(list, cx.attempt, cx.now, &mut draw)
        };
        match found {
            Some(index) => Some(Choice {
                list: ListKind::Primary,
                index,
            }),
            None => round_robin::choose(cx),
        }
    }

    fn name(&self) -> &'static str {
        if self.two {
            "random two least_conn"
        } else {
            "random"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::{line, peer_list, Lab, NOW};
    use crate::balance::Outcome;
    use crate::config::model::{Method, RandomTwo, ServerLine};
    use proptest::prelude::*;

    fn plain() -> Method {
        Method::Random { two: None }
    }

    fn two() -> Method {
        Method::Random {
            two: Some(RandomTwo::LeastConn),
        }
    }

    /// A draw function that replays `script` (then repeats its last index).
    fn scripted(script: &[usize]) -> impl FnMut() -> usize + '_ {
        let mut it = script.iter();
        let last = script.last().copied().unwrap_or(0);
        move || it.next().copied().unwrap_or(last)
    }

    #[test]
    fn ranges_are_built_at_load() {
        let r = Random::build(&peer_list(&[5, 1, 1]), true);
        assert_eq!((r.ranges().starts(), r.ranges().total()), (&[0, 5, 6][..], 7));
        assert_eq!(r.name(), "random two least_conn");
    }

    #[test]
    fn two_keeps_the_second_on_a_tie_and_the_less_loaded_otherwise() {
        let list = peer_list(&[1, 1, 1]);
        let mut st = AttemptState::new(3);
        assert_eq!(Random::walk_two(&list, &mut st, NOW, &mut scripted(&[0, 1])), Some(1));
        assert_eq!(st.misses, 1, "the first accepted pick counts as a try");
        // b busier than a: a kept, whichever order
        let busy = list.peers[1].slot.try_acquire(0);
        assert!(busy.is_some());
        let mut st = AttemptState::new(3);
        assert_eq!(Random::walk_two(&list, &mut st, NOW, &mut scripted(&[0, 1])), Some(0));
        let mut st = AttemptState::new(3);
        assert_eq!(Random::walk_two(&list, &mut st, NOW, &mut scripted(&[1, 0])), Some(0));
        // the configured weights enter the comparison
        let heavy = peer_list(&[1, 2]);
        let held = (heavy.peers[0].slot.try_acquire(0), heavy.peers[1].slot.try_acquire(0));
        assert!(held.0.is_some() && held.1.is_some());
        // a: 1 conn / weight 1, b: 1 conn / weight 2 -> b is less loaded, kept in either order
        let mut st = AttemptState::new(2);
        assert_eq!(Random::walk_two(&heavy, &mut st, NOW, &mut scripted(&[1, 0])), Some(1));
        let mut st = AttemptState::new(2);
        assert_eq!(Random::walk_two(&heavy, &mut st, NOW, &mut scripted(&[0, 1])), Some(1));
    }

    #[test]
    fn two_skips_repeats_tried_and_unusable_draws() {
        let list = peer_list(&[1, 1, 1, 1]);
        let mut st = AttemptState::new(4);
        st.tried.insert(2);
        list.peers[3].slot.record_failure(NOW);
        // a accepted (1 try), a again (2), c tried (3), d failed (4), b accepted: tie -> b
        assert_eq!(
            Random::walk_two(&list, &mut st, NOW, &mut scripted(&[0, 0, 2, 3, 1])),
            Some(1)
        );
        assert_eq!(st.misses, 4);
    }

    #[test]
    fn twenty_one_misses_give_up() {
        let list = peer_list(&[1, 1]);
        let mut st = AttemptState::new(2);
        let mut draws = 0;
        let mut always_a = || {
            draws += 1;
            0
        };
        assert_eq!(Random::walk_two(&list, &mut st, NOW, &mut always_a), None);
        assert_eq!((draws, st.misses), (21, 21));
        let mut st = AttemptState::new(2);
        st.tried.insert(0);
        assert_eq!(Random::walk_one(&list, &mut st, NOW, &mut scripted(&[0])), None);
        assert_eq!(st.misses, 21);
        let mut st = AttemptState::new(2);
        st.tried.insert(0);
        assert_eq!(
            Random::walk_one(&list, &mut st, NOW, &mut scripted(&[0, 0, 1])),
            Some(1)
        );
        assert_eq!(st.misses, 2);
    }

    #[test]
    fn after_twenty_misses_round_robin_takes_over() {
        // b carries 1000 of 1001 weight units but is down: plain random misses until round robin picks a
        let mut lab = Lab::new(
            plain(),
            vec![
                line("a"),
                ServerLine {
                    down: true,
                    weight: 1000,
                    ..line("b")
                },
            ],
        );
        let mut seen_rr = false;
        for _ in 0..20 {
            let plan = &lab.plan;
            let mut attempt = crate::balance::Attempt::new(plan, 0, b"");
            let got = attempt.pick(&mut lab.shard, b"", NOW).map(|p| p.server.to_string());
            assert_eq!(got.as_deref(), Some("a"));
            seen_rr |= attempt.state().misses_exhausted();
            attempt.report(Outcome::Success, &mut lab.shard, NOW);
        }
        assert!(seen_rr, "some request exhausted its draws");
    }

    #[test]
    fn distribution_follows_the_weights() {
        let mut lab = Lab::named(plain(), &[5, 1, 1]);
        let mut counts = [0u32; 3];
        for _ in 0..7000 {
            match lab.serve(b"", NOW).as_deref() {
                Some("a") => counts[0] += 1,
                Some("b") => counts[1] += 1,
                Some("c") => counts[2] += 1,
                other => panic!("unexpected pick {other:?}"),
            }
        }
        assert!((4700..5300).contains(&counts[0]), "{counts:?}");
        assert!((850..1150).contains(&counts[1]), "{counts:?}");
        assert!((850..1150).contains(&counts[2]), "{counts:?}");
        assert_eq!(lab.cw(), [0, 0, 0], "random never runs SWRR");
    }

    #[test]
    fn single_server_goes_to_round_robin() {
        let mut lab = Lab::new(two(), vec![line("a")]);
        assert_eq!(lab.fail_all(b"", NOW), ["a"]);
        assert_eq!(lab.fail_all(b"", NOW), ["a"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn two_never_returns_a_tried_peer(
            weights in proptest::collection::vec(1u32..6, 2..10),
            down_mask in any::<u16>(),
            seed in any::<u64>(),
        ) {
            let n = weights.len();
            // max_fails=0: only the tried set keeps a failed peer out
            let servers: Vec<ServerLine> = weights
                .iter()
                .enumerate()
                .map(|(i, &w)| ServerLine {
                    weight: w,
                    max_fails: 0,
                    down: i > 0 && down_mask & (1 << i) != 0,
                    ..line(&format!("p{i}"))
                })
                .collect();
            let live = servers.iter().filter(|s| !s.down).count();
            let mut lab = Lab::new(two(), servers);
            lab.shard = crate::balance::ShardState::seeded(&lab.plan, seed);
            let picks = lab.run(b"", NOW, &vec![Outcome::Failed; n + 1]);
            let mut seen = std::collections::HashSet::new();
            for p in &picks {
                let p = p.clone().unwrap_or_default();
                prop_assert!(seen.insert(p.clone()), "{} picked twice in {:?}", p, picks);
            }
            prop_assert_eq!(picks.len(), live);
        }
    }
}
