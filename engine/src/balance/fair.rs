//! `fair [no_rr] [weight_mode=idle|peak]`: the third-party upstream-fair module's pick (gnosek/nginx-upstream-fair),
//! with the busy counter it meant to keep.
//!
//! Peers are scanned in the module's order (by weight, heaviest first, config order among equals) from one past
//! the round-robin cursor (the last peer chosen; with `no_rr` the cursor stays on the last position, so every scan
//! starts at the first peer). A request's busy-ness is the zone's `conns` (requests in flight from every shard).
//!
//! 1. **Idle pass**: a peer with a failure on record (`fails > 0`), with `conns >= weight`, or (except with
//!    `weight_mode=idle`) with any request in flight is skipped, as are tried and unusable ones. Without
//!    `weight_mode=idle` and `no_rr`, the first remaining peer is chosen. Otherwise the first one is kept unless a
//!    later peer has requests in flight and fewer than it (so with `weight_mode=idle no_rr` a slightly loaded peer
//!    is preferred to an idle one, the module's assumption that backends spawn on demand).
//! 2. **Busy pass**, when no idle peer qualifies: with `weight_mode=peak` peers at `conns >= weight` are skipped;
//!    the lowest score wins, the later one on a tie: `score = conns << 20 | (2^20 - 1 - since)`, `since` the
//!    upstream's requests since this peer was last chosen (both saturated at the module's bounds), so the less
//!    busy wins and then the one chosen longest ago. In the default weight mode the score is divided by the peer's
//!    current weight scaled by its remaining failures (`cw × (max_fails - fails) / max_fails`), and a chosen
//!    peer's `cw` counts down from its weight to 0 and starts again.
//!
//! Nothing qualifying is a 502. A lone server is always taken (round robin's lone-server path). Differences from
//! the module: its `nreq` update sits inside `#if (NGX_DEBUG)` in its later versions, so release builds never see
//! a busy peer; corelb counts them. Its score ORs `~since` unmasked, which on 64-bit machines covers the `nreq`
//! bits; corelb masks it to the 20 bits meant. Failures are nginx's `max_fails`/`fail_timeout` accounting (the zone's),
//! and the cursor, the request counter, the last-chosen ids and the current weights are upstream-wide atomics
//! kept with the plan (they start again at a reload, as the module's shared block starts again per generation).

use super::{round_robin, Balancer, Choice, ListKind, PeerList, PickCx};
pub use crate::config::model::FairWeightMode as WeightMode;
use std::sync::atomic::{AtomicU64, Ordering};

/// The module's bits of the score for `since` (`SCHED_COUNTER_BITS`).
pub const COUNTER_BITS: u32 = 20;
/// The largest `since` the score tells apart.
pub const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;
/// The largest in-flight count the score tells apart.
pub const NREQ_MAX: u64 = u64::MAX >> COUNTER_BITS;

/// What an upstream's `fair` directive says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FairConf {
    /// `no_rr`: scans always start at the first peer.
    pub no_rr: bool,
    /// `weight_mode=`.
    pub weight_mode: WeightMode,
}

/// `fair`: the scan order and the module's shared counters.
#[derive(Debug, Default)]
pub struct Fair {
    conf: FairConf,
    /// Primary peer indices in scan order (weight descending, stable).
    order: Vec<usize>,
    /// The position (in `order`) of the peer chosen last.
    cursor: AtomicU64,
    /// Requests started on the upstream (the module's `total_requests`).
    total: AtomicU64,
    /// `total` when each position's peer was last chosen (`last_req_id`).
    last_req: Vec<AtomicU64>,
    /// Each position's current weight (`current_weight`, default weight mode).
    current_weight: Vec<AtomicU64>,
}

impl Fair {
    /// The scan order of `primary` and fresh counters.
    pub fn build(primary: &PeerList, conf: FairConf) -> Fair {
        let mut order: Vec<usize> = (0..primary.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(primary.peers.get(i).map_or(0, |p| p.weight)));
        let n = order.len();
        Fair {
            conf,
            order,
            cursor: AtomicU64::new(n.saturating_sub(1) as u64),
            total: AtomicU64::new(0),
            last_req: (0..n).map(|_| AtomicU64::new(0)).collect(),
            current_weight: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The scan order (primary peer indices).
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The idle pass from position `start`.
    fn idle(&self, cx: &PickCx<'_>, start: usize) -> Option<usize> {
        let (list, n) = (&cx.plan.primary, self.order.len());
        let idle_mode = self.conf.weight_mode == WeightMode::Idle;
        let mut best: Option<(usize, u64)> = None;
        for p in (0..n).map(|i| (start + i) % n) {
            let index = *self.order.get(p)?;
            let Some(peer) = list.candidate(index, &cx.attempt.tried, cx.now) else {
                continue;
            };
            let (nreq, weight) = (u64::from(peer.slot.conns()), u64::from(peer.weight));
            if peer.slot.fails() > 0 || nreq >= weight || (nreq > 0 && !idle_mode) {
                continue;
            }
            if !idle_mode && !self.conf.no_rr {
                return Some(p);
            }
            match best {
                None => best = Some((p, nreq)),
                Some((_, b)) if nreq > 0 && nreq < b => best = Some((p, nreq)),
                Some(_) => {}
            }
        }
        best.map(|(p, _)| p)
    }

    /// The busy pass from position `start`: the lowest score, the later one on a tie.
    fn busy(&self, cx: &PickCx<'_>, start: usize) -> Option<usize> {
        let (list, n) = (&cx.plan.primary, self.order.len());
        let total = self.total.load(Ordering::Relaxed);
        let mut best: Option<(usize, u64)> = None;
        for p in (0..n).map(|i| (start + i) % n) {
            let index = *self.order.get(p)?;
            let Some(peer) = list.candidate(index, &cx.attempt.tried, cx.now) else {
                continue;
            };
            let nreq = u64::from(peer.slot.conns());
            if self.conf.weight_mode == WeightMode::Peak && nreq >= u64::from(peer.weight) {
                continue;
            }
            let last = self.last_req.get(p).map_or(0, |a| a.load(Ordering::Relaxed));
            let since = total.wrapping_sub(last).min(COUNTER_MAX);
            let mut score = (nreq.min(NREQ_MAX) << COUNTER_BITS) | (COUNTER_MAX - since);
            if self.conf.weight_mode == WeightMode::Default {
                let mut weight = self.current_weight.get(p).map_or(0, |a| a.load(Ordering::Relaxed));
                if peer.max_fails != 0 {
                    let mf = u64::from(peer.max_fails);
                    weight = weight * mf.saturating_sub(u64::from(peer.slot.fails())) / mf;
                }
                score = score.checked_div(weight).unwrap_or(score);
            }
            if best.is_none_or(|(_, b)| score <= b) {
                best = Some((p, score));
            }
        }
        best.map(|(p, _)| p)
    }

    /// The module's bookkeeping for the peer at position `p`: its current weight counts down, its last request
    /// id is now, and (without `no_rr`) the cursor moves to it.
    fn chosen(&self, p: usize, weight: u32) {
        if self.conf.weight_mode == WeightMode::Default {
            if let Some(cw) = self.current_weight.get(p) {
                let _ = cw.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                    Some(if w == 0 { u64::from(weight) } else { w - 1 })
                });
            }
        }
        if let Some(last) = self.last_req.get(p) {
            last.store(self.total.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        if !self.conf.no_rr {
            self.cursor.store(p as u64, Ordering::Relaxed);
        }
    }
}

impl Balancer for Fair {
    /// A request starts: the upstream's request counter moves (the module's `total_requests++`).
    fn start(&self, _attempt: &mut super::AttemptState, _key: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let n = self.order.len();
        if cx.plan.single || cx.attempt.list != ListKind::Primary || n == 0 {
            return round_robin::choose(cx);
        }
        // the request's own cursor (`attempt.hash`): one past its last choice, or one past the upstream's
        let start = match cx.attempt.hash {
            0 => (self.cursor.load(Ordering::Relaxed) as usize + 1) % n,
            after => after as usize % n,
        };
        let p = self.idle(cx, start).or_else(|| self.busy(cx, start))?;
        let index = *self.order.get(p)?;
        let weight = cx.plan.primary.peers.get(index).map_or(1, |peer| peer.weight);
        self.chosen(p, weight);
        cx.attempt.hash = p as u64 + 1;
        Some(Choice {
            list: ListKind::Primary,
            index,
        })
    }

    fn name(&self) -> &'static str {
        "fair"
    }
}

#[cfg(test)]
mod tests;
