//! The main context (`worker_processes`, `error_log`, `pid`, `daemon`, `load_module`, `worker_runtime`) and
//! `events { worker_connections N; }`, and the checks nginx makes once the whole file is read.

use super::{arg, block_of, directive_err, flag_slot, set_once, unset, value, walk, Build, Ctx};
use crate::config::error::ConfigError;
use crate::config::model::{Config, CpuAffinity, MainConf, ProcessUser, RuntimeKind, Workers};
use crate::config::parser::{Block, Directive};
use std::path::{Path, PathBuf};

/// nginx's error log levels.
const LOG_LEVELS: &[&str] = &["emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"];
/// nginx's debug log levels (a debug build's per-module levels).
const DEBUG_LEVELS: &[&str] = &[
    "debug_core",
    "debug_alloc",
    "debug_mutex",
    "debug_event",
    "debug_http",
    "debug_mail",
    "debug_stream",
];

/// What the main context has set so far.
#[derive(Debug, Default)]
struct MainSlots {
    workers: Option<Workers>,
    error_log: Option<(String, Option<String>)>,
    pid: Option<PathBuf>,
    daemon: Option<bool>,
    runtime: Option<RuntimeKind>,
    user: Option<Option<ProcessUser>>,
    rlimit_nofile: Option<u64>,
    cpu_affinity: Option<CpuAffinity>,
    /// `pcre_jit` was read (checked, no effect).
    pcre_jit: Option<bool>,
    connections: Option<usize>,
    accept_mutex_delay: Option<std::time::Duration>,
    /// The events directives corelb checks without effect (`use`, `multi_accept`, `accept_mutex`...), read once.
    events_seen: Vec<String>,
    events: bool,
    /// An `events`, `http` or `stream` block has been read: `load_module` is too late (nginx's `modules_used`).
    modules_used: bool,
}

/// Builds the whole config from the root block.
pub fn build(root: &Block, prefix: &Path) -> Result<Config, ConfigError> {
    let mut b = Build {
        prefix: prefix.to_path_buf(),
        ..Build::default()
    };
    let mut slots = MainSlots::default();
    let mut config = Config::default();
    let end = walk(root, Ctx::MAIN, |d| match d.name.as_str() {
        "events" => {
            if slots.events {
                return Err(directive_err(d, "is duplicate"));
            }
            slots.events = true;
            slots.modules_used = true;
            events(block_of(d)?, &mut slots)
        }
        "http" => {
            if config.http.is_some() {
                return Err(directive_err(d, "is duplicate"));
            }
            slots.modules_used = true;
            config.http = Some(super::http::build(&mut b, d)?);
            Ok(())
        }
        "stream" => {
            if config.stream.is_some() {
                return Err(directive_err(d, "is duplicate"));
            }
            slots.modules_used = true;
            config.stream = Some(super::stream::build(&mut b, d)?);
            Ok(())
        }
        "user" => {
            unset(&slots.user, d)?;
            slots.user = Some(super::user::user(&mut b, d)?);
            Ok(())
        }
        _ => main_directive(d, &mut slots, &b.prefix),
    })?;
    if !slots.events {
        return Err(ConfigError::invalid("no \"events\" section in configuration", &end));
    }
    b.check_zones()?;
    if let Some(stream) = &config.stream {
        super::xdp::check_user(&stream.xdp, slots.user.as_ref().and_then(Option::as_ref))?;
    }
    let defaults = MainConf::default();
    config.main = MainConf {
        worker_processes: slots.workers.unwrap_or(defaults.worker_processes),
        worker_connections: slots.connections.unwrap_or(defaults.worker_connections),
        accept_mutex_delay: slots.accept_mutex_delay.unwrap_or(defaults.accept_mutex_delay),
        error_log: slots.error_log,
        pid: slots.pid,
        daemon: slots.daemon.unwrap_or(defaults.daemon),
        runtime: slots.runtime,
        user: slots.user.flatten(),
        rlimit_nofile: slots.rlimit_nofile,
        cpu_affinity: slots.cpu_affinity,
    };
    config.warnings = b.warnings;
    Ok(config)
}

fn main_directive(d: &Directive, slots: &mut MainSlots, prefix: &Path) -> Result<(), ConfigError> {
    match d.name.as_str() {
        "worker_processes" => {
            unset(&slots.workers, d)?;
            let v = arg(d, 0);
            let workers = if v == "auto" {
                Workers::Auto
            } else {
                let n = value::atoi(v).ok_or_else(|| directive_err(d, "invalid value"))?;
                Workers::Count(super::to_usize(n, d)?)
            };
            set_once(&mut slots.workers, d, workers)
        }
        "error_log" => error_log(d, slots, prefix),
        "pid" => set_once(&mut slots.pid, d, prefix.join(arg(d, 0))),
        "daemon" => flag_slot(&mut slots.daemon, d),
        "worker_rlimit_nofile" => {
            unset(&slots.rlimit_nofile, d)?;
            let n = value::atoi(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid number"))?;
            slots.rlimit_nofile = Some(n);
            Ok(())
        }
        "worker_cpu_affinity" => {
            unset(&slots.cpu_affinity, d)?;
            slots.cpu_affinity = Some(cpu_affinity(d)?);
            Ok(())
        }
        // corelb's regular expressions have no JIT switch (docs/directives.md)
        "pcre_jit" => flag_slot(&mut slots.pcre_jit, d),
        "load_module" => {
            if slots.modules_used {
                return Err(directive_err(d, "is specified too late"));
            }
            // The stream module is built into corelb: nothing to load.
            Ok(())
        }
        "worker_runtime" => {
            unset(&slots.runtime, d)?;
            let kind = match arg(d, 0) {
                "tokio" => RuntimeKind::Tokio,
                "glommio" => RuntimeKind::Glommio,
                other => {
                    let msg = format!(
                        "invalid value \"{other}\" in \"worker_runtime\" directive, it must be \"tokio\" or \"glommio\""
                    );
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            };
            set_once(&mut slots.runtime, d, kind)
        }
        _ => Err(ConfigError::UnknownDirective {
            name: d.name.clone(),
            at: d.span.clone(),
        }),
    }
}

/// The events directives that tune how nginx accepts and waits (`use`, `multi_accept`, `accept_mutex`,
/// `accept_mutex_delay`): checked as nginx checks them, without effect in corelb (each shard accepts on its own
/// `SO_REUSEPORT` socket; the runtime chooses epoll or io_uring) but for `accept_mutex_delay`, the pause when a
/// shard is out of descriptors.
fn event_tuning(d: &Directive, slots: &mut MainSlots) -> Result<(), ConfigError> {
    if slots.events_seen.contains(&d.name) {
        return Err(directive_err(d, "is duplicate"));
    }
    slots.events_seen.push(d.name.clone());
    let v = arg(d, 0);
    match d.name.as_str() {
        "use" if !EVENT_METHODS.contains(&v) => {
            Err(ConfigError::invalid(format!("invalid event type \"{v}\""), &d.span))
        }
        "multi_accept" | "accept_mutex" => flag_slot(&mut None, d),
        "accept_mutex_delay" => {
            slots.accept_mutex_delay = Some(value::parse_msec(v).ok_or_else(|| directive_err(d, "invalid value"))?);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `error_log FILE [LEVEL]` (nginx's `ngx_log_set_levels` checks; corelb keeps one log with one level).
fn error_log(d: &Directive, slots: &mut MainSlots, prefix: &Path) -> Result<(), ConfigError> {
    if slots.error_log.is_some() {
        let msg = "several \"error_log\" directives are not supported by corelb";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    slots.error_log = Some(error_log_args(d, prefix)?);
    Ok(())
}

/// The file and level of an `error_log` line, checked as nginx checks them.
pub fn error_log_args(d: &Directive, prefix: &Path) -> Result<(String, Option<String>), ConfigError> {
    let file = arg(d, 0);
    if file.starts_with("memory:") || file.starts_with("syslog:") {
        let msg = format!("error log \"{file}\" is not supported by corelb (a file or stderr)");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let mut level: Option<&str> = None;
    for v in d.args.iter().skip(1) {
        let v = v.as_str();
        if LOG_LEVELS.contains(&v) {
            if level.is_some() {
                return Err(ConfigError::invalid(format!("duplicate log level \"{v}\""), &d.span));
            }
            level = Some(v);
        } else if DEBUG_LEVELS.contains(&v) {
            let msg = format!("log level \"{v}\" is not supported by corelb");
            return Err(ConfigError::invalid(msg, &d.span));
        } else {
            return Err(ConfigError::invalid(format!("invalid log level \"{v}\""), &d.span));
        }
    }
    let file = if file == "stderr" {
        file.to_string()
    } else {
        prefix.join(file).to_string_lossy().into_owned()
    };
    Ok((file, level.map(str::to_string)))
}

/// nginx's `CPU_SETSIZE`: the longest mask.
const CPU_SETSIZE: usize = 1024;

/// `worker_cpu_affinity` (nginx's `ngx_set_cpu_affinity`).
fn cpu_affinity(d: &Directive) -> Result<CpuAffinity, ConfigError> {
    let auto = arg(d, 0) == "auto";
    if auto && d.args.len() > 2 {
        let msg = "invalid number of arguments in \"worker_cpu_affinity\" directive";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let mut masks = Vec::new();
    for m in d.args.iter().skip(usize::from(auto)) {
        if m.len() > CPU_SETSIZE {
            let msg = format!("\"worker_cpu_affinity\" supports up to {CPU_SETSIZE} CPUs only");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let mut cpus = Vec::new();
        let mut bit = 0;
        for c in m.bytes().rev() {
            match c {
                b' ' => continue,
                b'0' => {}
                b'1' => cpus.push(bit),
                _ => {
                    let msg = format!("invalid character \"{}\" in \"worker_cpu_affinity\"", char::from(c));
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            }
            bit += 1;
        }
        masks.push(cpus);
    }
    Ok(if auto {
        CpuAffinity::Auto(masks.pop())
    } else {
        CpuAffinity::Masks(masks)
    })
}

/// `use METHOD`: the event methods nginx has on Linux (corelb's runtime decides how it waits: epoll or io_uring).
const EVENT_METHODS: &[&str] = &["epoll", "poll", "select"];

fn events(block: &Block, slots: &mut MainSlots) -> Result<(), ConfigError> {
    walk(block, Ctx::EVENTS, |d| {
        if d.name != "worker_connections" {
            return event_tuning(d, slots);
        }
        unset(&slots.connections, d)?;
        let v = arg(d, 0);
        let Some(n) = value::atoi(v) else {
            return Err(ConfigError::invalid(format!("invalid number \"{v}\""), &d.span));
        };
        set_once(&mut slots.connections, d, super::to_usize(n, d)?)
    })
    .map(|_| ())
}
