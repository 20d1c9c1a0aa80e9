//! `proxy_pass` with variables (`ngx_http_proxy_eval`, `ngx_http_upstream_init_request`): the URL is evaluated per
//! request, its host (and port) looked up among the http block's upstreams, `upstream` blocks by name (matched
//! only without a port) and the implicit ones of other `proxy_pass` lines by `host:port`. Every candidate's proxy
//! plan (its `Host` line, headers) is built at load, so a request only evaluates the URL into a reused buffer and
//! scans a short table. A name that is no upstream needs a resolver: with none, nginx's 502 and its message.

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
    /// Nowhere: this answer, for this reason (the caller logs it).
    Fail { answer: &'s FixedAnswer, why: Miss },
}

/// Why an evaluated URL leads to no upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// Not `http://...`: nginx's 500.
    Prefix,
    /// A port that is not a number (or 0): nginx's 500.
    Port,
    /// A host that is no upstream (its range in the URL): nginx needs a resolver, corelb has none (502).
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
    })
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
            bad_gateway: FixedAnswer::error(502, tokens).with_headers(headers.clone()),
            internal_error: FixedAnswer::error(500, tokens).with_headers(headers.clone()),
        }
    }

    /// The pass with the location's error pages on each candidate's plan.
    pub fn with_error_pages(mut self, pages: &Option<std::sync::Arc<super::error_pages::ErrorPagesPlan>>) -> VarPass {
        for c in &mut self.candidates {
            c.plan.error_pages = pages.clone();
        }
        self
    }

    /// Evaluates the URL into `url` and finds its upstream.
    pub fn pick<'s>(&'s self, vars: &dyn VarSource, url: &mut Vec<u8>) -> Picked<'s> {
        self.url.eval_into(vars, url);
        match self.find(url) {
            Ok((plan, uri)) => Picked::Plan { plan, uri },
            Err(why) => {
                let answer = match why {
                    Miss::Prefix | Miss::Port => &self.internal_error,
                    Miss::NoResolver(_) | Miss::Https => &self.bad_gateway,
                };
                Picked::Fail { answer, why }
            }
        }
    }

    fn find(&self, url: &mut Vec<u8>) -> Result<(&ProxyPlan, Option<Range<usize>>), Miss> {
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
            Some(c) => Ok((&c.plan, parsed.uri)),
            None => Err(Miss::NoResolver(parsed.host)),
        }
    }
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
    fn implicit_names() {
        assert_eq!(host_port("127.0.0.1:8081"), ("127.0.0.1", 8081));
        assert_eq!(host_port("backend"), ("backend", 80));
        assert_eq!(host_port("[::1]"), ("[::1]", 80));
        assert_eq!(host_port("[::1]:81"), ("[::1]", 81));
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
