//! `LatencyHistogram`: a peer's upstream response times as fixed Prometheus buckets of atomic counters, one
//! cache-line stripe per shard, recorded lock-free with two relaxed adds and merged when read.
//!
//! Why atomic buckets and not an `hdrhistogram` per shard: an `hdrhistogram::Histogram` needs `&mut` to record, so
//! a per-shard copy can only be read by the shard that owns it, and a scrape (which runs on whichever shard took
//! it) would have to ask every other shard for a copy and wait for the answers, across two runtimes whose executors
//! must never block. The exposition is a classic Prometheus histogram with fixed `le` bounds anyway, so the
//! buckets are exactly what is kept: a record is a bucket search over 14 bounds, one `fetch_add` on the bucket and
//! one on the sum. Each shard writes its own stripe (shard index modulo the stripe count), so two shards serving
//! the same peer never contend on a line; a reader sums the stripes. The count is the sum of the buckets, so it
//! always equals the number of records a reader saw, bucket by bucket.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The finite upper bounds of the buckets, in microseconds (`le` = 0.0005 s … 10 s); a last bucket is `+Inf`.
pub const LATENCY_BOUNDS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
    10_000_000,
];

/// Buckets per histogram: the finite bounds and `+Inf`.
pub const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// The most stripes a histogram gets (more shards than this share stripes, still correctly).
const MAX_STRIPES: usize = 256;

/// One shard's counters: the buckets and the sum fill exactly one 128-byte line pair.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    buckets: [AtomicU64; LATENCY_BUCKETS],
    sum_us: AtomicU64,
}

/// A merged reading of a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatencySnapshot {
    /// Records per bucket (not cumulative), by [`LATENCY_BOUNDS_US`] then `+Inf`.
    pub buckets: [u64; LATENCY_BUCKETS],
    /// Σ recorded times, microseconds.
    pub sum_us: u64,
}

impl LatencySnapshot {
    /// Records in all buckets.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// Upstream response times of one peer, striped by shard.
#[derive(Debug)]
pub struct LatencyHistogram {
    stripes: Box<[Stripe]>,
}

impl Default for LatencyHistogram {
    /// One stripe per CPU the process may run on.
    fn default() -> Self {
        Self::new(default_stripes())
    }
}

/// The stripe count of [`LatencyHistogram::default`]: the available parallelism, asked once per process.
fn default_stripes() -> usize {
    static STRIPES: OnceLock<usize> = OnceLock::new();
    *STRIPES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The bucket of `micros`: the first bound `>=` it (Prometheus's `le`), or `+Inf`.
#[inline]
pub fn bucket_index(micros: u64) -> usize {
    LATENCY_BOUNDS_US.partition_point(|&bound| bound < micros)
}

impl LatencyHistogram {
    /// A histogram with `stripes` stripes (at least 1, at most 256).
    pub fn new(stripes: usize) -> Self {
        let n = stripes.clamp(1, MAX_STRIPES);
        LatencyHistogram {
            stripes: (0..n).map(|_| Stripe::default()).collect(),
        }
    }

    /// How many stripes the histogram has.
    pub fn stripes(&self) -> usize {
        self.stripes.len()
    }

    /// Records one response time taken on shard `shard`: two relaxed adds on that shard's stripe.
    #[inline]
    pub fn record(&self, shard: usize, micros: u64) {
        // `stripes` is never empty (see `new`), so the modulo is defined and the index is in range.
        let Some(stripe) = self.stripes.get(shard % self.stripes.len()) else {
            return;
        };
        if let Some(bucket) = stripe.buckets.get(bucket_index(micros)) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        stripe.sum_us.fetch_add(micros, Ordering::Relaxed);
    }

    /// The sum of every stripe (read bucket by bucket, not as one instant).
    pub fn snapshot(&self) -> LatencySnapshot {
        let mut out = LatencySnapshot::default();
        for stripe in self.stripes.iter() {
            for (total, bucket) in out.buckets.iter_mut().zip(&stripe.buckets) {
                *total += bucket.load(Ordering::Relaxed);
            }
            out.sum_us += stripe.sum_us.load(Ordering::Relaxed);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_stripe_is_one_line_pair() {
        assert_eq!(std::mem::size_of::<Stripe>(), 128);
        assert_eq!(std::mem::align_of::<Stripe>(), 128);
    }

    #[test]
    fn bounds_are_inclusive_upper_limits() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(500), 0);
        assert_eq!(bucket_index(501), 1);
        assert_eq!(bucket_index(1_000), 1);
        assert_eq!(bucket_index(99_999), 7);
        assert_eq!(bucket_index(10_000_000), 13);
        assert_eq!(bucket_index(10_000_001), 14);
        assert_eq!(bucket_index(u64::MAX), LATENCY_BUCKETS - 1);
        assert!(LATENCY_BOUNDS_US.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn records_merge_over_stripes() {
        let h = LatencyHistogram::new(3);
        assert_eq!(h.stripes(), 3);
        h.record(0, 400);
        h.record(1, 400);
        h.record(2, 3_000);
        h.record(7, 20_000_000); // shard 7 shares stripe 1
        let s = h.snapshot();
        assert_eq!(s.count(), 4);
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[3], 1);
        assert_eq!(s.buckets[LATENCY_BUCKETS - 1], 1);
        assert_eq!(s.sum_us, 400 + 400 + 3_000 + 20_000_000);
    }

    #[test]
    fn stripe_count_is_clamped() {
        assert_eq!(LatencyHistogram::new(0).stripes(), 1);
        assert_eq!(LatencyHistogram::new(10_000).stripes(), MAX_STRIPES);
        assert!(LatencyHistogram::default().stripes() >= 1);
    }

    #[test]
    fn concurrent_records_are_all_counted() {
        let h = Arc::new(LatencyHistogram::new(2));
        let threads: Vec<_> = (0..4)
            .map(|shard| {
                let h = Arc::clone(&h);
                std::thread::spawn(move || {
                    for i in 0..5_000u64 {
                        h.record(shard, i * 10);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 20_000);
        assert_eq!(s.sum_us, 4 * (0..5_000u64).map(|i| i * 10).sum::<u64>());
    }
}
