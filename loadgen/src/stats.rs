//! What one shard measures (two latency histograms, status counts, socket errors, bytes), recorded without locks
//! on the shard's own thread and merged across shards at the end.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Latencies are recorded in microseconds, 1 µs to 1 hour, 3 significant digits (as wrk2 does).
pub const HIGHEST_MICROS: u64 = 3_600_000_000;
/// Significant digits kept by the histograms.
pub const SIGFIG: u8 = 3;

/// A fresh latency histogram.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (1 ≤ low, 2·low ≤ high, sigfig ≤ 5).
    Histogram::new_with_bounds(1, HIGHEST_MICROS, SIGFIG).unwrap_or_else(|_| unreachable!("valid constant bounds"))
}

/// A duration in whole microseconds, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Socket errors by kind, counted as wrk does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketErrors {
    /// Connects that failed or timed out.
    pub connect: u64,
    /// Reads that failed, and responses cut short or invalid.
    pub read: u64,
    /// Writes that failed.
    pub write: u64,
    /// Requests not answered within the request timeout.
    pub timeout: u64,
}

impl SocketErrors {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }

    fn add(&mut self, o: &SocketErrors) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
    }
}

/// The kind of a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The connect failed or timed out.
    Connect,
    /// A read failed or the response was cut short or invalid.
    Read,
    /// The write failed.
    Write,
    /// No response within the request timeout.
    Timeout,
}

/// One shard's measurements (or, after [`ShardStats::merge`], all shards').
#[derive(Debug, Clone)]
pub struct ShardStats {
    /// Latency from when each request should have been sent (the schedule): coordinated omission corrected.
    pub corrected: Histogram<u64>,
    /// Latency from when each request was actually sent.
    pub uncorrected: Histogram<u64>,
    /// Responses by status code (index = status, 0..=999); all zero in echo mode.
    pub statuses: Box<[u64; 1000]>,
    /// Failed requests in the measured window, by kind.
    pub errors: SocketErrors,
    /// Completed requests in the measured window.
    pub requests: u64,
    /// Bytes read in the measured window.
    pub bytes_read: u64,
    /// Bytes written in the measured window.
    pub bytes_written: u64,
    /// Completed requests and errors since the start, warmup included (for the progress line).
    pub progress_requests: u64,
    /// Failed requests since the start, warmup included (for the progress line).
    pub progress_errors: u64,
}

impl Default for ShardStats {
    fn default() -> Self {
        ShardStats {
            corrected: new_histogram(),
            uncorrected: new_histogram(),
            statuses: Box::new([0; 1000]),
            errors: SocketErrors::default(),
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            progress_requests: 0,
            progress_errors: 0,
        }
    }
}

/// One completed request.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// From the scheduled send time (open loop) or the write (closed loop) to the response's end.
    pub corrected: Duration,
    /// From the write to the response's end.
    pub uncorrected: Duration,
    /// The status code, `None` in echo mode.
    pub status: Option<u16>,
    /// Bytes read.
    pub read: u64,
    /// Bytes written.
    pub written: u64,
}

impl ShardStats {
    /// Records a completed request; `measured` is false during the warmup.
    pub fn record(&mut self, s: &Sample, measured: bool) {
        self.progress_requests += 1;
        if !measured {
            return;
        }
        self.requests += 1;
        self.corrected.saturating_record(micros(s.corrected));
        self.uncorrected.saturating_record(micros(s.uncorrected));
        if let Some(slot) = s.status.and_then(|c| self.statuses.get_mut(usize::from(c))) {
            *slot += 1;
        }
        self.bytes_read += s.read;
        self.bytes_written += s.written;
    }

    /// Counts a failed request; `measured` is false during the warmup.
    pub fn record_error(&mut self, kind: ErrorKind, measured: bool) {
        self.progress_errors += 1;
        if !measured {
            return;
        }
        let e = &mut self.errors;
        match kind {
            ErrorKind::Connect => e.connect += 1,
            ErrorKind::Read => e.read += 1,
            ErrorKind::Write => e.write += 1,
            ErrorKind::Timeout => e.timeout += 1,
        }
    }

    /// Adds another shard's measurements to these.
    pub fn merge(&mut self, o: &ShardStats) {
        // Both histograms have the same bounds, and saturating records keep every value in range.
        let _ = self.corrected.add(&o.corrected);
        let _ = self.uncorrected.add(&o.uncorrected);
        for (a, b) in self.statuses.iter_mut().zip(o.statuses.iter()) {
            *a += b;
        }
        self.errors.add(&o.errors);
        self.requests += o.requests;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.progress_requests += o.progress_requests;
        self.progress_errors += o.progress_errors;
    }

    /// `(status, count)` for every status seen, ascending.
    pub fn status_counts(&self) -> Vec<(u16, u64)> {
        (0u16..)
            .zip(self.statuses.iter())
            .filter(|(_, &n)| n > 0)
            .map(|(s, &n)| (s, n))
            .collect()
    }

    /// Responses whose status is not 2xx or 3xx.
    pub fn non_2xx_3xx(&self) -> u64 {
        self.status_counts()
            .iter()
            .filter(|(s, _)| !(200..400).contains(s))
            .map(|(_, n)| n)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, status: u16) -> Sample {
        Sample {
            corrected: Duration::from_millis(ms),
            uncorrected: Duration::from_millis(ms / 2),
            status: Some(status),
            read: 10,
            written: 5,
        }
    }

    #[test]
    fn records_and_merges() {
        let mut a = ShardStats::default();
        a.record(&sample(4, 200), false);
        a.record(&sample(10, 200), true);
        a.record_error(ErrorKind::Timeout, true);
        let mut b = ShardStats::default();
        b.record(&sample(20, 503), true);
        b.record_error(ErrorKind::Connect, false);
        a.merge(&b);
        assert_eq!((a.requests, a.progress_requests, a.progress_errors), (2, 3, 2));
        assert_eq!(a.errors.total(), 1);
        assert_eq!(a.status_counts(), vec![(200, 1), (503, 1)]);
        assert_eq!(a.non_2xx_3xx(), 1);
        assert_eq!((a.bytes_read, a.bytes_written), (20, 10));
        assert!(a.corrected.equivalent(a.corrected.max(), 20_000));
        assert!(a.uncorrected.equivalent(a.uncorrected.max(), 10_000));
        assert_eq!(a.corrected.len(), 2);
    }
}
