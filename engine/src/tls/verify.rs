//! Certificate checks as OpenSSL makes them for nginx: a peer's chain up to a trusted certificate (a trusted
//! self-signed certificate may be the peer's own, X.509 v1 ones included, which webpki refuses), its depth and
//! validity times with OpenSSL's error numbers and texts, the name check of `proxy_ssl_verify` (nginx's
//! `ngx_ssl_check_host`), and a handshake signature checked against the certificate's key.

use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{DigitallySignedStruct, Error as TlsError, SignatureScheme};
use std::net::IpAddr;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::revocation_list::CertificateRevocationList;
use x509_parser::time::ASN1Time;

/// Why a chain did not verify: OpenSSL's `X509_V_ERR_*` (number and `X509_verify_cert_error_string` text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    NoIssuer,
    BadSignature,
    NotYetValid,
    Expired,
    SelfSigned,
    SelfSignedInChain,
    NoLocalIssuer,
    TooLong,
    /// Not a certificate OpenSSL would read (its key could not be decoded).
    Unreadable,
    /// `ssl_crl`: no CRL of a certificate's issuer.
    NoCrl,
    CrlNotYetValid,
    CrlExpired,
    Revoked,
}

impl VerifyError {
    /// OpenSSL's number and text.
    pub fn openssl(self) -> (u32, &'static str) {
        match self {
            VerifyError::NoIssuer => (2, "unable to get issuer certificate"),
            VerifyError::Unreadable => (6, "unable to decode issuer public key"),
            VerifyError::BadSignature => (7, "certificate signature failure"),
            VerifyError::NoCrl => (3, "unable to get certificate CRL"),
            VerifyError::NotYetValid => (9, "certificate is not yet valid"),
            VerifyError::CrlNotYetValid => (11, "CRL is not yet valid"),
            VerifyError::CrlExpired => (12, "CRL has expired"),
            VerifyError::Expired => (10, "certificate has expired"),
            VerifyError::SelfSigned => (18, "self-signed certificate"),
            VerifyError::SelfSignedInChain => (19, "self-signed certificate in certificate chain"),
            VerifyError::NoLocalIssuer => (20, "unable to get local issuer certificate"),
            VerifyError::TooLong => (22, "certificate chain too long"),
            VerifyError::Revoked => (23, "certificate revoked"),
        }
    }

    /// nginx's `ngx_ssl_verify_error_optional`: the errors `ssl_verify_client optional_no_ca` lets through (the
    /// chain's CA is not known).
    pub fn only_no_ca(self) -> bool {
        matches!(
            self,
            VerifyError::SelfSigned
                | VerifyError::SelfSignedInChain
                | VerifyError::NoIssuer
                | VerifyError::NoLocalIssuer
        )
    }
}

/// `(N:text)`, as nginx logs a verify result.
impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, text) = self.openssl();
        write!(f, "({n}:{text})")
    }
}

impl std::error::Error for VerifyError {}

/// Why an upstream's certificate was refused (carried out of the handshake in rustls's error, for nginx's
/// message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerRefused {
    /// `upstream SSL certificate verify error: (N:text)`.
    #[error("upstream SSL certificate verify error: {0}")]
    Verify(VerifyError),
    /// `upstream SSL certificate does not match "NAME"` (the name is the location's).
    #[error("upstream SSL certificate does not match")]
    Name,
}

impl PeerRefused {
    /// As the rustls error a verifier returns.
    pub fn into_rustls(self) -> TlsError {
        TlsError::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
            std::sync::Arc::new(self),
        )))
    }

    /// The refusal inside an I/O error from a handshake, if that is why it failed.
    pub fn of_io(e: &std::io::Error) -> Option<PeerRefused> {
        match e.get_ref()?.downcast_ref::<TlsError>()? {
            TlsError::InvalidCertificate(rustls::CertificateError::Other(o)) => o.0.downcast_ref().copied(),
            _ => None,
        }
    }
}

/// The most certificates a chain is walked through, whatever the depth allows (a loop of issuers ends here).
const WALK_MAX: usize = 32;

/// The most of a peer's own intermediates looked at: each step may check a signature against each of them, so
/// a hello stuffed with look-alike certificates costs a bounded number of checks.
const INTERMEDIATES_MAX: usize = 16;

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, VerifyError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|_| VerifyError::Unreadable)
}

fn times(c: &X509Certificate<'_>, now: ASN1Time) -> Result<(), VerifyError> {
    if c.validity().not_before > now {
        return Err(VerifyError::NotYetValid);
    }
    if c.validity().not_after < now {
        return Err(VerifyError::Expired);
    }
    Ok(())
}

fn issued_by(c: &X509Certificate<'_>, issuer: &X509Certificate<'_>) -> bool {
    c.issuer().as_raw() == issuer.subject().as_raw() && c.verify_signature(Some(issuer.public_key())).is_ok()
}

/// Checks `ee` (with the peer's `intermediates`) up to one of `trusted`, at most `depth` certificates between the
/// peer's and the trusted one (nginx's `*_verify_depth`), at `now`.
pub fn check_chain(
    ee: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    trusted: &[CertificateDer<'static>],
    depth: usize,
    now: UnixTime,
) -> Result<(), VerifyError> {
    check_with_crls(ee, intermediates, trusted, (depth, &[]), now)
}

/// As [`check_chain`], then (with CRLs, `ssl_crl`) every certificate of the chain against the CRL of its issuer,
/// as OpenSSL's `X509_V_FLAG_CRL_CHECK_ALL` (nginx's callback lets each error pass, so the last one found is the
/// verdict).
pub fn check_with_crls(
    ee: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    trusted: &[CertificateDer<'static>],
    (depth, crls): (usize, &[Vec<u8>]),
    now: UnixTime,
) -> Result<(), VerifyError> {
    let now = i64::try_from(now.as_secs())
        .ok()
        .and_then(|s| ASN1Time::from_timestamp(s).ok())
        .ok_or(VerifyError::Unreadable)?;
    let chain = chain_of(ee, intermediates, trusted, depth, now)?;
    if crls.is_empty() {
        return Ok(());
    }
    let lists: Vec<CertificateRevocationList<'_>> = crls
        .iter()
        .filter_map(|c| CertificateRevocationList::from_der(c).ok().map(|(_, l)| l))
        .collect();
    let mut verdict = Ok(());
    for (i, cert) in chain.iter().enumerate() {
        // the issuer is the next certificate up (a self-signed root is its own)
        let issuer = chain.get(i + 1).unwrap_or(cert);
        let list = lists
            .iter()
            .find(|l| l.issuer().as_raw() == cert.issuer().as_raw() && l.verify_signature(issuer.public_key()).is_ok());
        match list {
            None => verdict = Err(VerifyError::NoCrl),
            Some(l)
                if l.iter_revoked_certificates()
                    .any(|r| r.raw_serial() == cert.raw_serial()) =>
            {
                verdict = Err(VerifyError::Revoked)
            }
            Some(l) if l.next_update().is_some_and(|t| t < now) => verdict = Err(VerifyError::CrlExpired),
            Some(l) if l.last_update() > now => verdict = Err(VerifyError::CrlNotYetValid),
            Some(_) => {}
        }
    }
    verdict
}

/// The chain from `ee` up to a trusted certificate (and on through trusted ones to a self-signed one).
fn chain_of<'a>(
    ee: &'a CertificateDer<'_>,
    intermediates: &'a [CertificateDer<'_>],
    trusted: &'a [CertificateDer<'static>],
    depth: usize,
    now: ASN1Time,
) -> Result<Vec<X509Certificate<'a>>, VerifyError> {
    let mut chain = Vec::new();
    let anchors: Vec<X509Certificate<'_>> = trusted.iter().filter_map(|t| parse(t).ok()).collect();
    let others: Vec<X509Certificate<'_>> = intermediates
        .iter()
        .take(INTERMEDIATES_MAX)
        .filter_map(|t| parse(t).ok())
        .collect();
    let mut current = parse(ee)?;
    let mut below = 0usize;
    for _ in 0..WALK_MAX {
        let trusted_at = match anchors.iter().position(|a| a.as_raw() == current.as_raw()) {
            Some(i) => Some(i),
            None => anchors
                .iter()
                .position(|a| issued_by(&current, a))
                .inspect(|_| below += 1),
        };
        if let Some(mut top) = trusted_at {
            times(&current, now)?;
            chain.push(current.clone());
            // as OpenSSL, the chain goes on through the trusted certificates up to a self-signed one (a trusted
            // intermediate counts towards the depth)
            for _ in 0..WALK_MAX {
                let Some(t) = anchors.get(top) else { break };
                times(t, now)?;
                if t.as_raw() != current.as_raw() {
                    chain.push(t.clone());
                }
                if t.issuer().as_raw() == t.subject().as_raw() {
                    break;
                }
                match anchors.iter().position(|a| a.as_raw() != t.as_raw() && issued_by(t, a)) {
                    Some(up) => {
                        below += 1;
                        top = up;
                    }
                    None => break,
                }
            }
            return (below <= depth.saturating_add(1))
                .then_some(chain)
                .ok_or(VerifyError::TooLong);
        }
        if current.issuer().as_raw() == current.subject().as_raw() {
            // self-issued and not trusted
            return Err(match below {
                0 => VerifyError::SelfSigned,
                _ => VerifyError::SelfSignedInChain,
            });
        }
        let Some(next) = others.iter().find(|o| issued_by(&current, o)) else {
            return Err(
                match anchors
                    .iter()
                    .any(|a| a.subject().as_raw() == current.issuer().as_raw())
                {
                    true => VerifyError::BadSignature,
                    false if below == 0 => VerifyError::NoLocalIssuer,
                    false => VerifyError::NoIssuer,
                },
            );
        };
        times(&current, now)?;
        chain.push(current.clone());
        below += 1;
        if below > depth.saturating_add(1) {
            return Err(VerifyError::TooLong);
        }
        current = next.clone();
    }
    Err(VerifyError::TooLong)
}

/// Whether the certificate `ee` is for `name` (nginx's `X509_check_host` / `X509_check_ip_asc`): its DNS
/// subject alternative names when it has any (a `*.` first label stands for one label), else its common names;
/// an address matches an IP subject alternative name.
pub fn matches_name(ee: &CertificateDer<'_>, name: &str) -> bool {
    let Ok(cert) = parse(ee) else {
        return false;
    };
    let sans: Vec<GeneralName<'_>> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|e| e.value.general_names.clone())
        .unwrap_or_default();
    if let Ok(ip) = name.parse::<IpAddr>() {
        let octets = match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        return sans
            .iter()
            .any(|g| matches!(g, GeneralName::IPAddress(b) if *b == octets.as_slice()));
    }
    let dns: Vec<&str> = sans
        .iter()
        .filter_map(|g| match g {
            GeneralName::DNSName(n) => Some(*n),
            _ => None,
        })
        .collect();
    if !dns.is_empty() {
        return dns.iter().any(|p| host_matches(p, name));
    }
    let found = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| host_matches(cn, name));
    found
}

/// One certificate name against a host name, without case; `*.rest` matches one label before `rest`.
fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    let Some(rest) = pattern.strip_prefix("*.") else {
        return false;
    };
    match host.split_once('.') {
        Some((label, tail)) => !label.is_empty() && tail.eq_ignore_ascii_case(rest) && rest.contains('.'),
        None => false,
    }
}

/// Checks a handshake signature `dss` over `message` with the key of the certificate `cert` (any version).
pub fn signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<(), TlsError> {
    let bad = || TlsError::InvalidCertificate(rustls::CertificateError::BadSignature);
    let parsed = parse(cert).map_err(|_| TlsError::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
    let key = &parsed.public_key().subject_public_key.data;
    let (_, candidates) = algs
        .mapping
        .iter()
        .find(|(s, _)| *s == dss.scheme)
        .ok_or(TlsError::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        ))?;
    candidates
        .iter()
        .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok())
        .then_some(())
        .ok_or_else(bad)
}

/// The schemes [`signature`] checks.
pub fn schemes(algs: &WebPkiSupportedAlgorithms) -> Vec<SignatureScheme> {
    algs.supported_schemes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> rcgen::KeyPair {
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap()
    }

    fn ca(cn: &str) -> rcgen::CertificateParams {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p
    }

    fn der(c: &rcgen::Certificate) -> CertificateDer<'static> {
        CertificateDer::from(c.der().to_vec())
    }

    #[test]
    fn chains_verify_as_openssl_s() {
        let now = UnixTime::now();
        let (rk, ik, lk) = (key(), key(), key());
        let root = ca("root").self_signed(&rk).unwrap();
        let int = ca("int").signed_by(&ik, &root, &rk).unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["leaf.test".to_string()])
            .unwrap()
            .signed_by(&lk, &int, &ik)
            .unwrap();
        let trusted = [der(&root)];
        // the peer's own trusted certificate, and a leaf through its intermediate
        assert_eq!(check_chain(&der(&root), &[], &trusted, 0, now), Ok(()));
        assert_eq!(check_chain(&der(&leaf), &[der(&int)], &trusted, 1, now), Ok(()));
        assert_eq!(
            check_chain(&der(&leaf), &[der(&int)], &trusted, 0, now),
            Err(VerifyError::TooLong)
        );
        // without the intermediate, or trusting nothing it reaches
        assert_eq!(
            check_chain(&der(&leaf), &[], &trusted, 1, now),
            Err(VerifyError::NoLocalIssuer)
        );
        assert_eq!(
            check_chain(&der(&root), &[], &[der(&int)], 1, now),
            Err(VerifyError::SelfSigned)
        );
        assert_eq!(
            check_chain(&der(&int), &[der(&root)], &[der(&leaf)], 1, now),
            Err(VerifyError::SelfSignedInChain)
        );
        // a trusted intermediate still counts towards the depth up to its root
        let both = [der(&root), der(&int)];
        assert_eq!(check_chain(&der(&leaf), &[], &both, 0, now), Err(VerifyError::TooLong));
        assert_eq!(check_chain(&der(&leaf), &[], &both, 1, now), Ok(()));
        // garbage is no certificate
        assert_eq!(
            check_chain(&CertificateDer::from(vec![0x30, 0x03, 1, 2, 3]), &[], &trusted, 1, now),
            Err(VerifyError::Unreadable)
        );
        let mut old = rcgen::CertificateParams::new(vec!["old.test".to_string()]).unwrap();
        old.not_before = rcgen::date_time_ymd(2001, 1, 1);
        old.not_after = rcgen::date_time_ymd(2002, 1, 1);
        let old = old.self_signed(&lk).unwrap();
        assert_eq!(
            check_chain(&der(&old), &[], &[der(&old)], 1, now),
            Err(VerifyError::Expired)
        );
    }

    #[test]
    fn crls_revoke_and_are_needed_for_every_certificate() {
        let now = UnixTime::now();
        let (rk, lk) = (key(), key());
        let mut root_params = ca("root");
        root_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let root = root_params.self_signed(&rk).unwrap();
        let mut leaf_params = rcgen::CertificateParams::new(vec!["leaf.test".to_string()]).unwrap();
        leaf_params.serial_number = Some(rcgen::SerialNumber::from(vec![7]));
        let leaf = leaf_params.signed_by(&lk, &root, &rk).unwrap();
        let mut other_params = ca("other");
        other_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let ok = key();
        let other = other_params.self_signed(&ok).unwrap();
        let crl_by = |revoked: &[u8], issuer: &rcgen::Certificate, issuer_key: &rcgen::KeyPair| {
            rcgen::CertificateRevocationListParams {
                this_update: rcgen::date_time_ymd(2020, 1, 1),
                next_update: rcgen::date_time_ymd(2100, 1, 1),
                crl_number: rcgen::SerialNumber::from(1u64),
                issuing_distribution_point: None,
                revoked_certs: revoked
                    .iter()
                    .map(|s| rcgen::RevokedCertParams {
                        serial_number: rcgen::SerialNumber::from(vec![*s]),
                        revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                        reason_code: None,
                        invalidity_date: None,
                    })
                    .collect(),
                key_identifier_method: rcgen::KeyIdMethod::Sha256,
            }
            .signed_by(issuer, issuer_key)
            .unwrap()
            .der()
            .to_vec()
        };
        let crl = |revoked: &[u8]| crl_by(revoked, &root, &rk);
        let trusted = [der(&root)];
        let check = |crls: &[Vec<u8>]| check_with_crls(&der(&leaf), &[], &trusted, (1, crls), now);
        assert_eq!(check(&[crl(&[])]), Ok(()));
        assert_eq!(check(&[crl(&[7])]), Err(VerifyError::Revoked));
        assert_eq!(check(&[crl(&[8])]), Ok(()));
        let stale = {
            let p = rcgen::CertificateRevocationListParams {
                this_update: rcgen::date_time_ymd(2001, 1, 1),
                next_update: rcgen::date_time_ymd(2002, 1, 1),
                crl_number: rcgen::SerialNumber::from(2u64),
                issuing_distribution_point: None,
                revoked_certs: Vec::new(),
                key_identifier_method: rcgen::KeyIdMethod::Sha256,
            };
            p.signed_by(&root, &rk).unwrap().der().to_vec()
        };
        assert_eq!(check(&[stale]), Err(VerifyError::CrlExpired));
        // a CRL of another issuer is none of this chain's: OpenSSL's `unable to get certificate CRL`
        assert_eq!(check(&[crl_by(&[], &other, &ok)]), Err(VerifyError::NoCrl));
        assert_eq!(check(&[]), Ok(()), "no ssl_crl: no CRL check");
        assert_eq!(VerifyError::Revoked.to_string(), "(23:certificate revoked)");
    }

    #[test]
    fn names_match_the_alternative_names_else_the_common_name() {
        let k = key();
        let san = rcgen::CertificateParams::new(vec!["*.example.com".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .self_signed(&k)
            .unwrap();
        assert!(matches_name(&der(&san), "a.example.com"));
        assert!(matches_name(&der(&san), "127.0.0.1"));
        assert!(!matches_name(&der(&san), "127.0.0.2"));
        assert!(!matches_name(&der(&san), "rcgen self signed cert"));
        let cn = ca("cn.test").self_signed(&k).unwrap();
        assert!(matches_name(&der(&cn), "cn.test"));
        assert!(!matches_name(&der(&cn), "other.test"));
        assert_eq!(VerifyError::SelfSigned.to_string(), "(18:self-signed certificate)");
    }

    #[test]
    fn a_wildcard_stands_for_one_label() {
        assert!(host_matches("*.example.com", "foo.example.com"));
        assert!(!host_matches("*.example.com", "no.match.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.com", "example.com"));
        assert!(host_matches("Example.COM", "example.com"));
    }
}
