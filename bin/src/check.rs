//! `corelb -t`: test a configuration file the way `nginx -t` does, with nginx's wording.

use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config::{self, model::Config};
use corelb_shared_state::Zone;
use std::path::Path;
use std::process::ExitCode;

/// Parses `path`, builds every upstream's plan, and prints nginx's verdict on stderr. Exit 0 when the file is
/// good, 1 otherwise.
pub fn test_config(path: &Path) -> ExitCode {
    let file = path.display();
    match check(path) {
        Ok(()) => {
            eprintln!("corelb: the configuration file {file} syntax is ok");
            eprintln!("corelb: configuration file {file} test is successful");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("corelb: {message}");
            eprintln!("corelb: configuration file {file} test failed");
            ExitCode::from(1)
        }
    }
}

/// The first problem with the file, as an `[emerg] ...` message.
fn check(path: &Path) -> Result<(), String> {
    let config = config::load(path).map_err(|e| e.to_string())?;
    build_plans(&config)
}

/// Builds the plan of every upstream, as loading the config for real would.
fn build_plans(config: &Config) -> Result<(), String> {
    let http = config.http.iter().flat_map(|h| &h.upstreams);
    let stream = config.stream.iter().flat_map(|s| &s.upstreams);
    let zone = Zone::new();
    for upstream in http.chain(stream) {
        UpstreamPlan::build(upstream, &zone).map_err(|e| format!("[emerg] {e} in {}", upstream.span))?;
    }
    Ok(())
}
