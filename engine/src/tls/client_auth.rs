//! Client certificates (`ssl_verify_client`) as nginx has them: the handshake asks for a certificate (sending the
//! CA names of `ssl_client_certificate`) and takes whatever comes, its key still proven by the handshake's
//! signature; once the handshake is done, the certificate is checked against the trusted certificates of the
//! server the SNI picked, and the verdict waits in the connection's facts for `$ssl_client_verify` and for the
//! request's server to answer nginx's 400 pages.

use super::resolve::SniCerts;
use super::verify::{self, VerifyError};
use crate::config::tls::VerifyClient;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

/// The verifier of a TLS address where some server has `ssl_verify_client`: every handshake there is asked for a
/// certificate, none is required by the handshake itself.
#[derive(Debug)]
pub struct AskForCerts {
    pub hints: Vec<DistinguishedName>,
    pub algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AskForCerts {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        Ok(ClientCertVerified::assertion())
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

/// What a connection's client certificate came to (`$ssl_client_verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// None was sent (or the handshake's server does not verify clients): `NONE`.
    #[default]
    None,
    /// `SUCCESS`.
    Success,
    /// `FAILED:reason`.
    Failed(VerifyError),
}

/// The verdict on the certificate chain `peer` (the client's first) for a handshake naming `sni`, at `now`.
pub fn verdict(
    certs: &SniCerts,
    sni: Option<&str>,
    peer: Option<&[CertificateDer<'static>]>,
    now: UnixTime,
) -> Verdict {
    let Some((ee, rest)) = peer.and_then(|p| p.split_first()) else {
        return Verdict::None;
    };
    let Some(client) = certs.client_of(sni) else {
        return Verdict::None;
    };
    match verify::check_with_crls(ee, rest, &client.trusted, (client.depth, &client.crls), now) {
        Ok(()) => Verdict::Success,
        Err(e) => Verdict::Failed(e),
    }
}

/// Why a request on a connection with `verdict` is refused by a server with `mode` (nginx's
/// `ngx_http_process_request`): `Some(495)` the certificate error, `Some(496)` no certificate sent.
pub fn refusal(mode: VerifyClient, verdict: Verdict) -> Option<u16> {
    match verdict {
        Verdict::Failed(e) if mode == VerifyClient::OptionalNoCa && e.only_no_ca() => None,
        Verdict::Failed(_) => Some(495),
        Verdict::None if mode == VerifyClient::On => Some(496),
        _ => None,
    }
}

/// nginx's checks of a request on a TLS connection (`facts`) whose `Host` picked a server with `mode`: 421 when
/// the `Host` is not the name the handshake negotiated (`ngx_http_set_virtual_server`), then 495 or 496 as
/// [`refusal`] says; each logged at `info` as nginx logs it.
pub fn request_refusal(mode: VerifyClient, facts: &super::TlsFacts, host: Option<&[u8]>) -> Option<u16> {
    let sni = facts.server_name.as_bytes();
    if !sni.is_empty() && !host.is_some_and(|h| h.eq_ignore_ascii_case(sni)) {
        crate::log_info!(
            "client attempted to request the server name different from the one that was negotiated while reading \
             client request headers"
        );
        return Some(421);
    }
    let code = refusal(mode, facts.client)?;
    match facts.client {
        Verdict::Failed(e) => {
            crate::log_info!("client SSL certificate verify error: {e} while reading client request headers")
        }
        _ => crate::log_info!("client sent no required SSL certificate while reading client request headers"),
    }
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_refuse_as_nginx_s() {
        let failed = Verdict::Failed(VerifyError::SelfSigned);
        let expired = Verdict::Failed(VerifyError::Expired);
        assert_eq!(refusal(VerifyClient::On, Verdict::None), Some(496));
        assert_eq!(refusal(VerifyClient::On, failed), Some(495));
        assert_eq!(refusal(VerifyClient::On, Verdict::Success), None);
        assert_eq!(refusal(VerifyClient::Optional, Verdict::None), None);
        assert_eq!(refusal(VerifyClient::Optional, failed), Some(495));
        assert_eq!(refusal(VerifyClient::OptionalNoCa, failed), None);
        assert_eq!(refusal(VerifyClient::OptionalNoCa, expired), Some(495));
    }
}
