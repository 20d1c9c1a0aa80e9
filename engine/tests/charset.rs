//! nginx's charset filter end to end, on both runtimes: the `Content-Type` bytes of files and proxied answers
//! (`charset`, `charset_types`, `override_charset`, an upstream's charset and `X-Accel-Charset`), and bodies
//! recoded byte for byte (a single-byte map, with ranges; single-byte to UTF-8 and back, chunked; after gzip's
//! own check), as nginx 1.22 answers the same config.

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use support::{free_addr, glommio_usable, Client, Proxy};

fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-charset-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("html")).expect("directories");
    std::fs::write(d.join("html/e.html"), "").expect("file");
    std::fs::write(d.join("html/t.foo"), "foo").expect("file");
    std::fs::write(d.join("html/x.html"), "aXXXXb").expect("file");
    std::fs::write(d.join("html/koi.html"), b"a\xc1\xc2\xff").expect("file");
    std::fs::write(d.join("html/utf.html"), "aаж😀").expect("file");
    d
}

/// An upstream answering by path: `/b` (`text/html; charset=A`, body `YYY`), `/plain` (`text/plain`), `/accel`
/// (`X-Accel-Charset: a`), `/gz` (`Content-Encoding: gzip`).
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
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
                let text = String::from_utf8_lossy(&head).into_owned();
                let (ctype, extra, body) = match text.split(' ').nth(1).unwrap_or("/") {
                    "/b" => ("text/html; charset=A", "", "YYY"),
                    "/plain" => ("text/plain", "", "XY"),
                    "/accel" => ("text/html", "X-Accel-Charset: a\r\n", "XY"),
                    _ => ("text/html", "Content-Encoding: gzip\r\n", "XY"),
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n\
                     {body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes());
            });
        }
    });
    addr
}

fn config(dir: &Path, front: SocketAddr, back: SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
  root html;
  types {{ text/html html; text/foo foo; }}
  charset_map B A {{ 58 59; }}
  charset_map koi8-r utf-8 {{ C1 D0B0; C2 D0B1; }}
  server {{
    listen {front};
    server_name localhost;
    location / {{ charset utf-8; }}
    location /any/ {{ alias {dir}/html/; charset utf-8; charset_types *; }}
    location /ab/ {{ alias {dir}/html/; charset A; source_charset B; }}
    location /koi/ {{ alias {dir}/html/; charset utf-8; source_charset koi8-r; }}
    location /back/ {{ alias {dir}/html/; charset KOI8-R; source_charset utf-8; }}
    location /gz/ {{ alias {dir}/html/; charset utf-8; source_charset koi8-r; gzip on; gzip_min_length 1; }}
    location /p/ {{ charset B; override_charset on; proxy_pass http://{back}/; }}
    location /keep/ {{ charset B; proxy_pass http://{back}/; }}
    location /u/ {{ charset utf-8; proxy_pass http://{back}/; }}
    location /x/ {{ proxy_pass http://{back}/; }}
    location /xi/ {{ proxy_ignore_headers X-Accel-Charset; proxy_pass http://{back}/; }}
    location /r {{ charset utf-8; return 200 "x"; }}
    location /m {{ charset utf-8; return 302 /x; }}
  }}
}}
"#,
        dir = dir.display()
    )
}

/// Everything sent for `raw` until the proxy closes, without `Date` and `Last-Modified`, `ETag` values as `E`.
fn exchange(addr: SocketAddr, raw: &str) -> Vec<u8> {
    let mut c = Client::connect(addr);
    c.send(raw.as_bytes());
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while let Ok(n @ 1..) = support::read_retrying(&mut c.conn, &mut chunk) {
        got.extend_from_slice(&chunk[..n]);
    }
    let end = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(got.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&got[..end]);
    let mut out: Vec<u8> = head
        .split("\r\n")
        .filter(|l| !l.starts_with("Date: ") && !l.starts_with("Last-Modified: ") && !l.starts_with("ETag: "))
        .collect::<Vec<_>>()
        .join("\r\n")
        .into_bytes();
    out.extend_from_slice(&got[end..]);
    out
}

fn get(addr: SocketAddr, target: &str, extra: &str) -> Vec<u8> {
    let raw = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n");
    exchange(addr, &raw)
}

/// A file's 200 with the body's length.
fn file(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\nAccept-Ranges: bytes\r\n\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(body);
    a
}

/// A recoded file's 200: no length, chunked.
fn chunked(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n{:x}\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(body);
    a.extend_from_slice(b"\r\n0\r\n\r\n");
    a
}

/// A proxied 200 as corelb passes it (the upstream's headers in order).
fn proxied(content_type: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn answers<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let front = free_addr();
    let back = upstream();
    std::fs::write(dir.join("corelb.conf"), config(&dir, front, back)).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(loaded.config, 1);

    // the type's charset: types of charset_types only (text/html is one of nginx's default ones), `*` any
    assert_eq!(get(front, "/e.html", ""), file("text/html; charset=utf-8", b""));
    assert_eq!(get(front, "/t.foo", ""), file("text/foo", b"foo"));
    assert_eq!(get(front, "/any/t.foo", ""), file("text/foo; charset=utf-8", b"foo"));

    // a single-byte map: the same length, recoded as read, ranges of the recoded bytes
    assert_eq!(get(front, "/ab/x.html", ""), file("text/html; charset=A", b"aYYYYb"));
    let range = get(front, "/ab/x.html", "Range: bytes=1-2\r\n");
    assert_eq!(
        String::from_utf8_lossy(&range),
        "HTTP/1.1 206 Partial Content\r\nServer: corelb/0.1.0\r\nContent-Type: text/html; charset=A\r\n\
         Content-Length: 2\r\nConnection: close\r\nContent-Range: bytes 1-2/6\r\n\r\nYY"
    );

    // to UTF-8 and back: no length (chunked), no ranges; `?` for what the map lacks, `&#N;` for characters the
    // single-byte charset has not; the name as the block wrote it first (`charset_map koi8-r`, not `KOI8-R`)
    assert_eq!(
        get(front, "/koi/koi.html", "Range: bytes=0-0\r\n"),
        chunked("text/html; charset=utf-8", "aаб?".as_bytes())
    );
    assert_eq!(
        get(front, "/back/utf.html", ""),
        chunked("text/html; charset=koi8-r", b"a\xc1&#1078;&#128512;")
    );
    let http10 = exchange(front, "GET /back/utf.html HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(
        String::from_utf8_lossy(&http10),
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: text/html; charset=koi8-r\r\nConnection: close\r\n\
         \r\na\u{fffd}&#1078;&#128512;"
    );

    // recoded, then compressed (nginx's charset filter runs before gzip's)
    let gz = get(front, "/gz/koi.html", "Accept-Encoding: gzip\r\n");
    let text = String::from_utf8_lossy(&gz).into_owned();
    assert!(
        text.starts_with(
            "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: text/html; charset=utf-8\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\nContent-Encoding: gzip\r\n\r\n"
        ),
        "{text}"
    );
    let body_at = gz.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut rest = &gz[body_at..];
    let mut compressed = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
        if n == 0 {
            break;
        }
        compressed.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
        rest = &rest[eol + 4 + n..];
    }
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_end(&mut plain)
        .expect("gzip");
    assert_eq!(plain, "aаб?".as_bytes());

    // proxied: an upstream's charset is kept, unless override_charset (then recoded from it: Y -> X)
    assert_eq!(get(front, "/keep/b", ""), proxied("text/html; charset=A", "", "YYY"));
    assert_eq!(get(front, "/p/b", ""), proxied("text/html; charset=B", "", "XXX"));
    assert_eq!(
        get(front, "/u/plain", ""),
        proxied("text/plain; charset=utf-8", "", "XY")
    );
    // X-Accel-Charset names the charset (hidden, as nginx hides it), whatever the location says; not when
    // ignored; an encoded answer is left alone
    assert_eq!(get(front, "/x/accel", ""), proxied("text/html; charset=a", "", "XY"));
    assert_eq!(get(front, "/xi/accel", ""), proxied("text/html", "", "XY"));
    assert_eq!(
        get(front, "/p/gz", ""),
        proxied("text/html; charset=B", "Content-Encoding: gzip\r\n", "XY")
    );

    // corelb's own answers: the charset after their type, not on a redirect (as nginx 1.22.1)
    assert_eq!(
        String::from_utf8_lossy(&get(front, "/r", "")),
        "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 1\r\n\
         Connection: close\r\n\r\nx"
    );
    let moved = String::from_utf8_lossy(&get(front, "/m", "")).into_owned();
    assert!(moved.contains("\r\nContent-Type: text/html\r\n"), "{moved}");
    let page = String::from_utf8_lossy(&get(front, "/nothing", "")).into_owned();
    assert!(
        page.starts_with(
            "HTTP/1.1 404 Not Found\r\nServer: corelb/0.1.0\r\nContent-Type: text/html; charset=utf-8\r\n"
        ),
        "{page}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn charset_answers_tokio() {
    answers::<Tokio>("tokio");
}

#[test]
fn charset_answers_glommio() {
    if !glommio_usable() {
        return;
    }
    answers::<Glommio>("glommio");
}
