//! One health probe on blocking std sockets with timeouts: a TCP connect (stream), or an HTTP/1.0 `GET` whose
//! response is judged by a `match` block or by the default 2xx/3xx rule (http).

use super::matcher::{default_passes, Matcher, Response, BODY_LIMIT};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The largest response head a probe reads.
const HEAD_LIMIT: usize = 16 * 1024;
/// Headers a probe parses at most.
const MAX_HEADERS: usize = 64;

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub passed: bool,
    /// The response status; 0 when there was none (TCP checks, errors, timeouts).
    pub status: u16,
}

impl Verdict {
    /// No answer, or a bad one.
    pub const FAILED: Verdict = Verdict {
        passed: false,
        status: 0,
    };
}

/// The time limits of one probe.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub connect: Duration,
    /// For the whole response, from the end of the connect.
    pub read: Duration,
}

/// A connect to `addr` within `limit`: TCP, or for a unix-domain peer (`server unix:PATH`) a connect to its path
/// (immediate, as unix-domain connects are), carried by a std TCP stream as the runtimes carry such sockets
/// (`runtime/unix.rs`): reads, writes and timeouts are the same socket calls.
fn connect(addr: &SocketAddr, limit: Duration) -> io::Result<TcpStream> {
    match crate::config::unix_addr::path_of(addr) {
        None => TcpStream::connect_timeout(addr, limit),
        Some(path) => {
            use std::os::fd::{FromRawFd, IntoRawFd};
            let s = std::os::unix::net::UnixStream::connect(path)?;
            // SAFETY: `into_raw_fd` hands over the connected socket's only descriptor, which the stream then owns.
            Ok(unsafe { TcpStream::from_raw_fd(s.into_raw_fd()) })
        }
    }
}

/// A TCP connect check: passes when the connection is accepted within the limit.
pub fn tcp(addr: SocketAddr, limits: Limits) -> Verdict {
    Verdict {
        passed: connect(&addr, limits.connect).is_ok(),
        status: 0,
    }
}

/// An HTTP check: sends `request`, reads the response (the body only when `matcher` tests it) and judges it.
pub fn http(addr: SocketAddr, request: &[u8], limits: Limits, matcher: Option<&Matcher>) -> Verdict {
    let Ok(mut stream) = connect(&addr, limits.connect) else {
        return Verdict::FAILED;
    };
    let deadline = Instant::now() + limits.read;
    if stream.set_write_timeout(Some(limits.read)).is_err() || stream.write_all(request).is_err() {
        return Verdict::FAILED;
    }
    let with_body = matcher.is_some_and(Matcher::needs_body);
    let Ok(response) = read_response(&mut stream, deadline, with_body) else {
        return Verdict::FAILED;
    };
    let passed = match matcher {
        Some(m) => m.passes(&response),
        None => default_passes(response.status),
    };
    Verdict {
        passed,
        status: response.status,
    }
}

/// Reads into `buf` until `done` says it has enough, the peer closes, or the deadline passes (an error).
fn read_until(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: Instant,
    limit: usize,
    mut done: impl FnMut(&[u8]) -> bool,
) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    while !done(buf) && buf.len() < limit {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The status line and headers, and with `with_body` up to [`BODY_LIMIT`] bytes of body (by `Content-Length`,
/// or to the end of the connection).
fn read_response(stream: &mut TcpStream, deadline: Instant, with_body: bool) -> io::Result<Response> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = |b: &[u8]| b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
    read_until(stream, &mut buf, deadline, HEAD_LIMIT, |b| head_end(b).is_some())?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut headers);
    let head_len = match parsed.parse(&buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return Err(io::ErrorKind::InvalidData.into()),
    };
    let mut response = Response {
        status: parsed.code.unwrap_or(0),
        headers: parsed
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        body: Vec::new(),
    };
    if !with_body {
        return Ok(response);
    }
    let length = response
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok());
    let want = length.unwrap_or(BODY_LIMIT).min(BODY_LIMIT);
    let mut body = buf.split_off(head_len.min(buf.len()));
    read_until(stream, &mut body, deadline, BODY_LIMIT, |b| b.len() >= want)?;
    body.truncate(want);
    response.body = body;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    const LIMITS: Limits = Limits {
        connect: Duration::from_secs(2),
        read: Duration::from_millis(500),
    };

    /// A one-connection server that answers `answer` (or nothing, holding the connection, when empty).
    fn serve_once(answer: &'static [u8]) -> (SocketAddr, thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let h = thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut req = [0u8; 1024];
                let _ = s.read(&mut req);
                if answer.is_empty() {
                    thread::sleep(Duration::from_millis(800));
                } else {
                    let _ = s.write_all(answer);
                }
            }
        });
        (addr, h)
    }

    #[test]
    fn a_unix_peer_is_probed_over_its_path() {
        let dir = std::env::temp_dir().join(format!("corelb-probe-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.sock");
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                let _ = c.write_all(b"HTTP/1.0 204 No Content\r\n\r\n");
            }
        });
        let addr = crate::config::unix_addr::intern(path.to_str().unwrap()).unwrap();
        let limits = Limits {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(5),
        };
        let v = http(addr, b"GET / HTTP/1.0\r\n\r\n", limits, None);
        assert_eq!(
            v,
            Verdict {
                passed: true,
                status: 204
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!tcp(addr, limits).passed, "the path is gone");
    }

    #[test]
    fn http_statuses_timeouts_and_refusals() {
        let req = b"GET / HTTP/1.0\r\n\r\n";
        let cases: [(&[u8], Verdict); 4] = [
            (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                Verdict {
                    passed: true,
                    status: 204,
                },
            ),
            (
                b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
                Verdict {
                    passed: false,
                    status: 500,
                },
            ),
            (b"garbage\r\n\r\n", Verdict::FAILED),
            (b"", Verdict::FAILED), // no answer within the read limit
        ];
        for (answer, want) in cases {
            let (addr, h) = serve_once(answer);
            assert_eq!(
                http(addr, req, LIMITS, None),
                want,
                "{:?}",
                String::from_utf8_lossy(answer)
            );
            h.join().expect("server thread");
        }
        // a closed port fails at once
        let closed = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        assert_eq!(http(closed, req, LIMITS, None), Verdict::FAILED);
        assert!(!tcp(closed, LIMITS).passed);
        let (open, h) = serve_once(b"x");
        assert!(tcp(open, LIMITS).passed);
        h.join().expect("server thread");
    }
}
