//! `random two ewma`: the power of two choices over peak-EWMA latency (Finagle's and Linkerd's P2C), corelb's own.
//!
//! Two weighted random draws as nginx's `random two` makes them; the second is kept unless its load per weight is
//! strictly higher. A peer's load is Finagle's `cost × (pending + 1)`: `cost` the zone's peak-EWMA of its round
//! trips ([`corelb_shared_state::PeakEwma`], τ = 10 s), `pending` its requests in flight from every shard (the
//! zone's `conns`). A peer not measured yet costs 0 while idle and Finagle's penalty while busy (above any
//! measured load), so new peers are tried but not piled on. The round trip observed is the time from the connect's
//! start to the response header in http (to the connection in stream), in whole milliseconds as `least_time`
//! measures, a try under 1 ms counting as 1 ms; a failed try observes the time it took to fail (a timeout costs
//! its whole wait, as in Finagle), and a try with no header that did not fail observes nothing.

use super::least_time::TryTimes;
use super::two_choice::Load;
use super::{Outcome, Peer};

/// Finagle's load of an unmeasured peer with requests in flight (`Long.MaxValue >> 16`), plus its pending count.
pub const PENALTY: f64 = (i64::MAX >> 16) as f64;

/// The peak-EWMA load measure.
#[derive(Debug, Clone, Copy, Default)]
pub struct PeakEwmaLoad;

/// Finagle's load of `peer` at `now_ms`.
pub fn load(peer: &Peer, now_ms: u64) -> f64 {
    let pending = f64::from(peer.slot.conns());
    match peer.slot.ewma().cost(now_ms) {
        Some(cost) => cost * (pending + 1.0),
        None if pending > 0.0 => PENALTY + pending,
        None => 0.0,
    }
}

impl Load for PeakEwmaLoad {
    #[inline]
    fn heavier(&self, second: &Peer, first: &Peer, _now: u64, now_ms: u64) -> bool {
        load(second, now_ms) * f64::from(first.weight) > load(first, now_ms) * f64::from(second.weight)
    }

    fn name(&self) -> &'static str {
        "random two ewma"
    }
}

/// The round trip a try that ended with `outcome` observes (ms, at least 1), if it measured one.
pub fn round_trip(outcome: Outcome, measured: TryTimes) -> Option<u64> {
    let ms = match (outcome, measured) {
        (_, TryTimes::None) => return None,
        (Outcome::Failed, TryTimes::Http { response, .. } | TryTimes::Stream { response, .. }) => response,
        (_, TryTimes::Http { header, .. }) => header?,
        (_, TryTimes::Stream { connect, .. }) => connect,
    };
    Some(ms.max(1))
}

/// The end of a try on `peer` (at `now_ms`): its round trip goes into the peer's cost.
pub fn on_free(peer: &Peer, outcome: Outcome, measured: TryTimes, now_ms: u64) {
    if let Some(ms) = round_trip(outcome, measured) {
        peer.slot.ewma().observe(now_ms, ms as f64);
    }
}

#[cfg(test)]
mod tests;
