//! One request/response exchange on a client connection: the request written in one call, the response head
//! parsed with httparse, the body (`Content-Length`, chunked, or until close) read into a reused buffer and
//! dropped; or, in echo mode, the payload written and the same bytes read back.

use super::stats::ErrorKind;
use corelb_engine::http::chunked::{ChunkError, ChunkedDecoder};
use corelb_engine::http::response::{parse_response, MAX_HEADERS};
use corelb_engine::http::BodyFraming;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use std::io;

/// The read buffer of a connection; a response head must fit in it.
pub const BUF_SIZE: usize = 16 * 1024;

/// Why an exchange failed (the connection is closed after any of these).
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("write: {0}")]
    /// Writing the request failed.
    Write(io::Error),
    #[error("read: {0}")]
    /// Reading the response failed.
    Read(io::Error),
    #[error("the server closed the connection")]
    /// The server closed the connection before the response was complete.
    Closed,
    #[error("invalid response: {0}")]
    /// The response head or its framing is not valid HTTP/1.x.
    Invalid(&'static str),
    #[error("invalid chunked body: {0}")]
    /// The chunked body is malformed.
    Chunked(#[from] ChunkError),
}

impl ExchangeError {
    /// The socket error kind this counts as (wrk counts a bad or cut-short response as a read error).
    pub fn kind(&self) -> ErrorKind {
        match self {
            ExchangeError::Write(_) => ErrorKind::Write,
            _ => ErrorKind::Read,
        }
    }
}

/// A completed exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The status code (`None` in echo mode).
    pub status: Option<u16>,
    /// Bytes read for this response.
    pub read: u64,
    /// Whether the connection can carry the next request.
    pub reusable: bool,
}

/// The facts of a response head the client needs.
#[derive(Debug, Clone, Copy)]
struct Head {
    status: u16,
    len: usize,
    body: BodyFraming,
    reusable: bool,
}

fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ExchangeError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match parse_response(buf, &mut headers, head_request) {
        Ok(Some(h)) => Ok(Some(Head {
            status: h.status,
            len: h.head_len,
            body: h.body,
            reusable: h.reusable,
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(ExchangeError::Invalid(e.0)),
    }
}

/// Reads at least one byte into `buf`; end of stream is [`ExchangeError::Closed`].
async fn read_some<S: AsyncRead + Unpin>(s: &mut S, buf: &mut [u8]) -> Result<usize, ExchangeError> {
    match s.read(buf).await {
        Ok(0) => Err(ExchangeError::Closed),
        Ok(n) => Ok(n),
        Err(e) => Err(ExchangeError::Read(e)),
    }
}

/// A connection's reusable exchange state: the read buffer and the chunked decoder.
#[derive(Debug)]
pub struct Exchanger {
    buf: Vec<u8>,
    chunked: ChunkedDecoder,
}

impl Default for Exchanger {
    fn default() -> Self {
        Exchanger {
            buf: vec![0; BUF_SIZE],
            chunked: ChunkedDecoder::new(),
        }
    }
}

impl Exchanger {
    /// Writes `request` and reads one HTTP response; `head_request` means the response has no body.
    pub async fn http<S>(&mut self, s: &mut S, request: &[u8], head_request: bool) -> Result<Response, ExchangeError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        s.write_all(request).await.map_err(ExchangeError::Write)?;
        let mut filled = 0;
        let mut read = 0u64;
        let head = loop {
            if let Some(h) = parse_head(self.buf.get(..filled).unwrap_or_default(), head_request)? {
                if (100..200).contains(&h.status) && h.status != 101 {
                    // An interim response (100 Continue, 103 Early Hints): drop it, the final one follows.
                    self.buf.copy_within(h.len..filled, 0);
                    filled -= h.len;
                    continue;
                }
                break h;
            }
            let free = self.buf.get_mut(filled..).unwrap_or_default();
            if free.is_empty() {
                return Err(ExchangeError::Invalid("response head larger than 16 KiB"));
            }
            let n = read_some(s, free).await?;
            filled += n;
            read += n as u64;
        };
        let rest = filled - head.len;
        let mut reusable = head.reusable;
        read += match head.body {
            BodyFraming::None if rest > 0 => return Err(ExchangeError::Invalid("bytes after the response")),
            BodyFraming::None => 0,
            BodyFraming::Length(n) => {
                let left = n
                    .checked_sub(rest as u64)
                    .ok_or(ExchangeError::Invalid("bytes after the response"))?;
                self.skip_exact(s, left).await?
            }
            BodyFraming::Chunked => self.skip_chunked(s, head.len, filled).await?,
            BodyFraming::UntilClose => {
                reusable = false;
                self.skip_to_close(s).await?
            }
        };
        Ok(Response {
            status: Some(head.status),
            read,
            reusable,
        })
    }

    /// Reads and drops exactly `left` bytes; returns them counted.
    async fn skip_exact<S: AsyncRead + Unpin>(&mut self, s: &mut S, mut left: u64) -> Result<u64, ExchangeError> {
        let total = left;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(self.buf.len());
            let n = read_some(s, &mut self.buf[..want]).await?;
            left -= n as u64;
        }
        Ok(total)
    }

    /// Decodes a chunked body whose first bytes are `buf[start..filled]`; returns the bytes read after those.
    async fn skip_chunked<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        start: usize,
        filled: usize,
    ) -> Result<u64, ExchangeError> {
        self.chunked.reset();
        let first = self.buf.get(start..filled).unwrap_or_default();
        let used = self.chunked.feed(first, |_| {})?;
        if self.chunked.is_done() {
            return if used == first.len() {
                Ok(0)
            } else {
                Err(ExchangeError::Invalid("bytes after the response"))
            };
        }
        let mut read = 0u64;
        loop {
            let n = read_some(s, &mut self.buf).await?;
            read += n as u64;
            let used = self.chunked.feed(&self.buf[..n], |_| {})?;
            if self.chunked.is_done() {
                return if used == n {
                    Ok(read)
                } else {
                    Err(ExchangeError::Invalid("bytes after the response"))
                };
            }
        }
    }

    async fn skip_to_close<S: AsyncRead + Unpin>(&mut self, s: &mut S) -> Result<u64, ExchangeError> {
        let mut read = 0u64;
        loop {
            match s.read(&mut self.buf).await {
                Ok(0) => return Ok(read),
                Ok(n) => read += n as u64,
                Err(e) => return Err(ExchangeError::Read(e)),
            }
        }
    }

    /// Writes `payload` and reads the same bytes back.
    pub async fn echo<S>(&mut self, s: &mut S, payload: &[u8]) -> Result<Response, ExchangeError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        s.write_all(payload).await.map_err(ExchangeError::Write)?;
        let mut got = 0;
        while got < payload.len() {
            let want = (payload.len() - got).min(self.buf.len());
            let n = read_some(s, &mut self.buf[..want]).await?;
            if self.buf.get(..n) != payload.get(got..got + n) {
                return Err(ExchangeError::Invalid("the echo differs from the payload"));
            }
            got += n;
        }
        Ok(Response {
            status: None,
            read: payload.len() as u64,
            reusable: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A stream that returns `input` in pieces of `step` bytes and collects what is written.
    struct Scripted {
        input: Vec<u8>,
        pos: usize,
        step: usize,
        written: Vec<u8>,
    }

    impl Scripted {
        fn new(input: &[u8], step: usize) -> Self {
            Scripted {
                input: input.to_vec(),
                pos: 0,
                step,
                written: Vec::new(),
            }
        }
    }

    impl AsyncRead for Scripted {
        fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            let n = self.step.min(buf.len()).min(self.input.len() - self.pos);
            let pos = self.pos;
            buf[..n].copy_from_slice(&self.input[pos..pos + n]);
            self.pos += n;
            Poll::Ready(Ok(n))
        }
    }

    impl AsyncWrite for Scripted {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn exchange(input: &[u8], step: usize, head: bool) -> Result<(Response, usize), ExchangeError> {
        let mut s = Scripted::new(input, step);
        let mut ex = Exchanger::default();
        let r = block_on(ex.http(&mut s, b"GET / HTTP/1.1\r\n\r\n", head))?;
        assert_eq!(s.written, b"GET / HTTP/1.1\r\n\r\n");
        Ok((r, s.pos))
    }

    #[test]
    fn reads_every_body_framing_in_any_split() {
        let cases: [(&[u8], u16, bool); 5] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, true),
            (
                b"HTTP/1.1 404 NF\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                404,
                true,
            ),
            (b"HTTP/1.1 204 No\r\n\r\n", 204, true),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 C\r\nContent-Length: 1\r\n\r\nx",
                201,
                true,
            ),
            (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", 200, false),
        ];
        for (input, status, reusable) in cases {
            for step in [1, 3, 1000] {
                let (r, consumed) = exchange(input, step, false).unwrap();
                assert_eq!((r.status, r.reusable), (Some(status), reusable), "step {step}");
                assert_eq!((r.read as usize, consumed), (input.len(), input.len()));
            }
        }
        let (r, _) = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 100, true).unwrap();
        assert_eq!(r.status, Some(200));
    }

    #[test]
    fn rejects_broken_responses() {
        let bad = |input: &[u8]| exchange(input, 100, false).unwrap_err();
        assert!(matches!(bad(b""), ExchangeError::Closed));
        assert!(matches!(
            bad(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"),
            ExchangeError::Closed
        ));
        assert!(matches!(bad(b"NOT HTTP\r\n\r\n"), ExchangeError::Invalid(_)));
        assert!(matches!(
            bad(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"),
            ExchangeError::Invalid(_)
        ));
        assert!(matches!(
            bad(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            ExchangeError::Chunked(_)
        ));
        assert_eq!(bad(b"").kind(), ErrorKind::Read);
    }

    #[test]
    fn echoes() {
        let mut ex = Exchanger::default();
        let mut s = Scripted::new(b"ping", 1);
        let r = block_on(ex.echo(&mut s, b"ping")).unwrap();
        assert_eq!((r.status, r.read, s.written.as_slice()), (None, 4, &b"ping"[..]));
        let mut s = Scripted::new(b"pong", 2);
        assert!(matches!(
            block_on(ex.echo(&mut s, b"ping")),
            Err(ExchangeError::Invalid(_))
        ));
    }
}
