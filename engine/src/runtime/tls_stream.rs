//! A runtime's byte stream, plain or TLS (a client's session, or one to an `https` upstream): one enum so the
//! request path and the upstream pool stay one code path over all, and a plain connection pays one match per read
//! or write.

use super::pipe::PipeEnd;
use super::Conn;
use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::client::TlsStream as ClientStream;
use futures_rustls::server::TlsStream;
use rustls::pki_types::ServerName;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A connection as the proxy reads and writes it: the runtime's TCP stream, or a TLS session over it.
#[derive(Debug)]
pub enum MaybeTls<S> {
    Plain(S),
    /// A server-side TLS session whose handshake is done (boxed: the session is large, plain streams are not).
    Tls(Box<TlsStream<S>>),
    /// A client-side TLS session to an upstream whose handshake is done.
    Upstream(Box<ClientStream<S>>),
    /// One HTTP/2 stream's request and answer as HTTP/1.1 bytes, over an in-memory pipe ([`super::pipe`]).
    Bridge(Box<PipeEnd>),
}

/// What a plain stream can do beyond reads and writes: look at the next bytes without taking them.
pub trait Peek {
    /// Waits for bytes and copies the first of them into `buf` without consuming them (0: end of stream).
    fn peek(&self, buf: &mut [u8]) -> impl std::future::Future<Output = io::Result<usize>>;

    /// [`Peek::peek`] for a watch that nearly always ends dropped, long before a byte comes (a client watched while
    /// its upstream is asked): a runtime whose wait is dear to start and to cancel starts it late.
    fn watch(&self, buf: &mut [u8]) -> impl std::future::Future<Output = io::Result<usize>> {
        self.peek(buf)
    }
}

// The plain arm is the hot path: it inlines into the caller as the bare stream's call did, and the TLS arm (the
// session's record layer) stays out of line, so that a plain connection's reads and writes cost one compare.

#[inline(never)]
fn tls_read<T: AsyncRead + Unpin>(t: &mut T, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
    Pin::new(t).poll_read(cx, buf)
}

#[inline(never)]
fn tls_write<T: AsyncWrite + Unpin>(t: &mut T, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    Pin::new(t).poll_write(cx, buf)
}

#[inline(never)]
fn tls_flush<T: AsyncWrite + Unpin>(t: &mut T, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(t).poll_flush(cx)
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<S> {
    #[inline(always)]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(t) => tls_read(&mut **t, cx, buf),
            MaybeTls::Upstream(t) => tls_read(&mut **t, cx, buf),
            MaybeTls::Bridge(p) => p.poll_read_into(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<S> {
    #[inline(always)]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(t) => tls_write(&mut **t, cx, buf),
            MaybeTls::Upstream(t) => tls_write(&mut **t, cx, buf),
            MaybeTls::Bridge(p) => p.poll_write_from(cx, buf),
        }
    }

    #[inline(always)]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(t) => tls_flush(&mut **t, cx),
            MaybeTls::Upstream(t) => tls_flush(&mut **t, cx),
            MaybeTls::Bridge(_) => Poll::Ready(Ok(())),
        }
    }

    /// A TLS session sends its `close_notify` first, then half-closes the socket.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_close(cx),
            MaybeTls::Tls(t) => Pin::new(&mut **t).poll_close(cx),
            MaybeTls::Upstream(t) => Pin::new(&mut **t).poll_close(cx),
            MaybeTls::Bridge(p) => {
                p.shutdown();
                Poll::Ready(Ok(()))
            }
        }
    }
}

/// The plain stream under a connection.
pub trait Tcp: AsyncRead + AsyncWrite + Unpin + Peek + 'static {
    fn set_nodelay(&self, on: bool) -> io::Result<()>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// Whether [`Tcp::send_file`] works on this runtime's sockets.
    fn can_send_file(&self) -> bool {
        false
    }
    /// sendfile(2) of up to `len` bytes of `file` from `offset` once the socket is writable (see
    /// [`Conn::send_file`]).
    fn send_file(
        &self,
        _file: &std::fs::File,
        _offset: u64,
        _len: usize,
    ) -> impl std::future::Future<Output = io::Result<usize>> {
        std::future::ready(Err(io::ErrorKind::Unsupported.into()))
    }
    /// The socket's descriptor (open for the stream's life).
    fn fd(&self) -> std::os::fd::RawFd;
}

impl<S: Tcp> Conn for MaybeTls<S> {
    fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self.tcp() {
            Some(s) => s.set_nodelay(on),
            None => Ok(()),
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match (self.tcp(), self) {
            (Some(s), _) => s.local_addr(),
            (None, MaybeTls::Bridge(p)) => Ok(p.local_addr()),
            (None, _) => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    fn bridge(end: PipeEnd) -> Self {
        MaybeTls::Bridge(Box::new(end))
    }

    fn can_send_file(&self) -> bool {
        matches!(self, MaybeTls::Plain(s) if s.can_send_file())
    }

    async fn send_file(&self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        match self {
            MaybeTls::Plain(s) => s.send_file(file, offset, len).await,
            _ => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    /// A `recv` of one byte with `MSG_PEEK | MSG_DONTWAIT` on the socket under the session.
    fn bytes_waiting(&self) -> bool {
        let Some(s) = self.tcp() else {
            return false;
        };
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer of ours; the descriptor is the stream's, open while `s` is borrowed.
        let n = unsafe {
            libc::recv(
                s.fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n > 0
    }

    /// Peeks at the socket under the session, as nginx does for TLS connections too (the session's buffered
    /// records are not looked at: a close is seen in the socket).
    async fn closed(&self) {
        let Some(s) = self.tcp() else {
            return std::future::pending().await;
        };
        let mut byte = [0u8; 1];
        match s.watch(&mut byte).await {
            Ok(0) | Err(_) => {}
            Ok(_) => std::future::pending().await,
        }
    }

    /// A TLS stream has nothing to peek at before its session's own reads.
    async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MaybeTls::Plain(s) => s.peek(buf).await,
            MaybeTls::Tls(_) | MaybeTls::Upstream(_) | MaybeTls::Bridge(_) => {
                Err(io::Error::new(io::ErrorKind::Unsupported, "peek on a TLS stream"))
            }
        }
    }

    async fn accept_tls(self, config: Arc<rustls::ServerConfig>, session_id: [u8; 32]) -> io::Result<Self> {
        match self {
            MaybeTls::Plain(s) => {
                let acceptor = futures_rustls::TlsAcceptor::from(config);
                let tls = acceptor.accept_with(s, |c| c.set_resumption_data(&session_id)).await?;
                Ok(MaybeTls::Tls(Box::new(tls)))
            }
            tls => Ok(tls),
        }
    }

    async fn connect_tls(self, config: Arc<rustls::ClientConfig>, name: ServerName<'static>) -> io::Result<Self> {
        match self {
            MaybeTls::Plain(s) => {
                let tls = futures_rustls::TlsConnector::from(config).connect(name, s).await?;
                Ok(MaybeTls::Upstream(Box::new(tls)))
            }
            tls => Ok(tls),
        }
    }

    fn tls(&self) -> Option<&rustls::ServerConnection> {
        match self {
            MaybeTls::Tls(t) => Some(t.get_ref().1),
            _ => None,
        }
    }

    fn upstream_tls(&self) -> Option<&rustls::ClientConnection> {
        match self {
            MaybeTls::Upstream(t) => Some(t.get_ref().1),
            _ => None,
        }
    }
}

impl<S> MaybeTls<S> {
    /// The TCP stream, under the TLS session if there is one (none under an HTTP/2 stream's pipe).
    fn tcp(&self) -> Option<&S> {
        match self {
            MaybeTls::Plain(s) => Some(s),
            MaybeTls::Tls(t) => Some(t.get_ref().0),
            MaybeTls::Upstream(t) => Some(t.get_ref().0),
            MaybeTls::Bridge(_) => None,
        }
    }

    /// The plain stream, for a connection whose TLS session has not begun.
    pub fn into_plain(self) -> Result<S, Self> {
        match self {
            MaybeTls::Plain(s) => Ok(s),
            tls => Err(tls),
        }
    }
}
