//! The runtime seam: the few things the proxy needs from an async runtime (spawn, timers, listeners, connects,
//! byte streams), as one trait the proxy logic is written against once, implemented for tokio and glommio.

pub mod deadline;
mod glommio_deep;
pub mod glommio_rt;
pub mod iobuf;
pub mod pipe;
pub mod pktinfo;
pub mod shared_listen;
pub mod sys;
pub mod tls_stream;
pub mod tokio_io;
pub mod tokio_rt;
pub mod unix;

use crate::config::model::SocketOptions;
use futures_lite::{AsyncRead, AsyncWrite};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A connected TCP stream of some runtime. Reads and writes go through `futures_lite`'s `AsyncRead`/`AsyncWrite`
/// (both runtimes' streams are readiness-based, so a dropped read or write future loses nothing); `poll_close`
/// shuts the write half down (a half-close). A read only writes into the buffer it is given, never reads it
/// ([`tokio_io::TokioIo`] hands it memory not yet initialized).
pub trait Conn: AsyncRead + AsyncWrite + Unpin + 'static {
    /// Sets `TCP_NODELAY`.
    fn set_nodelay(&self, on: bool) -> io::Result<()>;
    /// The local address of the socket.
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// Waits for bytes and copies the first of them into `buf` without consuming them (0: end of stream); a
    /// plain stream only.
    fn peek(&self, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>>;
    /// Resolves when the peer has closed or reset the socket while nothing it sent waits unread (nginx's
    /// `ngx_http_upstream_check_broken_connection`: a `recv` with `MSG_PEEK` once the socket is readable); stays
    /// pending once bytes wait (a pipelined request, a TLS alert), and for an HTTP/2 stream's pipe.
    fn closed(&self) -> impl Future<Output = ()>;
    /// Whether bytes the peer sent wait unread in the socket now (nginx's `read->ready` when it decides on a
    /// lingering close); never for an HTTP/2 stream's pipe.
    fn bytes_waiting(&self) -> bool;
    /// Runs a TLS server handshake with `config` over this plain stream; the connection that comes back reads
    /// and writes through the session. `session_id` goes into the session's tickets (`$ssl_session_id` of a
    /// connection that resumes it).
    fn accept_tls(
        self,
        config: std::sync::Arc<rustls::ServerConfig>,
        session_id: [u8; 32],
    ) -> impl Future<Output = io::Result<Self>>
    where
        Self: Sized;
    /// Runs a TLS client handshake with `config` for `name` over this plain stream (an `https` upstream).
    fn connect_tls(
        self,
        config: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    ) -> impl Future<Output = io::Result<Self>>
    where
        Self: Sized;
    /// Whether [`Conn::send_file`] moves a file's bytes with sendfile(2) here: a plain socket of the tokio
    /// runtime (glommio 0.9 has no sendfile or splice, a TLS session encrypts in user space, an HTTP/2 stream is a
    /// pipe).
    fn can_send_file(&self) -> bool;
    /// Sends up to `len` bytes of `file` from `offset` with sendfile(2), waiting until the socket takes some; the
    /// bytes sent (0: the file ended before `offset`). `Unsupported` where [`Conn::can_send_file`] is false.
    fn send_file(&self, file: &std::fs::File, offset: u64, len: usize) -> impl Future<Output = io::Result<usize>>;
    /// The TLS session of a TLS connection.
    fn tls(&self) -> Option<&rustls::ServerConnection>;
    /// The TLS session of a connection to an `https` upstream.
    fn upstream_tls(&self) -> Option<&rustls::ClientConnection>;
    /// A connection over one end of an in-memory pipe (an HTTP/2 stream served by the HTTP/1.1 flow).
    fn bridge(end: pipe::PipeEnd) -> Self
    where
        Self: Sized;
}

/// A listening socket of some runtime: the shard's duplicate of a socket the shards share
/// ([`shared_listen`], [`unix`]), or its own socket bound with `SO_REUSEPORT` (`listen ... reuseport`).
pub trait Listener: 'static {
    type Conn: Conn;
    /// Accepts one connection, with the client's address.
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Conn, SocketAddr)>>;
    /// The bound address (with the port the kernel chose for port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A connected UDP socket of some runtime (the resolver's queries).
pub trait Datagram: 'static {
    /// Sends one datagram to the connected address.
    fn send(&self, buf: &[u8]) -> impl Future<Output = io::Result<usize>>;
    /// Receives one datagram from the connected address into `buf` (a longer one is cut to `buf`'s length).
    fn recv(&self, buf: &mut [u8]) -> impl Future<Output = io::Result<usize>>;
}

/// A listening UDP socket of some runtime (stream `listen ... udp`), bound with `SO_REUSEPORT` so every shard has
/// its own (the kernel keeps a client's address and port on one shard).
pub trait DatagramListener: 'static {
    /// Receives one datagram (a longer one is cut to `buf`'s length), who sent it, and (a wildcard socket, where
    /// the runtime can read it) the local address it was sent to.
    fn recv_from(&self, buf: &mut [u8]) -> impl Future<Output = io::Result<(usize, SocketAddr, Option<IpAddr>)>>;
    /// Sends one datagram to `to`, from the local address `from` when given (a wildcard socket).
    fn send_to(&self, buf: &[u8], to: SocketAddr, from: Option<IpAddr>) -> impl Future<Output = io::Result<usize>>;
    /// The bound address.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Sets a listening socket's `SO_RCVBUF` and `SO_SNDBUF` (`listen ... rcvbuf= sndbuf=`). As nginx's, a size the
/// system refuses is logged and ignored (`setsockopt(SO_RCVBUF, N) ADDR failed, ignored`).
pub fn set_buffers(sock: impl std::os::fd::AsFd, sizes: SocketOptions, addr: SocketAddr) {
    let sock = socket2::SockRef::from(&sock);
    let sizes = [("SO_RCVBUF", sizes.rcvbuf), ("SO_SNDBUF", sizes.sndbuf)];
    for (name, size) in sizes {
        let Some(n) = size else { continue };
        // (a negative `int` is what nginx passes too: the system refuses it)
        let set = match name {
            "SO_RCVBUF" => usize::try_from(n).map(|n| sock.set_recv_buffer_size(n)),
            _ => usize::try_from(n).map(|n| sock.set_send_buffer_size(n)),
        };
        let failed = match set {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => io::Error::from_raw_os_error(libc::EINVAL),
        };
        crate::log_alert!(
            "setsockopt({name}, {n}) {} failed, ignored ({})",
            crate::config::unix_addr::to_text(&addr),
            crate::log::errno_text(&failed)
        );
    }
}

/// A non-blocking UDP socket bound to `addr` with `SO_REUSEPORT` and `SO_REUSEADDR`, for
/// [`Runtime::bind_udp`].
pub fn reuseport_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// An unbound UDP socket of `addr`'s family, for [`Runtime::udp_connect`].
/// Made non-blocking by `socket(2)` itself and bound by `connect(2)`: two system calls, as nginx's (a UDP
/// session opens one per datagram when each is a session of its own).
fn udp_socket_to(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM.nonblocking(),
        Some(Protocol::UDP),
    )?;
    sock.connect(&addr.into())?;
    Ok(sock.into())
}

/// An async runtime as the shards use it: a marker type whose associated functions act on the executor of the
/// calling thread.
pub trait Runtime: Sized + 'static {
    type Conn: Conn;
    type Listener: Listener<Conn = Self::Conn>;
    type Udp: Datagram;
    type UdpListener: DatagramListener;

    /// The name used in messages (`tokio`, `glommio`).
    const NAME: &'static str;

    /// Spawns a task on the current shard's executor.
    fn spawn(fut: impl Future<Output = ()> + 'static);

    /// Completes after `d`.
    fn sleep(d: Duration) -> impl Future<Output = ()>;

    /// Whether [`Runtime::park_idle`] does anything: a connection's keepalive wait looks at the clock for it.
    const PARKS: bool = false;

    /// Has a connection idle past a tick give up what the runtime holds per socket for its wait (glommio's read
    /// source), waking the task of `cx` when bytes come; its next read after them makes it whole again. Nothing
    /// on tokio (an idle connection's registration is 256 bytes there; it is under 1 KiB per idle connection).
    fn park_idle(_conn: &mut Self::Conn, _cx: &std::task::Context<'_>) {}

    /// Binds a listener with `SO_REUSEPORT` (and `SO_REUSEADDR`) on the current shard (`listen ... reuseport`); for
    /// a unix-domain address, the shard's duplicate of the process's socket ([`unix`]).
    fn bind(addr: SocketAddr, backlog: i32, buffers: SocketOptions) -> io::Result<Self::Listener>;

    /// Accepts on `sock`, the current shard's duplicate of a TCP listening socket the shards share
    /// ([`shared_listen`]).
    fn listen_shared(sock: std::net::TcpListener) -> io::Result<Self::Listener>;

    /// Connects to `addr`, failing with `TimedOut` after `timeout`.
    fn connect(addr: SocketAddr, timeout: Duration) -> impl Future<Output = io::Result<Self::Conn>>;

    /// A UDP socket bound to an ephemeral port and connected to `addr`.
    fn udp_connect(addr: SocketAddr) -> io::Result<Self::Udp>;

    /// Binds a UDP listening socket with `SO_REUSEPORT` on the current shard.
    fn bind_udp(addr: SocketAddr, buffers: SocketOptions) -> io::Result<Self::UdpListener>;

    /// Starts a thread running one executor of this runtime, pinned to `cpu` when given, and runs `make()`'s future
    /// on it to completion. Errors creating the executor are returned by the thread's join.
    fn start_thread<G, F>(
        name: String,
        cpu: Option<usize>,
        make: G,
    ) -> io::Result<std::thread::JoinHandle<io::Result<()>>>
    where
        G: FnOnce() -> F + Send + 'static,
        F: Future<Output = ()> + 'static;
}

/// An I/O operation did not finish in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("timed out")]
pub struct TimedOut;

impl From<TimedOut> for io::Error {
    fn from(_: TimedOut) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, "timed out")
    }
}

/// Runs `fut`, giving up after `d`. The future is polled first, so one that is ready at once never arms a timer;
/// a long `d` (from [`deadline::COARSE_FROM`]) waits on a coarse [`deadline::Deadline`] instead of a runtime timer.
pub async fn timeout<R: Runtime, T>(d: Duration, fut: impl Future<Output = T>) -> Result<T, TimedOut> {
    let coarse = d >= deadline::COARSE_FROM;
    futures_lite::future::or(async { Ok(fut.await) }, async {
        if coarse {
            deadline::Deadline::<R>::after(d).await;
        } else {
            R::sleep(d).await;
        }
        Err(TimedOut)
    })
    .await
}

/// Like [`timeout`] for an I/O future: a timeout becomes an `io::ErrorKind::TimedOut` error.
pub async fn io_timeout<R: Runtime, T>(d: Duration, fut: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match timeout::<R, _>(d, fut).await {
        Ok(r) => r,
        Err(t) => Err(t.into()),
    }
}

/// Pins the calling thread to `cpu` (best effort: returns whether it worked).
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// The CPUs this process may run on (its affinity mask), in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: `set` is a plain bit array the kernel fills; its size is passed along.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_mask_is_not_empty() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }
}
