//! Reading the `proxy_ssl_*` directives of http, server and location blocks (merged as nginx merges them), and,
//! for a location that proxies to `https`, loading its trusted and client certificates with nginx's checks.

use super::{arg, directive_err, flag_slot, set_once, Build};
use crate::config::error::ConfigError;
use crate::config::model::Span;
use crate::config::parser::Directive;
use crate::config::proxy_tls::ProxyTlsConf;
use crate::config::tls::{self, TLS12_SUITES};
use rustls::SupportedCipherSuite;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use std::path::Path;

/// The directives read here.
pub const NAMES: &[&str] = &[
    "proxy_ssl_verify",
    "proxy_ssl_verify_depth",
    "proxy_ssl_trusted_certificate",
    "proxy_ssl_name",
    "proxy_ssl_server_name",
    "proxy_ssl_certificate",
    "proxy_ssl_certificate_key",
    "proxy_ssl_protocols",
    "proxy_ssl_ciphers",
    "proxy_ssl_session_reuse",
    "proxy_ssl_crl",
    "proxy_ssl_password_file",
];

/// What one level sets.
#[derive(Debug, Clone, Default)]
pub struct ProxyTlsLayer {
    verify: Option<bool>,
    depth: Option<u64>,
    trusted: Option<(String, Span)>,
    crl: Option<(String, Span)>,
    name: Option<String>,
    server_name: Option<bool>,
    certificate: Option<(String, Span)>,
    key: Option<String>,
    password_file: Option<String>,
    protocols: Option<(bool, bool)>,
    suites: Option<Vec<SupportedCipherSuite>>,
    session_reuse: Option<bool>,
}

impl ProxyTlsLayer {
    /// Reads `d` (one of [`NAMES`]).
    pub fn directive(&mut self, _b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
        let at = || (arg(d, 0).to_string(), d.span.clone());
        if matches!(d.name.as_str(), "proxy_ssl_certificate" | "proxy_ssl_certificate_key") && arg(d, 0).contains('$') {
            let msg = format!("\"{}\" with variables is not supported by corelb", d.name);
            return Err(ConfigError::invalid(msg, &d.span));
        }
        match d.name.as_str() {
            "proxy_ssl_verify" => flag_slot(&mut self.verify, d)?,
            "proxy_ssl_verify_depth" => {
                let n = arg(d, 0).parse().map_err(|_| directive_err(d, "invalid number"))?;
                set_once(&mut self.depth, d, n)?;
            }
            "proxy_ssl_trusted_certificate" => set_once(&mut self.trusted, d, at())?,
            "proxy_ssl_crl" => set_once(&mut self.crl, d, at())?,
            "proxy_ssl_name" => {
                let name = arg(d, 0);
                if name.contains('$') {
                    return Err(ConfigError::invalid(
                        "\"proxy_ssl_name\" with variables is not supported by corelb",
                        &d.span,
                    ));
                }
                set_once(&mut self.name, d, name.to_string())?;
            }
            "proxy_ssl_server_name" => flag_slot(&mut self.server_name, d)?,
            "proxy_ssl_certificate" => set_once(&mut self.certificate, d, at())?,
            "proxy_ssl_certificate_key" => set_once(&mut self.key, d, arg(d, 0).to_string())?,
            "proxy_ssl_password_file" => set_once(&mut self.password_file, d, arg(d, 0).to_string())?,
            "proxy_ssl_protocols" => set_once(&mut self.protocols, d, super::tls::protocols(d)?)?,
            "proxy_ssl_ciphers" => set_once(&mut self.suites, d, super::tls::ciphers(d)?)?,
            "proxy_ssl_session_reuse" => flag_slot(&mut self.session_reuse, d)?,
            _ => {
                return Err(ConfigError::NotAllowedHere {
                    name: d.name.clone(),
                    at: d.span.clone(),
                })
            }
        }
        Ok(())
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &ProxyTlsLayer) -> ProxyTlsLayer {
        ProxyTlsLayer {
            verify: self.verify.or(parent.verify),
            depth: self.depth.or(parent.depth),
            trusted: self.trusted.clone().or_else(|| parent.trusted.clone()),
            crl: self.crl.clone().or_else(|| parent.crl.clone()),
            name: self.name.clone().or_else(|| parent.name.clone()),
            server_name: self.server_name.or(parent.server_name),
            certificate: self.certificate.clone().or_else(|| parent.certificate.clone()),
            key: self.key.clone().or_else(|| parent.key.clone()),
            password_file: self.password_file.clone().or_else(|| parent.password_file.clone()),
            protocols: self.protocols.or(parent.protocols),
            suites: self.suites.clone().or_else(|| parent.suites.clone()),
            session_reuse: self.session_reuse.or(parent.session_reuse),
        }
    }

    /// The merged settings with nginx's defaults, files loaded relative to `conf_dir` (the location at `loc`
    /// proxies to `https`).
    pub fn conf(&self, conf_dir: &Path, loc: &Span) -> Result<ProxyTlsConf, ConfigError> {
        let verify = self.verify.unwrap_or(false);
        let trusted = match &self.trusted {
            Some((file, at)) => load_trusted(&conf_dir.join(file), at)?,
            None if verify => {
                return Err(ConfigError::invalid(
                    "no proxy_ssl_trusted_certificate for proxy_ssl_verify",
                    loc,
                ));
            }
            None => Vec::new(),
        };
        let client = match &self.certificate {
            Some((cert, at)) => {
                let Some(key) = &self.key else {
                    return Err(ConfigError::invalid(
                        format!("no \"proxy_ssl_certificate_key\" is defined for certificate \"{cert}\""),
                        loc,
                    ));
                };
                let passwords = match &self.password_file {
                    Some(file) => tls::read_passwords(&conf_dir.join(file)).map_err(|m| ConfigError::invalid(m, at))?,
                    None => Vec::new(),
                };
                let pair = tls::load_pair_with(&conf_dir.join(cert), &conf_dir.join(key), &passwords);
                Some(pair.map_err(|m| ConfigError::invalid(m, at))?)
            }
            None => None,
        };
        let (tls12, tls13) = self.protocols.unwrap_or((true, true));
        let crls = match &self.crl {
            Some((file, at)) => super::tls::load_crls(&conf_dir.join(file), at)?,
            None => Vec::new(),
        };
        Ok(ProxyTlsConf {
            verify,
            crls,
            depth: self.depth.map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            trusted,
            name: self.name.clone(),
            server_name: self.server_name.unwrap_or(false),
            client,
            tls12,
            tls13,
            suites: self
                .suites
                .clone()
                .unwrap_or_else(|| TLS12_SUITES.iter().map(|(_, s)| *s).collect()),
            session_reuse: self.session_reuse.unwrap_or(true),
        })
    }
}

/// The certificates of a PEM file of trusted CAs (`SSL_CTX_load_verify_locations`).
pub fn load_trusted(path: &Path, at: &Span) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let p = path.display();
    let pem = std::fs::read(path).map_err(|e| {
        ConfigError::invalid(
            format!("SSL_CTX_load_verify_locations(\"{p}\") failed (SSL: error:80000002:system library::{e})"),
            at,
        )
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    if certs.is_empty() {
        return Err(ConfigError::invalid(
            format!("SSL_CTX_load_verify_locations(\"{p}\") failed (SSL: error:05880009:x509 certificate routines::PEM lib)"),
            at,
        ));
    }
    Ok(certs)
}
