//! An upstream's `X-Accel-Redirect` end to end on both runtimes, with the exact bytes nginx 1.22 answers for the
//! same config (its `Server` line and page footer aside): an internal redirect to a URI (method `GET`, `HEAD`
//! kept, the URI's arguments, `$upstream_http_*` of the redirecting answer), to a named location (the request's
//! URI, `$upstream_status`), the upstream lines kept on the answer (`Content-Type` replacing a `return` text's,
//! not a page's), an unsafe URI's 404, a named location that is not there (500), `proxy_ignore_headers
//! X-Accel-Redirect`, and the connection going on after it.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::api_client::start;
use support::free_addr;

fn config_text(listen: SocketAddr, backend: SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
 server {{
  listen {backend};
  server_tokens off;
  location /xar {{
   add_header X-Accel-Redirect $arg_to; add_header Content-Type text/blah; add_header Set-Cookie a=b;
   add_header Content-Disposition attachment; add_header X-Other o;
   return 204;
  }}
 }}
 server {{
  listen {listen};
  server_tokens off;
  location /p/ {{ proxy_pass http://{backend}/xar; }}
  location /ign/ {{ proxy_pass http://{backend}/xar; proxy_ignore_headers X-Accel-Redirect; }}
  location /target {{ add_header X-Mine m; return 200 "target $uri $args $request_method $upstream_http_x_accel_redirect\n"; }}
  location @named {{ return 200 "named $uri $upstream_status\n"; }}
  location /noroute {{ return 404; }}
 }}
}}
"#
    )
}

/// One request on a fresh connection, the whole answer with its `Date` value replaced by `D`.
fn exchange(addr: SocketAddr, line: &str) -> String {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let body = if line.starts_with("POST") { "abc" } else { "" };
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let req = format!("{line}\r\nHost: t\r\n{length}Connection: close\r\n\r\n{body}");
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

const KEPT: &str = "Set-Cookie: a=b\r\nContent-Disposition: attachment\r\n";

fn text_answer(body: &str, mine: bool, head_only: bool) -> String {
    let mine = if mine { "X-Mine: m\r\n" } else { "" };
    let shown = if head_only { "" } else { body };
    format!(
        "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/blah\r\nContent-Length: {}\r\n\
         Connection: close\r\n{KEPT}{mine}\r\n{shown}",
        body.len()
    )
}

fn page_answer(status: &str) -> String {
    let body = format!(
        "<html>\r\n<head><title>{status}</title></head>\r\n<body>\r\n<center><h1>{status}</h1></center>\r\n\
         <hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"
    );
    format!(
        "HTTP/1.1 {status}\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
         Connection: close\r\n{KEPT}\r\n{body}",
        body.len()
    )
}

#[test]
fn x_accel_redirect_as_nginx_on_both_runtimes() {
    for rt in 0..2 {
        let (listen, backend) = (free_addr(), free_addr());
        let _p = start(rt, &config_text(listen, backend));
        let cases = [
            (
                "GET /p/?to=/target?q=1 HTTP/1.1",
                text_answer("target /target q=1 GET /target?q=1\n", true, false),
            ),
            // the method becomes GET, the body is gone
            (
                "POST /p/?to=/target HTTP/1.1",
                text_answer("target /target  GET /target\n", true, false),
            ),
            (
                "HEAD /p/?to=/target HTTP/1.1",
                text_answer("target /target  HEAD /target\n", true, true),
            ),
            // a named location: the request's URI; the upstream's status
            (
                "GET /p/?to=@named HTTP/1.1",
                text_answer("named /p/ 204\n", false, false),
            ),
            // nginx's pages keep their own Content-Type, and the upstream's other lines
            ("GET /p/?to=/a/../target HTTP/1.1", page_answer("404 Not Found")),
            ("GET /p/?to=/noroute HTTP/1.1", page_answer("404 Not Found")),
            ("GET /p/?to=@nonamed HTTP/1.1", page_answer("500 Internal Server Error")),
            // ignored: the upstream's answer goes through, without its X-Accel-Redirect line (nginx writes its
            // `Connection` line after `Content-Type`; corelb's proxied heads keep the upstream's lines together
            // and end with it)
            (
                "GET /ign/?to=/target HTTP/1.1",
                format!(
                    "HTTP/1.1 204 No Content\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/blah\r\n\
                     {KEPT}X-Other: o\r\nConnection: close\r\n\r\n"
                ),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(exchange(listen, line), want, "runtime {rt}: {line}");
        }
    }
}

/// The connection goes on after a redirect, and the next request on it keeps nothing of it.
#[test]
fn the_connection_goes_on_after_x_accel_redirect_on_both_runtimes() {
    for rt in 0..2 {
        let (listen, backend) = (free_addr(), free_addr());
        let _p = start(rt, &config_text(listen, backend));
        let mut c = support::Client::connect(listen);
        for (path, want) in [
            ("/p/?to=/target", "target /target  GET /target\n"),
            ("/target?x=1", "target /target x=1 GET \n"),
            ("/p/?to=@named", "named /p/ 204\n"),
        ] {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c
                .read_response()
                .unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            assert_eq!((r.status, r.text()), (200, want.to_string()), "runtime {rt}: {path}");
            let kept = path.starts_with("/p/");
            assert_eq!(r.header("set-cookie").is_some(), kept, "runtime {rt}: {path}");
            let ty = if kept { "text/blah" } else { "text/plain" };
            assert_eq!(r.header("content-type").as_deref(), Some(ty), "runtime {rt}: {path}");
            assert_eq!(
                r.header("connection").as_deref(),
                Some("keep-alive"),
                "runtime {rt}: {path}"
            );
        }
    }
}
