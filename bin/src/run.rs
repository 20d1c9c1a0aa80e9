//! Running the proxy (`corelb -c FILE`): load the config (with `-p` and `-g`), choose the shard runtime
//! (`--runtime`, else `worker_runtime`, else `$CORELB_RUNTIME`, else tokio), then serve until SIGTERM/SIGINT (fast
//! stop) or SIGQUIT (graceful stop). Messages before the config's `error_log` takes over go to stderr and the `-e`
//! file. Exit codes: 0 stopped, 1 config error, 3 could not start (bind, threads, pid file), 4 io_uring
//! unavailable, 5 RLIMIT_MEMLOCK too low, 6 CPU affinity problem.

use crate::startup::EarlyLog;
use corelb_engine::config;
use corelb_engine::server::{self, Startup};
use std::process::ExitCode;

/// Runs the proxy as `startup` says, on the shard runtime `runtime` (`tokio` or `glommio`).
pub fn run(startup: &Startup, runtime: Option<&str>) -> ExitCode {
    let mut log = EarlyLog::open(startup);
    let conf = match config::load_with(&startup.conf_file, &startup.load) {
        Ok(loaded) => loaded.config,
        Err(e) => {
            log.emit(&e.to_string());
            return ExitCode::from(1);
        }
    };
    for w in &conf.warnings {
        log.emit(&format!("[warn] {w}"));
    }
    let env = std::env::var("CORELB_RUNTIME").ok();
    let kind = match server::choose_runtime(runtime, conf.main.runtime, env.as_deref()) {
        Ok(k) => k,
        Err(e) => {
            log.emit(&format!("[emerg] {e}"));
            return ExitCode::from(e.exit_code());
        }
    };
    drop(log);
    match server::run(conf, kind, startup) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("corelb: [emerg] {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
