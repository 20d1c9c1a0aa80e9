//! The rustls `ServerConfig` of one TLS listen address, built at load: the default server's protocols, suites,
//! curves and session settings (nginx takes these from the address's default server too), every server's
//! certificates behind the SNI resolver, and session tickets from one rotating ticketer that every shard and
//! every reload shares.

use super::client_auth::AskForCerts;
use super::context::{ContextCache, ContextTickets, Picked};
use super::dynamic::HandshakeVars;
use super::resolve::{ConnCerts, PickServer, ServerCerts, SniCerts};
use super::session_timeout::{TimedCache, TimedTickets};
use crate::config::tls::{SessionCache, TlsConf};
use rustls::crypto::ring;
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, ProducesTickets, ServerSessionMemoryCache, StoresServerSessions};
use rustls::{DistinguishedName, ServerConfig};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

/// The servers of one TLS listen address.
pub struct PortServers<'a> {
    /// Each server's TLS settings, by server index (`None`: a server without any).
    pub confs: Vec<Option<&'a TlsConf>>,
    /// The address's default server.
    pub default: usize,
    /// The server an SNI name picks.
    pub pick: PickServer,
    /// ALPN offers `h2` before `http/1.1` (an `http2` address).
    pub h2: bool,
    /// What certificate lines with variables read (`None`: no server has such).
    pub vars: Option<Arc<dyn HandshakeVars>>,
}

/// Why a TLS address's config could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("no server of the TLS address has TLS settings")]
    NoSettings,
    #[error("{0}")]
    Rustls(String),
}

/// The process's session ticket keys: rotated by rustls (a new key every 6 hours, the last one still read), shared
/// by every shard and kept across reloads so that a reload does not end every ticket.
fn ticketer() -> Result<Arc<dyn ProducesTickets>, TlsError> {
    static TICKETER: OnceLock<Arc<dyn ProducesTickets>> = OnceLock::new();
    if let Some(t) = TICKETER.get() {
        return Ok(Arc::clone(t));
    }
    let t = ring::Ticketer::new().map_err(|e| TlsError::Rustls(e.to_string()))?;
    Ok(Arc::clone(TICKETER.get_or_init(|| t)))
}

/// What a TLS listen address serves with.
#[derive(Debug)]
pub struct PortTls {
    pub config: Arc<ServerConfig>,
    /// The certificates by server, when a server there has `ssl_reject_handshake on` (its handshakes are read
    /// first, to be refused with nginx's `unrecognized_name` alert).
    pub rejecting: Option<Arc<SniCerts>>,
    /// The certificates by server, when a server there has `ssl_verify_client` (a client's certificate is
    /// checked against the trusted ones of the server its SNI picks).
    pub clients: Option<Arc<SniCerts>>,
    /// `$ssl_ciphers` is used: each hello is read first for the suites it offers.
    pub ciphers: bool,
    /// The certificates by server, when the server a handshake reaches decides its session id context or its
    /// certificates are evaluated then: each handshake gets its own config ([`PortTls::for_conn`]).
    pub per_conn: Option<Arc<SniCerts>>,
    /// The session stores under the context wrappers.
    ticketer: Arc<dyn ProducesTickets>,
    storage: Arc<dyn StoresServerSessions>,
}

impl PortTls {
    /// The config a handshake from `remote` to `local` runs with: the address's, or where the server matters
    /// ([`PortTls::per_conn`]) one of its own whose resolver notes the server's session id context for its session
    /// stores.
    pub fn for_conn(&self, remote: Option<SocketAddr>, local: SocketAddr) -> Arc<ServerConfig> {
        let Some(port) = &self.per_conn else {
            return Arc::clone(&self.config);
        };
        let picked = Arc::new(Picked::default());
        let mut config = (*self.config).clone();
        config.cert_resolver = Arc::new(ConnCerts {
            port: Arc::clone(port),
            remote,
            local,
            picked: Arc::clone(&picked),
        });
        config.ticketer = Arc::new(ContextTickets::new(Arc::clone(&self.ticketer), Arc::clone(&picked)));
        config.session_storage = Arc::new(ContextCache::new(Arc::clone(&self.storage), picked));
        Arc::new(config)
    }
}

/// Builds the config of one TLS address.
pub fn server_config(port: PortServers<'_>) -> Result<PortTls, TlsError> {
    let main = port
        .confs
        .get(port.default)
        .copied()
        .flatten()
        .or_else(|| port.confs.iter().flatten().next().copied())
        .ok_or(TlsError::NoSettings)?;
    let mut suites = Vec::new();
    if main.tls13 {
        suites.extend(ring::ALL_CIPHER_SUITES.iter().filter(|s| s.tls13().is_some()).copied());
    }
    if main.tls12 {
        suites.extend(main.suites.iter().copied());
    }
    let provider = CryptoProvider {
        cipher_suites: suites.clone(),
        kx_groups: main.kx_groups(),
        ..ring::default_provider()
    };
    let mut versions = Vec::new();
    if main.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if main.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let servers = port
        .confs
        .iter()
        .map(|c| match c {
            Some(c) => ServerCerts {
                certs: c.certs.iter().map(|p| Arc::clone(&p.loaded)).collect(),
                dynamic: c.dynamic.clone(),
                context: c.context,
                reject: c.reject_handshake,
                client: c.client.clone(),
            },
            None => ServerCerts::default(),
        })
        .collect();
    let resolver = SniCerts {
        servers,
        default: port.default,
        pick: port.pick,
        suites,
        vars: port.vars,
    };
    let resolver = Arc::new(resolver);
    let rejecting = resolver.servers.iter().any(|s| s.reject).then(|| Arc::clone(&resolver));
    let verifying = resolver.servers.iter().any(|s| s.client.is_some());
    let clients = verifying.then(|| Arc::clone(&resolver));
    // the CA names sent: every verifying server's, each once
    let mut subjects: Vec<&Vec<u8>> = Vec::new();
    for h in resolver
        .servers
        .iter()
        .filter_map(|s| s.client.as_ref())
        .flat_map(|c| c.hints.iter())
    {
        if !subjects.contains(&h) {
            subjects.push(h);
        }
    }
    let hints: Vec<DistinguishedName> = subjects
        .into_iter()
        .map(|h| DistinguishedName::from(h.clone()))
        .collect();
    let algs = provider.signature_verification_algorithms;
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match verifying {
        true => builder.with_client_cert_verifier(Arc::new(AskForCerts { hints, algs })),
        false => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::clone(&resolver) as Arc<dyn rustls::server::ResolvesServerCert>);
    config.ignore_client_order = main.prefer_server_ciphers;
    config.alpn_protocols = match port.h2 {
        true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    config.session_storage = match main.session_cache {
        SessionCache::Off | SessionCache::None => Arc::new(NoServerSessionStorage {}),
        SessionCache::Sessions(n) => ServerSessionMemoryCache::new(n.max(1)),
    };
    if main.session_tickets {
        config.ticketer = ticketer()?;
    }
    if main.session_cache == SessionCache::Off && !main.session_tickets {
        config.send_tls13_tickets = 0;
    }
    // `ssl_session_timeout`: a session older than it is not resumed, from a ticket or the cache
    let timeout = main.session_timeout;
    let ticketer: Arc<dyn ProducesTickets> = Arc::new(TimedTickets::new(Arc::clone(&config.ticketer), timeout));
    let storage: Arc<dyn StoresServerSessions> =
        Arc::new(TimedCache::new(Arc::clone(&config.session_storage), timeout));
    // nginx's session id context: where every server has the same, the address's config carries it
    let uniform = resolver.uniform();
    let picked = Picked::fixed(uniform.unwrap_or_default());
    config.ticketer = Arc::new(ContextTickets::new(Arc::clone(&ticketer), Arc::clone(&picked)));
    config.session_storage = Arc::new(ContextCache::new(Arc::clone(&storage), picked));
    Ok(PortTls {
        config: Arc::new(config),
        rejecting,
        clients,
        ciphers: false,
        per_conn: uniform.is_none().then_some(resolver),
        ticketer,
        storage,
    })
}
