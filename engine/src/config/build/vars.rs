//! Values with variables (nginx "complex values": hash keys, `proxy_set_header` values, `return` texts, `map`
//! sources and values): nginx's syntax checks on `$name` / `${name}`, then [`KeyTemplate::compile_with`] with the
//! block's `map` variables before the built-in ones. An unknown variable is reported when the `http`/`stream`
//! block ends, as nginx reports it (corelb adds the place of the first directive naming it).

use crate::config::error::ConfigError;
use crate::config::key::{KeyTemplate, Var};
use crate::config::map::MapRegex;
use crate::config::model::Span;
use crate::config::var::capture_number;

/// Which module's variables apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    Http,
    Stream,
}

/// The block's `map` variable names, and its first unknown variable, kept for its end.
#[derive(Debug, Default)]
pub struct Vars {
    unknown: Option<ConfigError>,
    /// The `map` variables of the block, lower-case, by map index (a name given twice: the later map wins, as
    /// nginx's second `map` replaces the variable's handler).
    maps: Vec<String>,
    /// The named groups of the block's regex server names, by index ([`Var::ServerCapture`]).
    server_captures: Vec<String>,
    /// The block's `set` variables, lower-case, by [`Var::User`] index.
    users: Vec<String>,
    /// The named groups of the block's location, `rewrite` and `if` regexes ([`Var::RegexCapture`]).
    regex_captures: Vec<String>,
    /// A value names `$ssl_ciphers` (handshakes then keep the client's offer).
    ssl_ciphers: std::cell::Cell<bool>,
}

/// The message for `$request_body` in a log format: the body is not kept until the line is written.
const REQUEST_BODY: &str =
    "the \"$request_body\" variable in a log format is not supported by corelb (bodies are not kept until the \
     line is written)";

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
    /// The variables of a block whose `map`s define `maps` (in order).
    pub fn with_maps(maps: Vec<String>) -> Vars {
        Vars {
            unknown: None,
            maps: maps.into_iter().map(|m| m.to_ascii_lowercase()).collect(),
            server_captures: Vec::new(),
            users: Vec::new(),
            regex_captures: Vec::new(),
            ssl_ciphers: std::cell::Cell::new(false),
        }
    }

    /// These variables, with the named groups of the block's location, `rewrite` and `if` regexes.
    pub fn with_regex_captures(mut self, names: Vec<String>) -> Vars {
        self.regex_captures = names;
        self
    }

    /// The index of the block's `map` that defines `$name` (any case; the later one of a name given twice).
    pub fn map_index(&self, name: &str) -> Option<usize> {
        let lower = name.to_ascii_lowercase();
        self.maps.iter().rposition(|m| *m == lower)
    }

    /// These variables, with the named groups of the block's regex server names.
    pub fn with_server_captures(mut self, names: Vec<String>) -> Vars {
        self.server_captures = names;
        self
    }

    /// These variables with the block's `set` names (lower-case, in order: [`Var::User`] indexes them).
    pub fn with_users(mut self, users: Vec<String>) -> Vars {
        self.users = users;
        self
    }

    /// The block's `set` names.
    pub fn users(&self) -> &[String] {
        &self.users
    }

    /// Whether `name` (lower-case) is a `map` variable of the block.
    pub fn is_map(&self, lower: &str) -> bool {
        self.maps.iter().any(|m| m == lower)
    }

    /// The variable `name` means in `module`: a `map` of the block, else a built-in one the module has; in a map
    /// value (`regex`: the entry's, if a regex one), also `$1`..`$9` and the regex's named groups.
    pub fn resolve(&self, name: &str, module: Module, in_map: Option<Option<&MapRegex>>) -> Option<Var> {
        let lower = name.to_ascii_lowercase();
        if let Some(i) = self.maps.iter().rposition(|m| *m == lower) {
            return Some(Var::Map(i));
        }
        if module == Module::Http {
            if let Some(i) = self.users.iter().position(|u| *u == lower) {
                return Some(Var::User(i));
            }
        }
        if let Some(regex) = in_map {
            if let Some(n) = capture_number(&lower) {
                return Some(Var::Capture(n));
            }
            if let Some(g) = regex.and_then(|r| r.group(name)) {
                return Some(Var::Capture(g));
            }
        }
        if let Some(i) = self
            .server_captures
            .iter()
            .position(|n| *n == name)
            .filter(|_| module == Module::Http)
        {
            return Some(Var::ServerCapture(i));
        }
        match module {
            // `$1`..`$9` and named groups: the request's last regex match
            Module::Http => Var::from_name(&lower)
                .filter(|v| !matches!(v, Var::SslPreread(_)))
                .inspect(|v| self.ssl_ciphers.set(self.ssl_ciphers.get() || *v == Var::SslCiphers))
                .or_else(|| capture_number(&lower).map(Var::Capture))
                .or_else(|| {
                    let named = self.regex_captures.iter().any(|n| n == name);
                    named.then(|| Var::RegexCapture(name.to_string()))
                }),
            Module::Stream => Var::from_name(&lower).filter(|_| Var::in_stream(&lower)),
        }
    }

    /// Compiles `raw`. A syntax error is returned at once (at `at`); an unknown variable is remembered for the end of
    /// the block and an empty template stands in.
    pub fn compile(&mut self, raw: &str, module: Module, at: &Span) -> Result<KeyTemplate, ConfigError> {
        self.compile_in(raw, module, at, None)
    }

    /// [`Vars::compile`] of a `map` value (`regex`: its entry's regex, if any), where captures are allowed.
    pub fn compile_map_value(
        &mut self,
        raw: &str,
        module: Module,
        at: &Span,
        regex: Option<&MapRegex>,
    ) -> Result<KeyTemplate, ConfigError> {
        self.compile_in(raw, module, at, Some(regex))
    }

    fn compile_in(
        &mut self,
        raw: &str,
        module: Module,
        at: &Span,
        in_map: Option<Option<&MapRegex>>,
    ) -> Result<KeyTemplate, ConfigError> {
        let (names, capture) = variable_scan(raw).map_err(|msg| ConfigError::invalid(msg, at))?;
        if let (Some(n), None, Module::Stream) = (capture, in_map, module) {
            let msg = format!("regex captures (\"${n}\") are not supported by corelb");
            return Err(ConfigError::invalid(msg, at));
        }
        let unknown = names.iter().find(|name| self.resolve(name, module, in_map).is_none());
        if let Some(name) = unknown {
            self.note_unknown(name, at);
            return placeholder(at);
        }
        match KeyTemplate::compile_with(raw, &|n| self.resolve(n, module, in_map)) {
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

    /// The `$request_body` refusal, at `at`, when a log format names it.
    pub fn refuse_request_body(at: &Span) -> ConfigError {
        ConfigError::invalid(REQUEST_BODY, at)
    }

    /// Remembers an unknown variable for the end of the block (the first one is reported).
    pub fn note_unknown(&mut self, name: &str, at: &Span) {
        if self.unknown.is_none() {
            self.unknown = Some(ConfigError::invalid(format!("unknown \"{name}\" variable"), at));
        }
    }

    /// The deferred error, if a variable was unknown.
    /// Whether a value of the block names `$ssl_ciphers`.
    pub fn uses_ssl_ciphers(&self) -> bool {
        self.ssl_ciphers.get()
    }

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
        let e = v.compile("a$1", Module::Stream, &at()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] regex captures (\"$1\") are not supported by corelb in t.conf:7"
        );
    }

    #[test]
    fn captures_are_the_last_regex_match_in_http() {
        let mut v = Vars::default().with_regex_captures(vec!["name".into()]);
        let t = v.compile("a$1", Module::Http, &at()).unwrap();
        assert_eq!(t.parts()[1], crate::config::key::Part::Var(Var::Capture(1)));
        let t = v.compile("$name", Module::Http, &at()).unwrap();
        assert!(t.is_only(&Var::RegexCapture("name".into())));
        assert!(v.compile("$Name", Module::Http, &at()).is_ok());
        assert_eq!(
            v.finish().unwrap_err().to_string(),
            "[emerg] unknown \"Name\" variable in t.conf:7",
            "group names keep their case"
        );
    }
}
