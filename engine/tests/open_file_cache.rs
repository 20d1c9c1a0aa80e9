//! `open_file_cache` end to end, on both runtimes: within `open_file_cache_valid` a file replaced on disk is still
//! served from the descriptor the cache keeps (as nginx does), a location without the cache sees the new one at
//! once; under `open_file_cache_errors on` a missing file stays a 404 after it appears; a cached descriptor read
//! by two connections at once and by a range gives each its bytes; a cached directory still redirects to its
//! slash.

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::path::{Path, PathBuf};
use support::{free_addr, glommio_usable, Client, Proxy};

/// 200 KiB of bytes that differ from their neighbours: several 32k reads.
fn big_body() -> Vec<u8> {
    (0..200 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-ofc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("html/dir")).expect("root");
    std::fs::write(d.join("html/a.txt"), b"one").expect("file");
    std::fs::write(d.join("html/big.bin"), big_body()).expect("file");
    d
}

fn config(front: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
  root html;
  access_log off;
  open_file_cache max=100 inactive=60s;
  open_file_cache_errors on;
  server {{
    listen {front};
    location / {{ }}
    location /off/ {{ open_file_cache off; alias html/; }}
  }}
}}
"#
    )
}

/// Puts `body` at `path` as a new file (a new inode), as a deploy that renames into place does.
fn replace(path: &Path, body: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, body).expect("new file");
    std::fs::rename(&tmp, path).expect("rename");
}

fn get(c: &mut Client, target: &str) -> (String, Vec<u8>) {
    c.send(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    let r = c.read_response().unwrap_or_else(|| panic!("no answer to {target}"));
    (r.head, r.body)
}

fn caches<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let front = free_addr();
    std::fs::write(dir.join("corelb.conf"), config(front)).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(loaded.config, 1);
    let mut c = Client::connect(front);

    assert_eq!(get(&mut c, "/a.txt").1, b"one");
    assert_eq!(get(&mut c, "/off/a.txt").1, b"one");
    replace(&dir.join("html/a.txt"), b"second");
    // the cached descriptor and size within `open_file_cache_valid` (60s)
    let (head, body) = get(&mut c, "/a.txt");
    assert!(head.contains("\r\nContent-Length: 3\r\n"), "{head}");
    assert_eq!(body, b"one", "served from the cached descriptor");
    assert_eq!(get(&mut c, "/off/a.txt").1, b"second", "no cache: the new file");

    // a cached error
    let (head, _) = get(&mut c, "/late.txt");
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
    std::fs::write(dir.join("html/late.txt"), b"late").expect("file");
    let (head, _) = get(&mut c, "/late.txt");
    assert!(head.starts_with("HTTP/1.1 404 "), "the cached error: {head}");
    assert_eq!(get(&mut c, "/off/late.txt").1, b"late");

    // one cached descriptor, two connections reading it at once, then a range of it
    let big = big_body();
    assert_eq!(get(&mut c, "/big.bin").1.len(), big.len());
    let mut d = Client::connect(front);
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    d.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    let (rc, rd) = (c.read_response().expect("c"), d.read_response().expect("d"));
    assert!(
        rc.body == big && rd.body == big,
        "each connection gets the whole file byte for byte"
    );
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=40000-99999\r\n\r\n");
    let r = c.read_response().expect("range");
    assert!(r.head.starts_with("HTTP/1.1 206 "), "{}", r.head);
    assert!(r.body == big[40_000..100_000], "the range byte for byte");

    // a directory, cached without a descriptor: still the redirect to its slash
    for _ in 0..2 {
        let (head, _) = get(&mut c, "/dir");
        assert!(head.starts_with("HTTP/1.1 301 "), "{head}");
        let location = format!("\r\nLocation: http://x:{}/dir/\r\n", front.port());
        assert!(head.contains(&location), "{head}");
    }
    drop((c, d));
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn open_file_cache_on_tokio() {
    caches::<Tokio>("tokio");
}

#[test]
fn open_file_cache_on_glommio() {
    if !glommio_usable() {
        return;
    }
    caches::<Glommio>("glommio");
}
