//! A chunked request body to an HTTP/1.0 upstream (`proxy_http_version 1.0`, nginx's default), on both runtimes:
//! read whole and sent with its `Content-Length`, as nginx does (an HTTP/1.0 server refuses `Transfer-Encoding`);
//! a body over `client_max_body_size` is nginx's 413, a malformed one its 400, and with HTTP/1.1 the body goes
//! chunked while it arrives, with its length when it was whole before the request went (request_body_chunked.rs).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

fn post(front: std::net::SocketAddr, path: &str, chunks: &str) -> support::Response {
    let mut c = Client::connect(front);
    let head = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    c.send(head.as_bytes());
    c.send(chunks.as_bytes());
    c.read_response().expect("an answer")
}

fn run<R: Runtime>() {
    let echo = Backend::start("echo", Mode::Echo);
    let front = free_addr();
    let text = format!(
        "events {{}}
        http {{
            server {{
                listen {front};
                client_max_body_size 16;
                location / {{ proxy_pass http://{echo}; }}
                location /v11 {{ proxy_http_version 1.1; proxy_pass http://{echo}; }}
            }}
        }}",
        echo = echo.addr
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);

    let r = post(front, "/", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "hello world"));
    let head = echo.last_head();
    assert!(head.starts_with("POST / HTTP/1.0\r\n"), "{head}");
    assert!(head.contains("Content-Length: 11\r\n"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding"), "{head}");

    assert_eq!(post(front, "/", "11\r\n0123456789abcdefg\r\n0\r\n\r\n").status, 413);
    assert_eq!(post(front, "/", "zz\r\nhello\r\n0\r\n\r\n").status, 400);

    let r = post(front, "/v11", "5\r\nhello\r\n0\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    let head = echo.last_head();
    // (the body came in a write after the head's: streamed chunked, or whole if both were read at once)
    assert!(
        head.contains("Transfer-Encoding: chunked\r\n") || head.contains("Content-Length: 5\r\n"),
        "{head}"
    );
    assert!(head.starts_with("POST /v11 HTTP/1.1\r\n"), "{head}");
}

#[test]
fn tokio_chunked_to_http10() {
    run::<Tokio>();
}

#[test]
fn glommio_chunked_to_http10() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
