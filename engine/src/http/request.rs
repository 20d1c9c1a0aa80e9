//! Client request heads: parsed with httparse over the connection's reused buffer, checked as nginx checks them
//! (framing, duplicate or conflicting lengths, `Host`), reduced to the facts the proxy needs.

use super::{has_token, parse_content_length, BodyFraming, Rejection};
use httparse::{Header, Status};

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
}

impl RequestHead<'_, '_> {
    /// The value of the first header called `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// Whether the method is one nginx never retries once sent (POST, LOCK, PATCH).
    pub fn non_idempotent(&self) -> bool {
        matches!(self.method, "POST" | "LOCK" | "PATCH")
    }

    /// The path part of the target (before `?`).
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(self.target, |(p, _)| p)
    }

    /// The query part of the target (after `?`), if any.
    pub fn args(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, a)| a)
    }
}

/// Parses `buf` as a request head. `Ok(None)`: more bytes needed.
pub fn parse_request<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
) -> Result<Option<RequestHead<'h, 'b>>, Rejection> {
    let mut req = httparse::Request::new(headers);
    let head_len = match req.parse(buf) {
        Ok(Status::Complete(n)) => n,
        Ok(Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Rejection::bad("too many header lines")),
        Err(_) => return Err(Rejection::bad("invalid request head")),
    };
    let (Some(method), Some(raw_target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Rejection::bad("incomplete request line"));
    };
    let headers: &'h [Header<'b>] = req.headers;
    let version_11 = version == 1;
    let (target, target_host) = split_target(raw_target)?;
    let mut host_header = None;
    let mut length = None;
    let mut chunked = false;
    let mut close = !version_11;
    let mut expect_continue = false;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            if host_header.is_some() {
                return Err(Rejection::bad("duplicate Host header"));
            }
            host_header = Some(h.value);
        } else if name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(Rejection::bad("duplicate Content-Length header"));
            }
            length = Some(parse_content_length(h.value).ok_or(Rejection::bad("invalid Content-Length"))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked || !h.value.eq_ignore_ascii_case(b"chunked") {
                return Err(Rejection::new(501, "unsupported Transfer-Encoding"));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = version_11 && h.value.eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, b"close") {
                close = true;
            } else if has_token(h.value, b"keep-alive") {
                close = false;
            }
        }
    }
    let body = match (length, chunked) {
        (Some(_), true) => return Err(Rejection::bad("both Content-Length and Transfer-Encoding")),
        (Some(0), false) | (None, false) => BodyFraming::None,
        (Some(n), false) => BodyFraming::Length(n),
        (None, true) => BodyFraming::Chunked,
    };
    let host = match target_host.or(host_header) {
        Some(h) => Some(strip_port(h)?),
        None if version_11 => return Err(Rejection::bad("missing Host header")),
        None => None,
    };
    Ok(Some(RequestHead {
        method,
        target,
        version_11,
        headers,
        head_len,
        body,
        keepalive: !close,
        host,
        expect_continue,
    }))
}

/// Splits an absolute-form target (`http://host/path`) into its path and host; an origin-form (`/path`) or `*`
/// target passes through.
fn split_target(t: &str) -> Result<(&str, Option<&[u8]>), Rejection> {
    if t.starts_with('/') || t == "*" {
        return Ok((t, None));
    }
    let rest = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
        .ok_or(Rejection::bad("invalid request target"))?;
    let (host, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    if host.is_empty() {
        return Err(Rejection::bad("invalid request target"));
    }
    Ok((path, Some(host.as_bytes())))
}

/// The host of a `Host` value without its port; a malformed value is a 400, as in nginx.
fn strip_port(h: &[u8]) -> Result<&[u8], Rejection> {
    let host = if h.first() == Some(&b'[') {
        let end = h
            .iter()
            .position(|&c| c == b']')
            .ok_or(Rejection::bad("invalid host"))?;
        &h[..=end]
    } else {
        h.iter().position(|&c| c == b':').map_or(h, |i| &h[..i])
    };
    let ok = host
        .iter()
        .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b'[' | b']' | b':'));
    if !ok || host.starts_with(b".") {
        return Err(Rejection::bad("invalid host"));
    }
    Ok(host)
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
}
