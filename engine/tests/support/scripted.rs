//! Scripted traffic for replays through the live proxy: backends that fail as `corelb pick --fail ADDR=MODE` says
//! (ok, dead, reset, timeout, eNNN), each noting which request reached it, in order; clients that send from a
//! chosen 127.x.y.z address; and the proxy's own account of each request read back from an access log.

use corelb_engine::balance::UpstreamPlan;
use corelb_engine::simulate::{BackendMode, Timing};
use corelb_engine::state::Shared;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The request header carrying a request's number, so that backends and the access log can name it.
pub const ID_HEADER: &str = "X-Req";

/// The longest a test waits for anything it needs (a request to arrive, log lines, idle peers).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Which protocol a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// Reads a request head (and a Content-Length body), then acts on its mode.
    Http,
    /// Reads the client's first byte, then writes its address and closes; `reset` resets instead (any other mode
    /// is a connected session).
    Stream,
}

/// One arrival at a backend: which backend, and the request's number (`None` for a stream session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub backend: usize,
    pub request: Option<u64>,
}

/// What the backends share: the arrivals in order, the gate that holds `/sleep/` requests, and the stop flag.
#[derive(Debug, Default)]
struct Board {
    arrivals: Mutex<Vec<Arrival>>,
    arrived: Condvar,
    released: Mutex<bool>,
    release: Condvar,
    stop: AtomicBool,
}

impl Board {
    fn note(&self, a: Arrival) {
        if let Ok(mut v) = self.arrivals.lock() {
            v.push(a);
        }
        self.arrived.notify_all();
    }

    /// Blocks a held request until the farm releases it (or [`PATIENCE`] passes).
    fn hold(&self) {
        let Ok(mut open) = self.released.lock() else { return };
        let end = Instant::now() + PATIENCE;
        while !*open && Instant::now() < end {
            match self.release.wait_timeout(open, Duration::from_millis(100)) {
                Ok((g, _)) => open = g,
                Err(_) => return,
            }
        }
    }
}

/// One scripted backend. A `dead` one is a bound socket that never listens: connects to it are refused, and no
/// other test can take its port meanwhile.
struct Scripted {
    addr: SocketAddr,
    mode: BackendMode,
    timing: Timing,
    dead_socket: Option<socket2::Socket>,
}

/// Backends in a fixed order, each with its mode; stops them when dropped.
pub struct Farm {
    backends: Vec<Scripted>,
    board: Arc<Board>,
}

impl Farm {
    /// Starts one backend per mode, on free loopback ports, in order; each answers at once.
    pub fn start(modes: &[BackendMode], proto: Proto) -> Farm {
        let timed: Vec<(BackendMode, Timing)> = modes.iter().map(|&m| (m, Timing::default())).collect();
        Farm::start_timed(&timed, proto)
    }

    /// Starts one backend per mode, each sending its answer's head (stream: its first bytes) `head` ms after the
    /// request and the rest `body` ms later.
    pub fn start_timed(modes: &[(BackendMode, Timing)], proto: Proto) -> Farm {
        let board = Arc::new(Board::default());
        let backends = modes
            .iter()
            .enumerate()
            .map(|(i, &(mode, timing))| start_one(i, Script { mode, timing }, proto, &board))
            .collect();
        Farm { backends, board }
    }

    /// The address of backend `i`.
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.backends[i].addr
    }

    /// Every backend's address, in order.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.backends.iter().map(|b| b.addr).collect()
    }

    /// The backend listening on `addr`, if one of ours.
    pub fn index_of(&self, addr: SocketAddr) -> Option<usize> {
        self.backends.iter().position(|b| b.addr == addr)
    }

    /// The mode of backend `i`.
    pub fn mode(&self, i: usize) -> BackendMode {
        self.backends[i].mode
    }

    /// When backend `i` answers.
    pub fn timing(&self, i: usize) -> Timing {
        self.backends[i].timing
    }

    /// How many arrivals there have been.
    pub fn arrival_count(&self) -> usize {
        self.board.arrivals.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// The arrivals from the `from`-th on.
    pub fn arrivals_since(&self, from: usize) -> Vec<Arrival> {
        self.board
            .arrivals
            .lock()
            .map(|v| v.get(from..).unwrap_or_default().to_vec())
            .unwrap_or_default()
    }

    /// The backends request `id` reached, in order.
    pub fn reached_by(&self, id: u64) -> Vec<usize> {
        self.arrivals_since(0)
            .into_iter()
            .filter(|a| a.request == Some(id))
            .map(|a| a.backend)
            .collect()
    }

    /// Waits until request `id` reached some backend; whether it did within [`PATIENCE`].
    pub fn wait_arrival(&self, id: u64) -> bool {
        let Ok(mut v) = self.board.arrivals.lock() else {
            return false;
        };
        let end = Instant::now() + PATIENCE;
        while !v.iter().any(|a| a.request == Some(id)) {
            if Instant::now() > end {
                return false;
            }
            match self.board.arrived.wait_timeout(v, Duration::from_millis(100)) {
                Ok((g, _)) => v = g,
                Err(_) => return false,
            }
        }
        true
    }

    /// Lets every held (`/sleep/`) request answer.
    pub fn release(&self) {
        if let Ok(mut open) = self.board.released.lock() {
            *open = true;
        }
        self.board.release.notify_all();
    }
}

impl Drop for Farm {
    fn drop(&mut self) {
        self.board.stop.store(true, Ordering::Relaxed);
        self.release();
        for b in &self.backends {
            if b.dead_socket.is_none() {
                let _ = TcpStream::connect_timeout(&b.addr, Duration::from_millis(200));
            }
        }
    }
}

/// How one backend answers.
#[derive(Debug, Clone, Copy)]
struct Script {
    mode: BackendMode,
    timing: Timing,
}

fn start_one(index: usize, script: Script, proto: Proto, board: &Arc<Board>) -> Scripted {
    let mode = script.mode;
    if mode == BackendMode::Dead {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .expect("bind a dead port");
        let addr = sock
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .expect("dead address");
        return Scripted {
            addr,
            mode,
            timing: script.timing,
            dead_socket: Some(sock),
        };
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
    let addr = listener.local_addr().expect("backend address");
    let board = board.clone();
    thread::spawn(move || {
        for conn in listener.incoming() {
            if board.stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let board = board.clone();
            thread::spawn(move || match proto {
                Proto::Http => serve_http(conn, index, addr, script, &board),
                Proto::Stream => serve_stream(conn, index, addr, script, &board),
            });
        }
    });
    Scripted {
        addr,
        mode,
        timing: script.timing,
        dead_socket: None,
    }
}

/// A request head as a backend read it: the path and the request number.
struct Head {
    path: String,
    id: Option<u64>,
}

/// Reads one request head and its Content-Length body (None: the connection ended first).
fn read_head(conn: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::new();
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut hs);
        if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
            let path = req.path.unwrap_or("/").to_string();
            let get = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
            };
            let id = get(ID_HEADER).and_then(|v| v.parse().ok());
            let len: usize = get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut have = buf.len() - n;
            while have < len {
                let mut tmp = [0u8; 4096];
                match super::read_retrying(conn, &mut tmp) {
                    Ok(0) | Err(_) => return None,
                    Ok(k) => have += k,
                }
            }
            return Some(Head { path, id });
        }
        let mut tmp = [0u8; 4096];
        match super::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
        }
    }
}

fn serve_http(mut conn: TcpStream, index: usize, addr: SocketAddr, script: Script, board: &Board) {
    let Script { mode, timing } = script;
    let _ = conn.set_read_timeout(Some(PATIENCE));
    let Some(head) = read_head(&mut conn) else { return };
    board.note(Arrival {
        backend: index,
        request: head.id,
    });
    let status = match mode {
        BackendMode::Reset => {
            let _ = reset(&conn);
            return;
        }
        BackendMode::Timeout => {
            // Never answers: waits for the proxy to give up and close.
            let mut tmp = [0u8; 1024];
            while matches!(super::read_retrying(&mut conn, &mut tmp), Ok(n) if n > 0) {}
            return;
        }
        BackendMode::Status(code) => code,
        BackendMode::Ok | BackendMode::Dead => 200,
    };
    if head.path.starts_with("/sleep/") {
        board.hold();
    }
    let body = addr.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\nX-Backend: {body}\r\n\r\n",
        body.len()
    );
    pause(timing.head);
    if timing.body > 0 {
        let _ = conn.write_all(head.as_bytes());
        pause(timing.body);
        let _ = conn.write_all(body.as_bytes());
    } else {
        let _ = conn.write_all(format!("{head}{body}").as_bytes());
    }
    let _ = conn.shutdown(Shutdown::Write);
    let mut tmp = [0u8; 1024];
    while matches!(super::read_retrying(&mut conn, &mut tmp), Ok(n) if n > 0) {}
}

fn serve_stream(mut conn: TcpStream, index: usize, addr: SocketAddr, script: Script, board: &Board) {
    let Script { mode, timing } = script;
    board.note(Arrival {
        backend: index,
        request: None,
    });
    // The client's first byte first: the proxy's connect has completed once it comes through, so a reset cannot
    // race the proxy's connect check (it would make it a refused connect), and no unread byte turns a close into
    // a reset.
    let _ = conn.set_read_timeout(Some(PATIENCE));
    let mut one = [0u8; 1];
    let _ = super::read_retrying(&mut conn, &mut one);
    if mode == BackendMode::Reset {
        let _ = reset(&conn);
        return;
    }
    pause(timing.head);
    let _ = conn.write_all(addr.to_string().as_bytes());
    pause(timing.body);
    let _ = conn.shutdown(Shutdown::Both);
}

/// Sleeps `ms` milliseconds (none for 0).
fn pause(ms: u64) {
    if ms > 0 {
        thread::sleep(Duration::from_millis(ms));
    }
}

/// Closes `conn` with a reset (SO_LINGER 0).
fn reset(conn: &TcpStream) -> std::io::Result<()> {
    socket2::SockRef::from(conn).set_linger(Some(Duration::ZERO))
}

/// A connection to `front` from `src` (any port).
pub fn connect_from(front: SocketAddr, src: IpAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::new(src, 0).into())
        .expect("bind the source address");
    sock.connect(&front.into()).expect("connect to the proxy");
    TcpStream::from(sock)
}

/// One HTTP request as a client sends it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub src: IpAddr,
    /// `GET` or `POST`.
    pub method: &'static str,
    pub uri: String,
    pub host: String,
    pub id: u64,
}

/// What a client got for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// The client's port (the proxy's `$remote_port`).
    pub port: u16,
    /// `None` when the proxy closed without an answer.
    pub status: Option<u16>,
}

/// Sends `req` on a fresh connection (`Connection: close`; a POST carries a 2-byte body).
pub fn http_from(front: SocketAddr, req: &HttpRequest) -> Answered {
    let conn = connect_from(front, req.src);
    let port = conn.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut c = super::Client::from_stream(conn);
    c.conn.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let body = if req.method == "POST" { "hi" } else { "" };
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    c.send(
        format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\n{ID_HEADER}: {}\r\n{length}Connection: close\r\n\r\n{body}",
            req.method, req.uri, req.host, req.id
        )
        .as_bytes(),
    );
    Answered {
        port,
        status: c.read_response().map(|r| r.status),
    }
}

/// One stream session from `src` that sends one byte: everything the proxy sent until it closed.
pub fn stream_from(front: SocketAddr, src: IpAddr) -> Vec<u8> {
    stream_timed(front, src).0
}

/// [`stream_from`], with the ms from the connect to the first byte received (`None`: none came) and to the close.
pub fn stream_timed(front: SocketAddr, src: IpAddr) -> (Vec<u8>, Option<u64>, u64) {
    let start = Instant::now();
    let mut first = None;
    let mut conn = connect_from(front, src);
    let _ = conn.set_read_timeout(Some(PATIENCE));
    let _ = conn.write_all(b"x");
    let mut got = Vec::new();
    let mut tmp = [0u8; 1024];
    loop {
        match conn.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert_with(|| start.elapsed().as_millis() as u64);
                got.extend_from_slice(&tmp[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (got, first, start.elapsed().as_millis() as u64)
}

/// The access log the replays read: per request its number (`-` when the proxy refused it before reading its
/// headers), the client's port, nginx's `$upstream_addr`, `$status` and `$upstream_status`.
pub struct TryLog {
    pub path: PathBuf,
}

/// What the proxy logged for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// `$upstream_addr` split at `, `: addresses, the upstream's name for "no live upstreams", `-` for none.
    pub upstream: Vec<String>,
    pub status: u16,
    /// `$upstream_status` split at `, `: each try's status (502 for an error, 504 for a timeout).
    pub upstream_status: Vec<String>,
    /// The last try's `$upstream_header_time` and `$upstream_response_time`, in ms (`None`: `-`).
    pub header_ms: Option<u64>,
    pub response_ms: Option<u64>,
}

impl Logged {
    /// Whether a try timed out on a backend of `farm` scripted to answer: on a machine so busy that a backend
    /// thread did not answer within `proxy_read_timeout`, the run says nothing about the retry rules.
    pub fn timed_out_unscripted(&self, farm: &Farm) -> bool {
        self.upstream.iter().zip(&self.upstream_status).any(|(hop, st)| {
            let mode = hop.parse().ok().and_then(|a| farm.index_of(a)).map(|i| farm.mode(i));
            st == "504" && !matches!(mode, Some(BackendMode::Timeout | BackendMode::Status(504)) | None)
        })
    }
}

/// One line of the tries log.
struct Line {
    id: Option<u64>,
    port: u16,
    logged: Logged,
}

impl TryLog {
    /// A log in `dir` (created empty).
    pub fn new(dir: &Path) -> TryLog {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).expect("log dir");
        TryLog {
            path: dir.join("tries.log"),
        }
    }

    /// The directives that write it, for an `http` block.
    pub fn directives(&self) -> String {
        format!(
            "log_format tries '$http_x_req|$remote_port|$upstream_addr|$status|$upstream_status|$upstream_header_time|$upstream_response_time';\n    access_log {} tries;\n",
            self.path.display()
        )
    }

    /// The lines of `requests` (number, client port), once all are written (asking the shards to hand them
    /// over), by request number. A line without a number is the request sent from its port.
    pub fn read(&self, shared: &Shared, requests: &[(u64, u16)]) -> HashMap<u64, Logged> {
        let end = Instant::now() + PATIENCE;
        loop {
            shared.flush_access_logs(Duration::from_secs(5), true);
            let text = std::fs::read_to_string(&self.path).unwrap_or_default();
            let lines: Vec<Line> = text.lines().filter_map(parse_line).collect();
            let got: HashMap<u64, Logged> = requests
                .iter()
                .filter_map(|&(id, port)| {
                    let line = lines
                        .iter()
                        .find(|l| l.id == Some(id))
                        .or_else(|| lines.iter().find(|l| l.id.is_none() && l.port == port))?;
                    Some((id, line.logged.clone()))
                })
                .collect();
            if got.len() == requests.len() || Instant::now() > end {
                return got;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

fn parse_line(line: &str) -> Option<Line> {
    let mut parts = line.split('|');
    let id = parts.next()?.parse().ok();
    let port = parts.next()?.parse().ok()?;
    let upstream = parts.next()?.split(", ").map(str::to_string).collect();
    let status = parts.next()?.parse().ok()?;
    let upstream_status = parts.next()?.split(", ").map(str::to_string).collect();
    // `0.011` (seconds with ms) -> 11, for the last try
    let last_ms = |field: Option<&str>| -> Option<u64> {
        let last = field?.rsplit(", ").next()?;
        let (s, ms) = last.split_once('.')?;
        Some(s.parse::<u64>().ok()? * 1000 + ms.parse::<u64>().ok()?)
    };
    let header_ms = last_ms(parts.next());
    let response_ms = last_ms(parts.next());
    Some(Line {
        id,
        port,
        logged: Logged {
            upstream,
            status,
            upstream_status,
            header_ms,
            response_ms,
        },
    })
}

/// Every peer of `plan`, primary ones first.
pub fn peers(plan: &UpstreamPlan) -> impl Iterator<Item = &corelb_engine::balance::Peer> {
    plan.primary.peers.iter().chain(&plan.backup.peers)
}

/// Waits until the peers of `plan` hold `held` connections in all (the previous request has reported its
/// outcome); whether they did within [`PATIENCE`].
pub fn settle(plan: &UpstreamPlan, held: u32) -> bool {
    let end = Instant::now() + PATIENCE;
    loop {
        let conns: u32 = peers(plan).map(|p| p.slot.conns()).sum();
        if conns == held {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// One stream session as the live proxy ran it. corelb has no stream access log, so its peers are read from the
/// zone and the backends: the ones whose failure count rose (refused connects, before the session could start;
/// their order is not observable) and the backend that accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Peers whose connect failed, in config order.
    pub failed: Vec<SocketAddr>,
    /// The backends that accepted it (one, or none when it failed: nginx's `$status` 502).
    pub accepted: Vec<usize>,
    /// What the client received.
    pub data: Vec<u8>,
    /// The ms from the client's connect to the first byte received and to the close.
    pub first_ms: Option<u64>,
    pub total_ms: u64,
}

/// Runs one stream session from `src` through `front` once the peers of `plan` are idle (`None` if they never
/// were).
pub fn stream_session(farm: &Farm, plan: &UpstreamPlan, front: SocketAddr, src: IpAddr) -> Option<Session> {
    let failures = || -> Vec<(SocketAddr, u64)> { peers(plan).map(|p| (p.addr, p.slot.stats().failures)).collect() };
    if !settle(plan, 0) {
        return None;
    }
    let (before, seen) = (failures(), farm.arrival_count());
    let (data, first_ms, total_ms) = stream_timed(front, src);
    let failed = failures()
        .iter()
        .zip(&before)
        .filter(|((_, after), (_, was))| after > was)
        .map(|((a, _), _)| *a)
        .collect();
    let accepted = farm.arrivals_since(seen).iter().map(|a| a.backend).collect();
    Some(Session {
        failed,
        accepted,
        data,
        first_ms,
        total_ms,
    })
}
