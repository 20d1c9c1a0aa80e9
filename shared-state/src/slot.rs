//! `PeerSlot`: one cache-line-aligned record of atomics per peer (conns, fails, checked, accessed, flags, counters,
//! the slow-start origin `recovered_at`, the active health checks' record, and the response time histogram).

use crate::agent::AgentSlot;
use crate::guard::ConnGuard;
use crate::latency::LatencyHistogram;
use crate::least_time::PeerTimes;
use crate::peak_ewma::PeakEwma;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Administrative and health state bits of a peer, as seen by every shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerFlags(u32);

impl PeerFlags {
    /// Marked down at run time (the API's `down`), on top of the config's `down`.
    pub const ADMIN_DOWN: PeerFlags = PeerFlags(1);
    /// Failed its active health checks.
    pub const UNHEALTHY: PeerFlags = PeerFlags(1 << 1);
    /// Draining: no new requests, in-flight ones finish.
    pub const DRAINING: PeerFlags = PeerFlags(1 << 2);
    /// Waiting for its first health check (`mandatory`).
    pub const CHECKING: PeerFlags = PeerFlags(1 << 3);
    /// Its agent said `down` (or `fail`, `stopped`); only the agent's `up` clears it.
    pub const AGENT_DOWN: PeerFlags = PeerFlags(1 << 4);
    /// Its agent said `maint`; only the agent's `ready` (or `drain`) clears it.
    pub const AGENT_MAINT: PeerFlags = PeerFlags(1 << 5);
    /// Its agent said `drain`: no new requests, as `DRAINING`; the agent's `ready` (or `maint`) clears it.
    pub const AGENT_DRAIN: PeerFlags = PeerFlags(1 << 6);
    /// Its agent's weight is 0 (set by a config build from the agent's weight): no new requests, as `DRAINING`.
    pub const AGENT_ZERO: PeerFlags = PeerFlags(1 << 7);

    /// Flags under which a peer takes no new requests.
    pub const NOT_SELECTABLE: PeerFlags = PeerFlags(0xff);
    /// The flags that still let a peer take requests bound to it (`sticky`): the draining kinds.
    pub const DRAIN_KINDS: PeerFlags = PeerFlags((1 << 2) | (1 << 6) | (1 << 7));

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether any bit of `other` is set in `self`.
    pub const fn intersects(self, other: PeerFlags) -> bool {
        self.0 & other.0 != 0
    }
}

/// The class of an upstream response status, for the per-peer counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// 1xx.
    Informational = 0,
    /// 2xx.
    Success = 1,
    /// 3xx.
    Redirection = 2,
    /// 4xx.
    ClientError = 3,
    /// 5xx.
    ServerError = 4,
}

impl StatusClass {
    /// The class of an HTTP status code; `None` outside 100..=599.
    pub fn of(status: u16) -> Option<StatusClass> {
        Some(match status {
            100..=199 => StatusClass::Informational,
            200..=299 => StatusClass::Success,
            300..=399 => StatusClass::Redirection,
            400..=499 => StatusClass::ClientError,
            500..=599 => StatusClass::ServerError,
            _ => return None,
        })
    }
}

/// A snapshot of a slot's counters, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerStats {
    /// Active connections (nginx's `conns`), over all shards.
    pub conns: u32,
    /// Failures counted in the current `fail_timeout` window (nginx's `fails`).
    pub fails: u32,
    /// When the peer was last checked (seconds; nginx's `checked`).
    pub checked: u64,
    /// When the peer last failed (seconds; nginx's `accessed`).
    pub accessed: u64,
    /// The peer's state bits ([`PeerFlags`]: down, drain, unhealthy...).
    pub flags: u32,
    /// Times a balancer chose the peer.
    pub selected: u64,
    /// When the peer was last selected (seconds; 0 = never).
    pub last_selected: u64,
    /// Requests sent to the peer.
    pub requests: u64,
    /// Responses by status class, indexed by [`StatusClass`].
    pub responses: [u64; 5],
    /// Tries that failed (connect errors, timeouts, invalid headers, retried statuses).
    pub failures: u64,
    /// Bytes sent to the peer.
    pub bytes_sent: u64,
    /// Bytes received from the peer.
    pub bytes_received: u64,
    /// When the peer last came back (seconds; 0 = never), the start of its slow-start ramp.
    pub recovered_at: u64,
    /// How many times failures reached `max_fails` and took the peer out of rotation (nginx Plus's `unavail`).
    pub unavail: u64,
    /// The peer's id in its upstream (the API's `id`), given by the zone.
    pub id: u32,
    /// What the active health checks recorded.
    pub health: HealthStats,
}

/// The active health checks' record of a peer, for metrics and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealthStats {
    /// Probes run.
    pub checks: u64,
    /// Probes that failed.
    pub fails: u64,
    /// Consecutive failed probes (0 after a pass).
    pub consecutive_fails: u32,
    /// Consecutive passed probes (0 after a failure).
    pub consecutive_passes: u32,
    /// The HTTP status of the last probe's response; 0 for none (a TCP check, or no response).
    pub last_status: u16,
    /// Whether the last probe passed.
    pub last_passed: bool,
    /// Times the checks turned the peer unhealthy.
    pub unhealthy: u64,
}

/// The shared state of one peer. Times are whole seconds (nginx's `ngx_time()`), passed in by the caller.
///
/// All accesses are `Relaxed` unless a comment says otherwise: each field is an independent counter, and nginx itself
/// reads `fails`/`checked` under a lock only to keep its non-atomic fields consistent.
#[derive(Debug, Default)]
#[repr(align(128))] // two lines: adjacent-line prefetch must not couple two peers' slots
pub struct PeerSlot {
    conns: AtomicU32,
    fails: AtomicU32,
    flags: AtomicU32,
    /// Set once by the zone when the slot is made; an `AtomicU32` only so the slot stays `Default`.
    id: AtomicU32,
    checked: AtomicU64,
    accessed: AtomicU64,
    selected: AtomicU64,
    last_selected: AtomicU64,
    requests: AtomicU64,
    responses: [AtomicU64; 5],
    failures: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    recovered_at: AtomicU64,
    hc_checks: AtomicU64,
    hc_fails: AtomicU64,
    /// Consecutive fails (low 32 bits) and passes (high 32 bits), written together by the one checker.
    hc_streak: AtomicU64,
    /// The last probe's status (low 16 bits) and pass bit (bit 16).
    hc_last: AtomicU32,
    /// Times the health checks turned the peer unhealthy.
    hc_unhealthy: AtomicU64,
    /// Times failures reached `max_fails` and took the peer out (nginx Plus's `unavail`).
    unavail: AtomicU64,
    /// Upstream response times, one stripe per shard (out of line: its own cache lines).
    latency: LatencyHistogram,
    /// `least_time`'s moving averages and in-flight accounting (written only by `least_time` upstreams).
    times: PeerTimes,
    /// The P2C balancer's peak-EWMA latency (written only by `random two ewma` upstreams).
    ewma: PeakEwma,
    /// What the peer's agent set and the load its responses reported (written only with an agent or reports).
    agent: AgentSlot,
}

impl PeerSlot {
    /// A fresh slot: no connections, no failures.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh slot with the API id `id` (the zone numbers each upstream's peers).
    pub fn with_id(id: u32) -> Self {
        let slot = Self::default();
        slot.id.store(id, Ordering::Relaxed);
        slot
    }

    /// The peer's id in its upstream (nginx Plus's server `id`): kept as long as the slot is.
    pub fn id(&self) -> u32 {
        self.id.load(Ordering::Relaxed)
    }

    pub(crate) fn conns_atomic(&self) -> &AtomicU32 {
        &self.conns
    }

    /// Active connections (held between pick and the end of the attempt), across all shards.
    pub fn conns(&self) -> u32 {
        self.conns.load(Ordering::Relaxed)
    }

    /// Whether `max_conns` (0 = unlimited) leaves room for one more connection right now.
    pub fn has_room(&self, max_conns: u32) -> bool {
        max_conns == 0 || self.conns() < max_conns
    }

    /// Takes one connection unit. With `max_conns > 0` this is a compare-and-swap that never takes `conns` past
    /// the limit, however many threads race; `None` means the peer is full.
    pub fn try_acquire(&self, max_conns: u32) -> Option<ConnGuard<'_>> {
        if max_conns == 0 {
            self.conns.fetch_add(1, Ordering::Relaxed);
            return Some(ConnGuard::new(self));
        }
        // Acquire on the load pairs with the Release in `ConnGuard::drop`.
        let mut cur = self.conns.load(Ordering::Acquire);
        loop {
            if cur >= max_conns {
                return None;
            }
            match self
                .conns
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(ConnGuard::new(self)),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The failure counter (nginx `fails`).
    pub fn fails(&self) -> u32 {
        self.fails.load(Ordering::Relaxed)
    }

    /// Time of the last failure, or of the last selection made after the fail window expired (nginx `checked`).
    pub fn checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// Time of the last failure (nginx `accessed`).
    pub fn accessed(&self) -> u64 {
        self.accessed.load(Ordering::Relaxed)
    }

    /// nginx's `max_fails` exclusion: `fails >= max_fails` and the last failure is within `fail_timeout` seconds.
    /// `max_fails == 0` never excludes.
    pub fn is_failed(&self, now: u64, max_fails: u32, fail_timeout: u64) -> bool {
        max_fails != 0 && self.fails() >= max_fails && now.saturating_sub(self.checked()) <= fail_timeout
    }

    /// On selection: bump `checked` to `now` when the fail window has expired (nginx's `on_select`).
    pub fn note_selected(&self, now: u64, fail_timeout: u64) {
        self.selected.fetch_add(1, Ordering::Relaxed);
        self.last_selected.store(now, Ordering::Relaxed);
        if now.saturating_sub(self.checked()) > fail_timeout {
            self.checked.store(now, Ordering::Relaxed);
        }
    }

    /// On selection, like [`note_selected`](Self::note_selected), and also the passive recovery moment: when the
    /// peer had been excluded (`max_fails != 0`, `fails >= max_fails`) and this selection is the first after its
    /// fail window expired, `recovered_at = now`. Later selections see `checked == now` and change nothing.
    pub fn note_selected_recovering(&self, now: u64, max_fails: u32, fail_timeout: u64) {
        let expired = now.saturating_sub(self.checked()) > fail_timeout;
        if expired && max_fails != 0 && self.fails() >= max_fails {
            self.recovered_at.store(now, Ordering::Relaxed);
        }
        self.note_selected(now, fail_timeout);
    }

    /// When the peer last came back from unavailable (passively) or unhealthy (by a health check), in seconds;
    /// 0 = never. Slow start ramps its weight from this moment.
    pub fn recovered_at(&self) -> u64 {
        self.recovered_at.load(Ordering::Relaxed)
    }

    /// Records a recovery at `now` (a health check passing again).
    pub fn mark_recovered(&self, now: u64) {
        self.recovered_at.store(now, Ordering::Relaxed);
    }

    /// Records one health probe's result (only the peer's one checker calls this; readers may see the fields of
    /// two probes mixed). `status` is the response status, 0 when there was none.
    pub fn record_check(&self, passed: bool, status: u16) {
        self.hc_checks.fetch_add(1, Ordering::Relaxed);
        let (fails, passes) = self.check_streak();
        let streak = if passed {
            (0, passes.saturating_add(1))
        } else {
            self.hc_fails.fetch_add(1, Ordering::Relaxed);
            (fails.saturating_add(1), 0)
        };
        self.hc_streak
            .store(u64::from(streak.0) | (u64::from(streak.1) << 32), Ordering::Relaxed);
        self.hc_last
            .store(u32::from(status) | (u32::from(passed) << 16), Ordering::Relaxed);
    }

    /// Consecutive failed and passed probes.
    pub fn check_streak(&self) -> (u32, u32) {
        let v = self.hc_streak.load(Ordering::Relaxed);
        ((v & 0xffff_ffff) as u32, (v >> 32) as u32)
    }

    /// The health checks' record.
    pub fn health(&self) -> HealthStats {
        let (consecutive_fails, consecutive_passes) = self.check_streak();
        let last = self.hc_last.load(Ordering::Relaxed);
        HealthStats {
            checks: self.hc_checks.load(Ordering::Relaxed),
            fails: self.hc_fails.load(Ordering::Relaxed),
            consecutive_fails,
            consecutive_passes,
            last_status: (last & 0xffff) as u16,
            last_passed: last & (1 << 16) != 0,
            unhealthy: self.hc_unhealthy.load(Ordering::Relaxed),
        }
    }

    /// An attempt on this peer failed: `fails += 1`, `accessed = checked = now`. Returns the new `fails`.
    pub fn record_failure(&self, now: u64) -> u32 {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.accessed.store(now, Ordering::Relaxed);
        self.checked.store(now, Ordering::Relaxed);
        self.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1)
    }

    /// As [`record_failure`](Self::record_failure), and counts an exclusion (`unavail`) when this failure is the
    /// one that takes the peer out: it was not failed under `max_fails`/`fail_timeout` before, and is now.
    pub fn record_failure_within(&self, now: u64, max_fails: u32, fail_timeout: u64) -> u32 {
        let was_failed = self.is_failed(now, max_fails, fail_timeout);
        let fails = self.record_failure(now);
        if max_fails != 0 && !was_failed && fails >= max_fails {
            self.unavail.fetch_add(1, Ordering::Relaxed);
        }
        fails
    }

    /// An attempt on this peer succeeded: `fails = 0` if it was selected after the last failure's window.
    pub fn record_success(&self) {
        if self.accessed() < self.checked() {
            self.fails.store(0, Ordering::Relaxed);
        }
    }

    /// Clears the failure counter (single-peer upstreams in newer nginx, health checks passing, the API).
    pub fn reset_fails(&self) {
        self.fails.store(0, Ordering::Relaxed);
    }

    /// Current flags.
    pub fn flags(&self) -> PeerFlags {
        PeerFlags(self.flags.load(Ordering::Relaxed))
    }

    /// Sets `f`. Setting `UNHEALTHY` on a peer that was not counts one unhealthy transition.
    pub fn set_flags(&self, f: PeerFlags) {
        let before = PeerFlags(self.flags.fetch_or(f.bits(), Ordering::Relaxed));
        if f.intersects(PeerFlags::UNHEALTHY) && !before.intersects(PeerFlags::UNHEALTHY) {
            self.hc_unhealthy.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clears `f`.
    pub fn clear_flags(&self, f: PeerFlags) {
        self.flags.fetch_and(!f.bits(), Ordering::Relaxed);
    }

    /// Whether the runtime flags keep this peer from new requests (admin down, unhealthy, draining, checking).
    pub fn is_blocked(&self) -> bool {
        self.flags().intersects(PeerFlags::NOT_SELECTABLE)
    }

    /// Counts one request sent to this peer.
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one response by status class; statuses outside 100..=599 are not counted.
    pub fn count_response(&self, status: u16) {
        if let Some(c) = StatusClass::of(status) {
            self.responses[c as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The upstream response time histogram.
    pub fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }

    /// `least_time`'s averages and in-flight accounting of this peer.
    pub fn times(&self) -> &PeerTimes {
        &self.times
    }

    /// The peak-EWMA latency of this peer (`random two ewma`).
    pub fn ewma(&self) -> &PeakEwma {
        &self.ewma
    }

    /// The agent's record of this peer (`agent_port=`, `endpoint_load_metrics`).
    pub fn agent(&self) -> &AgentSlot {
        &self.agent
    }

    /// Records one upstream response time measured on shard `shard` (two relaxed adds, see [`LatencyHistogram`]).
    #[inline]
    pub fn record_response_time(&self, shard: usize, elapsed: std::time::Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.latency.record(shard, micros);
    }

    /// Adds bytes sent to and received from the peer.
    pub fn count_bytes(&self, sent: u64, received: u64) {
        if sent != 0 {
            self.bytes_sent.fetch_add(sent, Ordering::Relaxed);
        }
        if received != 0 {
            self.bytes_received.fetch_add(received, Ordering::Relaxed);
        }
    }

    /// A snapshot of every field, for metrics and tests (fields are read one by one, not as one instant).
    pub fn stats(&self) -> PeerStats {
        let mut responses = [0; 5];
        for (out, a) in responses.iter_mut().zip(&self.responses) {
            *out = a.load(Ordering::Relaxed);
        }
        PeerStats {
            conns: self.conns(),
            fails: self.fails(),
            checked: self.checked(),
            accessed: self.accessed(),
            flags: self.flags().bits(),
            selected: self.selected.load(Ordering::Relaxed),
            last_selected: self.last_selected.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            responses,
            failures: self.failures.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            recovered_at: self.recovered_at(),
            unavail: self.unavail.load(Ordering::Relaxed),
            id: self.id(),
            health: self.health(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_cache_aligned() {
        assert_eq!(std::mem::align_of::<PeerSlot>(), 128);
        assert_eq!(std::mem::size_of::<PeerSlot>() % 128, 0);
    }

    #[test]
    fn guard_gives_conns_back() {
        let s = PeerSlot::new();
        {
            let _a = s.try_acquire(0).unwrap();
            let _b = s.try_acquire(2).unwrap();
            assert_eq!(s.conns(), 2);
            assert!(s.try_acquire(2).is_none());
            assert!(!s.has_room(2));
        }
        assert_eq!(s.conns(), 0);
    }

    #[test]
    fn guard_gives_conns_back_on_panic() {
        let s = PeerSlot::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = s.try_acquire(1).unwrap();
            panic!("injected");
        }));
        assert!(r.is_err());
        assert_eq!(s.conns(), 0);
    }

    #[test]
    fn fails_window_is_not_sliding() {
        // docs/algorithms.md §3: failures at t=0 and t=100 with no successful selection between them give fails=2.
        let s = PeerSlot::new();
        assert_eq!(s.record_failure(1000), 1);
        assert!(s.is_failed(1005, 1, 10));
        assert!(!s.is_failed(1011, 1, 10));
        assert_eq!(s.record_failure(1100), 2);
        assert!(s.is_failed(1100, 2, 10));
        // a success without a selection after the window does not reset
        s.record_success();
        assert_eq!(s.fails(), 2);
        // a selection after the window bumps `checked`; a success then resets
        s.note_selected(1111, 10);
        assert_eq!(s.checked(), 1111);
        s.record_success();
        assert_eq!(s.fails(), 0);
    }

    #[test]
    fn recovery_is_the_first_selection_after_an_excluding_window() {
        let s = PeerSlot::new();
        s.record_failure(1000);
        // below max_fails=2: not an exclusion, so no recovery when the window ends
        s.note_selected_recovering(1011, 2, 10);
        assert_eq!(s.recovered_at(), 0);
        s.record_failure(1012);
        s.record_failure(1012);
        // inside the window: nothing
        s.note_selected_recovering(1020, 2, 10);
        assert_eq!(s.recovered_at(), 0);
        // the first selection after it: recovered now; the next one at a later second changes nothing
        s.note_selected_recovering(1023, 2, 10);
        assert_eq!((s.recovered_at(), s.checked()), (1023, 1023));
        s.note_selected_recovering(1025, 2, 10);
        assert_eq!(s.recovered_at(), 1023);
        // max_fails=0 never excludes, so never recovers
        let t = PeerSlot::new();
        t.record_failure(1);
        t.note_selected_recovering(100, 0, 10);
        assert_eq!(t.recovered_at(), 0);
        t.mark_recovered(7);
        assert_eq!(t.stats().recovered_at, 7);
    }

    #[test]
    fn check_records_keep_streaks_and_totals() {
        let s = PeerSlot::new();
        s.record_check(false, 500);
        s.record_check(false, 0);
        assert_eq!(s.check_streak(), (2, 0));
        s.record_check(true, 204);
        let h = s.stats().health;
        assert_eq!(
            h,
            HealthStats {
                checks: 3,
                fails: 2,
                consecutive_fails: 0,
                consecutive_passes: 1,
                last_status: 204,
                last_passed: true,
                unhealthy: 0,
            }
        );
    }

    #[test]
    fn max_fails_zero_never_excludes() {
        let s = PeerSlot::new();
        for t in 0..5 {
            s.record_failure(t);
        }
        assert!(!s.is_failed(4, 0, 10));
    }

    #[test]
    fn flags_and_counters() {
        let s = PeerSlot::new();
        assert!(!s.is_blocked());
        s.set_flags(PeerFlags::DRAINING);
        assert!(s.is_blocked());
        s.clear_flags(PeerFlags::DRAINING);
        assert!(!s.is_blocked());
        s.count_request();
        s.count_response(204);
        s.count_response(503);
        s.count_response(700);
        s.count_bytes(10, 20);
        s.record_failure_within(70, 1, 10);
        s.set_flags(PeerFlags::UNHEALTHY);
        s.set_flags(PeerFlags::UNHEALTHY);
        s.note_selected(77, 10);
        let st = s.stats();
        assert_eq!(
            (st.unavail, st.health.unhealthy, st.last_selected, st.selected),
            (1, 1, 77, 1)
        );
        assert_eq!((st.id, PeerSlot::with_id(5).id()), (0, 5));
        assert_eq!(st.requests, 1);
        assert_eq!(st.responses, [0, 1, 0, 0, 1]);
        assert_eq!((st.bytes_sent, st.bytes_received), (10, 20));
    }

    #[test]
    fn exclusions_and_unhealthy_turns_are_counted_once_each() {
        let s = PeerSlot::new();
        assert_eq!(s.record_failure_within(100, 2, 10), 1);
        assert_eq!(s.stats().unavail, 0);
        assert_eq!(s.record_failure_within(100, 2, 10), 2);
        assert_eq!(s.record_failure_within(101, 2, 10), 3); // already out: not a new exclusion
        assert_eq!(s.stats().unavail, 1);
        // the window ends, fails stay at 3: the next failure takes it out again
        assert_eq!(s.record_failure_within(200, 2, 10), 4);
        assert_eq!(s.stats().unavail, 2);
        // max_fails=0 never excludes
        s.record_failure_within(300, 0, 10);
        assert_eq!(s.stats().unavail, 2);
        s.set_flags(PeerFlags::UNHEALTHY);
        s.set_flags(PeerFlags(PeerFlags::UNHEALTHY.bits() | PeerFlags::CHECKING.bits()));
        s.clear_flags(PeerFlags::UNHEALTHY);
        s.set_flags(PeerFlags::UNHEALTHY);
        s.set_flags(PeerFlags::DRAINING);
        assert_eq!(s.health().unhealthy, 2);
    }

    #[test]
    fn response_times_land_in_the_histogram() {
        let s = PeerSlot::new();
        s.record_response_time(0, std::time::Duration::from_micros(800));
        s.record_response_time(1, std::time::Duration::from_secs(30));
        let h = s.latency().snapshot();
        assert_eq!(h.count(), 2);
        assert_eq!(h.buckets[1], 1);
        assert_eq!(h.buckets[crate::LATENCY_BUCKETS - 1], 1);
        assert_eq!(h.sum_us, 30_000_800);
    }
}
