//! The process around the shards: preflight, snapshot, shard start-up for the chosen runtime, the stall
//! watchdog, signals (SIGTERM/SIGINT fast stop, SIGQUIT graceful stop, SIGHUP reload, SIGUSR1 reopen of the error
//! log) and the pid file.

use crate::config::model::{Config, RuntimeKind};
use crate::config::LoadOptions;
use crate::control::{keep_restart_only, ApplyError, ChangeKind};
use crate::log::Level;
use crate::preflight::{ensure_memlock, plan_cpus, probe_io_uring, PreflightError};
use crate::runtime::glommio_rt::{Glommio, IO_MEMORY};
use crate::runtime::tokio_rt::Tokio;
use crate::shard::{self, StartError};
use crate::snapshot::{Snapshot, SnapshotError};
use crate::state::Shared;
use corelb_shared_state::Zone;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("unknown worker runtime \"{0}\" (expected tokio or glommio)")]
    UnknownRuntime(String),
    #[error("could not write the pid file {path} ({source})")]
    PidFile { path: PathBuf, source: io::Error },
    #[error("could not open the error log {path} ({source})")]
    ErrorLog { path: PathBuf, source: io::Error },
    #[error("could not start the health checks ({0})")]
    Health(io::Error),
    #[error("setrlimit(RLIMIT_NOFILE) failed ({0})")]
    NofileLimit(io::Error),
    #[error("could not serve as the \"user\" account ({0})")]
    User(io::Error),
    /// The XDP data path could not start (`listen ... xdp=`).
    #[error("{0}")]
    Xdp(String),
}

impl ServeError {
    /// The process exit code: 1 is left to config errors, 2 to usage errors.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::Preflight(p) => p.exit_code(),
            ServeError::Snapshot(_) | ServeError::UnknownRuntime(_) => 1,
            ServeError::Start(_)
            | ServeError::PidFile { .. }
            | ServeError::ErrorLog { .. }
            | ServeError::Health(_)
            | ServeError::NofileLimit(_)
            | ServeError::User(_)
            | ServeError::Xdp(_) => 3,
        }
    }
}

/// What the command line gives the process besides the parsed config (nginx's `-c`, `-p`, `-g`, `-e`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Startup {
    /// The config file, as resolved against the prefix: what SIGHUP reads again.
    pub conf_file: PathBuf,
    /// The prefix and the `-g` directives, applied again on every reload.
    pub load: LoadOptions,
    /// `-e FILE`: the error log while the config names none (`None`: stderr).
    pub error_log: Option<PathBuf>,
}

impl Startup {
    /// A start-up with the file `conf_file` and nothing else (paths as written, stderr).
    pub fn of_file(conf_file: &Path) -> Startup {
        Startup {
            conf_file: conf_file.to_path_buf(),
            ..Startup::default()
        }
    }
}

/// Picks the runtime: `--runtime`, else `worker_runtime` in the config, else `$CORELB_RUNTIME`, else tokio.
pub fn choose_runtime(
    cli: Option<&str>,
    config: Option<RuntimeKind>,
    env: Option<&str>,
) -> Result<RuntimeKind, ServeError> {
    let parse = |s: &str| match s {
        "tokio" => Ok(RuntimeKind::Tokio),
        "glommio" => Ok(RuntimeKind::Glommio),
        other => Err(ServeError::UnknownRuntime(other.to_string())),
    };
    match (cli, config, env) {
        (Some(s), _, _) => parse(s),
        (None, Some(k), _) => Ok(k),
        (None, None, Some(s)) if !s.is_empty() => parse(s),
        _ => Ok(RuntimeKind::Tokio),
    }
}

/// A running set of shards.
pub struct Running {
    pub shared: Arc<Shared>,
    handles: Vec<JoinHandle<io::Result<()>>>,
    /// The XDP data path, while the config has a VIP (started with the first one, see [`Running::follow_l4`]).
    l4: Option<crate::l4::L4Path>,
}

impl Running {
    /// Graceful stop: no new connections, in-flight requests finish; returns when every shard has ended.
    pub fn drain_and_join(mut self) {
        // The kernel path stops taking flows at once (its established flows end with the process anyway).
        self.l4 = None;
        // Probes in flight end within their timeouts; the shards drain meanwhile.
        self.shared.control.signal_stop();
        self.shared.drain();
        for h in self.handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => crate::log_alert!("a shard ended with an error ({e})"),
                Err(_) => crate::log_alert!("a shard thread panicked"),
            }
        }
        // The shards handed their buffers over as they ended.
        if !self.shared.flush_access_logs(LOG_FLUSH_LIMIT, false) {
            crate::log_alert!("the access logs could not be written out in time at exit");
        }
    }

    /// Makes the running shards hand over what they hold for the access logs and waits until it is on disk
    /// (bounded): for a fast stop.
    pub fn finish_access_logs(&self) {
        if !self.shared.flush_access_logs(LOG_FLUSH_LIMIT, true) {
            crate::log_alert!("the access logs could not be written out in time at exit");
        }
    }

    /// Starts the XDP data path once a reload brought the first VIP (its thread follows every later change).
    pub fn follow_l4(&mut self) {
        if self.l4.is_none() {
            match crate::l4::L4Path::start(&self.shared) {
                Ok(l4) => self.l4 = l4,
                Err(e) => crate::log_error!("{e}"),
            }
        }
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.handles.len()
    }
}

/// Checks the machine, builds the snapshot and starts one shard per worker on `runtime`.
pub fn start(config: Config, runtime: RuntimeKind) -> Result<Running, ServeError> {
    let cpus = plan_cpus(config.main.worker_processes, config.main.cpu_affinity.as_ref())?;
    if runtime == RuntimeKind::Glommio {
        probe_io_uring()?;
        ensure_memlock(2 * IO_MEMORY as u64 * cpus.len() as u64, cpus.len())?;
    }
    let zone = Arc::new(Zone::new());
    let snapshot = Snapshot::build(config, &zone, 1)?;
    let shared = Shared::new(snapshot, zone, cpus.len());
    // Before the shards: `mandatory` peers must be in the checking state before the first request.
    shared
        .control
        .start_health(shared.snapshot.load_full())
        .map_err(ServeError::Health)?;
    let l4 = crate::l4::L4Path::start(&shared).map_err(ServeError::Xdp)?;
    let pinned: Vec<Option<usize>> = cpus.into_iter().map(Some).collect();
    let handles = match runtime {
        RuntimeKind::Tokio => shard::start::<Tokio>(&shared, &pinned)?,
        RuntimeKind::Glommio => shard::start::<Glommio>(&shared, &pinned)?,
    };
    Ok(Running { shared, handles, l4 })
}

/// Signals the process acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGTERM or SIGINT: stop now.
    Fast,
    /// SIGQUIT: stop accepting, finish in-flight requests, then exit.
    Graceful,
}

/// Every signal the process acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Stop(StopSignal),
    /// SIGHUP: read the config file again and apply it.
    Reload,
    /// SIGUSR1: reopen the error log file (after log rotation).
    Reopen,
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGUSR1] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the stop signals in the calling thread (and so in every thread started after), so that only
/// [`wait_signal`] sees them. Call before starting shards.
pub fn block_signals() {
    let set = signal_set();
    // SAFETY: changes this thread's signal mask with a valid set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits up to `timeout` for a stop signal (SIGHUP and SIGUSR1 are taken and ignored: for `corelb bench`).
pub fn wait_signal(timeout: Duration) -> Option<StopSignal> {
    match next_signal(timeout) {
        Some(Signal::Stop(s)) => Some(s),
        _ => None,
    }
}

/// Waits up to `timeout` for one of the signals the process acts on.
pub fn next_signal(timeout: Duration) -> Option<Signal> {
    let set = signal_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: waits for a signal of `set`; info may be null.
    let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    match sig {
        libc::SIGTERM | libc::SIGINT => Some(Signal::Stop(StopSignal::Fast)),
        libc::SIGQUIT => Some(Signal::Stop(StopSignal::Graceful)),
        libc::SIGHUP => Some(Signal::Reload),
        libc::SIGUSR1 => Some(Signal::Reopen),
        _ => None,
    }
}

/// Runs `config`, read as `startup` says, until a stop signal: the whole life of `corelb -c FILE`. SIGHUP reads
/// the file again (with the same prefix and `-g` directives) and applies it (on any error the running config
/// keeps serving). Returns the exit code.
pub fn run(config: Config, runtime: RuntimeKind, startup: &Startup) -> Result<u8, ServeError> {
    let mut files = ProcessFiles::of(&config, startup);
    if let Some(log) = &files.error_log {
        redirect_main_log(Path::new(log), files.stderr_kept)?;
    }
    if let Some(level) = error_log_level(&config) {
        crate::log::set_level(level);
    }
    block_signals();
    crate::process::set_nofile_limit(&config.main).map_err(ServeError::NofileLimit)?;
    let main = config.main.clone();
    let mut running = start(config, runtime)?;
    if let Some(p) = &files.pid {
        write_pid(p)?;
    }
    // As nginx's workers: the account `user` names from here on (the listeners are bound, the files open).
    crate::process::drop_privileges(&main).map_err(ServeError::User)?;
    crate::log_notice!("{} shard(s) started on {}", running.shards(), runtime_name(runtime));
    let mut watchdog = Watchdog::new(running.shards());
    let stop = loop {
        match next_signal(Duration::from_secs(1)) {
            Some(Signal::Stop(s)) => break s,
            Some(Signal::Reload) => {
                reload(&running.shared, startup, &mut files);
                running.follow_l4();
            }
            Some(Signal::Reopen) => {
                // The access logs first: the error log's notice then says the whole reopen is done.
                reopen_access_logs(&running.shared);
                files.reopen_log();
            }
            None => {}
        }
        watchdog.check(&running.shared);
    };
    if stop == StopSignal::Graceful {
        crate::log_notice!("SIGQUIT: graceful shutdown");
        running.drain_and_join();
    } else {
        running.finish_access_logs();
    }
    // nginx's `ngx_close_listening_sockets` at exit: the unix-domain sockets' files go
    crate::runtime::unix::remove_all();
    if let Some(p) = &files.pid {
        let _ = std::fs::remove_file(p);
    }
    Ok(0)
}

/// SIGHUP: the config file read again and applied through the control plane; the outcome is logged as nginx logs
/// it.
fn reload(shared: &Shared, startup: &Startup, files: &mut ProcessFiles) {
    crate::log_notice!("signal 1 (SIGHUP) received, reconfiguring");
    let source = &startup.conf_file;
    match shared.apply(ChangeKind::Reload, reload_with(startup)) {
        Ok(generation) => {
            let config = &shared.snapshot.load().config;
            files.follow(&ProcessFiles::of(config, startup));
            crate::log::set_level(error_log_level(config).unwrap_or(Level::Error));
            crate::log_notice!("reloaded {}: generation {generation} serves", source.display());
        }
        Err(e) => {
            crate::log::write_main(format!("corelb: {}\n", e.log_line()).as_bytes());
            crate::log_notice!(
                "reload of {} failed: the running configuration (generation {}) keeps serving",
                source.display(),
                shared.snapshot.load().generation
            );
        }
    }
}

/// Reads the config again as `startup` says and keeps what only a restart changes (as `control::reload_from`,
/// with the command line's prefix and `-g` directives).
fn reload_with(startup: &Startup) -> impl FnOnce(&Config) -> Result<Config, ApplyError> + '_ {
    move |running| {
        let loaded = crate::config::load_with(&startup.conf_file, &startup.load);
        let mut next = loaded.map_err(|e| ApplyError::Refused(e.to_string()))?.config;
        let kept = keep_restart_only(running, &mut next);
        for w in &next.warnings {
            crate::log_warn!("{}", w.strip_prefix("[warn] ").unwrap_or(w));
        }
        for w in &kept {
            crate::log_warn!("{w}");
        }
        Ok(next)
    }
}

/// The level `error_log FILE LEVEL` names, if any (nginx's default, `error`, otherwise).
fn error_log_level(config: &Config) -> Option<Level> {
    let (_, level) = config.main.error_log.as_ref()?;
    level.as_deref().and_then(Level::from_name)
}

/// SIGUSR1 for the access logs: every shard's buffered lines written out to the old files, then every file of the
/// running config opened again (as nginx's `ngx_reopen_files` flushes, then reopens).
fn reopen_access_logs(shared: &Shared) {
    let _ = shared.flush_access_logs(LOG_FLUSH_LIMIT, true);
    for (path, e) in shared.snapshot.load().access_logs.reopen() {
        crate::log_alert!(
            "could not reopen the access log \"{}\" ({e}): it keeps the old file",
            path.display()
        );
    }
}

/// The files the process itself writes, as the running config names them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProcessFiles {
    pid: Option<PathBuf>,
    /// `error_log` (`stderr` or a file), else `-e FILE`; `None` keeps the terminal.
    error_log: Option<String>,
    /// Some `error_log stderr` line exists: fd 2 stays the process's stderr.
    stderr_kept: bool,
}

impl ProcessFiles {
    fn of(config: &Config, startup: &Startup) -> Self {
        let default_log = startup.error_log.as_ref().map(|p| p.to_string_lossy().into_owned());
        ProcessFiles {
            pid: config.main.pid.clone(),
            error_log: config
                .main
                .error_log
                .as_ref()
                .map(|(path, _)| path.clone())
                .or(default_log),
            stderr_kept: config.logs_to_stderr(),
        }
    }

    /// After a reload: a new `pid` path gets the pid file (the old one is removed), a new `error_log` is opened
    /// (as nginx does on reload). Failures are logged; the process goes on.
    fn follow(&mut self, next: &ProcessFiles) {
        if next.pid != self.pid {
            if let Some(p) = &next.pid {
                if let Err(e) = write_pid(p) {
                    crate::log_alert!("{e}");
                    return;
                }
            }
            if let Some(old) = &self.pid {
                let _ = std::fs::remove_file(old);
            }
            self.pid = next.pid.clone();
        }
        if next.error_log != self.error_log || next.stderr_kept != self.stderr_kept {
            self.error_log = next.error_log.clone();
            self.stderr_kept = next.stderr_kept;
            self.reopen_log();
        }
    }

    /// SIGUSR1: the error log file opened again (appending), so a rotated file is let go.
    fn reopen_log(&self) {
        let path = self.error_log.as_deref().unwrap_or("stderr");
        match redirect_main_log(Path::new(path), self.stderr_kept) {
            Ok(()) => crate::log_notice!("reopened the error log {path}"),
            Err(e) => crate::log_alert!("{e}"),
        }
    }
}

fn runtime_name(k: RuntimeKind) -> &'static str {
    match k {
        RuntimeKind::Tokio => "tokio",
        RuntimeKind::Glommio => "glommio",
    }
}

/// Sends the main log to `error_log FILE` (appending), or to the process's stderr for `stderr`; fd 2 follows it
/// unless `stderr_kept` (as nginx's `ngx_log_redirect_stderr`).
fn redirect_main_log(path: &Path, stderr_kept: bool) -> Result<(), ServeError> {
    crate::log::point_main_log(&path.to_string_lossy(), !stderr_kept).map_err(|source| ServeError::ErrorLog {
        path: path.to_path_buf(),
        source,
    })
}

fn write_pid(path: &Path) -> Result<(), ServeError> {
    std::fs::write(path, format!("{}\n", std::process::id())).map_err(|source| ServeError::PidFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Notices a shard whose heartbeat stopped (an executor parked forever or a task that never yields).
struct Watchdog {
    last: Vec<(u64, Instant, bool)>,
}

/// How long a stop waits for the access logs to be written out.
const LOG_FLUSH_LIMIT: Duration = Duration::from_secs(2);

/// How long a shard may go without a heartbeat before it is reported.
const STALL: Duration = Duration::from_secs(5);

impl Watchdog {
    fn new(shards: usize) -> Self {
        Watchdog {
            last: vec![(0, Instant::now(), false); shards],
        }
    }

    fn check(&mut self, shared: &Shared) {
        for (i, (beat, at, reported)) in self.last.iter_mut().enumerate() {
            let now = shared.heartbeat(i);
            if now != *beat {
                (*beat, *at, *reported) = (now, Instant::now(), false);
            } else if at.elapsed() > STALL && !*reported {
                crate::log_alert!("shard {i} has not ticked for {}s: stalled", at.elapsed().as_secs());
                *reported = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_precedence() {
        let g = Some(RuntimeKind::Glommio);
        assert_eq!(
            choose_runtime(Some("tokio"), g, Some("glommio")).unwrap(),
            RuntimeKind::Tokio
        );
        assert_eq!(choose_runtime(None, g, Some("tokio")).unwrap(), RuntimeKind::Glommio);
        assert_eq!(
            choose_runtime(None, None, Some("glommio")).unwrap(),
            RuntimeKind::Glommio
        );
        assert_eq!(choose_runtime(None, None, None).unwrap(), RuntimeKind::Tokio);
        assert!(matches!(
            choose_runtime(Some("uv"), None, None),
            Err(ServeError::UnknownRuntime(_))
        ));
    }
}
