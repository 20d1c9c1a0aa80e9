//! Values with variables (nginx "complex values": hash keys, `proxy_set_header` values, `return` texts): nginx's
//! syntax checks on `$name` / `${name}`, then [`KeyTemplate::compile`]. An unknown variable is reported when the
//! `http`/`stream` block ends, as nginx reports it (corelb adds the place of the first directive naming it).

use crate::config::error::ConfigError;
use crate::config::key::{KeyTemplate, Var};
use crate::config::model::Span;

/// The variables a `stream` value may use (of those corelb knows).
const STREAM_VARS: &[&str] = &["remote_addr", "remote_port", "server_addr", "server_port"];

/// Which module's variables apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    Http,
    Stream,
}

/// The first unknown variable of a block, kept for its end.
#[derive(Debug, Default)]
pub struct Vars {
    unknown: Option<ConfigError>,
}

/// The variable names of `raw` and the first regex capture (`$1`..`$9`) it uses, or nginx's syntax error
/// (`ngx_http_script_compile`'s name scan).
fn variable_scan(raw: &str) -> Result<(Vec<String>, Option<char>), String> {
    let b = raw.as_bytes();
    let mut names = Vec::new();
    let mut capture = None;
    let mut i = 0;
    while i < b.len() {
        if b.get(i) != Some(&b'$') {
            i += 1;
            continue;
        }
        i += 1;
        let Some(&first) = b.get(i) else {
            return Err("invalid variable name".into());
        };
        if (b'1'..=b'9').contains(&first) {
            capture.get_or_insert(char::from(first));
            i += 1;
            continue;
        }
        let mut bracket = first == b'{';
        if bracket {
            i += 1;
            if i == b.len() {
                return Err("invalid variable name".into());
            }
        }
        let (start, mut end) = (i, None);
        while let Some(&c) = b.get(i) {
            if c == b'}' && bracket {
                end = Some(i);
                i += 1;
                bracket = false;
                break;
            }
            if !(c.is_ascii_alphanumeric() || c == b'_') {
                break;
            }
            i += 1;
        }
        let name = raw.get(start..end.unwrap_or(i)).unwrap_or_default().to_string();
        if bracket {
            return Err(format!("the closing bracket in \"{name}\" variable is missing"));
        }
        if name.is_empty() {
            return Err("invalid variable name".into());
        }
        names.push(name);
    }
    Ok((names, capture))
}

impl Vars {
    /// Compiles `raw`. A syntax error is returned at once (at `at`); an unknown variable is remembered for the end of
    /// the block and an empty template stands in.
    pub fn compile(&mut self, raw: &str, module: Module, at: &Span) -> Result<KeyTemplate, ConfigError> {
        let (names, capture) = variable_scan(raw).map_err(|msg| ConfigError::invalid(msg, at))?;
        if let Some(n) = capture {
            let msg = format!("regex captures (\"${n}\") are not supported by corelb");
            return Err(ConfigError::invalid(msg, at));
        }
        let unknown = names.iter().find(|name| {
            let known = Var::from_name(name).is_some();
            match module {
                Module::Http => !known,
                Module::Stream => !known || !STREAM_VARS.contains(&name.as_str()),
            }
        });
        if let Some(name) = unknown {
            self.note_unknown(name, at);
            return placeholder(at);
        }
        match KeyTemplate::compile(raw) {
            Ok(t) => Ok(t),
            Err(e) => {
                let name = match e {
                    crate::config::key::KeyError::UnknownVariable(n) => n,
                    crate::config::key::KeyError::InvalidName(n) => n,
                };
                self.note_unknown(&name, at);
                placeholder(at)
            }
        }
    }

    /// Checks `raw` as [`Vars::compile`] does, keeping nothing.
    pub fn check(&mut self, raw: &str, module: Module, at: &Span) -> Result<(), ConfigError> {
        self.compile(raw, module, at).map(|_| ())
    }

    /// Remembers an unknown variable for the end of the block (the first one is reported).
    pub fn note_unknown(&mut self, name: &str, at: &Span) {
        if self.unknown.is_none() {
            self.unknown = Some(ConfigError::invalid(format!("unknown \"{name}\" variable"), at));
        }
    }

    /// The deferred error, if a variable was unknown.
    pub fn finish(self) -> Result<(), ConfigError> {
        match self.unknown {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// An empty template, standing in for one whose error is reported later.
fn placeholder(at: &Span) -> Result<KeyTemplate, ConfigError> {
    KeyTemplate::compile("").map_err(|e| ConfigError::invalid(e.to_string(), at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn at() -> Span {
        Span {
            file: PathBuf::from("t.conf"),
            line: 7,
        }
    }

    fn variable_names(raw: &str) -> Result<Vec<String>, String> {
        variable_scan(raw).map(|(names, _)| names)
    }

    #[test]
    fn names_and_nginx_syntax_errors() {
        assert_eq!(variable_names("$host$request_uri").unwrap(), ["host", "request_uri"]);
        assert_eq!(variable_names("a${arg_k}-b $1 c").unwrap(), ["arg_k"]);
        assert_eq!(variable_scan("x$2$3").unwrap(), (vec![], Some('2')));
        assert_eq!(variable_names("no variables").unwrap(), Vec::<String>::new());
        assert_eq!(variable_names("a$").unwrap_err(), "invalid variable name");
        assert_eq!(variable_names("${").unwrap_err(), "invalid variable name");
        assert_eq!(variable_names("$-x").unwrap_err(), "invalid variable name");
        assert_eq!(
            variable_names("a${x").unwrap_err(),
            "the closing bracket in \"x\" variable is missing"
        );
        assert_eq!(
            variable_names("${ho st}").unwrap_err(),
            "the closing bracket in \"ho\" variable is missing"
        );
    }

    #[test]
    fn unknown_variables_wait_for_the_end_of_the_block() {
        let mut v = Vars::default();
        let t = v.compile("$remote_addr", Module::Http, &at()).unwrap();
        assert!(t.is_only(&Var::RemoteAddr));
        assert!(v.compile("$nope", Module::Http, &at()).is_ok());
        assert!(v.compile("$other", Module::Http, &at()).is_ok());
        assert_eq!(
            v.finish().unwrap_err().to_string(),
            "[emerg] unknown \"nope\" variable in t.conf:7"
        );
    }

    #[test]
    fn stream_knows_only_connection_variables() {
        let mut v = Vars::default();
        assert!(v.compile("$remote_addr:$server_port", Module::Stream, &at()).is_ok());
        assert!(v.finish().is_ok());
        let mut v = Vars::default();
        assert!(v.compile("$request_uri", Module::Stream, &at()).is_ok());
        assert_eq!(
            v.finish().unwrap_err().to_string(),
            "[emerg] unknown \"request_uri\" variable in t.conf:7"
        );
    }

    #[test]
    fn syntax_errors_are_immediate() {
        let mut v = Vars::default();
        let e = v.compile("$", Module::Http, &at()).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] invalid variable name in t.conf:7");
        let e = v.compile("a$1", Module::Http, &at()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] regex captures (\"$1\") are not supported by corelb in t.conf:7"
        );
    }
}
