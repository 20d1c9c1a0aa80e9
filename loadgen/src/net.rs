//! Client sockets for the bench on top of the runtime seam: a connect that can first bind a source address (any
//! 127.x.y.z on loopback, so hash balancers see many clients), for tokio and for glommio.

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use futures_lite::{AsyncRead, AsyncWrite};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::io::{FromRawFd, IntoRawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A runtime the bench can open client connections with.
pub trait ClientRuntime: Runtime {
    /// A connected client stream.
    type Stream: AsyncRead + AsyncWrite + Unpin + 'static;

    /// How late [`ClientRuntime::pacer_sleep`] may wake: the open-loop pacer yields instead of sleeping that close
    /// to a send time.
    const TIMER_TICK: Duration;

    /// The open-loop pacer's sleep: as precise as the runtime can make it.
    fn pacer_sleep(d: Duration) -> impl Future<Output = ()> {
        Self::sleep(d)
    }

    /// Connects to `dst`, from `src` (port chosen by the kernel) when given, failing after `timeout`.
    fn open(dst: SocketAddr, src: Option<IpAddr>, timeout: Duration) -> impl Future<Output = io::Result<Self::Stream>>;
}

/// A socket for `dst` bound to `src`, `SO_REUSEADDR` so many short connections from one source do not run out of
/// ports in `TIME_WAIT`.
fn bound_socket(dst: SocketAddr, src: IpAddr) -> io::Result<Socket> {
    let sock = Socket::new(Domain::for_address(dst), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.bind(&SockAddr::from(SocketAddr::new(src, 0)))?;
    Ok(sock)
}

/// A tokio client stream seen through `futures_lite`'s I/O traits.
#[derive(Debug)]
pub struct TokioStream(tokio::net::TcpStream);

impl AsyncRead for TokioStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut rb = tokio::io::ReadBuf::new(buf);
        match tokio::io::AsyncRead::poll_read(Pin::new(&mut self.0), cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for TokioStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        tokio::io::AsyncWrite::poll_write(Pin::new(&mut self.0), cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_flush(Pin::new(&mut self.0), cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut self.0), cx)
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connect timed out")
}

impl ClientRuntime for Tokio {
    type Stream = TokioStream;
    /// The pacer sleeps on a timerfd (tokio's timer wheel has a 1 ms tick and rounds deadlines up to it), which
    /// wakes within tens of microseconds; the pacer yields for the rest.
    const TIMER_TICK: Duration = Duration::from_micros(20);

    async fn pacer_sleep(d: Duration) {
        if !super::timerfd::sleep(d).await {
            // No timerfd: tokio's timer, woken up to a tick early so that it is not late.
            tokio::time::sleep(d.saturating_sub(Duration::from_millis(1))).await;
        }
    }

    async fn open(dst: SocketAddr, src: Option<IpAddr>, timeout: Duration) -> io::Result<TokioStream> {
        let connect = async {
            let stream = match src {
                None => tokio::net::TcpStream::connect(dst).await?,
                Some(src) => {
                    let sock = bound_socket(dst, src)?;
                    sock.set_nonblocking(true)?;
                    // SAFETY: the fd is a fresh, bound, non-blocking TCP socket whose ownership moves to tokio.
                    let sock = unsafe { tokio::net::TcpSocket::from_raw_fd(sock.into_raw_fd()) };
                    sock.connect(dst).await?
                }
            };
            stream.set_nodelay(true)?;
            Ok(TokioStream(stream))
        };
        tokio::time::timeout(timeout, connect)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
    }
}

impl ClientRuntime for Glommio {
    type Stream = glommio::net::TcpStream;
    /// glommio's timers are io_uring timeouts, precise to the microsecond; and a yielding task there delays the
    /// polling of completions, so the pacer only sleeps.
    const TIMER_TICK: Duration = Duration::ZERO;

    async fn open(dst: SocketAddr, src: Option<IpAddr>, timeout: Duration) -> io::Result<glommio::net::TcpStream> {
        let stream = match src {
            None => glommio::net::TcpStream::connect_timeout(dst, timeout.max(Duration::from_millis(1)))
                .await
                .map_err(io::Error::from)?,
            Some(src) => {
                // glommio 0.9 cannot bind before connecting: connect the bound socket here (on loopback this
                // completes at once) and hand the connected fd to glommio. Only connects pay this, not requests.
                let sock = bound_socket(dst, src)?;
                sock.connect_timeout(&SockAddr::from(dst), timeout)?;
                sock.set_nonblocking(true)?;
                // SAFETY: the fd is a connected, non-blocking TCP socket whose ownership moves to glommio.
                unsafe { glommio::net::TcpStream::from_raw_fd(sock.into_raw_fd()) }
            }
        };
        stream.set_nodelay(true).map_err(io::Error::from)?;
        Ok(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn tokio_connect_binds_the_source_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dst = listener.local_addr().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let src: IpAddr = "127.0.0.7".parse().unwrap();
        let stream = rt
            .block_on(Tokio::open(dst, Some(src), Duration::from_secs(2)))
            .unwrap();
        let (mut accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), src);
        drop(stream);
        let mut rest = Vec::new();
        assert_eq!(accepted.read_to_end(&mut rest).unwrap(), 0);
    }
}
