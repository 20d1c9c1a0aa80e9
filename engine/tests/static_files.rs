//! Files served from `root` end to end, on both runtimes: a temporary directory as the root (relative to the
//! prefix, as nginx's `-p`), real requests over loopback, and the exact status lines, heads and bodies nginx's
//! static and index modules answer (checked against nginx 1.22.1 with the same files and config; only the server
//! name in the `Server` header and in error pages differs): index files by internal redirect, the 301 to a
//! directory's slash, 403/404/405/500, paths that try to leave the root, a file larger than one buffer, the types
//! table (nginx's `mime.types`, bundled in `examples/`), and the access log's `$status` and `$body_bytes_sent`.

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use support::{free_addr, glommio_usable, lines_when, Client, Proxy, Response};

/// The bytes of the file larger than one 32 KiB read.
fn big_body() -> Vec<u8> {
    (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// The test's prefix: `html/` (the root), a file outside it, and the config.
fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-static-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let html = d.join("html");
    for sub in ["dir", "empty", "sp ace", "other", "m"] {
        std::fs::create_dir_all(html.join(sub)).expect("directories");
    }
    let files: [(&str, &[u8]); 9] = [
        ("html/index.html", b"body"),
        ("html/A.CSS", b"a css"),
        ("html/dir/index.html", b"x"),
        ("html/.htaccess", b"hidden"),
        ("html/m/app.JS", b"js"),
        ("html/other/f", b"ff"),
        ("outside.txt", b"out"),
        ("mime.types", include_bytes!("../../examples/mime.types")),
        ("html/re.html", b"not this one"),
    ];
    for (name, body) in files {
        std::fs::write(d.join(name), body).expect("file");
    }
    std::fs::write(html.join("big.bin"), big_body()).expect("big file");
    std::os::unix::fs::symlink("loop", html.join("loop")).expect("symlink loop");
    std::os::unix::fs::symlink(d.join("outside.txt"), html.join("link")).expect("symlink out");
    let fifo = std::ffi::CString::new(html.join("fifo").into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "mkfifo");
    d
}

fn config(dir: &Path, front: std::net::SocketAddr, bare: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
  root html/;
  types {{ text/css css; text/html html; }}
  log_format files '$status $body_bytes_sent "$request" $uri';
  access_log access.log files;
  server {{
    listen {front};
    server_name localhost;
    location / {{ }}
    location /x/ {{ index nothing.html; }}
    location /redirect/ {{ index /re.html; }}
    location = /re.html {{ return 200 "exact"; }}
    location /loop/ {{ index /loop/; }}
    location /other/ {{ root {dir}/html/; default_type application/octet-stream; }}
    location /m/ {{ root {dir}/html; include mime.types; }}
  }}
  server {{
    listen {bare};
  }}
}}
"#,
        dir = dir.display()
    )
}

/// nginx's error page for `status` (with corelb's name in it).
fn page(status: &str) -> String {
    format!(
        "<html>\r\n<head><title>{status}</title></head>\r\n<body>\r\n<center><h1>{status}</h1></center>\r\n\
         <hr><center>corelb/0.1.0</center>\r\n</body>\r\n</html>\r\n"
    )
}

/// The head with its `Date` value replaced by `D`.
fn head_of(r: &Response) -> String {
    r.head
        .split("\r\n")
        .map(|l| if l.starts_with("Date: ") { "Date: D" } else { l })
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// The head nginx sends for the file `path` (`Last-Modified` and `ETag` from its metadata).
fn file_head(path: &Path, content_type: &str, connection: &str) -> String {
    let m = std::fs::metadata(path).expect("metadata");
    let modified = corelb_engine::http::pages::format_http_date(m.mtime() as u64);
    format!(
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Last-Modified: {}\r\nConnection: {connection}\r\nETag: \"{:x}-{:x}\"\r\nAccept-Ranges: bytes\r\n\r\n",
        m.len(),
        String::from_utf8_lossy(&modified),
        m.mtime(),
        m.len()
    )
}

fn error_head(status: &str, connection: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
         Connection: {connection}\r\n\r\n",
        page(status).len()
    )
}

fn moved_head(location: &str, connection: &str) -> String {
    format!(
        "HTTP/1.1 301 Moved Permanently\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/html\r\n\
         Content-Length: {}\r\nLocation: {location}\r\nConnection: {connection}\r\n\r\n",
        page("301 Moved Permanently").len()
    )
}

/// One request on a connection of its own, read to the end.
fn once(addr: std::net::SocketAddr, raw: &str) -> Response {
    let mut c = Client::connect(addr);
    c.send(raw.as_bytes());
    c.read_response().unwrap_or_else(|| panic!("no response to {raw:?}"))
}

fn get(addr: std::net::SocketAddr, target: &str) -> Response {
    once(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

/// Everything the proxy sends for `raw` until it closes, with the `Date` value replaced by `D` (for HEAD: the test
/// client would wait for a body).
fn to_the_end(addr: std::net::SocketAddr, raw: &str) -> String {
    let mut c = Client::connect(addr);
    c.send(raw.as_bytes());
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = support::read_retrying(&mut c.conn, &mut chunk) {
        got.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    let date = text.find("Date: ").map_or(0, |i| i + 6);
    format!("{}D{}", &text[..date], text.get(date + 29..).unwrap_or_default())
}

fn serves<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let html = dir.join("html");
    let (front, bare) = (free_addr(), free_addr());
    let port = front.port();
    std::fs::write(dir.join("corelb.conf"), config(&dir, front, bare)).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(loaded.config, 1);

    // The index file by an internal redirect, then the next request on the same connection.
    let mut c = Client::connect(front);
    c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response().expect("index");
    assert_eq!(
        head_of(&r),
        file_head(&html.join("index.html"), "text/html", "keep-alive")
    );
    assert_eq!(r.body, b"body");
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response().expect("big file");
    assert_eq!(
        head_of(&r),
        file_head(&html.join("big.bin"), "text/plain", "keep-alive")
    );
    assert!(r.body == big_body(), "a file of many buffers, byte for byte");
    c.send(b"GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\nGET /dir HTTP/1.1\r\nHost: LocalHost.\r\n\r\n");
    let r = c.read_response().expect("404");
    assert_eq!(head_of(&r), error_head("404 Not Found", "keep-alive"));
    assert_eq!(r.text(), page("404 Not Found"));
    let r = c.read_response().expect("301");
    let location = format!("http://localhost:{port}/dir/");
    assert_eq!(head_of(&r), moved_head(&location, "keep-alive"));
    assert_eq!(r.text(), page("301 Moved Permanently"));
    c.send(b"GET /redirect/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response().expect("index redirect");
    assert_eq!(
        (r.status, r.text()),
        (200, "exact".into()),
        "the index URI is routed again"
    );
    c.send(b"GET /loop/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response().expect("redirect cycle");
    assert_eq!(head_of(&r), error_head("500 Internal Server Error", "close"));
    assert!(c.closed(), "nginx closes after a 500");

    // HEAD: the head alone (read to the connection's end: the test client would wait for a body).
    assert_eq!(
        to_the_end(
            front,
            "HEAD /A.CSS HTTP/1.1\r\nHost: Localhost.:1\r\nConnection: close\r\n\r\n"
        ),
        file_head(&html.join("A.CSS"), "text/css", "close"),
        "the extension's type, whatever its case; no body"
    );
    assert_eq!(
        to_the_end(front, "HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        error_head("404 Not Found", "close")
    );

    // Redirects to the slash: the host as sent (or the address connected to), the port, the path escaped, args.
    let r = once(front, "GET /dir?a=b HTTP/1.0\r\n\r\n");
    let location = format!("http://127.0.0.1:{port}/dir/?a=b");
    assert_eq!(head_of(&r), moved_head(&location, "close"));
    let r = get(front, "/sp%20ace");
    assert_eq!(r.header("location"), Some(format!("http://localhost:{port}/sp%20ace/")));
    let r = once(
        front,
        "GET http://Foo.COM./dir HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.header("location"), Some(format!("http://foo.com:{port}/dir/")));
    let r = get(front, "/dir/");
    assert_eq!((r.status, r.text()), (200, "x".into()));

    // What nginx answers instead of a file.
    for (raw, status) in [
        (
            "PUT /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            "405 Not Allowed",
        ),
        (
            "POST /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
            "405 Not Allowed",
        ),
        ("DELETE /dir/ HTTP/1.1\r\nHost: x\r\n\r\n", "405 Not Allowed"),
        (
            "POST /nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
            "404 Not Found",
        ),
        ("GET /empty/ HTTP/1.1\r\nHost: x\r\n\r\n", "403 Forbidden"),
        ("GET /x/ HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found"),
        ("GET /index.html/ HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found"),
        ("GET /loop HTTP/1.1\r\nHost: x\r\n\r\n", "403 Forbidden"),
        ("GET /fifo HTTP/1.1\r\nHost: x\r\n\r\n", "404 Not Found"),
    ] {
        let mut c = Client::connect(front);
        c.send(format!("{raw}GET /dir/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap_or_else(|| panic!("{raw}"));
        assert_eq!(head_of(&r), error_head(status, "keep-alive"), "{raw}");
        assert_eq!(r.text(), page(status), "{raw}");
        let next = c.read_response().unwrap_or_else(|| panic!("after {raw}"));
        assert_eq!(
            (next.status, next.text()),
            (200, "x".into()),
            "{raw}: the body was read, the connection kept"
        );
    }
    // A path never leaves the root (400 as nginx for `..` above it or a NUL, wherever they are encoded); a
    // symbolic link is followed, as nginx's default `disable_symlinks off`.
    for target in [
        "/%2e%2e/outside.txt",
        "/..%2foutside.txt",
        "/../outside.txt",
        "/index.html%00",
        "*",
    ] {
        let r = once(
            front,
            &format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(head_of(&r), error_head("400 Bad Request", "close"), "{target}");
    }
    let r = get(front, "/dir%2Findex.html");
    assert_eq!((r.status, r.text()), (200, "x".into()), "an encoded slash is a slash");
    let r = get(front, "/link");
    assert_eq!((r.status, r.text()), (200, "out".into()));

    // Types: the default type for no extension or an unknown one, a location's own root and default type, and
    // nginx's mime.types included in a location.
    let r = get(front, "/.htaccess");
    assert_eq!(head_of(&r), file_head(&html.join(".htaccess"), "text/plain", "close"));
    let r = get(front, "/other/f");
    assert_eq!(
        (r.header("content-type"), r.text()),
        (Some("application/octet-stream".into()), "ff".into())
    );
    let r = get(front, "/m/app.JS");
    assert_eq!(
        head_of(&r),
        file_head(&html.join("m/app.JS"), "application/javascript", "close")
    );

    // A server without locations serves from its root too.
    let r = get(bare, "/");
    assert_eq!((r.status, r.text()), (200, "body".into()));

    drop(proxy);
    let log = lines_when(&dir.join("access.log"), 8);
    let len = |s: &str| page(s).len();
    let expect = [
        "200 4 \"GET / HTTP/1.1\" /index.html".to_string(),
        format!("200 {} \"GET /big.bin HTTP/1.1\" /big.bin", big_body().len()),
        format!("404 {} \"GET /nope HTTP/1.1\" /nope", len("404 Not Found")),
        format!("301 {} \"GET /dir HTTP/1.1\" /dir", len("301 Moved Permanently")),
        "200 5 \"GET /redirect/ HTTP/1.1\" /re.html".into(),
        format!(
            "500 {} \"GET /loop/ HTTP/1.1\" /loop/",
            len("500 Internal Server Error")
        ),
        "200 0 \"HEAD /A.CSS HTTP/1.1\" /A.CSS".into(),
        "404 0 \"HEAD /nope HTTP/1.1\" /nope".into(),
    ];
    assert_eq!(log.get(..expect.len()), Some(&expect[..]), "{log:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_on_tokio() {
    serves::<Tokio>("tokio");
}

#[test]
fn files_on_glommio() {
    if !glommio_usable() {
        return;
    }
    serves::<Glommio>("glommio");
}
