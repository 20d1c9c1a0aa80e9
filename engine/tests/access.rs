//! `allow`/`deny` end to end, on both runtimes: nginx's first-match order and level inheritance, the exact 403
//! (kept alive, `error_page 403` applies, a location's `return` answers before the rules), the real address of
//! `set_real_ip_from`, and a stream session closed for a forbidden client; plus `TRACE`'s 405 in every server.

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy, Response};

fn start<R: Runtime>(text: &str) -> Proxy {
    let config = parse_str(text, Path::new("/etc/corelb/access.conf")).expect("config");
    Proxy::start::<R>(config, 2)
}

/// A connection to `to` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from((from, 0)).into()).expect("bind the client");
    sock.connect(&to.into()).expect("connect to proxy");
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s
}

/// `GET path` from `from` with `lines` (each ending in CRLF), on a kept-alive connection.
fn ask(c: &mut Client, method: &str, path: &str, lines: &str) -> Response {
    c.send(format!("{method} {path} HTTP/1.1\r\nHost: a\r\n{lines}\r\n").as_bytes());
    c.read_response().expect("an answer")
}

fn status_from(from: [u8; 4], listen: SocketAddr, path: &str) -> u16 {
    let mut c = Client::from_stream(connect_from(from.into(), listen));
    ask(&mut c, "GET", path, "").status
}

/// nginx's error page for `code` (`ngx_http_error_*_page` and its tail) with corelb's name for nginx's, `tail`.
fn page(code: &str, tail: &str) -> String {
    format!(
        "<html>\r\n<head><title>{code}</title></head>\r\n<body>\r\n<center><h1>{code}</h1></center>\r\n\
         <hr><center>{tail}</center>\r\n</body>\r\n</html>\r\n"
    )
}

/// The head without its `Date` line.
fn head_without_date(r: &Response) -> String {
    r.head
        .lines()
        .filter(|l| !l.starts_with("Date: "))
        .map(|l| format!("{l}\r\n"))
        .collect()
}

fn http_rules<R: Runtime>() {
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            server_tokens off;
            deny 127.0.0.9;
            server {{
                listen {listen};
                location / {{ proxy_pass http://ok; }}
                location /net {{ allow 127.0.0.2; deny 127.0.0.0/8; proxy_pass http://ok; }}
                location /own {{ allow all; proxy_pass http://ok; }}
                location /deny {{ deny all; proxy_pass http://ok; }}
                location /ret {{ deny all; return 200 r; }}
                location /page {{ deny all; error_page 403 /p; }}
                location = /p {{ return 200 page; }}
                location /real {{ set_real_ip_from 127.0.0.1; deny 192.0.2.1; proxy_pass http://ok; }}
                location /v6 {{ deny ::1; deny ::ffff:127.0.0.5; proxy_pass http://ok; }}
            }}
        }}",
        ok = ok.addr
    );
    let _p = start::<R>(&text);
    // the first rule that matches decides
    assert_eq!(status_from([127, 0, 0, 2], listen, "/net"), 200);
    assert_eq!(status_from([127, 0, 0, 3], listen, "/net"), 403);
    // http's rules are inherited where a level has none, replaced where it has its own
    assert_eq!(status_from([127, 0, 0, 9], listen, "/"), 403);
    assert_eq!(status_from([127, 0, 0, 1], listen, "/"), 200);
    assert_eq!(status_from([127, 0, 0, 9], listen, "/own"), 200);
    assert_eq!(status_from([127, 0, 0, 9], listen, "/net"), 403);
    // a location's `return` answers in the rewrite phase, before the rules
    assert_eq!(status_from([127, 0, 0, 1], listen, "/ret"), 200);
    // IPv6 rules do not apply to an IPv4 client
    assert_eq!(status_from([127, 0, 0, 5], listen, "/v6"), 200);
    let before = ok.requests();
    let mut c = Client::from_stream(connect_from([127, 0, 0, 1].into(), listen));
    let r = ask(&mut c, "GET", "/deny", "");
    assert_eq!(
        head_without_date(&r),
        "HTTP/1.1 403 Forbidden\r\nServer: corelb\r\nContent-Type: text/html\r\nContent-Length: 147\r\n\
         Connection: keep-alive\r\n\r\n"
    );
    assert_eq!(r.text(), page("403 Forbidden", "corelb"));
    // the connection stays open; the page of `error_page 403`, under the 403 (no `=CODE`)
    let r = ask(&mut c, "GET", "/page", "");
    assert_eq!((r.status, r.text().as_str()), (403, "page"));
    // the real address is the one checked
    assert_eq!(ask(&mut c, "GET", "/real", "X-Real-IP: 192.0.2.1\r\n").status, 403);
    assert_eq!(ask(&mut c, "GET", "/real", "X-Real-IP: 192.0.2.2\r\n").status, 200);
    assert_eq!(
        ok.requests(),
        before + 1,
        "a forbidden request never reaches the upstream"
    );
}

#[test]
fn http_rules_tokio() {
    http_rules::<Tokio>();
}

#[test]
fn http_rules_glommio() {
    if glommio_usable() {
        http_rules::<Glommio>();
    }
}

fn trace_refused<R: Runtime>() {
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            server {{ listen {listen}; location / {{ proxy_pass http://ok; }} }}
        }}",
        ok = ok.addr
    );
    let _p = start::<R>(&text);
    let mut c = Client::connect(listen);
    let r = ask(&mut c, "TRACE", "/", "");
    let name = format!("corelb/{}", env!("CARGO_PKG_VERSION"));
    // nginx refuses it before it decides on keepalive (`ngx_http_handler`): the connection closes
    assert_eq!(
        head_without_date(&r),
        format!(
            "HTTP/1.1 405 Not Allowed\r\nServer: {name}\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            page("405 Not Allowed", &name).len()
        )
    );
    assert_eq!(r.text(), page("405 Not Allowed", &name));
    assert!(c.closed());
    assert_eq!(ok.requests(), 0, "TRACE is never forwarded");
}

#[test]
fn trace_refused_tokio() {
    trace_refused::<Tokio>();
}

#[test]
fn trace_refused_glommio() {
    if glommio_usable() {
        trace_refused::<Glommio>();
    }
}

fn stream_rules<R: Runtime>() {
    let listen = free_addr();
    let text = format!(
        "events {{}}
        stream {{
            deny 127.0.0.3;
            server {{ listen {listen}; allow 127.0.0.2; deny all; return ok; }}
        }}"
    );
    let _p = start::<R>(&text);
    let answer = |from: [u8; 4]| {
        let mut s = connect_from(from.into(), listen);
        s.write_all(b"x").expect("send");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    };
    assert_eq!(answer([127, 0, 0, 2]), b"ok");
    assert_eq!(answer([127, 0, 0, 1]), b"", "a forbidden session is closed");
    assert_eq!(answer([127, 0, 0, 3]), b"", "the server's rules replace the block's");
}

#[test]
fn stream_rules_tokio() {
    stream_rules::<Tokio>();
}

#[test]
fn stream_rules_glommio() {
    if glommio_usable() {
        stream_rules::<Glommio>();
    }
}

#[test]
fn refused_as_nginx_refuses() {
    let conf = |body: &str| format!("events {{}}\nhttp {{\n server {{ listen 127.0.0.1:18393; {body} }}\n}}\n");
    let parse = |body: &str| parse_str(&conf(body), Path::new("/etc/corelb/a.conf")).map_err(|e| e.to_string());
    assert!(parse("allow 10.0.0.0/8; deny ::1; allow unix:; deny all;").is_ok());
    assert_eq!(
        parse("deny 10.0.0.0/40;").unwrap_err(),
        "[emerg] invalid parameter \"10.0.0.0/40\" in /etc/corelb/a.conf:3"
    );
    assert_eq!(
        parse("deny;").unwrap_err(),
        "[emerg] invalid number of arguments in \"deny\" directive in /etc/corelb/a.conf:3"
    );
}
