//! `proxy_buffering` end to end, on both runtimes, with a client that does not read: with buffering on (nginx's
//! default) a response that fits in `proxy_buffers` is read whole from the upstream and its keepalive connection
//! serves the next request while the slow client still has most of its answer to take (counted in upstream
//! connections); with `proxy_buffering off`, or an upstream's `X-Accel-Buffering: no`, the upstream connection
//! is held until the client has taken the answer; a chunked answer larger than the buffers arrives whole.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{free_addr, glommio_usable, Proxy};

/// Larger than what the kernel buffers between the proxy and a client that reads nothing.
const BIG: usize = 24 << 20;

/// A keepalive backend: `/big` is [`BIG`] bytes (`/big-no` says `X-Accel-Buffering: no`), `/chunked` is BIG
/// bytes in 64 KiB chunks, anything else a short answer. Counts the connections it accepted.
struct BigBackend {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    /// Big answers written whole (into the kernel's buffers).
    written: Arc<AtomicUsize>,
}

impl BigBackend {
    fn start() -> BigBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepts = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(AtomicUsize::new(0));
        let (counted, wrote) = (Arc::clone(&accepts), Arc::clone(&written));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                let wrote = Arc::clone(&wrote);
                std::thread::spawn(move || serve(conn, &wrote));
            }
        });
        BigBackend { addr, accepts, written }
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

fn serve(conn: TcpStream, written: &AtomicUsize) {
    let mut out = conn.try_clone().expect("clone");
    let mut reader = BufReader::new(conn);
    let body = vec![b'x'; BIG];
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_string();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
        }
        let ok = match path.as_str() {
            "/big" | "/big-no" => {
                let accel = if path == "/big-no" {
                    "X-Accel-Buffering: no\r\n"
                } else {
                    ""
                };
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\n{accel}\r\n");
                let r = out.write_all(head.as_bytes()).and_then(|()| out.write_all(&body));
                written.fetch_add(1, Ordering::SeqCst);
                r
            }
            "/chunked" => {
                let mut r = out.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                for piece in body.chunks(64 << 10) {
                    r = r.and_then(|()| write!(out, "{:x}\r\n", piece.len()));
                    r = r.and_then(|()| out.write_all(piece));
                    r = r.and_then(|()| out.write_all(b"\r\n"));
                }
                r.and_then(|()| out.write_all(b"0\r\n\r\n"))
            }
            _ => out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall"),
        };
        if ok.is_err() {
            return;
        }
    }
}

/// Sends `GET path` and reads nothing yet.
fn ask(front: SocketAddr, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(front).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    write!(c, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").expect("send");
    c
}

/// Reads a whole answer (the connection closes after it): its head and body length.
fn read_all(mut c: TcpStream) -> (String, usize) {
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("read");
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    (String::from_utf8_lossy(&all[..at]).into_owned(), all.len() - at)
}

fn small(front: SocketAddr, prefix: &str) -> String {
    let (head, _) = read_all(ask(front, &format!("{prefix}small")));
    head
}

/// A chunked body's data length.
fn dechunked_len(mut body: &[u8]) -> usize {
    let mut n = 0;
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").expect("size line");
        let size = usize::from_str_radix(std::str::from_utf8(&body[..eol]).expect("hex"), 16).expect("size");
        if size == 0 {
            return n;
        }
        n += size;
        body = &body[eol + 2 + size + 2..];
    }
}

fn run<R: Runtime>() {
    let be = BigBackend::start();
    let front = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream u {{ server {be}; keepalive 4; }}
            upstream off {{ server {be}; keepalive 4; }}
            upstream no {{ server {be}; keepalive 4; }}
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffers 64 1m;
            server {{
                listen {front};
                location / {{ proxy_pass http://u; }}
                location /off/ {{ proxy_buffering off; proxy_pass http://off/; }}
                location /no/ {{ proxy_pass http://no/; }}
                location /tight/ {{ proxy_buffers 4 64k; proxy_pass http://u/; }}
            }}
        }}",
        be = be.addr
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);

    // buffering on: the slow client's answer is read whole, its connection serves the next request
    let slow = ask(front, "/big");
    assert!(
        support::wait_until(Duration::from_secs(10), || be.written.load(Ordering::SeqCst) == 1),
        "the backend wrote its answer while the client reads nothing"
    );
    // the last bytes from the kernel's buffers to the proxy
    std::thread::sleep(Duration::from_millis(300));
    assert!(small(front, "/").starts_with("HTTP/1.1 200"));
    assert_eq!(
        be.accepts(),
        1,
        "the next request went on the pooled connection while the slow client waits"
    );
    let (head, len) = read_all(slow);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(len, BIG, "the whole answer");

    // off, and X-Accel-Buffering: no: the upstream connection is the slow client's until it has read
    // (each through an upstream of its own, whose pool starts empty)
    for (prefix, path) in [("/off/", "/off/big"), ("/no/", "/no/big-no")] {
        let before = be.accepts();
        let slow = ask(front, path);
        std::thread::sleep(Duration::from_millis(300));
        assert!(small(front, prefix).starts_with("HTTP/1.1 200"));
        assert_eq!(
            be.accepts(),
            before + 2,
            "{path}: a new connection for the next request"
        );
        let (_, len) = read_all(slow);
        assert_eq!(len, BIG, "{path}");
    }

    // a chunked answer larger than the buffers, read by a slow client: whole, still chunked
    let slow = ask(front, "/tight/chunked");
    std::thread::sleep(Duration::from_millis(300));
    let mut all = Vec::new();
    let mut c = slow;
    c.read_to_end(&mut all).expect("read");
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    assert!(String::from_utf8_lossy(&all[..at]).contains("Transfer-Encoding: chunked"));
    assert_eq!(dechunked_len(&all[at..]), BIG);
}

#[test]
fn tokio_proxy_buffering() {
    run::<Tokio>();
}

#[test]
fn glommio_proxy_buffering() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
