//! A stream's answer: the HTTP/1.1 head the flow wrote, read back into the HTTP/2 response's
//! HEADERS, its body (by `Content-Length`, chunks, or the end of the pipe) sent as DATA frames of at most
//! `http2_chunk_size` within the client's flow-control window, each wait for window bounded by `send_timeout`.
//! The body is handed to h2 in pieces of a whole chunk (h2 cuts them at the client's frame size as it writes
//! them), a shorter piece only where the window allows no more or the flow has no more bytes for now: the
//! frames nginx makes of an answer (the chunk size, the frame size, the window and what is buffered, the least).

use super::unsent::{Counted, Unsent};
use crate::http::chunked::ChunkedDecoder;
use crate::runtime::pipe::PipeEnd;
use crate::runtime::{timeout, Runtime};
use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::SendStream;
use std::cell::{Cell, RefCell};
use std::task::Poll;
use std::time::Duration;

/// The largest answer head the flow writes that is relayed (corelb's own heads and an upstream's, rewritten,
/// are far smaller); larger is a 502.
const MAX_HEAD: usize = 64 * 1024;

/// How relaying ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relayed {
    Done,
    ResetByPeer,
    Failed,
}

/// Where an answer goes and how.
pub(super) struct Relay<'p> {
    pub(super) pipe: &'p PipeEnd,
    /// A `HEAD` request: its answer has no body whatever its head says.
    pub(super) head_request: bool,
    /// `http2_chunk_size` of the location that answers (the flow sets it when it picks the location): the
    /// largest DATA frame.
    pub(super) chunk: &'p Cell<u32>,
    pub(super) send_timeout: Duration,
    /// The connection's count of what h2 holds of each stream's answer.
    pub(super) unsent: &'p Unsent,
}

/// How the answer's body is framed in the flow's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    Chunked,
    /// Until the flow closes its side.
    ToEnd,
}

/// Why a body could not be relayed.
enum Stop {
    /// The client reset the stream (or went away).
    Peer,
    /// The flow's answer was cut or broken, or the window did not open within `send_timeout`.
    Broken,
}

/// Bytes read from the pipe at most at a time.
const READ: usize = 16 * 1024;
/// Relay buffers a thread keeps between streams at most, and the largest inbox kept.
const SPARE: usize = 32;

/// A stream's relay buffers: what came from the pipe and is not used yet (`inbox[start..]`), and the DATA not
/// sent yet. Taken from the thread's spares and given back, so that a stream neither allocates nor zeroes them.
#[derive(Default)]
struct Bufs {
    inbox: Vec<u8>,
    start: usize,
    data: BytesMut,
}

/// A thread's spare relay buffers, and the fewest the list held since the last [`trim`].
struct Spares {
    free: Vec<Bufs>,
    low: usize,
}

thread_local! {
    static SPARES: RefCell<Spares> = const { RefCell::new(Spares { free: Vec::new(), low: 0 }) };
}

/// Relay buffers kept however long they stay unused.
const RESERVE: usize = 4;

/// Frees this thread's spare relay buffers that stayed unused since the last call (all but [`RESERVE`]): what a
/// peak of streams needed, once it has passed; called on the shard's tick, never per stream. The bytes freed.
pub(crate) fn trim() -> usize {
    SPARES
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let unused = s.low.min(s.free.len()).saturating_sub(RESERVE);
            // the unused ones are at the bottom (taken and given at the top)
            let bytes = s
                .free
                .drain(..unused)
                .map(|b| b.inbox.capacity() + b.data.capacity())
                .sum();
            s.low = s.free.len();
            bytes
        })
        .unwrap_or(0)
}

impl Bufs {
    fn take() -> Bufs {
        SPARES
            .with(|s| {
                let mut s = s.borrow_mut();
                let b = s.free.pop();
                s.low = s.low.min(s.free.len());
                b
            })
            .unwrap_or_default()
    }

    /// Back to the thread's spares (emptied; one that grew for a large head is dropped).
    fn give_back(mut self) {
        if self.inbox.capacity() > READ * 2 {
            return;
        }
        self.inbox.clear();
        self.start = 0;
        self.data.clear();
        SPARES.with(|s| {
            let mut s = s.borrow_mut();
            if s.free.len() < SPARE {
                s.free.push(self);
            }
        });
    }

    /// The bytes read and not used yet.
    fn pending(&self) -> &[u8] {
        &self.inbox[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.inbox.len());
        if self.start == self.inbox.len() {
            self.inbox.clear();
            self.start = 0;
        }
    }

    /// Reads what the pipe has (at most `READ`) after the pending bytes; 0 at its end.
    async fn fill(&mut self, pipe: &PipeEnd) -> std::io::Result<usize> {
        if self.start > 0 {
            self.inbox.drain(..self.start);
            self.start = 0;
        }
        pipe.read_append(&mut self.inbox, READ).await
    }
}

impl Relay<'_> {
    /// Reads the answer from the pipe and sends it on `respond`.
    pub(super) async fn run<R: Runtime>(self, respond: SendResponse<Bytes>) -> Relayed {
        let mut bufs = Bufs::take();
        let relayed = self.relay::<R>(respond, &mut bufs).await;
        bufs.give_back();
        relayed
    }

    async fn relay<R: Runtime>(&self, mut respond: SendResponse<Bytes>, bufs: &mut Bufs) -> Relayed {
        let (response, body) = loop {
            match self.read_head(bufs).await {
                Ok(Some(parsed)) => break parsed,
                // a `100 Continue` (or other 1xx): skipped
                Ok(None) => continue,
                Err(()) => {
                    respond.send_reset(h2::Reason::INTERNAL_ERROR);
                    return Relayed::Failed;
                }
            }
        };
        let body = if self.head_request { Body::None } else { body };
        let mut send = match respond.send_response(response, body == Body::None) {
            Ok(s) => s,
            Err(e) => return peer_or_failed(&e),
        };
        if body == Body::None {
            return Relayed::Done;
        }
        let chunk = usize::try_from(self.chunk.get()).unwrap_or(usize::MAX).max(1);
        let out = Out {
            counted: self.unsent.open(u32::from(send.stream_id())),
            send: &mut send,
            chunk,
        };
        match self.body::<R>(out, body, bufs).await {
            Ok(()) => Relayed::Done,
            Err(Stop::Peer) => Relayed::ResetByPeer,
            Err(Stop::Broken) => {
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                Relayed::Failed
            }
        }
    }

    /// Reads until the pending bytes hold a whole head, and consumes it: the response and its framing (`None`:
    /// an interim 1xx answer).
    async fn read_head(&self, bufs: &mut Bufs) -> Result<Option<(http::Response<()>, Body)>, ()> {
        loop {
            let got = bufs.pending();
            if let Some(n) = head_end(got) {
                let head = &got[..n];
                let code = status_of(head).ok_or(())?;
                if (100..200).contains(&code) {
                    bufs.consume(n);
                    return Ok(None);
                }
                let response = response_of(code, head);
                bufs.consume(n);
                let (response, body) = response?;
                return Ok(Some((response, body)));
            }
            if got.len() >= MAX_HEAD {
                return Err(());
            }
            if bufs.fill(self.pipe).await.map_err(drop)? == 0 {
                return Err(());
            }
        }
    }

    /// Sends the body: what was read with the head, then the rest from the pipe.
    async fn body<R: Runtime>(&self, mut out: Out<'_, '_>, body: Body, bufs: &mut Bufs) -> Result<(), Stop> {
        let chunk = out.chunk;
        let mut left = match body {
            Body::Length(n) => n,
            _ => u64::MAX,
        };
        let mut chunks = ChunkedDecoder::new();
        // the flow was given its turn since the pipe was found empty
        let mut yielded = false;
        loop {
            if bufs.pending().is_empty() {
                // a frame short of the chunk size waits only for bytes already there, and for what the flow
                // writes when it gets its turn (it shares this task): then it goes out
                let n = if bufs.data.is_empty() {
                    bufs.fill(self.pipe).await.map_err(|_| Stop::Broken)?
                } else {
                    let now = futures_lite::future::poll_once(bufs.fill(self.pipe)).await;
                    match now {
                        Some(r) => r.map_err(|_| Stop::Broken)?,
                        None if !yielded => {
                            yielded = true;
                            futures_lite::future::yield_now().await;
                            continue;
                        }
                        None => {
                            yielded = false;
                            self.send_all::<R>(&mut out, &mut bufs.data, false).await?;
                            continue;
                        }
                    }
                };
                yielded = false;
                if n == 0 {
                    self.send_all::<R>(&mut out, &mut bufs.data, false).await?;
                    // the end of the pipe ends a body read to its end; any other is cut short
                    return match body {
                        Body::ToEnd => out.send.send_data(Bytes::new(), true).map_err(|_| Stop::Peer),
                        _ => Err(Stop::Broken),
                    };
                }
            }
            let Bufs { inbox, start, data } = &mut *bufs;
            let pending = &inbox[*start..];
            let (used, done) = match body {
                Body::Chunked => {
                    let used = chunks
                        .feed(pending, |d| data.extend_from_slice(d))
                        .map_err(|_| Stop::Broken)?;
                    (used.min(pending.len()), chunks.is_done())
                }
                _ => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(pending.len());
                    data.extend_from_slice(&pending[..n]);
                    left -= n as u64;
                    (n, left == 0)
                }
            };
            bufs.consume(used);
            if done {
                if bufs.data.is_empty() {
                    return out.send.send_data(Bytes::new(), true).map_err(|_| Stop::Peer);
                }
                return self.send_all::<R>(&mut out, &mut bufs.data, true).await;
            }
            // what is short of a chunk after a piece the window cut stays, to go on with the bytes that follow
            while bufs.data.len() >= chunk {
                self.piece::<R>(&mut out, &mut bufs.data, false).await?;
            }
        }
    }

    /// Sends all of `data`; `end`: the last of the body.
    async fn send_all<R: Runtime>(&self, out: &mut Out<'_, '_>, data: &mut BytesMut, end: bool) -> Result<(), Stop> {
        while !data.is_empty() {
            self.piece::<R>(out, data, end).await?;
        }
        Ok(())
    }

    /// Hands h2 the front of `data` (not empty): a whole chunk, or all of `data` when shorter, once h2 has
    /// capacity for it; less only when the window allows no more, which shows as some capacity while h2 holds
    /// nothing of the stream (a send buffer still full shows as capacity too, and more of it comes as h2 writes).
    /// Each wait is bounded by `send_timeout` unless h2 wrote some of the stream meanwhile. `end`: the piece that
    /// takes the last of `data` ends the body.
    async fn piece<R: Runtime>(&self, out: &mut Out<'_, '_>, data: &mut BytesMut, end: bool) -> Result<(), Stop> {
        let want = data.len().min(out.chunk);
        let Out { send, counted, .. } = out;
        send.reserve_capacity(want);
        let n = loop {
            let written = counted.written();
            let granted = std::future::poll_fn(|cx| {
                // take h2's news of capacity, and be woken by the next
                loop {
                    match send.poll_capacity(cx) {
                        Poll::Ready(Some(Ok(_))) => {}
                        Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Err(Stop::Peer)),
                        Poll::Pending => break,
                    }
                }
                let capacity = send.capacity();
                if capacity >= want {
                    return Poll::Ready(Ok(want));
                }
                if capacity > 0 && counted.poll_all_written(cx) {
                    return Poll::Ready(Ok(capacity));
                }
                Poll::Pending
            });
            match timeout::<R, _>(self.send_timeout, granted).await {
                Ok(n) => break n?,
                // the socket took some of the stream meanwhile (slowly): the wait goes on, as nginx's
                // `send_timeout` runs between two writes (one that takes nothing is the connection's to end)
                Err(_) if counted.written() > written => {}
                Err(_) => return Err(Stop::Broken),
            }
        };
        let part = data.split_to(n.min(data.len())).freeze();
        counted.handed(part.len());
        send.send_data(part, end && data.is_empty()).map_err(|_| Stop::Peer)
    }
}

/// Where an answer's body goes: the stream, the count of what h2 holds of it, and the chunk size.
struct Out<'s, 'u> {
    send: &'s mut SendStream<Bytes>,
    counted: Counted<'u>,
    chunk: usize,
}

fn peer_or_failed(e: &h2::Error) -> Relayed {
    match e.is_remote() || e.is_go_away() || e.is_io() {
        true => Relayed::ResetByPeer,
        false => Relayed::Failed,
    }
}

/// Answer headers that are HTTP/1.1's connection management, which HTTP/2 does without.
fn hop_by_hop(name: &http::HeaderName) -> bool {
    use http::header;
    name == header::CONNECTION || name == header::UPGRADE || name == "keep-alive" || name == "proxy-connection"
}

/// The length of the head at the start of `got` (through its empty line), once it is all there.
fn head_end(got: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(n) = memchr::memchr(b'\n', &got[at..]) {
        let line = &got[at..at + n];
        at += n + 1;
        if line.is_empty() || line == b"\r" {
            return Some(at);
        }
    }
    None
}

/// The status code of a head's status line (`HTTP/1.x NNN ...`).
fn status_of(head: &[u8]) -> Option<u16> {
    let code = head.strip_prefix(b"HTTP/1.")?.get(2..5)?;
    if head.get(8) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')))
}

/// The header lines of a head (after its status line, through its empty line): each name and value (the value
/// without the blanks around it). The flow wrote the head (its own lines, or an upstream's that it parsed and
/// checked), so a line is `Name: value`; one without a colon (the empty line) is skipped.
fn header_lines(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut rest = memchr::memchr(b'\n', head).map_or(&[][..], |n| &head[n + 1..]);
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    std::iter::from_fn(move || loop {
        let n = memchr::memchr(b'\n', rest)?;
        let line = &rest[..n];
        rest = &rest[n + 1..];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let value = &line[colon + 1..];
        let from = value.iter().position(|c| !blank(c)).unwrap_or(value.len());
        let to = value.iter().rposition(|c| !blank(c)).map_or(from, |i| i + 1);
        return Some((&line[..colon], &value[from..to]));
    })
}

/// The HTTP/2 response of the HTTP/1.1 head `raw` the flow wrote (status `code`), and how its body is framed. The
/// header values are slices of one copy of the head, not a copy each.
fn response_of(code: u16, raw: &[u8]) -> Result<(http::Response<()>, Body), ()> {
    use http::header;
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(code).map_err(drop)?;
    let mut body = if code == 204 || code == 304 {
        Body::None
    } else {
        Body::ToEnd
    };
    let shared = Bytes::copy_from_slice(raw);
    let base = raw.as_ptr() as usize;
    let map = response.headers_mut();
    for (n, v) in header_lines(raw) {
        let Ok(name) = header::HeaderName::from_bytes(n) else {
            continue;
        };
        if name == header::TRANSFER_ENCODING {
            if body != Body::None {
                body = Body::Chunked;
            }
            continue;
        }
        if hop_by_hop(&name) {
            continue;
        }
        if name == header::CONTENT_LENGTH && body == Body::ToEnd {
            let n = std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()).ok_or(())?;
            body = if n == 0 { Body::None } else { Body::Length(n) };
        }
        // where the value lies in `raw` (the lines are slices of it)
        let at = (v.as_ptr() as usize).wrapping_sub(base);
        let Some(end) = at.checked_add(v.len()).filter(|&e| e <= shared.len()) else {
            continue;
        };
        let Ok(value) = header::HeaderValue::from_maybe_shared(shared.slice(at..end)) else {
            continue;
        };
        map.append(name, value);
    }
    Ok((response, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> (http::Response<()>, Body) {
        let n = head_end(raw).unwrap();
        response_of(status_of(&raw[..n]).unwrap(), &raw[..n]).unwrap()
    }

    #[test]
    fn heads_end_at_their_empty_line_and_blanks_around_values_go() {
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: 1\r\n"), None);
        let raw = b"HTTP/1.1 404 Not Found\r\nX-A:  1 2 \r\nX-B:\r\nBad line\r\n\r\nbody";
        let n = head_end(raw).unwrap();
        assert_eq!(&raw[n..], b"body");
        assert_eq!(status_of(&raw[..n]), Some(404));
        let lines: Vec<_> = header_lines(&raw[..n]).collect();
        assert_eq!(lines, [(&b"X-A"[..], &b"1 2"[..]), (&b"X-B"[..], &b""[..])]);
        assert_eq!(status_of(b"HTTP/1.1 2x0 OK\r\n\r\n"), None);
        assert_eq!(status_of(b"HTTP/2 200\r\n\r\n"), None);
    }

    #[test]
    fn framing_and_hop_by_hop_headers() {
        let (r, b) = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nX-A: 1\r\n\r\n");
        assert_eq!(b, Body::Length(5));
        assert!(r.headers().get("connection").is_none());
        assert_eq!(r.headers().get("x-a").unwrap(), "1");
        let (r, b) = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(b, Body::Chunked);
        assert!(r.headers().get("transfer-encoding").is_none());
        assert_eq!(
            parse(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").1,
            Body::None
        );
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n\r\n").1, Body::ToEnd);
    }
}
