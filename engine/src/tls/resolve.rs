//! Which certificate a TLS handshake gets: the server its SNI names on the listen address (as the server-name
//! table finds a `Host`; none or an unknown name: the default server), then the first of that server's pairs whose
//! key the client can verify, ECDSA before RSA as OpenSSL prefers. A server with `ssl_reject_handshake on` fails
//! the handshake.

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{SignatureAlgorithm, SupportedCipherSuite};
use std::sync::Arc;

/// Finds the server (index into [`SniCerts::servers`]) a client's SNI names.
pub type PickServer = Box<dyn Fn(&str) -> usize + Send + Sync>;

/// One server's certificates on a TLS address.
#[derive(Debug, Clone, Default)]
pub struct ServerCerts {
    pub certs: Vec<Arc<CertifiedKey>>,
    pub reject: bool,
    /// `ssl_verify_client` other than `off`.
    pub client: Option<Arc<crate::config::tls::ClientVerify>>,
}

/// The certificate resolver of one TLS listen address.
pub struct SniCerts {
    pub servers: Vec<ServerCerts>,
    pub default: usize,
    pub pick: PickServer,
    /// The suites the address offers (whether a TLS 1.2 client can use an ECDSA or an RSA key).
    pub suites: Vec<SupportedCipherSuite>,
}

impl std::fmt::Debug for SniCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniCerts")
            .field("servers", &self.servers.len())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// The order keys are tried in.
const PREFERENCE: [SignatureAlgorithm; 3] = [
    SignatureAlgorithm::ECDSA,
    SignatureAlgorithm::ED25519,
    SignatureAlgorithm::RSA,
];

impl SniCerts {
    /// Whether a handshake naming `sni` (none: the default server) reaches a server with `ssl_reject_handshake on`.
    pub fn rejects(&self, sni: Option<&str>) -> bool {
        let index = sni.map_or(self.default, |n| (self.pick)(n));
        self.servers.get(index).is_some_and(|s| s.reject)
    }

    /// The client certificate settings of the server a handshake naming `sni` reaches (`None`: it does not
    /// verify clients).
    pub fn client_of(&self, sni: Option<&str>) -> Option<&crate::config::tls::ClientVerify> {
        let index = sni.map_or(self.default, |n| (self.pick)(n));
        self.servers.get(index)?.client.as_deref()
    }

    /// Whether `key` suits the client: it accepts one of the key's schemes, and (TLS 1.2) offers a suite for it.
    fn suits(&self, hello: &ClientHello<'_>, key: &CertifiedKey) -> bool {
        let alg = key.key.algorithm();
        key.key.choose_scheme(hello.signature_schemes()).is_some()
            && hello.cipher_suites().iter().any(|c| {
                self.suites
                    .iter()
                    .any(|s| s.suite() == *c && s.usable_for_signature_algorithm(alg))
            })
    }
}

impl ResolvesServerCert for SniCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let index = hello.server_name().map_or(self.default, |n| (self.pick)(n));
        let server = self.servers.get(index)?;
        if server.reject {
            return None;
        }
        // a server without certificates of its own keeps the default server's, as nginx keeps its context
        let certs = match server.certs.is_empty() {
            true => &self.servers.get(self.default)?.certs,
            false => &server.certs,
        };
        PREFERENCE
            .iter()
            .find_map(|alg| {
                certs
                    .iter()
                    .find(|c| c.key.algorithm() == *alg && self.suits(&hello, c))
            })
            .or_else(|| certs.first())
            .cloned()
    }
}
