//! What a proxied location changes in the upstream's response head, as nginx's proxy module does: the headers
//! not passed (`proxy_hide_header`, `proxy_pass_header` over nginx's default list), `proxy_redirect` on `Location`
//! and `Refresh`, and `proxy_cookie_domain`/`proxy_cookie_path` on `Set-Cookie`; the rules' values evaluated per
//! request at routing into the connection's reused [`Rewrites`].

use super::headers::{parse_http_date, HeadersPlan, NoResponseVars, Prepared, ResponseFacts};
use crate::config::headers::{HeadersConf, Redirect};
use crate::config::key::VarSource;
use crate::config::regex::Captures;
use crate::config::rewrite::Piece;
use crate::http::pages::{append_decimal, server_name};
use crate::http::response::HeadEdits;
use crate::http::{HOP_BY_HOP_RESPONSE, PROXY_HIDE_DEFAULT};
use std::cell::RefCell;
use std::io::Write;

/// What a proxied location changes in upstream responses.
#[derive(Debug, Clone, Default)]
pub struct ResponsePlan {
    /// Not passed (lower case): nginx's default hidden ones and `proxy_hide_header`, less `proxy_pass_header`;
    /// then the hop-by-hop ones.
    hidden: NameSet,
    /// `proxy_pass_header` names, lower case.
    passed: Vec<String>,
    redirects: Vec<Redirect>,
    cookie_domains: Vec<Redirect>,
    cookie_paths: Vec<Redirect>,
    /// The rules evaluated at load when none has a variable (as `proxy_redirect default` has none): then a
    /// request evaluates nothing.
    constant: Option<RuleSet>,
    /// The names [`ProxiedEdits::upstream_line`] may drop or change, for a quick pass of every other one.
    filter: NameFilter,
}

/// The host of absolute redirects: the request's (nginx's `headers_in.server`), else the local address.
#[derive(Debug, Clone, Copy)]
pub enum HostOrAddr<'a> {
    Host(&'a [u8]),
    Addr(std::net::IpAddr),
}

/// Rules evaluated for one request: each FROM and TO back to back in `text`, with the ends of each.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    text: Vec<u8>,
    ends: Vec<(usize, usize)>,
}

impl Rules {
    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    fn fill(&mut self, rules: &[Redirect], vars: &dyn VarSource, scratch: &mut Vec<u8>) {
        for r in rules {
            r.from.eval_into(vars, scratch);
            self.text.extend_from_slice(scratch);
            let from_end = self.text.len();
            r.to.eval_into(vars, scratch);
            self.text.extend_from_slice(scratch);
            self.ends.push((from_end, self.text.len()));
        }
    }

    /// The (FROM, TO) pairs in order.
    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.ends.iter().scan(0, move |start, &(from_end, to_end)| {
            let from = self.text.get(*start..from_end).unwrap_or_default();
            let to = self.text.get(from_end..to_end).unwrap_or_default();
            *start = to_end;
            Some((from, to))
        })
    }
}

/// The `proxy_redirect` and `proxy_cookie_*` rules with their values.
#[derive(Debug, Default, Clone)]
pub struct RuleSet {
    redirects: Rules,
    cookie_domains: Rules,
    cookie_paths: Rules,
}

impl RuleSet {
    /// Whether no rule applies to this request's response.
    fn is_empty(&self) -> bool {
        self.redirects.ends.is_empty() && self.cookie_domains.ends.is_empty() && self.cookie_paths.ends.is_empty()
    }

    fn clear(&mut self) {
        self.redirects.clear();
        self.cookie_domains.clear();
        self.cookie_paths.clear();
    }
}

/// What a rewritten `Location` starting with `/` is made absolute with: the request's host as it came (made
/// `http://HOST[:PORT]` only when such a line is written) and the local port.
#[derive(Debug, Default)]
pub struct RedirectBase {
    /// The `Host` header's value, or the local address written out.
    host: Vec<u8>,
    port: u16,
}

impl RedirectBase {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"http://");
        out.extend(self.host.iter().map(u8::to_ascii_lowercase));
        if self.port != 80 {
            out.push(b':');
            append_decimal(out, u64::from(self.port));
        }
    }
}

/// One request's evaluated `proxy_redirect` and `proxy_cookie_*` rules (in the connection's [`Prepared`]).
#[derive(Debug, Default)]
pub struct Rewrites {
    base: RedirectBase,
    /// The groups of a `proxy_redirect ~REGEX` match.
    captures: RefCell<Captures>,
    /// Empty when the plan's rules are [`ResponsePlan::constant`].
    rules: RuleSet,
}

impl Rewrites {
    pub(super) fn clear(&mut self) {
        self.base.host.clear();
        self.rules.clear();
    }

    /// [`RuleSet::write_redirect`] with this request's rules.
    #[cfg(test)]
    fn write_redirect(
        &self,
        rules: &[Redirect],
        which: Rewritten,
        name: &str,
        value: &[u8],
        out: &mut Vec<u8>,
    ) -> bool {
        self.rules.write_redirect(self, rules, which, name, value, out)
    }

    /// [`RuleSet::write_cookie`] with this request's rules.
    #[cfg(test)]
    fn write_cookie(&self, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        self.rules.write_cookie(name, value, out)
    }
}

impl ResponsePlan {
    pub fn new(conf: &HeadersConf) -> ResponsePlan {
        let mut hidden: Vec<String> = PROXY_HIDE_DEFAULT.iter().map(|s| s.to_string()).collect();
        hidden.extend(conf.hide.iter().cloned());
        hidden.retain(|h| !conf.pass.contains(h));
        // the connection's own headers are never passed, whatever `proxy_pass_header` says
        hidden.extend(HOP_BY_HOP_RESPONSE.iter().map(|s| s.to_string()));
        let all = || {
            conf.redirects
                .iter()
                .chain(&conf.cookie_domains)
                .chain(&conf.cookie_paths)
        };
        let constant = all().all(|r| r.from.is_constant() && r.to.is_constant()).then(|| {
            let (vars, scratch) = (&NoResponseVars, &mut Vec::new());
            let mut set = RuleSet::default();
            set.redirects.fill(&conf.redirects, vars, scratch);
            set.cookie_domains.fill(&conf.cookie_domains, vars, scratch);
            set.cookie_paths.fill(&conf.cookie_paths, vars, scratch);
            set
        });
        let mut filter = NameFilter::default();
        for name in hidden.iter().map(String::as_str).chain(CHANGED).chain(REPLACEABLE) {
            filter.add(name);
        }
        ResponsePlan {
            hidden: NameSet::new(&hidden),
            passed: conf.pass.clone(),
            redirects: conf.redirects.clone(),
            cookie_domains: conf.cookie_domains.clone(),
            cookie_paths: conf.cookie_paths.clone(),
            constant,
            filter,
        }
    }

    /// Evaluates the rules with variables, and keeps the request's host for absolute redirects, into `p`
    /// (nothing when there are no rules).
    pub fn prepare(
        &self,
        vars: &dyn VarSource,
        host: HostOrAddr<'_>,
        port: u16,
        scratch: &mut Vec<u8>,
        p: &mut Prepared,
    ) {
        let r = &mut p.rewrites;
        if !self.redirects.is_empty() {
            match host {
                HostOrAddr::Host(h) => r.base.host.extend_from_slice(h),
                HostOrAddr::Addr(ip) => {
                    let _ = write!(r.base.host, "{ip}");
                }
            }
            r.base.port = port;
        }
        if self.constant.is_some() {
            return;
        }
        r.rules.redirects.fill(&self.redirects, vars, scratch);
        r.rules.cookie_domains.fill(&self.cookie_domains, vars, scratch);
        r.rules.cookie_paths.fill(&self.cookie_paths, vars, scratch);
    }
}

/// A set of header names (lower case) with a test that rejects nearly every other name in a few instructions:
/// a bit per (length, first letter, last letter) hash.
#[derive(Debug, Clone, Copy, Default)]
pub struct NameFilter {
    bits: [u64; 4],
}

impl NameFilter {
    fn slot(name: &[u8]) -> Option<usize> {
        let (first, last) = (name.first()?, name.last()?);
        let h = name.len() ^ (usize::from(first | 0x20) << 3) ^ (usize::from(last | 0x20) << 1);
        Some(h & 255)
    }

    pub fn add(&mut self, name: &str) {
        if let Some(s) = Self::slot(name.as_bytes()) {
            if let Some(w) = self.bits.get_mut(s / 64) {
                *w |= 1 << (s % 64);
            }
        }
    }

    /// False when `name` is surely not in the set (true: it may be).
    pub fn may_hold(&self, name: &str) -> bool {
        Self::slot(name.as_bytes())
            .and_then(|s| self.bits.get(s / 64).map(|w| w & (1 << (s % 64)) != 0))
            .unwrap_or(true)
    }
}

/// Header names (lower case) kept by length, so that a look-up compares only names as long as the one sought.
#[derive(Debug, Clone, Default)]
pub struct NameSet {
    /// Each name with whether it is plain ([`crate::http::names::is_plain`]).
    by_len: Vec<Vec<(Box<str>, bool)>>,
}

impl NameSet {
    fn new(names: &[String]) -> NameSet {
        let mut by_len: Vec<Vec<(Box<str>, bool)>> = Vec::new();
        for n in names {
            if by_len.len() <= n.len() {
                by_len.resize(n.len() + 1, Vec::new());
            }
            if let Some(slot) = by_len.get_mut(n.len()) {
                if !slot.iter().any(|(m, _)| **m == **n) {
                    slot.push((n.as_str().into(), crate::http::names::is_plain(n)));
                }
            }
        }
        NameSet { by_len }
    }

    /// Whether `name` is in the set, without regard to case.
    #[inline]
    pub fn contains(&self, name: &str) -> bool {
        self.by_len.get(name.len()).is_some_and(|same| {
            same.iter()
                .any(|(n, plain)| crate::http::names::eq_any(name, n, *plain))
        })
    }
}

/// The headers `proxy_redirect` and `proxy_cookie_*` change.
const CHANGED: [&str; 3] = ["location", "refresh", "set-cookie"];
/// The headers an `expires` or an `add_header` may replace ([`Prepared::replaces`]).
const REPLACEABLE: [&str; 4] = ["expires", "cache-control", "etag", "last-modified"];

/// Which header a redirect rewrite applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewritten {
    Location,
    Refresh,
}

impl RuleSet {
    /// Writes the upstream's `Location` or `Refresh` line rewritten by the first `proxy_redirect` rule whose FROM
    /// starts its URL (for `Refresh`, the part after `url=`), as nginx's `ngx_http_proxy_rewrite_redirect`; a
    /// rewritten `Location` starting with `/` becomes absolute, as nginx's header filter makes it. Returns false
    /// (writing nothing) when no rule applies.
    /// `at`: the request's base of absolute redirects and the connection's captures; `rules`: the location's, of
    /// which these are the values (a regex rule is matched here).
    pub fn write_redirect(
        &self,
        at: &Rewrites,
        rules: &[Redirect],
        which: Rewritten,
        name: &str,
        value: &[u8],
        out: &mut Vec<u8>,
    ) -> bool {
        if self.redirects.ends.is_empty() {
            return false;
        }
        let prefix = match which {
            Rewritten::Location => 0,
            Rewritten::Refresh => match find_ignore_case(value, b"url=") {
                Some(i) => i + 4,
                None => return false,
            },
        };
        let url = value.get(prefix..).unwrap_or_default();
        let (base, mut caps) = (&at.base, at.captures.borrow_mut());
        let found = self
            .redirects
            .iter()
            .zip(rules)
            .find(|((from, _), rule)| match &rule.regex {
                Some(r) => r.regex.captures_into(url, &mut caps),
                None => url.starts_with(from),
            });
        let Some(((from, to), rule)) = found else {
            return false;
        };
        if let Some(r) = &rule.regex {
            // nginx's regex handler: the whole URL is replaced
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            let caps: &Captures = &caps;
            let first =
                r.to.iter()
                    .map(|p| piece_text(p, caps))
                    .find(|t| !t.is_empty())
                    .and_then(|t| t.first());
            if which == Rewritten::Location && first == Some(&b'/') {
                base.write(out);
            }
            out.extend_from_slice(value.get(..prefix).unwrap_or_default());
            for piece in &r.to {
                out.extend_from_slice(piece_text(piece, caps));
            }
            out.extend_from_slice(b"\r\n");
            return true;
        }
        let rest = url.get(from.len()..).unwrap_or_default();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        if which == Rewritten::Location && to.first().or(rest.first()) == Some(&b'/') {
            base.write(out);
        }
        out.extend_from_slice(value.get(..prefix).unwrap_or_default());
        out.extend_from_slice(to);
        out.extend_from_slice(rest);
        out.extend_from_slice(b"\r\n");
        true
    }

    /// Writes the upstream's `Set-Cookie` line with its `domain` and `path` attributes rewritten by the first
    /// `proxy_cookie_domain`/`proxy_cookie_path` rule that applies to each, rebuilt as nginx rebuilds it
    /// (`name=value; key=value; flag`); false (writing nothing) when no rule applies.
    pub fn write_cookie(&self, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        if self.cookie_domains.ends.is_empty() && self.cookie_paths.ends.is_empty() {
            return false;
        }
        let mut attrs = cookie_attrs(value);
        if !matches!(attrs.next(), Some((_, Some(_)))) {
            return false;
        }
        if !attrs.any(|(k, v)| v.is_some_and(|v| self.cookie_rewrite(k, v).is_some())) {
            return false;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        for (i, (k, v)) in cookie_attrs(value).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(k);
            let Some(v) = v else { continue };
            out.push(b'=');
            match (i > 0).then(|| self.cookie_rewrite(k, v)).flatten() {
                Some((kept, to, rest)) => {
                    out.extend_from_slice(kept);
                    out.extend_from_slice(to);
                    out.extend_from_slice(rest);
                }
                None => out.extend_from_slice(v),
            }
        }
        out.extend_from_slice(b"\r\n");
        true
    }

    /// The rewrite of attribute `key=v`: what stays before, the replacement, what stays after.
    fn cookie_rewrite<'a>(&'a self, key: &[u8], v: &'a [u8]) -> Option<(&'a [u8], &'a [u8], &'a [u8])> {
        if key.eq_ignore_ascii_case(b"domain") {
            // nginx's domain handler: a leading dot is kept, the rest must equal FROM without case
            let dot = usize::from(v.first() == Some(&b'.'));
            let rest = v.get(dot..).unwrap_or_default();
            let (_, to) = self
                .cookie_domains
                .iter()
                .find(|(from, _)| from.eq_ignore_ascii_case(rest))?;
            return Some((v.get(..dot).unwrap_or_default(), to, b""));
        }
        if key.eq_ignore_ascii_case(b"path") {
            let (from, to) = self.cookie_paths.iter().find(|(from, _)| v.starts_with(from))?;
            return Some((b"", to, v.get(from.len()..).unwrap_or_default()));
        }
        None
    }
}

/// What a piece of a regex rule's replacement writes (it has no variables).
fn piece_text<'a>(piece: &'a Piece, caps: &'a Captures) -> &'a [u8] {
    match piece {
        Piece::Text(t) => t,
        Piece::Capture(i) => caps.group(*i),
        Piece::Var(_) => b"",
    }
}

/// `ngx_http_proxy_parse_cookie`: the `;`-separated attributes, names and values trimmed of spaces (`None`: no
/// `=`).
fn cookie_attrs(value: &[u8]) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    value
        .split(|&c| c == b';')
        .map(|a| match a.iter().position(|&c| c == b'=') {
            Some(eq) => (trim(&a[..eq]), Some(trim(&a[eq + 1..]))),
            None => (trim(a), None),
        })
}

/// `s` without its leading and trailing spaces.
fn trim(s: &[u8]) -> &[u8] {
    let s = s
        .get(s.iter().take_while(|&&c| c == b' ').count()..)
        .unwrap_or_default();
    let end = s.len() - s.iter().rev().take_while(|&&c| c == b' ').count();
    s.get(..end).unwrap_or_default()
}

fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// The edits of one proxied response: the location's plans, the request's evaluated values, the response's
/// variables, the time.
pub struct ProxiedEdits<'a> {
    pub plan: &'a ResponsePlan,
    pub headers: &'a HeadersPlan,
    pub prepared: &'a Prepared,
    pub response: &'a dyn VarSource,
    pub now: u64,
}

impl HeadEdits for ProxiedEdits<'_> {
    fn server(&self) -> &str {
        server_name(self.prepared.tokens())
    }

    fn passes(&self, name: &str) -> bool {
        self.plan.passed.iter().any(|p| name.eq_ignore_ascii_case(p))
    }

    fn may_edit(&self, name: &str) -> bool {
        self.plan.filter.may_hold(name)
    }

    fn upstream_line(&self, status: u16, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        if self.plan.hidden.contains(name) || self.prepared.replaces(status, name) {
            return true;
        }
        let r = self.plan.constant.as_ref().unwrap_or(&self.prepared.rewrites.rules);
        if r.is_empty() {
            return false;
        }
        let at = &self.prepared.rewrites;
        if name.eq_ignore_ascii_case("location") {
            return r.write_redirect(at, &self.plan.redirects, Rewritten::Location, name, value, out);
        }
        if name.eq_ignore_ascii_case("refresh") {
            return r.write_redirect(at, &self.plan.redirects, Rewritten::Refresh, name, value, out);
        }
        if name.eq_ignore_ascii_case("set-cookie") {
            return r.write_cookie(name, value, out);
        }
        false
    }

    fn append(&self, status: u16, last_modified: Option<&[u8]>, out: &mut Vec<u8>) {
        if self.headers.adds_nothing() {
            return;
        }
        let facts = ResponseFacts {
            now: self.now,
            last_modified: last_modified
                .filter(|_| self.prepared.wants_last_modified())
                .and_then(parse_http_date),
        };
        self.headers.append(status, self.prepared, self.response, facts, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::{KeyTemplate, Var};

    struct Arg;
    impl VarSource for Arg {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            if matches!(var, Var::Arg(a) if a == "e") {
                out.extend_from_slice(b"2048");
            }
        }
    }

    fn rule(from: &str, to: &str) -> Redirect {
        Redirect {
            from: KeyTemplate::compile(from).unwrap(),
            to: KeyTemplate::compile(to).unwrap(),
            regex: None,
        }
    }

    fn prepared(conf: &HeadersConf) -> Prepared {
        let mut p = Prepared::default();
        let host = HostOrAddr::Host(b"LocalHost");
        ResponsePlan::new(conf).prepare(&Arg, host, 8080, &mut Vec::new(), &mut p);
        p
    }

    /// nginx-tests proxy_redirect.t's regex rules.
    #[test]
    fn regex_redirects_replace_the_whole_url() {
        let regex = |pattern: &str, caseless, to: Vec<Piece>| Redirect {
            from: KeyTemplate::literal(""),
            to: KeyTemplate::literal(""),
            regex: Some(Box::new(crate::config::headers::RegexRedirect {
                regex: crate::config::regex::compile(pattern, caseless).unwrap(),
                to,
            })),
        };
        let text = |t: &str| Piece::Text(t.as_bytes().to_vec());
        let conf = HeadersConf {
            redirects: vec![
                rule("http://127.0.0.1:8081/plain/", "/p/"),
                regex(
                    "^(.+)/regex_w_([^/]+)",
                    false,
                    vec![Piece::Capture(1), text("/"), Piece::Capture(2), text("/test.html")],
                ),
                regex("re+gexp?", true, vec![text("/replaced/test.html")]),
            ],
            ..HeadersConf::default()
        };
        // no variables: the rules are the plan's, evaluated at load (as `upstream_line` takes them)
        let plan = ResponsePlan::new(&conf);
        let p = prepared(&conf);
        let rules = plan.constant.as_ref().expect("constant rules");
        let rewrite = |which, name, value: &str| {
            let mut out = Vec::new();
            rules
                .write_redirect(&p.rewrites, &conf.redirects, which, name, value.as_bytes(), &mut out)
                .then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(
            rewrite(
                Rewritten::Location,
                "Location",
                "http://127.0.0.1:8081/regex_w_captures/test.html"
            ),
            Some("Location: http://127.0.0.1:8081/captures/test.html\r\n".into())
        );
        assert_eq!(
            rewrite(
                Rewritten::Location,
                "Location",
                "http://127.0.0.1:8081/ReeegEX/test.html"
            ),
            Some("Location: http://localhost:8080/replaced/test.html\r\n".into())
        );
        assert_eq!(
            rewrite(Rewritten::Refresh, "Refresh", "7; url=http://x/REGEX/t"),
            Some("Refresh: 7; url=/replaced/test.html\r\n".into())
        );
        // the first rule that applies, in order
        assert_eq!(
            rewrite(Rewritten::Location, "Location", "http://127.0.0.1:8081/plain/regex"),
            Some("Location: http://localhost:8080/p/regex\r\n".into())
        );
        assert_eq!(rewrite(Rewritten::Location, "Location", "http://h/none"), None);
    }

    #[test]
    fn the_name_filter_holds_every_name_it_was_given_and_passes_common_ones() {
        let plan = ResponsePlan::new(&HeadersConf {
            hide: vec!["x-secret".into()],
            ..HeadersConf::default()
        });
        let edited = PROXY_HIDE_DEFAULT
            .iter()
            .chain(&HOP_BY_HOP_RESPONSE)
            .chain(&CHANGED)
            .chain(&REPLACEABLE)
            .chain(&["x-secret"]);
        for name in edited {
            assert!(plan.filter.may_hold(name), "{name}");
            assert!(plan.filter.may_hold(&name.to_ascii_uppercase()), "{name}");
        }
        for common in [
            "Content-Type",
            "content-length",
            "Vary",
            "Accept-Ranges",
            "X-Request-Id",
        ] {
            assert!(!plan.filter.may_hold(common), "{common}");
        }
        assert!(plan.filter.may_hold(""), "an empty name is never passed unseen");
    }

    #[test]
    fn hidden_names_are_found_by_length_without_case() {
        let plan = ResponsePlan::new(&HeadersConf {
            hide: vec!["x-secret".into()],
            pass: vec!["server".into()],
            ..HeadersConf::default()
        });
        for name in ["Date", "X-Secret", "CONNECTION", "keep-alive", "X-Accel-Redirect"] {
            assert!(plan.hidden.contains(name), "{name}");
        }
        for name in ["Server", "Content-Type", "x-secre", "x-secrets", ""] {
            assert!(!plan.hidden.contains(name), "{name}");
        }
    }

    #[test]
    fn constant_rules_are_evaluated_at_load_and_variable_ones_per_request() {
        let constant = HeadersConf {
            redirects: vec![rule("http://u/", "/")],
            ..HeadersConf::default()
        };
        let plan = ResponsePlan::new(&constant);
        assert!(plan.constant.as_ref().is_some_and(|c| c.redirects.ends.len() == 1));
        let p = prepared(&constant);
        assert!(p.rewrites.rules.is_empty(), "nothing evaluated per request");
        let mut out = Vec::new();
        let rules = plan.constant.as_ref().unwrap();
        let (which, url) = (Rewritten::Location, &b"http://u/a"[..]);
        assert!(rules.write_redirect(&p.rewrites, &constant.redirects, which, "Location", url, &mut out));
        assert_eq!(out, b"Location: http://localhost:8080/a\r\n");
        let variable = HeadersConf {
            redirects: vec![rule("http://u/", "/$arg_e/")],
            ..HeadersConf::default()
        };
        assert!(ResponsePlan::new(&variable).constant.is_none());
        assert_eq!(prepared(&variable).rewrites.rules.redirects.ends.len(), 1);
    }

    #[test]
    fn redirects_rewrite_location_and_refresh() {
        let conf = HeadersConf {
            redirects: vec![
                Redirect {
                    from: KeyTemplate::literal("http://127.0.0.1:8081/replace_this/"),
                    to: KeyTemplate::literal("/impl_default/"),
                    regex: None,
                },
                rule("http://other/", "http://$arg_e/"),
            ],
            ..HeadersConf::default()
        };
        let p = prepared(&conf);
        let rewrite = |which, name, value: &str| {
            let mut out = Vec::new();
            p.rewrites
                .write_redirect(&conf.redirects, which, name, value.as_bytes(), &mut out)
                .then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(
            rewrite(
                Rewritten::Location,
                "Location",
                "http://127.0.0.1:8081/replace_this/test.html"
            ),
            Some("Location: http://localhost:8080/impl_default/test.html\r\n".into())
        );
        assert_eq!(
            rewrite(
                Rewritten::Refresh,
                "Refresh",
                "7; URL=http://127.0.0.1:8081/replace_this/t"
            ),
            Some("Refresh: 7; URL=/impl_default/t\r\n".into())
        );
        assert_eq!(
            rewrite(Rewritten::Location, "location", "http://other/x"),
            Some("location: http://2048/x\r\n".into())
        );
        assert_eq!(rewrite(Rewritten::Location, "Location", "http://third/x"), None);
        assert_eq!(rewrite(Rewritten::Refresh, "Refresh", "7"), None);
    }

    #[test]
    fn cookies_rewrite_domain_and_path_as_nginx() {
        let conf = HeadersConf {
            cookie_domains: vec![rule("backend.local", "example.com"), rule("other", "o-$arg_e")],
            cookie_paths: vec![rule("/app/", "/"), rule("/", "/x/")],
            ..HeadersConf::default()
        };
        let p = prepared(&conf);
        let cookie = |value: &str| {
            let mut out = Vec::new();
            p.rewrites
                .write_cookie("Set-Cookie", value.as_bytes(), &mut out)
                .then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(
            cookie("sid=1;  Domain=.Backend.LOCAL ;Path=/app/a; HttpOnly"),
            Some("Set-Cookie: sid=1; Domain=.example.com; Path=/a; HttpOnly\r\n".into())
        );
        assert_eq!(
            cookie("a=b; domain=other"),
            Some("Set-Cookie: a=b; domain=o-2048\r\n".into())
        );
        assert_eq!(cookie("a=b; path=/z"), Some("Set-Cookie: a=b; path=/x/z\r\n".into()));
        // no rule applies, or no name=value first: the line is passed as it is
        assert_eq!(cookie("a=b; domain=sub.backend.local"), None);
        assert_eq!(cookie("a=b; Secure"), None);
        assert_eq!(cookie("flag; path=/app/"), None);
        // the first attribute is the cookie itself, never rewritten
        assert_eq!(
            cookie("path=/app/; Path=/app/b"),
            Some("Set-Cookie: path=/app/; Path=/b\r\n".into())
        );
    }
}
