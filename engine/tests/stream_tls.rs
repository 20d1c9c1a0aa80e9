//! TLS in stream, end to end on both runtimes with rustls clients and backends on loopback: `listen ... ssl`
//! (the variables of the handshake, a resumed session keeping its `$ssl_session_id`, a proxied session read
//! through the TLS session), `ssl_verify_client on` (a certificate signed by the CA passes, none ends the
//! session), `proxy_ssl on` with verification off and on (a trusted certificate and its name pass, another
//! certificate ends the session before any byte reaches that backend), and `ssl_preread` routing a real
//! handshake by its SNI to one of two TLS backends through a stream `map`, with a first byte that is not TLS and
//! a truncated hello; and virtual servers (`server_name`) picked by a handshake's or a preread hello's SNI.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::tls::{self, Issued, LineBackend, TlsClient};
use support::{free_addr, glommio_usable, Proxy};

/// A plain backend: each line is answered with `echo LINE`.
fn echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                let mut out = tcp.try_clone().expect("clone");
                let mut reader = BufReader::new(tcp);
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(1..)) {
                    if out.write_all(format!("echo {line}").as_bytes()).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    addr
}

/// The test's files: the proxy's certificate, a CA and a client certificate it signed, the backends' own
/// certificate and a stranger's.
struct Files {
    dir: PathBuf,
    proxy: Issued,
    ca: Issued,
    client: Issued,
    own: Issued,
    stranger: Issued,
    a: Issued,
    b: Issued,
}

fn files(tag: &str) -> Files {
    let dir = tls::test_dir(&format!("stream-tls-{tag}"));
    let ca = tls::ca(&dir, "ca", "Test CA");
    Files {
        proxy: tls::self_signed(&dir, "proxy", tls::params(&["proxy.test"], "proxy.test")),
        client: tls::signed(&dir, "client", tls::params(&["client.test"], "client.test"), &ca),
        own: tls::self_signed(&dir, "own", tls::params(&["backend.test"], "backend.test")),
        stranger: tls::self_signed(&dir, "stranger", tls::params(&["backend.test"], "stranger")),
        a: tls::self_signed(&dir, "a", tls::params(&["a.test"], "a.test")),
        b: tls::self_signed(&dir, "b", tls::params(&["b.test"], "b.test")),
        ca,
        dir,
    }
}

/// Where the proxy listens.
struct Ports {
    vars: SocketAddr,
    echo: SocketAddr,
    mutual: SocketAddr,
    any: SocketAddr,
    verified: SocketAddr,
    untrusted: SocketAddr,
    route: SocketAddr,
    peek: SocketAddr,
    /// Two servers on one `ssl` address, and two on a preread one (`server_name`).
    named: SocketAddr,
    named_preread: SocketAddr,
}

/// The backends: a plain echo, the TLS line backends with the trusted and the stranger's certificate, and the
/// two that `ssl_preread` routes to.
struct Backends {
    echo: SocketAddr,
    own: LineBackend,
    stranger: LineBackend,
    a: LineBackend,
    b: LineBackend,
}

fn config_text(p: &Ports, b: &Backends, f: &Files) -> String {
    let path = |i: &Issued| i.file.display().to_string();
    format!(
        "events {{}}\nstream {{\n\
         ssl_certificate {};\n ssl_certificate_key {};\n ssl_session_cache shared:S:1m;\n\
         map $ssl_preread_server_name $by_sni {{ a.test {a}; b.test {b}; default {a}; }}\n\
         server {{ listen {vars} ssl; \
           return \"$ssl_protocol|$ssl_server_name|$ssl_session_reused|$ssl_session_id|$ssl_client_verify\"; }}\n\
         server {{ listen {echo_port} ssl; proxy_pass {echo}; }}\n\
         server {{ listen {mutual} ssl; ssl_verify_client on; ssl_client_certificate {}; \
           return \"$ssl_client_verify|$ssl_client_s_dn\"; }}\n\
         server {{ listen {any}; proxy_pass {own}; proxy_ssl on; }}\n\
         server {{ listen {verified}; proxy_pass {own}; proxy_ssl on; proxy_ssl_verify on; \
           proxy_ssl_trusted_certificate {}; proxy_ssl_name backend.test; proxy_ssl_server_name on; }}\n\
         server {{ listen {untrusted}; proxy_pass {stranger}; proxy_ssl on; proxy_ssl_verify on; \
           proxy_ssl_trusted_certificate {}; proxy_ssl_name backend.test; }}\n\
         server {{ listen {route}; ssl_preread on; proxy_pass $by_sni; }}\n\
         server {{ listen {peek}; ssl_preread on; preread_timeout 1s; \
           return \"[$ssl_preread_server_name|$ssl_preread_protocol]\"; }}\n\
         server {{ listen {named} ssl; server_name one.test; return \"one $ssl_server_name\"; }}\n\
         server {{ listen {named}; server_name two.test *.two.test; ssl_certificate {}; ssl_certificate_key {}; \
           return \"two $ssl_server_name\"; }}\n\
         server {{ listen {named_preread}; server_name one.test; ssl_preread on; return \"p-one\"; }}\n\
         server {{ listen {named_preread}; server_name two.test; return \"p-two\"; }}\n\
         }}\n",
        path(&f.proxy),
        f.proxy.key_file.display(),
        path(&f.ca),
        path(&f.own),
        path(&f.own),
        path(&f.a),
        f.a.key_file.display(),
        a = b.a.addr,
        b = b.b.addr,
        vars = p.vars,
        echo_port = p.echo,
        echo = b.echo,
        mutual = p.mutual,
        any = p.any,
        own = b.own.addr,
        verified = p.verified,
        untrusted = p.untrusted,
        stranger = b.stranger.addr,
        route = p.route,
        peek = p.peek,
        named = p.named,
        named_preread = p.named_preread,
    )
}

/// Everything the server sends until it closes (a read timeout counts as the end).
fn read_all(s: &mut impl Read) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line sent and one read back over `s`.
fn exchange(s: &mut (impl Read + Write), line: &str) -> String {
    s.write_all(line.as_bytes()).expect("send line");
    s.flush().expect("flush");
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\n") {
        match s.read(&mut byte) {
            Ok(1..) => got.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A plain connection to `addr` with a 5 s read limit.
fn plain(addr: SocketAddr) -> TcpStream {
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    tcp
}

fn stream_tls<R: Runtime>(tag: &str) {
    let f = files(tag);
    let b = Backends {
        echo: echo_backend(),
        own: LineBackend::start("own", &f.own),
        stranger: LineBackend::start("stranger", &f.stranger),
        a: LineBackend::start("A", &f.a),
        b: LineBackend::start("B", &f.b),
    };
    let p = Ports {
        vars: free_addr(),
        echo: free_addr(),
        mutual: free_addr(),
        any: free_addr(),
        verified: free_addr(),
        untrusted: free_addr(),
        route: free_addr(),
        peek: free_addr(),
        named: free_addr(),
        named_preread: free_addr(),
    };
    let text = config_text(&p, &b, &f);
    let config =
        corelb_engine::config::parse_str(&text, Path::new("stream_tls.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);

    // termination: the handshake's variables; the proxy's certificate was shown
    let client = TlsClient::new(None);
    let first = read_all(&mut client.connect(p.vars, "proxy.test").expect("handshake"));
    assert_eq!(client.last_cert(), f.proxy.der().to_vec());
    let fields: Vec<&str> = first.split('|').collect();
    assert_eq!(fields.len(), 5, "{first}");
    assert_eq!(fields[0], "TLSv1.3");
    assert_eq!(fields[1], "proxy.test");
    assert_eq!(fields[2], ".");
    assert!(
        fields[3].len() == 64 && fields[3].bytes().all(|c| c.is_ascii_hexdigit()),
        "{first}"
    );
    assert_eq!(fields[4], "NONE");
    // the same client resumes its session: `r`, and the session keeps its id
    let again = read_all(&mut client.connect(p.vars, "proxy.test").expect("resumed handshake"));
    assert_eq!(again, format!("TLSv1.3|proxy.test|r|{}|NONE", fields[3]));
    // a proxied session reads and writes through the TLS session
    let mut s = client.connect(p.echo, "proxy.test").expect("handshake");
    assert_eq!(exchange(&mut s, "ping\n"), "echo ping\n");
    assert_eq!(exchange(&mut s, "pong\n"), "echo pong\n");
    drop(s);
    // plain bytes on a TLS port: the handshake fails, the session ends without an answer
    let mut tcp = plain(p.echo);
    tcp.write_all(b"ping\n").expect("send");
    assert_eq!(read_all(&mut tcp), "");

    // client certificates: one signed by the CA is verified; without one the session ends
    let signed = TlsClient::new(Some(&f.client));
    let got = read_all(&mut signed.connect(p.mutual, "proxy.test").expect("handshake"));
    assert_eq!(got, "SUCCESS|CN=client.test");
    let got = client.connect(p.mutual, "proxy.test").map(|mut s| read_all(&mut s));
    assert!(got.as_deref().unwrap_or_default().is_empty(), "{got:?}");

    // proxy_ssl: verification off takes any certificate, no SNI for an address
    assert_eq!(exchange(&mut plain(p.any), "one\n"), "own - one\n");
    // on: the trusted certificate and its name, sent in SNI
    assert_eq!(exchange(&mut plain(p.verified), "two\n"), "own backend.test two\n");
    // on, a certificate not trusted: the session ends, the backend's handshake never finishes
    assert_eq!(exchange(&mut plain(p.untrusted), "three\n"), "");
    assert_eq!(b.stranger.handshakes(), 0);

    // ssl_preread: the hello's SNI picks the backend through the map; the handshake, replayed, completes there
    let route = TlsClient::new(None);
    let mut s = route.connect(p.route, "b.test").expect("handshake through preread");
    assert_eq!(route.last_cert(), f.b.der().to_vec());
    assert_eq!(exchange(&mut s, "hi\n"), "B b.test hi\n");
    let mut s = route.connect(p.route, "a.test").expect("handshake through preread");
    assert_eq!(route.last_cert(), f.a.der().to_vec());
    assert_eq!(exchange(&mut s, "hi\n"), "A a.test hi\n");
    assert_eq!((b.a.handshakes(), b.b.handshakes()), (1, 1));
    // what the variables read: a hello's name and version
    let mut raw = plain(p.peek);
    let hello = client_hello("peek.test");
    raw.write_all(&hello).expect("send hello");
    assert_eq!(read_all(&mut raw), "[peek.test|TLSv1.3]");
    // a first byte that is not TLS: declined, the variables are empty and the session goes on
    let mut raw = plain(p.peek);
    raw.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("send");
    assert_eq!(read_all(&mut raw), "[|]");
    // a truncated hello, then the client's end: the session ends with nothing sent (nginx's status 200)
    let mut raw = plain(p.peek);
    raw.write_all(&hello[..hello.len() / 2]).expect("send half");
    raw.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert_eq!(read_all(&mut raw), "");
    // a truncated hello that stays: `preread_timeout` ends the session
    let mut raw = plain(p.peek);
    raw.write_all(&hello[..10]).expect("send some");
    assert_eq!(read_all(&mut raw), "");

    // virtual servers (nginx 1.25.5+): the handshake's SNI picks the server and its certificate; no name or an
    // unknown one: the default server
    let named = TlsClient::new(None);
    let got = read_all(&mut named.connect(p.named, "x.two.test").expect("handshake"));
    assert_eq!(
        (got.as_str(), named.last_cert()),
        ("two x.two.test", f.a.der().to_vec())
    );
    let got = read_all(&mut named.connect(p.named, "other.test").expect("handshake"));
    assert_eq!(
        (got.as_str(), named.last_cert()),
        ("one other.test", f.proxy.der().to_vec())
    );
    // and so does a preread hello's
    let mut raw = plain(p.named_preread);
    raw.write_all(&client_hello("two.test")).expect("send hello");
    assert_eq!(read_all(&mut raw), "p-two");
    let mut raw = plain(p.named_preread);
    raw.write_all(&client_hello("three.test")).expect("send hello");
    assert_eq!(read_all(&mut raw), "p-one");

    drop(proxy);
    let _ = std::fs::remove_dir_all(&f.dir);
}

/// The first flight of a real rustls client naming `sni`.
fn client_hello(sni: &str) -> Vec<u8> {
    let client = TlsClient::new(None);
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).expect("name");
    let mut conn = rustls::ClientConnection::new(client.config, name).expect("client");
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).expect("hello bytes");
    }
    out
}

#[test]
fn stream_tls_tokio() {
    stream_tls::<Tokio>("tokio");
}

#[test]
fn stream_tls_glommio() {
    if glommio_usable() {
        stream_tls::<Glommio>("glommio");
    }
}

fn config_error(text: &str) -> String {
    corelb_engine::config::parse_str(text, Path::new("/t/p.conf"))
        .expect_err("config refused")
        .to_string()
}

#[test]
fn stream_ssl_config_errors() {
    let srv = |body: &str| format!("events {{}}\nstream {{\nserver {{\n{body}\n}}\n}}\n");
    assert_eq!(
        config_error(&srv("listen 127.0.0.1:1 ssl;\nproxy_pass 127.0.0.1:2;")),
        "[emerg] no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in /t/p.conf:3"
    );
    assert_eq!(
        config_error(&srv("listen 127.0.0.1:1 ssl proxy_protocol;\nproxy_pass 127.0.0.1:2;")),
        "[emerg] \"listen ... ssl proxy_protocol\" in stream is not supported by corelb in /t/p.conf:4"
    );
    assert_eq!(
        config_error(&srv(
            "listen 127.0.0.1:1;\nproxy_pass 127.0.0.1:2;\nproxy_ssl_conf_command Options x;"
        )),
        "[emerg] \"proxy_ssl_conf_command\" directive is not supported by corelb in /t/p.conf:6"
    );
    assert_eq!(
        config_error(&srv(
            "listen 127.0.0.1:1;\nproxy_pass 127.0.0.1:2;\nproxy_ssl on;\nproxy_ssl_verify on;"
        )),
        "[emerg] no proxy_ssl_trusted_certificate for proxy_ssl_verify in /t/p.conf:3"
    );
    assert_eq!(
        config_error(&srv("listen 127.0.0.1:1;\nproxy_pass $remote_addr;\nproxy_ssl on;")),
        "[emerg] \"proxy_ssl\" with \"proxy_pass\" with variables and no \"proxy_ssl_name\" is not supported by \
         corelb in /t/p.conf:3"
    );
    assert_eq!(
        config_error(&srv("listen 127.0.0.1:1;\nssl_alpn h2;\nssl_alpn h2;\nreturn x;")),
        "[emerg] \"ssl_alpn\" directive is duplicate in /t/p.conf:6"
    );
}
