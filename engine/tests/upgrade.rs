//! Protocol upgrades (WebSocket) through the proxy on both runtimes: a `101` from the upstream to a client that
//! sent `Upgrade` opens a two-way tunnel; without `Upgrade` a `101` is an invalid header (502), as in nginx.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;
use support::{free_addr, glommio_usable, read_retrying, Client, Proxy};

/// A backend that answers every request with a 101 and its first bytes, then echoes upper-cased until EOF.
fn switching_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhi";
                if conn.write_all(answer).is_err() {
                    return;
                }
                let mut buf = [0u8; 256];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n].to_ascii_uppercase()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn read_exactly(conn: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let mut at = 0;
    while at < n {
        match read_retrying(conn, &mut got[at..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => at += k,
        }
    }
    got.truncate(at);
    got
}

fn tunnels<R: Runtime>() {
    let backend = switching_backend();
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
    server {{
        listen {front};
        location / {{
            proxy_pass http://{backend};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
        }}
    }}
}}
"#
    );
    let path = std::env::temp_dir().join("corelb-upgrade.conf");
    let config = corelb_engine::config::parse_str(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);

    let mut conn = TcpStream::connect(front).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    conn.write_all(b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nearly")
        .expect("send");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = read_exactly(&mut conn, 1);
        assert_eq!(byte.len(), 1, "head so far: {}", String::from_utf8_lossy(&head));
        head.extend(byte);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(
        head.starts_with(concat!(
            "HTTP/1.1 101 Switching Protocols\r\nServer: corelb/",
            env!("CARGO_PKG_VERSION"),
            "\r\nDate: "
        )),
        "{head}"
    );
    assert!(
        head.ends_with("\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"),
        "{head}"
    );
    assert_eq!(read_exactly(&mut conn, 2), b"hi", "the upstream's bytes after its head");
    assert_eq!(
        read_exactly(&mut conn, 5),
        b"EARLY",
        "the client's bytes after its head went up"
    );
    conn.write_all(b"frame").expect("send");
    assert_eq!(read_exactly(&mut conn, 5), b"FRAME");
    drop(conn);

    let mut c = Client::connect(front);
    c.send(b"GET /chat HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_response().expect("answer");
    assert_eq!(r.status, 502, "a 101 nobody asked for is an invalid header");
}

#[test]
fn tokio_tunnels_after_101() {
    tunnels::<Tokio>();
}

#[test]
fn glommio_tunnels_after_101() {
    if glommio_usable() {
        tunnels::<Glommio>();
    }
}
