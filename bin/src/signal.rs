//! `corelb -s reload|stop|quit|reopen`, as `nginx -s`: the running process is found through the `pid` file the
//! config (with `-p` and `-g`) names, and sent SIGHUP (reload), SIGTERM (stop), SIGQUIT (graceful quit) or SIGUSR1
//! (reopen the log).

use corelb_engine::config;
use corelb_engine::config::error::errno_text;
use corelb_engine::server::Startup;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Why the signal was not sent; displayed as nginx words it (after `corelb: `).
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("[error] no \"pid\" directive in {0}: the running process cannot be found")]
    NoPidFile(PathBuf),
    #[error("[error] open() \"{}\" failed ({})", .path.display(), errno_text(.source))]
    Open { path: PathBuf, source: std::io::Error },
    #[error("[error] invalid PID number \"{text}\" in \"{}\"", .path.display())]
    InvalidPid { text: String, path: PathBuf },
    #[error("[alert] kill({pid}, {signal}) failed ({})", errno_text(.source))]
    Kill {
        pid: i32,
        signal: i32,
        source: std::io::Error,
    },
    #[error("[emerg] invalid option: \"-s {0}\"")]
    UnknownAction(String),
}

/// The signal of a `-s` name.
fn signal_of(action: &str) -> Result<i32, SignalError> {
    match action {
        "reload" => Ok(libc::SIGHUP),
        "stop" => Ok(libc::SIGTERM),
        "quit" => Ok(libc::SIGQUIT),
        "reopen" => Ok(libc::SIGUSR1),
        other => Err(SignalError::UnknownAction(other.to_string())),
    }
}

/// The pid written in `text` (the pid file's content): digits, optionally followed by a line end.
fn parse_pid(text: &str, path: &Path) -> Result<i32, SignalError> {
    let trimmed = text.trim_end_matches(['\n', '\r']);
    let invalid = || SignalError::InvalidPid {
        text: trimmed.to_string(),
        path: path.to_path_buf(),
    };
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    trimmed.parse::<i32>().ok().filter(|p| *p > 0).ok_or_else(invalid)
}

/// Sends the `-s` signal `action` to the process whose pid file the config of `startup` names.
pub fn send(startup: &Startup, action: &str) -> Result<(), SignalError> {
    let signal = signal_of(action)?;
    let loaded = config::load_with(&startup.conf_file, &startup.load)?;
    let pid_file = loaded
        .config
        .main
        .pid
        .ok_or_else(|| SignalError::NoPidFile(startup.conf_file.clone()))?;
    let text = std::fs::read_to_string(&pid_file).map_err(|source| SignalError::Open {
        path: pid_file.clone(),
        source,
    })?;
    let pid = parse_pid(&text, &pid_file)?;
    // SAFETY: kill takes plain integers; a wrong pid is an error return, not undefined behaviour.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(SignalError::Kill {
            pid,
            signal,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// `corelb -s ACTION -c FILE`: exit 0 once the signal is sent, 1 on any failure (said on stderr and in the `-e`
/// file, as nginx says it).
pub fn main(startup: &Startup, action: &str) -> ExitCode {
    match send(startup, action) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::startup::EarlyLog::open(startup).emit(&e.to_string());
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_file_contents() {
        let p = Path::new("/run/corelb.pid");
        assert_eq!(parse_pid("1234\n", p).unwrap(), 1234);
        assert_eq!(parse_pid("77", p).unwrap(), 77);
        for bad in ["", "\n", "12a\n", "-5\n", "0\n", " 12\n", "99999999999\n"] {
            let e = parse_pid(bad, p).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "[error] invalid PID number \"{}\" in \"/run/corelb.pid\"",
                    bad.trim_end()
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn actions_map_to_nginx_signals() {
        let got: Vec<i32> = crate::options::SIGNALS.iter().map(|a| signal_of(a).unwrap()).collect();
        assert_eq!(got, [libc::SIGTERM, libc::SIGQUIT, libc::SIGUSR1, libc::SIGHUP]);
        assert!(matches!(signal_of("restart"), Err(SignalError::UnknownAction(_))));
    }

    #[test]
    fn a_missing_pid_file_is_an_open_error() {
        let dir = std::env::temp_dir().join(format!("corelb-signal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("c.conf");
        let pid = dir.join("none.pid");
        std::fs::write(&conf, format!("pid {};\nevents {{}}\n", pid.display())).unwrap();
        let e = send(&Startup::of_file(&conf), "reload").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[error] open() \"{}\" failed (2: No such file or directory)",
                pid.display()
            )
        );
        std::fs::write(&conf, "events {}\n").unwrap();
        assert!(matches!(
            send(&Startup::of_file(&conf), "stop"),
            Err(SignalError::NoPidFile(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
