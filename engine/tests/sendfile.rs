//! `sendfile on` end to end, on both runtimes (tokio sends with sendfile(2); glommio, which has no sendfile, reads
//! through its buffer): a file of many `sendfile_max_chunk`s byte for byte, a range of it, the next request on the
//! same keep-alive connection, `HEAD`, and the access log's `$body_bytes_sent`, each as with `sendfile off`.

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::path::PathBuf;
use support::{free_addr, glommio_usable, lines_when, Client, Proxy};

/// 1 MiB and a bit: sixteen 64k chunks and a short one, bytes that differ from their neighbours.
fn file_body() -> Vec<u8> {
    (0..(1u32 << 20) + 1000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-sendfile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("html")).expect("root");
    std::fs::write(d.join("html/big.bin"), file_body()).expect("file");
    std::fs::write(d.join("html/small.txt"), b"small file\n").expect("file");
    d
}

fn config(front: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
  root html;
  log_format sent '$uri $status $body_bytes_sent';
  access_log access.log sent;
  sendfile on;
  server {{
    listen {front};
    location / {{ sendfile_max_chunk 64k; }}
    location /off/ {{ sendfile off; alias html/; }}
    location /nolimit/ {{ sendfile_max_chunk 0; alias html/; }}
  }}
}}
"#
    )
}

fn sends<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let front = free_addr();
    std::fs::write(dir.join("corelb.conf"), config(front)).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(loaded.config, 1);
    let body = file_body();

    // the whole file with sendfile on, off and without a chunk limit, then a small one, on one connection
    let mut c = Client::connect(front);
    for target in ["/big.bin", "/off/big.bin", "/nolimit/big.bin"] {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap_or_else(|| panic!("no answer to {target}"));
        assert!(r.head.starts_with("HTTP/1.1 200 OK\r\n"), "{target}: {}", r.head);
        assert!(
            r.head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())),
            "{}",
            r.head
        );
        assert!(
            r.body == body,
            "{target}: the file byte for byte ({} bytes came)",
            r.body.len()
        );
    }
    c.send(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response().expect("the next request on the connection");
    assert_eq!(r.body, b"small file\n");

    // a range from the middle of a chunk to the middle of another
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=100000-300000\r\n\r\n");
    let r = c.read_response().expect("a range");
    assert!(r.head.starts_with("HTTP/1.1 206 Partial Content\r\n"), "{}", r.head);
    assert!(r
        .head
        .contains(&format!("\r\nContent-Range: bytes 100000-300000/{}\r\n", body.len())));
    assert!(r.body == body[100_000..=300_000], "the range byte for byte");

    // HEAD sends the head only: the next answer on the connection is the next request's
    c.send(b"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(b"small file\n") {
        match support::read_retrying(&mut c.conn, &mut chunk) {
            Ok(n @ 1..) => got.extend_from_slice(&chunk[..n]),
            _ => panic!("the connection ended: {}", String::from_utf8_lossy(&got)),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{text}");
    assert_eq!(
        got.len() - text.rfind("\r\n\r\n").expect("second head") - 4,
        11,
        "no body after HEAD"
    );

    drop(c);
    drop(proxy);
    let log = lines_when(&dir.join("access.log"), 7);
    let n = body.len();
    let expect = [
        format!("/big.bin 200 {n}"),
        format!("/off/big.bin 200 {n}"),
        format!("/nolimit/big.bin 200 {n}"),
        "/small.txt 200 11".to_string(),
        "/big.bin 206 200001".to_string(),
        "/big.bin 200 0".to_string(),
        "/small.txt 200 11".to_string(),
    ];
    assert_eq!(log, expect);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sendfile_on_tokio() {
    sends::<Tokio>("tokio");
}

#[test]
fn sendfile_on_glommio() {
    if !glommio_usable() {
        return;
    }
    sends::<Glommio>("glommio");
}
