//! Running the proxy (`corelb -c FILE`): the data-plane work replaces this module.

use std::path::Path;
use std::process::ExitCode;

/// Runs the proxy on `config` with the shard runtime `runtime` (`tokio` or `glommio`). This build has no proxy
/// runtime: it says so and fails.
pub fn run(config: &Path, runtime: Option<String>) -> ExitCode {
    let _ = (config, runtime);
    eprintln!("corelb: [emerg] the proxy runtime is not part of this build");
    ExitCode::from(1)
}
