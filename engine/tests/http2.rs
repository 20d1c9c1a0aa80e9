//! HTTP/2 to clients end to end, on both runtimes, with the h2 crate's client (over tokio in the test) and raw
//! frames: many concurrent streams over one connection proxied to two backends (each answer the one asked for),
//! a static file gzipped, request bodies with and without `content-length`, `$server_protocol`/`$http2`,
//! HTTP/1.1 next to h2c on one address, ALPN `h2` and the `http/1.1` fallback over TLS; a malformed header
//! (a stream reset with `PROTOCOL_ERROR`), and the attacks' bounds: rapid reset (GOAWAY `ENHANCE_YOUR_CALM`), a
//! CONTINUATION flood, PING and SETTINGS floods (the server stops reading, the shard goes on), and a client that
//! never opens its window (`send_timeout` resets the stream). nginx's own answers, with raw frames: GOAWAY codes
//! for frames of the wrong length or kind, a location's `http2_chunk_size`, RST_STREAM `PROTOCOL_ERROR` when a
//! body's DATA or a header block stops past its timeout, REFUSED_STREAM for a body before the SETTINGS
//! acknowledgement (small preread), GOAWAY with the last stream on a reload, and the frames of an answer after
//! the client's SETTINGS: the acknowledgement after the DATA queued, the new frame size after it, and a piece the
//! window cut short not cutting the frames that follow; and a connection whose writes wait past `send_timeout`
//! closed.

mod support;

use bytes::Bytes;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_io::TokioIo;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::{Conn, Runtime};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Proxy};

fn parse(text: &str) -> corelb_engine::config::model::Config {
    corelb_engine::config::parse_str(text, Path::new("h2.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The addresses of one test's config.
struct Addrs {
    h2c: SocketAddr,
    tls: SocketAddr,
    back_a: SocketAddr,
    back_b: SocketAddr,
    /// h2c with `http2_body_preread_size 10`.
    small: SocketAddr,
    /// h2c with `http2_chunk_size 64k` and a small send buffer.
    framed: SocketAddr,
}

fn config_text(a: &Addrs, echo: SocketAddr, root: &Path, cert: &Path, key: &Path) -> String {
    let (root, cert, key) = (root.display(), cert.display(), key.display());
    format!(
        "events {{}}\nhttp {{\n access_log off;\n\
         upstream two {{ server {}; server {}; }}\n\
         upstream echo {{ server {echo}; }}\n\
         server {{ listen {}; http2 on; http2_max_concurrent_streams 10; send_timeout 1s;\n\
           client_body_timeout 1s; client_header_timeout 1s; root {root};\n\
           gzip on; gzip_types text/plain; gzip_min_length 10;\n\
           location /two/ {{ proxy_pass http://two/; }}\n\
           location /echo {{ proxy_pass http://echo; }}\n\
           location = /chunk1 {{ http2_chunk_size 1; return 200 \"body\"; }}\n\
           location = /8m.bin {{ send_timeout 10s; }}\n\
           location = /vars {{ return 200 \"$server_protocol|$http2|$request|$host|$scheme\\n\"; }} }}\n\
         server {{ listen {} ssl; http2 on; ssl_certificate {cert}; ssl_certificate_key {key};\n\
           location / {{ return 200 \"tls $server_protocol|$http2|$scheme\\n\"; }} }}\n\
         server {{ listen {}; location / {{ return 200 \"a $uri\"; }} }}\n\
         server {{ listen {}; location / {{ return 200 \"b $uri\"; }} }}\n\
         server {{ listen {}; http2 on; http2_body_preread_size 10; location / {{ return 200 \"ok\"; }} }}\n\
         server {{ listen {} sndbuf=16k; http2 on; http2_chunk_size 64k; root {root}; }}\n}}\n",
        a.back_a, a.back_b, a.h2c, a.tls, a.back_a, a.back_b, a.small, a.framed
    )
}

/// Runs `f` on a current-thread tokio runtime with a `LocalSet` (the client's connections are spawned there).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}

type Sender = h2::client::SendRequest<Bytes>;

/// An h2 client over `io`, its connection driven by a local task.
async fn h2_client<T>(io: T, builder: h2::client::Builder) -> Sender
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let (send, conn) = builder.handshake::<_, Bytes>(io).await.expect("h2 handshake");
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    send
}

async fn h2c(addr: SocketAddr) -> Sender {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    h2_client(tcp, h2::client::Builder::new()).await
}

/// An answer: status, headers, body.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

async fn request(send: &Sender, req: http::Request<()>, body: Option<&[u8]>) -> Result<Answer, h2::Error> {
    let mut send = send.clone().ready().await?;
    let (response, mut stream) = send.send_request(req, body.is_none())?;
    if let Some(b) = body {
        // within the window the server gives at first (64k), then as it releases it
        let mut left = Bytes::copy_from_slice(b);
        while !left.is_empty() {
            stream.reserve_capacity(left.len());
            let n = std::future::poll_fn(|cx| stream.poll_capacity(cx))
                .await
                .expect("capacity")?;
            let part = left.split_to(n.min(left.len()));
            stream.send_data(part, left.is_empty())?;
        }
    }
    let response = response.await?;
    let (parts, mut recv) = response.into_parts();
    let mut body = Vec::new();
    while let Some(d) = recv.data().await {
        let d = d?;
        body.extend_from_slice(&d);
        let _ = recv.flow_control().release_capacity(d.len());
    }
    Ok(Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    })
}

fn get(path: &str) -> http::Request<()> {
    http::Request::get(format!("http://h2.test{path}"))
        .body(())
        .expect("request")
}

/// A self-signed ECDSA certificate for `localhost` in `dir`.
fn write_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let (c, k) = (dir.join("h2.crt"), dir.join("h2.key"));
    std::fs::write(&c, cert.pem()).expect("write certificate");
    std::fs::write(&k, key.serialize_pem()).expect("write key");
    (c, k)
}

#[derive(Debug)]
struct AnyCert;

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _e: &rustls::pki_types::CertificateDer<'_>,
        _i: &[rustls::pki_types::CertificateDer<'_>],
        _n: &rustls::pki_types::ServerName<'_>,
        _o: &[u8],
        _t: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(m, c, d, &algs)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(m, c, d, &algs)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        vec![rustls::SignatureScheme::ECDSA_NISTP256_SHA256]
    }
}

fn client_tls(alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

/// A TLS connection (through corelb's own tokio stream) offering `alpn`; the protocol the server chose.
async fn tls_conn(addr: SocketAddr, alpn: &[&[u8]]) -> (<Tokio as Runtime>::Conn, Option<Vec<u8>>) {
    let tcp = Tokio::connect(addr, Duration::from_secs(5)).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let tls = tcp.connect_tls(client_tls(alpn), name).await.expect("handshake");
    let chosen = tls.upstream_tls().and_then(|s| s.alpn_protocol()).map(<[u8]>::to_vec);
    (tls, chosen)
}

fn h2_sequence<R: Runtime>(tag: &str) {
    let dir = std::env::temp_dir().join(format!("corelb-h2-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    let text = "all work and no play makes jack a dull boy\n".repeat(500);
    std::fs::write(dir.join("big.txt"), &text).expect("file");
    std::fs::write(dir.join("8m.bin"), vec![b'x'; 8_000_000]).expect("file");
    std::fs::write(dir.join("64k.bin"), vec![b'x'; 65_616]).expect("file");
    let (cert, key) = write_cert(&dir);
    let echo = Backend::start("echo", Mode::Echo);
    let a = Addrs {
        h2c: free_addr(),
        tls: free_addr(),
        back_a: free_addr(),
        back_b: free_addr(),
        small: free_addr(),
        framed: free_addr(),
    };
    let proxy = Proxy::start::<R>(parse(&config_text(&a, echo.addr, &dir, &cert, &key)), 1);
    block_on(async {
        let send = h2c(a.h2c).await;

        // the variables of a stream
        let v = request(&send, get("/vars"), None).await.expect("vars");
        assert_eq!(v.status, 200);
        assert_eq!(
            String::from_utf8_lossy(&v.body),
            "HTTP/2.0|h2c|GET /vars HTTP/2.0|h2.test|http\n"
        );

        // many concurrent streams over one connection, proxied to both backends in turn, each answer its own
        let asks: Vec<_> = (0..60)
            .map(|i| {
                let send = send.clone();
                tokio::task::spawn_local(async move {
                    let a = request(&send, get(&format!("/two/s{i}")), None).await.expect("stream");
                    (i, a.status, String::from_utf8_lossy(&a.body).into_owned())
                })
            })
            .collect();
        let (mut by_a, mut by_b) = (0, 0);
        for ask in asks {
            let (i, status, body) = ask.await.expect("task");
            assert_eq!(status, 200);
            match body.split_once(' ') {
                Some(("a", uri)) => {
                    by_a += 1;
                    assert_eq!(uri, format!("/s{i}"));
                }
                Some(("b", uri)) => {
                    by_b += 1;
                    assert_eq!(uri, format!("/s{i}"));
                }
                _ => panic!("{body}"),
            }
        }
        assert_eq!((by_a, by_b), (30, 30), "round robin over one connection's streams");

        // a static file, gzipped for a client that takes it
        let mut req = get("/big.txt");
        req.headers_mut()
            .insert("accept-encoding", "gzip".parse().expect("value"));
        let f = request(&send, req, None).await.expect("file");
        assert_eq!(f.status, 200);
        assert_eq!(
            f.headers.get("content-encoding").map(|v| v.as_bytes()),
            Some(&b"gzip"[..])
        );
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&f.body[..])
            .read_to_string(&mut plain)
            .expect("gunzip");
        assert_eq!(plain, text);
        let f = request(&send, get("/big.txt"), None).await.expect("file");
        assert_eq!(f.body, text.as_bytes());

        // request bodies: with content-length, without one (short: sent on with its length; long: as chunks)
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for (len, with_length) in [(10, true), (10, false), (200_000, true), (200_000, false)] {
            let mut req = http::Request::post("http://h2.test/echo").body(()).expect("request");
            if with_length {
                req.headers_mut()
                    .insert("content-length", len.to_string().parse().expect("value"));
            }
            let e = request(&send, req, Some(&body[..len])).await;
            let e = e.unwrap_or_else(|err| panic!("upload {len} {with_length}: {err}"));
            assert_eq!(e.status, 200, "upload {len} {with_length}");
            assert_eq!(e.body, &body[..len], "upload {len} {with_length}");
        }

        // ALPN: h2 when offered, http/1.1 otherwise, over one TLS address
        let (tls, chosen) = tls_conn(a.tls, &[b"h2", b"http/1.1"]).await;
        assert_eq!(chosen.as_deref(), Some(&b"h2"[..]));
        let s = h2_client(TokioIo::new(tls, Vec::new()), h2::client::Builder::new()).await;
        let t = request(
            &s,
            http::Request::get("https://localhost/").body(()).expect("req"),
            None,
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&t.expect("tls h2").body),
            "tls HTTP/2.0|h2|https\n"
        );
        let (mut tls, chosen) = tls_conn(a.tls, &[b"http/1.1"]).await;
        assert_eq!(chosen.as_deref(), Some(&b"http/1.1"[..]));
        use futures_lite::{AsyncReadExt, AsyncWriteExt};
        tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut got = Vec::new();
        let _ = tls.read_to_end(&mut got).await;
        let got = String::from_utf8_lossy(&got);
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with("tls HTTP/1.1||https\n"),
            "{got}"
        );

        // a client that never opens its window: the answer's wait for it ends at send_timeout (1s), the stream reset
        let mut b = h2::client::Builder::new();
        b.initial_window_size(0);
        let tcp = tokio::net::TcpStream::connect(a.h2c).await.expect("connect");
        let stalled = h2_client(tcp, b).await;
        let mut s = stalled.ready().await.expect("ready");
        let (response, _) = s.send_request(get("/big.txt"), true).expect("send");
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .expect("headers")
            .expect("ok");
        let mut recv = response.into_body();
        let data = tokio::time::timeout(Duration::from_secs(10), recv.data())
            .await
            .expect("not reset in time");
        assert!(matches!(data, Some(Err(ref e)) if e.is_reset()), "{data:?}");
    });

    // HTTP/1.1 next to h2c on the same address
    let mut plain = TcpStream::connect(a.h2c).expect("connect");
    plain
        .write_all(b"GET /vars HTTP/1.1\r\nHost: one\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut got = String::new();
    plain.read_to_string(&mut got).expect("read");
    assert!(got.ends_with("HTTP/1.1||GET /vars HTTP/1.1|one|http\n"), "{got}");

    attacks(a.h2c);
    early_body(a.small);
    settings_after_queued_data(a.framed);
    window_cut_pieces(a.framed);
    stalled_writes_close(a.h2c, &proxy);
    reload_goaway(a.h2c, &proxy, &config_text(&a, echo.addr, &dir, &cert, &key));
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One frame's bytes.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 1;
const END_HEADERS: u8 = 4;

/// `GET / http` in HPACK's static table (`:method GET`, `:scheme http`, `:path /`), then `:authority h`.
const GET_BLOCK: &[u8] = &[0x82, 0x86, 0x84, 0x01, 0x01, b'h'];

/// A raw connection that has sent the preface and an empty SETTINGS frame.
fn raw(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    s.write_all(&frame(SETTINGS, 0, 0, &[])).expect("settings");
    s
}

/// Reads frames until one of `kind` comes (its flags, stream and payload), or the connection ends (`None`).
fn read_until(s: &mut TcpStream, kind: u8) -> Option<(u8, u32, Vec<u8>)> {
    loop {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).ok()?;
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).ok()?;
        if h[3] == kind {
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            return Some((h[4], stream, payload));
        }
    }
}

/// A literal header field without indexing (HPACK 6.2.2), name and value under 127 bytes.
fn literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
    out
}

/// Whether the server shut `s` (GOAWAY or end of stream) while `writes` frames of `one` were sent; false when it
/// kept taking them all.
fn server_refuses_flood(s: &mut TcpStream, one: &[u8], writes: usize) -> bool {
    s.set_write_timeout(Some(Duration::from_secs(3))).expect("timeout");
    let batch: Vec<u8> = one.repeat(256);
    for _ in 0..writes / 256 {
        if s.write_all(&batch).is_err() {
            // the server stopped reading (its socket buffers full) or closed
            return true;
        }
    }
    false
}

/// Frames nginx answers itself with a connection error, each on a connection of its own: a GOAWAY too short
/// (`FRAME_SIZE_ERROR`), a client's PUSH_PROMISE (`PROTOCOL_ERROR` at its header, its payload never sent), a
/// WINDOW_UPDATE and a PING of the wrong length.
fn frame_errors(addr: SocketAddr) {
    let cases: [(&str, Vec<u8>, u32); 4] = [
        ("short GOAWAY", frame(GOAWAY, 0, 0, &[]), 6),
        ("PUSH_PROMISE", vec![0, 0, 4, 5, 0, 0, 0, 0, 1], 1),
        ("WINDOW_UPDATE of 3", frame(8, 0, 0, &[0, 0, 1]), 6),
        ("PING of 9", frame(PING, 0, 0, &[0; 9]), 6),
    ];
    for (what, bytes, code) in cases {
        let mut s = raw(addr);
        s.write_all(&bytes).expect("frame");
        let (_, stream, payload) = read_until(&mut s, GOAWAY).unwrap_or_else(|| panic!("{what}: no GOAWAY"));
        assert_eq!(stream, 0, "{what}");
        assert_eq!(payload.get(4..8), Some(&code.to_be_bytes()[..]), "{what}");
    }
}

/// A location's own `http2_chunk_size` (1): each byte of the answer a DATA frame of its own, the last one ending
/// the stream.
fn location_chunk_size(addr: SocketAddr) {
    let mut s = raw(addr);
    let mut block = vec![0x82, 0x86, 0x04, 7];
    block.extend_from_slice(b"/chunk1");
    block.extend_from_slice(&[0x01, 0x01, b'h']);
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .expect("headers");
    let mut frames = Vec::new();
    while let Some((flags, stream, payload)) = read_until(&mut s, 0) {
        assert_eq!(stream, 1);
        frames.push((flags, payload));
        if flags & END_STREAM != 0 || frames.len() > 8 {
            break;
        }
    }
    let want: Vec<(u8, Vec<u8>)> = vec![
        (0, b"b".to_vec()),
        (0, b"o".to_vec()),
        (0, b"d".to_vec()),
        (1, b"y".to_vec()),
    ];
    assert_eq!(frames, want);
}

/// Two `host` fields in one header block: nginx's 400 (a client sent a duplicate header line), not a reset.
fn duplicate_host(addr: SocketAddr) {
    let mut s = raw(addr);
    let mut block = vec![0x82, 0x86, 0x84];
    block.extend_from_slice(&literal(b"host", b"one"));
    block.extend_from_slice(&literal(b"host", b"again"));
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .expect("headers");
    let (_, stream, payload) = read_until(&mut s, HEADERS).expect("an answer, not a reset");
    assert_eq!(stream, 1);
    // `:status 400`: HPACK's static entry 12
    assert_eq!(payload.first(), Some(&0x8c), "{payload:?}");
}

/// A body whose DATA frame stops halfway (no `content-length`, so it is read before the request is routed): the
/// stream is reset with `PROTOCOL_ERROR` after `client_body_timeout` (1s), as nginx's.
fn body_timeout(addr: SocketAddr) {
    let mut s = raw(addr);
    let post = [0x83, 0x86, 0x84, 0x01, 0x01, b'h'];
    s.write_all(&frame(HEADERS, END_HEADERS, 1, &post)).expect("headers");
    s.write_all(&frame(0, END_STREAM, 1, b"0123456789")[..13])
        .expect("half a DATA frame");
    let started = std::time::Instant::now();
    let (_, stream, payload) = read_until(&mut s, RST_STREAM).expect("a reset");
    assert_eq!((stream, payload), (1, vec![0, 0, 0, 1]), "PROTOCOL_ERROR on stream 1");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

/// Reads frames until a PING acknowledgement; the (kind, stream) of those before it.
fn frames_before_pong(s: &mut TcpStream) -> Vec<(u8, u32)> {
    let mut seen = Vec::new();
    loop {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).expect("a frame");
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).expect("its payload");
        if h[3] == PING && h[4] & 1 != 0 {
            return seen;
        }
        seen.push((h[3], u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff));
    }
}

/// A HEADERS frame that stops halfway: after `client_header_timeout` (1s) its stream is reset with
/// `PROTOCOL_ERROR` (h2 does not know the stream yet: corelb's own RST_STREAM); when the rest comes the stream is
/// not served, and the connection answers a PING.
fn header_timeout(addr: SocketAddr) {
    let mut s = raw(addr);
    let headers = frame(HEADERS, END_STREAM | END_HEADERS, 1, GET_BLOCK);
    s.write_all(&headers[..12]).expect("half a HEADERS frame");
    let started = std::time::Instant::now();
    let (_, stream, payload) = read_until(&mut s, RST_STREAM).expect("a reset");
    assert_eq!((stream, payload), (1, vec![0, 0, 0, 1]), "PROTOCOL_ERROR on stream 1");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    s.write_all(&headers[12..]).expect("the rest");
    s.write_all(&frame(PING, 0, 0, b"SEE-THIS")).expect("ping");
    let seen = frames_before_pong(&mut s);
    assert!(
        !seen.contains(&(HEADERS, 1)),
        "the timed-out stream was served: {seen:?}"
    );
}

/// A reload: GOAWAY (`NO_ERROR`) naming the last stream taken; that stream's answer goes on once the client opens
/// its window, a stream opened after the GOAWAY is not served.
fn reload_goaway(addr: SocketAddr, proxy: &Proxy, text: &str) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    // SETTINGS_INITIAL_WINDOW_SIZE 0: the answer waits for the window
    s.write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .expect("settings");
    let mut block = vec![0x82, 0x86, 0x04, 8];
    block.extend_from_slice(b"/big.txt");
    block.extend_from_slice(&[0x01, 0x01, b'h']);
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .expect("headers");
    let (_, stream, _) = read_until(&mut s, HEADERS).expect("the answer's head");
    assert_eq!(stream, 1);
    let next = parse(text);
    proxy
        .shared
        .apply(corelb_engine::control::ChangeKind::Reload, move |_| Ok(next))
        .expect("reload");
    let (_, _, payload) = read_until(&mut s, GOAWAY).expect("GOAWAY after the reload");
    assert_eq!(
        payload.get(..8),
        Some(&[0, 0, 0, 1, 0, 0, 0, 0][..]),
        "last stream 1, NO_ERROR"
    );
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 3, GET_BLOCK))
        .expect("headers 3");
    s.write_all(&frame(8, 0, 1, &(1u32 << 20).to_be_bytes()))
        .expect("stream window");
    let mut data = 0;
    loop {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).expect("a frame");
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).expect("its payload");
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        assert!(
            !(h[3] == HEADERS && stream == 3),
            "a stream after the GOAWAY was served"
        );
        if h[3] == 0 && stream == 1 {
            data += len;
            if h[4] & END_STREAM != 0 {
                break;
            }
        }
    }
    assert_eq!(data, "all work and no play makes jack a dull boy\n".len() * 500);
}

/// With `http2_body_preread_size` under the default window, a stream whose body begins before the client
/// acknowledged the server's SETTINGS is refused (RST_STREAM `REFUSED_STREAM`), as nginx's; after the
/// acknowledgement it is served.
fn early_body(addr: SocketAddr) {
    let post = [0x83, 0x86, 0x84, 0x01, 0x01, b'h'];
    let mut s = raw(addr);
    s.write_all(&frame(HEADERS, END_HEADERS, 1, &post)).expect("headers");
    s.write_all(&frame(0, END_STREAM, 1, b"TEST")).expect("data");
    let (_, stream, payload) = read_until(&mut s, RST_STREAM).expect("a reset");
    assert_eq!((stream, payload), (1, vec![0, 0, 0, 7]), "REFUSED_STREAM on stream 1");
    let mut s = raw(addr);
    s.write_all(&frame(SETTINGS, 1, 0, &[])).expect("settings ack");
    s.write_all(&frame(HEADERS, END_HEADERS, 1, &post)).expect("headers");
    s.write_all(&frame(0, END_STREAM, 1, b"TEST")).expect("data");
    let (_, stream, payload) = read_until(&mut s, HEADERS).expect("an answer");
    assert_eq!(
        (stream, payload.first()),
        (1, Some(&0x88)),
        "200 (HPACK's indexed :status 200)"
    );
}

/// `GET PATH` (under 127 bytes) with `:authority h`, as a header block.
fn get_block(path: &[u8]) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path);
    block.extend_from_slice(&[0x01, 0x01, b'h']);
    block
}

/// The bytes waiting in `s`'s receive queue.
fn queued(s: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int to the pointer given, which lives through the call
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) };
    if rc == 0 {
        usize::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

/// The frames on stream 1 and the SETTINGS acknowledgements (stream 0), as (kind, flags, length), until stream 1
/// ends.
fn frames_to_end(s: &mut TcpStream) -> Vec<(u8, u8, usize)> {
    let mut frames = Vec::new();
    loop {
        let mut h = [0u8; 9];
        s.read_exact(&mut h).expect("a frame");
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).expect("its payload");
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if stream == 1 || (h[3] == SETTINGS && h[4] == 1) {
            frames.push((h[3], h[4], len));
        }
        if stream == 1 && h[4] & END_STREAM != 0 {
            return frames;
        }
    }
}

/// The preface, the stream's window opened wide (SETTINGS_INITIAL_WINDOW_SIZE 2^30) and the connection's, then a
/// GET of /8m.bin on stream 1.
fn ask_8m_with_wide_windows(s: &mut TcpStream) {
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    s.write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0x40, 0, 0, 0]))
        .expect("settings");
    s.write_all(&frame(8, 0, 0, &(1u32 << 30).to_be_bytes()))
        .expect("window");
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block(b"/8m.bin")))
        .expect("headers");
}

/// A client's SETTINGS_MAX_FRAME_SIZE (32k) while the answer waits for the socket (the client does not read; h2
/// was given the answer 16k at a time as it wrote frames): the acknowledgement follows the DATA h2 had queued, and the frames after it are cut at
/// the new size (nginx-tests' h2.t `SETTINGS ack after queued DATA`), not a frame of the old size first.
fn settings_after_queued_data(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    // the windows opened wide: the socket holds the answer back
    ask_8m_with_wide_windows(&mut s);
    // the receive queue fills and stops growing (the server's sends wait, h2 queues DATA)
    let mut last = (0, 0);
    for _ in 0..500 {
        let now = queued(&s);
        last = if now > 0 && now == last.0 {
            (now, last.1 + 1)
        } else {
            (now, 0)
        };
        if last.1 == 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(last.1, 5, "the receive queue never filled");
    s.write_all(&frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0x80, 0]))
        .expect("max frame size");
    let frames = frames_to_end(&mut s);
    let data = |f: &&(u8, u8, usize)| f.0 == 0;
    let acks = frames.iter().filter(|f| f.0 == SETTINGS).count();
    assert_eq!(acks, 2, "{frames:?}");
    let ack = frames.iter().rposition(|f| f.0 == SETTINGS).expect("the ack");
    let first = frames[..ack].iter().find(data).map(|f| f.2);
    assert_eq!(first, Some(16_384), "the old size at first: {frames:?}");
    let after: Vec<usize> = frames[ack..].iter().filter(data).map(|f| f.2).collect();
    assert_ne!(
        after.first(),
        Some(&16_384),
        "a frame of the old size after the ack: {after:?}"
    );
    assert_eq!(after.iter().max(), Some(&32_768), "{after:?}");
    let total: usize = frames.iter().filter(data).map(|f| f.2).sum();
    assert_eq!(total, 8_000_000);
}

/// A piece of the answer the window cut short (42 bytes of the first chunk) does not cut the frames after it: once
/// SETTINGS open the window, the rest goes in frames of the new size, the last one short (nginx-tests' h2.t
/// `multiple SETTINGS`).
fn window_cut_pieces(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    s.write_all(&frame(8, 0, 0, &(1u32 << 17).to_be_bytes()))
        .expect("window");
    s.write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 42]))
        .expect("settings");
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block(b"/64k.bin")))
        .expect("headers");
    let (_, stream, payload) = read_until(&mut s, 0).expect("the first DATA");
    assert_eq!((stream, payload.len()), (1, 42));
    let mut opened = vec![0, 4, 0, 2, 0, 0];
    opened.extend_from_slice(&[0, 5, 0, 0, 0x80, 0]);
    s.write_all(&frame(SETTINGS, 0, 0, &opened)).expect("settings");
    let sizes: Vec<usize> = frames_to_end(&mut s).iter().filter(|f| f.0 == 0).map(|f| f.2).collect();
    assert_eq!(sizes, [32_768, 32_768, 38]);
}

/// A client that opens its windows and reads nothing: once the connection's writes have waited `send_timeout`
/// (1s, the server's; the location's, for the stream's own waits, is longer) for the socket, the connection is
/// closed with its stream (nginx's timer on the connection's writes;
/// nginx-tests' h2.t `large response - send timeout`), where before the stream alone was reset and the
/// connection went on.
fn stalled_writes_close(addr: SocketAddr, proxy: &Proxy) {
    let active = || corelb_engine::admin::stub_status::StubCounts::take(&proxy.shared).active;
    assert!(
        support::wait_until(Duration::from_secs(5), || active() == 0),
        "connections of earlier steps still open"
    );
    // a small receive buffer: the kernel's buffers cannot take the whole answer
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(16 * 1024).expect("rcvbuf");
    sock.connect(&addr.into()).expect("connect");
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    ask_8m_with_wide_windows(&mut s);
    assert!(support::wait_until(Duration::from_secs(5), || active() == 1));
    assert!(
        support::wait_until(Duration::from_secs(10), || active() == 0),
        "the stalled connection stays open"
    );
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.len() < 8_000_000, "{} bytes", got.len());
}

fn attacks(addr: SocketAddr) {
    frame_errors(addr);
    body_timeout(addr);
    header_timeout(addr);
    location_chunk_size(addr);
    duplicate_host(addr);
    // a malformed header (`connection`): the stream is reset with PROTOCOL_ERROR, the connection goes on
    let mut s = raw(addr);
    let mut block = GET_BLOCK.to_vec();
    block.extend(literal(b"connection", b"close"));
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .expect("headers");
    let (_, stream, payload) = read_until(&mut s, RST_STREAM).expect("a reset");
    assert_eq!((stream, payload), (1, vec![0, 0, 0, 1]), "PROTOCOL_ERROR on stream 1");

    // rapid reset: streams opened and cancelled at once, past the bound: GOAWAY with ENHANCE_YOUR_CALM
    let mut s = raw(addr);
    let mut burst = Vec::new();
    for i in 0..2000u32 {
        let id = 2 * i + 1;
        burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, GET_BLOCK));
        burst.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let _ = s.write_all(&burst);
    let (_, _, payload) = read_until(&mut s, GOAWAY).expect("GOAWAY after rapid resets");
    assert_eq!(payload.get(4..8), Some(&[0, 0, 0, 0x0b][..]), "ENHANCE_YOUR_CALM");

    // a CONTINUATION flood: headers that never end are cut once past the header list bound
    let mut s = raw(addr);
    s.write_all(&frame(HEADERS, 0, 1, GET_BLOCK)).expect("headers");
    let filler = literal(b"x-filler", &[b'y'; 100]);
    let cont = frame(CONTINUATION, 0, 1, &filler.repeat(100));
    assert!(
        server_refuses_flood(&mut s, &cont, 100_000),
        "a CONTINUATION flood was taken whole"
    );

    // PING and SETTINGS floods from clients that never read: the server stops reading them
    for one in [frame(PING, 0, 0, &[7; 8]), frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100])] {
        let mut s = raw(addr);
        assert!(
            server_refuses_flood(&mut s, &one, 4_000_000),
            "a flood of {} was taken whole",
            one[3]
        );
    }

    // the shard serves on
    let mut plain = TcpStream::connect(addr).expect("connect");
    plain
        .write_all(b"GET /vars HTTP/1.1\r\nHost: one\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut got = String::new();
    plain.read_to_string(&mut got).expect("read");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
}

/// Frames read until a GOAWAY (its last stream) or the end of the connection: the kinds and streams before it.
fn frames_to_goaway(s: &mut TcpStream) -> (Vec<(u8, u32)>, Option<u32>) {
    let mut seen = Vec::new();
    loop {
        let mut h = [0u8; 9];
        if s.read_exact(&mut h).is_err() {
            return (seen, None);
        }
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return (seen, None);
        }
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        if h[3] == GOAWAY {
            let last = payload
                .get(..4)
                .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) & 0x7fff_ffff);
            return (seen, last);
        }
        seen.push((h[3], stream));
    }
}

/// nginx's checks as each stream opens: `keepalive_requests 2` makes the second stream the last (GOAWAY naming
/// it, its answer complete), and `keepalive_timeout 0` the first.
fn keepalive_limits<R: Runtime>() {
    let (two, zero) = (free_addr(), free_addr());
    let text = format!(
        "events {{}}\nhttp {{\n access_log off;\n\
         server {{ listen {two}; http2 on; keepalive_requests 2; location / {{ return 200 \"ok\"; }} }}\n\
         server {{ listen {zero}; http2 on; keepalive_timeout 0; location / {{ return 200 \"ok\"; }} }}\n}}\n"
    );
    let _proxy = Proxy::start::<R>(parse(&text), 1);
    let mut s = raw(two);
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, GET_BLOCK))
        .expect("headers");
    let (flags, stream, _) = read_until(&mut s, 0).expect("the first answer");
    assert_eq!((flags & END_STREAM, stream), (END_STREAM, 1));
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 3, GET_BLOCK))
        .expect("headers");
    let (seen, last) = frames_to_goaway(&mut s);
    assert_eq!(last, Some(3), "keepalive_requests 2: {seen:?}");
    let (more, _) = frames_to_goaway(&mut s);
    let all: Vec<_> = seen.iter().chain(more.iter()).copied().collect();
    assert!(all.contains(&(0, 3)), "the last stream is answered: {all:?}");

    let mut s = raw(zero);
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, GET_BLOCK))
        .expect("headers");
    let (seen, last) = frames_to_goaway(&mut s);
    assert_eq!(last, Some(1), "keepalive_timeout 0: {seen:?}");
    let (more, _) = frames_to_goaway(&mut s);
    let all: Vec<_> = seen.iter().chain(more.iter()).copied().collect();
    assert!(
        all.contains(&(HEADERS, 1)) && all.contains(&(0, 1)),
        "the stream is answered: {all:?}"
    );
}

/// An answer sits in the server's socket buffer while the client reads nothing, a reload closes the idle
/// connection, then the client sends a PING: the server's close lingers (it reads and drops the PING), so no TCP
/// reset cuts the answer the client has not read yet (h2_keepalive.t's `graceful shutdown in idle`).
fn lingering_close<R: Runtime>(tag: &str) {
    let dir = std::env::temp_dir().join(format!("corelb-h2-linger-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("test dir");
    std::fs::write(dir.join("big.html"), vec![b'x'; 400_000]).expect("file");
    let big = free_addr();
    let text = format!(
        "events {{}}\nhttp {{\n access_log off;\n\
         server {{ listen {big} sndbuf=1m; http2 on; root {}; }}\n}}\n",
        dir.display()
    );
    let proxy = Proxy::start::<R>(parse(&text), 1);
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(64 * 1024).expect("rcvbuf");
    sock.connect(&big.into()).expect("connect");
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    // the stream's window 1 MiB, the connection's 2 MiB
    s.write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0x10, 0, 0]))
        .expect("settings");
    s.write_all(&frame(8, 0, 0, &[0, 0x1f, 0, 0])).expect("window");
    let mut block = vec![0x82, 0x86, 0x04, 9];
    block.extend_from_slice(b"/big.html");
    block.extend_from_slice(&[0x01, 0x01, b'h']);
    s.write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
        .expect("headers");
    std::thread::sleep(Duration::from_millis(300));
    let next = parse(&text);
    proxy
        .shared
        .apply(corelb_engine::control::ChangeKind::Reload, move |_| Ok(next))
        .expect("reload");
    std::thread::sleep(Duration::from_millis(300));
    s.write_all(&frame(PING, 0, 0, b"SEE-THIS")).expect("ping");
    let mut data = 0usize;
    loop {
        let mut h = [0u8; 9];
        if s.read_exact(&mut h).is_err() {
            break;
        }
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            break;
        }
        if h[3] == 0 {
            data += len;
            if h[4] & END_STREAM != 0 {
                break;
            }
        }
    }
    assert_eq!(data, 400_000, "{tag}: the whole answer");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http2_keepalive_limits() {
    keepalive_limits::<Tokio>();
    lingering_close::<Tokio>("tokio");
    if glommio_usable() {
        keepalive_limits::<Glommio>();
        lingering_close::<Glommio>("glommio");
    }
}

#[test]
fn http2_tokio() {
    h2_sequence::<Tokio>("tokio");
}

#[test]
fn http2_glommio() {
    if glommio_usable() {
        h2_sequence::<Glommio>("glommio");
    }
}

#[test]
fn http2_config() {
    let parse_err = |t: &str| {
        corelb_engine::config::parse_str(t, Path::new("h2.conf"))
            .unwrap_err()
            .to_string()
    };
    let ok = "events {}\nhttp { http2 on; http2_max_concurrent_streams 4; http2_chunk_size 4k;\n\
              http2_recv_buffer_size 64k; http2_body_preread_size 0;\n\
              server { listen 127.0.0.1:1 http2; location / { http2_chunk_size 1k; return 204; } } }\n";
    let c = parse(ok);
    let s = &c.http.as_ref().expect("http").servers[0];
    assert!(s.http2.on && s.listens[0].http2);
    assert_eq!((s.http2.max_concurrent_streams, s.http2.chunk_size), (4, 4096));
    assert_eq!(
        parse_err("events {}\nhttp { server { location / { http2 on; } } }\n"),
        "[emerg] \"http2\" directive is not allowed here in h2.conf:2"
    );
    assert_eq!(
        parse_err("events {}\nhttp { http2_chunk_size 0; }\n"),
        "[emerg] the http2 chunk size cannot be zero in h2.conf:2"
    );
    assert_eq!(
        parse_err("events {}\nhttp { server { http2_recv_buffer_size 1m; } }\n"),
        "[emerg] \"http2_recv_buffer_size\" directive is not allowed here in h2.conf:2"
    );
}
