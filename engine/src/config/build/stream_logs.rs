//! The stream block's `log_format` and `access_log` (stream, server) as nginx's `ngx_stream_log_module` reads them
//! (no predefined format: an `access_log` line names one), and a stream server's `return VALUE`
//! (`ngx_stream_return_module`), with nginx's checks and messages.

use super::logs::BufferedFiles;
use super::vars::Vars;
use super::{arg, directive_err, value};
use crate::config::error::ConfigError;
use crate::config::log_format::FormatError;
use crate::config::model::{AccessLogConf, Span};
use crate::config::parser::Directive;
use crate::config::stream_format::{StreamFormat, Unknown};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A stream `access_log` line.
pub type StreamLog = AccessLogConf<StreamFormat>;

/// The stream block's formats and the buffer of each buffered log file.
#[derive(Debug, Default)]
pub struct StreamLogState {
    formats: Vec<Arc<StreamFormat>>,
    buffered: BufferedFiles,
    /// What relative log paths resolve against (nginx's prefix).
    prefix: PathBuf,
}

/// One level's `access_log` lines (the stream block or a server).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamLevelLogs {
    /// `access_log off` at this level.
    pub off: bool,
    pub logs: Vec<StreamLog>,
}

impl StreamLevelLogs {
    /// The lines of a server: its own (none for `off`), else those of the block (`parent`), as nginx merges them.
    pub fn effective(server: Option<&StreamLevelLogs>, parent: Option<&StreamLevelLogs>) -> Vec<StreamLog> {
        match server.or(parent) {
            Some(l) if !l.off => l.logs.clone(),
            _ => Vec::new(),
        }
    }
}

/// A compiled format, its unknown variables noted for the end of the block.
pub fn noted(
    r: Result<(StreamFormat, Vec<Unknown>), FormatError>,
    vars: &mut Vars,
    at: &Span,
) -> Result<StreamFormat, ConfigError> {
    let (format, unknown) = r.map_err(|e| ConfigError::invalid(e.to_string(), at))?;
    for name in unknown {
        vars.note_unknown(&name, at);
    }
    Ok(format)
}

impl StreamLogState {
    /// The state of a stream block whose relative log paths resolve against `prefix`.
    pub fn with_prefix(prefix: PathBuf) -> Self {
        StreamLogState {
            prefix,
            ..StreamLogState::default()
        }
    }

    /// `log_format NAME [escape=default|json|none] STRING ...` (names compared with case, as nginx's stream module).
    pub fn log_format(&mut self, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
        let name = arg(d, 0);
        if self.formats.iter().any(|f| f.name == name) {
            let msg = format!("duplicate \"log_format\" name \"{name}\"");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let maps = |n: &str| vars.map_index(n);
        let compiled = StreamFormat::compile_with(name, d.args.get(1..).unwrap_or_default(), &maps);
        let format = noted(compiled, vars, &d.span)?;
        self.formats.push(Arc::new(format));
        Ok(())
    }

    /// `access_log off` or `access_log PATH FORMAT [buffer=SIZE] [flush=TIME] [if=COND]` into `level`.
    pub fn access_log(
        &mut self,
        level: &mut Option<StreamLevelLogs>,
        d: &Directive,
        vars: &mut Vars,
    ) -> Result<(), ConfigError> {
        let here = level.get_or_insert_with(StreamLevelLogs::default);
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
        let Some(name) = d.args.get(1) else {
            return Err(ConfigError::invalid("log format is not specified", &d.span));
        };
        let Some(format) = self.formats.iter().find(|f| f.name.eq_ignore_ascii_case(name)) else {
            return Err(ConfigError::invalid(format!("unknown log format \"{name}\""), &d.span));
        };
        let mut conf = StreamLog {
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
        if crate::config::log_path::has_variables(path) {
            // nginx's `ngx_stream_log_script_write`: the path put together per session, opened by the writer
            if conf.buffer.is_some() || conf.flush.is_some() {
                return Err(ConfigError::invalid(
                    "buffered logs cannot have variables in name",
                    &d.span,
                ));
            }
            let maps = |n: &str| vars.map_index(n);
            let compiled = StreamFormat::value_with("path", path, &maps);
            let format = Arc::new(noted(compiled, vars, &d.span)?);
            let lead = if path.starts_with('/') {
                Vec::new()
            } else {
                use std::os::unix::ffi::OsStrExt;
                let mut lead = self.prefix.as_os_str().as_bytes().to_vec();
                if !lead.is_empty() && !lead.ends_with(b"/") {
                    lead.push(b'/');
                }
                lead
            };
            conf.dynamic = Some(crate::config::log_path::LogPath {
                lead,
                format,
                cache: None,
                root: None,
            });
            here.logs.push(conf);
            return Ok(());
        }
        self.buffered.claim(&conf, path, &d.span)?;
        here.logs.push(conf);
        Ok(())
    }

    /// Gives every line of a buffered file that file's `buffer=` and `flush=` (nginx keeps one buffer per file).
    pub fn settle(&self, logs: &mut [StreamLog]) {
        self.buffered.settle(logs);
    }
}

/// `return VALUE` of a stream server (nginx's `is duplicate` for a second one).
pub fn stream_return(slot: &mut Option<Arc<StreamFormat>>, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
    if slot.is_some() {
        return Err(directive_err(d, "is duplicate"));
    }
    let maps = |n: &str| vars.map_index(n);
    let compiled = StreamFormat::value_with("return", arg(d, 0), &maps);
    let value = noted(compiled, vars, &d.span)?;
    *slot = Some(Arc::new(value));
    Ok(())
}

/// One `buffer=`, `flush=` or `if=` parameter.
fn parameter(conf: &mut StreamLog, p: &str, vars: &mut Vars, at: &Span) -> Result<(), ConfigError> {
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
        super::logs::gzip_parameter(conf, p, at)?;
    } else if let Some(cond) = p.strip_prefix("if=") {
        let maps = |n: &str| vars.map_index(n);
        let compiled = StreamFormat::value_with("if", cond, &maps);
        conf.cond = Some(Arc::new(noted(compiled, vars, at)?));
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
                file: PathBuf::from("s.conf"),
                line: 7,
            },
            block: None,
        }
    }

    fn err(state: &mut StreamLogState, args: &[&str]) -> String {
        let mut level = None;
        let mut vars = Vars::default();
        state
            .access_log(&mut level, &directive("access_log", args), &mut vars)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_format_is_required_and_found_in_any_case() {
        let mut s = StreamLogState::default();
        let mut vars = Vars::default();
        s.log_format(
            &directive("log_format", &["Bytes", "escape=json", "$bytes_sent"]),
            &mut vars,
        )
        .unwrap();
        s.log_format(&directive("log_format", &["bytes", "$bytes_sent"]), &mut vars)
            .unwrap();
        let e = s.log_format(&directive("log_format", &["bytes", "$status"]), &mut vars);
        assert_eq!(
            e.unwrap_err().to_string(),
            "[emerg] duplicate \"log_format\" name \"bytes\" in s.conf:7"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a.log"]),
            "[emerg] log format is not specified in s.conf:7"
        );
        assert_eq!(
            err(&mut s, &["/tmp/a.log", "combined"]),
            "[emerg] unknown log format \"combined\" in s.conf:7"
        );
        let mut level = None;
        let d = directive(
            "access_log",
            &["/tmp/a.log", "BYTES", "buffer=8k", "flush=2s", "if=$remote_port"],
        );
        s.access_log(&mut level, &d, &mut vars).unwrap();
        let logs = StreamLevelLogs::effective(None, level.as_ref());
        assert_eq!(logs[0].format.escape, Escape::Json);
        assert_eq!(
            (logs[0].buffer, logs[0].flush),
            (Some(8 * 1024), Some(Duration::from_secs(2)))
        );
        assert!(logs[0].cond.is_some());
        assert!(vars.finish().is_ok());
    }

    #[test]
    fn nginx_messages_for_parameters() {
        let mut s = StreamLogState::default();
        let mut vars = Vars::default();
        s.log_format(&directive("log_format", &["t", "$status"]), &mut vars)
            .unwrap();
        let cases: &[(&[&str], &str)] = &[
            (&["/tmp/a", "t", "buffer=0"], "invalid buffer size \"0\""),
            (&["/tmp/a", "t", "flush=x"], "invalid flush time \"x\""),
            (
                &["/tmp/a", "t", "flush=1s"],
                "no buffer is defined for access_log \"/tmp/a\"",
            ),
            (&["/tmp/a", "t", "level=2"], "invalid parameter \"level=2\""),
            (&["/tmp/a", "t", "gzip=10"], "invalid compression level \"10\""),
            (&["off", "t"], "invalid parameter \"t\""),
        ];
        for (args, msg) in cases {
            assert_eq!(err(&mut s, args), format!("[emerg] {msg} in s.conf:7"), "{args:?}");
        }
    }

    #[test]
    fn server_lines_replace_the_blocks_and_unknown_variables_wait() {
        let mut s = StreamLogState::default();
        let mut vars = Vars::default();
        s.log_format(&directive("log_format", &["t", "$request_uri"]), &mut vars)
            .unwrap();
        let (mut block, mut server) = (None, None);
        s.access_log(&mut block, &directive("access_log", &["/tmp/b", "t"]), &mut vars)
            .unwrap();
        assert_eq!(StreamLevelLogs::effective(None, block.as_ref()).len(), 1);
        s.access_log(&mut server, &directive("access_log", &["off"]), &mut vars)
            .unwrap();
        assert!(StreamLevelLogs::effective(server.as_ref(), block.as_ref()).is_empty());
        let mut ret = None;
        stream_return(&mut ret, &directive("return", &["$remote_addr\n"]), &mut vars).unwrap();
        let again = stream_return(&mut ret, &directive("return", &["x"]), &mut vars);
        assert_eq!(
            again.unwrap_err().to_string(),
            "[emerg] \"return\" directive is duplicate in s.conf:7"
        );
        assert_eq!(
            vars.finish().unwrap_err().to_string(),
            "[emerg] unknown \"request_uri\" variable in s.conf:7"
        );
    }
}
