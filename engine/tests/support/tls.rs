//! TLS test set-up: certificates made with rcgen and written as PEM files for a config, a rustls client that takes
//! any certificate (recording the one shown) or presents its own, and rustls line backends on loopback.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A certificate with its key, as rcgen values (for a backend) and as PEM files (for the proxy's config).
pub struct Issued {
    pub cert: rcgen::Certificate,
    pub key: rcgen::KeyPair,
    pub file: PathBuf,
    pub key_file: PathBuf,
}

impl Issued {
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from(self.cert.der().to_vec())
    }

    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }
}

/// A fresh directory for one test's files.
pub fn test_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    dir
}

pub fn ecdsa_key() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ECDSA key")
}

/// Parameters for a certificate of `names` whose subject is `CN=cn`.
pub fn params(names: &[&str], cn: &str) -> rcgen::CertificateParams {
    let mut p = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p
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

/// A self-signed certificate written into `dir` as `name.crt` / `name.key`.
pub fn self_signed(dir: &Path, name: &str, p: rcgen::CertificateParams) -> Issued {
    let k = ecdsa_key();
    let c = p.self_signed(&k).expect("self-signed");
    write(dir, name, c, k)
}

/// A CA certificate (`CN=cn`) written into `dir`.
pub fn ca(dir: &Path, name: &str, cn: &str) -> Issued {
    let mut p = params(&[], cn);
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    self_signed(dir, name, p)
}

/// A certificate signed by `ca`, written into `dir`.
pub fn signed(dir: &Path, name: &str, p: rcgen::CertificateParams, ca: &Issued) -> Issued {
    let k = ecdsa_key();
    let c = p.signed_by(&k, &ca.cert, &ca.key).expect("signed");
    write(dir, name, c, k)
}

/// A verifier that takes any certificate (recording the one presented) and checks the handshake signatures.
#[derive(Debug, Default)]
pub struct Recorder {
    pub seen: Mutex<Vec<Vec<u8>>>,
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
        ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A rustls client that takes any certificate, presenting `cert` when one is given; one config, so that a second
/// connection may resume the first one's session.
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub recorder: Arc<Recorder>,
}

/// A client's TLS stream.
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

impl TlsClient {
    pub fn new(cert: Option<&Issued>) -> TlsClient {
        let recorder = Arc::new(Recorder::default());
        let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(recorder.clone());
        let config = match cert {
            Some(c) => builder
                .with_client_auth_cert(vec![c.der()], c.key_der())
                .expect("client certificate"),
            None => builder.with_no_client_auth(),
        };
        TlsClient {
            config: Arc::new(config),
            recorder,
        }
    }

    /// The certificate the server showed last.
    pub fn last_cert(&self) -> Vec<u8> {
        self.recorder
            .seen
            .lock()
            .expect("seen")
            .last()
            .cloned()
            .unwrap_or_default()
    }

    /// Connects to `addr` naming `sni` (an IP address: no SNI is sent) and completes the handshake.
    pub fn connect(&self, addr: SocketAddr, sni: &str) -> Result<TlsStream, String> {
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
}

/// A TLS backend on loopback: each line a client sends is answered with `NAME SNI LINE` (SNI `-`: none), until
/// the client closes. It counts the connections that finished a handshake.
pub struct LineBackend {
    pub addr: SocketAddr,
    pub handshakes: Arc<AtomicUsize>,
}

impl LineBackend {
    pub fn start(name: &'static str, cert: &Issued) -> LineBackend {
        let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der()], cert.key_der())
            .expect("server config");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let addr = listener.local_addr().expect("addr");
        let handshakes = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&handshakes);
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                let (config, count) = (Arc::clone(&config), Arc::clone(&count));
                std::thread::spawn(move || answer_lines(name, config, tcp, &count));
            }
        });
        LineBackend { addr, handshakes }
    }

    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}

fn answer_lines(name: &str, config: Arc<ServerConfig>, tcp: TcpStream, handshakes: &AtomicUsize) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        if s.conn.complete_io(&mut s.sock).is_err() {
            return;
        }
    }
    handshakes.fetch_add(1, Ordering::SeqCst);
    let sni = s.conn.server_name().unwrap_or("-").to_string();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    while matches!(reader.read_line(&mut line), Ok(1..)) {
        let answer = format!("{name} {sni} {line}");
        let s = reader.get_mut();
        if s.write_all(answer.as_bytes()).and_then(|()| s.flush()).is_err() {
            return;
        }
        line.clear();
    }
}
