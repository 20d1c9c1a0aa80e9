//! A location's TLS settings towards an `https` upstream (`proxy_ssl_*`), as read and merged, with its trusted
//! certificates and client certificate loaded at load.

use rustls::sign::CertifiedKey;
use rustls::SupportedCipherSuite;
use rustls_pki_types::CertificateDer;
use std::sync::Arc;

/// The `proxy_ssl_*` settings of one location.
#[derive(Debug, Clone)]
pub struct ProxyTlsConf {
    /// `proxy_ssl_verify` (default off): the upstream's chain and name are checked.
    pub verify: bool,
    /// `proxy_ssl_verify_depth` (default 1).
    pub depth: usize,
    /// `proxy_ssl_trusted_certificate`, loaded.
    pub trusted: Vec<CertificateDer<'static>>,
    /// `proxy_ssl_crl`, loaded (DER).
    pub crls: Vec<Vec<u8>>,
    /// `proxy_ssl_name` (`None`: nginx's `$proxy_host`).
    pub name: Option<String>,
    /// `proxy_ssl_server_name` (default off): the name goes in the handshake's SNI.
    pub server_name: bool,
    /// `proxy_ssl_certificate` with its key, loaded.
    pub client: Option<Arc<CertifiedKey>>,
    /// `proxy_ssl_protocols`.
    pub tls12: bool,
    pub tls13: bool,
    /// `proxy_ssl_ciphers`: the TLS 1.2 suites.
    pub suites: Vec<SupportedCipherSuite>,
    /// `proxy_ssl_session_reuse` (default on).
    pub session_reuse: bool,
}

impl PartialEq for ProxyTlsConf {
    fn eq(&self, o: &Self) -> bool {
        let same_client = match (&self.client, &o.client) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.verify == o.verify
            && self.depth == o.depth
            && self.trusted == o.trusted
            && self.crls == o.crls
            && self.name == o.name
            && self.server_name == o.server_name
            && same_client
            && self.tls12 == o.tls12
            && self.tls13 == o.tls13
            && self.suites == o.suites
            && self.session_reuse == o.session_reuse
    }
}
