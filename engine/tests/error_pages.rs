//! `error_page`, `proxy_intercept_errors` and `recursive_error_pages` end to end on both runtimes, with the exact
//! bytes nginx 1.22 answers for the same config (its `Server` line and page footer aside): internal redirects to a
//! URI (method `GET`, the page's arguments), to a named location and to a URL, `=` and `=CODE`, the proxy's own
//! errors and intercepted upstream answers (a 401's `WWW-Authenticate` kept), recursion on and off, the redirect
//! cycle's 500, and a refused body (413).

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::api_client::start;
use support::backend::{Backend, Mode};
use support::{dead_addr, free_addr};

/// A backend server block and a front one whose locations exercise each case (`server_tokens off`: the pages
/// carry no version).
fn config_text(listen: SocketAddr, backend: SocketAddr, dead: SocketAddr, root: &std::path::Path) -> String {
    let root = root.display();
    format!(
        r#"events {{}}
http {{
 server {{
  listen {backend};
  server_tokens off;
  location / {{ return 404 "upstream 404\n"; }}
  location /e500 {{ return 500; }}
  location /auth {{ add_header WWW-Authenticate "Basic realm=x" always; add_header WWW-Authenticate "Other" always; return 401; }}
  location /proxy/seen {{ return 200 "$request_method $request_uri\n"; }}
 }}
 server {{
  listen {listen};
  root {root};
  server_tokens off;
  error_page 404 /404page;
  location = /404page {{ return 200 "custom 404\n"; }}
  location /missing {{ }}
  location /ret {{ return 404; }}
  location /text {{ return 404 "own text\n"; }}
  location /eq {{ error_page 404 = /created?a=1; return 404; }}
  location = /created {{ return 201 "created $args\n"; }}
  location /code {{ error_page 404 =200 /404page; return 404; }}
  location /named {{ error_page 403 @fallback; return 403; }}
  location @fallback {{ return 200 "named $uri\n"; }}
  location /url {{ error_page 403 http://example.com/x?$arg_a; return 403; }}
  location /url301 {{ error_page 403 =301 http://example.com/; return 403; }}
  location /proxy {{ proxy_pass http://{backend}; }}
  location /icpt/ {{ proxy_pass http://{backend}/; proxy_intercept_errors on; error_page 404 500 401 /404page; }}
  location /dead {{ proxy_pass http://{dead}; error_page 502 /404page; }}
  location /deadp {{ proxy_pass http://{dead}; error_page 502 /proxy/seen; }}
  location /norec {{ error_page 404 /nothere; return 404; }}
  location /nothere {{ return 404; }}
  location /rec {{ recursive_error_pages on; error_page 404 /rec2; return 404; }}
  location /rec2 {{ return 404; }}
  location /loop {{ recursive_error_pages on; error_page 404 /loop; return 404; }}
  location /post {{ error_page 404 /proxy/seen; return 404; }}
  location /twice {{ error_page 404 /icpt/x; return 404; }}
  location /spage {{ error_page 404 /err.html; return 404; }}
  location /big {{ client_max_body_size 2; error_page 413 /404page; return 200 "not reached"; }}
 }}
}}
"#
    )
}

/// One request on a fresh connection, the whole answer with its `Date` value replaced by `D`.
fn exchange(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{length}Connection: close\r\n\r\n{body}");
    c.write_all(req.as_bytes()).expect("send");
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got).into_owned();
    match (
        text.find("Date: "),
        text.find("Date: ").and_then(|i| text[i..].find("\r\n").map(|e| i + e)),
    ) {
        (Some(start), Some(end)) => format!("{}Date: D{}", &text[..start], &text[end..]),
        _ => text,
    }
}

/// nginx's `ETag` of a file: its mtime and size in hex.
fn etag(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).expect("file");
    format!("{:x}-{:x}", m.mtime(), m.size())
}

fn head(status: &str, rest: &str) -> String {
    format!("HTTP/1.1 {status}\r\nServer: corelb\r\nDate: D\r\n{rest}")
}

/// nginx's page for `status` with `server_tokens off` (titled as ngx_http_error_pages: 302's is "302 Found").
fn page(status: &str) -> String {
    let status = if status == "302 Moved Temporarily" {
        "302 Found"
    } else {
        status
    };
    format!(
        "<html>\r\n<head><title>{status}</title></head>\r\n<body>\r\n<center><h1>{status}</h1></center>\r\n\
         <hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"
    )
}

fn text_answer(status: &str, body: &str) -> String {
    head(
        status,
        &format!(
            "Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

fn page_answer(status: &str, location: Option<&str>) -> String {
    let body = page(status);
    let location = location.map_or(String::new(), |l| format!("Location: {l}\r\n"));
    head(
        status,
        &format!(
            "Content-Type: text/html\r\nContent-Length: {}\r\n{location}Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn error_pages_as_nginx_on_both_runtimes() {
    let root = std::env::temp_dir().join(format!("corelb-error-pages-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("root");
    std::fs::write(root.join("err.html"), "static page\n").expect("page");
    for rt in 0..2 {
        let (listen, backend) = (free_addr(), free_addr());
        let _p = start(rt, &config_text(listen, backend, dead_addr(), &root));
        let custom = "custom 404\n";
        let cases = [
            // a file that is not there, and `return 404`: the server's page, with the error's status
            ("GET", "/missing", "", text_answer("404 Not Found", custom)),
            ("GET", "/ret", "", text_answer("404 Not Found", custom)),
            // a `return` with a text is no special response: no page
            ("GET", "/text", "", text_answer("404 Not Found", "own text\n")),
            // `=`: the page's own status; the page's arguments
            ("GET", "/eq", "", text_answer("201 Created", "created a=1\n")),
            ("GET", "/code", "", text_answer("200 OK", custom)),
            // a named location: `$uri` stays the request's
            ("GET", "/named", "", text_answer("403 Forbidden", "named /named\n")),
            // a URL: 302 unless `=` names a redirect code, its variables evaluated
            (
                "GET",
                "/url?a=1",
                "",
                page_answer("302 Moved Temporarily", Some("http://example.com/x?1")),
            ),
            (
                "GET",
                "/url301",
                "",
                page_answer("301 Moved Permanently", Some("http://example.com/")),
            ),
            // without `proxy_intercept_errors` the upstream's 404 goes through
            ("GET", "/proxy/x", "", text_answer("404 Not Found", "upstream 404\n")),
            ("GET", "/icpt/x", "", text_answer("404 Not Found", custom)),
            (
                "GET",
                "/icpt/e500",
                "",
                text_answer("500 Internal Server Error", custom),
            ),
            (
                "GET",
                "/icpt/auth",
                "",
                head(
                    "401 Unauthorized",
                    &format!(
                        "Content-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\
                         WWW-Authenticate: Basic realm=x\r\nWWW-Authenticate: Other\r\n\r\n{custom}"
                    ),
                ),
            ),
            // the proxy's own 502
            ("GET", "/dead", "", text_answer("502 Bad Gateway", custom)),
            // a POST whose upstream fails, to a page that proxies: GET, without the body the first try took
            (
                "POST",
                "/deadp",
                "abc",
                text_answer("502 Bad Gateway", "GET /proxy/seen\n"),
            ),
            // recursion off: the page's own 404 is nginx's page; on: it goes to the page of its location
            ("GET", "/norec", "", page_answer("404 Not Found", None)),
            ("GET", "/rec", "", text_answer("404 Not Found", custom)),
            ("GET", "/loop", "", page_answer("500 Internal Server Error", None)),
            // a page that proxies to an intercepting location: its 404 is intercepted, and (recursion off) answered
            // with nginx's page
            ("GET", "/twice", "", page_answer("404 Not Found", None)),
            // the method becomes GET; the page is proxied
            (
                "POST",
                "/post",
                "abc",
                text_answer("404 Not Found", "GET /proxy/seen\n"),
            ),
            // HEAD stays HEAD: the head of the page's answer
            (
                "HEAD",
                "/ret",
                "",
                head(
                    "404 Not Found",
                    "Content-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\n",
                ),
            ),
            // a page from a file: the error's status, no `Last-Modified` and no `Accept-Ranges` (nginx sends them with
            // 200 only)
            (
                "GET",
                "/spage",
                "",
                head(
                    "404 Not Found",
                    &format!(
                        "Content-Type: text/html\r\nContent-Length: 12\r\nConnection: close\r\nETag: \"{}\"\r\n\r\n\
                         static page\n",
                        etag(&root.join("err.html"))
                    ),
                ),
            ),
            // a body over client_max_body_size: the location's page for 413, and the connection closes
            (
                "POST",
                "/big",
                "abc",
                text_answer("413 Request Entity Too Large", custom),
            ),
        ];
        for (method, path, body, want) in cases {
            assert_eq!(
                exchange(listen, method, path, body),
                want,
                "runtime {rt}: {method} {path}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Keepalive: the page's answer keeps the connection as the request allows, and the next request on it is routed
/// afresh (no status or header left from the page).
#[test]
fn the_connection_goes_on_after_a_page_on_both_runtimes() {
    let root = std::env::temp_dir().join(format!("corelb-error-pages-ka-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("root");
    for rt in 0..2 {
        let (listen, backend) = (free_addr(), free_addr());
        let _p = start(rt, &config_text(listen, backend, dead_addr(), &root));
        let mut c = support::Client::connect(listen);
        for path in ["/icpt/auth", "/created?b=2", "/dead", "/created?c=3"] {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c
                .read_response()
                .unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            match path {
                "/icpt/auth" => {
                    assert_eq!((r.status, r.text()), (401, "custom 404\n".into()), "runtime {rt}");
                    assert_eq!(r.header("www-authenticate").as_deref(), Some("Basic realm=x"));
                }
                "/dead" => assert_eq!((r.status, r.text()), (502, "custom 404\n".into()), "runtime {rt}"),
                _ => {
                    let args = path.split_once('?').map_or("", |(_, a)| a);
                    assert_eq!((r.status, r.text()), (201, format!("created {args}\n")), "runtime {rt}");
                    assert_eq!(r.header("www-authenticate"), None, "runtime {rt}: {path}");
                }
            }
            assert_eq!(
                r.header("connection").as_deref(),
                Some("keep-alive"),
                "runtime {rt}: {path}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// An intercepted answer's body is not read: its upstream connection goes back to the keepalive pool only when the
/// answer has no body (nginx sets `u->keepalive` then), else it is closed.
#[test]
fn intercepted_answers_keep_the_upstream_connection_only_without_a_body_on_both_runtimes() {
    for rt in 0..2 {
        // an empty name: a 404 with `Content-Length: 0`
        for (name, accepts) in [("", 1), ("body", 2)] {
            let backend = Backend::start(name, Mode::Status(404));
            let listen = free_addr();
            let text = format!(
                r#"events {{}}
http {{
 upstream u {{ server {}; keepalive 4; }}
 server {{
  listen {listen};
  location / {{
   proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection "";
   proxy_intercept_errors on; error_page 404 /page;
  }}
  location = /page {{ return 200 "page\n"; }}
 }}
}}
"#,
                backend.addr
            );
            let _p = start(rt, &text);
            for _ in 0..2 {
                let r = support::get(listen, "/x").unwrap_or_else(|| panic!("runtime {rt}: no answer"));
                assert_eq!(
                    (r.status, r.text()),
                    (404, "page\n".to_string()),
                    "runtime {rt}: {name:?}"
                );
            }
            assert_eq!(backend.requests(), 2, "runtime {rt}: {name:?}");
            assert_eq!(backend.accepts(), accepts, "runtime {rt}: {name:?}");
        }
    }
}
