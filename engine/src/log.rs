//! The error log: nginx's levels (`emerg` .. `debug`) with a process-wide threshold set from `error_log FILE
//! [LEVEL]` (default `error`); messages below it are not formatted or written. Lines go to stderr (which
//! `error_log FILE` points at the file) as `corelb: [level] message`.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

/// nginx's log levels, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Emerg = 0,
    Alert = 1,
    Crit = 2,
    Error = 3,
    Warn = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
}

/// Every level, in nginx's order.
const LEVELS: [Level; 8] = [
    Level::Emerg,
    Level::Alert,
    Level::Crit,
    Level::Error,
    Level::Warn,
    Level::Notice,
    Level::Info,
    Level::Debug,
];

impl Level {
    /// The level's name as nginx writes it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Emerg => "emerg",
            Level::Alert => "alert",
            Level::Crit => "crit",
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// The level called `name` (`error_log`'s argument).
    pub fn from_name(name: &str) -> Option<Level> {
        LEVELS.into_iter().find(|l| l.name() == name)
    }
}

/// The threshold: messages of a level above it (less severe) are dropped. nginx's default is `error`.
static THRESHOLD: AtomicU8 = AtomicU8::new(Level::Error as u8);

/// Sets the threshold (from `error_log`).
pub fn set_level(level: Level) {
    THRESHOLD.store(level as u8, Ordering::Relaxed);
}

/// The current threshold.
pub fn level() -> Level {
    let t = THRESHOLD.load(Ordering::Relaxed);
    LEVELS.into_iter().find(|l| *l as u8 == t).unwrap_or(Level::Error)
}

/// Whether a message of `level` is written.
#[inline]
pub fn enabled(level: Level) -> bool {
    level as u8 <= THRESHOLD.load(Ordering::Relaxed)
}

/// The line of one message: `corelb: [level] message\n`.
pub fn line(level: Level, args: std::fmt::Arguments<'_>) -> String {
    format!("corelb: [{}] {args}\n", level.name())
}

/// Writes one message in a single `write` (lines from several threads do not interleave).
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_all(line(level, args).as_bytes());
}

/// Logs at `level` when the threshold allows it: `log!(Level::Error, "upstream {addr} failed")`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        if $crate::log::enabled($level) {
            $crate::log::write($level, format_args!($($arg)+));
        }
    };
}

/// Logs at `alert`.
#[macro_export]
macro_rules! log_alert {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Alert, $($arg)+) };
}

/// Logs at `error`.
#[macro_export]
macro_rules! log_error {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Error, $($arg)+) };
}

/// Logs at `warn`.
#[macro_export]
macro_rules! log_warn {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Warn, $($arg)+) };
}

/// Logs at `notice`.
#[macro_export]
macro_rules! log_notice {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Notice, $($arg)+) };
}

/// Logs at `info`.
#[macro_export]
macro_rules! log_info {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Info, $($arg)+) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_names() {
        assert!(Level::Emerg < Level::Error && Level::Error < Level::Notice && Level::Info < Level::Debug);
        for l in LEVELS {
            assert_eq!(Level::from_name(l.name()), Some(l));
        }
        assert_eq!(Level::from_name("loud"), None);
        assert_eq!(
            line(Level::Notice, format_args!("{} shard(s)", 2)),
            "corelb: [notice] 2 shard(s)\n"
        );
    }

    #[test]
    fn threshold_filters_less_severe_levels() {
        // The only test that moves the process-wide threshold; it puts the default back.
        set_level(Level::Warn);
        assert!(enabled(Level::Emerg) && enabled(Level::Error) && enabled(Level::Warn));
        assert!(!enabled(Level::Notice) && !enabled(Level::Info) && !enabled(Level::Debug));
        assert_eq!(level(), Level::Warn);
        set_level(Level::Error);
        assert!(!enabled(Level::Warn));
        assert_eq!(level(), Level::Error);
    }
}
