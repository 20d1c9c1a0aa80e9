//! `proxy_pass` with variables (`ngx_http_proxy_eval`, `ngx_http_upstream_init_request`): the URL is evaluated per
//! request, its host (and port) looked up among the http block's upstreams, `upstream` blocks by name (matched
//! only without a port) and the implicit ones of other `proxy_pass` lines by `host:port`. Every candidate's proxy
//! plan (its `Host` line, headers) is built at load, so a request only evaluates the URL into a reused buffer and
//! scans a short table. Any other host is proxied to as nginx does (`ngx_http_upstream_create_round_robin_peer`):
//! an address at once, a name once the location's `resolver` found its addresses ([`ProxyPlan::for_resolved`]);
//! a name without a resolver gets nginx's 502 and its message.

use super::headers::HeadersPlan;
use super::route::{FixedAnswer, ProxyPlan};
use crate::balance::UpstreamPlan;
use crate::config::headers::ServerTokens;
use crate::config::key::{KeyTemplate, VarSource};
use crate::config::model::{Location, UpstreamConf};
use std::ops::Range;

/// One upstream a URL may name.
#[derive(Debug)]
struct Candidate {
    /// Lower-case.
    host: String,
    /// `None`: an `upstream` block, matched by a URL without a port; `Some`: an implicit upstream, matched by
    /// that port (80 when the URL gives none).
    port: Option<u16>,
    plan: ProxyPlan,
}

/// A location's `proxy_pass` with variables.
#[derive(Debug)]
pub struct VarPass {
    url: KeyTemplate,
    candidates: Vec<Candidate>,
    /// The plan for any other host: an address, or a name the resolver finds.
    resolved: ProxyPlan,
    /// The location has a `resolver`.
    has_resolver: bool,
    /// nginx's answers when the URL leads nowhere: 502 (no resolver for a name), 500 (a bad URL).
    bad_gateway: FixedAnswer,
    internal_error: FixedAnswer,
}

/// Where a request of a [`VarPass`] goes.
#[derive(Debug)]
pub enum Picked<'s> {
    /// To this plan; `uri`: the URL's URI part (its range in the buffer), sent as is, when it has one.
    Plan {
        plan: &'s ProxyPlan,
        uri: Option<Range<usize>>,
    },
    /// To the addresses of the URL's host (an address, or a name to resolve), with `resolved`'s plan.
    Resolve {
        plan: &'s ProxyPlan,
        target: Target,
        uri: Option<Range<usize>>,
    },
    /// Nowhere: this answer, for this reason (the caller logs it).
    Fail { answer: &'s FixedAnswer, why: Miss },
}

/// A host that is no upstream, as ranges of the evaluated URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host (lower case; an IPv6 address in its brackets).
    pub host: Range<usize>,
    /// `$proxy_host`: the host, with `:PORT` when the URL has a port other than 80; empty for a unix-domain
    /// socket, whose `$proxy_host` is `localhost` ([`proxy_host_text`]).
    pub proxy_host: Range<usize>,
    pub port: u16,
    /// The host is an address: no lookup.
    pub addr: Option<std::net::IpAddr>,
    /// `http://unix:/path[:/uri]`: the socket's token ([`crate::config::unix_addr`]).
    pub unix: Option<std::net::SocketAddr>,
}

impl Target {
    /// The host's bytes in `url`.
    pub fn host<'u>(&self, url: &'u [u8]) -> &'u [u8] {
        url.get(self.host.clone()).unwrap_or_default()
    }
}

/// `$proxy_host` of a target's range in `url`: `localhost` for the empty range of a unix-domain socket (nginx's
/// `Host` to such a peer).
pub fn proxy_host_text<'u>(url: &'u [u8], range: &Range<usize>) -> &'u str {
    if range.is_empty() {
        return "localhost";
    }
    std::str::from_utf8(url.get(range.clone()).unwrap_or_default()).unwrap_or("")
}

/// The upstream nginx makes of a unix-domain URL (one peer, round robin's defaults), named `name`.
pub fn unix_upstream(name: &str, token: std::net::SocketAddr) -> Option<UpstreamPlan> {
    let line = crate::config::model::ServerLine::new(name, vec![token]);
    let conf = UpstreamConf::new(name, crate::config::model::Method::RoundRobin, vec![line]);
    UpstreamPlan::build_with(&conf, || std::sync::Arc::new(corelb_shared_state::PeerSlot::new())).ok()
}

/// The upstream nginx makes of a URL host's addresses (`ngx_http_upstream_create_round_robin_peer`): round
/// robin over them from the `first`-th on (nginx's resolver starts its list at a random address), weight 1,
/// `max_fails=1 fail_timeout=10s`, its state only the request's own. `None` without addresses.
pub fn resolved_upstream(name: &str, addrs: &[std::net::IpAddr], port: u16, first: usize) -> Option<UpstreamPlan> {
    let n = addrs.len();
    let rotated = (0..n)
        .filter_map(|i| addrs.get((first % n + i) % n))
        .map(|ip| std::net::SocketAddr::new(*ip, port))
        .collect();
    let line = crate::config::model::ServerLine::new(name, rotated);
    let conf = UpstreamConf::new(name, crate::config::model::Method::RoundRobin, vec![line]);
    UpstreamPlan::build_with(&conf, || std::sync::Arc::new(corelb_shared_state::PeerSlot::new())).ok()
}

/// The [`Target`] of a URL the pass evaluated before (into `url`, which is read again as it was left).
pub fn target_of(url: &mut Vec<u8>) -> Option<Target> {
    let parsed = parse(url).ok()?;
    Some(target(url, &parsed))
}

fn target(url: &[u8], parsed: &Parsed) -> Target {
    let host = url.get(parsed.host.clone()).unwrap_or_default();
    if parsed.unix {
        // the path is named at request time: interned once (a lock while the table grows, bounded by its size)
        let token = std::str::from_utf8(host.get(5..).unwrap_or_default())
            .ok()
            .and_then(|p| crate::config::unix_addr::intern(p).ok());
        return Target {
            host: parsed.host.clone(),
            proxy_host: parsed.host.start..parsed.host.start,
            port: 0,
            addr: None,
            unix: token,
        };
    }
    let port = parsed.port.unwrap_or(80);
    let proxy_host = match parsed.port {
        Some(p) if p != 80 => parsed.host.start..parsed.host.end + 1 + p.to_string().len(),
        _ => parsed.host.clone(),
    };
    let addr =
        std::str::from_utf8(host)
            .ok()
            .and_then(|h| match h.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6),
                None => crate::config::url::inet_addr(h).map(std::net::IpAddr::V4),
            });
    Target {
        host: parsed.host.clone(),
        proxy_host,
        port,
        addr,
        unix: None,
    }
}

/// Why an evaluated URL leads to no upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// Not `http://...`: nginx's 500.
    Prefix,
    /// A port that is not a number (or 0): nginx's 500.
    Port,
    /// A host name that is no upstream (its range in the URL), in a location without a `resolver` (502).
    NoResolver(Range<usize>),
    /// `https://`: corelb has no TLS to upstreams (502).
    Https,
}

impl Miss {
    /// nginx's error-log message for `url`, the evaluated URL.
    pub fn message(&self, url: &[u8]) -> String {
        let text = String::from_utf8_lossy(url);
        match self {
            Miss::Prefix => format!("invalid URL prefix in \"{text}\""),
            Miss::Port => format!("invalid port in upstream \"{}\"", text.get(7..).unwrap_or_default()),
            Miss::NoResolver(host) => format!(
                "no resolver defined to resolve {}",
                String::from_utf8_lossy(url.get(host.clone()).unwrap_or_default())
            ),
            Miss::Https => format!("https upstreams are not supported by corelb (\"{text}\")"),
        }
    }
}

/// The parts of an evaluated URL.
#[derive(Debug, PartialEq, Eq)]
struct Parsed {
    host: Range<usize>,
    port: Option<u16>,
    uri: Option<Range<usize>>,
    /// `unix:/path` (the host's range holds `unix:` and the path, case kept).
    unix: bool,
}

/// nginx's checks of an evaluated URL (`http://HOST[:PORT][/URI]`); the host is lower-cased in place. A URI that
/// starts with `?` gets a `/` before it, as nginx adds one.
fn parse(url: &mut Vec<u8>) -> Result<Parsed, Miss> {
    let starts = |p: &[u8]| url.len() > p.len() && url.get(..p.len()).is_some_and(|s| s.eq_ignore_ascii_case(p));
    if starts(b"https://") {
        return Err(Miss::Https);
    }
    if !starts(b"http://") {
        return Err(Miss::Prefix);
    }
    let start = 7;
    let rest = url.get(start..).unwrap_or_default();
    if rest.len() > 5 && rest.get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"unix:")) {
        return Ok(parse_unix(url, start));
    }
    let end = start + rest.iter().position(|&c| c == b'/' || c == b'?').unwrap_or(rest.len());
    let authority = url.get(start..end).unwrap_or_default();
    // `[v6]:port` or `host:port`
    let colon = match authority.iter().rposition(|&c| c == b':') {
        Some(i) if !authority.get(i..).unwrap_or_default().contains(&b']') => Some(start + i),
        _ => None,
    };
    let host_end = colon.unwrap_or(end);
    let port = match colon {
        Some(c) => {
            let digits = url.get(c + 1..end).unwrap_or_default();
            let n = std::str::from_utf8(digits)
                .ok()
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u16>().ok())
                .filter(|p| *p != 0)
                .ok_or(Miss::Port)?;
            Some(n)
        }
        None => None,
    };
    if let Some(h) = url.get_mut(start..host_end) {
        h.make_ascii_lowercase();
    }
    let uri = if end < url.len() {
        if url.get(end) == Some(&b'?') {
            url.insert(end, b'/');
        }
        Some(end..url.len())
    } else {
        None
    };
    Ok(Parsed {
        host: start..host_end,
        port,
        uri,
        unix: false,
    })
}

/// `http://unix:/path[:/uri]` (nginx's `ngx_parse_unix_domain_url`: the path ends at the first `:`).
fn parse_unix(url: &mut Vec<u8>, start: usize) -> Parsed {
    let path_from = start + 5;
    let rest = url.get(path_from..).unwrap_or_default();
    let (host_end, uri) = match rest.iter().position(|&c| c == b':') {
        Some(i) => {
            let uri_from = path_from + i + 1;
            if url.get(uri_from) == Some(&b'?') {
                url.insert(uri_from, b'/');
            }
            (path_from + i, (uri_from < url.len()).then_some(uri_from..url.len()))
        }
        None => (url.len(), None),
    };
    Parsed {
        host: start..host_end,
        port: None,
        uri,
        unix: true,
    }
}

/// The host and port of an implicit upstream's name (`host`, `host:port`, `[v6]:port`; no port is 80).
fn host_port(name: &str) -> (&str, u16) {
    match name.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => match p.parse() {
            Ok(port) => (h, port),
            Err(_) => (name, 80),
        },
        _ => (name, 80),
    }
}

impl VarPass {
    /// The plan of a location whose `proxy_pass` URL is `url`, with a candidate for every upstream of the block
    /// (`confs`, `plans` in the same order).
    pub fn new(
        loc: &Location,
        url: KeyTemplate,
        confs: &[UpstreamConf],
        plans: &[UpstreamPlan],
        tokens: ServerTokens,
        headers: &HeadersPlan,
    ) -> VarPass {
        let candidates = confs
            .iter()
            .zip(plans)
            .enumerate()
            .map(|(i, (conf, plan))| {
                let (host, port) = if conf.implicit {
                    let (h, p) = host_port(&conf.name);
                    (h, Some(p))
                } else {
                    (conf.name.as_str(), None)
                };
                Candidate {
                    host: host.to_ascii_lowercase(),
                    port,
                    plan: ProxyPlan::new(loc, i, &plan.name, None),
                }
            })
            .collect();
        VarPass {
            url,
            candidates,
            resolved: ProxyPlan::for_resolved(loc),
            has_resolver: loc.proxy.resolver.is_some(),
            bad_gateway: FixedAnswer::error(502, tokens).with_headers(headers.clone()),
            internal_error: FixedAnswer::error(500, tokens).with_headers(headers.clone()),
        }
    }

    /// The pass with the location's error pages on each candidate's plan.
    pub fn with_error_pages(mut self, pages: &Option<std::sync::Arc<super::error_pages::ErrorPagesPlan>>) -> VarPass {
        for c in &mut self.candidates {
            c.plan.error_pages = pages.clone();
        }
        self.resolved.error_pages = pages.clone();
        self
    }

    /// The plans with the location's `error_log` lines.
    pub fn with_errors(mut self, errors: &Option<std::sync::Arc<crate::log::ErrorLogs>>) -> VarPass {
        for c in &mut self.candidates {
            c.plan.errors = errors.clone();
        }
        self.resolved.errors = errors.clone();
        self
    }

    /// The plans with the location's charset plan.
    pub fn with_charset(mut self, charset: &Option<std::sync::Arc<super::charset::CharsetPlan>>) -> VarPass {
        for c in &mut self.candidates {
            c.plan.charset = charset.clone();
        }
        self.resolved.charset = charset.clone();
        self
    }

    /// Evaluates the URL into `url` and finds its upstream.
    pub fn pick<'s>(&'s self, vars: &dyn VarSource, url: &mut Vec<u8>) -> Picked<'s> {
        self.url.eval_into(vars, url);
        match self.find(url) {
            Ok(Found::Upstream(plan, uri)) => Picked::Plan { plan, uri },
            Ok(Found::Host(target, uri)) => Picked::Resolve {
                plan: &self.resolved,
                target,
                uri,
            },
            Err(why) => {
                let answer = match why {
                    Miss::Prefix | Miss::Port => &self.internal_error,
                    Miss::NoResolver(_) | Miss::Https => &self.bad_gateway,
                };
                Picked::Fail { answer, why }
            }
        }
    }

    fn find(&self, url: &mut Vec<u8>) -> Result<Found<'_>, Miss> {
        let parsed = parse(url)?;
        let host = url.get(parsed.host.clone()).unwrap_or_default();
        let found = self.candidates.iter().find(|c| {
            c.host.as_bytes() == host
                && match (c.port, parsed.port) {
                    (None, given) => given.is_none(),
                    (Some(p), given) => p == given.unwrap_or(80),
                }
        });
        match found {
            Some(c) => Ok(Found::Upstream(&c.plan, parsed.uri)),
            None => {
                let t = target(url, &parsed);
                if t.addr.is_none() && t.unix.is_none() && !self.has_resolver {
                    return Err(Miss::NoResolver(parsed.host));
                }
                Ok(Found::Host(t, parsed.uri))
            }
        }
    }
}

/// What [`VarPass::find`] found for a URL.
enum Found<'s> {
    Upstream(&'s ProxyPlan, Option<Range<usize>>),
    Host(Target, Option<Range<usize>>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Result<(String, Option<u16>, Option<String>), Miss> {
        let mut b = url.as_bytes().to_vec();
        let p = parse(&mut b)?;
        let s = |r: Range<usize>| String::from_utf8(b.get(r).unwrap().to_vec()).unwrap();
        Ok((s(p.host.clone()), p.port, p.uri.clone().map(s)))
    }

    #[test]
    fn targets_of_hosts_that_are_no_upstream() {
        let t = |url: &str| {
            let mut b = url.as_bytes().to_vec();
            let t = target_of(&mut b).unwrap();
            let s = |r: Range<usize>| String::from_utf8(b.get(r).unwrap().to_vec()).unwrap();
            (s(t.host.clone()), s(t.proxy_host.clone()), t.port, t.addr)
        };
        assert_eq!(
            t("http://LocalHost:8081/x"),
            ("localhost".into(), "localhost:8081".into(), 8081, None)
        );
        assert_eq!(t("http://h:80/x"), ("h".into(), "h".into(), 80, None));
        assert_eq!(t("http://h"), ("h".into(), "h".into(), 80, None));
        assert_eq!(
            t("http://127.0.0.1:81"),
            (
                "127.0.0.1".into(),
                "127.0.0.1:81".into(),
                81,
                Some("127.0.0.1".parse().unwrap())
            )
        );
        assert_eq!(
            t("http://[::1]:82/"),
            ("[::1]".into(), "[::1]:82".into(), 82, Some("::1".parse().unwrap()))
        );
    }

    #[test]
    fn resolved_upstream_is_round_robin_from_a_rotated_start() {
        let addrs: Vec<std::net::IpAddr> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let up = resolved_upstream("h:81", &addrs, 81, 4).unwrap();
        let got: Vec<String> = up.primary.peers.iter().map(|p| p.addr.to_string()).collect();
        assert_eq!(got, ["10.0.0.2:81", "10.0.0.3:81", "10.0.0.1:81"]);
        assert!(up
            .primary
            .peers
            .iter()
            .all(|p| p.weight == 1 && p.max_fails == 1 && p.fail_timeout == 10));
        assert_eq!(up.name, "h:81");
        assert!(resolved_upstream("h", &[], 80, 0).is_none());
    }

    #[test]
    fn implicit_names() {
        assert_eq!(host_port("127.0.0.1:8081"), ("127.0.0.1", 8081));
        assert_eq!(host_port("backend"), ("backend", 80));
        assert_eq!(host_port("[::1]"), ("[::1]", 80));
        assert_eq!(host_port("[::1]:81"), ("[::1]", 81));
    }

    #[test]
    fn unix_urls_as_nginx_reads_them() {
        // the path keeps its case and ends at the first `:`, after which comes the URI
        assert_eq!(
            parsed("http://unix:/Tmp/S.sock:/a?b"),
            Ok(("unix:/Tmp/S.sock".into(), None, Some("/a?b".into())))
        );
        assert_eq!(
            parsed("http://unix:/tmp/s.sock"),
            Ok(("unix:/tmp/s.sock".into(), None, None))
        );
        assert_eq!(
            parsed("http://unix:/tmp/s.sock:"),
            Ok(("unix:/tmp/s.sock".into(), None, None))
        );
        let mut b = b"http://unix:/tmp/var-pass.sock:/x".to_vec();
        let t = target_of(&mut b).unwrap();
        assert_eq!(proxy_host_text(&b, &t.proxy_host), "localhost");
        let token = t.unix.unwrap();
        assert_eq!(crate::config::unix_addr::to_text(&token), "unix:/tmp/var-pass.sock");
        let plan = unix_upstream("localhost", token).unwrap();
        assert_eq!(plan.primary.len(), 1);
    }

    #[test]
    fn urls_as_nginx_reads_them() {
        assert_eq!(parsed("http://U_Lim"), Ok(("u_lim".into(), None, None)));
        assert_eq!(
            parsed("http://127.0.0.1:8081/a?b"),
            Ok(("127.0.0.1".into(), Some(8081), Some("/a?b".into())))
        );
        assert_eq!(parsed("HTTP://h?x=1"), Ok(("h".into(), None, Some("/?x=1".into()))));
        assert_eq!(
            parsed("http://[::1]:81/"),
            Ok(("[::1]".into(), Some(81), Some("/".into())))
        );
        assert_eq!(parsed("http://[::1]"), Ok(("[::1]".into(), None, None)));
        assert_eq!(parsed("http://h:x/"), Err(Miss::Port));
        assert_eq!(parsed("http://h:0"), Err(Miss::Port));
        assert_eq!(parsed("http://"), Err(Miss::Prefix));
        assert_eq!(parsed("ftp://h"), Err(Miss::Prefix));
        assert_eq!(parsed("https://h"), Err(Miss::Https));
    }
}
