//! `least_conn`: the fewest active connections per configured weight, ties resolved by SWRR, as nginx does.

use super::{round_robin, swrr, Balancer, Choice, ListKind, PickCx};

/// `least_conn`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastConn;

impl Balancer for LeastConn {
    /// nginx's `ngx_http_upstream_get_least_conn_peer`: among untried, usable peers of the current list, the lowest
    /// `conns / weight` (compared by cross-multiplication with the configured weight), the earliest on a tie. When
    /// several share that ratio, an SWRR pass among them, scanning from the first tied one, decides; without a tie
    /// no weight changes. Nothing usable moves the request to the backup list (once) or is BUSY.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let kind = cx.attempt.list;
        if kind == ListKind::Primary && cx.plan.single {
            return round_robin::choose(cx);
        }
        let list = cx.plan.list(kind);
        // (index, conns, weight) of the best peer so far
        let mut best: Option<(usize, u64, u64)> = None;
        let mut many = false;
        for i in 0..list.peers.len() {
            let Some(peer) = list.candidate(i, &cx.attempt.tried, cx.now) else {
                continue;
            };
            let (conns, weight) = (u64::from(peer.slot.conns()), u64::from(peer.weight));
            match best {
                Some((_, bc, bw)) if conns * bw > bc * weight => {}
                Some((_, bc, bw)) if conns * bw == bc * weight => many = true,
                _ => {
                    best = Some((i, conns, weight));
                    many = false;
                }
            }
        }
        let Some((first, bc, bw)) = best else {
            return round_robin::on_backup(cx, |cx| self.choose(cx));
        };
        if !many {
            return Some(Choice {
                list: kind,
                index: first,
            });
        }
        // The tie is judged against the first pass's reading of the best peer's conns: other shards may move
        // `conns` in between, and nginx holds a lock there instead.
        let tied = (first..list.len()).filter(|&i| {
            list.peers
                .get(i)
                .is_some_and(|p| u64::from(p.slot.conns()) * bw == bc * u64::from(p.weight))
        });
        let index = swrr::pass(list, cx.shard.weights(kind), &cx.attempt.tried, cx.now, tied).unwrap_or(first);
        Some(Choice { list: kind, index })
    }

    fn name(&self) -> &'static str {
        "least_conn"
    }
}

#[cfg(test)]
mod tests {
    use crate::balance::testkit::{line, names, Lab, NOW};
    use crate::balance::Outcome::{Failed, Success};
    use crate::config::model::{Method, ServerLine};

    fn lab(weights: &[u32]) -> Lab {
        Lab::named(Method::LeastConn, weights)
    }

    /// Holds `n` connections on each primary peer for the duration of the returned guards' owner.
    fn hold(lab: &Lab, conns: &[u32]) -> Vec<std::sync::Arc<corelb_shared_state::PeerSlot>> {
        let slots: Vec<_> = lab.plan.primary.peers.iter().map(|p| p.slot.clone()).collect();
        for (slot, &n) in slots.iter().zip(conns) {
            for _ in 0..n {
                // leaked on purpose: the slots live only as long as the test
                std::mem::forget(slot.try_acquire(0));
            }
        }
        slots
    }

    #[test]
    fn lowest_ratio_wins_without_touching_weights() {
        // weights 5,1,1 with conns 10,1,2: ratios 2,1,2 -> b, cw unchanged
        let mut lab = lab(&[5, 1, 1]);
        let _slots = hold(&lab, &[10, 1, 2]);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
        assert_eq!(lab.cw(), [0, 0, 0]);
        assert_eq!(lab.ew(), [5, 1, 1]);
    }

    #[test]
    fn full_tie_runs_swrr_among_the_tied() {
        // conns 10,2,2: ratios 2,2,2 -> a full tie -> SWRR -> a, cw [-2,1,1]
        let mut lab = lab(&[5, 1, 1]);
        let _slots = hold(&lab, &[10, 2, 2]);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("a"));
        assert_eq!(lab.cw(), [-2, 1, 1]);
    }

    #[test]
    fn partial_tie_scans_from_the_first_tied_peer() {
        // weights 1,1,1,1 with conns 3,1,2,1: b and d tie at 1; a and c stay out of the pass
        let mut lab = lab(&[1, 1, 1, 1]);
        let _slots = hold(&lab, &[3, 1, 2, 1]);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
        assert_eq!(lab.cw(), [0, -1, 0, 1]);
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("d"));
        assert_eq!(lab.cw(), [0, 0, 0, 0]);
    }

    #[test]
    fn sequential_least_conn_equals_swrr() {
        let mut lab = lab(&[5, 1, 1]);
        let seq: String = (0..14).filter_map(|_| lab.serve(b"", NOW)).collect();
        assert_eq!(seq, "aabacaaaabacaa");
    }

    #[test]
    fn backup_switch_recurses_into_least_conn() {
        let backup = |t: &str| ServerLine {
            backup: true,
            ..line(t)
        };
        let mut lab = Lab::new(Method::LeastConn, vec![line("a"), backup("b"), backup("c")]);
        // c has a connection: least_conn on the backup list prefers b, every time
        let c = lab.plan.backup.peers[1].slot.clone();
        let held = c.try_acquire(0);
        assert!(held.is_some());
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Success])), ["a", "b"]);
        // a is failed: the next requests go straight to the backups
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
        assert_eq!(lab.shard.backup.current, [0, 0], "no tie on the backup list: no SWRR");
        drop(held);
        assert_eq!(lab.serve(b"", NOW + 11).as_deref(), Some("a"));
    }

    #[test]
    fn single_server_goes_to_round_robin() {
        let mut lab = Lab::new(Method::LeastConn, vec![line("a")]);
        assert_eq!(names(&lab.run(b"", NOW, &[Failed, Failed])), ["a"]);
        assert_eq!(names(&lab.run(b"", NOW, &[Failed])), ["a"]);
        assert_eq!(lab.peer(0).slot.fails(), 0);
    }

    #[test]
    fn full_peers_are_skipped() {
        let mut lab = Lab::new(
            Method::LeastConn,
            vec![
                ServerLine {
                    max_conns: 2,
                    ..line("a")
                },
                line("b"),
            ],
        );
        let _slots = hold(&lab, &[2, 5]);
        // a has the lower ratio but is full
        assert_eq!(lab.serve(b"", NOW).as_deref(), Some("b"));
    }
}
