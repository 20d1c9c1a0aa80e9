//! A runtime's connection seen through tokio's `AsyncRead`/`AsyncWrite` (what the h2 crate drives), with bytes
//! already read from it (the HTTP/2 preface a plain connection was recognized by) served first. h2's futures need
//! tokio's io traits only, not its runtime, so glommio's connections go through this too.

use super::Conn;
use futures_lite::AsyncWrite;
use std::io;
use std::mem::MaybeUninit;
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

impl<C: Conn> TokioRead for TokioIo<C> {
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
        // h2's codec hands a fresh `ReadBuf` over its spare capacity to each read: zeroing it first (as
        // `initialize_unfilled` does) cost more than the read itself (8 KiB per read)
        // SAFETY: the unfilled part is given to the connection's read as a byte slice that it only writes into
        // (a socket's recv, rustls's or the pipe's copy, glommio's copy; see `Conn`), never reads; the `n` bytes
        // it reports written are then initialized, as tokio's own `TcpStream::poll_read` does it
        let dst = unsafe { &mut *(std::ptr::from_mut::<[MaybeUninit<u8>]>(buf.unfilled_mut()) as *mut [u8]) };
        match Pin::new(&mut me.conn).poll_read(cx, dst) {
            Poll::Ready(Ok(n)) => {
                let n = n.min(dst.len());
                // SAFETY: the read wrote these `n` bytes
                unsafe { buf.assume_init(n) };
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
