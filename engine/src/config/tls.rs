//! A server's TLS settings (`ssl_*`) as read and merged, and its certificate and key files loaded and checked as
//! nginx checks them at `-t` (a missing or unreadable file, a file of no PEM, a key that does not match).

use super::key::KeyTemplate;
use rustls::crypto::ring::{cipher_suite as cs, kx_group};
use rustls::crypto::SupportedKxGroup;
use rustls::sign::CertifiedKey;
use rustls::SupportedCipherSuite;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `ssl_session_cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCache {
    /// `off`: no session is kept on the server.
    Off,
    /// `none` (the default): nginx tells clients sessions may be reused but keeps none; tickets still resume.
    None,
    /// `builtin[:size]` or `shared:name:size`: a cache of this many sessions, shared by every shard.
    Sessions(usize),
}

/// nginx's rough sessions per byte of a `shared` zone (its docs: 1 megabyte holds about 4000 sessions).
pub const SESSION_BYTES: usize = 256;

/// One `ssl_certificate` with its `ssl_certificate_key`, loaded.
#[derive(Clone)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub loaded: Arc<CertifiedKey>,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertPair")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl PartialEq for CertPair {
    fn eq(&self, other: &Self) -> bool {
        self.cert == other.cert && self.key == other.key && Arc::ptr_eq(&self.loaded, &other.loaded)
    }
}

/// `ssl_certificate` / `ssl_certificate_key` lines with variables: each pair evaluated at the handshake, once SNI
/// has chosen the server, and its files read then (nginx's certificate callback, without `ssl_certificate_cache`).
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicCerts {
    /// Each line's certificate and key names, in config order.
    pub pairs: Vec<(KeyTemplate, KeyTemplate)>,
    /// The directory relative names are read from (nginx's conf prefix).
    pub prefix: PathBuf,
    /// `ssl_password_file`'s passwords, read at load (a fifo once), for an encrypted key.
    pub passwords: Vec<Vec<u8>>,
}

/// nginx's session id context of a server (`ngx_ssl_session_id_context`): a digest of the module, the server's
/// certificates (their lines, where they have variables) and its client CA names. A session resumes only on a
/// server with the same context.
pub type SessionContext = [u8; 32];

/// `ssl_verify_client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyClient {
    /// `on`: a certificate is required and must verify (else nginx's 400 pages).
    On,
    /// `optional`: a certificate is asked for; one sent must verify.
    Optional,
    /// `optional_no_ca`: a certificate is asked for; one that does not verify for want of its CA is let through
    /// (`$ssl_client_verify` says why).
    OptionalNoCa,
}

/// A server's client certificate settings, loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientVerify {
    pub mode: VerifyClient,
    /// `ssl_client_certificate` and `ssl_trusted_certificate` together: what a client's chain may end at.
    pub trusted: Vec<CertificateDer<'static>>,
    /// The subjects (DER) of `ssl_client_certificate`'s certificates, without duplicates: the CA names the
    /// handshake sends.
    pub hints: Vec<Vec<u8>>,
    /// `ssl_verify_depth` (default 1).
    pub depth: usize,
    /// `ssl_crl`: the CRLs (DER); with any, every certificate of a chain needs its issuer's.
    pub crls: Vec<Vec<u8>>,
}

/// The TLS settings of one http server, merged from http and server.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsConf {
    /// Its certificates in config order (an RSA and an ECDSA pair may both be there).
    pub certs: Vec<CertPair>,
    /// Its certificates when a line names a variable (`certs` is then empty).
    pub dynamic: Option<Arc<DynamicCerts>>,
    /// Its session id context.
    pub context: SessionContext,
    /// `ssl_protocols`: TLSv1.2, TLSv1.3 (what rustls has of the list).
    pub tls12: bool,
    pub tls13: bool,
    /// `ssl_ciphers`: the TLS 1.2 suites, in the list's order (TLS 1.3 suites are not set by it, as with OpenSSL).
    pub suites: Vec<SupportedCipherSuite>,
    /// `ssl_prefer_server_ciphers`.
    pub prefer_server_ciphers: bool,
    /// `ssl_ecdh_curve`: the key exchange groups, in order.
    pub groups: Vec<rustls::NamedGroup>,
    pub session_cache: SessionCache,
    pub session_timeout: Duration,
    pub session_tickets: bool,
    /// `ssl_reject_handshake on`: handshakes naming this server fail.
    pub reject_handshake: bool,
    /// `ssl_verify_client` other than `off`.
    pub client: Option<std::sync::Arc<ClientVerify>>,
}

impl TlsConf {
    /// Settings with no certificate and nginx's defaults.
    pub fn defaults() -> Self {
        TlsConf {
            certs: Vec::new(),
            dynamic: None,
            context: [0; 32],
            tls12: true,
            tls13: true,
            suites: TLS12_SUITES.iter().map(|(_, s)| *s).collect(),
            prefer_server_ciphers: false,
            groups: KX_GROUPS.iter().map(|(_, g)| g.name()).collect(),
            session_cache: SessionCache::None,
            session_timeout: Duration::from_secs(300),
            session_tickets: true,
            reject_handshake: false,
            client: None,
        }
    }
}

/// A stream server's TLS: termination (`listen ... ssl`), `ssl_preread`, and `proxy_ssl` towards its upstreams.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSsl {
    /// `ssl_*` of a server that listens with `ssl`, loaded.
    pub server: Option<TlsConf>,
    /// `ssl_handshake_timeout` (default 60s).
    pub handshake_timeout: Duration,
    /// `ssl_alpn`: the protocols the server takes, in order (empty: ALPN is not answered).
    pub alpn: Vec<Vec<u8>>,
    /// `ssl_preread on`: the client's hello is read before the upstream is chosen.
    pub preread: bool,
    /// `preread_buffer_size` (default 16k) and `preread_timeout` (default 30s).
    pub preread_buffer_size: usize,
    pub preread_timeout: Duration,
    /// `proxy_ssl on`: upstream connections are TLS with these `proxy_ssl_*` settings.
    pub proxy: Option<super::proxy_tls::ProxyTlsConf>,
}

impl Default for StreamSsl {
    fn default() -> Self {
        StreamSsl {
            server: None,
            handshake_timeout: Duration::from_secs(60),
            alpn: Vec::new(),
            preread: false,
            preread_buffer_size: 16 * 1024,
            preread_timeout: Duration::from_secs(30),
            proxy: None,
        }
    }
}

/// The key exchange groups rustls (ring) has, by OpenSSL name.
pub const KX_GROUPS: &[(&str, &dyn SupportedKxGroup)] = &[
    ("X25519", kx_group::X25519),
    ("prime256v1", kx_group::SECP256R1),
    ("secp384r1", kx_group::SECP384R1),
];

impl TlsConf {
    /// The key exchange groups of `ssl_ecdh_curve`, for rustls.
    pub fn kx_groups(&self) -> Vec<&'static dyn SupportedKxGroup> {
        self.groups
            .iter()
            .filter_map(|n| KX_GROUPS.iter().find(|(_, g)| g.name() == *n).map(|(_, g)| *g))
            .collect()
    }
}

/// The TLS 1.2 suites rustls (ring) has, by OpenSSL name.
pub const TLS12_SUITES: &[(&str, SupportedCipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    ("ECDHE-RSA-AES256-GCM-SHA384", cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-RSA-AES128-GCM-SHA256", cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The OpenSSL name of `suite` (TLS 1.3 suites by their RFC names, as OpenSSL reports them).
pub fn openssl_name(suite: rustls::CipherSuite) -> &'static str {
    use rustls::CipherSuite as C;
    match suite {
        C::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        C::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        C::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        other => TLS12_SUITES
            .iter()
            .find(|(_, s)| s.suite() == other)
            .map_or("", |(n, _)| n),
    }
}

/// Why a certificate or key did not load: nginx's message, without the place.
pub type LoadError = String;

fn io_reason(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory",
        std::io::ErrorKind::PermissionDenied => "Permission denied",
        std::io::ErrorKind::IsADirectory => "Is a directory",
        _ => "Input/output error",
    }
}

/// nginx's message for a file OpenSSL could not open.
fn bio_failed(what: &str, path: &Path, e: &std::io::Error) -> LoadError {
    let p = path.display();
    format!(
        "cannot load {what} \"{p}\": BIO_new_file() failed (SSL: error:80000002:system library::{}:calling \
         fopen({p}, r) error:10000080:BIO routines::no such file)",
        io_reason(e)
    )
}

/// Reads the certificate chain at `cert` and the key at `key`, and checks that they belong together.
pub fn load_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, LoadError> {
    load_pair_with(cert, key, &[])
}

/// [`load_pair`] with the passwords of `ssl_password_file` for an encrypted key (PKCS#8, as OpenSSL 3 writes
/// it), tried in order as nginx tries them.
pub fn load_pair_with(cert: &Path, key: &Path, passwords: &[Vec<u8>]) -> Result<Arc<CertifiedKey>, LoadError> {
    let cert_pem = std::fs::read(cert).map_err(|e| bio_failed("certificate", cert, &e))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    if chain.is_empty() {
        return Err(format!(
            "cannot load certificate \"{}\": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM \
             routines::no start line:Expecting: TRUSTED CERTIFICATE)",
            cert.display()
        ));
    }
    let key_pem = std::fs::read(key).map_err(|e| bio_failed("certificate key", key, &e))?;
    let no_key = || {
        format!(
            "cannot load certificate key \"{}\": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER \
             routines::unsupported:No supported data to decode. Input type: PEM)",
            key.display()
        )
    };
    let der = match key_pem.windows(9).any(|w| w == b"ENCRYPTED") {
        true => decrypt_key(&key_pem, key, passwords)?,
        false => PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| no_key())?,
    };
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider.key_provider.load_private_key(der).map_err(|e| {
        format!(
            "cannot load certificate key \"{}\": the key is not supported by corelb ({e})",
            key.display()
        )
    })?;
    // the key's SubjectPublicKeyInfo is in the certificate's DER as it is (read without parsing the certificate,
    // which webpki refuses for an X.509 v1 one, as `openssl req -x509` makes without extensions)
    let spki = signing.public_key().map(|k| k.as_ref().to_vec());
    let pair = CertifiedKey::new(chain, signing);
    let holds = |cert: &[u8], spki: &[u8]| cert.windows(spki.len()).any(|w| w == spki);
    let matches = match (&spki, pair.cert.first()) {
        (Some(spki), Some(cert)) => holds(cert, spki),
        _ => true,
    };
    if !matches {
        return Err(format!(
            "SSL_CTX_use_PrivateKey(\"{}\") failed (SSL: error:05800074:x509 certificate routines::key values \
             mismatch)",
            key.display()
        ));
    }
    Ok(Arc::new(pair))
}

/// The key of an encrypted PKCS#8 PEM file `pem` (at `path`), with the first of `passwords` that opens it.
fn decrypt_key(pem: &[u8], path: &Path, passwords: &[Vec<u8>]) -> Result<PrivateKeyDer<'static>, LoadError> {
    let p = path.display();
    let block = pem::parse(pem).ok().filter(|b| b.tag() == "ENCRYPTED PRIVATE KEY");
    let Some(block) = block else {
        return Err(format!(
            "cannot load certificate key \"{p}\": an encrypted key other than PKCS#8 (\"BEGIN ENCRYPTED PRIVATE KEY\") \
             is not supported by corelb"
        ));
    };
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(block.contents())
        .map_err(|e| format!("cannot load certificate key \"{p}\": PEM_read_bio_PrivateKey() failed ({e})"))?;
    for password in passwords {
        if let Ok(doc) = info.decrypt(password) {
            let der = rustls_pki_types::PrivatePkcs8KeyDer::from(doc.as_bytes().to_vec());
            return Ok(PrivateKeyDer::Pkcs8(der));
        }
    }
    Err(format!(
        "cannot load certificate key \"{p}\": PEM_read_bio_PrivateKey() failed (SSL: error:1C800064:Provider \
         routines::bad decrypt)"
    ))
}

/// The passwords of an `ssl_password_file`: one a line, as nginx's `ngx_ssl_read_password_file` reads them.
pub fn read_passwords(path: &Path) -> Result<Vec<Vec<u8>>, LoadError> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "open() \"{}\" failed ({})",
            path.display(),
            crate::config::error::errno_text(&e)
        )
    })?;
    let lines: Vec<Vec<u8>> = text
        .split(|&b| b == b'\n' || b == b'\r')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    if lines.is_empty() {
        return Err(format!("empty file \"{}\"", path.display()));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_certificate_is_nginx_s_message() {
        let e = load_pair(Path::new("/nonexistent/c.pem"), Path::new("/nonexistent/k.pem")).unwrap_err();
        assert_eq!(
            e,
            "cannot load certificate \"/nonexistent/c.pem\": BIO_new_file() failed (SSL: error:80000002:system \
             library::No such file or directory:calling fopen(/nonexistent/c.pem, r) error:10000080:BIO \
             routines::no such file)"
        );
    }

    /// An ECDSA key encrypted as OpenSSL 3 writes it (`openssl genpkey -algorithm EC -pkeyopt
    /// ec_paramgen_curve:P-256 -aes-128-cbc -pass pass:corelb`) and its self-signed certificate.
    fn encrypted() -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls");
        (dir.join("ec-encrypted.crt"), dir.join("ec-encrypted.key"))
    }

    #[test]
    fn an_encrypted_key_opens_with_the_first_password_that_fits() {
        let (cert, key) = encrypted();
        let passwords = [b"wrong".to_vec(), b"corelb".to_vec()];
        assert!(load_pair_with(&cert, &key, &passwords).is_ok());
        let e = load_pair_with(&cert, &key, &passwords[..1]).unwrap_err();
        assert!(
            e.ends_with("PEM_read_bio_PrivateKey() failed (SSL: error:1C800064:Provider routines::bad decrypt)"),
            "{e}"
        );
        assert!(load_pair(&cert, &key).is_err(), "no password file");
    }

    #[test]
    fn a_password_file_has_one_password_a_line() {
        let path = std::env::temp_dir().join(format!("corelb-passwords-{}", std::process::id()));
        std::fs::write(&path, b"wrong\r\ncorelb\r\n").unwrap();
        assert_eq!(read_passwords(&path).unwrap(), [b"wrong".to_vec(), b"corelb".to_vec()]);
        std::fs::write(&path, b"").unwrap();
        assert!(read_passwords(&path).unwrap_err().starts_with("empty file"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn every_tls12_suite_has_its_openssl_name() {
        for (name, s) in TLS12_SUITES {
            assert_eq!(openssl_name(s.suite()), *name);
        }
        assert_eq!(
            openssl_name(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256),
            "TLS_AES_128_GCM_SHA256"
        );
    }
}
