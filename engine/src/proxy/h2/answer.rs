//! A stream's answer: the HTTP/1.1 head the flow wrote, parsed back (httparse) into the HTTP/2 response's
//! HEADERS, its body (by `Content-Length`, chunks, or the end of the pipe) sent as DATA frames of at most
//! `http2_chunk_size` within the client's flow-control window, each wait for window bounded by `send_timeout`.

use crate::http::chunked::ChunkedDecoder;
use crate::runtime::pipe::PipeEnd;
use crate::runtime::{timeout, Runtime};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;
use std::cell::Cell;
use std::time::Duration;

/// The largest answer head the flow writes that is relayed (corelb's own heads and an upstream's, rewritten,
/// are far smaller); larger is a 502.
const MAX_HEAD: usize = 64 * 1024;
/// Header lines of an answer head at most.
const MAX_HEADERS: usize = 128;

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

impl Relay<'_> {
    /// Reads the answer from the pipe and sends it on `respond`.
    pub(super) async fn run<R: Runtime>(self, mut respond: SendResponse<Bytes>) -> Relayed {
        let mut buf = Vec::with_capacity(4096);
        let (response, body, rest) = loop {
            match self.read_head(&mut buf).await {
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
        match self.body::<R>(&mut send, body, &buf[rest..], chunk).await {
            Ok(()) => Relayed::Done,
            Err(Stop::Peer) => Relayed::ResetByPeer,
            Err(Stop::Broken) => {
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                Relayed::Failed
            }
        }
    }

    /// Reads until `buf` holds a whole head: the response and its framing, with where its body starts in `buf`
    /// (`None`: an interim 1xx answer, consumed).
    async fn read_head(&self, buf: &mut Vec<u8>) -> Result<Option<(http::Response<()>, Body, usize)>, ()> {
        loop {
            if !buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut parsed = httparse::Response::new(&mut headers);
                match parsed.parse(buf) {
                    Ok(httparse::Status::Complete(n)) => {
                        let code = parsed.code.unwrap_or(502);
                        if (100..200).contains(&code) {
                            buf.drain(..n);
                            return Ok(None);
                        }
                        let (response, body) = response_of(code, parsed.headers)?;
                        return Ok(Some((response, body, n)));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => return Err(()),
                }
            }
            if buf.len() >= MAX_HEAD {
                return Err(());
            }
            let at = buf.len();
            buf.resize(at + 4096, 0);
            let n = self.pipe.read(&mut buf[at..]).await.map_err(drop)?;
            buf.truncate(at + n);
            if n == 0 {
                return Err(());
            }
        }
    }

    /// Sends the body: `first` (read with the head), then the rest from the pipe.
    async fn body<R: Runtime>(
        &self,
        send: &mut SendStream<Bytes>,
        body: Body,
        first: &[u8],
        chunk: usize,
    ) -> Result<(), Stop> {
        let mut left = match body {
            Body::Length(n) => n,
            _ => u64::MAX,
        };
        let mut chunks = ChunkedDecoder::new();
        let mut data: Vec<u8> = Vec::with_capacity(chunk.min(64 * 1024));
        let mut read = vec![0u8; chunk.clamp(4096, 16 * 1024)];
        let mut pending = first.to_vec();
        // the flow was given its turn since the pipe was found empty
        let mut yielded = false;
        loop {
            if pending.is_empty() {
                // a frame short of the chunk size waits only for bytes already there, and for what the flow
                // writes when it gets its turn (it shares this task): then it goes out
                let n = if data.is_empty() {
                    self.pipe.read(&mut read).await.map_err(|_| Stop::Broken)?
                } else {
                    let now = futures_lite::future::poll_once(self.pipe.read(&mut read)).await;
                    match now {
                        Some(r) => r.map_err(|_| Stop::Broken)?,
                        None if !yielded => {
                            yielded = true;
                            futures_lite::future::yield_now().await;
                            continue;
                        }
                        None => {
                            yielded = false;
                            self.send::<R>(send, std::mem::take(&mut data), false, chunk).await?;
                            continue;
                        }
                    }
                };
                yielded = false;
                if n == 0 && !data.is_empty() {
                    self.send::<R>(send, std::mem::take(&mut data), false, chunk).await?;
                }
                if n == 0 {
                    // the end of the pipe ends a body read to its end; any other is cut short
                    return match body {
                        Body::ToEnd => self.send::<R>(send, Vec::new(), true, chunk).await,
                        _ => Err(Stop::Broken),
                    };
                }
                pending.extend_from_slice(&read[..n]);
            }
            match body {
                Body::Chunked => {
                    let used = chunks
                        .feed(&pending, |d| data.extend_from_slice(d))
                        .map_err(|_| Stop::Broken)?;
                    pending.drain(..used.min(pending.len()));
                    if chunks.is_done() {
                        return self.send::<R>(send, std::mem::take(&mut data), true, chunk).await;
                    }
                }
                _ => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(pending.len());
                    data.extend_from_slice(&pending[..n]);
                    pending.drain(..n);
                    left -= n as u64;
                    if left == 0 {
                        return self.send::<R>(send, std::mem::take(&mut data), true, chunk).await;
                    }
                }
            }
            while data.len() >= chunk {
                let rest = data.split_off(chunk);
                self.send::<R>(send, std::mem::replace(&mut data, rest), false, chunk)
                    .await?;
            }
        }
    }

    /// Sends `data` as DATA frames within the window (waiting at most `send_timeout` for each opening); `end`:
    /// the last of the body.
    async fn send<R: Runtime>(
        &self,
        send: &mut SendStream<Bytes>,
        data: Vec<u8>,
        end: bool,
        chunk: usize,
    ) -> Result<(), Stop> {
        let mut data = Bytes::from(data);
        if data.is_empty() {
            return send.send_data(data, end).map_err(|_| Stop::Peer);
        }
        while !data.is_empty() {
            send.reserve_capacity(data.len().min(chunk));
            let granted = timeout::<R, _>(self.send_timeout, std::future::poll_fn(|cx| send.poll_capacity(cx)));
            let n = match granted.await {
                Ok(Some(Ok(n))) => n,
                Ok(Some(Err(_)) | None) => return Err(Stop::Peer),
                Err(_) => return Err(Stop::Broken),
            };
            if n == 0 {
                continue;
            }
            let part = data.split_to(n.min(data.len()).min(chunk));
            send.send_data(part, end && data.is_empty()).map_err(|_| Stop::Peer)?;
        }
        Ok(())
    }
}

fn peer_or_failed(e: &h2::Error) -> Relayed {
    match e.is_remote() || e.is_go_away() || e.is_io() {
        true => Relayed::ResetByPeer,
        false => Relayed::Failed,
    }
}

/// Answer headers that are HTTP/1.1's framing or connection management, which HTTP/2 does without.
fn hop_by_hop(name: &str) -> bool {
    name.eq_ignore_ascii_case("connection")
        || name.eq_ignore_ascii_case("keep-alive")
        || name.eq_ignore_ascii_case("transfer-encoding")
        || name.eq_ignore_ascii_case("proxy-connection")
        || name.eq_ignore_ascii_case("upgrade")
}

/// The HTTP/2 response of a parsed HTTP/1.1 head, and how its body is framed.
fn response_of(code: u16, headers: &[httparse::Header<'_>]) -> Result<(http::Response<()>, Body), ()> {
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(code).map_err(drop)?;
    let mut body = if code == 204 || code == 304 {
        Body::None
    } else {
        Body::ToEnd
    };
    let map = response.headers_mut();
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if body != Body::None {
                body = Body::Chunked;
            }
            continue;
        }
        if hop_by_hop(h.name) {
            continue;
        }
        if h.name.eq_ignore_ascii_case("content-length") && body == Body::ToEnd {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or(())?;
            body = if n == 0 { Body::None } else { Body::Length(n) };
        }
        let Ok(name) = http::HeaderName::from_bytes(h.name.as_bytes()) else {
            continue;
        };
        let Ok(value) = http::HeaderValue::from_bytes(h.value) else {
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
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        r.parse(raw).unwrap();
        response_of(r.code.unwrap(), r.headers).unwrap()
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
