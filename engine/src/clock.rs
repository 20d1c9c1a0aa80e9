//! The clocks, read where they are used: the monotonic one for timeouts and durations, the wall clock in whole
//! seconds for the balancers' `fail_timeout` windows and the `Date` header, in milliseconds for the API and the
//! control plane.
//!
//! A shard thread whose runtime marks its scheduler turns ([`Turns`]) reads each clock at most once per turn, as
//! nginx caches `ngx_time()` once per event-loop turn: the first read of a turn goes to the vDSO, the others get
//! the same value (a proxied request read the monotonic clock about seven times and the wall clock twice). Any
//! other thread (the control thread, a runtime that does not mark turns, tests) reads the clock at each use.

pub mod texts;

use std::cell::Cell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// This thread's clocks as read in its current scheduler turn.
struct TurnClock {
    /// Whether the thread's runtime marks its turns (else nothing is cached).
    on: Cell<bool>,
    mono: Cell<Option<Instant>>,
    wall: Cell<Option<Duration>>,
}

thread_local! {
    static TURN: TurnClock = const {
        TurnClock {
            on: Cell::new(false),
            mono: Cell::new(None),
            wall: Cell::new(None),
        }
    };
}

/// A runtime's marks of its scheduler turns on this thread: while it is held, the clocks read in a turn are read
/// once ([`Turns::next`] starts a turn).
pub struct Turns {
    /// `!Send`: the marks belong to this thread.
    _thread: std::marker::PhantomData<*const ()>,
}

impl Turns {
    /// This thread's runtime marks its turns from now on.
    pub fn begin() -> Self {
        TURN.with(|t| {
            t.on.set(true);
            t.mono.set(None);
            t.wall.set(None);
        });
        Turns {
            _thread: std::marker::PhantomData,
        }
    }

    /// A new turn begins (the runtime has polled for I/O and timers): the next reads go to the clocks.
    pub fn next(&self) {
        TURN.with(|t| {
            t.mono.set(None);
            t.wall.set(None);
        });
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        let _ = TURN.try_with(|t| {
            t.on.set(false);
            t.mono.set(None);
            t.wall.set(None);
        });
    }
}

/// The monotonic clock (this turn's reading on a shard thread).
pub fn instant() -> Instant {
    TURN.with(|t| {
        if !t.on.get() {
            return Instant::now();
        }
        t.mono.get().unwrap_or_else(|| {
            let now = Instant::now();
            t.mono.set(Some(now));
            now
        })
    })
}

/// The time since the Unix epoch (zero if the clock is before it; this turn's reading on a shard thread).
pub fn since_epoch() -> Duration {
    let read = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    TURN.with(|t| {
        if !t.on.get() {
            return read();
        }
        t.wall.get().unwrap_or_else(|| {
            let now = read();
            t.wall.set(Some(now));
            now
        })
    })
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

    #[test]
    fn a_turn_reads_each_clock_once_and_the_next_turn_again() {
        let turns = Turns::begin();
        let (a, wall) = (instant(), since_epoch());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!((instant(), since_epoch()), (a, wall));
        turns.next();
        assert!(instant() > a);
        assert!(since_epoch() > wall);
        drop(turns);
        let b = instant();
        std::thread::sleep(Duration::from_millis(2));
        assert!(instant() > b, "without turns each read goes to the clock");
    }
}
