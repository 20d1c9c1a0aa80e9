//! gzip end to end, on both runtimes: proxied answers (length, chunked and close-delimited bodies) and files
//! compressed when the client takes gzip, the decompressed body equal to the original; `Vary`, the weak `ETag`,
//! no `Content-Length`/`Accept-Ranges`; answers already encoded, too short, of another type or to HEAD; HTTP/1.0
//! (`gzip_http_version`, closing instead of chunking); `gzip_proxied` with `Via`; `gzip_static on|always`; and
//! a gzipped access log read back (one gzip member per buffer).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;
use support::{free_addr, glommio_usable, Client, Proxy, Response};

/// A JSON body of `n` records.
fn json(n: usize) -> Vec<u8> {
    let mut out = b"[".to_vec();
    for i in 0..n {
        out.extend_from_slice(format!("{{\"id\":{i},\"name\":\"item-{}\",\"ok\":true}},", i * 7 % 13).as_bytes());
    }
    out.pop();
    out.push(b']');
    out
}

fn html() -> Vec<u8> {
    (0..400)
        .flat_map(|i| format!("<p>line {i}</p>\n").into_bytes())
        .collect()
}

/// An upstream answering by path: `/json` (a length, an `ETag`, `Accept-Ranges`), `/chunked` (three chunks),
/// `/close` (no length), `/encoded` (`Content-Encoding: br`), `/small` (10 bytes), `/private` (`Cache-Control:
/// private`); it keeps the connection open after an answer with a length or chunks.
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            std::thread::spawn(move || serve_upstream(conn));
        }
    });
    addr
}

fn serve_upstream(mut conn: std::net::TcpStream) {
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let path = text.split(' ').nth(1).unwrap_or("/").to_string();
        let head_only = text.starts_with("HEAD ");
        let fixed = |ctype: &str, extra: &str, body: &[u8]| {
            let mut a = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            if !head_only {
                a.extend_from_slice(body);
            }
            a
        };
        let answer = match path.as_str() {
            "/json" => fixed(
                "application/json",
                "ETag: \"e1\"\r\nAccept-Ranges: bytes\r\n",
                &json(2000),
            ),
            "/encoded" => fixed("text/html", "Content-Encoding: br\r\n", &html()),
            "/small" => fixed("text/html", "", b"0123456789"),
            "/private" => fixed("text/html", "Cache-Control: private\r\n", &html()),
            "/chunked" => {
                let body = html();
                let mut a =
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
                        .to_vec();
                for piece in body.chunks(body.len() / 3 + 1) {
                    a.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                    a.extend_from_slice(piece);
                    a.extend_from_slice(b"\r\n");
                }
                a.extend_from_slice(b"0\r\n\r\n");
                a
            }
            _ => {
                let mut a = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n".to_vec();
                a.extend_from_slice(&html());
                let _ = conn.write_all(&a);
                return;
            }
        };
        if conn.write_all(&answer).is_err() {
            return;
        }
    }
}

/// The files: `index.html`, `style.css`, `a.txt` with `a.txt.gz` beside it.
fn files(dir: &Path) {
    std::fs::create_dir_all(dir.join("files")).unwrap();
    std::fs::create_dir_all(dir.join("static")).unwrap();
    std::fs::create_dir_all(dir.join("always")).unwrap();
    std::fs::write(dir.join("files/index.html"), html()).unwrap();
    std::fs::write(dir.join("files/style.css"), html()).unwrap();
    for d in ["static", "always"] {
        std::fs::write(dir.join(d).join("a.txt"), b"plain text, not the gz one\n").unwrap();
        std::fs::write(dir.join(d).join("a.txt.gz"), gz_file()).unwrap();
    }
}

/// The bytes of `a.txt.gz` (any gzip: it is sent as it is).
fn gz_file() -> Vec<u8> {
    let mut e = corelb_engine::http::gzip::Encoder::new(9);
    let mut out = Vec::new();
    e.write(b"precompressed text\n", &mut out);
    e.finish(&mut out);
    out
}

fn config_text(front: SocketAddr, up: SocketAddr, dir: &Path) -> String {
    let dir = dir.display();
    format!(
        r#"events {{}}
http {{
    types {{ text/html html; text/css css; text/plain txt; application/json json; }}
    root {dir};
    access_log {dir}/access.log.gz combined gzip=6 flush=1h;
    server {{
        listen {front};
        location /up/ {{
            gzip on;
            gzip_types application/json;
            gzip_vary on;
            gzip_comp_level 6;
            proxy_pass http://{up}/;
        }}
        location /via/ {{
            gzip on;
            gzip_proxied private no_etag;
            gzip_types application/json;
            proxy_pass http://{up}/;
        }}
        location /plain/ {{
            proxy_pass http://{up}/;
        }}
        location /files/ {{
            gzip on;
            gzip_vary on;
            gzip_http_version 1.0;
        }}
        location /static/ {{
            gzip_static on;
            gzip_vary on;
        }}
        location /always/ {{
            gzip_static always;
        }}
    }}
}}
"#
    )
}

fn gunzip(z: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(z)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("not gzip ({e}): {:?}", String::from_utf8_lossy(z)));
    out
}

/// One request on a fresh connection.
fn get(front: SocketAddr, request: &str) -> Response {
    let mut c = Client::connect(front);
    c.send(request.as_bytes());
    c.read_response().expect("a response")
}

/// The head with `Date` and `Last-Modified` masked.
fn masked(head: &str) -> String {
    head.split("\r\n")
        .map(|l| {
            if l.starts_with("Date: ") {
                "Date: D"
            } else if l.starts_with("Last-Modified: ") {
                "Last-Modified: L"
            } else if l.starts_with("ETag: ") && !l.contains("e1") {
                if l.starts_with("ETag: W/") {
                    "ETag: W/E"
                } else {
                    "ETag: E"
                }
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

const AE: &str = "Accept-Encoding: gzip, deflate\r\n";

fn sequence<R: Runtime>() {
    let dir = std::env::temp_dir().join(format!(
        "corelb-gzip-{}-{}",
        std::any::type_name::<R>().len(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    files(&dir);
    let (front, up) = (free_addr(), upstream());
    let config = corelb_engine::config::parse_str(&config_text(front, up, &dir), Path::new("gzip.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let server = format!("Server: corelb/{}", env!("CARGO_PKG_VERSION"));
    let req = |path: &str, extra: &str| format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n{extra}\r\n");

    // A proxied answer with a length: compressed, chunked, weak ETag, no Content-Length or Accept-Ranges, Vary
    let r = get(front, &req("/up/json", AE));
    assert_eq!(
        masked(&r.head),
        format!(
            "HTTP/1.1 200 OK\r\n{server}\r\nDate: D\r\nContent-Type: application/json\r\nETag: W/\"e1\"\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n\r\n"
        )
    );
    assert_eq!(gunzip(&r.body), json(2000));
    assert!(r.body.len() < json(2000).len() / 3, "level 6 on JSON: {}", r.body.len());
    // ... and as it is to a client that does not take gzip, with Vary all the same
    let r = get(front, &req("/up/json", "Accept-Encoding: deflate, gzip;q=0\r\n"));
    assert_eq!(
        masked(&r.head),
        format!(
            "HTTP/1.1 200 OK\r\n{server}\r\nDate: D\r\nContent-Type: application/json\r\nETag: \"e1\"\r\n\
             Accept-Ranges: bytes\r\nContent-Length: {}\r\nConnection: close\r\nVary: Accept-Encoding\r\n\r\n",
            json(2000).len()
        )
    );
    assert_eq!(r.body, json(2000));

    // chunked and close-delimited bodies, decoded then compressed
    for path in ["/up/chunked", "/up/close"] {
        let r = get(front, &req(path, AE));
        assert!(r.head.contains("\r\nContent-Encoding: gzip\r\n"), "{path}: {}", r.head);
        assert!(
            r.head.contains("\r\nTransfer-Encoding: chunked\r\n"),
            "{path}: {}",
            r.head
        );
        assert_eq!(gunzip(&r.body), html(), "{path}");
    }

    // never twice, not under gzip_min_length, not without gzip on
    let r = get(front, &req("/up/encoded", AE));
    assert!(
        r.head.contains("\r\nContent-Encoding: br\r\n") && !r.head.contains("gzip"),
        "{}",
        r.head
    );
    assert!(!r.head.contains("Vary"), "the filter did not take it: {}", r.head);
    assert_eq!(r.body, html());
    let r = get(front, &req("/up/small", AE));
    assert!(
        r.head.contains("\r\nContent-Length: 10\r\n") && !r.head.contains("gzip"),
        "{}",
        r.head
    );
    assert_eq!(r.body, b"0123456789");
    let r = get(front, &req("/plain/json", AE));
    assert!(!r.head.contains("gzip") && !r.head.contains("Vary"), "{}", r.head);
    assert_eq!(r.body, json(2000));

    // HEAD: the compressed answer's head, no body, no chunking (the connection kept)
    let mut c = Client::connect(front);
    c.send(format!("HEAD /up/json HTTP/1.1\r\nHost: h\r\n{AE}\r\n").as_bytes());
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(support::read_retrying(&mut c.conn, &mut byte).expect("HEAD answer"), 1);
        head.push(byte[0]);
    }
    assert_eq!(
        masked(&String::from_utf8_lossy(&head)),
        format!(
            "HTTP/1.1 200 OK\r\n{server}\r\nDate: D\r\nContent-Type: application/json\r\nETag: W/\"e1\"\r\n\
             Connection: keep-alive\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n\r\n"
        )
    );
    // the connection goes on, with no body byte before the next answer: two compressed answers on it
    for path in ["/up/json", "/up/chunked"] {
        c.send(format!("GET {path} HTTP/1.1\r\nHost: h\r\n{AE}\r\n").as_bytes());
        let r = c.read_response().expect("keepalive answer");
        assert!(r.head.starts_with("HTTP/1.1 200 OK\r\n"), "{}", r.head);
        assert!(r.head.contains("\r\nConnection: keep-alive\r\n"), "{}", r.head);
        assert!(!gunzip(&r.body).is_empty());
    }
    drop(c);

    // HTTP/1.0: not under gzip_http_version 1.1 (the default); under 1.0, compressed and ended by the close
    let r = get(front, &format!("GET /up/json HTTP/1.0\r\n{AE}\r\n"));
    assert!(!r.head.contains("gzip"), "{}", r.head);
    let r = get(front, &format!("GET /files/index.html HTTP/1.0\r\n{AE}\r\n"));
    assert_eq!(
        masked(&r.head),
        format!(
            "HTTP/1.1 200 OK\r\n{server}\r\nDate: D\r\nContent-Type: text/html\r\nLast-Modified: L\r\n\
             Connection: close\r\nVary: Accept-Encoding\r\nETag: W/E\r\nContent-Encoding: gzip\r\n\r\n"
        )
    );
    assert_eq!(gunzip(&r.body), html());

    // a file over HTTP/1.1: chunked; a type not in gzip_types: as it is (no Vary)
    let r = get(front, &req("/files/index.html", AE));
    assert!(r
        .head
        .contains("\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nVary: Accept-Encoding\r\n"));
    assert_eq!(gunzip(&r.body), html());
    let r = get(front, &req("/files/style.css", AE));
    assert!(
        r.head.contains("\r\nAccept-Ranges: bytes\r\n") && !r.head.contains("Vary"),
        "{}",
        r.head
    );
    assert_eq!(r.body, html());

    // gzip_proxied with Via: the answer's headers decide (`private no_etag` here): Cache-Control: private is
    // compressed, an ETag is not, an answer with neither is
    let via = format!("{AE}Via: 1.1 cache\r\n");
    let r = get(front, &req("/via/private", &via));
    assert_eq!(gunzip(&r.body), html());
    let r = get(front, &req("/via/json", &via));
    assert!(!r.head.contains("gzip"), "{}", r.head);
    assert_eq!(r.body, json(2000));
    let r = get(front, &req("/via/json", AE));
    assert_eq!(gunzip(&r.body), json(2000), "without Via");
    let r = get(front, &req("/via/chunked", &via));
    assert_eq!(gunzip(&r.body), html(), "nothing forbids it");

    // gzip_static on: a.txt.gz as it is, with its own length; Vary either way; always: whatever the client takes
    let r = get(front, &req("/static/a.txt", AE));
    assert_eq!(
        masked(&r.head),
        format!(
            "HTTP/1.1 200 OK\r\n{server}\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Last-Modified: L\r\nConnection: close\r\nVary: Accept-Encoding\r\nETag: E\r\nContent-Encoding: gzip\r\n\
             Accept-Ranges: bytes\r\n\r\n",
            gz_file().len()
        )
    );
    assert_eq!(r.body, gz_file());
    let r = get(front, &req("/static/a.txt", ""));
    assert!(
        r.head.contains("\r\nVary: Accept-Encoding\r\n") && !r.head.contains("gzip"),
        "{}",
        r.head
    );
    assert_eq!(r.body, b"plain text, not the gz one\n");
    let r = get(front, &req("/always/a.txt", ""));
    assert!(
        r.head.contains("\r\nContent-Encoding: gzip\r\n") && !r.head.contains("Vary"),
        "{}",
        r.head
    );
    assert_eq!(gunzip(&r.body), b"precompressed text\n");

    // the access log: gzip members, read back whole
    assert!(proxy.shared.flush_access_logs(Duration::from_secs(5), true));
    let log = std::fs::read(dir.join("access.log.gz")).expect("the gzipped log");
    assert_eq!(&log[..3], &[0x1f, 0x8b, 8]);
    let text = String::from_utf8(gunzip(&log)).expect("text");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 21, "{text}");
    assert!(lines[0].contains("\"GET /up/json HTTP/1.1\" 200 "), "{}", lines[0]);
    assert!(lines.iter().all(|l| l.starts_with("127.0.0.1 - - [")), "{text}");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_gzip_as_nginx() {
    sequence::<Tokio>();
}

#[test]
fn glommio_gzip_as_nginx() {
    if glommio_usable() {
        sequence::<Glommio>();
    }
}
