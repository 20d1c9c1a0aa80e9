//! Upstream response heads: parsed with httparse, their framing worked out, and rewritten for the client (nginx's
//! hop-by-hop and hidden headers dropped, `Server`, `Date` and `Connection` set by the proxy).

use super::pages::{append_decimal, reason, SERVER_NAME};
use super::{has_token, hidden_response_header, parse_content_length, BodyFraming};
use httparse::{Header, Status};

/// Header lines read per upstream response at most.
pub const MAX_HEADERS: usize = 100;

/// The upstream sent a head corelb cannot pass on (nginx's "upstream sent invalid header").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("upstream sent an invalid header: {0}")]
pub struct InvalidHeader(pub &'static str);

/// A parsed upstream response head.
#[derive(Debug)]
pub struct ResponseHead<'h, 'b> {
    pub status: u16,
    pub reason: &'b str,
    pub headers: &'h [Header<'b>],
    pub head_len: usize,
    pub body: BodyFraming,
    /// Whether the upstream lets the connection be used again after this response.
    pub reusable: bool,
}

/// Parses `buf` as a response head; `head_request` means the response has no body whatever it says.
/// `Ok(None)`: more bytes needed.
pub fn parse_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, InvalidHeader> {
    let mut resp = httparse::Response::new(headers);
    let head_len = match resp.parse(buf) {
        Ok(Status::Complete(n)) => n,
        Ok(Status::Partial) => return Ok(None),
        Err(_) => return Err(InvalidHeader("malformed head")),
    };
    let (Some(version), Some(status)) = (resp.version, resp.code) else {
        return Err(InvalidHeader("incomplete status line"));
    };
    if status < 100 {
        // httparse takes any three digits; "000" would reach the client as a status line it cannot read
        return Err(InvalidHeader("status below 100"));
    }
    let reason = resp.reason.unwrap_or("");
    let headers: &'h [Header<'b>] = resp.headers;
    let mut length = None;
    let mut chunked = false;
    let mut reusable = version == 1;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = parse_content_length(h.value).ok_or(InvalidHeader("bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(InvalidHeader("conflicting Content-Length"));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if !has_token(h.value, b"chunked") {
                return Err(InvalidHeader("unsupported Transfer-Encoding"));
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, b"close") {
                reusable = false;
            } else if has_token(h.value, b"keep-alive") {
                reusable = true;
            }
        }
    }
    let body = if head_request || status < 200 || status == 204 || status == 304 {
        BodyFraming::None
    } else {
        match (length, chunked) {
            (Some(_), true) => return Err(InvalidHeader("both Content-Length and Transfer-Encoding")),
            (Some(0), false) => BodyFraming::None,
            (Some(n), false) => BodyFraming::Length(n),
            (None, true) => BodyFraming::Chunked,
            (None, false) => BodyFraming::UntilClose,
        }
    };
    if body == BodyFraming::UntilClose {
        reusable = false;
    }
    Ok(Some(ResponseHead {
        status,
        reason,
        headers,
        head_len,
        body,
        reusable,
    }))
}

/// Writes the head the client gets for `resp` into `out` (cleared first): the status line, `Server` and `Date`,
/// the upstream's end-to-end headers, `Transfer-Encoding: chunked` when `chunked_out`, and `Connection`.
pub fn write_client_head(
    resp: &ResponseHead<'_, '_>,
    date: &[u8],
    keepalive: bool,
    chunked_out: bool,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    append_decimal(out, u64::from(resp.status));
    out.push(b' ');
    let text = if resp.reason.is_empty() {
        reason(resp.status)
    } else {
        resp.reason
    };
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\nServer: ");
    out.extend_from_slice(SERVER_NAME.as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    for h in resp.headers {
        if hidden_response_header(h.name) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if chunked_out {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    out.extend_from_slice(if keepalive {
        b"Connection: keep-alive\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
}

/// The head of a `101 Switching Protocols` for the client: as [`write_client_head`] writes it (the upstream's
/// `Upgrade` header included), with `Connection: upgrade` (nginx's header filter for a 101).
pub fn write_switching_head(resp: &ResponseHead<'_, '_>, date: &[u8], out: &mut Vec<u8>) {
    write_client_head(resp, date, false, false, out);
    const CLOSE: &[u8] = b"Connection: close\r\n\r\n";
    out.truncate(out.len().saturating_sub(CLOSE.len()));
    out.extend_from_slice(b"Connection: upgrade\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &[u8], head_request: bool) -> Result<(u16, BodyFraming, bool), InvalidHeader> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        parse_response(raw, &mut hs, head_request).map(|r| {
            let r = r.unwrap();
            (r.status, r.body, r.reusable)
        })
    }

    #[test]
    fn switching_protocols_head_keeps_upgrade() {
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: k\r\n\r\n";
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let resp = parse_response(raw, &mut hs, false).unwrap().unwrap();
        let mut out = Vec::new();
        write_switching_head(&resp, b"D", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 101 Switching Protocols\r\nServer: corelb\r\nDate: D\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Accept: k\r\nConnection: upgrade\r\n\r\n"
        );
    }

    #[test]
    fn works_out_framing() {
        let ok = |raw: &[u8]| head(raw, false).unwrap();
        assert_eq!(
            ok(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"),
            (200, BodyFraming::Length(3), true)
        );
        assert_eq!(
            ok(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            (200, BodyFraming::Chunked, true)
        );
        assert_eq!(ok(b"HTTP/1.1 200 OK\r\n\r\n"), (200, BodyFraming::UntilClose, false));
        assert_eq!(
            ok(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n"),
            (200, BodyFraming::Length(1), false)
        );
        assert_eq!(ok(b"HTTP/1.1 204 No Content\r\n\r\n"), (204, BodyFraming::None, true));
        assert_eq!(
            ok(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
            (200, BodyFraming::None, false)
        );
        assert_eq!(
            head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true).unwrap().1,
            BodyFraming::None
        );
        assert!(head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            false
        )
        .is_err());
        assert!(head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        assert!(head(b"SSH-2.0-OpenSSH\r\n\r\n", false).is_err());
        // found by fuzzing: a status below 100 was passed on as "HTTP/1.1 0"
        assert_eq!(
            head(b"HTTP/1.1 000 X\r\nContent-Length: 1\r\n\r\n", false),
            Err(InvalidHeader("status below 100"))
        );
        assert!(head(b"HTTP/1.1 099 X\r\n\r\n", false).is_err());
    }

    #[test]
    fn rewrites_head_for_client() {
        let raw = b"HTTP/1.1 200 OK\r\nServer: up\r\nDate: x\r\nConnection: keep-alive\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n";
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let r = parse_response(raw, &mut hs, false).unwrap().unwrap();
        let mut out = Vec::new();
        write_client_head(&r, b"D", true, false, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nX-A: 1\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n"
        );
    }
}
