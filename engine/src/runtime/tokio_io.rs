//! A runtime's connection seen through tokio's `AsyncRead`/`AsyncWrite` (what the h2 crate drives), with bytes
//! already read from it (the HTTP/2 preface a plain connection was recognized by) served first. h2's futures need
//! tokio's io traits only, not its runtime, so glommio's connections go through this too.

use futures_lite::{AsyncRead, AsyncWrite};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead as TokioRead, AsyncWrite as TokioWrite, ReadBuf};

/// `C` with tokio's io traits; `pending` is read before `C`.
#[derive(Debug)]
pub struct TokioIo<C> {
    conn: C,
    pending: Vec<u8>,
    at: usize,
}

impl<C> TokioIo<C> {
    pub fn new(conn: C, pending: Vec<u8>) -> Self {
        TokioIo { conn, pending, at: 0 }
    }

    /// The connection.
    pub fn get_ref(&self) -> &C {
        &self.conn
    }
}

impl<C: AsyncRead + Unpin> TokioRead for TokioIo<C> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.at < me.pending.len() {
            let left = &me.pending[me.at..];
            let n = left.len().min(buf.remaining());
            buf.put_slice(&left[..n]);
            me.at += n;
            if me.at == me.pending.len() {
                me.pending = Vec::new();
                me.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let dst = buf.initialize_unfilled();
        match Pin::new(&mut me.conn).poll_read(cx, dst) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<C: AsyncWrite + Unpin> TokioWrite for TokioIo<C> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_close(cx)
    }
}
