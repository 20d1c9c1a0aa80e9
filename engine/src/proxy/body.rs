//! Moving bytes for one HTTP exchange: a body forwarder that streams a body of any
//! framing from one connection to another without holding it whole (the first piece coalesced with the head).

use crate::http::chunked::{ChunkError, ChunkedDecoder};
use crate::http::BodyFraming;
use crate::runtime::iobuf::IoBuf;
use crate::runtime::{io_timeout, Conn, Runtime};
use futures_lite::AsyncWriteExt;
use std::io;
use std::time::Duration;

/// Where forwarding a body stopped.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("reading the body: {0}")]
    Read(io::Error),
    #[error("the sender closed before the end of the body")]
    Truncated,
    #[error("writing the body: {0}")]
    Write(io::Error),
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    #[error("the body is larger than allowed")]
    TooLarge,
}

/// How a body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay {
    /// As it came (a chunked body stays chunked).
    Verbatim,
    /// A chunked body with its framing removed (for HTTP/1.0 clients).
    Dechunk,
}

/// The time limits of one forward.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub read: Duration,
    pub write: Duration,
    /// Most body bytes (chunk data for a chunked body) accepted; 0 = no limit (`client_max_body_size`).
    pub max_body: u64,
}

/// How one body is copied: its framing, how it goes out, and the limits.
#[derive(Debug, Clone, Copy)]
pub struct BodyCopy {
    pub framing: BodyFraming,
    pub relay: Relay,
    pub limits: Limits,
    /// An answer's `limit_rate` (the head counts, as nginx counts every byte sent).
    pub pace: Option<super::limit_rate::RateLimit>,
}

/// Forwards a body framed as `copy.framing` from `src` (whose already-read bytes are in `buf`) to `dst`. `head`
/// holds bytes to write first (a message head); the first body piece is appended to it so they go out in one
/// write. Bytes after the body stay in `buf`. Returns the body bytes read from `src`.
pub async fn forward_body<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    decoder: &mut ChunkedDecoder,
    dst: &mut R::Conn,
    head: &mut Vec<u8>,
    copy: BodyCopy,
) -> Result<u64, BodyError> {
    let BodyCopy {
        framing,
        relay,
        limits,
        pace,
    } = copy;
    let mut pacer = pace.map(|limit| super::limit_rate::Pacer::new(limit, std::time::Instant::now()));
    decoder.reset();
    let mut left = match framing {
        BodyFraming::Length(n) => n,
        _ => u64::MAX,
    };
    let mut total = 0u64;
    let mut data = 0u64;
    loop {
        let avail = buf.readable();
        let used = match framing {
            BodyFraming::None => 0,
            BodyFraming::Length(_) => usize::try_from(left).unwrap_or(usize::MAX).min(avail.len()),
            BodyFraming::UntilClose => avail.len(),
            BodyFraming::Chunked if relay == Relay::Dechunk => decoder.feed(avail, |d| {
                data += d.len() as u64;
                head.extend_from_slice(d)
            })?,
            BodyFraming::Chunked => decoder.feed(avail, |d| data += d.len() as u64)?,
        };
        if framing != BodyFraming::Chunked {
            data += used as u64;
        }
        if limits.max_body != 0 && data > limits.max_body {
            return Err(BodyError::TooLarge);
        }
        if !(framing == BodyFraming::Chunked && relay == Relay::Dechunk) {
            head.extend_from_slice(&avail[..used]);
        }
        buf.consume(used);
        total += used as u64;
        if framing != BodyFraming::Chunked {
            left -= used as u64;
        }
        if !head.is_empty() {
            // without `limit_rate` the plain send: no pacing future on the common path
            match pacer.as_mut() {
                None => send::<R>(dst, head, limits.write).await,
                Some(p) => super::limit_rate::send_paced::<R>(dst, head, limits.write, Some(p)).await,
            }
            .map_err(BodyError::Write)?;
            head.clear();
        }
        let done = match framing {
            BodyFraming::None => true,
            BodyFraming::Length(_) => left == 0,
            BodyFraming::Chunked => decoder.is_done(),
            BodyFraming::UntilClose => false,
        };
        if done {
            return Ok(total);
        }
        match buf.fill::<R>(src, limits.read).await {
            Ok(0) if framing == BodyFraming::UntilClose => return Ok(total),
            Ok(0) => return Err(BodyError::Truncated),
            Ok(_) => {}
            Err(e) => return Err(BodyError::Read(e)),
        }
    }
}

/// Reads and drops a request body (a fixed answer does not need it); bytes after it stay in `buf`.
pub async fn discard_body<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    framing: BodyFraming,
    decoder: &mut ChunkedDecoder,
    timeout: Duration,
) -> Result<(), BodyError> {
    read_body::<R>(src, buf, framing, decoder, timeout, |_| Ok(())).await
}

/// Reads a request body whole into `out` (for corelb's own endpoints), refusing more than `limit` bytes.
pub async fn collect_body<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    framing: BodyFraming,
    decoder: &mut ChunkedDecoder,
    timeout: Duration,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), BodyError> {
    out.clear();
    read_body::<R>(src, buf, framing, decoder, timeout, |d| {
        if out.len() + d.len() > limit {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(d);
        Ok(())
    })
    .await
}

/// Reads a request body, handing each piece of its data (chunk framing removed) to `sink`; bytes after it stay
/// in `buf`.
async fn read_body<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    framing: BodyFraming,
    decoder: &mut ChunkedDecoder,
    timeout: Duration,
    mut sink: impl FnMut(&[u8]) -> Result<(), BodyError>,
) -> Result<(), BodyError> {
    decoder.reset();
    let mut left = match framing {
        BodyFraming::Length(n) => n,
        BodyFraming::None => return Ok(()),
        _ => u64::MAX,
    };
    loop {
        let avail = buf.readable();
        let mut sunk = Ok(());
        let used = match framing {
            BodyFraming::Chunked => decoder.feed(avail, |d| {
                if sunk.is_ok() {
                    sunk = sink(d);
                }
            })?,
            _ => {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(avail.len());
                sunk = sink(&avail[..n]);
                n
            }
        };
        sunk?;
        buf.consume(used);
        left -= used as u64;
        if left == 0 || decoder.is_done() {
            return Ok(());
        }
        match buf.fill::<R>(src, timeout).await {
            Ok(0) => return Err(BodyError::Truncated),
            Ok(_) => {}
            Err(e) => return Err(BodyError::Read(e)),
        }
    }
}

/// Writes `bytes` to `conn`, giving up when one write makes no progress for `timeout` (nginx's `send_timeout`
/// and `proxy_send_timeout` run between two successive writes, not over the whole transfer).
pub async fn send<R: Runtime>(conn: &mut impl Conn, mut bytes: &[u8], timeout: Duration) -> io::Result<()> {
    while !bytes.is_empty() {
        match io_timeout::<R, _>(timeout, conn.write(bytes)).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => bytes = bytes.get(n..).unwrap_or_default(),
        }
    }
    conn.flush().await
}
