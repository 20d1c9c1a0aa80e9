//! `hash KEY consistent balance_factor=N` (corelb): consistent hashing with bounded loads (Mirrokni, Thorup and
//! Zadimoghaddam 2018), as HAProxy's `hash-balance-factor` and Envoy's `hash_balance_factor` do it.
//!
//! nginx's ketama ring of `hash consistent`, walked as nginx walks it, with one more test on each candidate: a peer
//! is full when its requests in flight (the zone's `conns`, every shard's) reach its slots, HAProxy's
//! `chash_server_is_eligible`: `ceil((in_flight + 1) × N / 100)` slots over the usable peers in proportion to
//! their weights (whole slots per weight unit, the rest shared by weight and rounded up, never 0). A key whose
//! server is full goes on to the next point of the ring; that costs no miss (a full peer is not a failure), and
//! with `N > 100` the slots exceed the requests, so some peer always has room. So no peer carries more than `N %`
//! of the average load (plus one request), and a key moves only while its server is full.

use super::attempt::AttemptState;
use super::consistent_hash::ConsistentHash;
use super::{round_robin, swrr, Balancer, Choice, ListKind, Peer, PeerList, PickCx};

/// `hash consistent` with a load bound.
#[derive(Debug, Clone, Default)]
pub struct BoundedLoad {
    ring: ConsistentHash,
    /// Percent of the average load a peer may carry.
    factor: u32,
}

/// What the slots of one pick are computed from: the usable peers' requests in flight and weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Σ conns of the usable primary peers.
    pub in_flight: u64,
    /// Σ weight of the usable primary peers.
    pub weight: u64,
}

/// HAProxy's slots of a peer of `weight` under `load` with `factor` percent.
pub fn slots(load: Load, weight: u32, factor: u32) -> u64 {
    let total = (load.in_flight + 1).saturating_mul(u64::from(factor)).div_ceil(100);
    let tot_weight = load.weight.max(1);
    let w = u64::from(weight);
    let whole = total / tot_weight * w;
    let rest = (w * (total % tot_weight)).div_ceil(tot_weight);
    (whole + rest).max(1)
}

impl BoundedLoad {
    /// The ring of `primary` and the bound (`factor` percent, at least 100).
    pub fn build(primary: &PeerList, factor: u32) -> BoundedLoad {
        BoundedLoad {
            ring: ConsistentHash::build(primary),
            factor,
        }
    }

    /// The load of `list`'s usable peers at `now`.
    pub fn load(list: &PeerList, now: u64) -> Load {
        let usable = list.peers.iter().filter(|p| p.usable(now));
        usable.fold(
            Load {
                in_flight: 0,
                weight: 0,
            },
            |l, p| Load {
                in_flight: l.in_flight + u64::from(p.slot.conns()),
                weight: l.weight + u64::from(p.weight),
            },
        )
    }

    /// Whether `peer` has room under `load`.
    fn has_room(&self, peer: &Peer, load: Load) -> bool {
        u64::from(peer.slot.conns()) < slots(load, peer.weight, self.factor)
    }
}

impl Balancer for BoundedLoad {
    fn start(&self, attempt: &mut AttemptState, key: &[u8]) {
        self.ring.start(attempt, key);
    }

    /// `hash consistent`'s walk, full peers left out of each point's SWRR pass. A point whose peers are all tried
    /// or unusable is a miss, as in nginx; one whose usable peers are only full moves on for free. An empty key, a
    /// lone server, the backup list, more than 20 misses or a whole circle go to round robin.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let points = self.ring.ring().len();
        if cx.attempt.misses_exhausted()
            || cx.plan.single
            || cx.key.is_empty()
            || cx.attempt.list != ListKind::Primary
            || points == 0
        {
            return round_robin::choose(cx);
        }
        let list = &cx.plan.primary;
        let load = Self::load(list, cx.now);
        for _ in 0..points {
            let members = self.ring.members_at(cx.attempt.hash);
            let (tried, now) = (&cx.attempt.tried, cx.now);
            let roomy = members
                .iter()
                .copied()
                .filter(|&i| list.candidate(i, tried, now).is_some_and(|p| self.has_room(p, load)));
            if let Some(index) = swrr::pass(list, &mut cx.shard.primary, tried, now, roomy) {
                return Some(Choice {
                    list: ListKind::Primary,
                    index,
                });
            }
            let full_only = members.iter().any(|&i| list.candidate(i, tried, now).is_some());
            cx.attempt.hash = cx.attempt.hash.wrapping_add(1);
            if !full_only && cx.attempt.miss() {
                break;
            }
        }
        round_robin::choose(cx)
    }

    fn name(&self) -> &'static str {
        "hash consistent balance_factor"
    }
}

#[cfg(test)]
mod tests;
