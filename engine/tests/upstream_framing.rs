//! Upstream responses that could split or smuggle: refused with a 502, and bytes an upstream sends after a complete
//! response never answer a later request of the client.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

/// A backend that answers the first request of each connection with `answer`, byte for byte, then closes; and
/// the number of connections it accepted.
fn raw_backend(answer: &'static [u8]) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten().take(16) {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = Vec::new();
            let mut tmp = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match read_retrying(&mut conn, &mut tmp) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            let _ = std::io::Write::write_all(&mut conn, answer);
        }
    });
    (addr, accepted)
}

#[test]
fn upstream_responses_that_could_split_are_refused() {
    let cases: [(&str, &'static [u8], u16); 5] = [
        (
            "CL + TE",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok",
            502,
        ),
        (
            "differing CLs",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
            502,
        ),
        ("status 000", b"HTTP/1.1 000 X\r\nContent-Length: 2\r\n\r\nok", 502),
        ("bad CL", b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", 502),
        ("not HTTP", b"SSH-2.0-OpenSSH\r\n\r\n", 502),
    ];
    for (name, answer, status) in cases {
        let listen = free_addr();
        let up = upstream("u", vec![server_line(raw_backend(answer).0)]);
        let _p = Proxy::tokio(http_config(
            listen,
            vec![up],
            vec![proxy_location("/", 0, keepalive_proxy())],
        ));
        let r = get(listen, "/").unwrap_or_else(|| panic!("{name}: no answer"));
        assert_eq!(r.status, status, "{name}");
    }
    // bytes after a complete response are not a second response for the client
    let listen = free_addr();
    let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nspoofd";
    let (backend, accepted) = raw_backend(extra);
    let up = upstream("u", vec![server_line(backend)]);
    let _p = Proxy::tokio(http_config(
        listen,
        vec![up],
        vec![proxy_location("/", 0, keepalive_proxy())],
    ));
    let mut c = Client::connect(listen);
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_response().expect("answer").text(), "ok");
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    // The connection with left-over bytes is not kept: the second request gets a fresh one, and its own "ok".
    let second = c.read_response().expect("answer");
    assert_eq!(
        (second.status, second.text().as_str()),
        (200, "ok"),
        "a left-over upstream byte answered another request"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "one upstream connection per request"
    );
}
