//! From nginx's options to the process's start-up: the prefix (`-p`, else the working directory, as an nginx
//! built without `--prefix`), the config file (`-c`, relative to the prefix), the error log used until the config
//! names one (`-e`, relative to the prefix), and the `-g` directives; and that early log itself.

use crate::options::{ErrorLogArg, Options};
use corelb_engine::config::error::errno_text;
use corelb_engine::config::LoadOptions;
use corelb_engine::server::Startup;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Why the start-up could not be worked out; displayed in nginx's words after `corelb: `.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("[emerg] no configuration file given: use -c FILE (see --help)")]
    NoConfigFile,
    #[error("[emerg]: getcwd() failed ({})", errno_text(.0))]
    Cwd(std::io::Error),
}

/// The start-up `options` ask for.
pub fn resolve(options: &Options) -> Result<Startup, StartupError> {
    let prefix = match &options.prefix {
        Some(p) => p.clone(),
        None => std::env::current_dir().map_err(StartupError::Cwd)?,
    };
    let conf = options.conf_file.as_ref().ok_or(StartupError::NoConfigFile)?;
    let error_log = match &options.error_log {
        Some(ErrorLogArg::File(f)) => Some(prefix.join(f)),
        Some(ErrorLogArg::Stderr) | None => None,
    };
    Ok(Startup {
        conf_file: prefix.join(conf),
        load: LoadOptions {
            prefix,
            params: options.params.clone(),
        },
        error_log,
    })
}

/// Where messages go before the config's `error_log` takes over: stderr, and the `-e` file too (nginx writes its
/// start-up messages to both).
pub struct EarlyLog {
    file: Option<File>,
}

impl EarlyLog {
    /// Opens `startup`'s `-e` file (appending); when it cannot be opened, says so as nginx does and keeps stderr.
    pub fn open(startup: &Startup) -> EarlyLog {
        let Some(path) = &startup.error_log else {
            return EarlyLog { file: None };
        };
        match open_append(path) {
            Ok(file) => EarlyLog { file: Some(file) },
            Err(e) => {
                eprintln!(
                    "corelb: [alert] could not open error log file: open() \"{}\" failed ({})",
                    path.display(),
                    errno_text(&e)
                );
                EarlyLog { file: None }
            }
        }
    }

    /// Writes `corelb: MESSAGE` to stderr and to the `-e` file.
    pub fn emit(&mut self, message: &str) {
        let line = format!("corelb: {message}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        if let Some(f) = &mut self.file {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn paths_resolve_against_the_prefix() {
        let options = Options {
            prefix: Some(PathBuf::from("/t/")),
            conf_file: Some(PathBuf::from("nginx.conf")),
            error_log: Some(ErrorLogArg::File(PathBuf::from("error.log"))),
            params: Some("pid p;".into()),
            ..Options::default()
        };
        let s = resolve(&options).unwrap();
        assert_eq!(s.conf_file, PathBuf::from("/t/nginx.conf"));
        assert_eq!(s.error_log, Some(PathBuf::from("/t/error.log")));
        assert_eq!(s.load.prefix, PathBuf::from("/t/"));
        assert_eq!(s.load.params.as_deref(), Some("pid p;"));
        // Absolute paths stay as given; `-e stderr` is no file.
        let options = Options {
            conf_file: Some(PathBuf::from("/etc/corelb.conf")),
            error_log: Some(ErrorLogArg::Stderr),
            ..options
        };
        let s = resolve(&options).unwrap();
        assert_eq!(s.conf_file, PathBuf::from("/etc/corelb.conf"));
        assert_eq!(s.error_log, None);
    }

    #[test]
    fn without_a_prefix_the_working_directory_is_the_prefix() {
        let options = Options {
            conf_file: Some(PathBuf::from("c.conf")),
            ..Options::default()
        };
        let s = resolve(&options).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(s.conf_file, cwd.join("c.conf"));
        assert_eq!(s.load.prefix, cwd);
        assert!(matches!(resolve(&Options::default()), Err(StartupError::NoConfigFile)));
    }
}
