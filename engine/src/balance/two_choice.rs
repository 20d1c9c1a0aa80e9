//! The power of two choices: two distinct weighted random draws, the less loaded kept, over any load measure
//! (`random two least_conn` in nginx, and corelb's `random two ewma` and `random two least_time=MODE`).

use super::attempt::AttemptState;
use super::ranges::WeightRanges;
use super::{round_robin, Balancer, Choice, ListKind, Peer, PeerList, PickCx};
use rand::RngCore;
use std::fmt;

/// One draw over `ranges`: `random() % total_weight` with libc's 31-bit `random()`, as nginx draws.
#[inline]
pub fn draw(ranges: &WeightRanges, rng: &mut impl RngCore) -> usize {
    ranges.index_of(u64::from(rng.next_u32() >> 1) % ranges.total().max(1))
}

/// nginx's `random two` walk: two distinct accepted draws, the first counting as a try; the second is kept unless
/// `heavier(second, first)`. `None` after more than 20 misses.
pub fn walk_two(
    list: &PeerList,
    attempt: &mut AttemptState,
    now: u64,
    draw: &mut impl FnMut() -> usize,
    mut heavier: impl FnMut(&Peer, &Peer) -> bool,
) -> Option<usize> {
    let mut prev: Option<usize> = None;
    loop {
        let i = draw();
        let peer = list.candidate(i, &attempt.tried, now).filter(|_| prev != Some(i));
        if let Some(peer) = peer {
            if let Some((f, fp)) = prev.and_then(|f| list.peers.get(f).map(|p| (f, p))) {
                return Some(if heavier(peer, fp) { f } else { i });
            }
            prev = Some(i);
        }
        if attempt.miss() {
            return None;
        }
    }
}

/// A load measure a two-choice balancer compares.
pub trait Load: Send + Sync + fmt::Debug {
    /// Whether `second` is strictly more loaded than `first` per weight, at `now_ms`.
    fn heavier(&self, second: &Peer, first: &Peer, now: u64, now_ms: u64) -> bool;

    /// The method's name as in the config.
    fn name(&self) -> &'static str;
}

/// `random two LOAD`: nginx's random-two walk with another load measure; a lone server, the backup list and more
/// than 20 misses go to round robin, as `random` does.
#[derive(Debug)]
pub struct TwoChoice<L: Load> {
    ranges: WeightRanges,
    load: L,
}

impl<L: Load> TwoChoice<L> {
    /// The primary list's weight ranges (built once per load) and the load measure.
    pub fn build(primary: &PeerList, load: L) -> Self {
        TwoChoice {
            ranges: WeightRanges::new(primary),
            load,
        }
    }

    /// The load measure.
    pub fn load(&self) -> &L {
        &self.load
    }
}

impl<L: Load> Balancer for TwoChoice<L> {
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        if cx.attempt.misses_exhausted()
            || cx.plan.single
            || cx.attempt.list != ListKind::Primary
            || self.ranges.total() == 0
        {
            return round_robin::choose(cx);
        }
        let (now, now_ms) = (cx.now, cx.now_ms);
        let rng = &mut cx.shard.rng;
        let mut one = || draw(&self.ranges, rng);
        let heavier = |second: &Peer, first: &Peer| self.load.heavier(second, first, now, now_ms);
        match walk_two(&cx.plan.primary, cx.attempt, now, &mut one, heavier) {
            Some(index) => Some(Choice {
                list: ListKind::Primary,
                index,
            }),
            None => round_robin::choose(cx),
        }
    }

    fn name(&self) -> &'static str {
        self.load.name()
    }
}
