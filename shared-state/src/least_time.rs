//! `PeerTimes`: a peer's `least_time` moving averages and in-flight accounting, as nginx keeps them in the zone.
//!
//! nginx updates these under the peer's lock; here each field is its own atomic. The averages are read-modify-write
//! loops (`fetch_update`), so two shards recording at once both land. The in-flight sum (`inflight_last`) and its
//! time stamp are two atomics: a pick and a completion racing on two shards may see one updated and not the other,
//! which skews one `inflight_time` sample by the interval between the two stores (microseconds), never the counts.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// nginx's `ngx_http_upstream_response_time_avg`: the first sample as is, then
/// `0.5 + 0.05 * v + 0.95 * avg` truncated to whole milliseconds (a rounded exponential moving average).
#[inline]
pub fn time_avg(avg: u64, v: u64) -> u64 {
    if avg == 0 {
        return v;
    }
    // nginx's own double arithmetic, term for term, so that the rounding at .5 boundaries is the same; the cast
    // truncates (and saturates) as C's assignment to `ngx_msec_t` truncates.
    (0.5 + (v as f64 * 0.05 + avg as f64 * 0.95)) as u64
}

/// One peer's `least_time` state (milliseconds; `*_changed` on the caller's millisecond clock).
#[derive(Debug, Default)]
pub struct PeerTimes {
    header: AtomicU64,
    response: AtomicU64,
    connect: AtomicU64,
    first_byte: AtomicU64,
    inflight_reqs: AtomicU32,
    inflight_last: AtomicU64,
    inflight_changed: AtomicU64,
    inflight_time: AtomicU64,
}

/// Which moving average.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeMetric {
    /// To the response header (http `header`).
    Header,
    /// To the last byte (http and stream `last_byte`; nginx's `response_time`).
    Response,
    /// To the connection (stream `connect`).
    Connect,
    /// To the first byte from the upstream (stream `first_byte`).
    FirstByte,
}

impl PeerTimes {
    fn cell(&self, m: TimeMetric) -> &AtomicU64 {
        match m {
            TimeMetric::Header => &self.header,
            TimeMetric::Response => &self.response,
            TimeMetric::Connect => &self.connect,
            TimeMetric::FirstByte => &self.first_byte,
        }
    }

    /// The moving average of `m`, in milliseconds (0 = no sample yet).
    pub fn avg(&self, m: TimeMetric) -> u64 {
        self.cell(m).load(Ordering::Relaxed)
    }

    /// Adds the sample `ms` to the moving average of `m`.
    pub fn record(&self, m: TimeMetric, ms: u64) {
        let _ = self
            .cell(m)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| Some(time_avg(avg, ms)));
    }

    /// Requests picked with `inflight` accounting and not finished yet.
    pub fn inflight_reqs(&self) -> u32 {
        self.inflight_reqs.load(Ordering::Relaxed)
    }

    /// The moving average of in-flight times (nginx's `inflight_time`).
    pub fn inflight_time(&self) -> u64 {
        self.inflight_time.load(Ordering::Relaxed)
    }

    /// During a scan (nginx's `get` loop), while requests are in flight: averages their mean age at `now_ms`,
    /// `inflight_last / inflight_reqs + (now - inflight_reqs_changed)`, into `inflight_time`.
    pub fn sample_inflight(&self, now_ms: u64) {
        let reqs = u64::from(self.inflight_reqs());
        if reqs == 0 {
            return;
        }
        let last = self.inflight_last.load(Ordering::Relaxed);
        let changed = self.inflight_changed.load(Ordering::Relaxed);
        let ift = last / reqs + now_ms.saturating_sub(changed);
        let _ = self
            .inflight_time
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| Some(time_avg(avg, ift)));
    }

    /// A request picked with `inflight`: the time the ones already in flight spent so far goes into
    /// `inflight_last`, and one more is in flight from `now_ms`.
    pub fn inflight_start(&self, now_ms: u64) {
        let before = self.inflight_changed.swap(now_ms, Ordering::Relaxed);
        let reqs = self.inflight_reqs.fetch_add(1, Ordering::Relaxed);
        if reqs > 0 {
            let spent = now_ms.saturating_sub(before).saturating_mul(u64::from(reqs));
            self.inflight_last.fetch_add(spent, Ordering::Relaxed);
        }
    }

    /// nginx's `inflight_done`: one in-flight request finished after `last_ms`; with none left the sum is
    /// cleared, otherwise the others' time is added and the finished one's taken out.
    pub fn inflight_done(&self, now_ms: u64, last_ms: u64) {
        let reqs = self.inflight_reqs();
        if reqs == 0 {
            return;
        }
        if reqs == 1 {
            self.inflight_last.store(0, Ordering::Relaxed);
        } else {
            let before = self.inflight_changed.swap(now_ms, Ordering::Relaxed);
            let spent = now_ms.saturating_sub(before).saturating_mul(u64::from(reqs));
            let _ = self
                .inflight_last
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                    Some(l.saturating_add(spent).saturating_sub(last_ms))
                });
        }
        let _ = self
            .inflight_reqs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_is_nginx_s_rounded_ema() {
        assert_eq!(time_avg(0, 700), 700);
        // 0.5 + 0.05*100 + 0.95*700 = 670.5 -> 670
        assert_eq!(time_avg(700, 100), 670);
        // 0.5 + 0.05*0 + 0.95*1 = 1.45 -> 1: an average of 1 never decays by samples of 0
        assert_eq!(time_avg(1, 0), 1);
        // 0.5 + 0.05*3 + 0.95*10 = 10.15 -> 10
        assert_eq!(time_avg(10, 3), 10);
        // 0.5 + 0.05*30 + 0.95*10 = 11.5 -> 11
        assert_eq!(time_avg(10, 30), 11);
        // 0.5 + 0 + 9.5 = 10
        assert_eq!(time_avg(10, 0), 10);
    }

    #[test]
    fn records_go_to_their_metric() {
        let t = PeerTimes::default();
        t.record(TimeMetric::Header, 40);
        t.record(TimeMetric::Header, 60);
        t.record(TimeMetric::Response, 500);
        assert_eq!(t.avg(TimeMetric::Header), 41); // 0.5 + 3 + 38 = 41.5
        assert_eq!(t.avg(TimeMetric::Response), 500);
        assert_eq!((t.avg(TimeMetric::Connect), t.avg(TimeMetric::FirstByte)), (0, 0));
    }

    #[test]
    fn inflight_accounting_follows_nginx() {
        let t = PeerTimes::default();
        t.sample_inflight(1_000);
        assert_eq!(t.inflight_time(), 0, "nothing in flight: no sample");
        t.inflight_start(1_000);
        t.inflight_start(1_100); // last += 100 * 1
        t.sample_inflight(1_200); // 100 / 2 + 100 = 150
        assert_eq!((t.inflight_reqs(), t.inflight_time()), (2, 150));
        // the first finishes at 1300 after 300 ms: last = 100 + 200 * 2 - 300 = 200
        t.inflight_done(1_300, 300);
        t.sample_inflight(1_300); // 200 / 1 + 0 = 200; avg 0.5 + 10 + 142.5 = 153
        assert_eq!((t.inflight_reqs(), t.inflight_time()), (1, 153));
        t.inflight_done(1_400, 300);
        assert_eq!(t.inflight_reqs(), 0);
        t.inflight_start(2_000);
        t.sample_inflight(2_050); // the sum was cleared: 0 / 1 + 50
        assert_eq!(t.inflight_time(), 148); // 0.5 + 2.5 + 145.35 = 148.35
    }
}
