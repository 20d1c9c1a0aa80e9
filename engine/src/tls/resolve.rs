//! Which certificate a TLS handshake gets: the server its SNI names on the listen address (as the server-name
//! table finds a `Host`; none or an unknown name: the default server), then the first of that server's pairs whose
//! key the client can verify, ECDSA before RSA as OpenSSL prefers. A server with `ssl_reject_handshake on` fails
//! the handshake.

use super::context::Picked;
use super::dynamic::{HandshakeConn, HandshakeVars};
use crate::config::tls::{DynamicCerts, SessionContext};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{SignatureAlgorithm, SupportedCipherSuite};
use std::net::SocketAddr;
use std::sync::Arc;

/// Finds the server (index into [`SniCerts::servers`]) a client's SNI names.
pub type PickServer = Box<dyn Fn(&str) -> usize + Send + Sync>;

/// One server's certificates on a TLS address.
#[derive(Debug, Clone, Default)]
pub struct ServerCerts {
    pub certs: Vec<Arc<CertifiedKey>>,
    /// Its certificate lines with variables, evaluated at each handshake ([`super::dynamic`]).
    pub dynamic: Option<Arc<DynamicCerts>>,
    /// Its session id context ([`super::context`]).
    pub context: SessionContext,
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
    /// What certificate names with variables read (where a server has such).
    pub vars: Option<Arc<dyn HandshakeVars>>,
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

impl SniCerts {
    /// The server a handshake naming `sni` reaches.
    fn server(&self, sni: Option<&str>) -> Option<&ServerCerts> {
        self.servers.get(sni.map_or(self.default, |n| (self.pick)(n)))
    }

    /// The server whose certificates `server` serves: itself, or (without certificates of its own) the default
    /// server, as nginx keeps the default server's context.
    fn owner<'a>(&'a self, server: &'a ServerCerts) -> Option<&'a ServerCerts> {
        match server.certs.is_empty() && server.dynamic.is_none() {
            true => self.servers.get(self.default),
            false => Some(server),
        }
    }

    /// The first of `certs` whose key the client can verify, ECDSA before RSA as OpenSSL prefers.
    fn choose(&self, hello: &ClientHello<'_>, certs: &[Arc<CertifiedKey>]) -> Option<Arc<CertifiedKey>> {
        PREFERENCE
            .iter()
            .find_map(|alg| certs.iter().find(|c| c.key.algorithm() == *alg && self.suits(hello, c)))
            .or_else(|| certs.first())
            .cloned()
    }

    /// Whether every server a handshake can reach has the same session id context, and none evaluates its
    /// certificates: then one config serves every handshake of the address.
    pub fn uniform(&self) -> Option<SessionContext> {
        let mut contexts = self.servers.iter().filter_map(|s| self.owner(s)).map(|s| s.context);
        let first = contexts.next().unwrap_or_default();
        let dynamic = self.servers.iter().any(|s| s.dynamic.is_some());
        (!dynamic && contexts.all(|c| c == first)).then_some(first)
    }
}

impl ResolvesServerCert for SniCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let server = self.server(hello.server_name())?;
        if server.reject {
            return None;
        }
        self.choose(&hello, &self.owner(server)?.certs)
    }
}

/// The certificate resolver of one handshake on an address where the server SNI picks matters beyond its
/// certificates: it sets the handshake's session id context, and evaluates certificate lines with variables for
/// this connection.
#[derive(Debug)]
pub struct ConnCerts {
    pub port: Arc<SniCerts>,
    pub remote: Option<SocketAddr>,
    pub local: SocketAddr,
    pub picked: Arc<Picked>,
}

impl ResolvesServerCert for ConnCerts {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let port = &*self.port;
        let server = port.server(hello.server_name())?;
        if server.reject {
            return None;
        }
        let owner = port.owner(server)?;
        self.picked.set(owner.context);
        let (Some(dynamic), Some(vars)) = (&owner.dynamic, &port.vars) else {
            return port.choose(&hello, &owner.certs);
        };
        let conn = HandshakeConn {
            remote: self.remote,
            local: self.local,
            server_name: hello.server_name(),
        };
        match super::dynamic::load(dynamic, &**vars, &conn) {
            Ok(certs) => port.choose(&hello, &certs),
            Err(message) => {
                let server = crate::config::unix_addr::Display(&self.local);
                match &self.remote {
                    Some(remote) => crate::log_error!(
                        "{message} while SSL handshaking, client: {}, server: {server}",
                        crate::config::unix_addr::Ip(remote)
                    ),
                    None => crate::log_error!("{message} while SSL handshaking, server: {server}"),
                }
                None
            }
        }
    }
}
