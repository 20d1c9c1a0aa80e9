//! A compiled `map SOURCE $name { ... }` (nginx's `ngx_http_map_module`, `ngx_stream_map_module`): exact keys
//! (compared without case), with `hostnames` the wildcard keys `*.example.com`, `.example.com` and `example.*`,
//! then regex keys in config order, then the default; and its `~`/`~*` keys.

use super::key::KeyTemplate;
use super::regex::{Captures, Regex, RegexError};
use std::collections::HashMap;

/// A `~` or `~*` key, compiled with the config's one regex wrapper ([`super::regex`]: PCRE syntax, linear time,
/// what it cannot do refused at load by name).
#[derive(Debug, Clone)]
pub struct MapRegex {
    regex: Regex,
    /// Index into the map's values.
    pub value: usize,
    /// Whether that value reads the groups (`$1`, `$name`): only then is a match made to keep them.
    pub value_captures: bool,
}

impl MapRegex {
    /// Compiles `pattern` (`caseless` for `~*`), or why not (nginx's `pcre2_compile()` message, or what corelb's
    /// engine does not do).
    pub fn compile(pattern: &str, caseless: bool, value: usize) -> Result<MapRegex, RegexError> {
        Ok(MapRegex {
            regex: super::regex::compile(pattern, caseless)?,
            value,
            value_captures: true,
        })
    }

    /// The capture group called `name`, if the pattern has one.
    pub fn group(&self, name: &str) -> Option<usize> {
        self.regex.names().find(|(_, n)| *n == name).map(|(i, _)| i)
    }

    /// How many capture groups the pattern has (group 0, the whole match, included).
    pub fn groups(&self) -> usize {
        self.regex.captures_len()
    }

    /// Whether `hay` matches, with the groups in `caps` (a reused buffer; left as it was on no match).
    pub fn captures(&self, hay: &[u8], caps: &mut Captures) -> bool {
        self.regex.captures_into(hay, caps)
    }

    /// Whether `hay` matches.
    pub fn is_match(&self, hay: &[u8]) -> bool {
        self.regex.is_match(hay)
    }
}

/// The variable `name` means in a block with `maps`: the last map of that name, else a built-in variable.
pub fn resolve(maps: &[Map], name: &str) -> Option<super::key::Var> {
    let lower = name.to_ascii_lowercase();
    match maps.iter().rposition(|m| m.name == lower) {
        Some(i) => Some(super::key::Var::Map(i)),
        None => super::key::Var::from_name(&lower),
    }
}

impl Map {
    /// Every variable its source and values name.
    pub fn vars(&self) -> impl Iterator<Item = &super::key::Var> {
        std::iter::once(&self.source)
            .chain(&self.values)
            .flat_map(|t| t.parts())
            .filter_map(|p| match p {
                super::key::Part::Var(v) => Some(v),
                super::key::Part::Text(_) => None,
            })
    }
}

/// Marks the maps whose value needs the answer: one naming a variable known only then, or such a map.
pub fn mark_answer_time(maps: &mut [Map]) {
    use super::key::{Phase, Var};
    loop {
        let flags: Vec<bool> = maps.iter().map(|m| m.answer_time).collect();
        let mut changed = false;
        for m in maps.iter_mut().filter(|m| !m.answer_time) {
            let needs = m.vars().any(|v| match v {
                Var::Map(i) => flags.get(*i).copied().unwrap_or(false),
                v => v.phase() == Phase::Response,
            });
            if needs {
                m.answer_time = true;
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// Which key of a map matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// An exact or wildcard key, or the default: index into the values.
    Value(usize),
    /// A regex key: index into the map's regexes.
    Regex(usize),
}

/// A wildcard key of a `hostnames` map.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wildcard {
    /// `example.com` of `*.example.com` / `.example.com`; `example.` of `example.*`.
    part: Vec<u8>,
    /// `.example.com`: the name itself matches too.
    dot: bool,
    value: usize,
}

/// A compiled map.
#[derive(Debug, Clone)]
pub struct Map {
    /// The variable's name, lower-case, without `$`.
    pub name: String,
    pub source: KeyTemplate,
    /// `hostnames`: a trailing dot of the source value is dropped, and wildcard keys apply.
    pub hostnames: bool,
    /// `volatile`: evaluated at each use, not once per request.
    pub volatile: bool,
    /// Its value needs the answer (a variable known only then, or such a map), see [`mark_answer_time`].
    pub answer_time: bool,
    exact: HashMap<Vec<u8>, usize>,
    /// `*.example.com` and `.example.com`, longest first.
    head: Vec<Wildcard>,
    /// `example.*`, longest first.
    tail: Vec<Wildcard>,
    pub regexes: Vec<MapRegex>,
    default: Option<usize>,
    /// The values, each a template (most are plain text).
    pub values: Vec<KeyTemplate>,
    /// A `geo` block: the source's value is an address looked up in this table instead of the keys.
    pub geo: Option<Box<super::geo::GeoTable>>,
}

/// Why a key could not be added (nginx's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("duplicate default map parameter")]
    DuplicateDefault,
    #[error("conflicting parameter \"{0}\"")]
    Conflicting(String),
    #[error("invalid hostname or wildcard \"{0}\"")]
    InvalidWildcard(String),
}

impl Map {
    /// An empty map of `source` into `$name`.
    pub fn new(name: &str, source: KeyTemplate) -> Map {
        Map {
            name: name.to_ascii_lowercase(),
            source,
            hostnames: false,
            volatile: false,
            answer_time: false,
            exact: HashMap::new(),
            head: Vec::new(),
            tail: Vec::new(),
            regexes: Vec::new(),
            default: None,
            values: Vec::new(),
            geo: None,
        }
    }

    /// Adds a value; its index.
    pub fn add_value(&mut self, value: KeyTemplate) -> usize {
        self.values.push(value);
        self.values.len() - 1
    }

    /// `default VALUE`.
    pub fn set_default(&mut self, value: usize) -> Result<(), MapError> {
        if self.default.is_some() {
            return Err(MapError::DuplicateDefault);
        }
        self.default = Some(value);
        Ok(())
    }

    /// A regex key.
    /// A regex key; its value (added before it) decides whether a match keeps the groups.
    pub fn add_regex(&mut self, mut regex: MapRegex) {
        regex.value_captures = self.values.get(regex.value).is_none_or(|t| {
            t.parts()
                .iter()
                .any(|p| matches!(p, super::key::Part::Var(super::key::Var::Capture(_))))
        });
        self.regexes.push(regex);
    }

    /// An exact key (lower-cased), or with `wildcard` (a key read after `hostnames`) nginx's wildcard forms
    /// (`ngx_hash_add_key` with `NGX_HASH_WILDCARD_KEY`).
    pub fn add_key(&mut self, key: &str, value: usize, wildcard: bool) -> Result<(), MapError> {
        let b = key.as_bytes();
        let conflict = || MapError::Conflicting(key.to_ascii_lowercase());
        if wildcard {
            let invalid = || MapError::InvalidWildcard(key.to_string());
            let stars = b.iter().filter(|&&c| c == b'*').count();
            if stars > 1 || b.windows(2).any(|w| w == b"..") || b.contains(&0) {
                return Err(invalid());
            }
            let lower = key.to_ascii_lowercase().into_bytes();
            let (list, part, dot) = if b.len() > 1 && b.first() == Some(&b'.') {
                (&mut self.head, lower.get(1..).unwrap_or_default().to_vec(), true)
            } else if b.len() > 2 && b.starts_with(b"*.") {
                (&mut self.head, lower.get(2..).unwrap_or_default().to_vec(), false)
            } else if b.len() > 2 && b.ends_with(b".*") {
                (
                    &mut self.tail,
                    lower.get(..lower.len() - 1).unwrap_or_default().to_vec(),
                    false,
                )
            } else if stars > 0 {
                return Err(invalid());
            } else {
                return self.add_exact(lower, value).map_err(|_| conflict());
            };
            if dot && self.exact.contains_key(&part) {
                return Err(conflict());
            }
            if list.iter().any(|w| w.part == part) {
                return Err(conflict());
            }
            list.push(Wildcard { part, dot, value });
            list.sort_by_key(|w| std::cmp::Reverse(w.part.len()));
            return Ok(());
        }
        self.add_exact(key.to_ascii_lowercase().into_bytes(), value)
            .map_err(|_| conflict())
    }

    fn add_exact(&mut self, key: Vec<u8>, value: usize) -> Result<(), ()> {
        let taken_by_dot = self.head.iter().any(|w| w.dot && w.part == key);
        if taken_by_dot || self.exact.contains_key(&key) {
            return Err(());
        }
        self.exact.insert(key, value);
        Ok(())
    }

    /// The key `value` (the source's value, a trailing dot already dropped for `hostnames`) matches: exact keys
    /// and wildcards compare without case (`lower` is a reused buffer), regexes run on the value as it is.
    pub fn find(&self, value: &[u8], lower: &mut Vec<u8>) -> Option<Found> {
        if let Some(geo) = self.geo.as_deref() {
            return Some(Found::Value(geo.find(value)));
        }
        lower.clear();
        lower.extend(value.iter().map(u8::to_ascii_lowercase));
        if let Some(&v) = self.exact.get(lower.as_slice()) {
            return Some(Found::Value(v));
        }
        let head = self.head.iter().find(|w| {
            let suffix_at = lower.len().checked_sub(w.part.len() + 1);
            (w.dot && *lower == w.part)
                || suffix_at.is_some_and(|at| lower.get(at) == Some(&b'.') && lower.ends_with(&w.part))
        });
        if let Some(w) = head {
            return Some(Found::Value(w.value));
        }
        let tail = self
            .tail
            .iter()
            .find(|w| lower.len() > w.part.len() && lower.starts_with(&w.part));
        if let Some(w) = tail {
            return Some(Found::Value(w.value));
        }
        if !value.is_empty() {
            if let Some(i) = self.regexes.iter().position(|r| r.is_match(value)) {
                return Some(Found::Regex(i));
            }
        }
        self.default.map(Found::Value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> KeyTemplate {
        KeyTemplate::compile(t).unwrap()
    }

    /// map.t's `$y` map (as nginx-tests writes it), values named by their index.
    fn hostnames_map() -> Map {
        let mut m = Map::new("Y", text("$args"));
        m.hostnames = true;
        let add = |m: &mut Map, key: &str| {
            let v = m.add_value(text(key));
            m.add_key(key, v, true).unwrap();
            v
        };
        add(&mut m, "example.com");
        add(&mut m, "example.*");
        add(&mut m, "*.example.com");
        add(&mut m, ".dot.example.com");
        let v = m.add_value(text("sensitive"));
        m.add_regex(MapRegex::compile("^REGEX.EXAMPLE\\.ORG$", false, v).unwrap());
        let v = m.add_value(text("insensitive"));
        m.add_regex(MapRegex::compile("^www.regex.example\\.org$", true, v).unwrap());
        let v = m.add_value(text("0"));
        m.set_default(v).unwrap();
        m
    }

    fn found(m: &Map, value: &str) -> String {
        let mut lower = Vec::new();
        let v = match m.find(value.as_bytes(), &mut lower) {
            Some(Found::Value(v)) => v,
            Some(Found::Regex(r)) => m.regexes[r].value,
            None => return "none".into(),
        };
        m.values[v].raw().to_string()
    }

    #[test]
    fn exact_wildcard_regex_default_in_nginx_order() {
        let m = hostnames_map();
        assert_eq!(m.name, "y");
        assert_eq!(found(&m, "example.com"), "example.com");
        assert_eq!(found(&m, "EXAMPLE.COM"), "example.com");
        assert_eq!(found(&m, "example.org"), "example.*");
        assert_eq!(found(&m, "foo.example.com"), "*.example.com");
        assert_eq!(found(&m, "a.b.example.com"), "*.example.com");
        assert_eq!(found(&m, "dot.example.com"), ".dot.example.com");
        assert_eq!(found(&m, "www.dot.example.com"), ".dot.example.com");
        assert_eq!(found(&m, "REGEX.EXAMPLE.ORG"), "sensitive");
        assert_eq!(found(&m, "regex.example.org"), "0");
        assert_eq!(found(&m, "WWW.REGEX.EXAMPLE.ORG"), "insensitive");
        assert_eq!(found(&m, "xexample.com"), "0");
        assert_eq!(found(&m, ""), "0");
    }

    #[test]
    fn nginx_key_errors() {
        let mut m = Map::new("x", text("$args"));
        let v = m.add_value(text("1"));
        m.add_key("Foo", v, false).unwrap();
        assert_eq!(m.add_key("foo", v, false), Err(MapError::Conflicting("foo".into())));
        m.set_default(v).unwrap();
        assert_eq!(m.set_default(v), Err(MapError::DuplicateDefault));
        // without `hostnames`, a `*` is an ordinary character
        m.add_key("*.a.com", v, false).unwrap();
        let mut h = Map::new("h", text("$host"));
        h.add_key("a.com", v, true).unwrap();
        assert_eq!(
            h.add_key(".a.com", v, true),
            Err(MapError::Conflicting(".a.com".into()))
        );
        assert_eq!(
            h.add_key("a.*.com", v, true),
            Err(MapError::InvalidWildcard("a.*.com".into()))
        );
        assert_eq!(
            h.add_key("a..com", v, true),
            Err(MapError::InvalidWildcard("a..com".into()))
        );
        h.add_key("*.b.com", v, true).unwrap();
        assert_eq!(
            h.add_key("*.b.com", v, true),
            Err(MapError::Conflicting("*.b.com".into()))
        );
        let mut lower = Vec::new();
        assert_eq!(h.find(b"none", &mut lower), None);
    }

    #[test]
    fn regex_groups_and_errors() {
        let r = MapRegex::compile("^(?<sub>[a-z]+)\\.(x)$", false, 0).unwrap();
        assert_eq!((r.group("sub"), r.group("nope"), r.groups()), (Some(1), None, 3));
        let mut caps = Captures::default();
        assert!(r.captures(b"abc.x", &mut caps));
        assert_eq!((caps.group(1), caps.group(2)), (&b"abc"[..], &b"x"[..]));
        assert!(!r.captures(b"ABC.x", &mut caps));
        assert_eq!(caps.group(1), b"abc", "a failed match leaves the groups");
        let e = MapRegex::compile("(a", false, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pcre2_compile() failed: missing closing parenthesis in \"(a\""
        );
        let e = MapRegex::compile("(?=a)", false, 0).unwrap_err();
        assert!(matches!(e, RegexError::Unsupported { .. }), "look-around is refused");
        // PCRE syntax, as every other regex of a config takes it
        let caseless = MapRegex::compile("^/(?P<n>\\w+)$", true, 0).unwrap();
        assert_eq!(caseless.group("n"), Some(1));
        assert!(caseless.is_match(b"/ABC"));
    }
}
