//! Client certificates end to end, on both runtimes, with a rustls client on loopback: `ssl_verify_client on`
//! without a certificate (nginx's `400 No required SSL certificate was sent`), with a good one (`SUCCESS` and the
//! `$ssl_client_*` variables: DNs, serial, fingerprint, PEM forms), with a stranger's or an expired one (`400 The
//! SSL certificate error`); `optional` without one (`NONE`); `optional_no_ca` letting an unknown CA through
//! (`FAILED:self-signed certificate`); `off` seeing none; a `Host` other than the SNI name (421); the validity
//! variables (`$ssl_client_v_start`, `_v_end`, `_v_remain`).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring as provider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use support::{free_addr, glommio_usable, Proxy};

fn key() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ECDSA key")
}

struct Issued {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
    file: PathBuf,
}

fn params(cn: &str) -> rcgen::CertificateParams {
    let mut p = rcgen::CertificateParams::new(vec![cn.to_string()]).expect("params");
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p
}

fn save(dir: &Path, name: &str, cert: rcgen::Certificate, key: rcgen::KeyPair) -> Issued {
    let file = dir.join(format!("{name}.crt"));
    std::fs::write(&file, cert.pem()).expect("write certificate");
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("write key");
    Issued { cert, key, file }
}

/// The server's own certificate, a CA, a client certificate it signed (serial `01:02:AB`), an expired one it
/// signed, and a self-signed stranger.
struct Certs {
    dir: PathBuf,
    server: Issued,
    ca: Issued,
    good: Issued,
    expired: Issued,
    stranger: Issued,
}

fn certs(tag: &str) -> Certs {
    let dir = std::env::temp_dir().join(format!("corelb-client-certs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    let self_signed = |name: &str, p: rcgen::CertificateParams| {
        let k = key();
        let c = p.self_signed(&k).expect("self-signed");
        save(&dir, name, c, k)
    };
    let server = self_signed("server", params("on.test"));
    let mut ca_params = params("Test CA");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = self_signed("ca", ca_params);
    let stranger = self_signed("stranger", params("stranger.test"));
    let signed = |name: &str, p: rcgen::CertificateParams| {
        let k = key();
        let c = p.signed_by(&k, &ca.cert, &ca.key).expect("signed");
        save(&dir, name, c, k)
    };
    let mut good_params = params("client.test");
    good_params.serial_number = Some(rcgen::SerialNumber::from(vec![0x01, 0x02, 0xAB]));
    good_params.not_before = rcgen::date_time_ymd(2020, 3, 4);
    good_params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let good = signed("good", good_params);
    let mut old = params("old.test");
    old.not_before = rcgen::date_time_ymd(2001, 1, 1);
    old.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let expired = signed("expired", old);
    Certs {
        dir,
        server,
        ca,
        good,
        expired,
        stranger,
    }
}

const VARS: &str = "$ssl_client_verify|$ssl_client_s_dn|$ssl_client_i_dn|$ssl_client_s_dn_legacy|$ssl_client_serial";

fn config_text(addr: SocketAddr, c: &Certs) -> String {
    let server = |name: &str, verify: &str| {
        format!(
            "server {{ listen {addr} ssl; server_name {name}; ssl_verify_client {verify};\n\
             ssl_client_certificate {ca}; return 200 \"{name} {VARS}\\n\"; }}\n",
            ca = c.ca.file.display()
        )
    };
    format!(
        "events {{}}\nhttp {{\n access_log off;\n ssl_certificate {cert}; ssl_certificate_key {key};\n{}{}{}{}\
         server {{ listen {addr} ssl; server_name pem.test; ssl_verify_client on; \
           ssl_client_certificate {ca};\n\
           location /raw {{ return 200 $ssl_client_raw_cert; }}\n\
           location /cert {{ return 200 $ssl_client_cert; }}\n\
           location /escaped {{ return 200 $ssl_client_escaped_cert; }}\n\
           location /fingerprint {{ return 200 $ssl_client_fingerprint; }}\n\
           location /time {{ return 200 \"$ssl_client_v_start!$ssl_client_v_end!$ssl_client_v_remain\"; }} }}\n}}\n",
        server("on.test", "on"),
        server("optional.test", "optional"),
        server("noca.test", "optional_no_ca"),
        server("off.test", "off"),
        cert = c.server.file.display(),
        key = c.server.file.with_extension("key").display(),
        ca = c.ca.file.display(),
    )
}

/// Takes any server certificate (the test is about the client's).
#[derive(Debug)]
struct AnyServer;

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider::default_provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn client(cert: Option<&Issued>) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer));
    Arc::new(match cert {
        Some(i) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from(i.cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(i.key.serialize_der())),
            )
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    })
}

/// `GET path` naming `sni` in the hello and `host` in `Host`: the status and body.
fn get(addr: SocketAddr, config: &Arc<ClientConfig>, sni: &str, host: &str, path: &str) -> (u16, String) {
    let name = ServerName::try_from(sni.to_string()).expect("name");
    let conn = rustls::ClientConnection::new(Arc::clone(config), name).expect("client");
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

fn page(title: &str) -> String {
    format!(
        "<html>\r\n<head><title>400 {title}</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n\
         <center>{title}</center>\r\n<hr><center>corelb/{}</center>\r\n</body>\r\n</html>\r\n",
        env!("CARGO_PKG_VERSION")
    )
}

fn client_certificates<R: Runtime>(tag: &str) {
    let c = certs(tag);
    let addr = free_addr();
    let text = config_text(addr, &c);
    let config = corelb_engine::config::parse_str(&text, Path::new("certs.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let (none, good, expired, stranger) = (
        client(None),
        client(Some(&c.good)),
        client(Some(&c.expired)),
        client(Some(&c.stranger)),
    );
    let ok = |name: &str, vars: &str| (200, format!("{name} {vars}\n"));
    let good_vars = "SUCCESS|CN=client.test|CN=Test CA|/CN=client.test|0102AB";

    // on
    assert_eq!(
        get(addr, &none, "on.test", "on.test", "/"),
        (400, page("No required SSL certificate was sent"))
    );
    assert_eq!(get(addr, &good, "on.test", "on.test", "/"), ok("on.test", good_vars));
    assert_eq!(
        get(addr, &expired, "on.test", "on.test", "/"),
        (400, page("The SSL certificate error"))
    );
    assert_eq!(
        get(addr, &stranger, "on.test", "on.test", "/"),
        (400, page("The SSL certificate error"))
    );
    // optional
    assert_eq!(
        get(addr, &none, "optional.test", "optional.test", "/"),
        ok("optional.test", "NONE||||")
    );
    assert_eq!(
        get(addr, &good, "optional.test", "optional.test", "/"),
        ok("optional.test", good_vars)
    );
    assert_eq!(
        get(addr, &stranger, "optional.test", "optional.test", "/"),
        (400, page("The SSL certificate error"))
    );
    // optional_no_ca: an unknown CA is let through, an expired certificate is not
    let (status, body) = get(addr, &stranger, "noca.test", "noca.test", "/");
    assert_eq!(status, 200);
    assert!(
        body.starts_with(
            "noca.test FAILED:self-signed certificate|CN=stranger.test|CN=stranger.test|/CN=stranger.test|"
        ),
        "{body}"
    );
    assert_eq!(
        get(addr, &expired, "noca.test", "noca.test", "/"),
        (400, page("The SSL certificate error"))
    );
    // off: the certificate a client sends anyway is not looked at
    assert_eq!(
        get(addr, &good, "off.test", "off.test", "/"),
        ok("off.test", "NONE||||")
    );
    // a `Host` other than the negotiated name, on a verifying server: nginx's 421
    let (status, body) = get(addr, &good, "optional.test", "on.test", "/");
    assert_eq!(status, 421, "{body}");

    // the certificate itself
    let pem = c.good.cert.pem().replace("\r\n", "\n");
    assert_eq!(get(addr, &good, "pem.test", "pem.test", "/raw"), (200, pem.clone()));
    let tabbed = pem.trim_end_matches('\n').replace('\n', "\n\t");
    assert_eq!(get(addr, &good, "pem.test", "pem.test", "/cert"), (200, tabbed));
    let (_, escaped) = get(addr, &good, "pem.test", "pem.test", "/escaped");
    assert!(escaped.starts_with("-----BEGIN%20CERTIFICATE-----%0AMII"), "{escaped}");
    assert!(escaped.ends_with("%0A-----END%20CERTIFICATE-----%0A"), "{escaped}");
    let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, c.good.cert.der());
    let hex: String = sha1.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(get(addr, &good, "pem.test", "pem.test", "/fingerprint"), (200, hex));
    let end = 4_102_444_800u64; // 2100-01-01
    let days = || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        (end - now) / 86400
    };
    let before = days();
    let (status, times) = get(addr, &good, "pem.test", "pem.test", "/time");
    assert_eq!(status, 200);
    let first = "Mar  4 00:00:00 2020 GMT!Jan  1 00:00:00 2100 GMT!";
    let left = times.strip_prefix(first).unwrap_or_else(|| panic!("{times}"));
    assert!(
        [before.to_string(), days().to_string()].contains(&left.to_string()),
        "{times}"
    );

    drop(proxy);
    let _ = std::fs::remove_dir_all(&c.dir);
}

#[test]
fn client_certificates_tokio() {
    client_certificates::<Tokio>("tokio");
}

#[test]
fn client_certificates_glommio() {
    if glommio_usable() {
        client_certificates::<Glommio>("glommio");
    }
}

#[test]
fn verify_client_without_a_ca_is_nginx_s_error() {
    let c = certs("errors");
    let text = format!(
        "events {{}}\nhttp {{\nserver {{\nlisten 127.0.0.1:1 ssl;\nssl_certificate {f}; ssl_certificate_key {k};\n\
         ssl_verify_client on;\n}}\n}}\n",
        f = c.server.file.display(),
        k = c.server.file.with_extension("key").display()
    );
    let e = corelb_engine::config::parse_str(&text, Path::new("/t/c.conf")).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "[emerg] no ssl_client_certificate for ssl_verify_client in /t/c.conf:3"
    );
    let _ = std::fs::remove_dir_all(&c.dir);
}
