//! A recording backend for hostile-input tests: reads requests one after another on each connection (keep-alive,
//! framed by Content-Length or chunked), records each one's request line, head and body, counts every byte it
//! receives, and answers each request with `200 ok`.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as the backend read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `METHOD target HTTP/1.x`
    pub line: String,
    pub head: String,
    pub body: Vec<u8>,
}

/// What the backend received.
#[derive(Debug, Default)]
pub struct Record {
    pub bytes: AtomicUsize,
    pub accepts: AtomicUsize,
    pub requests: Mutex<Vec<Seen>>,
    /// Bytes a connection held that were not a request the backend could frame.
    pub garbage: AtomicUsize,
}

/// A running recorder; stops accepting when dropped.
pub struct Recorder {
    pub addr: SocketAddr,
    pub record: Arc<Record>,
    stop: Arc<AtomicBool>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

impl Recorder {
    pub fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the recorder");
        let addr = listener.local_addr().expect("recorder address");
        let record = Arc::new(Record::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (rec, sp) = (record.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                rec.accepts.fetch_add(1, Ordering::Relaxed);
                let rec = rec.clone();
                thread::spawn(move || serve(conn, &rec));
            }
        });
        Recorder { addr, record, stop }
    }

    pub fn bytes(&self) -> usize {
        self.record.bytes.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.record.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub fn garbage(&self) -> usize {
        self.record.garbage.load(Ordering::SeqCst)
    }
}

fn serve(mut conn: TcpStream, rec: &Record) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    loop {
        match next_request(&mut conn, &mut buf, rec) {
            Ok(Some(seen)) => {
                if let Ok(mut r) = rec.requests.lock() {
                    r.push(seen);
                }
                if conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .is_err()
                {
                    return;
                }
            }
            Ok(None) => return,
            Err(()) => {
                rec.garbage.fetch_add(buf.len().max(1), Ordering::SeqCst);
                return;
            }
        }
    }
}

fn more(conn: &mut TcpStream, buf: &mut Vec<u8>, rec: &Record) -> bool {
    let mut tmp = [0u8; 65536];
    match super::read_retrying(conn, &mut tmp) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            rec.bytes.fetch_add(n, Ordering::SeqCst);
            buf.extend_from_slice(&tmp[..n]);
            true
        }
    }
}

/// The next request on the connection: `Ok(None)` when it closed cleanly between requests, `Err` on bytes that
/// are not a well-framed request.
fn next_request(conn: &mut TcpStream, buf: &mut Vec<u8>, rec: &Record) -> Result<Option<Seen>, ()> {
    loop {
        let mut hs = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut hs);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let line = head.lines().next().unwrap_or("").to_string();
                let get = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let chunked = get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
                let len = get("content-length")
                    .map(|v| v.parse::<usize>().map_err(|_| ()))
                    .transpose()?;
                buf.drain(..n);
                let body = if chunked {
                    chunked_body(conn, buf, rec)?
                } else {
                    let len = len.unwrap_or(0);
                    while buf.len() < len {
                        if !more(conn, buf, rec) {
                            return Err(());
                        }
                    }
                    buf.drain(..len).collect()
                };
                return Ok(Some(Seen { line, head, body }));
            }
            Ok(httparse::Status::Partial) => {}
            Err(_) => return Err(()),
        }
        if !more(conn, buf, rec) {
            return if buf.is_empty() { Ok(None) } else { Err(()) };
        }
    }
}

fn chunked_body(conn: &mut TcpStream, buf: &mut Vec<u8>, rec: &Record) -> Result<Vec<u8>, ()> {
    let mut d = corelb_engine::http::chunked::ChunkedDecoder::new();
    let mut body = Vec::new();
    loop {
        let used = d.feed(buf, |s| body.extend_from_slice(s)).map_err(|_| ())?;
        buf.drain(..used);
        if d.is_done() {
            return Ok(body);
        }
        if !more(conn, buf, rec) {
            return Err(());
        }
    }
}
