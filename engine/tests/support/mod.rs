//! Shared test support: config builders, a proxy started in-process on real loopback sockets, and a raw client.
#![allow(dead_code)]

pub mod api_client;
pub mod backend;
pub mod dns;
pub mod goldens;
pub mod killable;
pub mod recorder;
pub mod scripted;
pub mod skip;
pub mod tls;

use corelb_engine::config::key::KeyTemplate;
use corelb_engine::config::model::*;
use corelb_engine::runtime::Runtime;
use corelb_engine::shard;
use corelb_engine::snapshot::Snapshot;
use corelb_engine::state::Shared;
use corelb_shared_state::Zone;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The sockets that hold the ports of [`free_addr`] and [`dead_addr`], for the life of the test process.
static HELD: Mutex<Vec<socket2::Socket>> = Mutex::new(Vec::new());

/// A loopback port held for the life of the test process by a TCP socket bound to it that never listens, with
/// SO_REUSEADDR and SO_REUSEPORT both as given. A port that was bound and released could be given to another test
/// running at the same time (its backend, or its proxy, which would then share the port by SO_REUSEPORT).
fn held_port(reuse_port: bool) -> SocketAddr {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    sock.set_reuse_address(reuse_port).expect("SO_REUSEADDR");
    sock.set_reuse_port(reuse_port).expect("SO_REUSEPORT");
    sock.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind a test port");
    let addr = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("bound address");
    HELD.lock().unwrap_or_else(PoisonError::into_inner).push(sock);
    addr
}

/// A loopback address for a proxy to listen on, for the life of the test process: its holder has SO_REUSEADDR and
/// SO_REUSEPORT, so the proxy's listeners bind beside it (a socket the shards share has SO_REUSEADDR, a `reuseport`
/// one both), while a socket with neither cannot have the port, and no port chosen by the kernel (`:0`) is ever
/// this one.
pub fn free_addr() -> SocketAddr {
    held_port(true)
}

/// An int option (`SOL_SOCKET`) of a socket of this process, as `getsockopt` gives it.
pub fn socket_option(fd: i32, name: i32) -> Option<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are a valid `int` buffer and its size for the call to fill.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

/// Waits (at most 10 s) until no socket listens on `addr` any more: a stopped proxy's shards close their
/// duplicates of a shared listening socket as they notice the stop, after [`Proxy`]'s drop returned, and a proxy
/// started again on the same address before that finds it taken (nginx's restart retries its bind for the same
/// reason). A socket with SO_REUSEADDR binds beside the address's holder but not beside a listening one.
pub fn wait_released(addr: SocketAddr) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let probe = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
        probe.set_reuse_address(true).expect("SO_REUSEADDR");
        if probe.bind(&addr.into()).is_ok() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{addr} still listened on 10 s after the stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A loopback address that refuses connections (ECONNREFUSED) for the life of the test process: its holder has
/// neither SO_REUSEADDR nor SO_REUSEPORT, so no socket of this or any other process (a backend or proxy of a test
/// running at the same time) can listen on it.
pub fn dead_addr() -> SocketAddr {
    held_port(false)
}

pub fn server_line(addr: SocketAddr) -> ServerLine {
    ServerLine::new(addr.to_string(), vec![addr])
}

pub fn upstream(name: &str, servers: Vec<ServerLine>) -> UpstreamConf {
    UpstreamConf::new(name, Method::RoundRobin, servers)
}

pub fn proxy_location(prefix: &str, upstream: usize, proxy: HttpProxyConf) -> Location {
    Location {
        matcher: LocationMatch::Prefix(prefix.into()),
        parent: None,
        proxy_pass: Some(ProxyPass {
            scheme: "http".into(),
            upstream,
            uri: None,
            url: None,
        }),
        ret: None,
        script: Vec::new(),
        admin: None,
        proxy,
        client: ClientConf::default(),
        files: Default::default(),
        headers: Default::default(),
        realip: None,
        access: None,
        limits: Default::default(),
        gzip: Default::default(),
        charset: Default::default(),
        error_pages: Default::default(),
        proxy_tls: None,
        span: Span::default(),
    }
}

pub fn return_location(matcher: LocationMatch, code: u16, text: Option<&str>) -> Location {
    Location {
        matcher,
        parent: None,
        proxy_pass: None,
        ret: Some(Return {
            code,
            text: text.map(str::to_string),
        }),
        script: Vec::new(),
        admin: None,
        proxy: HttpProxyConf::default(),
        client: ClientConf::default(),
        files: Default::default(),
        headers: Default::default(),
        realip: None,
        access: None,
        limits: Default::default(),
        gzip: Default::default(),
        charset: Default::default(),
        error_pages: Default::default(),
        proxy_tls: None,
        span: Span::default(),
    }
}

/// `proxy_http_version 1.1; proxy_set_header Connection "";` (upstream keepalive).
pub fn keepalive_proxy() -> HttpProxyConf {
    HttpProxyConf {
        http_version_11: true,
        set_headers: vec![("Connection".into(), KeyTemplate::compile("").expect("template"))],
        ..HttpProxyConf::default()
    }
}

pub fn http_config(listen: SocketAddr, upstreams: Vec<UpstreamConf>, locations: Vec<Location>) -> Config {
    Config {
        http: Some(HttpConf {
            upstreams,
            health: Default::default(),
            maps: Vec::new(),
            limit_zones: Default::default(),
            user_vars: Vec::new(),
            charsets: Default::default(),
            ssl_ciphers: false,
            servers: vec![HttpServer {
                listens: vec![Listen {
                    addr: listen,
                    proxy_protocol: false,
                    default_server: false,
                    ssl: false,
                    udp: false,
                    http2: false,
                    socket: Default::default(),
                    span: Span::default(),
                }],
                server_names: vec![],
                locations,
                ret: None,
                script: Vec::new(),
                client: ClientConf::default(),
                files: Default::default(),
                headers: Default::default(),
                realip: None,
                access: None,
                limits: Default::default(),
                gzip: Default::default(),
                charset: Default::default(),
                tls: None,
                http2: Default::default(),
                error_pages: Default::default(),
                span: Span::default(),
            }],
        }),
        ..Config::default()
    }
}

/// A proxy running in this process; drained when dropped.
pub struct Proxy {
    pub shared: Arc<Shared>,
}

impl Proxy {
    pub fn start<R: Runtime>(config: Config, shards: usize) -> Proxy {
        let zone = Arc::new(Zone::new());
        let snap = Snapshot::build(config, &zone, 1).expect("snapshot");
        let shared = Shared::new(snap, zone, shards);
        let cpus = vec![None; shards];
        let handles = shard::start::<R>(&shared, &cpus).expect("shards start");
        drop(handles);
        Proxy { shared }
    }

    pub fn tokio(config: Config) -> Proxy {
        Self::start::<corelb_engine::runtime::tokio_rt::Tokio>(config, 1)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.drain();
    }
}

/// A response as the client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// A blocking client connection with a read buffer.
pub struct Client {
    pub conn: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Self::from_stream(TcpStream::connect(addr).expect("connect to proxy"))
    }

    pub fn from_stream(conn: TcpStream) -> Client {
        conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        Client { conn, buf: Vec::new() }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.conn.write_all(raw).expect("send");
    }

    fn more(&mut self) -> bool {
        let mut tmp = [0u8; 65536];
        match read_retrying(&mut self.conn, &mut tmp) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
        }
    }

    /// Reads one response (None: the connection closed first).
    pub fn read_response(&mut self) -> Option<Response> {
        let (status, head_len, length, chunked) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            if let Ok(httparse::Status::Complete(n)) = r.parse(&self.buf) {
                let get = |name: &str| {
                    r.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let len = get("content-length").and_then(|v| v.parse::<usize>().ok());
                let chunked = get("transfer-encoding").is_some_and(|v| v.contains("chunked"));
                break (r.code.unwrap_or(0), n, len, chunked);
            }
            if !self.more() {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_len]).into_owned();
        self.buf.drain(..head_len);
        let body = if chunked {
            let mut d = corelb_engine::http::chunked::ChunkedDecoder::new();
            let mut body = Vec::new();
            loop {
                let used = d.feed(&self.buf, |s| body.extend_from_slice(s)).ok()?;
                self.buf.drain(..used);
                if d.is_done() {
                    break body;
                }
                if !self.more() {
                    return None;
                }
            }
        } else if let Some(n) = length {
            while self.buf.len() < n {
                if !self.more() {
                    return None;
                }
            }
            self.buf.drain(..n).collect()
        } else {
            while self.more() {}
            std::mem::take(&mut self.buf)
        };
        Some(Response { status, head, body })
    }

    /// Whether the proxy closed the connection (no more bytes).
    pub fn closed(&mut self) -> bool {
        self.buf.is_empty() && !self.more()
    }
}

/// `read`, retried on EINTR (glommio's executors signal threads of the process; a blocking read can see it).
pub fn read_retrying(conn: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match conn.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Whether glommio can run here (io_uring allowed, enough locked memory); a refusal must carry its exit code. When
/// it cannot, the caller drops its glommio variant: a `SKIP` line says so (a failure under `CORELB_REQUIRE=io_uring`).
pub fn glommio_usable() -> bool {
    use corelb_engine::preflight::{ensure_memlock, probe_io_uring};
    let need = 4 * corelb_engine::runtime::glommio_rt::IO_MEMORY as u64;
    let refused = match probe_io_uring() {
        Err(e) => {
            assert_eq!(e.exit_code(), 4, "{e}");
            e
        }
        Ok(()) => match ensure_memlock(need, 2) {
            Err(e) => {
                assert_eq!(e.exit_code(), 5, "{e}");
                e
            }
            Ok(()) => return true,
        },
    };
    skip::skip(skip::Skip {
        need: skip::Need::IoUring,
        cases: 1,
        what: "glommio variant",
        why: &refused.to_string(),
    });
    false
}

/// Polls `cond` every 10 ms until it holds (true) or `limit` passes (false): a bound on a wait for an event, never
/// a timing check.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One request on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Option<Response> {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes());
    c.read_response()
}

/// The lines of the file `path` once it has `n` of them (a log a writer thread fills), waiting at most 5 s; what
/// it has then otherwise.
pub fn lines_when(path: &std::path::Path, n: usize) -> Vec<String> {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n || std::time::Instant::now() > end {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
