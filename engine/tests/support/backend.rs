//! Test backends: small blocking HTTP/1.1 and TCP servers on loopback threads (ok, failing, resetting, slow,
//! held, echoing), counting what they see.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

/// How a backend answers.
#[derive(Debug, Clone)]
pub enum Mode {
    /// 200 with its name as the body; keeps the connection alive unless asked to close.
    Ok,
    /// This status with its name as the body.
    Status(u16),
    /// Accepts, then closes without reading or answering.
    Reset,
    /// Answers like `Ok` after sleeping.
    Slow(Duration),
    /// Answers with the request body (Content-Length), and a chunked answer when the path is `/chunked`.
    Echo,
    /// Answers like `Ok` (announcing keep-alive) and then closes the connection anyway.
    CloseAfter,
    /// Reads the request, then closes without answering.
    Hangup,
    /// Answers like `Ok` once the gate is open (each request is active at the backend until then).
    Held(Arc<Gate>),
}

/// A gate that held requests wait at until the test opens it.
#[derive(Debug, Default)]
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    /// Lets every held request, and every later one, through.
    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }

    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while !*open {
            open = self.opened.wait(open).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What a backend has seen.
#[derive(Debug, Default)]
pub struct Stats {
    pub accepts: AtomicUsize,
    pub requests: AtomicUsize,
    pub active: AtomicUsize,
    pub max_active: AtomicUsize,
    pub last_head: Mutex<String>,
}

/// A running backend; stops accepting when dropped.
pub struct Backend {
    pub addr: SocketAddr,
    pub name: String,
    pub stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

impl Backend {
    /// Starts a backend called `name` on a free loopback port.
    pub fn start(name: &str, mode: Mode) -> Backend {
        Self::start_on(name, mode, "127.0.0.1:0")
    }

    /// Starts a backend called `name` on `addr` (a loopback address; port 0 for a free one).
    pub fn start_on(name: &str, mode: Mode, addr: &str) -> Backend {
        let listener = TcpListener::bind(addr).expect("bind a backend");
        let addr = listener.local_addr().expect("backend address");
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp, nm) = (stats.clone(), stop.clone(), name.to_string());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                st.accepts.fetch_add(1, Ordering::Relaxed);
                let (st, nm, mode) = (st.clone(), nm.clone(), mode.clone());
                thread::spawn(move || serve(conn, &nm, &mode, &st));
            }
        });
        Backend {
            addr,
            name: name.to_string(),
            stats,
            stop,
        }
    }

    pub fn requests(&self) -> usize {
        self.stats.requests.load(Ordering::Relaxed)
    }

    pub fn accepts(&self) -> usize {
        self.stats.accepts.load(Ordering::Relaxed)
    }

    pub fn max_active(&self) -> usize {
        self.stats.max_active.load(Ordering::SeqCst)
    }

    /// Requests read and not answered yet.
    pub fn active(&self) -> usize {
        self.stats.active.load(Ordering::SeqCst)
    }

    pub fn last_head(&self) -> String {
        self.stats.last_head.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

/// A request as a backend read it.
struct Req {
    head: String,
    path: String,
    close: bool,
    body: Vec<u8>,
}

fn read_request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Req> {
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = req.parse(buf) {
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let path = req.path.unwrap_or("/").to_string();
            let get = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
            };
            let close = get("connection").is_some_and(|v| v.contains("close")) || req.version == Some(0);
            let len: usize = get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let chunked = get("transfer-encoding").is_some_and(|v| v.contains("chunked"));
            buf.drain(..n);
            let body = if chunked {
                read_chunked(conn, buf)?
            } else {
                read_exact_body(conn, buf, len)?
            };
            return Some(Req {
                head,
                path,
                close,
                body,
            });
        }
        let mut tmp = [0u8; 65536];
        match super::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

fn read_exact_body(conn: &mut TcpStream, buf: &mut Vec<u8>, len: usize) -> Option<Vec<u8>> {
    while buf.len() < len {
        let mut tmp = [0u8; 65536];
        match super::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    Some(buf.drain(..len).collect())
}

fn read_chunked(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut d = corelb_engine::http::chunked::ChunkedDecoder::new();
    let mut body = Vec::new();
    loop {
        let used = d.feed(buf, |s| body.extend_from_slice(s)).ok()?;
        buf.drain(..used);
        if d.is_done() {
            return Some(body);
        }
        let mut tmp = [0u8; 65536];
        match super::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

fn serve(mut conn: TcpStream, name: &str, mode: &Mode, st: &Stats) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    if let Mode::Reset = mode {
        let _ = socket_linger_zero(&conn);
        return;
    }
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut conn, &mut buf) {
        st.requests.fetch_add(1, Ordering::Relaxed);
        let now = st.active.fetch_add(1, Ordering::SeqCst) + 1;
        st.max_active.fetch_max(now, Ordering::SeqCst);
        if let Ok(mut h) = st.last_head.lock() {
            *h = req.head.clone();
        }
        if let Mode::Hangup = mode {
            st.active.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let out = answer(name, mode, &req);
        st.active.fetch_sub(1, Ordering::SeqCst);
        if conn.write_all(&out).is_err() || req.close || matches!(mode, Mode::CloseAfter) {
            let _ = conn.shutdown(Shutdown::Both);
            return;
        }
    }
}

fn answer(name: &str, mode: &Mode, req: &Req) -> Vec<u8> {
    let (status, body) = match mode {
        Mode::Status(s) => (*s, name.as_bytes().to_vec()),
        Mode::Slow(d) => {
            thread::sleep(*d);
            (200, name.as_bytes().to_vec())
        }
        Mode::Held(gate) => {
            gate.wait();
            (200, name.as_bytes().to_vec())
        }
        Mode::Echo if req.path == "/chunked" => {
            let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for piece in req.body.chunks(1000).chain(std::iter::once(&b""[..])) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            return out;
        }
        Mode::Echo => (200, req.body.clone()),
        _ => (200, name.as_bytes().to_vec()),
    };
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nServer: test\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        body.len(),
        if req.close { "close" } else { "keep-alive" }
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

fn socket_linger_zero(conn: &TcpStream) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: sets SO_LINGER on a valid socket with a properly sized struct.
    let r = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A TCP echo server (for stream tests): echoes until the client half-closes, then half-closes too.
pub fn tcp_echo() -> (SocketAddr, Arc<Stats>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = listener.local_addr().expect("echo address");
    let stats = Arc::new(Stats::default());
    let st = stats.clone();
    thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            st.accepts.fetch_add(1, Ordering::Relaxed);
            thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = [0u8; 8192];
                loop {
                    match super::read_retrying(&mut conn, &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if conn.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = conn.shutdown(Shutdown::Write);
            });
        }
    });
    (addr, stats)
}
