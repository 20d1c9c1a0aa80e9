//! Running the proxy (`corelb -c FILE`): load the config, choose the shard runtime (`--runtime`, else
//! `worker_runtime`, else `$CORELB_RUNTIME`, else tokio), then serve until SIGTERM/SIGINT (fast stop) or SIGQUIT
//! (graceful stop). Exit codes: 0 stopped, 1 config error, 3 could not start (bind, threads, pid file),
//! 4 io_uring unavailable, 5 RLIMIT_MEMLOCK too low, 6 CPU affinity problem.

use corelb_engine::config;
use corelb_engine::server;
use std::path::Path;
use std::process::ExitCode;

/// Runs the proxy on `config` with the shard runtime `runtime` (`tokio` or `glommio`).
pub fn run(config: &Path, runtime: Option<String>) -> ExitCode {
    let conf = match config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("corelb: {e}");
            return ExitCode::from(1);
        }
    };
    for w in &conf.warnings {
        eprintln!("corelb: [warn] {w}");
    }
    let env = std::env::var("CORELB_RUNTIME").ok();
    let kind = match server::choose_runtime(runtime.as_deref(), conf.main.runtime, env.as_deref()) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("corelb: [emerg] {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    match server::run(conf, kind, config) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("corelb: [emerg] {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
