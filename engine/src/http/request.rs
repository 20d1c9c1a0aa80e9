//! Client request heads: parsed with httparse over the connection's reused buffer, checked as nginx checks them
//! (framing, duplicate or conflicting lengths, `Host`, method and version; a bare LF ends a line, as in nginx),
//! reduced to the facts the proxy needs. Line and head sizes are nginx's buffers'
//! business ([`super::head_buffers`]); the path nginx matches locations against is [`RequestHead::uri`].

use super::names::eq_plain;
use super::uri::{needs_normalizing, normalize};
use super::{has_token, parse_content_length, BodyFraming, Rejection};
use httparse::{Header, ParserConfig, Status};

/// Header lines read per request at most (more is a 400, as a too-large head).
pub const MAX_HEADERS: usize = 100;

/// A parsed, checked request head; borrows the connection buffer and the header array.
#[derive(Debug)]
pub struct RequestHead<'h, 'b> {
    pub method: &'b str,
    /// The request target as the client sent it (origin form, or the path of an absolute form).
    pub target: &'b str,
    pub version_11: bool,
    pub headers: &'h [Header<'b>],
    /// Bytes of the head, request line to the empty line included.
    pub head_len: usize,
    pub body: BodyFraming,
    /// Whether the client wants the connection kept after this request.
    pub keepalive: bool,
    /// The `Host` header, or the authority of an absolute-form target, port stripped.
    pub host: Option<&'b [u8]>,
    /// `Expect: 100-continue` on an HTTP/1.1 request: the client waits for a `100 Continue` before its body.
    pub expect_continue: bool,
    /// The value of the `Connection` header: the header names it lists are hop-by-hop too.
    pub connection: Option<&'b [u8]>,
    /// An `Upgrade` header came (nginx's `r->headers_in.upgrade`): a `101` from the upstream opens a tunnel.
    pub upgrade: bool,
}

impl RequestHead<'_, '_> {
    /// The value of the first header called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// Whether the head has a header line a file's answer depends on beyond its path: `If-*` or `Range`.
    pub fn has_conditions(&self) -> bool {
        self.headers.iter().any(|h| {
            let n = h.name.as_bytes();
            n.get(..3).is_some_and(|p| p.eq_ignore_ascii_case(b"if-")) || n.eq_ignore_ascii_case(b"range")
        })
    }

    /// Whether the method is one nginx never retries once sent (POST, LOCK, PATCH).
    pub fn non_idempotent(&self) -> bool {
        matches!(self.method, "POST" | "LOCK" | "PATCH")
    }

    /// The path part of the target (before `?`).
    pub fn path(&self) -> &str {
        match self.query_at() {
            Some(q) => self.target.get(..q).unwrap_or(self.target),
            None => self.target,
        }
    }

    /// The query part of the target (after `?`), if any.
    pub fn args(&self) -> Option<&str> {
        self.target.get(self.query_at()? + 1..)
    }

    /// Where the `?` is (a plain loop: targets are short, and most have none).
    fn query_at(&self) -> Option<usize> {
        self.target.bytes().position(|c| c == b'?')
    }

    /// The path as nginx matches locations against it (its `$uri`): `%XX` decoded, slashes merged, dot segments
    /// resolved, no query. A path that needs none of that is returned as it is; any other is normalized into
    /// `buf`. A `..` above the root or a bad escape is nginx's 400.
    pub fn uri<'a>(&'a self, buf: &'a mut Vec<u8>) -> Result<&'a [u8], Rejection> {
        let target = self.target.as_bytes();
        if self.has_empty_path() {
            return Ok(b"/");
        }
        if !needs_normalizing(target) {
            return Ok(self.path().as_bytes());
        }
        normalize(target, buf).map_err(|_| Rejection::bad("invalid request target"))?;
        Ok(buf)
    }

    /// Whether the target is an absolute-form one without a path (`http://host?args`): only its query (and
    /// fragment) are kept, and its path is `/` (nginx's `empty_path_in_uri`).
    pub fn has_empty_path(&self) -> bool {
        self.target.starts_with('?')
    }

    /// The query as nginx's `$args` (after the first `?`, up to a `#`; none when a `#` comes first).
    pub fn query(&self) -> &str {
        let t = self.target;
        match t.find(['?', '#']) {
            Some(i) if t.as_bytes().get(i) == Some(&b'?') => {
                let rest = t.get(i + 1..).unwrap_or("");
                rest.split('#').next().unwrap_or("")
            }
            _ => "",
        }
    }

    /// Whether the client's `Connection` header names `name`: such a header is for the hop to the proxy only.
    pub fn named_in_connection(&self, name: &str) -> bool {
        self.connection.is_some_and(|v| has_token(v, name.as_bytes()))
    }
}

/// What the header lines say about framing, host and keep-alive.
#[derive(Default)]
struct HeaderFacts<'b> {
    host: Option<&'b [u8]>,
    length: Option<u64>,
    chunked: bool,
    close: Option<bool>,
    expect_continue: bool,
    connection: Option<&'b [u8]>,
    upgrade: bool,
}

/// Parses `buf` as a request head. `Ok(None)`: more bytes needed.
pub fn parse_request<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
) -> Result<Option<RequestHead<'h, 'b>>, Rejection> {
    let mut req = httparse::Request::new(headers);
    let parsed = parser().parse_request(&mut req, buf);
    request_head(buf, req, parsed)
}

/// [`parse_request`] into header slots not written before (the hot path's: the 100 slots, 3.2 KiB, are not zeroed
/// for each request).
pub fn parse_request_uninit<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [std::mem::MaybeUninit<Header<'b>>],
) -> Result<Option<RequestHead<'h, 'b>>, Rejection> {
    let mut req = httparse::Request::new(&mut []);
    let parsed = parser().parse_request_with_uninit_headers(&mut req, buf, headers);
    request_head(buf, req, parsed)
}

/// httparse's request parser as nginx's reads request lines.
fn parser() -> ParserConfig {
    let mut config = ParserConfig::default();
    config.allow_multiple_spaces_in_request_line_delimiters(true);
    config
}

/// The head in `buf` that httparse parsed into `req` (`parsed`), checked.
fn request_head<'h, 'b>(
    buf: &'b [u8],
    req: httparse::Request<'h, 'b>,
    parsed: httparse::Result<usize>,
) -> Result<Option<RequestHead<'h, 'b>>, Rejection> {
    let head_len = match parsed {
        Ok(Status::Complete(n)) => n,
        // nginx's parser refuses a method byte as it comes, without waiting for the rest of the line
        Ok(Status::Partial) if !method_so_far_ok(buf) => return Err(Rejection::bad("invalid method")),
        Ok(Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Rejection::bad("too many header lines")),
        Err(httparse::Error::Version) => return Err(version_rejection(buf)),
        Err(_) => return Err(Rejection::bad("invalid request head")),
    };
    let (Some(method), Some(raw_target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Rejection::bad("incomplete request line"));
    };
    if !method.bytes().all(|c| c.is_ascii_uppercase() || c == b'_' || c == b'-') {
        return Err(Rejection::bad("invalid method"));
    }
    let headers: &'h [Header<'b>] = req.headers;
    let version_11 = version == 1;
    if method == "CONNECT" && !is_authority_form(raw_target) {
        // nginx's request-line parser: CONNECT takes `host:port` only
        return Err(Rejection::bad("invalid CONNECT target"));
    }
    let (target, target_host) = if method == "CONNECT" {
        (raw_target, None)
    } else {
        split_target(raw_target)?
    };
    let facts = header_facts(headers, version_11)?;
    let body = match (facts.length, facts.chunked) {
        (Some(_), true) => return Err(Rejection::bad("both Content-Length and Transfer-Encoding")),
        (_, true) if !version_11 => return Err(Rejection::bad("Transfer-Encoding in an HTTP/1.0 request")),
        (Some(0), false) | (None, false) => BodyFraming::None,
        (Some(n), false) => BodyFraming::Length(n),
        (None, true) => BodyFraming::Chunked,
    };
    if version_11 && facts.host.is_none() {
        return Err(Rejection::bad("missing Host header"));
    }
    let host = match target_host.or(facts.host) {
        Some(h) => Some(strip_port(h)?),
        None => None,
    };
    // nginx's `ngx_http_process_request_header`, once the head is read: no CONNECT tunnels, no TRACE
    if method == "CONNECT" {
        return Err(Rejection::new(405, "CONNECT method"));
    }
    if method == "TRACE" {
        return Err(Rejection::new(405, "TRACE method"));
    }
    Ok(Some(RequestHead {
        method,
        target,
        version_11,
        headers,
        head_len,
        body,
        keepalive: !facts.close.unwrap_or(!version_11),
        host,
        expect_continue: facts.expect_continue,
        connection: facts.connection,
        upgrade: facts.upgrade,
    }))
}

/// Whether the bytes of a partial head start with what may be a method (after the empty lines nginx skips):
/// upper-case letters, `_` and `-` up to the first space.
fn method_so_far_ok(buf: &[u8]) -> bool {
    let start = buf.iter().position(|&c| c != b'\r' && c != b'\n').unwrap_or(buf.len());
    buf[start..]
        .iter()
        .take_while(|&&c| c != b' ')
        .all(|&c| c.is_ascii_uppercase() || c == b'_' || c == b'-')
}

/// Reads the header lines that matter to framing and routing, refusing what nginx refuses.
fn header_facts<'b>(headers: &[Header<'b>], version_11: bool) -> Result<HeaderFacts<'b>, Rejection> {
    let mut f = HeaderFacts::default();
    for h in headers {
        let name = h.name;
        if eq_plain(name, "host") {
            if f.host.is_some() {
                return Err(Rejection::bad("duplicate Host header"));
            }
            f.host = Some(h.value);
        } else if eq_plain(name, "content-length") {
            if f.length.is_some() {
                return Err(Rejection::bad("duplicate Content-Length header"));
            }
            f.length = Some(parse_content_length(h.value).ok_or(Rejection::bad("invalid Content-Length"))?);
        } else if eq_plain(name, "transfer-encoding") {
            if f.chunked {
                return Err(Rejection::bad("duplicate Transfer-Encoding header"));
            }
            if !h.value.eq_ignore_ascii_case(b"chunked") {
                return Err(Rejection::new(501, "unsupported Transfer-Encoding"));
            }
            f.chunked = true;
        } else if eq_plain(name, "expect") {
            f.expect_continue = version_11 && h.value.eq_ignore_ascii_case(b"100-continue");
        } else if eq_plain(name, "upgrade") {
            f.upgrade = true;
        } else if eq_plain(name, "connection") {
            f.connection = Some(h.value);
            if has_token(h.value, b"close") {
                f.close = Some(true);
            } else if has_token(h.value, b"keep-alive") {
                f.close = Some(false);
            }
        }
    }
    Ok(f)
}

/// `host:port` with a non-empty host and a decimal port: the only CONNECT target nginx's parser takes.
fn is_authority_form(target: &str) -> bool {
    let Some((host, port)) = target.rsplit_once(':') else {
        return false;
    };
    !host.is_empty() && !host.contains('/') && !port.is_empty() && port.bytes().all(|c| c.is_ascii_digit())
}

/// A request line httparse refused for its version: `HTTP/2.0` and later get nginx's 505, anything else 400.
fn version_rejection(buf: &[u8]) -> Rejection {
    let line = buf.split(|&c| c == b'\n').next().unwrap_or(buf);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|&c| c == b' ').next().unwrap_or(b"");
    let major = version
        .strip_prefix(b"HTTP/")
        .and_then(|v| v.split(|&c| c == b'.').next())
        .filter(|m| !m.is_empty() && m.len() <= 3 && m.iter().all(u8::is_ascii_digit));
    let later = major.is_some_and(|m| m.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')) >= 2);
    let has_target = line.iter().filter(|&&c| c == b' ').count() >= 2;
    if later && has_target && !line.starts_with(b"PRI ") {
        Rejection::new(505, "unsupported HTTP version")
    } else {
        Rejection::bad("invalid HTTP version")
    }
}

/// Splits an absolute-form target (`scheme://host/path`, any scheme as in nginx) into its path and host; an
/// origin-form (`/path`) or `*` target passes through.
fn split_target(t: &str) -> Result<(&str, Option<&[u8]>), Rejection> {
    if t.starts_with('/') {
        return Ok((t, None));
    }
    let bad = Rejection::bad("invalid request target");
    let (scheme, rest) = t.split_once("://").ok_or(bad)?;
    let scheme_ok = scheme.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err(bad);
    }
    // the host ends at the path, or at the query of a target without a path (nginx's `empty_path_in_uri`: its
    // path is `/`, see [`RequestHead::uri`]); a `#` there is a bad host, as in nginx
    let (host, path) = rest.find(['/', '?']).map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    if host.is_empty() {
        return Err(bad);
    }
    Ok((path, Some(host.as_bytes())))
}

/// The host of a `Host` value (or an absolute-form authority) without its port, if well-formed.
pub fn host_without_port(h: &[u8]) -> Option<&[u8]> {
    strip_port(h).ok()
}

/// The host of a `Host` value without its port; a malformed value is a 400, as in nginx.
fn strip_port(h: &[u8]) -> Result<&[u8], Rejection> {
    super::host::validate(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Facts = (String, BodyFraming, bool, Option<String>);

    fn parse(raw: &[u8]) -> Result<Option<Facts>, Rejection> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        Ok(parse_request(raw, &mut hs)?.map(|h| {
            (
                h.target.to_string(),
                h.body,
                h.keepalive,
                h.host.map(|b| String::from_utf8_lossy(b).into_owned()),
            )
        }))
    }

    #[test]
    fn parses_framing_and_keepalive() {
        let r = parse(b"GET /a?b HTTP/1.1\r\nHost: Ex.com:8080\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r, ("/a?b".into(), BodyFraming::None, true, Some("Ex.com".into())));
        let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");
        assert_eq!(r.unwrap().unwrap().1, BodyFraming::Length(5));
        let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((r.1, r.2), (BodyFraming::Chunked, true));
        let r = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.2);
        let r = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.2);
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let raw = b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 9\r\n\r\n";
        assert!(parse_request(raw, &mut hs).unwrap().unwrap().expect_continue);
        let r = parse(b"GET http://h.example:81/x HTTP/1.1\r\nHost: other\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((r.0.as_str(), r.3.as_deref()), ("/x", Some("h.example")));
        assert!(parse(b"GET / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
    }

    #[test]
    fn rejects_what_nginx_rejects() {
        let bad = |raw: &[u8]| parse(raw).unwrap_err().status;
        assert_eq!(
            bad(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            bad(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            400
        );
        assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(
            bad(b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"),
            501
        );
        assert_eq!(bad(b"GET / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
        assert_eq!(bad(b"GARBAGE\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"), 400);
        assert_eq!(bad(b"GET foo HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    }

    /// Regressions found by the smuggling suite, each checked against nginx 1.22.
    #[test]
    fn refuses_smuggling_shapes_as_nginx_does() {
        let bad = |raw: &[u8]| parse(raw).unwrap_err().status;
        let te = |v: &str| format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {v}\r\n\r\n");
        // a second Transfer-Encoding line is a duplicate (400) before its value is looked at
        assert_eq!(bad(te("chunked\r\nTransfer-Encoding: chunked").as_bytes()), 400);
        assert_eq!(bad(te("chunked\r\nTransfer-Encoding: identity").as_bytes()), 400);
        for v in [
            "xchunked",
            "chunked, identity",
            "identity, chunked",
            "gzip, chunked",
            "\x0bchunked",
        ] {
            assert_eq!(
                bad(te(v).as_bytes()),
                if v.starts_with('\x0b') { 400 } else { 501 },
                "{v:?}"
            );
        }
        assert_eq!(bad(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        assert_eq!(bad(b"get / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        // refused before the line is whole, as nginx's parser
        assert_eq!(bad(b"xxxxxxxxxxxxxxxx"), 400);
        assert!(parse(b"\r\nGE").unwrap().is_none());
        assert_eq!(
            bad(b"GET http://h/x HTTP/1.1\r\n\r\n"),
            400,
            "Host is required even then"
        );
        assert_eq!(bad(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
        assert_eq!(bad(b"GET / HTTP/3.0\r\nHost: a\r\n\r\n"), 505);
        assert_eq!(bad(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 400);
        assert_eq!(bad(b"GET /\r\n\r\n"), 400, "HTTP/0.9 is refused");
    }

    /// The path nginx matches, from a whole head: the fast path borrows the target, others use the buffer.
    fn uri_of(raw: &[u8]) -> Result<(Vec<u8>, String), Rejection> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = parse_request(raw, &mut hs)?.ok_or(Rejection::bad("incomplete"))?;
        let mut buf = Vec::new();
        let uri = head.uri(&mut buf)?.to_vec();
        Ok((uri, head.query().to_string()))
    }

    #[test]
    fn refuses_targets_and_hosts_nginx_refuses() {
        let bad = |raw: &[u8]| parse(raw).unwrap_err().status;
        let bad_uri = |raw: &[u8]| uri_of(raw).unwrap_err().status;
        assert_eq!(bad(b"GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        for target in [
            "/../x",
            "/a/../../x",
            "/a/%2e%2e/%2E%2E/x",
            "/..",
            "http://h/../x",
            "http://localhost#frag",
            "/%zz",
            "/%00",
        ] {
            assert_eq!(
                bad_uri(format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()),
                400,
                "{target}"
            );
        }
        for host in ["", "a..b", "a:1:2"] {
            assert_eq!(
                bad(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()),
                400,
                "{host:?}"
            );
        }
        for (target, uri, query) in [
            ("/a/../x", "/x", ""),
            ("/a/./b/..", "/a/", ""),
            ("/x?q=/../..", "/x", "q=/../.."),
            ("/.../x", "/.../x", ""),
            ("/..a/x?", "/..a/x", ""),
            ("http://h//a/%62?c#d", "/a/b", "c"),
            ("/a#b?c", "/a", ""),
            // nginx's answers (1.22, on loopback) for absolute targets without a path: `$uri` `/`
            ("http://localhost?args#frag", "/", "args"),
            ("http://h:1?x", "/", "x"),
        ] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a.\r\n\r\n");
            let r = parse(raw.as_bytes());
            assert!(
                target.ends_with(&r.unwrap().unwrap().0),
                "{target}: the target is kept as sent"
            );
            let (u, q) = uri_of(raw.as_bytes()).unwrap();
            assert_eq!(
                (String::from_utf8(u).unwrap().as_str(), q.as_str()),
                (uri, query),
                "{target}"
            );
        }
    }

    /// nginx-tests' `http_method.t` (nginx 1.29.3 and later).
    #[test]
    fn trace_and_connect_are_not_allowed() {
        let status = |raw: &[u8]| parse(raw).map(|_| 200).unwrap_or_else(|r| r.status);
        assert_eq!(status(b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"), 405);
        assert_eq!(status(b"CONNECT a:8080 HTTP/1.1\r\nHost: a\r\n\r\n"), 405);
        assert_eq!(status(b"CONNECT a:8080 HTTP/1.0\r\n\r\n"), 405);
        assert_eq!(status(b"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(status(b"CONNECT a HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(status(b"CONNECT a:80 HTTP/1.1\r\n\r\n"), 400, "no Host in HTTP/1.1");
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    }

    #[test]
    fn a_bare_lf_ends_a_line_as_in_nginx() {
        for raw in [
            &b"GET / HTTP/1.1\nHost: a\n\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n\n",
        ] {
            let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let r = parse_request(raw, &mut hs).unwrap().unwrap();
            assert_eq!((r.host, r.head_len), (Some(&b"a"[..]), raw.len()), "{raw:?}");
        }
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let h = parse_request(b"GET / HTTP/1.1\nHost: a\nX-A: b\n\n", &mut hs)
            .unwrap()
            .unwrap();
        assert_eq!(h.header("x-a"), Some(&b"b"[..]), "no CR left in the value");
        assert_eq!(
            parse(b"GET / HTTP/1.1\rHost: a\r\r").map(|_| ()).unwrap_err().status,
            400,
            "bare CR"
        );
    }

    #[test]
    fn accepts_what_nginx_accepts() {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let raw = b"GET  /x  HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\n\r\n";
        let h = parse_request(raw, &mut hs).unwrap().unwrap();
        assert_eq!(h.target, "/x");
        assert!(h.named_in_connection("x-secret") && !h.named_in_connection("x-other"));
        let r = parse(b"GET ftp://h.example/x HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((r.0.as_str(), r.3.as_deref()), ("/x", Some("h.example")));
        let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n");
        assert_eq!(r.unwrap().unwrap().1, BodyFraming::Length(i64::MAX as u64));
        let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:   CHUNKED \r\n\r\n");
        assert_eq!(r.unwrap().unwrap().1, BodyFraming::Chunked);
    }
}
