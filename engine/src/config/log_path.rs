//! `access_log` paths with variables (`access_log /logs/$host.log;`) and `open_log_file_cache`, as nginx's
//! `ngx_http_log_module` reads them: the path compiled once as an `escape=none` format (a missing value is
//! empty), put together per line and opened by the log writer thread (see `access_log::path_vars`).

use crate::config::log_format::LogFormat;
use crate::config::value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME]`: the descriptors of the files a path
/// with variables named, kept open (nginx's `ngx_open_file_cache_t` with its `valid` and `min_uses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLogCache {
    /// The most files kept (the least recently used one is closed for a new one).
    pub max: usize,
    /// A file not written for this long is closed (10 s by default).
    pub inactive: Duration,
    /// How often a kept file is checked to be still the one its name names (60 s by default).
    pub valid: Duration,
    /// The writes within `inactive` after which a file is kept open (1 by default).
    pub min_uses: u64,
}

/// A log path with variables: `lead` (the prefix of a relative path) then `format`'s values (`F`: an http or a
/// stream format).
#[derive(Debug, Clone, PartialEq)]
pub struct LogPath<F = LogFormat> {
    pub lead: Vec<u8>,
    pub format: Arc<F>,
    /// The `open_log_file_cache` of the location the line is written for (none: opened and closed per line).
    pub cache: Option<OpenLogCache>,
    /// The location's `root` (http): as nginx, nothing is written while that directory does not exist. Stream
    /// has none.
    pub root: Option<PathBuf>,
}

/// What the log writer needs of a path with variables: how its files are kept and the directory that must exist.
pub trait NamedRule: std::fmt::Debug + Send + Sync {
    fn cache(&self) -> Option<OpenLogCache>;
    fn root(&self) -> Option<&std::path::Path>;
}

impl<F: std::fmt::Debug + Send + Sync> NamedRule for LogPath<F> {
    fn cache(&self) -> Option<OpenLogCache> {
        self.cache
    }

    fn root(&self) -> Option<&std::path::Path> {
        self.root.as_deref()
    }
}

/// Whether `path` names variables (nginx's `ngx_http_script_variables_count`: any `$`).
pub fn has_variables(path: &str) -> bool {
    path.contains('$')
}

/// The message of a bad `open_log_file_cache` parameter.
fn invalid(p: &str) -> String {
    format!("invalid \"open_log_file_cache\" parameter \"{p}\"")
}

/// `open_log_file_cache` with nginx's parameters and messages (`ngx_http_log_open_file_cache`); `None` for `off`.
pub fn open_log_file_cache(args: &[String]) -> Result<Option<OpenLogCache>, String> {
    let (mut max, mut off) = (0u64, false);
    let mut cache = OpenLogCache {
        max: 0,
        inactive: Duration::from_secs(10),
        valid: Duration::from_secs(60),
        min_uses: 1,
    };
    let secs = |s: &str, p: &str| {
        value::parse_time(s, true)
            .map(Duration::from_secs)
            .ok_or_else(|| invalid(p))
    };
    for p in args {
        if let Some(n) = p.strip_prefix("max=") {
            max = value::atoi(n).ok_or_else(|| invalid(p))?;
        } else if let Some(t) = p.strip_prefix("inactive=") {
            cache.inactive = secs(t, p)?;
        } else if let Some(n) = p.strip_prefix("min_uses=") {
            cache.min_uses = value::atoi(n).ok_or_else(|| invalid(p))?;
        } else if let Some(t) = p.strip_prefix("valid=") {
            cache.valid = secs(t, p)?;
        } else if p == "off" {
            off = true;
        } else {
            return Err(invalid(p));
        }
    }
    if off {
        return Ok(None);
    }
    if max == 0 {
        return Err("\"open_log_file_cache\" must have \"max\" parameter".into());
    }
    cache.max = usize::try_from(max).unwrap_or(usize::MAX);
    Ok(Some(cache))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parameters_and_defaults_as_nginx() {
        let c = open_log_file_cache(&args(&["max=3", "inactive=20s", "valid=1m", "min_uses=2"]))
            .unwrap()
            .unwrap();
        assert_eq!(
            c,
            OpenLogCache {
                max: 3,
                inactive: Duration::from_secs(20),
                valid: Duration::from_secs(60),
                min_uses: 2
            }
        );
        let d = open_log_file_cache(&args(&["max=10"])).unwrap().unwrap();
        assert_eq!(
            (d.inactive, d.valid, d.min_uses),
            (Duration::from_secs(10), Duration::from_secs(60), 1)
        );
        assert_eq!(open_log_file_cache(&args(&["off"])).unwrap(), None);
    }

    #[test]
    fn nginx_messages() {
        assert_eq!(
            open_log_file_cache(&args(&["inactive=1s"])).unwrap_err(),
            "\"open_log_file_cache\" must have \"max\" parameter"
        );
        assert_eq!(
            open_log_file_cache(&args(&["max=x"])).unwrap_err(),
            "invalid \"open_log_file_cache\" parameter \"max=x\""
        );
        assert_eq!(
            open_log_file_cache(&args(&["max=1", "size=2"])).unwrap_err(),
            "invalid \"open_log_file_cache\" parameter \"size=2\""
        );
        assert!(has_variables("/l/$host.log") && !has_variables("/l/a.log"));
    }
}
