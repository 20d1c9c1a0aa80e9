//! `PeakEwma`: a peer's peak-EWMA latency (Finagle's and Linkerd's P2C load), kept in the zone beside
//! `least_time`'s averages so that every shard sees the same cost.
//!
//! An observation `rtt` at `t` raises the cost to `rtt` at once when it is above the cost decayed to `t` (the
//! "peak"), and otherwise moves it towards `rtt` by `1 - exp(-Δ/τ)`, Δ being the time since the last observation.
//! A read decays the stored cost to its `now` without writing (Finagle's `get` observes 0, which only decays), so a
//! pick never writes here. Cost and stamp are two atomics: two shards observing at once may pair one's cost with
//! the other's stamp, which skews one decay by the microseconds between the stores, never the peak.

use std::sync::atomic::{AtomicU64, Ordering};

/// Finagle's and Linkerd's decay time τ (ms): a cost falls to 1/e of itself in 10 s without observations.
pub const DECAY_MS: f64 = 10_000.0;

/// `cost` (ms) decayed over `elapsed_ms`.
#[inline]
pub fn decayed(cost: f64, elapsed_ms: u64) -> f64 {
    if elapsed_ms == 0 {
        return cost;
    }
    cost * (-(elapsed_ms as f64) / DECAY_MS).exp()
}

/// The cost after observing `rtt` (ms) `elapsed_ms` after the observation that left `cost`.
#[inline]
pub fn observed(cost: f64, elapsed_ms: u64, rtt: f64) -> f64 {
    let now = decayed(cost, elapsed_ms);
    if rtt > now {
        return rtt;
    }
    let w = (-(elapsed_ms as f64) / DECAY_MS).exp();
    now + rtt * (1.0 - w)
}

/// One peer's peak-EWMA cost (ms, as `f64` bits) and the millisecond clock of its last observation (0 = never).
#[derive(Debug, Default)]
pub struct PeakEwma {
    cost: AtomicU64,
    stamp_ms: AtomicU64,
}

impl PeakEwma {
    /// The cost at `now_ms` (ms); `None` before the first observation.
    #[inline]
    pub fn cost(&self, now_ms: u64) -> Option<f64> {
        let stamp = self.stamp_ms.load(Ordering::Relaxed);
        if stamp == 0 {
            return None;
        }
        let cost = f64::from_bits(self.cost.load(Ordering::Relaxed));
        Some(decayed(cost, now_ms.saturating_sub(stamp)))
    }

    /// Observes a round trip of `rtt_ms` ending at `now_ms` (a clock that is never 0).
    pub fn observe(&self, now_ms: u64, rtt_ms: f64) {
        let before = self.stamp_ms.swap(now_ms.max(1), Ordering::Relaxed);
        let elapsed = if before == 0 { 0 } else { now_ms.saturating_sub(before) };
        let _ = self.cost.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            let cost = if before == 0 { 0.0 } else { f64::from_bits(bits) };
            Some(observed(cost, elapsed, rtt_ms).to_bits())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peak_is_taken_at_once_and_decays_with_tau() {
        let e = PeakEwma::default();
        assert_eq!(e.cost(1_000), None, "never observed");
        e.observe(1_000, 100.0);
        assert_eq!(e.cost(1_000), Some(100.0));
        // one tau later: 100 / e
        let c = e.cost(11_000).unwrap_or(0.0);
        assert!((c - 36.787_944).abs() < 1e-4, "{c}");
        // a higher sample is the cost at once
        e.observe(2_000, 500.0);
        assert_eq!(e.cost(2_000), Some(500.0));
    }

    #[test]
    fn a_lower_sample_moves_the_decayed_cost_by_its_age() {
        // 100 at t=0, 10 after one tau: 100/e + 10 (1 - 1/e)
        let got = observed(100.0, 10_000, 10.0);
        let e1 = (-1.0f64).exp();
        assert!((got - (100.0 * e1 + 10.0 * (1.0 - e1))).abs() < 1e-9, "{got}");
        // at the same instant a lower sample changes nothing
        assert_eq!(observed(100.0, 0, 10.0), 100.0);
        // above the decayed cost it is a peak again
        assert_eq!(observed(100.0, 10_000, 40.0), 40.0);
    }
}
