//! The rustls `ClientConfig` of a location that proxies to `https`, built at load from its `proxy_ssl_*`: the
//! name sent (SNI) and checked, the chain checked against `proxy_ssl_trusted_certificate` as OpenSSL checks it
//! (or not at all: `proxy_ssl_verify off`), the client certificate, protocols, suites and session reuse.

use super::server_config::TlsError;
use super::verify::{self, PeerRefused};
use crate::config::proxy_tls::ProxyTlsConf;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::{ring, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};
use std::net::IpAddr;
use std::sync::Arc;

/// What a location's upstream connections are opened with.
#[derive(Debug)]
pub struct UpstreamTls {
    pub config: Arc<ClientConfig>,
    /// The name given to the session (an address sends no SNI; neither does `proxy_ssl_server_name off`).
    pub name: ServerName<'static>,
    /// The name as nginx's messages write it (`proxy_ssl_name`, or `$proxy_host` without its port).
    pub name_text: String,
}

/// nginx's `ngx_http_upstream_ssl_name`: the name without a port (`host:port`, `[v6]:port`).
fn without_port(name: &str) -> &str {
    let after = match name.starts_with('[') {
        true => name.find(']').unwrap_or(0),
        false => 0,
    };
    match name.get(after..).and_then(|r| r.find(':')) {
        Some(i) => name.get(..after + i).unwrap_or(name),
        None => name,
    }
}

/// Builds the TLS side of a location's upstream connections to `proxy_host` (its `$proxy_host`).
pub fn upstream_tls(conf: &ProxyTlsConf, proxy_host: &str) -> Result<UpstreamTls, TlsError> {
    let name_text = without_port(conf.name.as_deref().unwrap_or(proxy_host)).to_string();
    let bare = name_text.trim_start_matches('[').trim_end_matches(']');
    let name = match bare.parse::<IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(name_text.clone())
            .map_err(|_| TlsError::Rustls(format!("\"{name_text}\" is not a host name corelb can send upstream")))?,
    };
    let mut suites = Vec::new();
    if conf.tls13 {
        suites.extend(ring::ALL_CIPHER_SUITES.iter().filter(|s| s.tls13().is_some()).copied());
    }
    if conf.tls12 {
        suites.extend(conf.suites.iter().copied());
    }
    let provider = CryptoProvider {
        cipher_suites: suites,
        ..ring::default_provider()
    };
    let mut versions = Vec::new();
    if conf.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if conf.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let verifier = UpstreamVerifier {
        verify: conf.verify,
        trusted: conf.trusted.clone(),
        crls: conf.crls.clone(),
        depth: conf.depth,
        name: name_text.clone(),
        algs: provider.signature_verification_algorithms,
    };
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut config = match &conf.client {
        Some(key) => builder.with_client_cert_resolver(Arc::new(ClientCert(Arc::clone(key)))),
        None => builder.with_no_client_auth(),
    };
    config.enable_sni = conf.server_name;
    if !conf.session_reuse {
        config.resumption = Resumption::disabled();
    }
    Ok(UpstreamTls {
        config: Arc::new(config),
        name,
        name_text,
    })
}

/// `proxy_ssl_certificate`: sent whenever the upstream asks.
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _issuers: &[&[u8]], schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.0.key.choose_scheme(schemes).map(|_| Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// `proxy_ssl_verify` as OpenSSL and nginx make it: the chain to a trusted certificate within the depth, then
/// the name; off, any certificate is taken (its key still has to sign the handshake).
#[derive(Debug)]
struct UpstreamVerifier {
    verify: bool,
    trusted: Vec<CertificateDer<'static>>,
    crls: Vec<Vec<u8>>,
    depth: usize,
    name: String,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for UpstreamVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self.verify {
            verify::check_with_crls(end_entity, intermediates, &self.trusted, (self.depth, &self.crls), now)
                .map_err(|e| PeerRefused::Verify(e).into_rustls())?;
            if !verify::matches_name(end_entity, &self.name) {
                return Err(PeerRefused::Name.into_rustls());
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify::signature(message, cert, dss, &self.algs).map(|()| HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify::signature(message, cert, dss, &self.algs).map(|()| HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        verify::schemes(&self.algs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_loses_its_port_as_nginx_s() {
        assert_eq!(without_port("backend:123"), "backend");
        assert_eq!(without_port("backend"), "backend");
        assert_eq!(without_port("[::1]:8081"), "[::1]");
        assert_eq!(without_port("127.0.0.1:8081"), "127.0.0.1");
    }
}
