//! The regular expressions of a config (`location ~`, `~*`, and every other place nginx takes a PCRE): compiled
//! once at load, matched per request without locks or allocation.
//!
//! The engine is the `regex` crate's (`regex-automata`'s meta regex), in byte mode without Unicode, as nginx runs
//! PCRE2 without UTF: `.` and classes match bytes, `~*` folds ASCII case only. It runs in time linear in the
//! subject and has no backreferences or look-around; a pattern using what it lacks (or PCRE-only syntax such as
//! atomic groups and possessive quantifiers) is refused at load, by name. Matching and compiling were measured
//! against PCRE2 (the `pcre2` crate, JIT on): matching equal within noise, compiling slower but only at load;
//! see `docs/directives.md`.
//!
//! Each thread keeps one search cache per regex (a thread-local table, so a match takes no lock and allocates
//! nothing once the thread has matched that regex); the caller keeps the capture offsets in a reused
//! [`Captures`].

use regex_automata::meta;
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::util::syntax;
use regex_automata::Input;
use regex_syntax::ast::ErrorKind;
use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

mod pcre_syntax;

/// A compiled pattern.
#[derive(Clone)]
pub struct Regex {
    pattern: String,
    caseless: bool,
    re: meta::Regex,
    /// Identifies this regex's search cache in each thread's table.
    id: u64,
    /// Whether it has named groups (a match then keeps their names for `$name`).
    named: bool,
}

/// Why a pattern was refused; displayed as nginx words it (`pcre2_compile() failed: ...`), or naming what
/// corelb's engine does not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    /// Not a valid pattern (PCRE2 refuses it too): nginx's message, with the rest of the pattern from the error.
    #[error("pcre2_compile() failed: {reason} in \"{pattern}\"{at}")]
    Invalid { reason: String, pattern: String, at: At },
    /// Valid PCRE, but it needs what a linear-time engine does not have.
    #[error(
        "regular expression \"{pattern}\" uses {feature}, which corelb does not support (its regex engine runs in \
         linear time, without backtracking)"
    )]
    Unsupported { feature: &'static str, pattern: String },
}

/// nginx's ` at "REST"` after a compile error (nothing when the error is at the end of the pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At(pub String);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, " at \"{}\"", self.0)
        }
    }
}

/// The most regexes whose caches one thread keeps; past it (many reloads) the table starts again.
const MAX_CACHES: usize = 4096;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's search caches, sorted by regex id.
    static CACHES: RefCell<Vec<(u64, meta::Cache)>> = const { RefCell::new(Vec::new()) };
}

/// PCRE syntax the engine does not have, found in the pattern text (the parser reports backreferences and
/// look-around itself).
const PCRE_ONLY: &[(&str, &str)] = &[
    ("(?>", "an atomic group"),
    ("(?|", "a branch reset group"),
    ("(?'", "a quoted group name"),
    ("(?R", "recursion"),
    ("(?(", "a conditional group"),
    ("(*", "a backtracking verb"),
    ("\\K", "\\K"),
    ("\\G", "\\G"),
    ("\\Z", "\\Z"),
    ("++", "a possessive quantifier"),
    ("*+", "a possessive quantifier"),
    ("?+", "a possessive quantifier"),
    ("}+", "a possessive quantifier"),
];

/// Compiles `pattern` (`caseless`: PCRE's caseless, nginx's `~*`).
pub fn compile(pattern: &str, caseless: bool) -> Result<Regex, RegexError> {
    let unsupported = |feature| RegexError::Unsupported {
        feature,
        pattern: pattern.to_string(),
    };
    let translated = pcre_syntax::translate(pattern);
    let pcre = translated.as_deref().unwrap_or(pattern);
    if let Some((_, feature)) = PCRE_ONLY.iter().find(|(text, _)| pcre.contains(text)) {
        return Err(unsupported(feature));
    }
    if let Err(e) = regex_syntax::ast::parse::Parser::new().parse(pcre) {
        let rest = pcre.get(e.span().start.offset..).unwrap_or_default();
        let (reason, at) = match e.kind() {
            ErrorKind::UnsupportedBackreference => return Err(unsupported("a backreference")),
            ErrorKind::UnsupportedLookAround => return Err(unsupported("look-around")),
            ErrorKind::GroupUnclosed => ("missing closing parenthesis".to_string(), ""),
            ErrorKind::ClassUnclosed => ("missing terminating ] for character class".to_string(), ""),
            ErrorKind::GroupUnopened => ("unmatched closing parenthesis".to_string(), rest),
            ErrorKind::RepetitionMissing => ("quantifier does not follow a repeatable item".to_string(), rest),
            other => (other.to_string(), rest),
        };
        return Err(RegexError::Invalid {
            reason,
            pattern: pattern.to_string(),
            at: At(at.to_string()),
        });
    }
    let config = syntax::Config::new()
        .unicode(false)
        .utf8(false)
        .case_insensitive(caseless);
    let re = meta::Builder::new()
        .syntax(config)
        .configure(meta::Config::new().utf8_empty(false))
        .build(pcre)
        .map_err(|e| RegexError::Invalid {
            reason: e.to_string(),
            pattern: pattern.to_string(),
            at: At(String::new()),
        })?;
    let named = re
        .group_info()
        .pattern_names(regex_automata::PatternID::ZERO)
        .any(|n| n.is_some());
    Ok(Regex {
        pattern: pattern.to_string(),
        caseless,
        re,
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        named,
    })
}

impl Regex {
    /// The pattern as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether it matches without case (`~*`).
    pub fn caseless(&self) -> bool {
        self.caseless
    }

    /// Its capture groups, the whole match (group 0) included.
    pub fn captures_len(&self) -> usize {
        self.re.captures_len()
    }

    /// Its named groups, with their numbers (`(?<name>...)`, `(?P<name>...)`).
    pub fn names(&self) -> impl Iterator<Item = (usize, &str)> + '_ {
        self.re
            .group_info()
            .pattern_names(regex_automata::PatternID::ZERO)
            .enumerate()
            .filter_map(|(i, n)| n.map(|n| (i, n)))
    }

    /// Whether it matches somewhere in `hay`.
    pub fn is_match(&self, hay: &[u8]) -> bool {
        self.with_cache(|re, cache| re.is_match_with(cache, &Input::new(hay)))
    }

    /// Matches `hay`, keeping the offsets of every group in `caps`; false (and `caps` left as it was) if it
    /// does not match. Every match replaces them, one without groups too: nginx 1.22 answers
    /// `location ~ ^/u/(\d+)$ { rewrite ^ /user/$1 last; }` with `/user/` (checked on loopback).
    pub fn captures_into(&self, hay: &[u8], caps: &mut Captures) -> bool {
        let need = self.re.group_info().slot_len();
        if caps.scratch.len() < need {
            caps.scratch.resize(need, None);
        }
        let Some(slots) = caps.scratch.get_mut(..need) else {
            return false;
        };
        let found = self.with_cache(|re, cache| re.search_slots_with(cache, &Input::new(hay), slots).is_some());
        if found {
            caps.slots.clear();
            caps.slots.extend_from_slice(slots);
            caps.subject.clear();
            caps.subject.extend_from_slice(hay);
            // the names of the match's groups (a reference count, only for a regex that has names)
            match (self.named, &caps.names) {
                (true, _) => caps.names = Some(self.re.group_info().clone()),
                (false, Some(_)) => caps.names = None,
                (false, None) => {}
            }
        }
        found
    }

    /// Runs `f` with this thread's cache for this regex (made on the thread's first use of it).
    fn with_cache<T>(&self, f: impl FnOnce(&meta::Regex, &mut meta::Cache) -> T) -> T {
        CACHES.with(|caches| {
            let Ok(mut caches) = caches.try_borrow_mut() else {
                // Not reached (nothing matches inside a match); a fresh cache keeps it correct.
                return f(&self.re, &mut self.re.create_cache());
            };
            let i = match caches.binary_search_by_key(&self.id, |(id, _)| *id) {
                Ok(i) => i,
                Err(i) => {
                    if caches.len() >= MAX_CACHES {
                        caches.clear();
                        caches.push((self.id, self.re.create_cache()));
                        0
                    } else {
                        caches.insert(i, (self.id, self.re.create_cache()));
                        i
                    }
                }
            };
            match caches.get_mut(i) {
                Some((_, cache)) => f(&self.re, cache),
                None => f(&self.re, &mut self.re.create_cache()),
            }
        })
    }
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tilde = if self.caseless { "~*" } else { "~" };
        write!(f, "{tilde} {:?}", self.pattern)
    }
}

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.pattern == other.pattern && self.caseless == other.caseless
    }
}

impl Eq for Regex {}

/// The group offsets of the last successful match (nginx's `r->captures`): reused from request to request.
#[derive(Debug, Clone, Default)]
pub struct Captures {
    /// Start and end of each group, in pairs; `None` for a group that did not take part.
    slots: Vec<Option<NonMaxUsize>>,
    scratch: Vec<Option<NonMaxUsize>>,
    /// A copy of the text matched (nginx keeps a pointer to it; the text here may be a reused buffer).
    subject: Vec<u8>,
    /// The group names of the regex that matched, if it has any (`$name` of a named group).
    names: Option<regex_automata::util::captures::GroupInfo>,
}

impl Captures {
    /// No captures (as at the start of a request).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.names = None;
    }

    /// Named group `name` of the last match, empty when it did not take part; `None` when the regex that matched
    /// last has no such group (or none matched).
    pub fn named(&self, name: &str) -> Option<&[u8]> {
        let i = self.names.as_ref()?.to_index(regex_automata::PatternID::ZERO, name)?;
        Some(self.group(i))
    }

    /// The groups of the last match, the whole match (group 0) included; 0 when none matched.
    pub fn len(&self) -> usize {
        self.slots.len() / 2
    }

    /// Whether no match has set captures.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The byte range of group `i` in the subject matched, if the group took part.
    pub fn get(&self, i: usize) -> Option<(usize, usize)> {
        let start = self.slots.get(i.checked_mul(2)?).copied().flatten()?;
        let end = self.slots.get(i * 2 + 1).copied().flatten()?;
        Some((start.get(), end.get()))
    }

    /// Group `i` of the last match, empty when it did not take part (or no match set captures).
    pub fn group(&self, i: usize) -> &[u8] {
        self.get(i)
            .and_then(|(s, e)| self.subject.get(s..e))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(p: &str) -> String {
        compile(p, false).unwrap_err().to_string()
    }

    #[test]
    fn matches_bytes_as_pcre_without_utf() {
        let php = compile(r"\.php$", false).unwrap();
        assert!(php.is_match(b"/index.php"));
        assert!(!php.is_match(b"/index.PHP"));
        assert!(!php.is_match(b"/index.php/x"));
        let img = compile(r"\.(gif|jpg|jpeg)$", true).unwrap();
        assert!(img.is_match(b"/t.GIF"));
        assert!(img.is_match(b"/t.jpeg"));
        // bytes that are not UTF-8 match `.`, and caseless folds ASCII only
        assert!(compile("^/a.b$", false).unwrap().is_match(b"/a\xffb"));
        assert!(!compile("\u{e9}", true).unwrap().is_match("\u{c9}".as_bytes()));
        assert!(compile(r"\/x\.y", false).unwrap().is_match(b"/x.y"));
    }

    #[test]
    fn captures_by_number_and_name() {
        let re = compile(r"^/api/v(?<version>[0-9]+)/(.*)$", false).unwrap();
        assert_eq!(re.captures_len(), 3);
        assert_eq!(re.names().collect::<Vec<_>>(), vec![(1, "version")]);
        let mut caps = Captures::default();
        let uri = b"/api/v12/users/7";
        assert!(re.captures_into(uri, &mut caps));
        assert_eq!(caps.len(), 3);
        assert_eq!(caps.group(0), b"/api/v12/users/7");
        assert_eq!(caps.group(1), b"12");
        assert_eq!(caps.group(2), b"users/7");
        assert_eq!(caps.group(3), b"");
        assert_eq!(caps.named("version"), Some(&b"12"[..]));
        assert_eq!(caps.named("other"), None);
        // a failed match leaves the last captures, as nginx's r->captures
        assert!(!re.captures_into(b"/other", &mut caps));
        assert_eq!(caps.group(1), b"12");
        assert!(compile("^/oth", false).unwrap().captures_into(b"/other", &mut caps));
        assert_eq!(caps.named("version"), None, "the last match's names only");
        assert_eq!(
            (caps.len(), caps.group(1)),
            (1, &b""[..]),
            "a regex without groups replaces them too"
        );
        let opt = compile(r"^/(a)?(b)", false).unwrap();
        assert!(opt.captures_into(b"/b", &mut caps));
        assert_eq!(caps.get(1), None);
        assert_eq!(caps.get(2), Some((1, 2)));
    }

    /// The messages nginx 1.22 (PCRE2 10.42) gives for the same patterns, checked with `nginx -t`.
    #[test]
    fn invalid_patterns_in_nginx_words() {
        assert_eq!(
            err("foo("),
            "pcre2_compile() failed: missing closing parenthesis in \"foo(\""
        );
        assert_eq!(
            err("foo)"),
            "pcre2_compile() failed: unmatched closing parenthesis in \"foo)\" at \")\""
        );
        assert_eq!(
            err("[abc"),
            "pcre2_compile() failed: missing terminating ] for character class in \"[abc\""
        );
        assert_eq!(
            err("*x"),
            "pcre2_compile() failed: quantifier does not follow a repeatable item in \"*x\" at \"*x\""
        );
    }

    #[test]
    fn pcre_only_syntax_is_refused_by_name() {
        for (p, what) in [
            ("(?<=a)b", "look-around"),
            ("^/(?!api)", "look-around"),
            (r"(a)\1", "a backreference"),
            ("(?>a+)b", "an atomic group"),
            ("a++b", "a possessive quantifier"),
        ] {
            assert_eq!(
                err(p),
                format!(
                    "regular expression \"{p}\" uses {what}, which corelb does not support (its regex engine runs in \
                     linear time, without backtracking)"
                ),
            );
        }
    }

    /// nginx-tests' http_server_name.t patterns: PCRE's quoting and a property over bytes, as PCRE2 without UTF.
    #[test]
    fn pcre_quoting_and_properties() {
        let quoted = compile(r"^(?P<name>[a-z]+)\Q.example.com\E$", false).unwrap();
        assert!(quoted.is_match(b"blah.example.com"));
        assert!(!quoted.is_match(b"blah.exampleXcom"));
        assert_eq!(quoted.pattern(), r"^(?P<name>[a-z]+)\Q.example.com\E$");
        let digits = compile(r"^(?P<name>www\p{N}+)\.example\.com$", false).unwrap();
        let mut caps = Captures::default();
        assert!(digits.captures_into(b"www01.example.com", &mut caps));
        assert_eq!(caps.group(1), b"www01");
        assert!(
            digits.is_match(b"www\xb2.example.com"),
            "superscript two is a number in Latin-1"
        );
        assert!(!digits.is_match(b"wwwx.example.com"));
    }

    #[test]
    fn each_thread_keeps_its_own_cache() {
        let re = compile(r"^/t/([0-9]+)$", false).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let re = re.clone();
                std::thread::spawn(move || {
                    let mut caps = Captures::default();
                    let uri = format!("/t/{n}");
                    (0..100).all(|_| re.captures_into(uri.as_bytes(), &mut caps))
                        && caps.group(1) == n.to_string().as_bytes()
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap());
        }
    }
}
