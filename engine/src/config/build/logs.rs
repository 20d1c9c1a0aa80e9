//! `log_format` (http level) and `access_log` (http, server, location) as nginx's `ngx_http_log_module` reads
//! them: formats compiled once, looked up by name (any case) when an `access_log` line names one, the `buffer=`,
//! `flush=` and `if=` parameters, and nginx's checks and messages.

use super::vars::{Module, Vars};
use super::{arg, value};
use crate::config::error::ConfigError;
use crate::config::log_format::{FormatError, LogFormat};
use crate::config::log_path::{self, LogPath, OpenLogCache};
use crate::config::model::{AccessLogConf, Span};
use crate::config::parser::Directive;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The formats of an http block (`combined` first) and the buffer of each buffered log file.
#[derive(Debug)]
pub struct LogState {
    formats: Vec<Arc<LogFormat>>,
    buffered: BufferedFiles,
    /// What relative log paths resolve against (nginx's prefix).
    prefix: PathBuf,
}

impl Default for LogState {
    fn default() -> Self {
        LogState {
            formats: vec![Arc::new(LogFormat::combined())],
            buffered: BufferedFiles::default(),
            prefix: PathBuf::new(),
        }
    }
}

/// One level's `access_log` lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelLogs {
    /// `access_log off` at this level: nothing is logged here, whatever other lines say.
    pub off: bool,
    pub logs: Vec<AccessLogConf>,
}

impl LevelLogs {
    /// The lines in effect.
    pub fn effective(&self) -> Vec<AccessLogConf> {
        if self.off {
            Vec::new()
        } else {
            self.logs.clone()
        }
    }
}

/// An error of a format, or a deferred unknown variable (noted in `vars`, with an empty format standing in).
fn format_result(
    r: Result<LogFormat, FormatError>,
    name: &str,
    vars: &mut Vars,
    at: &Span,
) -> Result<LogFormat, ConfigError> {
    match r {
        Ok(f) => Ok(f),
        Err(FormatError::UnknownVariable(v)) => {
            vars.note_unknown(&v, at);
            LogFormat::compile(name, &[]).map_err(|e| ConfigError::invalid(e.to_string(), at))
        }
        Err(e) => Err(ConfigError::invalid(e.to_string(), at)),
    }
}

impl LogState {
    /// The state of an http block whose relative log paths resolve against `prefix`.
    pub fn with_prefix(prefix: PathBuf) -> Self {
        LogState {
            prefix,
            ..LogState::default()
        }
    }

    /// `log_format NAME [escape=default|json|none] STRING ...`.
    pub fn log_format(&mut self, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
        let name = arg(d, 0);
        if self.formats.iter().any(|f| f.name == name) {
            let msg = format!("duplicate \"log_format\" name \"{name}\"");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let args = d.args.get(1..).unwrap_or_default();
        // `$1`..`$9` are no variables in a format (nginx: `unknown "1" variable`), though they are in `if=`
        let resolve = |n: &str| {
            crate::config::var::capture_number(n)
                .is_none()
                .then(|| vars.resolve(n, Module::Http, None))
                .flatten()
        };
        let compiled = LogFormat::compile_with(name, args, &resolve);
        let format = format_result(compiled, name, vars, &d.span)?;
        let body = crate::config::key::Var::RequestBody;
        if format
            .ops()
            .iter()
            .any(|op| *op == crate::config::log_format::Op::Var(body.clone()))
        {
            return Err(Vars::refuse_request_body(&d.span));
        }
        self.formats.push(Arc::new(format));
        Ok(())
    }

    /// `access_log off` or `access_log PATH [FORMAT [buffer=SIZE] [flush=TIME] [if=COND]]` into `level`.
    pub fn access_log(
        &mut self,
        level: &mut Option<LevelLogs>,
        d: &Directive,
        vars: &mut Vars,
    ) -> Result<(), ConfigError> {
        let here = level.get_or_insert_with(LevelLogs::default);
        let path = arg(d, 0);
        if path == "off" {
            here.off = true;
            return match d.args.get(1) {
                Some(extra) => Err(ConfigError::invalid(format!("invalid parameter \"{extra}\""), &d.span)),
                None => Ok(()),
            };
        }
        if path.starts_with("syslog:") {
            let msg = format!("access log \"{path}\" is not supported by corelb (a plain file path)");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let name = d.args.get(1).map_or("combined", String::as_str);
        let Some(format) = self.formats.iter().find(|f| f.name.eq_ignore_ascii_case(name)) else {
            return Err(ConfigError::invalid(format!("unknown log format \"{name}\""), &d.span));
        };
        let mut conf = AccessLogConf {
            path: self.prefix.join(path),
            format: Arc::clone(format),
            buffer: None,
            flush: None,
            gzip: None,
            cond: None,
            dynamic: None,
            span: d.span.clone(),
        };
        for p in d.args.iter().skip(2) {
            parameter(&mut conf, p, vars, &d.span)?;
        }
        if log_path::has_variables(path) {
            conf.dynamic = Some(self.dynamic_path(&conf, path, vars, &d.span)?);
            here.logs.push(conf);
            return Ok(());
        }
        self.buffered.claim(&conf, path, &d.span)?;
        here.logs.push(conf);
        Ok(())
    }

    /// A path with variables, compiled (nginx's checks: such a log is not buffered, and a relative path resolves
    /// against the prefix).
    fn dynamic_path(
        &self,
        conf: &AccessLogConf,
        path: &str,
        vars: &mut Vars,
        at: &Span,
    ) -> Result<LogPath, ConfigError> {
        if conf.flush.is_some() && conf.buffer.is_none() {
            let msg = format!("no buffer is defined for access_log \"{path}\"");
            return Err(ConfigError::invalid(msg, at));
        }
        if conf.buffer.is_some() {
            return Err(ConfigError::invalid("buffered logs cannot have variables in name", at));
        }
        let args = ["escape=none".to_string(), path.to_string()];
        let compiled = LogFormat::compile_with("path", &args, &|n| vars.resolve(n, Module::Http, None));
        let format = Arc::new(format_result(compiled, "path", vars, at)?);
        let lead = match path.starts_with('/') {
            true => Vec::new(),
            false => {
                use std::os::unix::ffi::OsStrExt;
                let mut lead = self.prefix.as_os_str().as_bytes().to_vec();
                if !lead.is_empty() && !lead.ends_with(b"/") {
                    lead.push(b'/');
                }
                lead
            }
        };
        Ok(LogPath {
            lead,
            format,
            cache: None,
            root: Some(PathBuf::new()),
        })
    }

    /// Gives every line of a buffered file that file's `buffer=` and `flush=` (nginx keeps one buffer per file),
    /// and every line with variables in its path the location's `root` (nothing is written while it is missing).
    pub fn settle(&self, logs: &mut [AccessLogConf], root: &std::path::Path) {
        self.buffered.settle(logs);
        for l in logs {
            if let Some(d) = &mut l.dynamic {
                d.root = Some(root.to_path_buf());
            }
        }
    }
}

/// The lines in effect at a level with its `open_log_file_cache` (`cache`; `None` when no level set one or the
/// nearest said `off`), given to the lines whose path has variables.
pub fn with_open_cache(mut logs: Vec<AccessLogConf>, cache: Option<OpenLogCache>) -> Vec<AccessLogConf> {
    for l in &mut logs {
        if let Some(d) = &mut l.dynamic {
            d.cache = cache;
        }
    }
    logs
}

/// The buffered log files of a block, with their `buffer=` and `flush=` (nginx keeps one buffer per file); shared
/// by the http and the stream access logs.
#[derive(Debug, Default)]
pub struct BufferedFiles(Vec<(PathBuf, usize, Option<Duration>, Option<u32>)>);

impl BufferedFiles {
    /// nginx's checks of one `access_log` line's buffering (`path`: the file as written, for the messages), and
    /// the file's buffer noted.
    pub fn claim<F>(&mut self, conf: &AccessLogConf<F>, path: &str, at: &Span) -> Result<(), ConfigError> {
        if conf.flush.is_some() && conf.buffer.is_none() {
            let msg = format!("no buffer is defined for access_log \"{path}\"");
            return Err(ConfigError::invalid(msg, at));
        }
        if let Some(size) = conf.buffer {
            let conflict = self
                .0
                .iter()
                .find(|(p, ..)| *p == conf.path)
                .is_some_and(|&(_, s, f, z)| s != size || f != conf.flush || z != conf.gzip);
            if conflict {
                let msg = format!("access_log \"{path}\" already defined with conflicting parameters");
                return Err(ConfigError::invalid(msg, at));
            }
            self.0.push((conf.path.clone(), size, conf.flush, conf.gzip));
        }
        Ok(())
    }

    /// Gives every line of a buffered file that file's `buffer=` and `flush=`.
    pub fn settle<F>(&self, logs: &mut [AccessLogConf<F>]) {
        for l in logs {
            if let Some((_, size, flush, gzip)) = self.0.iter().find(|(p, ..)| *p == l.path) {
                l.buffer = Some(*size);
                l.flush = *flush;
                l.gzip = *gzip;
            }
        }
    }
}

/// `gzip` or `gzip=LEVEL` (1..9; 1 when not given) of `access_log`: the file is buffered (64k unless
/// `buffer=` says otherwise) and each buffer goes out as one gzip member, as nginx writes it.
pub fn gzip_parameter<F>(conf: &mut AccessLogConf<F>, p: &str, at: &Span) -> Result<(), ConfigError> {
    let level = match p.strip_prefix("gzip=") {
        None => 1,
        Some(l) => value::atoi(l)
            .filter(|n| (1..=9).contains(n))
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| ConfigError::invalid(format!("invalid compression level \"{l}\""), at))?,
    };
    conf.buffer.get_or_insert(64 * 1024);
    conf.gzip = Some(level);
    Ok(())
}

/// One `buffer=`, `flush=` or `if=` parameter.
fn parameter(conf: &mut AccessLogConf, p: &str, vars: &mut Vars, at: &Span) -> Result<(), ConfigError> {
    if let Some(size) = p.strip_prefix("buffer=") {
        let bytes = value::parse_size(size)
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok());
        let Some(bytes) = bytes else {
            return Err(ConfigError::invalid(format!("invalid buffer size \"{size}\""), at));
        };
        conf.buffer = Some(bytes);
    } else if let Some(time) = p.strip_prefix("flush=") {
        let Some(ms) = value::parse_time(time, false).filter(|&ms| ms > 0) else {
            return Err(ConfigError::invalid(format!("invalid flush time \"{time}\""), at));
        };
        conf.flush = Some(Duration::from_millis(ms));
    } else if p == "gzip" || p.starts_with("gzip=") {
        gzip_parameter(conf, p, at)?;
    } else if let Some(cond) = p.strip_prefix("if=") {
        let args = ["escape=none".to_string(), cond.to_string()];
        let compiled = LogFormat::compile_with("if", &args, &|n| vars.resolve(n, Module::Http, None));
        conf.cond = Some(Arc::new(format_result(compiled, "if", vars, at)?));
    } else {
        return Err(ConfigError::invalid(format!("invalid parameter \"{p}\""), at));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::log_format::Escape;

    fn directive(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 3,
            },
            block: None,
        }
    }

    fn err(state: &mut LogState, args: &[&str]) -> String {
        let mut level = None;
        let mut vars = Vars::default();
        state
            .access_log(&mut level, &directive("access_log", args), &mut vars)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn formats_are_named_once_and_found_in_any_case() {
        let mut s = LogState::default();
        let mut vars = Vars::default();
        s.log_format(&directive("log_format", &["Main", "escape=json", "$status"]), &mut vars)
            .unwrap();
        let e = s.log_format(&directive("log_format", &["combined", "$status"]), &mut vars);
        assert_eq!(
            e.unwrap_err().to_string(),
            "[emerg] duplicate \"log_format\" name \"combined\" in t.conf:3"
        );
        let mut level = None;
        let d = directive(
            "access_log",
            &["/tmp/a.log", "main", "buffer=32k", "flush=5s", "if=$status"],
        );
        s.access_log(&mut level, &d, &mut vars).unwrap();
        let logs = level.unwrap().effective();
        assert_eq!(logs[0].format.escape, Escape::Json);
        assert_eq!(
            (logs[0].buffer, logs[0].flush),
            (Some(32 * 1024), Some(Duration::from_secs(5)))
        );
        assert!(logs[0].cond.is_some());
        assert_eq!(logs[0].gzip, None);
        let mut gz = None;
        let d = directive("access_log", &["/tmp/gz.log", "main", "gzip=4"]);
        s.access_log(&mut gz, &d, &mut vars).unwrap();
        let d = directive("access_log", &["/tmp/gz1.log", "main", "gzip", "flush=1s"]);
        s.access_log(&mut gz, &d, &mut vars).unwrap();
        let gz = gz.unwrap().effective();
        assert_eq!(
            (gz[0].gzip, gz[0].buffer),
            (Some(4), Some(64 * 1024)),
            "gzip buffers 64k"
        );
        assert_eq!(gz[1].gzip, Some(1));
        assert!(vars.finish().is_ok());
    }

    #[test]
    fn nginx_messages() {
        let mut s = LogState::default();
        assert_eq!(
            err(&mut s, &["/tmp/a", "main"]),
            "[emerg] unknown log format \"main\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "buffer=32k"]),
            "[emerg] unknown log format \"buffer=32k\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "buffer=0"]),
            "[emerg] invalid buffer size \"0\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "flush=x"]),
            "[emerg] invalid flush time \"x\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "flush=1s"]),
            "[emerg] no buffer is defined for access_log \"/tmp/a\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "level=2"]),
            "[emerg] invalid parameter \"level=2\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["off", "x"]),
            "[emerg] invalid parameter \"x\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "gzip=0"]),
            "[emerg] invalid compression level \"0\" in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a", "combined", "gzip=x"]),
            "[emerg] invalid compression level \"x\" in t.conf:3"
        );
        let mut level = None;
        let mut vars = Vars::default();
        let d = directive("access_log", &["/tmp/b", "combined", "buffer=8k"]);
        s.access_log(&mut level, &d, &mut vars).unwrap();
        assert_eq!(
            err(&mut s, &["/tmp/b", "combined", "buffer=16k"]),
            "[emerg] access_log \"/tmp/b\" already defined with conflicting parameters in t.conf:3"
        );
    }

    #[test]
    fn paths_with_variables_are_compiled_and_never_buffered() {
        let mut s = LogState::with_prefix(PathBuf::from("/p"));
        let mut vars = Vars::default();
        let mut level = None;
        let d = directive("access_log", &["logs/$host.log", "combined", "if=$arg_x"]);
        s.access_log(&mut level, &d, &mut vars).unwrap();
        let d = directive("access_log", &["/abs/${arg_a}x"]);
        s.access_log(&mut level, &d, &mut vars).unwrap();
        let mut logs = with_open_cache(level.unwrap().effective(), None);
        s.settle(&mut logs, std::path::Path::new("/srv/www"));
        let rel = logs[0].dynamic.as_ref().unwrap();
        assert_eq!(rel.lead, b"/p/");
        assert_eq!(rel.format.escape, Escape::None, "a missing value is empty");
        assert_eq!(rel.root, Some(PathBuf::from("/srv/www")));
        assert!(logs[0].cond.is_some());
        assert_eq!(logs[1].dynamic.as_ref().unwrap().lead, b"");
        assert_eq!(
            err(&mut s, &["/l/$host", "combined", "buffer=4k"]),
            "[emerg] buffered logs cannot have variables in name in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/l/$host", "combined", "gzip"]),
            "[emerg] buffered logs cannot have variables in name in t.conf:3"
        );
        assert_eq!(
            err(&mut s, &["/l/$host", "combined", "flush=1s"]),
            "[emerg] no buffer is defined for access_log \"/l/$host\" in t.conf:3"
        );
        let mut level = None;
        s.access_log(&mut level, &directive("access_log", &["/l/$nope"]), &mut vars)
            .unwrap();
        assert_eq!(
            vars.finish().unwrap_err().to_string(),
            "[emerg] unknown \"nope\" variable in t.conf:3"
        );
    }

    #[test]
    fn off_wins_at_its_level_and_unknown_variables_wait() {
        let mut s = LogState::default();
        let mut vars = Vars::default();
        let mut level = None;
        s.access_log(&mut level, &directive("access_log", &["/tmp/a"]), &mut vars)
            .unwrap();
        s.access_log(&mut level, &directive("access_log", &["off"]), &mut vars)
            .unwrap();
        assert!(level.unwrap().effective().is_empty());
        s.log_format(&directive("log_format", &["x", "$nope"]), &mut vars)
            .unwrap();
        assert_eq!(
            vars.finish().unwrap_err().to_string(),
            "[emerg] unknown \"nope\" variable in t.conf:3"
        );
    }
}
