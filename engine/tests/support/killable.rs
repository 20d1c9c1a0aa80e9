//! A fault-injection backend: an HTTP/1.1 keep-alive server or a named TCP echo on a loopback port that can be
//! killed (its listener and every open connection closed at once, as when the process dies), made to hang
//! (read requests and never answer), made to fail its health probes, and restarted on the same port.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1: `200` with the backend's name as the body, kept alive unless the request asks to close; the
    /// path `/hc` is a health probe (`500` while sick).
    Http,
    /// TCP: every read is echoed back behind `NAME:`.
    Echo,
}

/// What the backend has seen.
#[derive(Debug, Default)]
pub struct Counts {
    pub accepts: AtomicUsize,
    /// Client requests read (HTTP) or echo reads (TCP).
    pub requests: AtomicUsize,
    /// Health probes read (`/hc`).
    pub probes: AtomicUsize,
    /// Requests read while the backend was being killed: in flight at its death, never answered.
    pub unanswered: AtomicUsize,
}

/// The open connections, and whether the backend is dead (one lock, so a kill is one instant for the readers).
#[derive(Debug, Default)]
struct Registry {
    dead: bool,
    conns: Vec<TcpStream>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    proto: Proto,
    hang: AtomicBool,
    sick: AtomicBool,
    counts: Counts,
    registry: Mutex<Registry>,
}

impl Inner {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dead(&self) -> bool {
        self.registry().dead
    }
}

/// A blocking listener on a port that [`super::free_addr`] holds (SO_REUSEPORT, beside its holder).
fn bind_held(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = corelb_engine::runtime::tokio_rt::reuseport_socket(addr, 1024)?;
    listener.set_nonblocking(false)?;
    Ok(listener)
}

/// A running listener: the socket (shared with its accept thread, so a kill can shut it) and that thread.
struct Listening {
    listener: Arc<TcpListener>,
    thread: JoinHandle<()>,
}

/// A backend that can die and come back on the same address; killed when dropped.
pub struct Killable {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    listening: Mutex<Option<Listening>>,
}

impl Killable {
    /// Starts a backend called `name` on a loopback port held for the life of the test process ([`super::free_addr`]):
    /// while it is dead, no other test can take its port.
    pub fn start(name: &str, proto: Proto) -> Killable {
        let addr = super::free_addr();
        let listener = bind_held(addr).expect("bind a backend");
        let inner = Arc::new(Inner {
            name: name.to_string(),
            proto,
            hang: AtomicBool::new(false),
            sick: AtomicBool::new(false),
            counts: Counts::default(),
            registry: Mutex::new(Registry::default()),
        });
        let k = Killable {
            addr,
            inner,
            listening: Mutex::new(None),
        };
        k.listen(listener);
        k
    }

    /// Starts a backend and kills it at once: its port is known and refuses connections until [`Self::restart`].
    pub fn start_dead(name: &str, proto: Proto) -> Killable {
        let k = Killable::start(name, proto);
        k.kill();
        k
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn counts(&self) -> &Counts {
        &self.inner.counts
    }

    pub fn requests(&self) -> usize {
        self.inner.counts.requests.load(Ordering::SeqCst)
    }

    pub fn probes(&self) -> usize {
        self.inner.counts.probes.load(Ordering::SeqCst)
    }

    pub fn accepts(&self) -> usize {
        self.inner.counts.accepts.load(Ordering::SeqCst)
    }

    /// Requests that were read by the backend while it died (in flight): never answered.
    pub fn unanswered(&self) -> usize {
        self.inner.counts.unanswered.load(Ordering::SeqCst)
    }

    /// From now on, requests are read and never answered (HTTP only).
    pub fn set_hang(&self, on: bool) {
        self.inner.hang.store(on, Ordering::SeqCst);
    }

    /// From now on, health probes get `500` (on) or `200` (off).
    pub fn set_sick(&self, on: bool) {
        self.inner.sick.store(on, Ordering::SeqCst);
    }

    /// Closes the listener and every open connection (idle keep-alive ones included) and waits until the port
    /// refuses connections. Requests read from now on are never answered.
    pub fn kill(&self) {
        let listening = self.listening.lock().unwrap_or_else(|p| p.into_inner()).take();
        {
            let mut reg = self.inner.registry();
            reg.dead = true;
            for c in reg.conns.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
        if let Some(l) = listening {
            // SAFETY: shuts down a listening socket this struct owns (through the Arc); it wakes the blocked
            // accept() with an error, and the socket is closed when the accept thread drops its handle.
            unsafe { libc::shutdown(l.listener.as_raw_fd(), libc::SHUT_RDWR) };
            let _ = l.thread.join();
        }
    }

    /// Listens again on the same address (after [`Self::kill`]); retries a busy port for up to 2 s.
    pub fn restart(&self) {
        let t0 = Instant::now();
        let listener = loop {
            match bind_held(self.addr) {
                Ok(l) => break l,
                Err(_) if t0.elapsed() < Duration::from_secs(2) => thread::sleep(Duration::from_millis(10)),
                Err(e) => panic!("rebind {}: {e}", self.addr),
            }
        };
        self.inner.registry().dead = false;
        self.listen(listener);
    }

    fn listen(&self, listener: TcpListener) {
        let listener = Arc::new(listener);
        let (l, inner) = (listener.clone(), self.inner.clone());
        let thread = thread::spawn(move || accept_loop(&l, &inner));
        *self.listening.lock().unwrap_or_else(|p| p.into_inner()) = Some(Listening { listener, thread });
    }
}

impl Drop for Killable {
    fn drop(&mut self) {
        self.kill();
    }
}

fn accept_loop(listener: &TcpListener, inner: &Arc<Inner>) {
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                let inner = inner.clone();
                thread::spawn(move || serve(conn, &inner));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) if inner.dead() => return,
            Err(_) => thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Registers the connection (so a kill closes it) and serves it.
fn serve(conn: TcpStream, inner: &Inner) {
    {
        let mut reg = inner.registry();
        if reg.dead {
            return;
        }
        match conn.try_clone() {
            Ok(c) => reg.conns.push(c),
            Err(_) => return,
        }
    }
    inner.counts.accepts.fetch_add(1, Ordering::SeqCst);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    match inner.proto {
        Proto::Http => serve_http(conn, inner),
        Proto::Echo => serve_echo(conn, inner),
    }
}

fn serve_http(mut conn: TcpStream, inner: &Inner) {
    let mut buf = Vec::new();
    while let Some((path, close)) = read_head(&mut conn, &mut buf) {
        let probe = path == "/hc";
        let answer = {
            let reg = inner.registry();
            if reg.dead {
                inner.counts.unanswered.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let counter = if probe {
                &inner.counts.probes
            } else {
                &inner.counts.requests
            };
            counter.fetch_add(1, Ordering::SeqCst);
            if inner.hang.load(Ordering::SeqCst) && !probe {
                None
            } else {
                let status = if probe && inner.sick.load(Ordering::SeqCst) {
                    500
                } else {
                    200
                };
                Some(response(status, &inner.name, close))
            }
        };
        let Some(out) = answer else {
            return hang(conn, inner);
        };
        if conn.write_all(&out).is_err() || close {
            return;
        }
    }
}

fn response(status: u16, body: &str, close: bool) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n{body}",
        body.len(),
        if close { "close" } else { "keep-alive" }
    )
    .into_bytes()
}

/// Reads one request head (GET-style, no body): its path and whether it asks to close.
fn read_head(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, bool)> {
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = req.parse(buf) {
            let path = req.path.unwrap_or("/").to_string();
            let close = req.version == Some(0)
                || req
                    .headers
                    .iter()
                    .any(|h| h.name.eq_ignore_ascii_case("connection") && h.value.eq_ignore_ascii_case(b"close"));
            buf.drain(..n);
            return Some((path, close));
        }
        let mut tmp = [0u8; 8192];
        match super::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Holds a connection without answering until the peer closes it, the backend dies, or 30 s pass.
fn hang(mut conn: TcpStream, inner: &Inner) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(20)));
    let t0 = Instant::now();
    let mut tmp = [0u8; 4096];
    while t0.elapsed() < Duration::from_secs(30) && !inner.dead() {
        match std::io::Read::read(&mut conn, &mut tmp) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn serve_echo(mut conn: TcpStream, inner: &Inner) {
    let mut tmp = [0u8; 8192];
    let prefix = format!("{}:", inner.name);
    loop {
        let n = match super::read_retrying(&mut conn, &mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if inner.dead() {
            inner.counts.unanswered.fetch_add(1, Ordering::SeqCst);
            return;
        }
        inner.counts.requests.fetch_add(1, Ordering::SeqCst);
        let mut out = prefix.clone().into_bytes();
        out.extend_from_slice(&tmp[..n]);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}
