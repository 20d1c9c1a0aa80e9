//! A chunked request body, on both runtimes: `$request_body` reads its data (as nginx keeps it in memory: what came
//! with the head, then up to `client_body_buffer_size`), an
//! error page after an intercepted answer reads the body that went upstream, and a body still arriving goes to an
//! HTTP/1.1 upstream as nginx frames it (the data of each read as one chunk; a body whole before the request goes
//! is sent with its `Content-Length`).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

const HEAD: &str = "Host: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

/// Sends a chunked request: its head, then each of `pieces` in a write of its own; reads the answer.
fn send_in_pieces(front: SocketAddr, path: &str, pieces: &[&str]) -> support::Response {
    let mut c = Client::connect(front);
    c.send(format!("POST {path} HTTP/1.1\r\n{HEAD}").as_bytes());
    for piece in pieces {
        c.send(piece.as_bytes());
    }
    c.read_response().expect("an answer")
}

/// Reads from `conn` until `buf` ends with `end` (the upstream's view of what the proxy sent so far).
fn read_until(conn: &mut TcpStream, buf: &mut Vec<u8>, end: &[u8]) -> bool {
    let mut tmp = [0u8; 4096];
    while !buf.ends_with(end) {
        match support::read_retrying(conn, &mut tmp) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    true
}

/// An upstream that records what arrives in two steps: up to the first chunk (then tells the test, which sends
/// the rest of the body), then up to the last chunk; answers 200 and closes.
fn framing_upstream(listener: TcpListener, first: &'static [u8], seen: mpsc::Sender<Vec<u8>>) {
    std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else { return };
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut buf = Vec::new();
        if !read_until(&mut conn, &mut buf, first) {
            return;
        }
        let _ = seen.send(std::mem::take(&mut buf));
        if !read_until(&mut conn, &mut buf, b"0\r\n\r\n") {
            return;
        }
        let _ = seen.send(buf);
        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    });
}

fn run<R: Runtime>() {
    let ok = Backend::start("ok", Mode::Ok);
    let missing = Backend::start("missing", Mode::Status(404));
    let echo = Backend::start("echo", Mode::Echo);
    let raw = TcpListener::bind("127.0.0.1:0").expect("bind the raw upstream");
    let raw_addr = raw.local_addr().expect("its address");
    let front = free_addr();
    let text = format!(
        "events {{}}
        http {{
            server {{
                listen {front};
                location /var {{ add_header X-Body \"[$request_body]\"; proxy_pass http://{ok}; }}
                location /small {{
                    client_body_buffer_size 8;
                    add_header X-Body \"[$request_body]\";
                    proxy_pass http://{ok};
                }}
                location /page {{
                    proxy_pass http://{missing};
                    proxy_intercept_errors on;
                    error_page 404 /seen;
                }}
                location /seen {{ return 200 \"[$request_body]\"; }}
                location /whole {{ proxy_http_version 1.1; proxy_pass http://{echo}; }}
                location /stream {{ proxy_http_version 1.1; proxy_pass http://{raw_addr}; }}
            }}
        }}",
        ok = ok.addr,
        missing = missing.addr,
        echo = echo.addr,
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);

    // `$request_body`: the data without its framing, whole however the chunks came
    let r = send_in_pieces(
        front,
        "/var",
        &["5;ext=1\r\nhello\r\n", "6\r\n world\r\n", "0\r\nT: x\r\n\r\n"],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-body").as_deref(), Some("[hello world]"), "{}", r.head);

    // what nginx keeps in memory: the part read with the head, then `client_body_buffer_size` (a file beyond it,
    // where the variable is empty)
    let big = "a".repeat(2000);
    let chunked_big = format!("7d0\r\n{big}\r\n0\r\n\r\n");
    for (path, shown) in [("/var", format!("[{big}]")), ("/small", "[]".to_string())] {
        let r = send_in_pieces(front, path, &[&chunked_big]);
        assert_eq!(r.header("x-body").as_deref(), Some(shown.as_str()), "{path} chunked");
        let mut c = Client::connect(front);
        c.send(
            format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n{big}")
                .as_bytes(),
        );
        let r = c.read_response().expect("an answer");
        assert_eq!(
            r.header("x-body").as_deref(),
            Some(shown.as_str()),
            "{path} with a length"
        );
    }
    let r = send_in_pieces(front, "/small", &["a\r\n0123456789\r\n0\r\n\r\n"]);
    assert_eq!(
        r.header("x-body").as_deref(),
        Some("[0123456789]"),
        "read with the head"
    );

    // the error page of an intercepted answer reads the body sent upstream
    let r = send_in_pieces(front, "/page", &["5\r\nhello\r\n0\r\n\r\n"]);
    assert_eq!((r.status, r.text().as_str()), (404, "[hello]"));
    let mut c = Client::connect(front);
    c.send(b"POST /page HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody");
    assert_eq!(c.read_response().expect("an answer").text(), "[body]");

    // a body whole before the try goes with its length, as nginx's read body
    let mut c = Client::connect(front);
    c.send(format!("POST /whole HTTP/1.1\r\n{HEAD}5\r\nhello\r\n2\r\n!!\r\n0\r\n\r\n").as_bytes());
    let r = c.read_response().expect("an answer");
    assert_eq!((r.status, r.text().as_str()), (200, "hello!!"));
    let head = echo.last_head();
    assert!(head.contains("Content-Length: 7\r\n"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding"), "{head}");

    // a body still arriving: each read's data as one chunk, the last chunk with the last data
    let (tx, seen) = mpsc::channel();
    framing_upstream(raw, b"9\r\n01234many\r\n", tx);
    let mut c = Client::connect(front);
    c.send(format!("POST /stream HTTP/1.1\r\n{HEAD}5\r\n01234\r\n4\r\nmany\r\n").as_bytes());
    let first = seen
        .recv_timeout(Duration::from_secs(10))
        .expect("the first chunk upstream");
    let first = String::from_utf8_lossy(&first).into_owned();
    assert!(first.contains("Transfer-Encoding: chunked\r\n"), "{first}");
    assert!(first.ends_with("\r\n\r\n9\r\n01234many\r\n"), "{first}");
    c.send(b"5\r\n56789\r\n4;x\r\nmany\r\n0\r\nTrailer: t\r\n\r\n");
    let rest = seen.recv_timeout(Duration::from_secs(10)).expect("the rest upstream");
    assert_eq!(String::from_utf8_lossy(&rest), "9\r\n56789many\r\n0\r\n\r\n");
    let r = c.read_response().expect("an answer");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    let mut tail = Vec::new();
    let _ = c.conn.read_to_end(&mut tail);
}

#[test]
fn tokio_request_body_chunked() {
    run::<Tokio>();
}

#[test]
fn glommio_request_body_chunked() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
