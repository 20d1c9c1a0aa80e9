//! What a proxied location changes in the upstream's response head, as nginx's proxy module does: the headers
//! not passed (`proxy_hide_header`, `proxy_pass_header` over nginx's default list), `proxy_redirect` on `Location`
//! and `Refresh`, and `proxy_cookie_domain`/`proxy_cookie_path` on `Set-Cookie`; the rules' values evaluated per
//! request at routing into the connection's reused [`Rewrites`].

use super::headers::{parse_http_date, HeadersPlan, Prepared, ResponseFacts};
use crate::config::headers::{HeadersConf, Redirect};
use crate::config::key::VarSource;
use crate::http::pages::{append_decimal, server_name};
use crate::http::response::HeadEdits;
use crate::http::PROXY_HIDE_DEFAULT;
use std::io::Write;

/// What a proxied location changes in upstream responses.
#[derive(Debug, Clone, Default)]
pub struct ResponsePlan {
    /// Not passed (lower case): nginx's default hidden ones and `proxy_hide_header`, less `proxy_pass_header`.
    hidden: Vec<String>,
    /// `proxy_pass_header` names, lower case.
    passed: Vec<String>,
    redirects: Vec<Redirect>,
    cookie_domains: Vec<Redirect>,
    cookie_paths: Vec<Redirect>,
}

/// The host of absolute redirects: the request's (nginx's `headers_in.server`), else the local address.
#[derive(Debug, Clone, Copy)]
pub enum HostOrAddr<'a> {
    Host(&'a [u8]),
    Addr(std::net::IpAddr),
}

/// Rules evaluated for one request: each FROM and TO back to back in `text`, with the ends of each.
#[derive(Debug, Default)]
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

/// One request's evaluated `proxy_redirect` and `proxy_cookie_*` rules (in the connection's [`Prepared`]).
#[derive(Debug, Default)]
pub struct Rewrites {
    /// `http://HOST[:PORT]` for a rewritten `Location` that starts with `/`.
    base: Vec<u8>,
    redirects: Rules,
    cookie_domains: Rules,
    cookie_paths: Rules,
}

impl Rewrites {
    /// Whether no rule applies to this request's response.
    fn is_empty(&self) -> bool {
        self.redirects.ends.is_empty() && self.cookie_domains.ends.is_empty() && self.cookie_paths.ends.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.base.clear();
        self.redirects.clear();
        self.cookie_domains.clear();
        self.cookie_paths.clear();
    }
}

impl ResponsePlan {
    pub fn new(conf: &HeadersConf) -> ResponsePlan {
        let mut hidden: Vec<String> = PROXY_HIDE_DEFAULT.iter().map(|s| s.to_string()).collect();
        hidden.extend(conf.hide.iter().cloned());
        hidden.retain(|h| !conf.pass.contains(h));
        ResponsePlan {
            hidden,
            passed: conf.pass.clone(),
            redirects: conf.redirects.clone(),
            cookie_domains: conf.cookie_domains.clone(),
            cookie_paths: conf.cookie_paths.clone(),
        }
    }

    /// Evaluates the rules, and the base of absolute redirects (`http://` + the request's host, the local port
    /// when not 80), into `p` (nothing when there are no rules).
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
            r.base.extend_from_slice(b"http://");
            match host {
                HostOrAddr::Host(h) => r.base.extend(h.iter().map(u8::to_ascii_lowercase)),
                HostOrAddr::Addr(ip) => {
                    let _ = write!(r.base, "{ip}");
                }
            }
            if port != 80 {
                r.base.push(b':');
                append_decimal(&mut r.base, u64::from(port));
            }
            r.redirects.fill(&self.redirects, vars, scratch);
        }
        r.cookie_domains.fill(&self.cookie_domains, vars, scratch);
        r.cookie_paths.fill(&self.cookie_paths, vars, scratch);
    }
}

/// Which header a redirect rewrite applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewritten {
    Location,
    Refresh,
}

impl Rewrites {
    /// Writes the upstream's `Location` or `Refresh` line rewritten by the first `proxy_redirect` rule whose FROM
    /// starts its URL (for `Refresh`, the part after `url=`), as nginx's `ngx_http_proxy_rewrite_redirect`; a
    /// rewritten `Location` starting with `/` becomes absolute, as nginx's header filter makes it. Returns false
    /// (writing nothing) when no rule applies.
    pub fn write_redirect(&self, which: Rewritten, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
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
        let Some((from, to)) = self.redirects.iter().find(|(from, _)| url.starts_with(from)) else {
            return false;
        };
        let rest = url.get(from.len()..).unwrap_or_default();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        if which == Rewritten::Location && to.first().or(rest.first()) == Some(&b'/') {
            out.extend_from_slice(&self.base);
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

    fn upstream_line(&self, status: u16, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        if self.plan.hidden.iter().any(|h| name.eq_ignore_ascii_case(h)) || self.prepared.replaces(status, name) {
            return true;
        }
        let r = &self.prepared.rewrites;
        if r.is_empty() {
            return false;
        }
        if name.eq_ignore_ascii_case("location") {
            return r.write_redirect(Rewritten::Location, name, value, out);
        }
        if name.eq_ignore_ascii_case("refresh") {
            return r.write_redirect(Rewritten::Refresh, name, value, out);
        }
        if name.eq_ignore_ascii_case("set-cookie") {
            return r.write_cookie(name, value, out);
        }
        false
    }

    fn append(&self, status: u16, last_modified: Option<&[u8]>, out: &mut Vec<u8>) {
        let facts = ResponseFacts {
            now: self.now,
            last_modified: last_modified.and_then(parse_http_date),
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
        }
    }

    fn prepared(conf: &HeadersConf) -> Prepared {
        let mut p = Prepared::default();
        let host = HostOrAddr::Host(b"LocalHost");
        ResponsePlan::new(conf).prepare(&Arg, host, 8080, &mut Vec::new(), &mut p);
        p
    }

    #[test]
    fn redirects_rewrite_location_and_refresh() {
        let conf = HeadersConf {
            redirects: vec![
                Redirect {
                    from: KeyTemplate::literal("http://127.0.0.1:8081/replace_this/"),
                    to: KeyTemplate::literal("/impl_default/"),
                },
                rule("http://other/", "http://$arg_e/"),
            ],
            ..HeadersConf::default()
        };
        let p = prepared(&conf);
        let rewrite = |which, name, value: &str| {
            let mut out = Vec::new();
            p.rewrites
                .write_redirect(which, name, value.as_bytes(), &mut out)
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
