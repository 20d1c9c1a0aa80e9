//! Files served through `alias` and `try_files`, conditional requests and ranges end to end, on both runtimes:
//! real requests over loopback, and the exact bytes nginx's static, try_files, not_modified and range modules
//! answer (checked against nginx 1.22.1 with the same files and config, but for the server name and the
//! multipart boundary, which nginx counts from its own start).

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use support::{free_addr, glommio_usable, Client, Proxy};

/// `X000XXXXXX` .. `X099XXXXXX`: 1000 bytes, as nginx-tests' range.t writes them.
fn numbered() -> String {
    (0..100).map(|i| format!("X{i:03}XXXXXX")).collect()
}

/// A file larger than one 32 KiB read, for ranges across reads.
fn big() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 13 % 251) as u8).collect()
}

fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-answers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for sub in ["html/try", "files/sub", "re"] {
        std::fs::create_dir_all(d.join(sub)).expect("directories");
    }
    std::fs::write(d.join("html/t.txt"), numbered()).expect("file");
    std::fs::write(d.join("html/big.bin"), big()).expect("file");
    std::fs::write(d.join("html/fallback.html"), "fallback").expect("file");
    std::fs::write(d.join("html/try/found.txt"), "found").expect("file");
    std::fs::write(d.join("files/a.txt"), "aliased").expect("file");
    std::fs::write(d.join("files/sub/index.html"), "sub index").expect("file");
    std::fs::write(d.join("re/x-1.txt"), "captured").expect("file");
    std::fs::write(d.join("secret.txt"), "secret").expect("file");
    d
}

fn config(dir: &Path, front: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
  root html;
  server {{
    listen {front};
    server_name localhost;
    location / {{ }}
    location /al/ {{ alias {dir}/files/; }}
    location /short {{ alias {dir}/files/; }}
    location ~ ^/re/(\w+)/(\d+)$ {{ alias {dir}/re/$1-$2.txt; }}
    location /try/ {{ try_files $uri /fallback.html; }}
    location /code/ {{ try_files /nothing $uri/ =403; }}
    location /named/ {{ try_files /nothing @named; }}
    location @named {{ return 200 "named $uri"; }}
    location /before/ {{ alias {dir}/html/; if_modified_since before; }}
    location /two/ {{ alias {dir}/html/; max_ranges 2; }}
    location /none/ {{ alias {dir}/html/; max_ranges 0; }}
  }}
}}
"#,
        dir = dir.display()
    )
}

/// Everything sent for `raw` (with `Connection: close`) until the proxy closes, the `Date` value as `D`.
fn exchange(addr: std::net::SocketAddr, raw: &str) -> Vec<u8> {
    let mut c = Client::connect(addr);
    c.send(raw.as_bytes());
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while let Ok(n @ 1..) = support::read_retrying(&mut c.conn, &mut chunk) {
        got.extend_from_slice(&chunk[..n]);
    }
    let at = got.windows(6).position(|w| w == b"Date: ").map_or(0, |i| i + 6);
    let mut out = got[..at].to_vec();
    out.push(b'D');
    out.extend_from_slice(got.get(at + 29..).unwrap_or_default());
    out
}

fn get(addr: std::net::SocketAddr, target: &str, extra: &str) -> String {
    let raw = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n");
    String::from_utf8_lossy(&exchange(addr, &raw)).into_owned()
}

struct Meta {
    len: u64,
    last_modified: String,
    etag: String,
}

fn meta(path: &Path) -> Meta {
    let m = std::fs::metadata(path).expect("metadata");
    Meta {
        len: m.len(),
        last_modified: String::from_utf8_lossy(&corelb_engine::http::pages::format_http_date(m.mtime() as u64))
            .into_owned(),
        etag: format!("\"{:x}-{:x}\"", m.mtime(), m.len()),
    }
}

fn ok(path: &Path, content_type: &str, body: &str) -> String {
    let m = meta(path);
    format!(
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Last-Modified: {}\r\nConnection: close\r\nETag: {}\r\nAccept-Ranges: bytes\r\n\r\n{body}",
        m.len, m.last_modified, m.etag
    )
}

fn page(status: &str) -> String {
    format!(
        "<html>\r\n<head><title>{status}</title></head>\r\n<body>\r\n<center><h1>{status}</h1></center>\r\n\
         <hr><center>corelb/0.1.0</center>\r\n</body>\r\n</html>\r\n"
    )
}

fn error(status: &str) -> String {
    let body = page(status);
    format!(
        "HTTP/1.1 {status}\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serves<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let front = free_addr();
    std::fs::write(dir.join("corelb.conf"), config(&dir, front)).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(loaded.config, 1);
    let t = dir.join("html/t.txt");
    let m = meta(&t);

    // alias: the location's name replaced; an index file under it; regex captures naming the file
    assert_eq!(
        get(front, "/al/a.txt", ""),
        ok(&dir.join("files/a.txt"), "text/plain", "aliased")
    );
    assert_eq!(
        get(front, "/al/sub/", ""),
        ok(&dir.join("files/sub/index.html"), "text/html", "sub index")
    );
    assert_eq!(
        get(front, "/re/x/1", ""),
        ok(&dir.join("re/x-1.txt"), "text/plain", "captured")
    );
    assert_eq!(get(front, "/re/y/2", ""), error("404 Not Found"));
    // a path that would leave the alias (`/short../secret.txt` is `files/../secret.txt`): 404, never the file
    assert_eq!(get(front, "/short../secret.txt", ""), error("404 Not Found"));
    // `..` above the root, encoded dots and slashes, NUL
    assert_eq!(get(front, "/al/../../secret.txt", ""), error("400 Bad Request"));
    assert_eq!(get(front, "/al/%2e%2e/%2e%2e/secret.txt", ""), error("400 Bad Request"));
    assert_eq!(get(front, "/al/..%2F..%2Fsecret.txt", ""), error("400 Bad Request"));
    assert_eq!(get(front, "/al/a.txt%00.html", ""), error("400 Bad Request"));

    // try_files: found as it is, else the fallback URI, a status, a named location
    assert_eq!(
        get(front, "/try/found.txt", ""),
        ok(&dir.join("html/try/found.txt"), "text/plain", "found")
    );
    assert_eq!(
        get(front, "/try/nothing", ""),
        ok(&dir.join("html/fallback.html"), "text/html", "fallback")
    );
    assert_eq!(get(front, "/code/x", ""), error("403 Forbidden"));
    assert_eq!(
        get(front, "/named/x", ""),
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\
         Connection: close\r\n\r\nnamed /named/x"
    );

    // conditional requests
    let not_modified = format!(
        "HTTP/1.1 304 Not Modified\r\nServer: corelb/0.1.0\r\nDate: D\r\nLast-Modified: {}\r\nConnection: close\r\n\
         ETag: {}\r\n\r\n",
        m.last_modified, m.etag
    );
    let ims = format!("If-Modified-Since: {}\r\n", m.last_modified);
    assert_eq!(get(front, "/t.txt", &ims), not_modified);
    let later = String::from_utf8_lossy(&corelb_engine::http::pages::format_http_date(
        std::fs::metadata(&t).unwrap().mtime() as u64 + 60,
    ))
    .into_owned();
    let after = format!("If-Modified-Since: {later}\r\n");
    assert_eq!(get(front, "/t.txt", &after), ok(&t, "text/plain", &numbered()), "exact");
    assert_eq!(
        get(front, "/before/t.txt", &after),
        not_modified,
        "if_modified_since before"
    );
    let inm = format!("If-None-Match: \"x\", W/{}\r\n", m.etag);
    assert_eq!(get(front, "/t.txt", &inm), not_modified);
    assert_eq!(
        get(front, "/t.txt", "If-None-Match: \"x\"\r\n"),
        ok(&t, "text/plain", &numbered())
    );
    assert_eq!(
        get(front, "/t.txt", "If-Match: \"x\"\r\n"),
        error("412 Precondition Failed")
    );
    let im = format!("If-Match: {}\r\n", m.etag);
    assert_eq!(get(front, "/t.txt", &im), ok(&t, "text/plain", &numbered()));
    assert_eq!(
        get(
            front,
            "/t.txt",
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
        ),
        error("412 Precondition Failed")
    );

    // ranges
    let partial = |range: &str, len: usize, body: &str| {
        format!(
            "HTTP/1.1 206 Partial Content\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/plain\r\n\
             Content-Length: {len}\r\nLast-Modified: {}\r\nConnection: close\r\nETag: {}\r\n\
             Content-Range: bytes {range}\r\n\r\n{body}",
            m.last_modified, m.etag
        )
    };
    assert_eq!(
        get(front, "/t.txt", "Range: bytes=0-8\r\n"),
        partial("0-8/1000", 9, "X000XXXXX")
    );
    assert_eq!(
        get(front, "/t.txt", "Range: bytes=-10\r\n"),
        partial("990-999/1000", 10, "X099XXXXXX")
    );
    assert_eq!(
        get(front, "/t.txt", "Range: bytes=990-5000\r\n"),
        partial("990-999/1000", 10, "X099XXXXXX")
    );
    let if_range = format!("Range: bytes=0-8\r\nIf-Range: {}\r\n", m.etag);
    assert_eq!(get(front, "/t.txt", &if_range), partial("0-8/1000", 9, "X000XXXXX"));
    let stale = "Range: bytes=0-8\r\nIf-Range: \"other\"\r\n";
    assert_eq!(get(front, "/t.txt", stale), ok(&t, "text/plain", &numbered()));
    let unsatisfiable = |size: u64| {
        let body = page("416 Requested Range Not Satisfiable");
        format!(
            "HTTP/1.1 416 Requested Range Not Satisfiable\r\nServer: corelb/0.1.0\r\nDate: D\r\n\
             Content-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\nContent-Range: bytes */{size}\r\n\
             \r\n{body}",
            body.len()
        )
    };
    for range in [
        "bytes=100000-",
        "bytes=alpha",
        "bytes=10-alpha",
        "bytes=10",
        "bytes=10-11 12-",
    ] {
        assert_eq!(
            get(front, "/t.txt", &format!("Range: {range}\r\n")),
            unsatisfiable(1000),
            "{range}"
        );
    }
    assert_eq!(
        get(front, "/t.txt", "Range: bytes=0-10001, 0-0\r\n"),
        ok(&t, "text/plain", &numbered()),
        "more than the file"
    );
    assert_eq!(
        get(front, "/none/t.txt", "Range: bytes=0-9\r\n"),
        ok(&t, "text/plain", &numbered()),
        "max_ranges 0"
    );
    assert_eq!(
        get(front, "/two/t.txt", "Range: bytes=0-9, -10, 10-19\r\n"),
        ok(&t, "text/plain", &numbered()),
        "more than max_ranges"
    );
    // several ranges: multipart/byteranges with nginx's 20-digit boundary
    let multi = get(front, "/t.txt", "Range: bytes=0-9, -10, 10-19\r\n");
    let at = multi.find("boundary=").expect("a boundary") + 9;
    let boundary = &multi[at..at + 20];
    assert!(boundary.bytes().all(|b| b.is_ascii_digit()), "{multi}");
    let part = |range: &str, body: &str| {
        format!("\r\n--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes {range}\r\n\r\n{body}")
    };
    let body = format!(
        "{}{}{}\r\n--{boundary}--\r\n",
        part("0-9/1000", "X000XXXXXX"),
        part("990-999/1000", "X099XXXXXX"),
        part("10-19/1000", "X001XXXXXX")
    );
    assert_eq!(
        multi,
        format!(
            "HTTP/1.1 206 Partial Content\r\nServer: corelb/0.1.0\r\nDate: D\r\n\
             Content-Type: multipart/byteranges; boundary={boundary}\r\nContent-Length: {}\r\nLast-Modified: {}\r\n\
             Connection: close\r\nETag: {}\r\n\r\n{body}",
            body.len(),
            m.last_modified,
            m.etag
        )
    );
    // a range across 32 KiB reads, byte for byte
    let raw = exchange(
        front,
        "GET /big.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=30000-70000\r\nConnection: close\r\n\r\n",
    );
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    assert!(String::from_utf8_lossy(&raw[..split]).contains("Content-Range: bytes 30000-70000/100000\r\n"));
    assert!(raw[split..] == big()[30000..70001], "the range's bytes");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn answers_on_tokio() {
    serves::<Tokio>("tokio");
}

#[test]
fn answers_on_glommio() {
    if !glommio_usable() {
        return;
    }
    serves::<Glommio>("glommio");
}
