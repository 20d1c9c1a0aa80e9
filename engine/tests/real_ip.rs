//! The real client address end to end, on both runtimes: `set_real_ip_from` with `X-Real-IP` and
//! `X-Forwarded-For` (recursive and not), `ip_hash` keyed on the real address, PROXY protocol v1 and v2 (with a
//! TLV) in http and stream, a broken or missing header closing the connection, and `proxy_protocol on` towards a
//! stream upstream (nginx's v1 line, then the client's bytes).

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy, Response};

fn start<R: Runtime>(text: &str) -> Proxy {
    let config = parse_str(text, Path::new("/etc/corelb/realip.conf")).expect("config");
    Proxy::start::<R>(config, 2)
}

/// One request with `head_lines` (each ending in CRLF) on a fresh connection, after `prefix` (a PROXY header).
fn ask(listen: SocketAddr, prefix: &[u8], path: &str, head_lines: &str) -> Response {
    let mut c = Client::connect(listen);
    let mut raw = prefix.to_vec();
    raw.extend_from_slice(
        format!("GET {path} HTTP/1.1\r\nHost: a\r\n{head_lines}Connection: close\r\n\r\n").as_bytes(),
    );
    c.send(&raw);
    c.read_response().expect("an answer")
}

fn header(r: &Response, name: &str) -> String {
    r.header(name).unwrap_or_else(|| panic!("no {name} in {}", r.head))
}

fn forwarded_headers<R: Runtime>() {
    let ok = Backend::start("ok", Mode::Ok);
    let (listen, other) = (free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            set_real_ip_from 127.0.0.1/32;
            set_real_ip_from 10.0.1.0/24;
            add_header X-IP $remote_addr!$remote_port!$realip_remote_addr;
            server {{
                listen {listen};
                location / {{ proxy_pass http://ok; }}
                location /custom {{ real_ip_header X-Real-IP-Custom; proxy_pass http://ok; }}
                location /1 {{ real_ip_header X-Forwarded-For; real_ip_recursive off; proxy_pass http://ok; }}
                location /2 {{ real_ip_header X-Forwarded-For; real_ip_recursive on; proxy_pass http://ok; }}
                location /post-read {{ set_real_ip_from 192.0.2.0/24; proxy_pass http://ok; }}
            }}
            server {{
                listen {other};
                set_real_ip_from 192.0.2.0/24;
                location / {{ proxy_pass http://ok; }}
            }}
        }}",
        ok = ok.addr
    );
    let _p = start::<R>(&text);
    let ip = |path: &str, lines: &str| header(&ask(listen, b"", path, lines), "x-ip");
    let peer = |v: &str| {
        let (addr, rest) = v.split_once('!').expect("addr!port!peer");
        (
            addr.to_string(),
            rest.rsplit('!').next().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(ip("/", "X-Real-IP: 192.0.2.1\r\n"), "192.0.2.1!!127.0.0.1");
    assert_eq!(ip("/", "X-Real-IP: 192.0.2.1:8000\r\n"), "192.0.2.1!8000!127.0.0.1");
    assert_eq!(ip("/custom", "X-Real-IP-Custom: 192.0.2.1\r\n"), "192.0.2.1!!127.0.0.1");
    assert_eq!(
        ip("/1", "X-Forwarded-For: 10.0.0.1, 192.0.2.1\r\n"),
        "192.0.2.1!!127.0.0.1"
    );
    assert_eq!(
        ip("/1", "X-Forwarded-For: 192.0.2.1, 10.0.1.1, 127.0.0.1\r\n"),
        "127.0.0.1!!127.0.0.1"
    );
    assert_eq!(
        ip("/2", "X-Forwarded-For: 10.0.1.1, 192.0.2.1, 127.0.0.1\r\n"),
        "192.0.2.1!!127.0.0.1"
    );
    let lines = "X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 127.0.0.1, 10.0.1.1\r\n";
    assert_eq!(ip("/1", lines), "10.0.1.1!!127.0.0.1");
    let lines = "X-Forwarded-For: 10.0.1.1\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-For: 127.0.0.1\r\n";
    assert_eq!(ip("/2", lines), "192.0.2.1!!127.0.0.1");
    // the server's settings apply first (nginx's post-read phase): a location's own list comes too late
    assert_eq!(ip("/post-read", "X-Real-IP: 192.0.2.1\r\n"), "192.0.2.1!!127.0.0.1");
    // no header, a bad value, or a server trusting other networks: the connection's own address
    for (path, lines) in [("/", ""), ("/", "X-Real-IP: nonsense\r\n")] {
        let (addr, own) = peer(&ip(path, lines));
        assert_eq!(
            (addr.as_str(), own.as_str()),
            ("127.0.0.1", "127.0.0.1"),
            "{path} {lines:?}"
        );
    }
    let r = ask(other, b"", "/", "X-Real-IP: 192.0.2.1\r\n");
    assert_eq!(peer(&header(&r, "x-ip")), ("127.0.0.1".into(), "127.0.0.1".into()));
}

#[test]
fn forwarded_headers_tokio() {
    forwarded_headers::<Tokio>();
}

#[test]
fn forwarded_headers_glommio() {
    if glommio_usable() {
        forwarded_headers::<Glommio>();
    }
}

/// nginx-tests' upstream_ip_hash.t: `ip_hash` keys on the address `X-Real-IP` gives (its first three octets).
fn ip_hash_on_the_real_address<R: Runtime>() {
    let a = Backend::start("a", Mode::Ok);
    let b = Backend::start("b", Mode::Ok);
    let c = Backend::start("c", Mode::Ok);
    let (listen, plain) = (free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            upstream two {{ ip_hash; server {a}; server {b}; }}
            upstream three {{ ip_hash; server {a}; server {b}; server {c}; }}
            server {{
                listen {listen};
                set_real_ip_from 127.0.0.0/8;
                location / {{ proxy_pass http://two; }}
                location /three {{ proxy_pass http://three; }}
            }}
            server {{
                listen {plain};
                location / {{ proxy_pass http://two; }}
            }}
        }}",
        a = a.addr,
        b = b.addr,
        c = c.addr
    );
    let _p = start::<R>(&text);
    let tally_on = |listen: SocketAddr, path: &str, host: u8| {
        let mut n = std::collections::BTreeMap::new();
        for i in 1..=30 {
            let r = ask(listen, b"", path, &format!("X-Real-IP: 127.0.{i}.{host}\r\n"));
            assert_eq!(r.status, 200, "{}", r.head);
            *n.entry(r.text()).or_insert(0) += 1;
        }
        n.into_iter().collect::<Vec<(String, u32)>>()
    };
    let tally = |path: &str, host: u8| tally_on(listen, path, host);
    let two = tally("/", 2);
    assert_eq!(two, [("a".to_string(), 15), ("b".to_string(), 15)]);
    // the fourth octet does not count, as in nginx
    assert_eq!(tally("/", 200), two);
    let three = tally("/three", 2);
    assert_eq!(three, [("a".into(), 10), ("b".into(), 10), ("c".into(), 10)]);
    // without a trusted sender every request is the connection's own address: one peer
    let plain = tally_on(plain, "/", 2);
    assert_eq!((plain.len(), plain.first().map(|p| p.1)), (1, Some(30)), "{plain:?}");
}

#[test]
fn ip_hash_on_the_real_address_tokio() {
    ip_hash_on_the_real_address::<Tokio>();
}

#[test]
fn ip_hash_on_the_real_address_glommio() {
    if glommio_usable() {
        ip_hash_on_the_real_address::<Glommio>();
    }
}

/// A v2 header: PROXY over TCP/IPv4 from 192.0.2.1:123 to 192.0.2.2:5678, with `tlvs`.
fn v2(tlvs: &[u8]) -> Vec<u8> {
    let mut p = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    p.extend_from_slice(&(12 + tlvs.len() as u16).to_be_bytes());
    p.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e]);
    p.extend_from_slice(tlvs);
    p
}

/// Whether the connection closes without a byte of answer.
fn closed_unanswered(listen: SocketAddr, raw: &[u8]) -> bool {
    let mut s = TcpStream::connect(listen).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = s.write_all(raw);
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(0) | Err(_))
}

fn proxy_protocol_http<R: Runtime>() {
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            add_header X-IP $remote_addr!$remote_port;
            add_header X-PP $proxy_protocol_addr!$proxy_protocol_port;
            add_header X-PPS $proxy_protocol_server_addr!$proxy_protocol_server_port;
            add_header X-ALPN $proxy_protocol_tlv_alpn-$proxy_protocol_tlv_0x01-$proxy_protocol_tlv_0x30;
            server {{
                listen {listen} proxy_protocol;
                set_real_ip_from 127.0.0.1;
                location / {{ proxy_pass http://ok; }}
                location /pp {{ real_ip_header proxy_protocol; proxy_pass http://ok; }}
            }}
        }}",
        ok = ok.addr
    );
    let _p = start::<R>(&text);
    let v1 = b"PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n";
    let r = ask(listen, v1, "/", "");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert_eq!(header(&r, "x-pp"), "192.0.2.1!123");
    assert_eq!(header(&r, "x-pps"), "192.0.2.2!5678");
    assert!(header(&r, "x-ip").starts_with("127.0.0.1!"), "{}", r.head);
    let r = ask(listen, v1, "/pp", "");
    assert_eq!(header(&r, "x-ip"), "192.0.2.1!123");
    let r = ask(listen, b"PROXY TCP6 2001:Db8::1 2001:Db8::2 123 5678\r\n", "/pp", "");
    assert_eq!(
        (header(&r, "x-ip"), header(&r, "x-pp")),
        ("2001:db8::1!123".into(), "2001:Db8::1!123".into())
    );
    let r = ask(listen, b"PROXY UNKNOWN 1 2 3\r\n", "/pp", "");
    assert_eq!((header(&r, "x-pp"), header(&r, "x-pps")), ("!".into(), "!".into()));
    // v2, with an ALPN TLV
    let r = ask(listen, &v2(b"\x01\x00\x02h2"), "/pp", "");
    assert_eq!(header(&r, "x-ip"), "192.0.2.1!123");
    assert_eq!(header(&r, "x-pps"), "192.0.2.2!5678");
    assert_eq!(header(&r, "x-alpn"), "h2-h2-");
    // a header arriving in pieces is read whole
    let mut c = Client::connect(listen);
    c.send(b"PROXY TCP4 192.0.2.1 ");
    std::thread::sleep(Duration::from_millis(50));
    c.send(b"192.0.2.2 123 5678\r\nGET /pp HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_eq!(header(&c.read_response().expect("an answer"), "x-ip"), "192.0.2.1!123");
    // a missing or broken header closes the connection unanswered
    assert!(closed_unanswered(listen, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert!(closed_unanswered(
        listen,
        b"PROXY TCP4 192.0.2.1 192.0.2.2 123\r\nGET / HTTP/1.1\r\n\r\n"
    ));
    let mut bad_version = v2(b"");
    bad_version[12] = 0x31;
    assert!(closed_unanswered(listen, &bad_version));
    let mut too_large = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xff".to_vec();
    too_large.extend_from_slice(&[0; 64]);
    assert!(closed_unanswered(listen, &too_large));
}

#[test]
fn proxy_protocol_http_tokio() {
    proxy_protocol_http::<Tokio>();
}

#[test]
fn proxy_protocol_http_glommio() {
    if glommio_usable() {
        proxy_protocol_http::<Glommio>();
    }
}

/// A backend that reads one chunk, sends it back and closes.
fn echo_once() -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        // until the client's payload (ending in `close`) is in
        while !got.ends_with(b"close") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s.write_all(&got);
        got
    });
    (addr, h)
}

fn stream_exchange(addr: SocketAddr, send: &[u8]) -> (Vec<u8>, u16) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let port = s.local_addr().expect("local").port();
    s.write_all(send).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (out, port)
}

fn proxy_protocol_stream<R: Runtime>() {
    let (up, echoed) = echo_once();
    let (ret, trusted, on, pp_in) = (free_addr(), free_addr(), free_addr(), free_addr());
    let (up2, echoed2) = echo_once();
    let text = format!(
        "events {{}}
        stream {{
            server {{
                listen {ret} proxy_protocol;
                return \"$proxy_protocol_addr:$proxy_protocol_port $remote_addr $realip_remote_addr\";
            }}
            server {{
                listen {trusted} proxy_protocol;
                set_real_ip_from 127.0.0.1;
                return \"$remote_addr:$remote_port $realip_remote_addr $proxy_protocol_tlv_alpn\";
            }}
            server {{
                listen {on};
                proxy_protocol on;
                proxy_pass {up};
            }}
            server {{
                listen {pp_in} proxy_protocol;
                set_real_ip_from 127.0.0.0/8;
                proxy_protocol on;
                proxy_pass {up2};
            }}
        }}"
    );
    let _p = start::<R>(&text);
    let v1 = b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n";
    assert_eq!(stream_exchange(ret, v1).0, b"192.0.2.1:1234 127.0.0.1 127.0.0.1");
    assert_eq!(stream_exchange(trusted, v1).0, b"192.0.2.1:1234 127.0.0.1 ");
    assert_eq!(
        stream_exchange(trusted, &v2(b"\x01\x00\x02h2")).0,
        b"192.0.2.1:123 127.0.0.1 h2"
    );
    assert_eq!(stream_exchange(ret, b"no header\r\n").0, b"");
    // towards the upstream: nginx's v1 line for the client, then what the client sent
    let (got, port) = stream_exchange(on, b"payload close");
    let line = format!("PROXY TCP4 127.0.0.1 127.0.0.1 {port} {}\r\npayload close", on.port());
    assert_eq!(String::from_utf8_lossy(&got), line);
    assert_eq!(echoed.join().expect("echo"), line.as_bytes());
    // a client's header taken in (realip), its bytes after the header passed on behind corelb's own line
    let sent = [v1.as_slice(), b"early close"].concat();
    let (got, _) = stream_exchange(pp_in, &sent);
    let line = format!("PROXY TCP4 192.0.2.1 127.0.0.1 1234 {}\r\nearly close", pp_in.port());
    assert_eq!(String::from_utf8_lossy(&got), line);
    assert_eq!(echoed2.join().expect("echo"), line.as_bytes());
}

#[test]
fn proxy_protocol_stream_tokio() {
    proxy_protocol_stream::<Tokio>();
}

#[test]
fn proxy_protocol_stream_glommio() {
    if glommio_usable() {
        proxy_protocol_stream::<Glommio>();
    }
}

/// A stream session's log line: the header's addresses, the real client, and nginx's 400 for a broken header.
fn stream_sessions_logged<R: Runtime>() {
    let dir = std::env::temp_dir().join(format!("corelb-realip-log-{}-{}", R::NAME, std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("log dir");
    let log = dir.join("pp.log");
    let listen = free_addr();
    let text = format!(
        "events {{}}
        stream {{
            log_format pp \"$status $proxy_protocol_addr:$proxy_protocol_port $remote_addr $realip_remote_addr\";
            server {{
                listen {listen} proxy_protocol;
                set_real_ip_from 127.0.0.1;
                access_log {log} pp;
                return ok;
            }}
        }}",
        log = log.display()
    );
    let p = start::<R>(&text);
    assert_eq!(
        stream_exchange(listen, b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 5678\r\n").0,
        b"ok"
    );
    assert_eq!(stream_exchange(listen, b"PROXY TCP4 nonsense\r\n").0, b"");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        support::wait_until(Duration::from_secs(5), || read().lines().count() == 2),
        "{}",
        read()
    );
    drop(p);
    let mut lines: Vec<String> = read().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(
        lines,
        ["200 192.0.2.1:1234 192.0.2.1 127.0.0.1", "400 : 127.0.0.1 127.0.0.1"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stream_sessions_logged_tokio() {
    stream_sessions_logged::<Tokio>();
}

#[test]
fn stream_sessions_logged_glommio() {
    if glommio_usable() {
        stream_sessions_logged::<Glommio>();
    }
}

/// The directives' errors, in nginx's words.
#[test]
fn refused_as_nginx_refuses() {
    let conf = |body: &str| format!("events {{}}\nhttp {{\n server {{ listen 127.0.0.1:18391; {body} }}\n}}\n");
    let parse = |body: &str| parse_str(&conf(body), Path::new("/etc/corelb/r.conf")).map_err(|e| e.to_string());
    assert!(parse("set_real_ip_from 10.0.0.0/8; set_real_ip_from ::1; set_real_ip_from unix:;").is_ok());
    assert_eq!(
        parse("set_real_ip_from foo.invalid;").unwrap_err(),
        "[emerg] host not found in set_real_ip_from \"foo.invalid\" in /etc/corelb/r.conf:3"
    );
    assert_eq!(
        parse("real_ip_header X-Real-IP; real_ip_header a;").unwrap_err(),
        "[emerg] \"real_ip_header\" directive is duplicate in /etc/corelb/r.conf:3"
    );
    let warned = parse_str(&conf("set_real_ip_from 10.0.0.1/8;"), Path::new("/etc/corelb/r.conf")).expect("config");
    assert_eq!(
        warned.warnings,
        ["[warn] low address bits of 10.0.0.1/8 are meaningless in /etc/corelb/r.conf:3"]
    );
    let stream = |body: &str| {
        let text = format!("events {{}}\nstream {{\n server {{ listen 127.0.0.1:18392; return x; {body} }}\n}}\n");
        parse_str(&text, Path::new("/etc/corelb/r.conf")).map_err(|e| e.to_string())
    };
    assert!(stream("proxy_protocol on; proxy_protocol_timeout 5s; set_real_ip_from 127.0.0.1;").is_ok());
    assert_eq!(
        stream("proxy_protocol v2;").unwrap_err(),
        "[emerg] \"proxy_protocol v2\" towards upstreams is not supported by corelb in /etc/corelb/r.conf:3"
    );
    assert_eq!(
        stream("real_ip_header X-Real-IP;").unwrap_err(),
        "[emerg] \"real_ip_header\" directive is not allowed here in /etc/corelb/r.conf:3"
    );
}
