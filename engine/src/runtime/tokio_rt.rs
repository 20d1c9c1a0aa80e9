//! The tokio side of the runtime seam: one current-thread runtime with a `LocalSet` per shard thread, pinned.

use super::tls_stream::{MaybeTls, Peek, Tcp};
use super::{Listener, Runtime};
use crate::config::model::SocketOptions;
use futures_lite::{AsyncRead, AsyncWrite};
use socket2::{Domain, Protocol, Socket, Type};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite as TokioWrite;

/// The tokio runtime marker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokio;

/// A tokio TCP stream seen through `futures_lite`'s I/O traits; a unix-domain connection rides the same type
/// ([`super::unix`]), with its address token in `.1` (boxed: every connection holds the field, few the token).
#[derive(Debug)]
pub struct TokioConn(tokio::net::TcpStream, Option<Box<SocketAddr>>);

// reads and writes as tokio's own `poll_read`/`poll_write` do them (readiness, then the call, readiness cleared
// on `EAGAIN`, and after a short read or write, which says the socket has no more for now: no call that would only
// say `EAGAIN`), with the calls made bare ([`super::sys`])
impl AsyncRead for TokioConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.0);
        poll_io(&self.0, cx, tokio::io::Interest::READABLE, buf.len(), || {
            super::sys::recv(fd, buf)
        })
    }
}

/// One read or write of at most `len` bytes on `s` when it is ready for `interest`.
fn poll_io(
    s: &tokio::net::TcpStream,
    cx: &mut Context<'_>,
    interest: tokio::io::Interest,
    len: usize,
    mut call: impl FnMut() -> io::Result<usize>,
) -> Poll<io::Result<usize>> {
    loop {
        let ready = match interest.is_readable() {
            true => s.poll_read_ready(cx),
            false => s.poll_write_ready(cx),
        };
        std::task::ready!(ready)?;
        match s.try_io(interest, &mut call) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Ok(n) if n > 0 && n < len => {
                // the readiness is cleared as an `EAGAIN` clears it: the shard's runtime is current-thread, so
                // only this thread's next driver turn sets it again, and nothing came between the call and this
                let _ = s.try_io(interest, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                return Poll::Ready(Ok(n));
            }
            done => return Poll::Ready(done),
        }
    }
}

impl AsyncWrite for TokioConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.0);
        poll_io(&self.0, cx, tokio::io::Interest::WRITABLE, buf.len(), || {
            super::sys::send(fd, buf)
        })
    }

    /// One `sendmsg` for all of `bufs`: a TLS session's queued records (a handshake's flight, a large write's
    /// records) leave in one call, not one call each.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.0);
        let len = bufs.iter().map(|b| b.len()).sum();
        let one = match bufs {
            [b] => Some(&**b),
            _ => None,
        };
        poll_io(&self.0, cx, tokio::io::Interest::WRITABLE, len, || match one {
            Some(b) => super::sys::send(fd, b),
            None => super::sys::send_vectored(fd, bufs),
        })
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Peek for TokioConn {
    async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.peek(buf).await
    }
}

impl Tcp for TokioConn {
    fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self.1 {
            None => self.0.set_nodelay(on),
            Some(_) => Ok(()),
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.1 {
            None => self.0.local_addr(),
            Some(token) => Ok(**token),
        }
    }

    fn can_send_file(&self) -> bool {
        true
    }

    async fn send_file(&self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let (sock, fd) = (self.0.as_raw_fd(), file.as_raw_fd());
        let mut off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // tokio clears the socket's write readiness when the call says EAGAIN, and waits for the next
        self.0
            .async_io(tokio::io::Interest::WRITABLE, || {
                // SAFETY: both descriptors are open for the call (the stream and the file are borrowed), and
                // `off` is a valid off_t the call advances
                let n = unsafe { libc::sendfile(sock, fd, &mut off, len) };
                usize::try_from(n).map_err(|_| io::Error::last_os_error())
            })
            .await
    }

    fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.0)
    }
}

/// A tokio listener: a TCP one (the shard's duplicate of a shared socket, or its own bound with `SO_REUSEPORT`), or
/// the shard's descriptor of a unix-domain socket
/// ([`super::unix`]) with its token.
#[derive(Debug)]
pub enum TokioListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::io::unix::AsyncFd<std::os::unix::net::UnixListener>, SocketAddr),
}

impl Listener for TokioListener {
    type Conn = MaybeTls<TokioConn>;

    async fn accept(&self) -> io::Result<(Self::Conn, SocketAddr)> {
        match self {
            TokioListener::Tcp(l) => {
                let (s, addr) = l.accept().await?;
                Ok((MaybeTls::Plain(TokioConn(s, None)), addr))
            }
            TokioListener::Unix(fd, token) => loop {
                let mut ready = fd.readable().await?;
                match ready.try_io(|l| super::unix::accept(l.get_ref())) {
                    Ok(s) => {
                        let s = tokio::net::TcpStream::from_std(s?)?;
                        return Ok((
                            MaybeTls::Plain(TokioConn(s, Some(Box::new(*token)))),
                            crate::config::unix_addr::unnamed(),
                        ));
                    }
                    Err(_would_block) => continue,
                }
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            TokioListener::Tcp(l) => l.local_addr(),
            TokioListener::Unix(_, token) => Ok(*token),
        }
    }
}

/// A non-blocking TCP listening socket with `SO_REUSEPORT` and `SO_REUSEADDR` (shared by both runtimes' tests).
pub fn reuseport_socket(addr: SocketAddr, backlog: i32) -> io::Result<std::net::TcpListener> {
    let domain = if addr.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    Ok(sock.into())
}

/// tokio's UDP socket.
pub struct TokioUdp(tokio::net::UdpSocket);

impl super::Datagram for TokioUdp {
    async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf).await
    }

    async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv(buf).await
    }
}

/// tokio's listening UDP socket; bound to a wildcard address, it reads and sets each datagram's local address
/// (`IP_PKTINFO`, [`super::pktinfo`]).
pub struct TokioUdpListener {
    sock: tokio::net::UdpSocket,
    pktinfo: bool,
}

impl super::DatagramListener for TokioUdpListener {
    async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<std::net::IpAddr>)> {
        if !self.pktinfo {
            let (n, from) = self.sock.recv_from(buf).await?;
            return Ok((n, from, None));
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.sock);
        self.sock
            .async_io(tokio::io::Interest::READABLE, || super::pktinfo::recv(fd, buf))
            .await
    }

    async fn send_to(&self, buf: &[u8], to: SocketAddr, from: Option<std::net::IpAddr>) -> io::Result<usize> {
        match from.filter(|_| self.pktinfo) {
            None => self.sock.send_to(buf, to).await,
            Some(from) => {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&self.sock);
                self.sock
                    .async_io(tokio::io::Interest::WRITABLE, || {
                        super::pktinfo::send(fd, buf, to, from)
                    })
                    .await
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }
}

impl Runtime for Tokio {
    type Conn = MaybeTls<TokioConn>;
    type Listener = TokioListener;
    type Udp = TokioUdp;
    type UdpListener = TokioUdpListener;
    const NAME: &'static str = "tokio";

    fn spawn(fut: impl Future<Output = ()> + 'static) {
        drop(tokio::task::spawn_local(fut));
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> {
        tokio::time::sleep(d)
    }

    fn bind(addr: SocketAddr, backlog: i32, buffers: SocketOptions) -> io::Result<TokioListener> {
        if crate::config::unix_addr::is_unix(&addr) {
            let l = super::unix::listener_for(addr, backlog)?;
            super::set_buffers(&l, buffers, addr);
            // SAFETY: the listener owns its descriptor, which stays open and the same for the `AsyncFd`'s life.
            let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(l, tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?;
            return Ok(TokioListener::Unix(fd, addr));
        }
        let std = reuseport_socket(addr, backlog)?;
        super::set_buffers(&std, buffers, addr);
        Ok(TokioListener::Tcp(tokio::net::TcpListener::from_std(std)?))
    }

    fn listen_shared(sock: std::net::TcpListener) -> io::Result<TokioListener> {
        tokio::net::TcpListener::from_std(sock).map(TokioListener::Tcp)
    }

    fn udp_connect(addr: SocketAddr) -> io::Result<TokioUdp> {
        tokio::net::UdpSocket::from_std(super::udp_socket_to(addr)?).map(TokioUdp)
    }

    fn bind_udp(addr: SocketAddr, buffers: SocketOptions) -> io::Result<TokioUdpListener> {
        let std = super::reuseport_udp(addr)?;
        super::set_buffers(&std, buffers, addr);
        let pktinfo = addr.ip().is_unspecified();
        if pktinfo {
            super::pktinfo::enable(std::os::fd::AsRawFd::as_raw_fd(&std), addr.is_ipv6())?;
        }
        Ok(TokioUdpListener {
            sock: tokio::net::UdpSocket::from_std(std)?,
            pktinfo,
        })
    }

    async fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Self::Conn> {
        if crate::config::unix_addr::is_unix(&addr) {
            let s = tokio::net::TcpStream::from_std(super::unix::connect(&addr)?)?;
            let token = Box::new(crate::config::unix_addr::unnamed());
            return Ok(MaybeTls::Plain(TokioConn(s, Some(token))));
        }
        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
            Ok(r) => r.map(|s| MaybeTls::Plain(TokioConn(s, None))),
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
        }
    }

    fn start_thread<G, F>(
        name: String,
        cpu: Option<usize>,
        make: G,
    ) -> io::Result<std::thread::JoinHandle<io::Result<()>>>
    where
        G: FnOnce() -> F + Send + 'static,
        F: Future<Output = ()> + 'static,
    {
        std::thread::Builder::new().name(name).spawn(move || {
            if let Some(c) = cpu {
                super::pin_current_thread(c);
            }
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let local = tokio::task::LocalSet::new();
            // each poll of the shard's future is a scheduler turn: the runtime has polled the driver (I/O and
            // timers) and the local tasks run next, reading the clocks once for the turn (`crate::clock`)
            let turns = crate::clock::Turns::begin();
            let mut run = std::pin::pin!(local.run_until(make()));
            rt.block_on(std::future::poll_fn(|cx| {
                turns.next();
                run.as_mut().poll(cx)
            }));
            Ok(())
        })
    }
}
