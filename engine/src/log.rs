//! The error log: nginx's levels (`emerg` .. `debug`) with a process-wide threshold set from `error_log FILE
//! [LEVEL]` (default `error`); messages below it are not formatted or written. Lines go to the main log's own
//! descriptor ([`point_main_log`]: stderr at start, then the `error_log` file) as `corelb: [level] message`. The `error_log` lines of an http server or
//! location, opened at load, are an [`ErrorLogs`]: a request's messages go to those of its level, and only there.

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

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

/// Writes one message to the main log in a single `write` (lines from several threads do not interleave).
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    write_main(line(level, args).as_bytes());
}

/// The descriptors behind the main log: `main` is where its lines go, `stderr` the stderr the process started
/// with (both private copies, made once: [`point_main_log`] renames `main` onto a file with `dup2`, which is atomic
/// for a writer on another thread, so no line goes to a closed descriptor).
struct MainLog {
    main: RawFd,
    stderr: RawFd,
}

fn main_log() -> &'static MainLog {
    static FDS: OnceLock<MainLog> = OnceLock::new();
    FDS.get_or_init(|| {
        // SAFETY: dup of fd 2 gives new descriptors the process keeps for its lifetime; -1 (no stderr) falls back
        // to fd 2 itself.
        let copy = || match unsafe { libc::dup(libc::STDERR_FILENO) } {
            fd if fd >= 0 => fd,
            _ => libc::STDERR_FILENO,
        };
        MainLog {
            main: copy(),
            stderr: copy(),
        }
    })
}

/// Writes bytes (whole lines) to the main log.
pub fn write_main(bytes: &[u8]) {
    // SAFETY: the descriptor stays open for the process's lifetime (ManuallyDrop: never closed here).
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(main_log().main) });
    let _ = (&*file).write_all(bytes);
}

/// Points the main log at `path` (appending; created 0644), or back at the stderr the process started with for
/// `stderr`. With `stderr_too`, fd 2 follows it (nginx's `ngx_log_redirect_stderr`: what a library prints lands
/// in the log), else fd 2 goes back to the process's stderr (nginx keeps stderr when a `error_log stderr` line
/// exists anywhere, its `log_use_stderr`).
pub fn point_main_log(path: &str, stderr_too: bool) -> std::io::Result<()> {
    let fds = main_log();
    let dup2 = |from: RawFd, to: RawFd| {
        // SAFETY: both descriptors are open; dup2 renames `from` as `to` atomically.
        if from != to && unsafe { libc::dup2(from, to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    if path == "stderr" {
        dup2(fds.stderr, fds.main)?;
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(path)?;
        dup2(file.as_raw_fd(), fds.main)?;
    }
    dup2(if stderr_too { fds.main } else { fds.stderr }, libc::STDERR_FILENO)
}

/// Where one `error_log` line writes.
#[derive(Debug, Clone)]
pub enum Sink {
    Stderr,
    /// A file opened for appending at load.
    File(Arc<File>),
}

/// The `error_log` lines of one http server or location (nginx's list of logs, `ngx_log_insert`): each with its
/// level, the most verbose first, so that a message is written to every line whose level takes it and the walk
/// stops at the first that does not.
#[derive(Debug, Clone)]
pub struct ErrorLogs {
    sinks: Vec<(Level, Sink)>,
}

/// Two sets are the same when they are one (a plan compared with itself across a reload).
impl PartialEq for ErrorLogs {
    fn eq(&self, other: &ErrorLogs) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for ErrorLogs {}

impl ErrorLogs {
    /// The lines `(FILE or "stderr", LEVEL)` (a relative FILE already resolved; no level: `error`), each file
    /// opened for appending (created 0644); `None` when there are none (the main log serves). The error is
    /// nginx's `open() "FILE" failed (...)`.
    pub fn open(lines: &[(String, Option<String>)]) -> Result<Option<Arc<ErrorLogs>>, String> {
        if lines.is_empty() {
            return Ok(None);
        }
        let mut sinks: Vec<(Level, Sink)> = Vec::with_capacity(lines.len());
        for (path, level) in lines {
            let level = level.as_deref().and_then(Level::from_name).unwrap_or(Level::Error);
            let sink = if path == "stderr" {
                Sink::Stderr
            } else {
                use std::os::unix::fs::OpenOptionsExt;
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o644)
                    .open(path)
                    .map_err(|e| {
                        let err = errno_text(&e);
                        format!("open() \"{path}\" failed ({err})")
                    })?;
                Sink::File(Arc::new(file))
            };
            // `ngx_log_insert`: before the first line that is less verbose
            let at = sinks.iter().position(|(l, _)| *l < level).unwrap_or(sinks.len());
            sinks.insert(at, (level, sink));
        }
        Ok(Some(Arc::new(ErrorLogs { sinks })))
    }

    /// Whether any line takes a message of `level`.
    #[inline]
    pub fn takes(&self, level: Level) -> bool {
        self.sinks.first().is_some_and(|(l, _)| level <= *l)
    }

    /// Writes one message to every line that takes it, each in a single `write`.
    pub fn write(&self, level: Level, args: std::fmt::Arguments<'_>) {
        let text = line(level, args);
        for (l, sink) in &self.sinks {
            if *l < level {
                break;
            }
            let _ = match sink {
                Sink::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
                Sink::File(f) => (&**f).write_all(text.as_bytes()),
            };
        }
    }
}

/// Whether a message of `level` is written to `logs` (a request's location's), or to the main log without them.
#[inline]
pub fn enabled_in(logs: Option<&ErrorLogs>, level: Level) -> bool {
    match logs {
        Some(l) => l.takes(level),
        None => enabled(level),
    }
}

/// Writes one message to `logs`, or to the main log without them.
pub fn write_in(logs: Option<&ErrorLogs>, level: Level, args: std::fmt::Arguments<'_>) {
    match logs {
        Some(l) => l.write(level, args),
        None => write(level, args),
    }
}

/// Logs a request's message at `level` to its location's `error_log` lines (`Option<&ErrorLogs>`; the main log
/// without them): `log_in!(plan.errors(), Level::Error, "open() \"{path}\" failed")`.
#[macro_export]
macro_rules! log_in {
    ($logs:expr, $level:expr, $($arg:tt)+) => {
        if $crate::log::enabled_in($logs, $level) {
            $crate::log::write_in($logs, $level, format_args!($($arg)+));
        }
    };
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

/// `2: No such file or directory`, as nginx prints an errno (Rust's text without its ` (os error N)` tail).
pub fn errno_text(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => {
            let text = std::io::Error::from_raw_os_error(code).to_string();
            let tail = format!(" (os error {code})");
            format!("{code}: {}", text.strip_suffix(&tail).unwrap_or(&text))
        }
        None => err.to_string(),
    }
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
    fn per_location_logs_by_level_as_nginx_lists_them() {
        let dir = std::env::temp_dir().join(format!("corelb-errlogs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
        let lines = vec![
            (p("warn.log"), Some("warn".into())),
            (p("error.log"), None),
            (p("alert.log"), Some("alert".into())),
            (p("warn.log"), Some("error".into())),
        ];
        let logs = ErrorLogs::open(&lines).unwrap().unwrap();
        let order: Vec<_> = logs.sinks.iter().map(|(l, _)| *l).collect();
        assert_eq!(order, [Level::Warn, Level::Error, Level::Error, Level::Alert]);
        assert!(logs.takes(Level::Warn) && !logs.takes(Level::Notice));
        logs.write(Level::Error, format_args!("e"));
        logs.write(Level::Warn, format_args!("w"));
        logs.write(Level::Info, format_args!("i"));
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
        assert_eq!(
            read("warn.log"),
            "corelb: [error] e\ncorelb: [error] e\ncorelb: [warn] w\n"
        );
        assert_eq!(read("error.log"), "corelb: [error] e\n");
        assert_eq!(read("alert.log"), "");
        assert!(ErrorLogs::open(&[]).unwrap().is_none());
        let bad = ErrorLogs::open(&[("/nonexistent-dir/x.log".into(), None)]).unwrap_err();
        assert_eq!(
            bad,
            "open() \"/nonexistent-dir/x.log\" failed (2: No such file or directory)"
        );
        let _ = std::fs::remove_dir_all(&dir);
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
