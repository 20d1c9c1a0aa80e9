//! `ShardSlot`: one cache-line-aligned record of a shard's connection and request counters and event-loop lag, kept
//! in the zone.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a shard's counters, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShardStats {
    /// Client connections accepted (HTTP and stream).
    pub accepted: u64,
    /// Client connections open now.
    pub active: u64,
    /// Request heads parsed and routed.
    pub requests: u64,
    /// Requests with malformed input (refused with 400, or cut off when the answer had already begun): request line,
    /// header, oversized head, chunk sizes, CL+TE.
    pub bad_requests: u64,
    /// Clients that closed in the middle of a request (nginx's 499).
    pub client_aborts: u64,
    /// 502 answers (upstream error, no live upstream).
    pub bad_gateway: u64,
    /// 504 answers (upstream timeout).
    pub gateway_timeout: u64,
    /// How late the shard's last periodic tick woke, microseconds (event-loop lag).
    pub loop_lag_us: u64,
    /// The largest such lag seen since the shard started, microseconds.
    pub loop_lag_max_us: u64,
    /// HTTP requests begun (their first byte arrived), as nginx's stub_status counts `requests`: rejected heads
    /// and heads a client left half-way included.
    pub http_requests: u64,
    /// HTTP connections reading a request head now (nginx's `Reading`).
    pub reading: u64,
    /// HTTP connections with a request past its head now: its body, the upstream, the answer (nginx's `Writing`).
    pub writing: u64,
    /// HTTP connections waiting for the first byte of a request now (nginx's `Waiting`: idle keepalive and new).
    pub waiting: u64,
    /// TLS handshakes done (nginx Plus's `/ssl`).
    pub handshakes: u64,
    /// Those of them that resumed a session.
    pub session_reuses: u64,
    /// Handshakes that failed: a bad or truncated hello, a timeout, a refusal.
    pub handshakes_failed: u64,
}

/// Where an HTTP connection is, as nginx's stub_status counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpPhase {
    /// Not counted in any phase (closing, or not yet started).
    None,
    /// Waiting for the first byte of a request.
    Waiting,
    /// Reading a request head.
    Reading,
    /// Past the head: body, upstream and answer.
    Writing,
}

/// The counters of one shard. Only that shard writes them; anyone may read them. Every access is `Relaxed`: each
/// field is an independent counter and a reader needs no ordering between them.
#[derive(Debug, Default)]
#[repr(align(128))] // two lines: adjacent-line prefetch must not couple two shards' slots
pub struct ShardSlot {
    accepted: AtomicU64,
    active: AtomicU64,
    requests: AtomicU64,
    bad_requests: AtomicU64,
    client_aborts: AtomicU64,
    bad_gateway: AtomicU64,
    gateway_timeout: AtomicU64,
    loop_lag_us: AtomicU64,
    loop_lag_max_us: AtomicU64,
    http_requests: AtomicU64,
    reading: AtomicU64,
    writing: AtomicU64,
    waiting: AtomicU64,
    handshakes: AtomicU64,
    session_reuses: AtomicU64,
    handshakes_failed: AtomicU64,
}

impl ShardSlot {
    /// A slot with every counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A client connection was accepted (and is now open).
    pub fn connection_opened(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    /// A client connection closed.
    pub fn connection_closed(&self) {
        // Never below zero, even if a caller closes more than it opened.
        let _ = self
            .active
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| a.checked_sub(1));
    }

    /// A request head was parsed and routed.
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was answered with `status` by the proxy itself (a refusal or an upstream error page): 400 counts
    /// as a bad request, 502 and 504 in their own counters, other statuses nowhere.
    pub fn count_answer(&self, status: u16) {
        let counter = match status {
            400 => &self.bad_requests,
            502 => &self.bad_gateway,
            504 => &self.gateway_timeout,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's input was malformed.
    pub fn count_bad_request(&self) {
        self.bad_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A TLS handshake was done; `reused`: it resumed a session.
    pub fn count_handshake(&self, reused: bool) {
        self.handshakes.fetch_add(1, Ordering::Relaxed);
        if reused {
            self.session_reuses.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A TLS handshake failed.
    pub fn count_handshake_failed(&self) {
        self.handshakes_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The client went away in the middle of a request (head or body).
    pub fn count_client_abort(&self) {
        self.client_aborts.fetch_add(1, Ordering::Relaxed);
    }

    /// The shard's periodic tick woke `lag` later than asked: kept as the last lag and folded into the maximum.
    pub fn record_loop_lag(&self, lag: std::time::Duration) {
        let micros = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        self.loop_lag_us.store(micros, Ordering::Relaxed);
        self.loop_lag_max_us.fetch_max(micros, Ordering::Relaxed);
    }

    /// An HTTP connection moved from phase `from` to `to`; entering `Reading` from another phase begins a request.
    /// Only the shard that owns the slot calls this, so a load and a store (no read-modify-write) keep each gauge.
    pub fn move_phase(&self, from: HttpPhase, to: HttpPhase) {
        if from == to {
            return;
        }
        if let Some(gauge) = self.phase_gauge(from) {
            gauge.store(gauge.load(Ordering::Relaxed).saturating_sub(1), Ordering::Relaxed);
        }
        if let Some(gauge) = self.phase_gauge(to) {
            gauge.store(gauge.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
        if to == HttpPhase::Reading {
            let begun = &self.http_requests;
            begun.store(begun.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
    }

    fn phase_gauge(&self, phase: HttpPhase) -> Option<&AtomicU64> {
        match phase {
            HttpPhase::None => None,
            HttpPhase::Waiting => Some(&self.waiting),
            HttpPhase::Reading => Some(&self.reading),
            HttpPhase::Writing => Some(&self.writing),
        }
    }

    /// The counters now.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            accepted: self.accepted.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            bad_requests: self.bad_requests.load(Ordering::Relaxed),
            client_aborts: self.client_aborts.load(Ordering::Relaxed),
            bad_gateway: self.bad_gateway.load(Ordering::Relaxed),
            gateway_timeout: self.gateway_timeout.load(Ordering::Relaxed),
            loop_lag_us: self.loop_lag_us.load(Ordering::Relaxed),
            loop_lag_max_us: self.loop_lag_max_us.load(Ordering::Relaxed),
            http_requests: self.http_requests.load(Ordering::Relaxed),
            reading: self.reading.load(Ordering::Relaxed),
            writing: self.writing.load(Ordering::Relaxed),
            waiting: self.waiting.load(Ordering::Relaxed),
            handshakes: self.handshakes.load(Ordering::Relaxed),
            session_reuses: self.session_reuses.load(Ordering::Relaxed),
            handshakes_failed: self.handshakes_failed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn slots_fill_their_own_cache_lines() {
        assert_eq!(std::mem::align_of::<ShardSlot>(), 128);
        assert_eq!(std::mem::size_of::<ShardSlot>(), 128);
    }

    #[test]
    fn counts_each_kind() {
        let s = ShardSlot::new();
        s.connection_opened();
        s.connection_opened();
        s.connection_closed();
        s.count_request();
        for status in [400, 400, 502, 504, 413, 200] {
            s.count_answer(status);
        }
        s.count_client_abort();
        s.count_handshake(false);
        s.count_handshake(true);
        s.count_handshake_failed();
        let want = ShardStats {
            accepted: 2,
            active: 1,
            requests: 1,
            bad_requests: 2,
            client_aborts: 1,
            bad_gateway: 1,
            gateway_timeout: 1,
            loop_lag_us: 0,
            loop_lag_max_us: 0,
            handshakes: 2,
            session_reuses: 1,
            handshakes_failed: 1,
            ..ShardStats::default()
        };
        assert_eq!(s.stats(), want);
    }

    #[test]
    fn phases_move_one_connection_and_count_begun_requests() {
        use HttpPhase::*;
        let s = ShardSlot::new();
        let phases = |s: &ShardSlot| {
            let st = s.stats();
            (st.waiting, st.reading, st.writing, st.http_requests)
        };
        s.move_phase(None, Waiting);
        s.move_phase(None, Waiting);
        assert_eq!(phases(&s), (2, 0, 0, 0));
        s.move_phase(Waiting, Reading);
        s.move_phase(Reading, Reading);
        assert_eq!(phases(&s), (1, 1, 0, 1));
        s.move_phase(Reading, Writing);
        s.move_phase(Writing, Reading); // a pipelined request begins
        assert_eq!(phases(&s), (1, 1, 0, 2));
        s.move_phase(Reading, Writing);
        s.move_phase(Writing, None);
        s.move_phase(Waiting, None);
        assert_eq!(phases(&s), (0, 0, 0, 2));
        s.move_phase(Writing, None); // more closes than opens stay at zero
        assert_eq!(phases(&s), (0, 0, 0, 2));
    }

    #[test]
    fn loop_lag_keeps_the_last_and_the_max() {
        let s = ShardSlot::new();
        s.record_loop_lag(std::time::Duration::from_micros(300));
        s.record_loop_lag(std::time::Duration::from_millis(7));
        s.record_loop_lag(std::time::Duration::from_micros(40));
        let st = s.stats();
        assert_eq!((st.loop_lag_us, st.loop_lag_max_us), (40, 7_000));
    }

    #[test]
    fn active_never_goes_below_zero() {
        let s = ShardSlot::new();
        s.connection_closed();
        assert_eq!(s.stats().active, 0);
    }

    #[test]
    fn readers_on_other_threads_see_the_counts() {
        let s = Arc::new(ShardSlot::new());
        let writer = Arc::clone(&s);
        std::thread::spawn(move || {
            for _ in 0..10_000 {
                writer.connection_opened();
                writer.count_request();
                writer.connection_closed();
            }
        })
        .join()
        .unwrap();
        let st = s.stats();
        assert_eq!((st.accepted, st.active, st.requests), (10_000, 0, 10_000));
    }
}
