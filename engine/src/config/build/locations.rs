//! `location [=|~|~*|^~] URI { }` and `location @name { }` as nginx's `ngx_http_core_location` reads them: the
//! kinds, what may nest in what (with nginx's messages), and the per-level `duplicate location` check.

use super::arg;
use crate::config::error::ConfigError;
use crate::config::model::{LocationMatch, Span};
use crate::config::parser::Directive;
use crate::config::regex;

/// The kind and name of the location `d`, nested in `parent` (`None` at the server level).
pub fn matcher(d: &Directive, parent: Option<&LocationMatch>) -> Result<LocationMatch, ConfigError> {
    let m = kind(d)?;
    if let Some(p) = parent {
        nesting(&m, p, &d.span)?;
    }
    Ok(m)
}

fn kind(d: &Directive) -> Result<LocationMatch, ConfigError> {
    let compile = |pattern: &str, caseless| {
        regex::compile(pattern, caseless)
            .map(LocationMatch::Regex)
            .map_err(|e| ConfigError::invalid(e.to_string(), &d.span))
    };
    if let [modifier, name] = d.args.as_slice() {
        return match modifier.as_str() {
            "=" => Ok(LocationMatch::Exact(name.clone())),
            "^~" => Ok(LocationMatch::PrefixNoRegex(name.clone())),
            "~" => compile(name, false),
            "~*" => compile(name, true),
            _ => Err(ConfigError::invalid(
                format!("invalid location modifier \"{modifier}\""),
                &d.span,
            )),
        };
    }
    let name = arg(d, 0);
    Ok(if let Some(exact) = name.strip_prefix('=') {
        LocationMatch::Exact(exact.to_string())
    } else if let Some(prefix) = name.strip_prefix("^~") {
        LocationMatch::PrefixNoRegex(prefix.to_string())
    } else if let Some(pattern) = name.strip_prefix("~*") {
        return compile(pattern, true);
    } else if let Some(pattern) = name.strip_prefix('~') {
        return compile(pattern, false);
    } else if name.starts_with('@') {
        LocationMatch::Named(name.to_string())
    } else {
        LocationMatch::Prefix(name.to_string())
    })
}

/// nginx's rules for a location nested in `parent`.
fn nesting(m: &LocationMatch, parent: &LocationMatch, at: &Span) -> Result<(), ConfigError> {
    let (name, outer) = (m.name(), parent.name());
    let msg = match (m, parent) {
        (_, LocationMatch::Exact(_)) => format!("location \"{name}\" cannot be inside the exact location \"{outer}\""),
        (_, LocationMatch::Named(_)) => format!("location \"{name}\" cannot be inside the named location \"{outer}\""),
        (LocationMatch::Named(_), _) => format!("named location \"{name}\" can be on the server level only"),
        // nginx compares the name with the parent's (a regex parent's pattern too); a regex child is not checked
        (LocationMatch::Regex(_), _) => return Ok(()),
        _ if name.as_bytes().starts_with(outer.as_bytes()) => return Ok(()),
        _ => format!("location \"{name}\" is outside location \"{outer}\""),
    };
    Err(ConfigError::invalid(msg, at))
}

/// Whether two locations of one level clash: the same name, both exact or both prefixes (`^~` is a prefix).
fn same_slot(a: &LocationMatch, b: &LocationMatch) -> bool {
    use LocationMatch::{Exact, Prefix, PrefixNoRegex};
    match (a, b) {
        (Exact(x), Exact(y)) => x == y,
        (Prefix(x) | PrefixNoRegex(x), Prefix(y) | PrefixNoRegex(y)) => x == y,
        _ => false,
    }
}

/// nginx's `duplicate location "X"` (checked when the http block ends): `locations` lists every location of a
/// server with the index of the one it is nested in; the later of two clashing ones at one level is named.
pub fn check_duplicates(locations: &[(&LocationMatch, &Span, Option<usize>)]) -> Result<(), ConfigError> {
    for (i, (later, span, parent)) in locations.iter().enumerate() {
        let clash = locations
            .iter()
            .take(i)
            .any(|(earlier, _, p)| p == parent && same_slot(earlier, later));
        if clash {
            return Err(ConfigError::invalid(
                format!("duplicate location \"{}\"", later.name()),
                span,
            ));
        }
    }
    Ok(())
}

/// A location as read, with the locations nested in it.
pub trait Nested: Sized {
    /// Takes the locations nested in this one.
    fn take_nested(&mut self) -> Vec<Self>;
    /// Records the index of the location this one is nested in.
    fn set_parent(&mut self, parent: Option<usize>);
}

/// Lists the locations of `level` (nested in `parent`) and, after each, those nested in it, into `out`.
pub fn flatten<T: Nested>(level: Vec<T>, parent: Option<usize>, out: &mut Vec<T>) {
    for mut loc in level {
        let nested = loc.take_nested();
        loc.set_parent(parent);
        let index = out.len();
        out.push(loc);
        flatten(nested, Some(index), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn directive(args: &[&str]) -> Directive {
        Directive {
            name: "location".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 1,
            },
            block: None,
        }
    }

    fn m(args: &[&str]) -> Result<LocationMatch, String> {
        kind(&directive(args)).map_err(|e| e.to_string())
    }

    #[test]
    fn kinds_in_both_spellings() {
        assert_eq!(m(&["/a"]), Ok(LocationMatch::Prefix("/a".into())));
        assert_eq!(m(&["=", "/a"]), Ok(LocationMatch::Exact("/a".into())));
        assert_eq!(m(&["=/a"]), Ok(LocationMatch::Exact("/a".into())));
        assert_eq!(m(&["^~", "/a"]), Ok(LocationMatch::PrefixNoRegex("/a".into())));
        assert_eq!(m(&["^~/a"]), Ok(LocationMatch::PrefixNoRegex("/a".into())));
        assert_eq!(m(&["@fallback"]), Ok(LocationMatch::Named("@fallback".into())));
        for (args, pattern, caseless) in [
            (&["~", r"\.php$"][..], r"\.php$", false),
            (&[r"~\.php$"], r"\.php$", false),
            (&["~*", r"\.gif$"], r"\.gif$", true),
            (&[r"~*\.gif$"], r"\.gif$", true),
        ] {
            let Ok(LocationMatch::Regex(re)) = m(args) else {
                panic!("{args:?} is a regex location")
            };
            assert_eq!((re.pattern(), re.caseless()), (pattern, caseless));
        }
        assert_eq!(
            m(&["!", "/a"]),
            Err("[emerg] invalid location modifier \"!\" in t.conf:1".into())
        );
        assert_eq!(
            m(&["~", "a("]),
            Err("[emerg] pcre2_compile() failed: missing closing parenthesis in \"a(\" in t.conf:1".into())
        );
    }

    /// nginx 1.22's messages (`nginx -t`) for what may not nest.
    #[test]
    fn nesting_rules() {
        let nest = |outer: &[&str], inner: &[&str]| {
            let parent = kind(&directive(outer)).unwrap();
            matcher(&directive(inner), Some(&parent))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(nest(&["/a/"], &["/a/b"]), Ok(()));
        assert_eq!(nest(&["/a/"], &["=", "/a/b"]), Ok(()));
        assert_eq!(nest(&["/a/"], &["~", r"\.php$"]), Ok(()));
        assert_eq!(nest(&["~", "^/x"], &["~", "y"]), Ok(()));
        assert_eq!(
            nest(&["/a/"], &["/b"]),
            Err("[emerg] location \"/b\" is outside location \"/a/\" in t.conf:1".into())
        );
        assert_eq!(
            nest(&["~", "^/x"], &["/x"]),
            Err("[emerg] location \"/x\" is outside location \"^/x\" in t.conf:1".into())
        );
        assert_eq!(
            nest(&["=", "/a"], &["/a"]),
            Err("[emerg] location \"/a\" cannot be inside the exact location \"/a\" in t.conf:1".into())
        );
        assert_eq!(
            nest(&["@n"], &["/a"]),
            Err("[emerg] location \"/a\" cannot be inside the named location \"@n\" in t.conf:1".into())
        );
        assert_eq!(
            nest(&["/"], &["@n"]),
            Err("[emerg] named location \"@n\" can be on the server level only in t.conf:1".into())
        );
    }

    #[test]
    fn duplicates_per_level() {
        let span = |line| Span {
            file: PathBuf::from("t.conf"),
            line,
        };
        let (s1, s2, s3) = (span(1), span(2), span(3));
        let prefix = LocationMatch::Prefix("/a".into());
        let no_regex = LocationMatch::PrefixNoRegex("/a".into());
        let exact = LocationMatch::Exact("/a".into());
        let re = kind(&directive(&["~", "x"])).unwrap();
        assert_eq!(check_duplicates(&[(&prefix, &s1, None), (&exact, &s2, None)]), Ok(()));
        assert_eq!(check_duplicates(&[(&re, &s1, None), (&re, &s2, None)]), Ok(()));
        assert_eq!(
            check_duplicates(&[(&prefix, &s1, None), (&prefix, &s2, Some(0))]),
            Ok(())
        );
        let e = check_duplicates(&[(&prefix, &s1, None), (&exact, &s2, None), (&no_regex, &s3, None)]);
        assert_eq!(
            e.unwrap_err().to_string(),
            "[emerg] duplicate location \"/a\" in t.conf:3"
        );
    }
}
