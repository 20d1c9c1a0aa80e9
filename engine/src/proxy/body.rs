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
    /// A chunked request body framed again as nginx's proxy sends it: the data of each read as one chunk, the last
    /// chunk with the last data, without extensions or trailers (`ngx_http_proxy_body_output_filter`).
    Rechunk,
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
            BodyFraming::Chunked if relay == Relay::Rechunk => rechunk(decoder, avail, head, &mut data)?,
            BodyFraming::Chunked => decoder.feed(avail, |d| data += d.len() as u64)?,
        };
        if framing != BodyFraming::Chunked {
            data += used as u64;
        }
        if limits.max_body != 0 && data > limits.max_body {
            return Err(BodyError::TooLarge);
        }
        if !(framing == BodyFraming::Chunked && relay != Relay::Verbatim) {
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

/// Appends to `out` the data of the chunked body's bytes in `avail` as one chunk (none without data), followed by
/// the last chunk when the body ends there; counts the data in `data`; returns the bytes of `avail` that belong to
/// the body.
fn rechunk(decoder: &mut ChunkedDecoder, avail: &[u8], out: &mut Vec<u8>, data: &mut u64) -> Result<usize, ChunkError> {
    let at = out.len();
    let used = decoder.feed(avail, |d| out.extend_from_slice(d))?;
    let size = out.len() - at;
    *data += size as u64;
    if size > 0 {
        let mut line = [0u8; 18];
        let n = hex_line(size as u64, &mut line);
        out.splice(at..at, line[..n].iter().copied());
        out.extend_from_slice(b"\r\n");
    }
    if decoder.is_done() {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    Ok(used)
}

/// Writes `n` in lower-case hex and CRLF (a chunk's size line) into `line`; returns its length.
fn hex_line(n: u64, line: &mut [u8; 18]) -> usize {
    let digits = (64 - n.leading_zeros()).div_ceil(4).max(1) as usize;
    for (i, b) in line[..digits].iter_mut().enumerate() {
        let nibble = (n >> (4 * (digits - 1 - i))) & 0xf;
        *b = b"0123456789abcdef"[nibble as usize];
    }
    line[digits..digits + 2].copy_from_slice(b"\r\n");
    digits + 2
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_read_goes_as_one_chunk_and_the_last_chunk_with_the_last_data() {
        let mut decoder = ChunkedDecoder::new();
        let (mut out, mut data) = (b"HEAD".to_vec(), 0);
        let used = rechunk(&mut decoder, b"5\r\n01234\r\n4;ext\r\nmany\r\n", &mut out, &mut data).unwrap();
        assert_eq!((used, data), (23, 9));
        assert_eq!(out, b"HEAD9\r\n01234many\r\n");
        out.clear();
        let rest = b"a\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nGET /";
        let used = rechunk(&mut decoder, rest, &mut out, &mut data).unwrap();
        assert_eq!(used, rest.len() - 5);
        assert_eq!(out, b"a\r\n0123456789\r\n0\r\n\r\n");
        let mut ended = ChunkedDecoder::new();
        let mut out = Vec::new();
        rechunk(&mut ended, b"0\r\n\r\n", &mut out, &mut data).unwrap();
        assert_eq!(out, b"0\r\n\r\n");
    }

    #[test]
    fn size_lines_are_lower_case_hex() {
        let mut line = [0u8; 18];
        for (n, text) in [
            (0u64, "0\r\n"),
            (9, "9\r\n"),
            (0x1f40, "1f40\r\n"),
            (u64::MAX, "ffffffffffffffff\r\n"),
        ] {
            let len = hex_line(n, &mut line);
            assert_eq!(&line[..len], text.as_bytes());
        }
    }
}
