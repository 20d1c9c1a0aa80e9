//! The wall clock, read where it is used: whole seconds for the balancers' `fail_timeout` windows and the `Date`
//! header, milliseconds for the API and the control plane. Unlike nginx, which caches `ngx_time()` once per
//! event-loop turn, corelb reads the clock at each use (`clock_gettime(CLOCK_REALTIME)` through the vDSO, a few
//! tens of nanoseconds); a balancer is given the value read once for its pick, so one pick sees one time.

pub mod texts;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The time since the Unix epoch (zero if the clock is before it).
pub fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Whole seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    since_epoch().as_secs()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    u64::try_from(since_epoch().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_agree() {
        let (s, ms) = (now_secs(), now_ms());
        // 2020-01-01 in seconds: the clock is a real one, not zero.
        assert!(s > 1_577_836_800, "{s}");
        assert!(ms / 1000 >= s && ms / 1000 <= s + 1, "{ms} vs {s}");
    }
}
