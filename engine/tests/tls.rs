//! TLS termination end to end, on both runtimes, with a rustls client: SNI picks the server (exact, wildcard,
//! none: the default) and its certificate, RSA or ECDSA by what the client offers; the `$ssl_*` variables;
//! session resumption (tickets and the session cache, and neither when both are off); a reload with a rotated
//! certificate (new connections get it, an open one goes on); plain HTTP to the TLS port (nginx's 400 page);
//! garbage, truncated and slow handshakes cut without disturbing the shard; `ssl_reject_handshake`'s
//! `unrecognized_name`; `$ssl_session_id`, `$ssl_ciphers` and `ssl_session_timeout`; and the config errors of `-t`.

mod support;

use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{free_addr, glommio_usable, Proxy};

/// The RSA key the RSA certificates are made with (`tools/make_test_rsa_key.sh`).
const RSA_KEY: &str = include_str!("tls/rsa-2048.key");

/// A certificate and key written into a test directory.
struct Pair {
    cert: PathBuf,
    key: PathBuf,
    der: Vec<u8>,
}

fn write_pair(dir: &Path, name: &str, names: &[&str], key: &rcgen::KeyPair) -> Pair {
    let params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .expect("certificate params");
    let cert = params.self_signed(key).expect("self-signed certificate");
    let (cert_path, key_path) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    std::fs::write(&cert_path, cert.pem()).expect("write certificate");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    Pair {
        cert: cert_path,
        key: key_path,
        der: cert.der().to_vec(),
    }
}

fn ecdsa() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ECDSA key")
}

fn rsa() -> rcgen::KeyPair {
    rcgen::KeyPair::from_pem(RSA_KEY).expect("RSA key")
}

/// The certificates of one test: `a.test` has an RSA and an ECDSA pair, `*.b.test` one ECDSA pair.
struct Certs {
    dir: PathBuf,
    a_rsa: Pair,
    a_ec: Pair,
    b: Pair,
}

fn certs(tag: &str) -> Certs {
    let dir = std::env::temp_dir().join(format!("corelb-tls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    Certs {
        a_rsa: write_pair(&dir, "a-rsa", &["a.test"], &rsa()),
        a_ec: write_pair(&dir, "a-ec", &["a.test"], &ecdsa()),
        b: write_pair(&dir, "b", &["*.b.test"], &ecdsa()),
        dir,
    }
}

const VARS: &str = "$scheme|$https|$ssl_protocol|$ssl_cipher|$ssl_server_name|$ssl_session_reused";

fn config_text(tls: SocketAddr, quiet: SocketAddr, c: &Certs) -> String {
    let p = |p: &Path| p.display().to_string();
    format!(
        "events {{}}\nhttp {{\n access_log off;\n client_header_timeout 1s;\n ssl_session_cache shared:SSL:1m;\n\
         server {{ listen {tls} ssl; server_name a.test;\n\
           ssl_certificate {}; ssl_certificate_key {};\n ssl_certificate {}; ssl_certificate_key {};\n\
           return 200 \"a {VARS}\\n\"; }}\n\
         server {{ listen {tls} ssl; server_name *.b.test;\n ssl_certificate {}; ssl_certificate_key {};\n\
           return 200 \"b $ssl_server_name\\n\"; }}\n\
         server {{ listen {tls}; server_name reject.test; ssl_reject_handshake on; }}\n\
         server {{ listen {quiet} ssl; ssl_certificate {}; ssl_certificate_key {};\n\
           ssl_session_cache off; ssl_session_tickets off; return 200 \"quiet $ssl_session_reused\\n\"; }}\n}}\n",
        p(&c.a_rsa.cert),
        p(&c.a_rsa.key),
        p(&c.a_ec.cert),
        p(&c.a_ec.key),
        p(&c.b.cert),
        p(&c.b.key),
        p(&c.a_ec.cert),
        p(&c.a_ec.key),
    )
}

fn parse(text: &str) -> corelb_engine::config::model::Config {
    corelb_engine::config::parse_str(text, Path::new("tls.conf")).unwrap_or_else(|e| panic!("{e}"))
}

/// A verifier that takes any certificate (recording the one presented) and checks the handshake signatures,
/// offering only `schemes`.
#[derive(Debug)]
struct Recorder {
    seen: Mutex<Vec<Vec<u8>>>,
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.seen.lock().expect("seen").push(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = ring::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = ring::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

const ECDSA_ONLY: &[SignatureScheme] = &[SignatureScheme::ECDSA_NISTP256_SHA256];
const RSA_ONLY: &[SignatureScheme] = &[SignatureScheme::RSA_PSS_SHA256, SignatureScheme::RSA_PKCS1_SHA256];
const ALL: &[SignatureScheme] = &[
    SignatureScheme::ECDSA_NISTP256_SHA256,
    SignatureScheme::RSA_PSS_SHA256,
    SignatureScheme::RSA_PKCS1_SHA256,
];

/// A client config: its versions and suites, the schemes it offers; with the recorder of what it was shown.
struct Client {
    config: Arc<ClientConfig>,
    recorder: Arc<Recorder>,
}

impl Client {
    fn new(schemes: &[SignatureScheme], tls12_only: Option<&[rustls::SupportedCipherSuite]>) -> Client {
        let recorder = Arc::new(Recorder {
            seen: Mutex::new(Vec::new()),
            schemes: schemes.to_vec(),
        });
        let mut provider = ring::default_provider();
        let versions: &[&rustls::SupportedProtocolVersion] = match tls12_only {
            Some(suites) => {
                provider.cipher_suites = suites.to_vec();
                &[&rustls::version::TLS12]
            }
            None => rustls::ALL_VERSIONS,
        };
        let config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .expect("client versions")
            .dangerous()
            .with_custom_certificate_verifier(recorder.clone())
            .with_no_client_auth();
        Client {
            config: Arc::new(config),
            recorder,
        }
    }

    /// The last certificate the server presented.
    fn last_cert(&self) -> Vec<u8> {
        self.recorder
            .seen
            .lock()
            .expect("seen")
            .last()
            .cloned()
            .unwrap_or_default()
    }

    /// Connects to `addr` naming `sni` (an IP address: no SNI is sent).
    fn connect(
        &self,
        addr: SocketAddr,
        sni: &str,
    ) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
        let name = ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
        let conn = rustls::ClientConnection::new(Arc::clone(&self.config), name).map_err(|e| e.to_string())?;
        let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock).map_err(|e| e.to_string())?;
        }
        Ok(s)
    }

    /// One `GET /` on a new connection naming `sni` in its hello and its `Host`: the body of the answer.
    fn get(&self, addr: SocketAddr, sni: &str) -> Result<String, String> {
        let mut s = self.connect(addr, sni)?;
        request(&mut s, sni, "close")
    }
}

/// Sends `GET /` naming `host` (the server is the one `Host` names, as in nginx) and reads the answer by its `Content-Length`: the body.
fn request(s: &mut impl ReadWrite, host: &str, connection: &str) -> Result<String, String> {
    let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: {connection}\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .ok_or("no content-length")?;
            if got.len() >= end + 4 + len {
                assert!(head.starts_with("http/1.1 200 ok"), "{head}");
                return Ok(String::from_utf8_lossy(&got[end + 4..end + 4 + len]).into_owned());
            }
        }
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("closed after {:?}", String::from_utf8_lossy(&got)));
        }
        got.extend_from_slice(&buf[..n]);
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Waits until the server closes `tcp` (a read gives end of stream or a reset), at most `limit`; how long it took.
fn closed_within(tcp: &mut TcpStream, limit: Duration) -> Duration {
    let start = Instant::now();
    tcp.set_read_timeout(Some(limit)).expect("timeout");
    let mut buf = [0u8; 512];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => return start.elapsed(),
            // an alert may come before the close
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => return start.elapsed(),
            Err(e) => panic!("not closed within {limit:?}: {e}"),
        }
    }
}

fn tls_sequence<R: Runtime>(tag: &str) {
    let c = certs(tag);
    let (addr, quiet) = (free_addr(), free_addr());
    let proxy = Proxy::start::<R>(parse(&config_text(addr, quiet, &c)), 1);
    let any = Client::new(ALL, None);

    // SNI picks the server and its certificate; a client taking ECDSA gets the ECDSA pair (OpenSSL's preference)
    let body = any.get(addr, "a.test").expect("a.test");
    assert!(body.starts_with("a https|on|TLSv1.3|TLS_"), "{body}");
    assert!(body.ends_with("|a.test|.\n"), "{body}");
    assert_eq!(any.last_cert(), c.a_ec.der);
    assert_eq!(any.get(addr, "x.b.test").expect("wildcard"), "b x.b.test\n");
    assert_eq!(any.last_cert(), c.b.der);
    // no SNI (an address) and an unknown name: the default server, `a.test`
    assert!(any.get(addr, "127.0.0.1").expect("no sni").ends_with("|.\n"));
    assert_eq!(any.last_cert(), c.a_ec.der);
    assert!(any
        .get(addr, "unknown.test")
        .expect("unknown")
        .ends_with("|unknown.test|.\n"));
    assert_eq!(any.last_cert(), c.a_ec.der);

    // RSA vs ECDSA by the client's signature schemes, and by its TLS 1.2 suites
    let rsa_only = Client::new(RSA_ONLY, None);
    rsa_only.get(addr, "a.test").expect("rsa client");
    assert_eq!(rsa_only.last_cert(), c.a_rsa.der);
    let ec_only = Client::new(ECDSA_ONLY, None);
    ec_only.get(addr, "a.test").expect("ecdsa client");
    assert_eq!(ec_only.last_cert(), c.a_ec.der);
    let rsa_suite = Client::new(ALL, Some(&[ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]));
    let body = rsa_suite.get(addr, "a.test").expect("TLS 1.2 RSA suite");
    assert_eq!(body, "a https|on|TLSv1.2|ECDHE-RSA-AES128-GCM-SHA256|a.test|.\n");
    assert_eq!(rsa_suite.last_cert(), c.a_rsa.der);

    // resumption: TLS 1.3 by ticket, TLS 1.2 by ticket or session id; none where both are off
    let resuming = Client::new(ALL, None);
    assert!(resuming.get(addr, "a.test").expect("first").ends_with("|.\n"));
    assert!(resuming.get(addr, "a.test").expect("resumed").ends_with("|a.test|r\n"));
    let resuming12 = Client::new(
        ALL,
        Some(&[ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]),
    );
    assert!(resuming12.get(addr, "a.test").expect("first 1.2").ends_with("|.\n"));
    let body = resuming12.get(addr, "a.test").expect("resumed 1.2");
    assert_eq!(body, "a https|on|TLSv1.2|ECDHE-ECDSA-AES256-GCM-SHA384|a.test|r\n");
    for _ in 0..2 {
        assert_eq!(resuming.get(quiet, "q.test").expect("quiet"), "quiet .\n");
        assert_eq!(resuming12.get(quiet, "q.test").expect("quiet 1.2"), "quiet .\n");
    }

    // the handshake counters (nginx Plus's /ssl): one full, one resumed, one failed
    let stats = || {
        let all = proxy.shared.zone.shard_stats();
        let sum = |f: fn(&corelb_shared_state::ShardStats) -> u64| all.iter().map(f).sum::<u64>();
        (
            sum(|s| s.handshakes),
            sum(|s| s.session_reuses),
            sum(|s| s.handshakes_failed),
        )
    };
    let before = stats();
    let counted = Client::new(ALL, None);
    counted.get(addr, "a.test").expect("full");
    counted.get(addr, "a.test").expect("resumed");
    let mut broken = TcpStream::connect(addr).expect("broken");
    broken.write_all(b"\x16\x03\x01\x00\x05hello").expect("send garbage");
    closed_within(&mut broken, Duration::from_secs(3));
    // the failure is counted once the connection's task has dropped its socket: a moment after the client sees it
    let end = Instant::now() + Duration::from_secs(3);
    while stats().2 == before.2 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = stats();
    assert_eq!((after.0 - before.0, after.1 - before.1, after.2 - before.2), (2, 1, 1));

    // ssl_reject_handshake: nginx's unrecognized_name alert
    let e = any.get(addr, "reject.test").expect_err("rejected");
    assert!(e.contains("UnrecognisedName"), "{e}");

    // plain HTTP to the TLS port: nginx's 400 page, then the connection closes
    let mut tcp = TcpStream::connect(addr).expect("plain");
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n").expect("send");
    let mut answer = Vec::new();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    tcp.read_to_end(&mut answer).expect("plain answer");
    let text = String::from_utf8_lossy(&answer);
    let date_end = text.find("Content-Type").expect("head");
    let date_start = text.find("Date: ").expect("date");
    let masked = format!("{}{}", &text[..date_start], &text[date_end..]);
    assert_eq!(
        masked,
        format!(
            "HTTP/1.1 400 Bad Request\r\nServer: corelb/{v}\r\nContent-Type: text/html\r\nContent-Length: 255\r\n\
             Connection: close\r\n\r\n<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port\
             </title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP \
             request was sent to HTTPS port</center>\r\n<hr><center>corelb/{v}</center>\r\n</body>\r\n</html>\r\n",
            v = env!("CARGO_PKG_VERSION")
        )
    );

    // garbage in a handshake record, a truncated hello, a slow one: cut; the shard goes on serving
    let mut garbage = TcpStream::connect(addr).expect("garbage");
    garbage.write_all(b"\x16\x03\x01\x00\x05hello").expect("send garbage");
    assert!(closed_within(&mut garbage, Duration::from_secs(3)) < Duration::from_secs(3));
    let mut hello = Vec::new();
    let name = ServerName::try_from("a.test").expect("name");
    let mut pending = rustls::ClientConnection::new(Arc::clone(&any.config), name).expect("client");
    pending.write_tls(&mut hello).expect("hello");
    let mut truncated = TcpStream::connect(addr).expect("truncated");
    truncated.write_all(&hello[..hello.len() / 2]).expect("half a hello");
    truncated.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert!(closed_within(&mut truncated, Duration::from_secs(3)) < Duration::from_secs(3));
    let mut slow = TcpStream::connect(addr).expect("slow");
    slow.write_all(&hello[..10]).expect("a few bytes");
    let took = closed_within(&mut slow, Duration::from_secs(5));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(any
        .get(addr, "a.test")
        .expect("after bad handshakes")
        .starts_with("a https"));

    // reload with a rotated certificate: new connections get it, an open connection goes on
    let mut open = any.connect(addr, "x.b.test").expect("open connection");
    assert_eq!(
        request(&mut open, "x.b.test", "keep-alive").expect("before reload"),
        "b x.b.test\n"
    );
    if R::PARKS {
        // (glommio: the idle TLS connection parks its socket after a tick; the request after the reload wakes it)
        let start = Instant::now();
        while corelb_engine::runtime::glommio_rt::parked_sockets() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the idle TLS connection never parked"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let rotated = write_pair(&c.dir, "b", &["*.b.test"], &ecdsa());
    assert_ne!(rotated.der, c.b.der);
    let next = parse(&config_text(addr, quiet, &c));
    proxy
        .shared
        .apply(ChangeKind::Reload, move |_| Ok(next))
        .unwrap_or_else(|e| panic!("reload refused: {e}"));
    assert_eq!(any.get(addr, "y.b.test").expect("after reload"), "b y.b.test\n");
    assert_eq!(any.last_cert(), rotated.der);
    assert_eq!(
        request(&mut open, "x.b.test", "close").expect("open connection after reload"),
        "b x.b.test\n"
    );

    drop(proxy);
    let _ = std::fs::remove_dir_all(&c.dir);
}

#[test]
fn tls_termination_tokio() {
    tls_sequence::<Tokio>("tokio");
}

#[test]
fn tls_termination_glommio() {
    if glommio_usable() {
        tls_sequence::<Glommio>("glommio");
    }
}

/// One `GET /` over `s`, read to its end: the body.
fn body_of(mut s: support::tls::TlsStream) -> String {
    s.write_all(b"GET / HTTP/1.0\r\nHost: s\r\n\r\n").expect("request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// `$ssl_session_id` (kept by a resumed session), `$ssl_ciphers` (the client's offer) and `ssl_session_timeout`
/// (a session older than it is not resumed).
fn session_vars<R: Runtime>(tag: &str) {
    let dir = support::tls::test_dir(&format!("tls-sessions-{tag}"));
    let cert = support::tls::self_signed(&dir, "s", support::tls::params(&["s.test"], "s.test"));
    let (long, short) = (free_addr(), free_addr());
    let text = format!(
        "events {{}}\nhttp {{\n access_log off;\n ssl_certificate {};\n ssl_certificate_key {};\n\
         server {{ listen {long} ssl; return 200 \"$ssl_session_reused|$ssl_session_id|$ssl_ciphers\"; }}\n\
         server {{ listen {short} ssl; ssl_session_timeout 1s; return 200 \"$ssl_session_reused\"; }}\n}}\n",
        cert.file.display(),
        cert.key_file.display()
    );
    let proxy = Proxy::start::<R>(parse(&text), 1);
    let client = support::tls::TlsClient::new(None);
    let first = body_of(client.connect(long, "s.test").expect("handshake"));
    let (reused, rest) = first.split_once('|').expect("fields");
    let (id, ciphers) = rest.split_once('|').expect("fields");
    assert_eq!(reused, ".");
    assert!(id.len() == 64 && id.bytes().all(|c| c.is_ascii_hexdigit()), "{first}");
    // rustls offers its TLS 1.3 suites first, then the TLS 1.2 ones, every one by OpenSSL's name
    assert!(ciphers.starts_with("TLS_AES_256_GCM_SHA384:"), "{first}");
    assert!(ciphers.contains(":ECDHE-ECDSA-AES128-GCM-SHA256"), "{first}");
    let again = body_of(client.connect(long, "s.test").expect("resumed"));
    assert_eq!(again, format!("r|{id}|{ciphers}"));
    // another client: a new session, a new id
    let other = body_of(
        support::tls::TlsClient::new(None)
            .connect(long, "s.test")
            .expect("handshake"),
    );
    assert!(!other.contains(id), "{other}");

    let client = support::tls::TlsClient::new(None);
    assert_eq!(body_of(client.connect(short, "s.test").expect("handshake")), ".");
    assert_eq!(body_of(client.connect(short, "s.test").expect("handshake")), "r");
    // whole seconds: past 1 s of age, the ticket is not taken
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(body_of(client.connect(short, "s.test").expect("handshake")), ".");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn session_vars_tokio() {
    session_vars::<Tokio>("tokio");
}

#[test]
fn session_vars_glommio() {
    if glommio_usable() {
        session_vars::<Glommio>("glommio");
    }
}

fn config_error(text: &str) -> String {
    corelb_engine::config::parse_str(text, Path::new("/t/tls.conf"))
        .expect_err("config refused")
        .to_string()
}

#[test]
fn config_errors_are_nginx_s() {
    let c = certs("errors");
    let p = |p: &Path| p.display().to_string();
    let srv = |body: &str| format!("events {{}}\nhttp {{\nserver {{\nlisten 127.0.0.1:1 ssl;\n{body}\n}}\n}}\n");
    assert_eq!(
        config_error(&srv("")),
        "[emerg] no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in /t/tls.conf:3"
    );
    let missing = c.dir.join("missing.crt");
    assert_eq!(
        config_error(&srv(&format!(
            "ssl_certificate {}; ssl_certificate_key {};",
            p(&missing),
            p(&c.b.key)
        ))),
        format!(
            "[emerg] cannot load certificate \"{m}\": BIO_new_file() failed (SSL: error:80000002:system library::No \
             such file or directory:calling fopen({m}, r) error:10000080:BIO routines::no such file) in /t/tls.conf:5",
            m = p(&missing)
        )
    );
    // a key of the same type that is not the certificate's
    assert_eq!(
        config_error(&srv(&format!(
            "ssl_certificate {}; ssl_certificate_key {};",
            p(&c.b.cert),
            p(&c.a_ec.key)
        ))),
        format!(
            "[emerg] SSL_CTX_use_PrivateKey(\"{}\") failed (SSL: error:05800074:x509 certificate routines::key values \
             mismatch) in /t/tls.conf:5",
            p(&c.a_ec.key)
        )
    );
    assert_eq!(
        config_error(&srv(&format!("ssl_certificate {};", p(&c.b.cert)))),
        format!(
            "[emerg] no \"ssl_certificate_key\" is defined for certificate \"{}\" in /t/tls.conf:5",
            p(&c.b.cert)
        )
    );
    assert_eq!(
        config_error(&srv(&format!(
            "ssl_certificate {}; ssl_certificate_key {}; ssl_ciphers ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-SHA;",
            p(&c.b.cert),
            p(&c.b.key)
        ))),
        "[emerg] SSL_CTX_set_cipher_list(\"ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-SHA\") failed: cipher \
         \"DHE-RSA-AES128-SHA\" is not supported by corelb in /t/tls.conf:5"
    );
    let _ = std::fs::remove_dir_all(&c.dir);
}
