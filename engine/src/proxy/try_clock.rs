//! The clock of one try for `least_time`: started at the pick, read at the phase `notify` reports and at the end,
//! and never read at all for an upstream that is not `least_time`.

use crate::balance::least_time::TryTimes;
use std::time::Instant;

/// One try's start and its header time (ms), for upstreams whose plan has `least_time`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TryClock {
    started: Option<Instant>,
    header: Option<u64>,
}

/// The seconds and milliseconds a pick reads: the millisecond clock only for `least_time` (whose in-flight ages
/// need it), otherwise the seconds alone, as every other method reads.
pub fn pick_time(least_time: bool) -> (u64, u64) {
    if least_time {
        let ms = crate::clock::now_ms();
        (ms / 1000, ms)
    } else {
        (crate::clock::now_secs(), 0)
    }
}

/// Whole milliseconds since `t` (nginx's `ngx_current_msec` differences).
pub fn ms_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl TryClock {
    /// A try starts (nginx's `u->start_time`), timed only when `on`.
    pub fn start(&mut self, on: bool) {
        self.started = on.then(Instant::now);
        self.header = None;
    }

    /// Milliseconds since the start of a timed try.
    pub fn elapsed(&self) -> Option<u64> {
        self.started.map(ms_since)
    }

    /// The response header was read: its time, kept for the end of the try.
    pub fn header(&mut self) -> Option<u64> {
        let ms = self.elapsed()?;
        self.header = Some(ms);
        Some(ms)
    }

    /// What an http try measured, to report at its end.
    pub fn http(&self) -> TryTimes {
        match self.elapsed() {
            None => TryTimes::None,
            Some(response) => TryTimes::Http {
                response,
                header: self.header,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untimed_try_measures_nothing() {
        let mut c = TryClock::default();
        c.start(false);
        assert_eq!((c.header(), c.http()), (None, TryTimes::None));
        assert_eq!(pick_time(false).1, 0);
    }

    #[test]
    fn a_timed_try_keeps_its_header_time() {
        let mut c = TryClock::default();
        c.start(true);
        let h = c.header();
        assert!(h.is_some_and(|ms| ms < 1000), "{h:?}");
        match c.http() {
            TryTimes::Http { response, header } => assert!(header == h && response >= h.unwrap_or(0)),
            other => panic!("{other:?}"),
        }
        c.start(true);
        assert!(
            matches!(c.http(), TryTimes::Http { header: None, .. }),
            "a new try forgets the header"
        );
        let (s, ms) = pick_time(true);
        assert_eq!(s, ms / 1000);
    }
}
