//! The response headers of a location, compiled at load (nginx's headers filter: `add_header`, `expires`; and
//! `server_tokens`), what one request evaluates of them at routing ([`Prepared`], in the connection's reused
//! buffers: the request head is gone when the response is written), and the lines written into a response head
//! ([`HeadersPlan::append`]: a line whose value needs the response, as `$upstream_addr` does in nginx's header
//! filter, is finished then, from the request's values kept at routing and the response's).

use super::proxied::Rewrites;
use crate::config::headers::parse_expires;
use crate::config::headers::{safe_status, AddHeader, Expires, ExpiresRule, HeadersConf, RedirectStyle, ServerTokens};
use crate::config::key::{KeyTemplate, Part, Var, VarSource};
use crate::http::pages::{append_decimal, format_http_date};

/// A header whose line replaces the answer's own (nginx's `ngx_http_set_response_header`): an `add_header` of
/// it drops the answer's line; an empty value leaves none.
const REPLACING: [&str; 2] = ["etag", "last-modified"];

/// One `add_header` line: pre-rendered when constant.
#[derive(Debug, Clone)]
enum Line {
    Fixed(Vec<u8>),
    /// `deferred`: the value names a variable known only with the response, so the line is written then.
    Var {
        name: String,
        value: KeyTemplate,
        deferred: bool,
    },
    /// A constant empty value: adds nothing (but still replaces, for `ETag`/`Last-Modified`).
    Empty,
}

#[derive(Debug, Clone)]
struct Added {
    line: Line,
    always: bool,
    /// Index into [`REPLACING`], for `ETag` and `Last-Modified`.
    replaces: Option<usize>,
    /// Whether a later line of the same replacing header applies to the same statuses (this one is overwritten).
    overwritten: [bool; 2],
}

/// A location's (or a server's) response headers.
#[derive(Debug, Clone)]
pub struct HeadersPlan {
    added: Vec<Added>,
    expires: Expires,
    tokens: ServerTokens,
    at_response: fn(&Var) -> bool,
    /// No `add_header` and no `expires`: a request prepares and a head appends nothing.
    nothing: bool,
    /// Whether a line reads the request's record when the head is written (the upstream tries, `$request_time`):
    /// decided at load, so that a request of a location without such a line records nothing for it.
    reads_record: bool,
    /// How a `Location` starting with `/` of these answers is completed (`absolute_redirect`...).
    redirect_style: RedirectStyle,
    /// The location's charset filter, for corelb's own answers (`return`, error pages).
    charset: Option<std::sync::Arc<super::charset::CharsetPlan>>,
}

impl Default for HeadersPlan {
    fn default() -> Self {
        NO_HEADERS.clone()
    }
}

/// Nothing added, `server_tokens on` (answers outside any location, endpoints).
pub static NO_HEADERS: HeadersPlan = HeadersPlan {
    added: Vec::new(),
    expires: Expires::Off,
    tokens: ServerTokens::On,
    at_response: known_with_response,
    nothing: true,
    reads_record: false,
    redirect_style: RedirectStyle::NGINX,
    charset: None,
};

/// The status classes: nginx's safe statuses, and the others (only `always` lines).
const SAFE: usize = 0;
const OTHER: usize = 1;

impl HeadersPlan {
    /// The plan with the location's charset filter (for the `Content-Type` of corelb's own answers).
    pub fn with_charset(mut self, charset: Option<std::sync::Arc<super::charset::CharsetPlan>>) -> HeadersPlan {
        self.charset = charset;
        self
    }

    /// The location's charset filter, if it can change an answer.
    pub fn charset(&self) -> Option<&super::charset::CharsetPlan> {
        self.charset.as_deref()
    }

    /// Compiles `conf`'s `add_header`, `expires` and `server_tokens`.
    pub fn new(conf: &HeadersConf) -> HeadersPlan {
        Self::new_with(conf, known_with_response)
    }

    /// [`HeadersPlan::new`] with `at_response` saying which variables are known only with the response.
    fn new_with(conf: &HeadersConf, at_response: fn(&Var) -> bool) -> HeadersPlan {
        let mut added: Vec<Added> = conf.add.iter().map(|a| compile_line(a, at_response)).collect();
        for i in 0..added.len() {
            for class in [SAFE, OTHER] {
                let applies = |a: &Added| class == SAFE || a.always;
                let Some(r) = added.get(i).and_then(|a| a.replaces) else {
                    continue;
                };
                let later = added.iter().skip(i + 1).any(|b| b.replaces == Some(r) && applies(b));
                if let Some(a) = added.get_mut(i) {
                    a.overwritten[class] = later;
                }
            }
        }
        let reads_record = added.iter().any(|a| match &a.line {
            Line::Var {
                value, deferred: true, ..
            } => value
                .parts()
                .iter()
                .any(|p| matches!(p, Part::Var(v) if reads_record(v))),
            _ => false,
        });
        HeadersPlan {
            nothing: added.is_empty() && conf.expires == Expires::Off,
            added,
            expires: conf.expires.clone(),
            tokens: conf.server_tokens,
            at_response,
            reads_record,
            redirect_style: conf.redirect_style,
            charset: None,
        }
    }

    /// `absolute_redirect`, `server_name_in_redirect` and `port_in_redirect` of these answers.
    pub fn redirect_style(&self) -> RedirectStyle {
        self.redirect_style
    }

    /// Whether these headers add no line to any answer (no `add_header`, no `expires`).
    pub fn adds_nothing(&self) -> bool {
        self.nothing
    }

    /// The `server_tokens` of these answers.
    pub fn tokens(&self) -> ServerTokens {
        self.tokens
    }

    /// Whether a line names the upstream tries or `$request_time`/`$request_length`: the request's record must keep
    /// them (and the upstream's name, for a try that found no live peer) even when no access log reads them.
    pub fn reads_record(&self) -> bool {
        self.reads_record
    }

    /// Evaluates this request's values into `p` (cleared first); `scratch` is a reused buffer.
    pub fn prepare(&self, vars: &dyn VarSource, scratch: &mut Vec<u8>, p: &mut Prepared) {
        p.reset();
        p.tokens = self.tokens;
        if self.nothing {
            return;
        }
        if self.reads_record {
            // `$upstream_addr` of a try that found no live peer is the upstream's name, as `$proxy_host` is
            vars.append(&Var::ProxyHost, &mut p.upstream);
        }
        p.expires = match &self.expires {
            Expires::Off => ExpiresRule::Off,
            Expires::Fixed(rule) => *rule,
            Expires::Var { modified, value } => {
                value.eval_into(vars, scratch);
                std::str::from_utf8(scratch)
                    .ok()
                    .and_then(|v| parse_expires(v, *modified).ok())
                    .unwrap_or(ExpiresRule::Off)
            }
        };
        for (i, a) in self.added.iter().enumerate() {
            for class in [SAFE, OTHER] {
                if class == OTHER && !a.always {
                    continue;
                }
                if let Some(r) = a.replaces {
                    p.replaced[class] |= 1 << r;
                    if a.overwritten[class] {
                        continue;
                    }
                }
                let out = &mut p.lines[class];
                match &a.line {
                    Line::Fixed(line) => out.extend_from_slice(line),
                    Line::Empty => {}
                    Line::Var { deferred: true, .. } => p.deferred[class].push((out.len(), i)),
                    Line::Var { name, value, .. } => {
                        value.eval_into(vars, scratch);
                        if !scratch.is_empty() {
                            push_line(out, name.as_bytes(), scratch);
                        }
                    }
                }
            }
            // the request's values of a deferred line, kept for the response
            if let Line::Var {
                value, deferred: true, ..
            } = &a.line
            {
                for part in value.parts() {
                    if let Part::Var(v) = part {
                        if !(self.at_response)(v) {
                            scratch.clear();
                            vars.append(v, scratch);
                            p.kept.extend_from_slice(scratch);
                            p.kept_ends.push((i, p.kept.len()));
                        }
                    }
                }
            }
        }
    }

    /// Appends the lines nginx's headers filter adds for a response with `status`: `Expires` and `Cache-Control`
    /// (`expires`, safe statuses only), then the `add_header` lines that apply, those needing the response
    /// finished from `p` and `response` (the response's variables). This is what every answer's head calls after
    /// its `Connection` line.
    pub fn append(&self, status: u16, p: &Prepared, response: &dyn VarSource, facts: ResponseFacts, out: &mut Vec<u8>) {
        if self.nothing {
            return;
        }
        let class = class_of(status);
        if class == SAFE {
            append_expires(p.expires, facts, out);
        }
        let (Some(lines), Some(deferred)) = (p.lines.get(class), p.deferred.get(class)) else {
            return;
        };
        let mut from = 0;
        for &(at, line) in deferred {
            out.extend_from_slice(lines.get(from..at).unwrap_or_default());
            from = at;
            if let Some(Added {
                line: Line::Var { name, value, .. },
                ..
            }) = self.added.get(line)
            {
                self.write_deferred(line, name, value, p, response, out);
            }
        }
        out.extend_from_slice(lines.get(from..).unwrap_or_default());
    }

    /// Writes `name: VALUE` with the request's values kept in `p` and the response's from `response`; nothing
    /// when the value is empty.
    fn write_deferred(
        &self,
        line: usize,
        name: &str,
        value: &KeyTemplate,
        p: &Prepared,
        response: &dyn VarSource,
        out: &mut Vec<u8>,
    ) {
        let start = out.len();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        let value_start = out.len();
        let mut kept = p.kept_ends.iter().scan(0, |prev, &(l, end)| {
            let span = (*prev, end);
            *prev = end;
            Some((l, span))
        });
        for part in value.parts() {
            match part {
                Part::Text(t) => out.extend_from_slice(t),
                // the head written so far has the answer's lines, and those added before this one
                Part::Var(Var::SentHttp(name)) => append_sent(out, start, name),
                Part::Var(v) if (self.at_response)(v) => response.append(v, out),
                Part::Var(_) => {
                    if let Some((_, (a, b))) = kept.by_ref().find(|(l, _)| *l == line) {
                        out.extend_from_slice(p.kept.get(a..b).unwrap_or_default());
                    }
                }
            }
        }
        if out.len() == value_start {
            out.truncate(start);
        } else {
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Whether `v` is known only once the response is there (nginx's header filter sees it then).
fn known_with_response(v: &Var) -> bool {
    v.phase() == crate::config::var::Phase::Response
}

/// Whether `v` is read from the request's record when the head is written.
fn reads_record(v: &Var) -> bool {
    v.is_upstream_try() || matches!(v, Var::RequestTime | Var::RequestLength)
}

/// `$sent_http_NAME` while the head is written: appends the value of every `name` line of `out[..end]` (the head
/// so far, from its status line), joined by `, ` as nginx joins them; copied within `out`, nothing allocated.
fn append_sent(out: &mut Vec<u8>, end: usize, name: &str) {
    let end = end.min(out.len());
    let mut at = out
        .get(..end)
        .and_then(|h| h.iter().position(|&c| c == b'\n'))
        .map_or(end, |i| i + 1);
    let mut found = false;
    while at < end {
        let line_end = out
            .get(at..end)
            .and_then(|r| r.iter().position(|&c| c == b'\n'))
            .map_or(end, |i| at + i);
        let line = out.get(at..line_end).unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let value = line.iter().position(|&c| c == b':').and_then(|colon| {
            let (n, v) = (line.get(..colon)?, line.get(colon + 1..)?);
            let same = n.len() == name.len()
                && n.iter().zip(name.bytes()).all(|(&c, w)| {
                    let c = c.to_ascii_lowercase();
                    c == w || (c == b'_' && w == b'-')
                });
            let lead = v.iter().take_while(|c| c.is_ascii_whitespace()).count();
            let trail = v.iter().rev().take_while(|c| c.is_ascii_whitespace()).count();
            let from = at + colon + 1 + lead;
            same.then_some(from..(at + colon + 1 + v.len() - trail).max(from))
        });
        if let Some(range) = value {
            if found {
                out.extend_from_slice(b", ");
            }
            out.extend_from_within(range);
            found = true;
        }
        at = line_end + 1;
    }
}

/// A response source without variables (answers corelb makes itself have none of the upstream's).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoResponseVars;

impl VarSource for NoResponseVars {
    fn append(&self, _var: &Var, _out: &mut Vec<u8>) {}
}

fn compile_line(a: &AddHeader, at_response: fn(&Var) -> bool) -> Added {
    let constant = a.value.parts().iter().all(|p| matches!(p, Part::Text(_)));
    let line = if !constant {
        Line::Var {
            name: a.name.clone(),
            value: a.value.clone(),
            deferred: a
                .value
                .parts()
                .iter()
                .any(|p| matches!(p, Part::Var(v) if at_response(v))),
        }
    } else if a.value.raw().is_empty() {
        Line::Empty
    } else {
        let mut line = Vec::new();
        push_line(&mut line, a.name.as_bytes(), a.value.raw().as_bytes());
        Line::Fixed(line)
    };
    Added {
        line,
        always: a.always,
        replaces: REPLACING.iter().position(|n| a.name.eq_ignore_ascii_case(n)),
        overwritten: [false; 2],
    }
}

fn push_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// What the response itself brings that the added lines depend on.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseFacts {
    /// Seconds since the epoch.
    pub now: u64,
    /// The answer's `Last-Modified` (seconds since the epoch), for `expires modified`.
    pub last_modified: Option<i64>,
}

/// One request's response headers, evaluated when it was routed; kept in the connection's buffers.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The `add_header` lines for safe statuses ([`SAFE`]) and for the others ([`OTHER`]).
    lines: [Vec<u8>; 2],
    /// Bits of [`REPLACING`] headers whose answer's own line gives way, per class.
    replaced: [u8; 2],
    expires: ExpiresRule,
    tokens: ServerTokens,
    /// Per class, the `add_header` lines finished with the response: (offset in `lines`, index of the line).
    deferred: [Vec<(usize, usize)>; 2],
    /// The request's values of those lines' variables, back to back, with (line index, end) of each.
    kept: Vec<u8>,
    kept_ends: Vec<(usize, usize)>,
    /// The upstream's name (`$proxy_host`), when a line reads the upstream tries.
    upstream: Vec<u8>,
    /// `proxy_redirect` and `proxy_cookie_*` rules evaluated for a proxied request.
    pub(crate) rewrites: Rewrites,
}

impl Prepared {
    /// Nothing added (a request answered before it was routed).
    pub fn reset(&mut self) {
        for l in &mut self.lines {
            l.clear();
        }
        for d in &mut self.deferred {
            d.clear();
        }
        self.kept.clear();
        self.kept_ends.clear();
        self.upstream.clear();
        self.replaced = [0; 2];
        self.expires = ExpiresRule::Off;
        self.tokens = ServerTokens::default();
        self.rewrites.clear();
    }

    /// The `server_tokens` of the request's location.
    pub fn tokens(&self) -> ServerTokens {
        self.tokens
    }

    /// Whether the answer's `Last-Modified` matters (`expires modified`).
    pub fn wants_last_modified(&self) -> bool {
        matches!(self.expires, ExpiresRule::Modified(_))
    }

    /// The upstream's name, kept at routing when the location's lines read the upstream tries (else empty).
    pub fn upstream_name(&self) -> &[u8] {
        &self.upstream
    }

    /// Whether the answer's own `name` header gives way to what [`Prepared::append`] writes for `status`
    /// (`Expires` and `Cache-Control` under `expires`; `ETag` and `Last-Modified` under an `add_header` of them).
    pub fn replaces(&self, status: u16, name: &str) -> bool {
        let class = class_of(status);
        let expires = class == SAFE && self.expires != ExpiresRule::Off;
        if !expires && self.replaced[class] == 0 {
            return false;
        }
        if expires && (name.eq_ignore_ascii_case("expires") || name.eq_ignore_ascii_case("cache-control")) {
            return true;
        }
        REPLACING
            .iter()
            .position(|n| name.eq_ignore_ascii_case(n))
            .is_some_and(|r| self.replaced[class] & (1 << r) != 0)
    }
}

fn class_of(status: u16) -> usize {
    if safe_status(status) {
        SAFE
    } else {
        OTHER
    }
}

/// `ngx_http_set_expires`: the `Expires` and `Cache-Control` lines of `rule`.
fn append_expires(rule: ExpiresRule, facts: ResponseFacts, out: &mut Vec<u8>) {
    let now = i64::try_from(facts.now).unwrap_or(i64::MAX);
    let (config_time, expires_at, max_age) = match rule {
        ExpiresRule::Off => return,
        ExpiresRule::Epoch => {
            out.extend_from_slice(b"Expires: Thu, 01 Jan 1970 00:00:01 GMT\r\nCache-Control: no-cache\r\n");
            return;
        }
        ExpiresRule::Max => {
            out.extend_from_slice(b"Expires: Thu, 31 Dec 2037 23:55:55 GMT\r\nCache-Control: max-age=315360000\r\n");
            return;
        }
        ExpiresRule::Access(0) | ExpiresRule::Modified(0) => (0, now, 0),
        ExpiresRule::Daily(t) => {
            let at = next_time_of_day(now, t);
            (t, at, at.saturating_sub(now))
        }
        ExpiresRule::Access(t) => (t, now.saturating_add(t), t),
        ExpiresRule::Modified(t) => match facts.last_modified {
            None => (t, now.saturating_add(t), t),
            Some(lm) => {
                let at = lm.saturating_add(t);
                (t, at, at.saturating_sub(now))
            }
        },
    };
    out.extend_from_slice(b"Expires: ");
    out.extend_from_slice(&format_http_date(u64::try_from(expires_at).unwrap_or(0)));
    out.extend_from_slice(b"\r\nCache-Control: ");
    if config_time < 0 || max_age < 0 {
        out.extend_from_slice(b"no-cache\r\n");
    } else {
        out.extend_from_slice(b"max-age=");
        append_decimal(out, max_age.unsigned_abs());
        out.extend_from_slice(b"\r\n");
    }
}

/// `ngx_next_time`: the next moment (after `now`) at `secs` after midnight; corelb counts days in UTC.
fn next_time_of_day(now: i64, secs: i64) -> i64 {
    let today = now - now.rem_euclid(86_400) + secs;
    if today > now {
        today
    } else {
        today + 86_400
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 1123, the form nginx and corelb send) as seconds since the epoch.
pub fn parse_http_date(v: &[u8]) -> Option<i64> {
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
    ];
    let v = v.trim_ascii();
    let comma = v.iter().position(|&c| c == b',')?;
    let rest = v.get(comma + 1..)?.trim_ascii_start();
    let mut it = rest.split(|&c| c == b' ').filter(|p| !p.is_empty());
    let day = num(it.next()?)?;
    let month_name = it.next()?;
    let month = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(month_name))?;
    let year = num(it.next()?)?;
    let mut hms = it.next()?.split(|&c| c == b':');
    let (h, m, s) = (num(hms.next()?)?, num(hms.next()?)?, num(hms.next()?)?);
    if it.next()? != b"GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(year, u32::try_from(month).ok()? + 1, u32::try_from(day).ok()?);
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

fn num(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 4 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Days since 1970-01-01 of a date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;

    struct Uri;
    impl VarSource for Uri {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Uri => out.extend_from_slice(b"/t1"),
                Var::Arg(a) if a == "e" => out.extend_from_slice(b"2048"),
                _ => {}
            }
        }
    }

    fn add(name: &str, value: &str, always: bool) -> AddHeader {
        AddHeader {
            name: name.into(),
            value: KeyTemplate::compile(value).unwrap(),
            always,
        }
    }

    fn prepared(conf: &HeadersConf) -> (HeadersPlan, Prepared) {
        let mut p = Prepared::default();
        let plan = HeadersPlan::new(conf);
        plan.prepare(&Uri, &mut Vec::new(), &mut p);
        (plan, p)
    }

    fn lines(plan: &(HeadersPlan, Prepared), status: u16, facts: ResponseFacts) -> String {
        let mut out = Vec::new();
        plan.0.append(status, &plan.1, &NoResponseVars, facts, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// headers.t's server: `add_header X-URI $uri; add_header X-Always $uri always; add_header ETag foo always;
    /// add_header ETag '' always; expires epoch;`
    #[test]
    fn safe_statuses_get_every_line_others_only_always_ones() {
        let conf = HeadersConf {
            add: vec![
                add("X-URI", "$uri", false),
                add("X-Always", "$uri", true),
                add("ETag", "foo", true),
                add("ETag", "", true),
            ],
            expires: Expires::Fixed(ExpiresRule::Epoch),
            ..HeadersConf::default()
        };
        let plan = prepared(&conf);
        let (facts, p) = (ResponseFacts::default(), &plan.1);
        assert_eq!(
            lines(&plan, 200, facts),
            "Expires: Thu, 01 Jan 1970 00:00:01 GMT\r\nCache-Control: no-cache\r\nX-URI: /t1\r\nX-Always: /t1\r\n"
        );
        assert_eq!(lines(&plan, 404, facts), "X-Always: /t1\r\n");
        assert!(p.replaces(200, "ETag") && p.replaces(404, "etag") && !p.replaces(200, "X-URI"));
        assert!(p.replaces(200, "Cache-Control") && !p.replaces(404, "Expires"));
    }

    #[test]
    fn a_later_replacing_line_overwrites_and_empty_values_add_nothing() {
        let conf = HeadersConf {
            add: vec![
                add("ETag", "a", false),
                add("X-Empty", "$arg_none", true),
                add("etag", "b", false),
                add("Cache-Control", "private", false),
                add("Cache-Control", "no-store", false),
            ],
            ..HeadersConf::default()
        };
        let plan = prepared(&conf);
        let p = &plan.1;
        assert_eq!(
            lines(&plan, 204, ResponseFacts::default()),
            "etag: b\r\nCache-Control: private\r\nCache-Control: no-store\r\n"
        );
        assert_eq!(lines(&plan, 500, ResponseFacts::default()), "");
        assert!(!p.replaces(500, "ETag"));
    }

    /// As if `$host` were known only with the response (as `$upstream_addr` is): a line naming it is written
    /// then, in its place, with the request's `$uri` kept from routing; an empty one is left out.
    #[test]
    fn lines_needing_the_response_are_finished_with_it() {
        struct Response;
        impl VarSource for Response {
            fn append(&self, var: &Var, out: &mut Vec<u8>) {
                if *var == Var::Host {
                    out.extend_from_slice(b"127.0.0.1:8081");
                }
            }
        }
        let conf = HeadersConf {
            add: vec![
                add("X-A", "a", false),
                add("X-IP", "$host for $uri", true),
                add("X-B", "$uri", false),
                add("X-None", "$host", false),
            ],
            ..HeadersConf::default()
        };
        let plan = HeadersPlan::new_with(&conf, |v| *v == Var::Host);
        let mut p = Prepared::default();
        plan.prepare(&Uri, &mut Vec::new(), &mut p);
        let mut out = Vec::new();
        plan.append(200, &p, &Response, ResponseFacts::default(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "X-A: a\r\nX-IP: 127.0.0.1:8081 for /t1\r\nX-B: /t1\r\nX-None: 127.0.0.1:8081\r\n"
        );
        let mut out = Vec::new();
        plan.append(502, &p, &NoResponseVars, ResponseFacts::default(), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "X-IP:  for /t1\r\n");
        let mut out = Vec::new();
        plan.append(200, &p, &NoResponseVars, ResponseFacts::default(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "X-A: a\r\nX-IP:  for /t1\r\nX-B: /t1\r\n"
        );
    }

    /// `$sent_http_NAME` reads the head written so far: the answer's lines and the lines added before it.
    #[test]
    fn sent_headers_are_read_from_the_head_so_far() {
        let conf = HeadersConf {
            add: vec![
                add("X-A", "a1", false),
                add("X-CT", "[$sent_http_content_type]", false),
                add(
                    "X-Seen",
                    "$sent_http_x_a|$sent_http_x_later|$sent_http_cache_control",
                    false,
                ),
                add("X-Later", "l", false),
            ],
            ..HeadersConf::default()
        };
        let (plan, p) = prepared(&conf);
        assert!(!plan.reads_record(), "no upstream try is named");
        let head = "HTTP/1.1 200 OK\r\nContent-Type:  text/plain \r\nCache-Control: private\r\n\
                    cache-control: no-store\r\nConnection: keep-alive\r\n";
        let mut out = head.as_bytes().to_vec();
        plan.append(200, &p, &NoResponseVars, ResponseFacts::default(), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap().strip_prefix(head).unwrap(),
            "X-A: a1\r\nX-CT: [text/plain]\r\nX-Seen: a1||private, no-store\r\nX-Later: l\r\n"
        );
        let tries = HeadersConf {
            add: vec![add("X-IP", "$upstream_addr", true)],
            ..HeadersConf::default()
        };
        let (plan, p) = prepared(&tries);
        assert!(plan.reads_record());
        assert_eq!(p.upstream_name(), b"", "the test's requests have no `$proxy_host`");
    }

    #[test]
    fn expires_as_nginx_formats_it() {
        let now = 1_000_000_000; // Sun, 09 Sep 2001 01:46:40 GMT
        let facts = ResponseFacts {
            now,
            last_modified: None,
        };
        let of = |rule| {
            let mut out = Vec::new();
            append_expires(rule, facts, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            of(ExpiresRule::Max),
            "Expires: Thu, 31 Dec 2037 23:55:55 GMT\r\nCache-Control: max-age=315360000\r\n"
        );
        assert_eq!(
            of(ExpiresRule::Access(2048)),
            "Expires: Sun, 09 Sep 2001 02:20:48 GMT\r\nCache-Control: max-age=2048\r\n"
        );
        assert_eq!(
            of(ExpiresRule::Access(-2048)),
            "Expires: Sun, 09 Sep 2001 01:12:32 GMT\r\nCache-Control: no-cache\r\n"
        );
        assert_eq!(
            of(ExpiresRule::Access(0)),
            "Expires: Sun, 09 Sep 2001 01:46:40 GMT\r\nCache-Control: max-age=0\r\n"
        );
        assert_eq!(
            of(ExpiresRule::Daily(15 * 3600 + 30 * 60 + 33)),
            "Expires: Sun, 09 Sep 2001 15:30:33 GMT\r\nCache-Control: max-age=49433\r\n"
        );
        assert_eq!(
            of(ExpiresRule::Daily(33)),
            "Expires: Mon, 10 Sep 2001 00:00:33 GMT\r\nCache-Control: max-age=80033\r\n"
        );
        // headers.t: Last-Modified Mon, 28 Sep 1970 06:00:00 GMT + 2048 s, long past: no-cache
        let lm = parse_http_date(b"Mon, 28 Sep 1970 06:00:00 GMT").unwrap();
        let mut out = Vec::new();
        append_expires(
            ExpiresRule::Modified(2048),
            ResponseFacts {
                now,
                last_modified: Some(lm),
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Expires: Mon, 28 Sep 1970 06:34:08 GMT\r\nCache-Control: no-cache\r\n"
        );
        assert_eq!(of(ExpiresRule::Modified(60)), of(ExpiresRule::Access(60)));
    }

    #[test]
    fn http_dates_parse_back() {
        for secs in [0u64, 784_111_777, 951_782_400, 2_145_916_555] {
            assert_eq!(parse_http_date(&format_http_date(secs)), Some(secs as i64));
        }
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37"), None);
        assert_eq!(parse_http_date(b"garbage"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Foo 1994 08:49:37 GMT"), None);
    }
}
