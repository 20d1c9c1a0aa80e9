//! What a location does, compiled at load: a fixed answer with its head pre-rendered, or a proxy plan with the
//! upstream request's static header lines pre-rendered and the per-request ones kept as templates.

use super::error_pages::ErrorPagesPlan;
use super::headers::HeadersPlan;
use super::proxied::ResponsePlan;
use super::return_text::ReturnText;
use crate::config::headers::ServerTokens;
use crate::config::key::{KeyTemplate, VarSource};
use crate::config::model::{AdminEndpoint, ClientConf, HttpProxyConf, Location, LocationMatch, Return};
use crate::http::keepalive::Connection;
use crate::http::pages::{append_decimal, append_error_page, has_error_page, reason, sent_status, server_name};
use crate::http::request::RequestHead;
use crate::http::uri::append_escaped;
use crate::http::{BodyFraming, REQUEST_HOP_BY_HOP};
use std::sync::Arc;

/// A compiled `location`.
#[derive(Debug)]
pub struct LocationPlan {
    /// `return`.
    pub fixed: Option<FixedAnswer>,
    /// `api` or `metrics` (when no `return`).
    pub admin: Option<AdminEndpoint>,
    pub proxy: Option<ProxyPlan>,
    /// `proxy_pass` with variables: the upstream is found per request (then `proxy` is `None`).
    pub var_proxy: Option<Box<super::var_pass::VarPass>>,
    /// A value reads `$request_body`: the body is read into the client buffer before the values are evaluated.
    pub body_var: bool,
    /// `if`/`break`/`return` after the first rewrite directive (run before the handler; none with `return` first).
    pub script: Option<super::rewrite::Script>,
    /// What the location serves from files when it has none of the three above (nginx's static module).
    pub files: super::files::FilesPlan,
    pub client: ClientConf,
    /// Index into the snapshot's access log sets (0 = nothing logged).
    pub log_set: usize,
    /// `add_header`, `expires`, `server_tokens` of the location's answers.
    pub headers: HeadersPlan,
    /// `set_real_ip_from` and the rest, where some level trusts an address (nginx's preaccess phase).
    pub realip: Option<super::realip::RealIpPlan>,
    /// `allow`/`deny` (`None`: no rules, nothing to check per request).
    pub access: Option<Box<super::access::AccessPlan>>,
    /// `limit_req`/`limit_conn` (`None`: none, nothing to check per request).
    pub limits: Option<Box<super::limits::LimitPlan>>,
    /// `gzip`/`gzip_static` (`None`: off, nothing to check per request).
    pub gzip: Option<super::gzip::GzipPlan>,
    /// The charset filter (`None`: nothing to change, nothing to check per request).
    pub charset: Option<Arc<super::charset::CharsetPlan>>,
    /// `error_page` lines (`None`: the location has none).
    pub error_pages: Option<Arc<ErrorPagesPlan>>,
}

/// A fixed answer with its head pre-rendered around the two parts that change (`Date`, `Connection`).
#[derive(Debug, Clone)]
pub struct FixedAnswer {
    pub status: u16,
    /// nginx answers it as a special response (a `return CODE` of 400 or more without text, or a redirect), where
    /// `error_page` applies.
    pub special: bool,
    /// Status line, `Server`, and `Date: ` (the date follows).
    head_start: Vec<u8>,
    /// `\r\n` ending the date, then `Content-Type`, `Content-Length`, `Location`.
    head_mid: Vec<u8>,
    body: Vec<u8>,
    /// A `return` text with variables: evaluated per request.
    pub text: Option<ReturnText>,
    /// The `add_header` and `expires` of the location (or server) answering with it.
    pub headers: HeadersPlan,
}

impl FixedAnswer {
    /// The answer of `return CODE [TEXT]`: a text body (`text/plain`), a redirect (`Location`) with nginx's page,
    /// or nginx's error page when no text is given; `Server` and the page footer as `tokens` says.
    pub fn of_return(r: &Return, tokens: ServerTokens) -> FixedAnswer {
        Self::build(r, None, tokens)
    }

    /// The answer of a `return` whose text has variables (`text`, compiled): the text or `Location` is evaluated
    /// per request ([`FixedAnswer::eval_text`]) and written by [`FixedAnswer::write_text`].
    pub fn of_return_text(r: &Return, text: KeyTemplate, tokens: ServerTokens) -> FixedAnswer {
        Self::build(r, Some(text), tokens)
    }

    fn build(r: &Return, dynamic: Option<KeyTemplate>, tokens: ServerTokens) -> FixedAnswer {
        let redirect = matches!(r.code, 301 | 302 | 303 | 307 | 308);
        // a `Location` starting with `/` is completed per request, unless `absolute_redirect off` (see
        // [`FixedAnswer::eval_text`])
        let dynamic = dynamic.or_else(|| {
            r.text
                .as_deref()
                .filter(|t| redirect && t.starts_with('/'))
                .map(KeyTemplate::literal)
        });
        let mut body = Vec::new();
        let mut content_type: &[u8] = b"text/plain";
        match &r.text {
            Some(_) if dynamic.is_some() && !redirect => {}
            Some(t) if !redirect => body.extend_from_slice(t.as_bytes()),
            _ if has_error_page(r.code) => {
                append_error_page(r.code, server_name(tokens), &mut body);
                content_type = b"text/html";
            }
            _ => {}
        }
        let dynamic_body = dynamic.is_some() && !redirect;
        let mut head_start = Vec::new();
        head_start.extend_from_slice(b"HTTP/1.1 ");
        append_decimal(&mut head_start, u64::from(sent_status(r.code)));
        head_start.push(b' ');
        head_start.extend_from_slice(reason(sent_status(r.code)).as_bytes());
        head_start.extend_from_slice(b"\r\nServer: ");
        head_start.extend_from_slice(server_name(tokens).as_bytes());
        head_start.extend_from_slice(b"\r\nDate: ");
        let mut head_mid = b"\r\n".to_vec();
        // nginx's `ngx_http_send_response` types a non-error answer even when its text is empty (`return 200;`),
        // and its header filter drops the type of a 204
        let typed = r.code < 400 && r.code != 204 && !redirect && !dynamic_body;
        if !body.is_empty() || typed {
            head_mid.extend_from_slice(b"Content-Type: ");
            head_mid.extend_from_slice(content_type);
            head_mid.extend_from_slice(b"\r\n");
        }
        if r.code != 204 && r.code != 304 && !dynamic_body {
            head_mid.extend_from_slice(b"Content-Length: ");
            append_decimal(&mut head_mid, body.len() as u64);
            head_mid.extend_from_slice(b"\r\n");
        }
        if let (true, Some(t), None) = (redirect, &r.text, &dynamic) {
            head_mid.extend_from_slice(b"Location: ");
            head_mid.extend_from_slice(t.as_bytes());
            head_mid.extend_from_slice(b"\r\n");
        }
        FixedAnswer {
            status: r.code,
            special: redirect || (r.code >= 400 && r.text.is_none()),
            head_start,
            head_mid,
            body,
            text: dynamic.map(|template| ReturnText { template, redirect }),
            headers: HeadersPlan::default(),
        }
    }

    /// The answer with the headers of the location (or server) answering with it.
    pub fn with_headers(mut self, headers: HeadersPlan) -> FixedAnswer {
        self.headers = headers;
        self
    }

    /// nginx's error page for `code` as a fixed answer.
    pub fn error(code: u16, tokens: ServerTokens) -> FixedAnswer {
        Self::of_return(&Return { code, text: None }, tokens)
    }

    /// The body's length (what `write` adds after the head, unless `head_request`).
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Appends the whole answer to `out` (no body for a HEAD request).
    pub fn write(&self, date: &[u8], keepalive: Connection, head_request: bool, out: &mut Vec<u8>) {
        self.write_with(date, None, b"", keepalive, head_request, out);
    }

    /// [`FixedAnswer::write`] with a `Location` made per request (a redirecting `rewrite`'s).
    pub fn write_located(
        &self,
        date: &[u8],
        location: Option<&[u8]>,
        keepalive: Connection,
        head_request: bool,
        out: &mut Vec<u8>,
    ) {
        self.write_with(date, location, b"", keepalive, head_request, out);
    }

    /// [`FixedAnswer::write`] of an answer whose `return` text has variables, with `text` evaluated for this
    /// request (ignored by an answer without variables).
    pub fn write_text(&self, text: &[u8], date: &[u8], keepalive: Connection, head_request: bool, out: &mut Vec<u8>) {
        self.write_with(date, None, text, keepalive, head_request, out);
    }

    fn write_with(
        &self,
        date: &[u8],
        location: Option<&[u8]>,
        text: &[u8],
        keepalive: Connection,
        head_request: bool,
        out: &mut Vec<u8>,
    ) {
        self.write_head_with(date, location, text, keepalive, out);
        out.extend_from_slice(b"\r\n");
        self.write_body_with(head_request, text, out);
    }

    /// Appends the head up to its `Connection` line, without the blank line that ends it (the location's added
    /// headers follow, where nginx writes them).
    pub fn write_head(&self, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        self.write_head_with(date, None, b"", keepalive, out);
    }

    /// [`FixedAnswer::write_head`] with a `Location` made per request.
    pub fn write_head_located(&self, date: &[u8], location: Option<&[u8]>, keepalive: Connection, out: &mut Vec<u8>) {
        self.write_head_with(date, location, b"", keepalive, out);
    }

    /// [`FixedAnswer::write_head`] of an answer whose `return` text has variables (`text`, evaluated).
    pub fn write_head_text(&self, date: &[u8], text: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        self.write_head_with(date, None, text, keepalive, out);
    }

    fn write_head_with(
        &self,
        date: &[u8],
        location: Option<&[u8]>,
        text: &[u8],
        keepalive: Connection,
        out: &mut Vec<u8>,
    ) {
        out.extend_from_slice(&self.head_start);
        out.extend_from_slice(date);
        out.extend_from_slice(&self.head_mid);
        if let Some(l) = location {
            push_line(out, "Location", l);
        }
        if let Some(t) = &self.text {
            t.write_head(self.status, text, out);
        }
        keepalive.write(out);
    }

    /// Appends the body (nothing for a HEAD request).
    pub fn write_body(&self, head_request: bool, out: &mut Vec<u8>) {
        self.write_body_with(head_request, b"", out);
    }

    /// [`FixedAnswer::write_body`] of an answer whose `return` text has variables (`text`, evaluated).
    pub fn write_body_with(&self, head_request: bool, text: &[u8], out: &mut Vec<u8>) {
        if !head_request {
            match &self.text {
                Some(t) if !t.redirect => out.extend_from_slice(text),
                _ => out.extend_from_slice(&self.body),
            }
        }
    }
}

/// Which target the upstream request line carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The client's (or the location part replaced by `proxy_pass`'s URI).
    AsSent,
    /// A `rewrite` replaced the URI: it is sent escaped, with the request's arguments. `searched`: the location
    /// was found for the new URI (nginx's `valid_location`), so `proxy_pass`'s URI part replaces its prefix;
    /// after `rewrite ... break` the whole new URI is sent.
    Rewritten { searched: bool },
    /// `proxy_pass` with variables gave a URI: it is sent as is (the `uri` argument), without the request's
    /// arguments.
    Given,
}

/// [`ProxyPlan::upstream`] of a plan whose peers are a URL host's addresses ([`ProxyPlan::for_resolved`]).
pub const RESOLVED: usize = usize::MAX;

/// How a location proxies: the upstream and the request head it sends there.
#[derive(Debug)]
pub struct ProxyPlan {
    /// Index into the snapshot's http plans.
    pub upstream: usize,
    pub conf: HttpProxyConf,
    /// Header lines that never change (`Host: upstream`, `Connection: close`, constant `proxy_set_header`s).
    static_headers: Vec<u8>,
    /// `proxy_set_header`s with variables; an empty value drops the line, as nginx does.
    dynamic_headers: Vec<(String, KeyTemplate)>,
    /// Client header names not copied (lower case): hop-by-hop ones and those `proxy_set_header` replaces.
    skip_client: Vec<String>,
    /// Every `skip_client` name is plain ([`crate::http::names::is_plain`]): compared a word at a time.
    skip_plain: bool,
    /// `proxy_pass http://u/uri`: the matched location part of the target is replaced by `uri`.
    uri_rewrite: Option<(usize, String)>,
    /// Whether upstream connections can be kept (HTTP/1.1 and no `Connection: close` sent).
    pub upstream_keepalive: bool,
    /// A `proxy_set_header Content-Length` line: it replaces nginx's own line when no body goes upstream (with a
    /// body, corelb always frames it itself).
    sets_length: bool,
    /// The location's `add_header`, `expires`, `server_tokens`.
    pub headers: HeadersPlan,
    /// What the location changes in upstream responses (hidden and passed headers, `proxy_redirect`).
    pub response: ResponsePlan,
    /// The location's `gzip` (`None`: off).
    pub gzip: Option<super::gzip::GzipPlan>,
    /// The location's charset filter (`None`: nothing to change).
    pub charset: Option<Arc<super::charset::CharsetPlan>>,
    /// The location's `error_log` lines (`None`: the main log).
    pub errors: Option<Arc<crate::log::ErrorLogs>>,
    /// The location's `error_page` lines, for the upstream's errors and intercepted answers.
    pub error_pages: Option<Arc<ErrorPagesPlan>>,
    /// An upstream's `X-Accel-Redirect` is followed (`proxy_ignore_headers X-Accel-Redirect` turns it off).
    pub accel_redirect: bool,
    /// An upstream's `X-Accel-Charset` is read (`proxy_ignore_headers X-Accel-Charset` turns it off).
    pub accel_charset: bool,
    /// An upstream's `X-Accel-Buffering` is read (`proxy_ignore_headers X-Accel-Buffering` turns it off).
    pub accel_buffering: bool,
    /// `proxy_pass https://`: the TLS session each upstream connection opens (`None`: plain).
    pub tls: Option<Arc<crate::tls::client_config::UpstreamTls>>,
}

impl ProxyPlan {
    /// Compiles the proxy settings of `loc` for the upstream `name` at index `upstream`.
    pub fn new(loc: &Location, upstream: usize, name: &str, uri: Option<&str>) -> ProxyPlan {
        let conf = loc.proxy.clone();
        let mut static_headers = Vec::new();
        let mut dynamic_headers = Vec::new();
        let mut skip_client: Vec<String> = REQUEST_HOP_BY_HOP.iter().map(|s| s.to_string()).collect();
        let mut connection_value: Option<String> = None;
        for (field, value) in &conf.set_headers {
            let lower = field.to_ascii_lowercase();
            if lower == "connection" {
                connection_value = Some(value.raw().to_ascii_lowercase());
            }
            if value
                .parts()
                .iter()
                .all(|p| matches!(p, crate::config::key::Part::Text(_)))
            {
                if !value.raw().is_empty() {
                    push_line(&mut static_headers, field, value.raw().as_bytes());
                }
            } else {
                dynamic_headers.push((field.clone(), value.clone()));
            }
            if !skip_client.contains(&lower) {
                skip_client.push(lower);
            }
        }
        let named = |n: &str| conf.set_headers.iter().any(|(f, _)| f.eq_ignore_ascii_case(n));
        if !named("host") {
            push_line(&mut static_headers, "Host", name.as_bytes());
        }
        if !named("connection") {
            push_line(&mut static_headers, "Connection", b"close");
        }
        let sends_close = connection_value.as_deref().is_none_or(|v| v.contains("close"));
        let sets_length = named("content-length");
        let uri_rewrite = uri.map(|u| {
            // (a regex or named location has no URI part: refused at load)
            let matched = match &loc.matcher {
                LocationMatch::Prefix(p) | LocationMatch::Exact(p) | LocationMatch::PrefixNoRegex(p) => p.len(),
                LocationMatch::Regex(_) | LocationMatch::Named(_) => 0,
            };
            (matched, u.to_string())
        });
        ProxyPlan {
            upstream,
            upstream_keepalive: conf.http_version_11 && !sends_close,
            response: ResponsePlan::new(&loc.headers),
            headers: HeadersPlan::new(&loc.headers),
            gzip: super::gzip::GzipPlan::of(&loc.gzip).filter(|g| g.enable),
            conf,
            static_headers,
            dynamic_headers,
            skip_plain: skip_client.iter().all(|n| crate::http::names::is_plain(n)),
            skip_client,
            uri_rewrite,
            sets_length,
            error_pages: None,
            charset: None,
            errors: None,
            accel_redirect: loc.error_pages.accel_redirect,
            accel_charset: loc.error_pages.accel_charset,
            accel_buffering: loc.error_pages.accel_buffering,
            tls: None,
        }
    }

    /// The plan of `loc`'s `proxy_pass` with variables for a host that is no upstream: proxied to the host's
    /// addresses ([`RESOLVED`] stands for the upstream made of them), with `Host: $proxy_host` evaluated per
    /// request, and no kept upstream connections (nginx keeps them only for `upstream` blocks).
    pub fn for_resolved(loc: &Location) -> ProxyPlan {
        let mut plan = ProxyPlan::new(loc, RESOLVED, "", None);
        let empty_host = b"Host: \r\n";
        if let Some(at) = plan
            .static_headers
            .windows(empty_host.len())
            .position(|w| w == empty_host)
        {
            plan.static_headers.drain(at..at + empty_host.len());
            if let Ok(t) = KeyTemplate::compile("$proxy_host") {
                plan.dynamic_headers.insert(0, ("Host".to_string(), t));
            }
        }
        plan.upstream_keepalive = false;
        plan
    }

    /// Whether requests of this plan go to the addresses of a URL's host rather than to an upstream.
    pub fn is_resolved(&self) -> bool {
        self.upstream == RESOLVED
    }

    /// The plan with the TLS side of its upstream connections.
    pub fn with_tls(mut self, tls: Option<Arc<crate::tls::client_config::UpstreamTls>>) -> ProxyPlan {
        self.tls = tls;
        self
    }

    /// The plan with the location's `error_log` lines.
    pub fn with_errors(mut self, errors: Option<Arc<crate::log::ErrorLogs>>) -> ProxyPlan {
        self.errors = errors;
        self
    }

    /// The plan with the location's charset filter.
    pub fn with_charset(mut self, charset: Option<Arc<super::charset::CharsetPlan>>) -> ProxyPlan {
        self.charset = charset;
        self
    }

    /// The plan with the location's error pages.
    pub fn with_error_pages(mut self, pages: Option<Arc<ErrorPagesPlan>>) -> ProxyPlan {
        self.error_pages = pages;
        self
    }

    /// Writes the upstream request head for `req` into `out` (cleared first). `uri` is the normalized path the
    /// location matched ([`RequestHead::uri`]); `scratch` is a reused buffer for evaluating header templates.
    pub fn write_request_head(
        &self,
        req: &RequestHead<'_, '_>,
        uri: &[u8],
        target: Target,
        vars: &dyn VarSource,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) {
        out.clear();
        out.extend_from_slice(req.method.as_bytes());
        out.push(b' ');
        match (&self.uri_rewrite, target) {
            (_, Target::Rewritten { searched }) => {
                let (matched, replacement) = match (&self.uri_rewrite, searched) {
                    (Some((matched, replacement)), true) => (*matched, replacement.as_bytes()),
                    _ => (0, &b""[..]),
                };
                out.extend_from_slice(replacement);
                append_escaped(uri.get(matched..).unwrap_or_default(), out);
                let query = req.query();
                if !query.is_empty() {
                    out.push(b'?');
                    out.extend_from_slice(query.as_bytes());
                }
            }
            (Some((matched, replacement)), Target::AsSent) => {
                // nginx: the replacement, then the rest of the normalized path (escaped again when the client's
                // path had escapes), then the query
                out.extend_from_slice(replacement.as_bytes());
                let rest = uri.get(*matched..).unwrap_or_default();
                let path = req.target.split(['?', '#']).next().unwrap_or_default();
                if path.contains('%') {
                    append_escaped(rest, out);
                } else {
                    out.extend_from_slice(rest);
                }
                let query = req.query();
                if !query.is_empty() {
                    out.push(b'?');
                    out.extend_from_slice(query.as_bytes());
                }
            }
            (None, Target::AsSent) if req.has_empty_path() => {
                // nginx sends the path `/` and the query (its `valid_unparsed_uri` is off)
                out.push(b'/');
                let query = req.query();
                if !query.is_empty() {
                    out.push(b'?');
                    out.extend_from_slice(query.as_bytes());
                }
            }
            (None, Target::AsSent) => out.extend_from_slice(req.target.as_bytes()),
            (_, Target::Given) => out.extend_from_slice(uri),
        }
        out.extend_from_slice(if self.conf.http_version_11 {
            b" HTTP/1.1\r\n"
        } else {
            b" HTTP/1.0\r\n"
        });
        out.extend_from_slice(&self.static_headers);
        for (field, t) in &self.dynamic_headers {
            t.eval_into(vars, scratch);
            if !scratch.is_empty() {
                push_line(out, field, scratch);
            }
        }
        let set_body = self.conf.set_body.as_ref().map(|t| {
            t.eval_into(vars, scratch);
            scratch.len() as u64
        });
        match (set_body, req.body) {
            (None, BodyFraming::Length(_)) if self.sets_length && !self.conf.pass_request_body => {}
            (Some(n), _) | (None, BodyFraming::Length(n)) => {
                // nginx's `$proxy_internal_body_length`: the client's length even with `proxy_pass_request_body
                // off` (its docs pair that with `proxy_set_header Content-Length ""`)
                out.extend_from_slice(b"Content-Length: ");
                append_decimal(out, n);
                out.extend_from_slice(b"\r\n");
            }
            (None, BodyFraming::Chunked) if self.conf.pass_request_body => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n")
            }
            (None, _) => {}
        }
        if self.conf.pass_request_headers {
            for h in req.headers {
                if self
                    .skip_client
                    .iter()
                    .any(|s| crate::http::names::eq_any(h.name, s, self.skip_plain))
                    || req.named_in_connection(h.name)
                {
                    continue;
                }
                push_line(out, h.name, h.value);
            }
        }
        out.extend_from_slice(b"\r\n");
        if set_body.is_some() {
            out.extend_from_slice(scratch);
        }
    }

    /// Whether the client's body goes upstream (else it is read and dropped before the request is sent).
    pub fn passes_client_body(&self) -> bool {
        self.conf.pass_request_body && self.conf.set_body.is_none()
    }
}

fn push_line(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;
    use crate::config::model::Span;
    use crate::http::request::{parse_request, MAX_HEADERS};

    struct Vars;
    impl VarSource for Vars {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            if *var == Var::RemoteAddr {
                out.extend_from_slice(b"10.0.0.1");
            }
        }
    }

    fn location(set: &[(&str, &str)], v11: bool) -> Location {
        Location {
            matcher: LocationMatch::Prefix("/api/".into()),
            parent: None,
            proxy_pass: None,
            ret: None,
            script: Vec::new(),
            admin: None,
            proxy: HttpProxyConf {
                http_version_11: v11,
                set_headers: set
                    .iter()
                    .map(|(f, v)| (f.to_string(), KeyTemplate::compile(v).unwrap()))
                    .collect(),
                ..HttpProxyConf::default()
            },
            client: ClientConf::default(),
            files: Default::default(),
            headers: Default::default(),
            realip: None,
            access: None,
            limits: Default::default(),
            gzip: Default::default(),
            charset: Default::default(),
            error_pages: Default::default(),
            proxy_tls: None,
            span: Span::default(),
        }
    }

    fn head_for(plan: &ProxyPlan, raw: &[u8]) -> String {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let req = parse_request(raw, &mut hs).unwrap().unwrap();
        let (mut scratch, mut out, mut uri) = (Vec::new(), Vec::new(), Vec::new());
        let uri = req.uri(&mut uri).unwrap();
        plan.write_request_head(&req, uri, Target::AsSent, &Vars, &mut scratch, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn default_headers_are_nginx_defaults() {
        let plan = ProxyPlan::new(&location(&[], false), 0, "backend", None);
        let raw = b"POST /api/x?y HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(
            head_for(&plan, raw),
            "POST /api/x?y HTTP/1.0\r\nHost: backend\r\nConnection: close\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n"
        );
        assert!(!plan.upstream_keepalive);
        // an absolute target without a path: nginx sends `/` and the arguments, without the fragment
        let raw = b"GET http://a?x=1#f HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(
            head_for(&plan, raw),
            "GET /?x=1 HTTP/1.0\r\nHost: backend\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn set_headers_replace_and_drop() {
        let set = [
            ("Connection", ""),
            ("X-Forwarded-For", "$remote_addr"),
            ("X-A", "fixed"),
        ];
        let plan = ProxyPlan::new(&location(&set, true), 0, "backend", Some("/v2/"));
        let raw = b"GET /api/x HTTP/1.1\r\nHost: a\r\nX-A: client\r\nX-Forwarded-For: spoofed\r\n\r\n";
        assert_eq!(
            head_for(&plan, raw),
            "GET /v2/x HTTP/1.1\r\nX-A: fixed\r\nHost: backend\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n"
        );
        assert!(plan.upstream_keepalive);
    }

    /// `proxy_pass http://u/v2/` in `location /api/`: nginx replaces the prefix of the normalized path, escapes
    /// the rest again when the client's path had escapes, and appends the query (checked against nginx 1.22.1).
    #[test]
    fn uri_replacement_uses_the_normalized_path() {
        let plan = ProxyPlan::new(&location(&[], true), 0, "backend", Some("/v2/"));
        for (target, sent) in [
            ("/api/x/../y%20z?q=1", "/v2/y%20z?q=1"),
            ("/api//x", "/v2/x"),
            ("/api/x#f?y", "/v2/x"),
            ("/api/a?", "/v2/a"),
            ("/api/a%25b", "/v2/a%25b"),
            ("/api/caf%C3%A9", "/v2/caf%C3%A9"),
            ("/api/a+b?%41", "/v2/a+b?%41"),
            ("/x/../api/%61", "/v2/a"),
        ] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            let head = head_for(&plan, raw.as_bytes());
            assert!(
                head.starts_with(&format!("GET {sent} HTTP/1.1\r\n")),
                "{target}: {head}"
            );
        }
        let raw = b"GET /api//x/../y?z HTTP/1.1\r\nHost: a\r\n\r\n";
        let plan = ProxyPlan::new(&location(&[], true), 0, "backend", None);
        assert!(
            head_for(&plan, raw).starts_with("GET /api//x/../y?z HTTP/1.1\r\n"),
            "sent as is"
        );
    }

    /// nginx's `$proxy_internal_body_length`: with `proxy_pass_request_body off` the client's length still goes,
    /// unless a `proxy_set_header Content-Length` replaces it; `proxy_set_body` sends its own body and length.
    #[test]
    fn request_body_settings() {
        let raw = b"POST /api/x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nContent-Length: 5\r\n\r\n";
        let mut loc = location(&[], true);
        loc.proxy.pass_request_body = false;
        let plan = ProxyPlan::new(&loc, 0, "b", None);
        assert!(!plan.passes_client_body());
        assert_eq!(
            head_for(&plan, raw),
            "POST /api/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\nContent-Length: 5\r\nX-A: 1\r\n\r\n"
        );
        let mut loc = location(&[("Content-Length", "")], true);
        loc.proxy.pass_request_body = false;
        loc.proxy.pass_request_headers = false;
        let plan = ProxyPlan::new(&loc, 0, "b", None);
        assert_eq!(
            head_for(&plan, raw),
            "POST /api/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
        );
        let mut loc = location(&[], true);
        loc.proxy.set_body = Some(KeyTemplate::compile("ip=$remote_addr").unwrap());
        let plan = ProxyPlan::new(&loc, 0, "b", None);
        assert!(!plan.passes_client_body());
        assert_eq!(
            head_for(&plan, raw),
            "POST /api/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\nContent-Length: 11\r\nX-A: 1\r\n\r\nip=10.0.0.1"
        );
        assert!(ProxyPlan::new(&location(&[], true), 0, "b", None).passes_client_body());
    }

    #[test]
    fn fixed_answers() {
        let mut out = Vec::new();
        FixedAnswer::of_return(
            &Return {
                code: 200,
                text: Some("hi".into()),
            },
            ServerTokens::Off,
        )
        .write(b"D", Connection::KEEP, false, &mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\
             Connection: keep-alive\r\n\r\nhi"
        );
        // `return 200;` is typed as nginx types it (an empty body), a 204 is not
        for (code, typed) in [(200, true), (204, false)] {
            out.clear();
            FixedAnswer::of_return(&Return { code, text: None }, ServerTokens::Off).write(
                b"D",
                Connection::KEEP,
                false,
                &mut out,
            );
            let head = String::from_utf8(out.clone()).unwrap();
            assert_eq!(head.contains("Content-Type: text/plain\r\n"), typed, "{head}");
        }
        out.clear();
        FixedAnswer::of_return(
            &Return {
                code: 302,
                text: Some("http://x/".into()),
            },
            ServerTokens::On,
        )
        .write(b"D", Connection::CLOSE, true, &mut out);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(s.starts_with("HTTP/1.1 302 Moved Temporarily\r\n") && s.contains("Location: http://x/\r\n"));
        assert!(s.ends_with("Connection: close\r\n\r\n"));
        out.clear();
        FixedAnswer::error(502, ServerTokens::Off).write(b"D", Connection::CLOSE, false, &mut out);
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("<hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"));
    }
}
