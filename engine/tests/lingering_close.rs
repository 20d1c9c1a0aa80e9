//! nginx's lingering close, on both runtimes, plain and TLS: a connection that closes after its answer with bytes
//! of the client's unread shuts its write side (a TLS session sends `close_notify` first) and reads on, so the
//! client reads the whole answer (however much more it sends) and may still write; `lingering_close off` closes at once (the client's next bytes
//! are answered with a reset); `lingering_time` bounds how long a client that keeps sending holds it.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::{free_addr, glommio_usable, read_retrying, wait_until, Proxy};

/// An HTTP/1.0 request (the connection closes after its answer) followed by bytes the proxy does not read as a
/// request of its own.
const WITH_EXTRA: &[u8] = b"GET / HTTP/1.0\r\nHost: t\r\n\r\nextra";

/// Sends `WITH_EXTRA` and reads the answer up to the proxy's end of stream; returns the connection and the answer.
fn answered(addr: SocketAddr) -> (TcpStream, String) {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    conn.write_all(WITH_EXTRA).expect("send");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match read_retrying(&mut conn, &mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading the answer: {e} after {answer:?}"),
        }
    }
    (conn, String::from_utf8_lossy(&answer).into_owned())
}

/// Whether the peer has closed the socket for good: a write or a read after the end of stream meets a reset.
fn reset(conn: &mut TcpStream) -> bool {
    let mut buf = [0u8; 16];
    let wrote = conn.write(b"more");
    let read = read_retrying(conn, &mut buf);
    let gone = |k: ErrorKind| matches!(k, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe);
    wrote.is_err_and(|e| gone(e.kind())) || read.is_err_and(|e| gone(e.kind()))
}

fn plain<R: Runtime>() {
    let (on, off, short) = (free_addr(), free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            access_log off;
            server {{ listen {on}; return 200 ok; }}
            server {{ listen {off}; lingering_close off; return 200 ok; }}
            server {{ listen {short}; lingering_time 600ms; lingering_timeout 300ms; return 200 ok; }}
        }}"
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);

    // on (the default): the write side is shut, what the client sends next is read and dropped
    let (mut conn, answer) = answered(on);
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nok"),
        "{answer}"
    );
    for _ in 0..3 {
        conn.write_all(b"more").expect("the proxy still reads");
        let mut buf = [0u8; 16];
        assert_eq!(read_retrying(&mut conn, &mut buf).expect("end of stream, no reset"), 0);
    }
    // the client's close ends it
    conn.shutdown(std::net::Shutdown::Write).expect("shutdown");

    // a request followed by far more than the proxy reads: the answer comes whole and the rest is drained
    let conn = TcpStream::connect(on).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut writer = conn.try_clone().expect("clone");
    let sending = std::thread::spawn(move || {
        // (one write: the bytes after the head are on their way when the answer is decided; bytes a client starts
        // sending only after it may meet a close without lingering, in nginx too)
        let mut request = b"GET / HTTP/1.0\r\nHost: t\r\n\r\n".to_vec();
        request.resize(request.len() + (1 << 20), b'x');
        writer.write_all(&request)?;
        writer.shutdown(std::net::Shutdown::Write)
    });
    let mut answer = Vec::new();
    (&conn).read_to_end(&mut answer).expect("the whole answer, no reset");
    assert!(String::from_utf8_lossy(&answer).ends_with("\r\n\r\nok"));
    sending.join().expect("writer").expect("every byte taken");

    // off: closed at once, the next bytes meet a reset
    let (mut conn, answer) = answered(off);
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    assert!(
        wait_until(Duration::from_secs(5), || reset(&mut conn)),
        "closed without lingering"
    );

    // a client that keeps sending is dropped after `lingering_time`
    let (mut conn, _) = answered(short);
    let started = Instant::now();
    assert!(
        wait_until(Duration::from_secs(5), || reset(&mut conn)),
        "lingering_time ends the wait"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}

fn tls<R: Runtime>(tag: &str) {
    let dir = support::tls::test_dir(&format!("lingering-{tag}"));
    let cert = support::tls::self_signed(&dir, "s", support::tls::params(&["s.test"], "s.test"));
    let addr = free_addr();
    let text = format!(
        "events {{}}\nhttp {{\n access_log off;\n ssl_certificate {};\n ssl_certificate_key {};\n\
         server {{ listen {addr} ssl; return 200 ok; }}\n}}\n",
        cert.file.display(),
        cert.key_file.display()
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);
    let client = support::tls::TlsClient::new(None);
    let mut s = client.connect(addr, "s.test").expect("handshake");
    s.write_all(WITH_EXTRA).expect("send");
    let mut answer = Vec::new();
    // a clean end: the proxy's `close_notify` came (rustls calls an end without one an unexpected EOF)
    s.read_to_end(&mut answer).expect("the answer, then close_notify");
    assert!(String::from_utf8_lossy(&answer).ends_with("\r\n\r\nok"));
    // the client's own `close_notify` is read, not answered with a reset
    s.conn.send_close_notify();
    s.conn.complete_io(&mut s.sock).expect("close_notify sent");
    let mut buf = [0u8; 16];
    assert_eq!(
        read_retrying(&mut s.sock, &mut buf).expect("end of stream, no reset"),
        0
    );
}

#[test]
fn tokio_lingering_close() {
    plain::<Tokio>();
    tls::<Tokio>("tokio");
}

#[test]
fn glommio_lingering_close() {
    if glommio_usable() {
        plain::<Glommio>();
        tls::<Glommio>("glommio");
    }
}
