//! `sendfile on`: a file's bytes handed from the page cache to the client's socket with sendfile(2), no copy
//! through a buffer of corelb's (nginx's `ngx_linux_sendfile_chain`).

use super::body::send;
use crate::runtime::{io_timeout, Conn, Runtime};
use std::fs::File;
use std::io;
use std::time::Duration;

/// What one file answer sends by sendfile(2).
pub struct FileSpan<'f> {
    pub file: &'f File,
    /// The bytes `[start, end)` of the file.
    pub start: u64,
    pub end: u64,
    /// `sendfile_max_chunk`: at most this many bytes a call (`0`: no limit), so that one fast client does not keep
    /// the shard's other connections waiting.
    pub max_chunk: u64,
    /// `send_timeout`: between two calls that move bytes.
    pub timeout: Duration,
}

/// Sends `head` (what the answer has before the file's bytes: its head, a part's header), then the span by
/// sendfile(2), calling `sent` with the file bytes sent so far after each call. Whether the span was sent whole:
/// a file that shrank under the answer was not (nginx's "file was truncated"), and the connection must close.
pub async fn send_span<R: Runtime>(
    sock: &mut impl Conn,
    head: &[u8],
    span: FileSpan<'_>,
    mut sent: impl FnMut(u64),
) -> io::Result<bool> {
    if !head.is_empty() {
        send::<R>(sock, head, span.timeout).await?;
    }
    let (mut pos, mut total) = (span.start, 0u64);
    while pos < span.end {
        let mut want = span.end - pos;
        if span.max_chunk > 0 {
            want = want.min(span.max_chunk);
        }
        let want = usize::try_from(want).unwrap_or(usize::MAX);
        let n = io_timeout::<R, _>(span.timeout, sock.send_file(span.file, pos, want)).await? as u64;
        if n == 0 {
            return Ok(false);
        }
        pos += n;
        total += n;
        sent(total);
        if span.max_chunk > 0 && n >= span.max_chunk {
            // nginx posts the connection's write event after a full chunk: the shard's other tasks run first
            futures_lite::future::yield_now().await;
        }
    }
    Ok(true)
}
