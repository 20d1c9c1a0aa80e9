//! The glommio 0.9 side of the runtime seam: one `LocalExecutor` per shard (`Placement::Fixed(cpu)`), a small
//! `io_memory`, glommio's 100 ms preemption timer, and a periodic tick so an executor never parks for long (0.9.0 can miss a
//! wake-up).

use super::tls_stream::{MaybeTls, Peek, Tcp};
use super::tokio_rt::reuseport_socket;
use super::{Listener, Runtime};
use crate::config::model::SocketOptions;
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Memory each executor registers with io_uring for file I/O buffers. Sockets do not use it, so the minimum glommio
/// accepts is enough and keeps the total under a small `RLIMIT_MEMLOCK`.
pub const IO_MEMORY: usize = 512 * 1024;

/// Submission ring depth per executor.
const RING_DEPTH: usize = 256;

/// How long the executor runs tasks before it reaps its rings' completions again: glommio's default, 100 ms.
///
/// glommio 0.9 reaps completions (the socket polls of connections waiting for bytes) only between runs of its task
/// queue, and a run ends when the queue is empty or this timer fires; under load the queue seldom empties, so a
/// connection whose poll had completed can wait for the timer (p99 at 64 connections 13-20x nginx's, the median
/// lower). A 2 ms timer brought p99 to nginx's, but with it a shard could fall asleep for good when 2,000
/// connections closed at once (2 of 6 series; none of 7 at 100 ms: BENCHMARKS.md, "A leaner proxied-request
/// path"), so the default stays and README says glommio is not for latency-sensitive use.
const PREEMPT: Duration = Duration::from_millis(100);

/// How many idle connections wait parked now, in all shards ([`Runtime::park_idle`]; for tests).
pub fn parked_sockets() -> usize {
    super::glommio_deep::parked()
}

/// The glommio runtime marker.
#[derive(Debug, Clone, Copy, Default)]
pub struct Glommio;

/// A glommio TCP stream; a unix-domain connection rides the same type ([`super::unix`]), with its address token.
#[derive(Debug)]
pub struct GlommioConn {
    sock: Sock,
    /// The last read found the socket empty and yielded once instead of arming a poll.
    yielded: bool,
    /// A unix-domain socket's token (its listener's, or the unnamed one of a connect; boxed: every connection
    /// holds the field, few the token).
    unix: Option<Box<SocketAddr>>,
}

/// A connection's socket: glommio's stream, or while it is idle past a tick ([`Runtime::park_idle`]) the bare
/// socket, waiting in the shard's deep-idle set ([`super::glommio_deep`]).
#[derive(Debug)]
enum Sock {
    Live(TcpStream),
    Parked(ParkedFd),
}

/// A parked socket: taken out of the deep-idle set when dropped (and closed).
#[derive(Debug)]
struct ParkedFd(OwnedFd);

impl ParkedFd {
    /// The descriptor, out of the set and no longer owned here (it goes to a glommio stream).
    fn release(self) -> RawFd {
        let fd = self.0.as_raw_fd();
        super::glommio_deep::unpark(fd);
        // (no drop: the descriptor stays open for its new owner)
        std::mem::forget(self);
        fd
    }
}

impl Drop for ParkedFd {
    fn drop(&mut self) {
        super::glommio_deep::unpark(self.0.as_raw_fd());
    }
}

impl Sock {
    fn fd(&self) -> RawFd {
        match self {
            Sock::Live(s) => s.as_raw_fd(),
            Sock::Parked(p) => p.0.as_raw_fd(),
        }
    }
}

/// What a stream's call meets if its socket could not be given a glommio stream again (not expected: unparking
/// always makes one).
fn parked() -> io::Error {
    io::Error::other("socket parked")
}

impl GlommioConn {
    fn new(stream: TcpStream) -> Self {
        GlommioConn {
            sock: Sock::Live(stream),
            yielded: false,
            unix: None,
        }
    }

    fn unix(stream: TcpStream, token: SocketAddr) -> Self {
        GlommioConn {
            unix: Some(Box::new(token)),
            ..GlommioConn::new(stream)
        }
    }

    /// Gives up the glommio stream (and its read source) of a connection idle past a tick: its socket waits in the
    /// shard's deep-idle set, waking the task of `cx`. Kept as it is when that cannot be done.
    fn park(&mut self, cx: &Context<'_>) {
        let Sock::Live(s) = &self.sock else { return };
        if let Some(fd) = super::glommio_deep::park(s, cx.waker()) {
            // the stream is dropped: its descriptor closed (the socket stays open by `fd`), its poll cancelled
            self.sock = Sock::Parked(ParkedFd(fd));
            self.yielded = false;
        }
    }

    /// The glommio stream, made again over a parked socket.
    fn live(&mut self) -> io::Result<&mut TcpStream> {
        if let Sock::Parked(p) = &self.sock {
            // SAFETY: the descriptor is the parked socket's, which gives it up (`release`) to the stream.
            let stream = unsafe { TcpStream::from_raw_fd(p.0.as_raw_fd()) };
            if let Sock::Parked(p) = std::mem::replace(&mut self.sock, Sock::Live(stream)) {
                p.release();
            }
        }
        match &mut self.sock {
            Sock::Live(s) => Ok(s),
            Sock::Parked(_) => Err(parked()),
        }
    }
}

impl AsyncRead for GlommioConn {
    /// Tries a plain non-blocking `recv` first and goes through glommio only when nothing is there.
    ///
    /// glommio 0.9.0's `poll_read` arms a one-shot io_uring `POLL_ADD` after every read that does not fill the
    /// buffer, and its next read waits for that poll's completion even when the bytes are already in the socket;
    /// the completion arrives as io_uring task work, signalled to this thread (its rings have no
    /// `COOP_TASKRUN`). Reading first lets a read that has data skip all that; glommio arms its poll only when a
    /// read would block (BENCHMARKS.md: 1.3-1.4x nginx's CPU per request instead of 2x).
    ///
    /// When the socket is empty the task first yields once (it is woken at once and runs again after the shard's
    /// other ready tasks), because the bytes often arrive meanwhile; only a second empty `recv` arms the poll
    /// (another 5-9 % of CPU per request, BENCHMARKS.md).
    ///
    /// Sound because the socket stays glommio's: this borrows its fd for one `recv` on the executor's own thread;
    /// a poll glommio left armed is unaffected (polls consume no data) and at worst completes with no one waiting.
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let fd = this.sock.fd();
        // SAFETY: the fd is open for as long as `self.sock` lives; `recv` writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if let Ok(n) = usize::try_from(n) {
            this.yielded = false;
            // bytes wake a parked socket into a glommio stream again (an end or an error leave it to its close)
            if n > 0 && matches!(this.sock, Sock::Parked(_)) {
                if let Err(e) = this.live() {
                    return Poll::Ready(Err(e));
                }
            }
            return Poll::Ready(Ok(n));
        }
        let e = io::Error::last_os_error();
        match (e.kind(), &mut this.sock) {
            (io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted, Sock::Parked(_)) => {
                match super::glommio_deep::wait(fd, cx.waker()) {
                    Ok(()) => Poll::Pending,
                    Err(e) => Poll::Ready(Err(e)),
                }
            }
            (io::ErrorKind::WouldBlock, Sock::Live(_)) if !this.yielded => {
                this.yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            (io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted, Sock::Live(s)) => {
                let r = Pin::new(s).poll_read(cx, buf);
                this.yielded = false;
                r
            }
            _ => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for GlommioConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match &mut this.sock {
            Sock::Live(s) => Pin::new(s).poll_write(cx, buf),
            Sock::Parked(_) => match this.live() {
                Ok(s) => Pin::new(s).poll_write(cx, buf),
                Err(e) => Poll::Ready(Err(e)),
            },
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.sock {
            Sock::Live(s) => Pin::new(s).poll_flush(cx),
            // (nothing is buffered: glommio's flush is a no-op too)
            Sock::Parked(_) => Poll::Ready(Ok(())),
        }
    }

    /// glommio's close is `shutdown(SHUT_WR)`: a half-close; so is a parked socket's.
    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.sock {
            Sock::Live(s) => Pin::new(s).poll_close(cx),
            Sock::Parked(p) => {
                // SAFETY: a plain call on the open descriptor.
                match unsafe { libc::shutdown(p.0.as_raw_fd(), libc::SHUT_WR) } {
                    0 => Poll::Ready(Ok(())),
                    _ => Poll::Ready(Err(io::Error::last_os_error())),
                }
            }
        }
    }
}

impl GlommioConn {
    /// A non-blocking `MSG_PEEK`: `None` while the socket is empty.
    fn peek_now(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        // SAFETY: the fd is open for as long as `self.sock` lives; `recv` writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            libc::recv(
                self.sock.fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            return Some(Ok(n));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => None,
            _ => Some(Err(e)),
        }
    }

    /// A parked socket's peek: a non-blocking `MSG_PEEK` each time the deep-idle set reports it (its stream is not
    /// made again for a look at it; not expected: a socket is parked only between requests).
    async fn parked_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            if let Some(r) = self.peek_now(buf) {
                return Poll::Ready(r);
            }
            match super::glommio_deep::wait(self.sock.fd(), cx.waker()) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            }
        })
        .await
    }
}

/// How long a watch looks at its socket only without a wait in the ring ([`GlommioConn::watch`]); it ends at the
/// first deadline tick after this, so a close is seen up to two ticks late.
const WATCH_GRACE: Duration = super::deadline::TICK;

impl Peek for GlommioConn {
    async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.sock {
            Sock::Live(s) => s.peek(buf).await.map_err(io::Error::from),
            Sock::Parked(_) => self.parked_peek(buf).await,
        }
    }

    /// glommio's peek is an io_uring `recv` on the executor's latency ring: put in flight for every proxied
    /// request and cancelled when the answer comes, it cost 43 % of glommio's CPU per request (the kernel's
    /// `io_recv` task work spinning on the socket's lock was 23 % of the shard's samples; BENCHMARKS.md,
    /// "glommio's p99 tail").
    /// So the socket is looked at by a non-blocking `MSG_PEEK`, and the ring's peek is put in flight only when the
    /// wait outlasts a grace of one deadline tick ([`WATCH_GRACE`]): a client that closes within it is noticed
    /// at its end, up to 100 ms later than nginx notices it.
    async fn watch(&self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(r) = self.peek_now(buf) {
            return r;
        }
        super::deadline::Deadline::<Glommio>::after(WATCH_GRACE).await;
        if let Some(r) = self.peek_now(buf) {
            return r;
        }
        self.peek(buf).await
    }
}

impl Tcp for GlommioConn {
    fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self.unix {
            None => match &self.sock {
                Sock::Live(s) => s.set_nodelay(on).map_err(io::Error::from),
                Sock::Parked(p) => socket2::SockRef::from(&p.0).set_nodelay(on),
            },
            Some(_) => Ok(()),
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.unix {
            None => match &self.sock {
                Sock::Live(s) => s.local_addr().map_err(io::Error::from),
                Sock::Parked(p) => socket2::SockRef::from(&p.0)
                    .local_addr()?
                    .as_socket()
                    .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput)),
            },
            Some(token) => Ok(**token),
        }
    }

    fn fd(&self) -> std::os::fd::RawFd {
        self.sock.fd()
    }
}

/// A glommio listener on the shard's duplicate of a shared TCP socket, on its own socket bound with `SO_REUSEPORT`,
/// or on the shard's descriptor of a unix-domain socket (`Some` token): glommio's TCP listener accepts through
/// io_uring with no TCP-only call, so it serves all three. On a shared socket each shard's ring has an accept in
/// flight, and the kernel completes one of them per connection.
pub struct GlommioListener(TcpListener, Option<SocketAddr>);

impl Listener for GlommioListener {
    type Conn = MaybeTls<GlommioConn>;

    async fn accept(&self) -> io::Result<(Self::Conn, SocketAddr)> {
        let s = self.0.accept().await.map_err(io::Error::from)?;
        if let Some(token) = self.1 {
            return Ok((
                MaybeTls::Plain(GlommioConn::unix(s, token)),
                crate::config::unix_addr::unnamed(),
            ));
        }
        let peer = s.peer_addr().map_err(io::Error::from)?;
        Ok((MaybeTls::Plain(GlommioConn::new(s)), peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self.1 {
            None => self.0.local_addr().map_err(io::Error::from),
            Some(token) => Ok(token),
        }
    }
}

/// glommio's UDP socket.
pub struct GlommioUdp(glommio::net::UdpSocket);

impl super::Datagram for GlommioUdp {
    async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf).await.map_err(io::Error::from)
    }

    /// A non-blocking `recv`, and while nothing is there a wait by `MSG_PEEK`. glommio's own `recv` puts an
    /// io_uring read in flight into its buffer: a future dropped before it completes (a UDP session's wait for an
    /// answer raced with its client's next datagram) can lose the datagram the kernel handed to it. A dropped peek
    /// takes nothing.
    async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let fd = self.0.as_raw_fd();
        loop {
            // SAFETY: the fd is open for as long as `self.0` lives; `recv` writes at most `buf.len()` bytes into
            // `buf`.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if let Ok(n) = usize::try_from(n) {
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => {}
                io::ErrorKind::Interrupted => continue,
                // an ICMP error of a connected socket (ECONNREFUSED), as glommio's recv reports it
                _ => return Err(e),
            }
            let mut probe = [0u8; 1];
            self.0.peek(&mut probe).await.map_err(io::Error::from)?;
        }
    }
}

/// glommio's listening UDP socket.
pub struct GlommioUdpListener(glommio::net::UdpSocket);

impl super::DatagramListener for GlommioUdpListener {
    // glommio's socket API has no control messages: a wildcard socket's local address is not known, and an answer
    // leaves from the address the kernel's route picks (README: bind UDP to an address on glommio)
    async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<std::net::IpAddr>)> {
        let (n, from) = self.0.recv_from(buf).await.map_err(io::Error::from)?;
        Ok((n, from, None))
    }

    async fn send_to(&self, buf: &[u8], to: SocketAddr, _from: Option<std::net::IpAddr>) -> io::Result<usize> {
        self.0.send_to(buf, to).await.map_err(io::Error::from)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr().map_err(io::Error::from)
    }
}

impl Runtime for Glommio {
    type Conn = MaybeTls<GlommioConn>;
    type Listener = GlommioListener;
    type Udp = GlommioUdp;
    type UdpListener = GlommioUdpListener;
    const NAME: &'static str = "glommio";

    fn spawn(fut: impl Future<Output = ()> + 'static) {
        glommio::spawn_local(fut).detach();
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> {
        glommio::timer::sleep(d)
    }

    const PARKS: bool = true;

    fn park_idle(conn: &mut Self::Conn, cx: &Context<'_>) {
        match conn {
            MaybeTls::Plain(c) => c.park(cx),
            MaybeTls::Tls(t) => t.get_mut().0.park(cx),
            MaybeTls::Upstream(_) | MaybeTls::Bridge(_) => {}
        }
    }

    fn bind(addr: SocketAddr, backlog: i32, buffers: SocketOptions) -> io::Result<GlommioListener> {
        if crate::config::unix_addr::is_unix(&addr) {
            let l = super::unix::listener_for(addr, backlog)?;
            super::set_buffers(&l, buffers, addr);
            // SAFETY: the fd is a listening unix-domain stream socket (the shard's own duplicate) whose ownership
            // moves into glommio's listener, which only accepts on it.
            return Ok(GlommioListener(
                unsafe { TcpListener::from_raw_fd(l.into_raw_fd()) },
                Some(addr),
            ));
        }
        let std_listener = reuseport_socket(addr, backlog)?;
        super::set_buffers(&std_listener, buffers, addr);
        // SAFETY: the fd is a bound, listening TCP socket whose ownership moves into glommio's listener.
        Ok(GlommioListener(
            unsafe { TcpListener::from_raw_fd(std_listener.into_raw_fd()) },
            None,
        ))
    }

    fn listen_shared(sock: std::net::TcpListener) -> io::Result<GlommioListener> {
        // SAFETY: the fd is the shard's own duplicate of a bound, listening TCP socket; its ownership moves into
        // glommio's listener.
        Ok(GlommioListener(
            unsafe { TcpListener::from_raw_fd(sock.into_raw_fd()) },
            None,
        ))
    }

    fn udp_connect(addr: SocketAddr) -> io::Result<GlommioUdp> {
        let std = super::udp_socket_to(addr)?;
        // SAFETY: `into_raw_fd` hands over the socket's only descriptor, which glommio's socket then owns.
        let s = unsafe {
            <glommio::net::UdpSocket as std::os::fd::FromRawFd>::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(std))
        };
        Ok(GlommioUdp(s))
    }

    fn bind_udp(addr: SocketAddr, buffers: SocketOptions) -> io::Result<GlommioUdpListener> {
        let std = super::reuseport_udp(addr)?;
        super::set_buffers(&std, buffers, addr);
        // SAFETY: `into_raw_fd` hands over the socket's only descriptor, which glommio's socket then owns.
        let s = unsafe {
            <glommio::net::UdpSocket as std::os::fd::FromRawFd>::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(std))
        };
        Ok(GlommioUdpListener(s))
    }

    async fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Self::Conn> {
        if crate::config::unix_addr::is_unix(&addr) {
            let s = super::unix::connect(&addr)?;
            // SAFETY: `into_raw_fd` hands over the connected socket's only descriptor, which glommio's stream owns.
            let s = unsafe { TcpStream::from_raw_fd(s.into_raw_fd()) };
            return Ok(MaybeTls::Plain(GlommioConn::unix(
                s,
                crate::config::unix_addr::unnamed(),
            )));
        }
        // glommio refuses a zero timeout; io_uring links the connect to a timeout of its own.
        TcpStream::connect_timeout(addr, timeout.max(Duration::from_millis(1)))
            .await
            .map(|s| MaybeTls::Plain(GlommioConn::new(s)))
            .map_err(io::Error::from)
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
        std::thread::Builder::new().name(name.clone()).spawn(move || {
            let placement = cpu.map_or(Placement::Unbound, Placement::Fixed);
            let ex = LocalExecutorBuilder::new(placement)
                .name(&name)
                .io_memory(IO_MEMORY)
                .ring_depth(RING_DEPTH)
                .preempt_timer(PREEMPT)
                .make()
                .map_err(io::Error::from)?;
            ex.run(async move {
                // The watchdog tick: a timer always armed, so a missed wake-up costs at most one period.
                glommio::spawn_local(async {
                    loop {
                        glommio::timer::sleep(Duration::from_millis(100)).await;
                    }
                })
                .detach();
                make().await
            });
            Ok(())
        })
    }
}
