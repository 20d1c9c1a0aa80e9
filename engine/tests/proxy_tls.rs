//! HTTPS upstreams end to end, on both runtimes, against a rustls backend on loopback: `proxy_ssl_verify on`
//! with a trusted certificate, a CA-signed chain, a wrong name, an untrusted and an expired certificate (each a
//! 502 with nginx's page, no request reaching the backend), `proxy_ssl_verify off` taking any certificate, the
//! name sent in SNI (`proxy_ssl_server_name on`, `proxy_ssl_name`) or not, the client certificate
//! (`proxy_ssl_certificate`), and a TLS upstream connection kept alive in the pool (the backend accepts once for
//! several requests).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{free_addr, get, glommio_usable, Client, Proxy};

fn key() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ECDSA key")
}

/// A certificate with its key, as DER (for the backend) and as files (for the proxy's config).
struct Issued {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
    file: PathBuf,
    key_file: PathBuf,
}

fn params(names: &[&str]) -> rcgen::CertificateParams {
    rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params")
}

fn write(dir: &Path, name: &str, cert: rcgen::Certificate, key: rcgen::KeyPair) -> Issued {
    let (file, key_file) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    std::fs::write(&file, cert.pem()).expect("write certificate");
    std::fs::write(&key_file, key.serialize_pem()).expect("write key");
    Issued {
        cert,
        key,
        file,
        key_file,
    }
}

/// The test's certificates: a self-signed `backend.test`, another self-signed one for the same name (never
/// trusted), an expired one, a CA and a leaf it signed, and a client certificate signed by the CA.
struct Certs {
    dir: PathBuf,
    own: Issued,
    stranger: Issued,
    expired: Issued,
    ca: Issued,
    leaf: Issued,
    client: Issued,
}

fn certs(tag: &str) -> Certs {
    let dir = std::env::temp_dir().join(format!("corelb-proxy-tls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    let self_signed = |name: &str, p: rcgen::CertificateParams| {
        let k = key();
        let c = p.self_signed(&k).expect("self-signed");
        write(&dir, name, c, k)
    };
    let own = self_signed("own", params(&["backend.test"]));
    let stranger = self_signed("stranger", params(&["backend.test"]));
    let mut old = params(&["backend.test"]);
    old.not_before = rcgen::date_time_ymd(2001, 1, 1);
    old.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let expired = self_signed("expired", old);
    let mut ca_params = params(&[]);
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "Test CA");
    let ca = self_signed("ca", ca_params);
    let signed = |name: &str, p: rcgen::CertificateParams| {
        let k = key();
        let c = p.signed_by(&k, &ca.cert, &ca.key).expect("signed");
        write(&dir, name, c, k)
    };
    let leaf = signed("leaf", params(&["*.chain.test"]));
    let client = signed("client", params(&["client.test"]));
    Certs {
        own,
        stranger,
        expired,
        ca,
        leaf,
        client,
        dir,
    }
}

/// A TLS backend on loopback with one certificate: each request is answered, kept alive, with the name the
/// client's hello carried (`-`: none) and whether it sent a client certificate.
struct TlsBackend {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl TlsBackend {
    fn start(cert: &Issued, client_ca: Option<&Issued>) -> TlsBackend {
        let chain = vec![CertificateDer::from(cert.cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .expect("versions");
        let config = match client_ca {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(CertificateDer::from(ca.cert.der().to_vec())).expect("root");
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        }
        .with_single_cert(chain, key)
        .expect("server config");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let addr = listener.local_addr().expect("addr");
        let accepts = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (a, r) = (Arc::clone(&accepts), Arc::clone(&requests));
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                a.fetch_add(1, Ordering::SeqCst);
                let (config, r) = (Arc::clone(&config), Arc::clone(&r));
                std::thread::spawn(move || serve(config, tcp, &r));
            }
        });
        TlsBackend {
            addr,
            accepts,
            requests,
        }
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn serve(config: Arc<ServerConfig>, tcp: std::net::TcpStream, requests: &AtomicUsize) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            got.drain(..end + 4);
            requests.fetch_add(1, Ordering::SeqCst);
            let sni = s.conn.server_name().unwrap_or("-").to_string();
            let client = match s.conn.peer_certificates() {
                Some(c) if !c.is_empty() => "cert",
                _ => "nocert",
            };
            let body = format!("{sni} {client}");
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            if s.write_all(answer.as_bytes()).and_then(|()| s.flush()).is_err() {
                return;
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// nginx's 502 page, as corelb signs it.
fn bad_gateway() -> String {
    format!(
        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\
         \r\n<hr><center>corelb/{}</center>\r\n</body>\r\n</html>\r\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The backends of one run: the trusted self-signed one, a stranger, an expired one, the CA-signed leaf and one
/// that asks for a client certificate signed by the CA.
struct Backends {
    own: TlsBackend,
    stranger: TlsBackend,
    expired: TlsBackend,
    leaf: TlsBackend,
    mutual: TlsBackend,
}

fn config_text(listen: SocketAddr, b: &Backends, c: &Certs) -> String {
    let p = |i: &Issued| i.file.display().to_string();
    let trust_own = format!("proxy_ssl_verify on; proxy_ssl_trusted_certificate {};", p(&c.own));
    format!(
        "events {{}}\nhttp {{\n access_log off;\n\
         upstream pooled {{ server {own}; keepalive 4; }}\n\
         server {{ listen {listen};\n\
          location /verify {{ proxy_pass https://{own}; proxy_ssl_name backend.test; proxy_ssl_server_name on; \
            {trust_own} }}\n\
          location /nosni {{ proxy_pass https://{own}; proxy_ssl_name backend.test:8443; {trust_own} }}\n\
          location /wrongname {{ proxy_pass https://{own}; proxy_ssl_name other.test; {trust_own} }}\n\
          location /untrusted {{ proxy_pass https://{stranger}; proxy_ssl_name backend.test; {trust_own} }}\n\
          location /expired {{ proxy_pass https://{expired}; proxy_ssl_name backend.test; \
            proxy_ssl_verify on; proxy_ssl_trusted_certificate {}; }}\n\
          location /any {{ proxy_pass https://{stranger}; proxy_ssl_server_name on; proxy_ssl_name any.test; }}\n\
          location /chain {{ proxy_pass https://{leaf}; proxy_ssl_name a.chain.test; proxy_ssl_verify on; \
            proxy_ssl_trusted_certificate {}; }}\n\
          location /mutual {{ proxy_pass https://{mutual}; proxy_ssl_certificate {}; \
            proxy_ssl_certificate_key {}; }}\n\
          location /nocert {{ proxy_pass https://{mutual}; }}\n\
          location /pooled {{ proxy_pass https://pooled; proxy_http_version 1.1; proxy_set_header Connection \"\"; \
            proxy_ssl_server_name on; }}\n\
         }}\n}}\n",
        p(&c.expired),
        p(&c.ca),
        p(&c.client),
        c.client.key_file.display(),
        own = b.own.addr,
        stranger = b.stranger.addr,
        expired = b.expired.addr,
        leaf = b.leaf.addr,
        mutual = b.mutual.addr,
    )
}

fn body(listen: SocketAddr, path: &str) -> (u16, String) {
    let r = get(listen, path).expect("response");
    (r.status, r.text())
}

fn https_upstreams<R: Runtime>(tag: &str) {
    let c = certs(tag);
    let b = Backends {
        own: TlsBackend::start(&c.own, None),
        stranger: TlsBackend::start(&c.stranger, None),
        expired: TlsBackend::start(&c.expired, None),
        leaf: TlsBackend::start(&c.leaf, None),
        mutual: TlsBackend::start(&c.own, Some(&c.ca)),
    };
    let listen = free_addr();
    let text = config_text(listen, &b, &c);
    let config = corelb_engine::config::parse_str(&text, Path::new("proxy_tls.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);

    // verified, the name in SNI; without `proxy_ssl_server_name on` no SNI, the name (its port dropped) still checked
    assert_eq!(body(listen, "/verify"), (200, "backend.test nocert".into()));
    assert_eq!(body(listen, "/nosni"), (200, "- nocert".into()));
    // the certificate is for another name, or is not the trusted one, or has expired: 502, nothing sent
    let before = b.own.requests() + b.stranger.requests() + b.expired.requests();
    for path in ["/wrongname", "/untrusted", "/expired"] {
        assert_eq!(body(listen, path), (502, bad_gateway()), "{path}");
    }
    assert_eq!(b.own.requests() + b.stranger.requests() + b.expired.requests(), before);
    // `proxy_ssl_verify off` (the default) takes the stranger
    assert_eq!(body(listen, "/any"), (200, "any.test nocert".into()));
    // a leaf signed by the trusted CA, its wildcard name
    assert_eq!(body(listen, "/chain"), (200, "- nocert".into()));
    // a backend that requires a client certificate signed by the CA gets `proxy_ssl_certificate`, and refuses
    // a proxy without one
    assert_eq!(body(listen, "/mutual"), (200, "- cert".into()));
    assert_eq!(body(listen, "/nocert").0, 502);

    // keepalive: three requests on one client connection go out on one TLS upstream connection
    let mut client = Client::connect(listen);
    for _ in 0..3 {
        client.send(b"GET /pooled HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = client.read_response().expect("pooled response");
        // the name is `$proxy_host`, the upstream block's
        assert_eq!((r.status, r.text()), (200, "pooled nocert".to_string()));
    }
    assert_eq!(
        b.own.accepts(),
        4,
        "/verify, /nosni, /wrongname each opened one; /pooled one more"
    );
    assert_eq!(b.own.requests(), 5);
    drop(client);
    // and a new client connection still finds the pooled upstream one
    assert_eq!(body(listen, "/pooled"), (200, "pooled nocert".into()));
    assert_eq!(b.own.accepts(), 4);

    drop(proxy);
    let _ = std::fs::remove_dir_all(&c.dir);
}

#[test]
fn https_upstreams_tokio() {
    https_upstreams::<Tokio>("tokio");
}

#[test]
fn https_upstreams_glommio() {
    if glommio_usable() {
        https_upstreams::<Glommio>("glommio");
    }
}

fn config_error(text: &str) -> String {
    corelb_engine::config::parse_str(text, Path::new("/t/p.conf"))
        .expect_err("config refused")
        .to_string()
}

#[test]
fn proxy_ssl_config_errors() {
    let loc = |body: &str| {
        format!("events {{}}\nhttp {{\nserver {{\nlisten 127.0.0.1:1;\nlocation / {{\n{body}\n}}\n}}\n}}\n")
    };
    assert_eq!(
        config_error(&loc("proxy_pass https://127.0.0.1:2;\nproxy_ssl_verify on;")),
        "[emerg] no proxy_ssl_trusted_certificate for proxy_ssl_verify in /t/p.conf:5"
    );
    assert_eq!(
        config_error(&loc("proxy_pass https://127.0.0.1:2;\nproxy_ssl_certificate /t/c.crt;")),
        "[emerg] no \"proxy_ssl_certificate_key\" is defined for certificate \"/t/c.crt\" in /t/p.conf:5"
    );
    assert_eq!(
        config_error(&loc("proxy_pass https://127.0.0.1:2;\nproxy_ssl_name $host;")),
        "[emerg] \"proxy_ssl_name\" with variables is not supported by corelb in /t/p.conf:7"
    );
}
