//! `corelb -t` and `-T`: test a configuration file the way `nginx -t` does, with nginx's wording; `-q` keeps only
//! the errors; `-T` then prints each file read (`# configuration file PATH:` and its text) on stdout.

use crate::options::Options;
use crate::startup::EarlyLog;
use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config::{self, model::Config};
use corelb_engine::server::Startup;
use corelb_shared_state::Zone;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Parses the config as `startup` says, builds every upstream's plan, and prints nginx's verdict on stderr. Exit 0
/// when the file is good, 1 otherwise.
pub fn test_config(startup: &Startup, options: &Options) -> ExitCode {
    let file = startup.conf_file.display();
    let mut log = EarlyLog::open(startup);
    match check(startup) {
        Ok((warnings, files)) => {
            for w in &warnings {
                log.emit(w);
            }
            if !options.quiet {
                eprintln!("corelb: the configuration file {file} syntax is ok");
                eprintln!("corelb: configuration file {file} test is successful");
            }
            if options.dump {
                dump(&files);
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            log.emit(&message);
            eprintln!("corelb: configuration file {file} test failed");
            ExitCode::from(1)
        }
    }
}

/// The config's warnings and files, or its first problem as an `[emerg] ...` message.
type Checked = (Vec<String>, Vec<(PathBuf, Vec<u8>)>);

fn check(startup: &Startup) -> Result<Checked, String> {
    let loaded = config::load_with(&startup.conf_file, &startup.load).map_err(|e| e.to_string())?;
    build_plans(&loaded.config)?;
    Ok((loaded.config.warnings, loaded.files))
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

/// nginx's `-T` dump: for each file, `# configuration file PATH:`, its text, and a line end.
fn dump(files: &[(PathBuf, Vec<u8>)]) {
    let mut out = std::io::stdout().lock();
    for (path, text) in files {
        let _ = writeln!(out, "# configuration file {}:", path.display());
        let _ = out.write_all(text);
        let _ = writeln!(out);
    }
    let _ = out.flush();
}
