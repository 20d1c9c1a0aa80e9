//! Upstream response heads: parsed with httparse, their framing worked out, and rewritten for the client (nginx's
//! hop-by-hop and hidden headers dropped, `Server`, `Date` and `Connection` set by the proxy).

use super::keepalive::Connection;
use super::names::eq_plain;
use super::pages::{append_decimal, reason, SERVER_FULL};
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
    /// It has an `X-Accel-Redirect` line.
    pub accel_redirect: bool,
}

/// Parses `buf` as a response head; `head_request` means the response has no body whatever it says.
/// `Ok(None)`: more bytes needed.
pub fn parse_response<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, InvalidHeader> {
    let mut resp = httparse::Response::new(headers);
    let parsed = resp.parse(buf);
    response_head(resp, parsed, head_request)
}

/// [`parse_response`] into header slots not written before (the proxied path's: the 100 slots, 3.2 KiB, are not
/// zeroed for each response).
pub fn parse_response_uninit<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [std::mem::MaybeUninit<Header<'b>>],
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, InvalidHeader> {
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, buf, headers);
    let head = response_head(resp, parsed, head_request);
    if let Ok(Some(h)) = &head {
        LAST.with(|last| last.borrow_mut().note(buf, h, head_request));
    }
    head
}

/// The head in `buf` again, as [`parse_response_uninit`] gave it: from the index of the last head it parsed on this
/// thread when that was this one (the proxied path reads a head in one place and rewrites it in another: a second
/// parse cost 1,900 instructions per request), else parsed again.
pub fn reparse_response_uninit<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [std::mem::MaybeUninit<Header<'b>>],
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, InvalidHeader> {
    let indexed = LAST.with(|last| {
        let last = last.borrow();
        last.same(buf, head_request)
            .then(|| last.rebuild(buf, headers))
            .flatten()
    });
    match indexed {
        Some(n) => {
            // the first `n` slots were written by `rebuild`
            let written = headers.get(..n).unwrap_or_default();
            // SAFETY: `rebuild` wrote the slots `..n` (and wrote nothing else); a `Header` is plain references
            let lines: &'h [Header<'b>] = unsafe { &*(std::ptr::from_ref(written) as *const [Header<'b>]) };
            LAST.with(|last| Ok(Some(last.borrow().head(buf, lines))))
        }
        None => parse_response_uninit(buf, headers, head_request),
    }
}

/// Where the parts of the last response head [`parse_response_uninit`] parsed on a thread are in its buffer.
struct HeadIndex {
    /// The buffer's address and the head's length (an index of another buffer, or of a head since read again in
    /// its place, is not used: [`HeadIndex::same`]).
    at: usize,
    head_len: usize,
    head_request: bool,
    /// The head's last 8 bytes, compared too.
    tail: u64,
    status: u16,
    reason: (u32, u32),
    body: BodyFraming,
    reusable: bool,
    accel_redirect: bool,
    /// Each line's name and value (offset, length).
    lines: Vec<[u32; 4]>,
}

thread_local! {
    static LAST: std::cell::RefCell<HeadIndex> = const {
        std::cell::RefCell::new(HeadIndex {
            at: 0,
            head_len: 0,
            head_request: false,
            tail: 0,
            status: 0,
            reason: (0, 0),
            body: BodyFraming::None,
            reusable: false,
            accel_redirect: false,
            lines: Vec::new(),
        })
    };
}

/// The offset and length of `part` in `buf` (zero-length when it is not in it).
fn span(buf: &[u8], part: &[u8]) -> (u32, u32) {
    let off = (part.as_ptr() as usize).wrapping_sub(buf.as_ptr() as usize);
    match off.checked_add(part.len()).is_some_and(|end| end <= buf.len()) {
        true => (u32::try_from(off).unwrap_or(0), u32::try_from(part.len()).unwrap_or(0)),
        false => (0, 0),
    }
}

/// `b` as text when it is ASCII (a header name always is: httparse takes tokens only), without `from_utf8`'s
/// general walk (100 instructions a name).
fn ascii(b: &[u8]) -> Option<&str> {
    // SAFETY: ASCII bytes are valid UTF-8
    b.is_ascii().then(|| unsafe { std::str::from_utf8_unchecked(b) })
}

/// The last 8 bytes of a head (its end, `\r\n\r\n` and the line before).
fn tail_of(head: &[u8]) -> u64 {
    let last = head.len().saturating_sub(8);
    head.get(last..)
        .map_or(0, |t| t.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
}

impl HeadIndex {
    fn note(&mut self, buf: &[u8], h: &ResponseHead<'_, '_>, head_request: bool) {
        self.at = buf.as_ptr() as usize;
        self.head_len = h.head_len;
        self.head_request = head_request;
        self.tail = tail_of(buf.get(..h.head_len).unwrap_or_default());
        self.status = h.status;
        self.reason = span(buf, h.reason.as_bytes());
        self.body = h.body;
        self.reusable = h.reusable;
        self.accel_redirect = h.accel_redirect;
        self.lines.clear();
        for line in h.headers {
            let (n, nl) = span(buf, line.name.as_bytes());
            let (v, vl) = span(buf, line.value);
            self.lines.push([n, nl, v, vl]);
        }
    }

    fn same(&self, buf: &[u8], head_request: bool) -> bool {
        self.at == buf.as_ptr() as usize
            && self.head_len != 0
            && self.head_request == head_request
            && buf.get(..self.head_len).is_some_and(|h| tail_of(h) == self.tail)
    }

    /// Writes the indexed lines into `headers`; how many, or `None` when they do not fit or are not in `buf`.
    fn rebuild<'b>(&self, buf: &'b [u8], headers: &mut [std::mem::MaybeUninit<Header<'b>>]) -> Option<usize> {
        if self.lines.len() > headers.len() {
            return None;
        }
        for (slot, &[n, nl, v, vl]) in headers.iter_mut().zip(&self.lines) {
            let name = buf.get(n as usize..(n + nl) as usize)?;
            let value = buf.get(v as usize..(v + vl) as usize)?;
            slot.write(Header {
                name: ascii(name)?,
                value,
            });
        }
        Some(self.lines.len())
    }

    fn head<'h, 'b>(&self, buf: &'b [u8], headers: &'h [Header<'b>]) -> ResponseHead<'h, 'b> {
        let (r, rl) = self.reason;
        let reason = buf
            .get(r as usize..(r + rl) as usize)
            .and_then(|b| ascii(b).or_else(|| std::str::from_utf8(b).ok()))
            .unwrap_or("");
        ResponseHead {
            status: self.status,
            reason,
            headers,
            head_len: self.head_len,
            body: self.body,
            reusable: self.reusable,
            accel_redirect: self.accel_redirect,
        }
    }
}

/// The head `resp` that httparse parsed (`parsed`), checked and its framing worked out.
fn response_head<'h, 'b>(
    resp: httparse::Response<'h, 'b>,
    parsed: httparse::Result<usize>,
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, InvalidHeader> {
    let head_len = match parsed {
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
    let mut accel_redirect = false;
    for h in headers {
        if eq_plain(h.name, "content-length") {
            let n = parse_content_length(h.value).ok_or(InvalidHeader("bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(InvalidHeader("conflicting Content-Length"));
            }
            length = Some(n);
        } else if eq_plain(h.name, "transfer-encoding") {
            if !has_token(h.value, b"chunked") {
                return Err(InvalidHeader("unsupported Transfer-Encoding"));
            }
            chunked = true;
        } else if eq_plain(h.name, "connection") {
            if has_token(h.value, b"close") {
                reusable = false;
            } else if has_token(h.value, b"keep-alive") {
                reusable = true;
            }
        } else if eq_plain(h.name, "x-accel-redirect") {
            accel_redirect = true;
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
        accel_redirect,
    }))
}

/// What a location changes in a proxied response's head (nginx's proxy module and headers filter); implemented
/// over the compiled plan in `snapshot::headers`.
pub trait HeadEdits {
    /// The `Server` value corelb sends.
    fn server(&self) -> &str;
    /// Whether the upstream's `name` header is passed on although nginx hides it by default (`proxy_pass_header`).
    fn passes(&self, name: &str) -> bool;
    /// False when [`HeadEdits::upstream_line`] surely passes the upstream's `name` line as it is (and it is no
    /// hop-by-hop header nor `Last-Modified`): the line is copied without a look at the rules.
    fn may_edit(&self, _name: &str) -> bool {
        true
    }
    /// Handles the upstream's `name: value` line for a response with `status`: true when it was dropped (a
    /// hop-by-hop header always is) or written changed into `out`, false to pass it on as it is.
    fn upstream_line(&self, status: u16, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool;
    /// Appends the lines the location adds (after `Connection`, where nginx writes its headers list);
    /// `last_modified` is the upstream's `Last-Modified` value.
    fn append(&self, status: u16, last_modified: Option<&[u8]>, out: &mut Vec<u8>);
}

/// nginx's defaults: the default hidden headers, nothing changed or added.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEdits;

impl HeadEdits for NoEdits {
    fn server(&self) -> &str {
        SERVER_FULL
    }
    fn passes(&self, _name: &str) -> bool {
        false
    }
    fn upstream_line(&self, _status: u16, name: &str, _value: &[u8], _out: &mut Vec<u8>) -> bool {
        hidden_response_header(name)
    }
    fn append(&self, _status: u16, _last_modified: Option<&[u8]>, _out: &mut Vec<u8>) {}
}

/// Writes the head the client gets for `resp` into `out` (cleared first), under nginx's default settings.
pub fn write_client_head(
    resp: &ResponseHead<'_, '_>,
    date: &[u8],
    keepalive: Connection,
    chunked_out: bool,
    out: &mut Vec<u8>,
) {
    let head = ClientHead {
        date,
        keepalive,
        chunked_out,
        upgrade: false,
    };
    write_client_head_with(resp, head, &NoEdits, out);
}

/// The framing of the head corelb writes for a client.
#[derive(Debug, Clone, Copy)]
pub struct ClientHead<'a> {
    /// The cached `Date` value.
    pub date: &'a [u8],
    /// The `Connection` line (and `Keep-Alive`), unless `upgrade`.
    pub keepalive: Connection,
    /// `Transfer-Encoding: chunked` is sent.
    pub chunked_out: bool,
    /// A `101` opening a tunnel: `Connection: upgrade`.
    pub upgrade: bool,
}

/// Writes the head the client gets for `resp` into `out` (cleared first): the status line, `Server` and `Date`
/// (unless passed from the upstream), the upstream's end-to-end headers as `edits` changes them,
/// `Transfer-Encoding: chunked` when `chunked_out`, `Connection`, and what `edits` adds.
pub fn write_client_head_with(
    resp: &ResponseHead<'_, '_>,
    head: ClientHead<'_>,
    edits: &dyn HeadEdits,
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
    out.extend_from_slice(b"\r\n");
    let upstream_has = |n: &str| resp.headers.iter().any(|h| eq_plain(h.name, n));
    // nginx writes its own `Server` and `Date` unless the upstream's are passed on
    if !(edits.passes("server") && upstream_has("server")) {
        out.extend_from_slice(b"Server: ");
        out.extend_from_slice(edits.server().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !(edits.passes("date") && upstream_has("date")) {
        out.extend_from_slice(b"Date: ");
        out.extend_from_slice(head.date);
        out.extend_from_slice(b"\r\n");
    }
    let mut last_modified = None;
    for h in resp.headers {
        if !edits.may_edit(h.name) {
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
            continue;
        }
        if eq_plain(h.name, "last-modified") {
            last_modified = Some(h.value);
        }
        if edits.upstream_line(resp.status, h.name, h.value, out) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if head.chunked_out {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    if head.upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else {
        head.keepalive.write(out);
    }
    edits.append(resp.status, last_modified, out);
    out.extend_from_slice(b"\r\n");
}

/// The head of a `101 Switching Protocols` for the client: as [`write_client_head_with`] writes it (the
/// upstream's `Upgrade` header included), with `Connection: upgrade` (nginx's header filter for a 101).
pub fn write_switching_head(resp: &ResponseHead<'_, '_>, date: &[u8], edits: &dyn HeadEdits, out: &mut Vec<u8>) {
    let head = ClientHead {
        date,
        keepalive: Connection::CLOSE,
        chunked_out: false,
        upgrade: true,
    };
    write_client_head_with(resp, head, edits, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_parsed_again_in_its_place_comes_from_the_index_as_parsed_and_a_changed_one_is_parsed_anew() {
        let mut buf = b"HTTP/1.1 203 Fine\r\nContent-Length: 5\r\nX-A: one\r\nConnection: close\r\n\r\nhello".to_vec();
        let summary = |r: &ResponseHead<'_, '_>| {
            let lines: Vec<_> = r
                .headers
                .iter()
                .map(|h| (h.name.to_string(), h.value.to_vec()))
                .collect();
            (
                r.status,
                r.reason.to_string(),
                lines,
                r.head_len,
                r.body,
                r.reusable,
                r.accel_redirect,
            )
        };
        let first = {
            let mut hs = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            summary(&parse_response_uninit(&buf, &mut hs, false).unwrap().unwrap())
        };
        assert!(LAST.with(|l| l.borrow().same(&buf, false)));
        let again = {
            let mut hs = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            summary(&reparse_response_uninit(&buf, &mut hs, false).unwrap().unwrap())
        };
        assert_eq!(first, again);
        assert_eq!(again.2.len(), 3);
        assert_eq!((again.0, again.1.as_str(), again.5), (203, "Fine", false));
        // another head read into the same place: not the index's
        let at = buf.len() - 5 - 8;
        assert_eq!(buf[at], b'l');
        buf[at] = b'x';
        assert!(!LAST.with(|l| l.borrow().same(&buf, false)));
        let mut hs = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let anew = summary(&reparse_response_uninit(&buf, &mut hs, false).unwrap().unwrap());
        assert_eq!(anew.2[2].1, b"cxose");
        assert!(anew.5, "parsed anew: no `close` now");
        assert!(
            !LAST.with(|l| l.borrow().same(&buf, true)),
            "a HEAD request's head is parsed again"
        );
    }

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
        write_switching_head(&resp, b"D", &NoEdits, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nServer: corelb/{}\r\nDate: D\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Accept: k\r\nConnection: upgrade\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
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
        write_client_head(&r, b"D", Connection::KEEP, false, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "HTTP/1.1 200 OK\r\nServer: corelb/{}\r\nDate: D\r\nX-A: 1\r\nContent-Length: 2\r\n\
                 Connection: keep-alive\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
    }
}
