//! Reading the `ssl_*` directives of http and server blocks (merged server over http as nginx merges them), then,
//! once the block is read, loading each server's certificates and nginx's checks (`no "ssl_certificate" is
//! defined for the "listen ... ssl" directive`).

use super::vars::{Module, Vars};
use super::{arg, directive_err, flag_slot, set_once, value, Build};
use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::model::{HttpServer, Span};
use crate::config::parser::Directive;
use crate::config::tls::{
    self, CertPair, ClientVerify, DynamicCerts, SessionCache, SessionContext, TlsConf, VerifyClient, KX_GROUPS,
    TLS12_SUITES,
};
use rustls::SupportedCipherSuite;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The directives read here.
pub const NAMES: &[&str] = &[
    "ssl_certificate",
    "ssl_certificate_key",
    "ssl_protocols",
    "ssl_ciphers",
    "ssl_prefer_server_ciphers",
    "ssl_ecdh_curve",
    "ssl_session_cache",
    "ssl_session_timeout",
    "ssl_session_tickets",
    "ssl_dhparam",
    "ssl_reject_handshake",
    "ssl_password_file",
    "ssl_stapling",
    "ssl_stapling_verify",
    "ssl_verify_client",
    "ssl_client_certificate",
    "ssl_trusted_certificate",
    "ssl_verify_depth",
    "ssl_crl",
];

/// One `ssl_certificate` or `ssl_certificate_key` line: its name, place, and its template when it names a variable.
type Line = (String, Span, Option<KeyTemplate>);

/// What one level (http or server) sets.
#[derive(Debug, Clone, Default)]
pub struct TlsLayer {
    certificates: Option<Vec<Line>>,
    keys: Option<Vec<Line>>,
    protocols: Option<(bool, bool)>,
    suites: Option<Vec<SupportedCipherSuite>>,
    prefer_server_ciphers: Option<bool>,
    groups: Option<Vec<rustls::NamedGroup>>,
    session_cache: Option<SessionCache>,
    session_timeout: Option<Duration>,
    session_tickets: Option<bool>,
    reject_handshake: Option<bool>,
    stapling: Option<bool>,
    stapling_verify: Option<bool>,
    dhparam: Option<String>,
    password_file: Option<String>,
    verify_client: Option<Option<VerifyClient>>,
    client_certificate: Option<(String, Span)>,
    trusted_certificate: Option<(String, Span)>,
    verify_depth: Option<u64>,
    crl: Option<(String, Span)>,
}

impl TlsLayer {
    /// Reads `d` (one of [`NAMES`]) in `module`'s block, whose `vars` compile certificate names with variables.
    pub fn directive(
        &mut self,
        b: &mut Build,
        d: &Directive,
        vars: &mut Vars,
        module: Module,
    ) -> Result<(), ConfigError> {
        let template = match (d.name.as_str(), arg(d, 0).contains('$')) {
            ("ssl_certificate" | "ssl_certificate_key", true) => Some(vars.compile(arg(d, 0), module, &d.span)?),
            _ => None,
        };
        match d.name.as_str() {
            "ssl_certificate" => push(&mut self.certificates, d, template),
            "ssl_certificate_key" => push(&mut self.keys, d, template),
            "ssl_protocols" => set_once(&mut self.protocols, d, protocols(d)?)?,
            "ssl_ciphers" => set_once(&mut self.suites, d, ciphers(d)?)?,
            "ssl_prefer_server_ciphers" => flag_slot(&mut self.prefer_server_ciphers, d)?,
            "ssl_ecdh_curve" => set_once(&mut self.groups, d, curves(d)?)?,
            "ssl_session_cache" => set_once(&mut self.session_cache, d, session_cache(d)?)?,
            "ssl_session_timeout" => {
                let t = value::parse_sec(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
                set_once(&mut self.session_timeout, d, t)?;
            }
            "ssl_session_tickets" => flag_slot(&mut self.session_tickets, d)?,
            "ssl_reject_handshake" => flag_slot(&mut self.reject_handshake, d)?,
            "ssl_stapling" => {
                flag_slot(&mut self.stapling, d)?;
                if self.stapling == Some(true) {
                    b.warn("\"ssl_stapling\" is not supported by corelb, ignored", &d.span);
                }
            }
            "ssl_stapling_verify" => flag_slot(&mut self.stapling_verify, d)?,
            "ssl_verify_client" => {
                let mode = match arg(d, 0) {
                    "on" => Some(VerifyClient::On),
                    "off" => None,
                    "optional" => Some(VerifyClient::Optional),
                    "optional_no_ca" => Some(VerifyClient::OptionalNoCa),
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                };
                set_once(&mut self.verify_client, d, mode)?;
            }
            "ssl_client_certificate" => {
                set_once(&mut self.client_certificate, d, (arg(d, 0).to_string(), d.span.clone()))?;
            }
            "ssl_trusted_certificate" => {
                set_once(
                    &mut self.trusted_certificate,
                    d,
                    (arg(d, 0).to_string(), d.span.clone()),
                )?;
            }
            "ssl_crl" => set_once(&mut self.crl, d, (arg(d, 0).to_string(), d.span.clone()))?,
            "ssl_verify_depth" => {
                let n = arg(d, 0).parse().map_err(|_| directive_err(d, "invalid number"))?;
                set_once(&mut self.verify_depth, d, n)?;
            }
            // read and checked at load, unused: TLS 1.3 and ECDHE do not use DH parameters (docs/directives.md)
            "ssl_dhparam" => set_once(&mut self.dhparam, d, arg(d, 0).to_string())?,
            "ssl_password_file" => {
                let path = arg(d, 0);
                let full = b.prefix.join(path);
                if let Err(e) = std::fs::metadata(&full) {
                    return Err(ConfigError::invalid(
                        format!("open() \"{}\" failed ({e})", full.display()),
                        &d.span,
                    ));
                }
                set_once(&mut self.password_file, d, path.to_string())?;
            }
            _ => {
                return Err(ConfigError::NotAllowedHere {
                    name: d.name.clone(),
                    at: d.span.clone(),
                })
            }
        }
        Ok(())
    }

    /// These settings over `parent`'s (nginx's merge: a level's own value wins, else the parent's).
    pub fn over(&self, parent: &TlsLayer) -> TlsLayer {
        TlsLayer {
            certificates: self.certificates.clone().or_else(|| parent.certificates.clone()),
            keys: self.keys.clone().or_else(|| parent.keys.clone()),
            protocols: self.protocols.or(parent.protocols),
            suites: self.suites.clone().or_else(|| parent.suites.clone()),
            prefer_server_ciphers: self.prefer_server_ciphers.or(parent.prefer_server_ciphers),
            groups: self.groups.clone().or_else(|| parent.groups.clone()),
            session_cache: self.session_cache.or(parent.session_cache),
            session_timeout: self.session_timeout.or(parent.session_timeout),
            session_tickets: self.session_tickets.or(parent.session_tickets),
            reject_handshake: self.reject_handshake.or(parent.reject_handshake),
            stapling: self.stapling.or(parent.stapling),
            stapling_verify: self.stapling_verify.or(parent.stapling_verify),
            dhparam: self.dhparam.clone().or_else(|| parent.dhparam.clone()),
            password_file: self.password_file.clone().or_else(|| parent.password_file.clone()),
            verify_client: self.verify_client.or(parent.verify_client),
            client_certificate: self
                .client_certificate
                .clone()
                .or_else(|| parent.client_certificate.clone()),
            trusted_certificate: self
                .trusted_certificate
                .clone()
                .or_else(|| parent.trusted_certificate.clone()),
            verify_depth: self.verify_depth.or(parent.verify_depth),
            crl: self.crl.clone().or_else(|| parent.crl.clone()),
        }
    }

    /// The merged settings of the stream server at `server`; one that listens with `ssl` needs a certificate (or
    /// `ssl_reject_handshake on`), another has settings only with them.
    pub fn stream_conf(
        &self,
        conf_dir: &Path,
        server: &Span,
        listen_ssl: bool,
    ) -> Result<Option<TlsConf>, ConfigError> {
        self.conf(conf_dir, listen_ssl.then_some(server), listen_ssl, Module::Stream)
    }

    /// The merged settings with nginx's defaults, certificates loaded relative to `conf_dir`; `None` for a server
    /// that neither listens with `ssl` nor has a certificate or `ssl_reject_handshake on`. A server that is not
    /// the default of a TLS address (`needs_certs` false) may have no certificate of its own (it serves the
    /// default server's, as nginx).
    fn conf(
        &self,
        conf_dir: &Path,
        listen_ssl: Option<&Span>,
        needs_certs: bool,
        module: Module,
    ) -> Result<Option<TlsConf>, ConfigError> {
        let reject = self.reject_handshake.unwrap_or(false);
        let certs = self.certificates.as_deref().unwrap_or_default();
        if certs.is_empty() && !reject {
            match listen_ssl {
                Some(at) if needs_certs => {
                    return Err(ConfigError::invalid(
                        "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive",
                        at,
                    ))
                }
                Some(_) => {}
                None => return Ok(None),
            }
        }
        let d = TlsConf::defaults();
        let keys = self.keys.as_deref().unwrap_or_default();
        // nginx reads the passwords where a server has certificates (a fifo is read once, as there)
        let passwords = match (&self.password_file, certs.first()) {
            (Some(file), Some((_, at, _))) => {
                tls::read_passwords(&full(conf_dir, file)).map_err(|m| ConfigError::invalid(m, at))?
            }
            _ => Vec::new(),
        };
        for (i, (cert, at, _)) in certs.iter().enumerate() {
            if keys.get(i).is_none() {
                return Err(ConfigError::invalid(
                    format!("no \"ssl_certificate_key\" is defined for certificate \"{cert}\""),
                    at,
                ));
            }
        }
        // nginx: a line with a variable makes every line of the server one evaluated at the handshake
        let with_vars = certs.iter().chain(keys).any(|l| l.2.is_some());
        let template = |l: &Line| l.2.clone().unwrap_or_else(|| KeyTemplate::literal(&l.0));
        let dynamic = with_vars.then(|| {
            Arc::new(DynamicCerts {
                pairs: certs
                    .iter()
                    .zip(keys)
                    .map(|(c, k)| (template(c), template(k)))
                    .collect(),
                prefix: conf_dir.to_path_buf(),
                passwords: passwords.clone(),
            })
        });
        let mut pairs = Vec::with_capacity(certs.len());
        for ((cert, at, _), (key, _, _)) in certs.iter().zip(keys).filter(|_| !with_vars) {
            let cert_path = full(conf_dir, cert);
            let key_path = full(conf_dir, key);
            let loaded =
                tls::load_pair_with(&cert_path, &key_path, &passwords).map_err(|m| ConfigError::invalid(m, at))?;
            pairs.push(CertPair {
                cert: cert_path,
                key: key_path,
                loaded,
            });
        }
        if let Some(dh) = &self.dhparam {
            let path = full(conf_dir, dh);
            if let Err(e) = std::fs::metadata(&path) {
                let p = path.display();
                let msg = format!(
                    "BIO_new_file(\"{p}\") failed (SSL: error:80000002:system library::{}:calling fopen({p}, r) \
                     error:10000080:BIO routines::no such file)",
                    if e.kind() == std::io::ErrorKind::NotFound {
                        "No such file or directory"
                    } else {
                        "Permission denied"
                    }
                );
                let at = certs.first().map_or_else(
                    || listen_ssl.cloned().unwrap_or_else(Span::command_line),
                    |c| c.1.clone(),
                );
                return Err(ConfigError::invalid(msg, &at));
            }
        }
        let (tls12, tls13) = self.protocols.unwrap_or((d.tls12, d.tls13));
        // nginx checks a server's `ssl_verify_client` only where it has certificates of its own
        let client = self.client_verify(conf_dir, listen_ssl, !pairs.is_empty() || with_vars)?;
        let context = session_context(module, &pairs, dynamic.is_some().then_some(certs), client.as_deref());
        Ok(Some(TlsConf {
            certs: pairs,
            dynamic,
            context,
            tls12,
            tls13,
            suites: self.suites.clone().unwrap_or(d.suites),
            prefer_server_ciphers: self.prefer_server_ciphers.unwrap_or(d.prefer_server_ciphers),
            groups: self.groups.clone().unwrap_or(d.groups),
            session_cache: self.session_cache.unwrap_or(d.session_cache),
            session_timeout: self.session_timeout.unwrap_or(d.session_timeout),
            session_tickets: self.session_tickets.unwrap_or(d.session_tickets),
            reject_handshake: reject,
            client,
        }))
    }

    /// `ssl_verify_client` with its certificates loaded; nginx's `no ssl_client_certificate for
    /// ssl_verify_client` when `on` or `optional` has nothing to verify against.
    fn client_verify(
        &self,
        conf_dir: &Path,
        at: Option<&Span>,
        checked: bool,
    ) -> Result<Option<Arc<ClientVerify>>, ConfigError> {
        let Some(Some(mode)) = self.verify_client else {
            return Ok(None);
        };
        let load = |f: &Option<(String, Span)>| match f {
            Some((file, at)) => super::proxy_tls::load_trusted(&full(conf_dir, file), at),
            None => Ok(Vec::new()),
        };
        let cas = load(&self.client_certificate)?;
        let mut trusted = cas.clone();
        trusted.extend(load(&self.trusted_certificate)?);
        if checked && trusted.is_empty() && mode != VerifyClient::OptionalNoCa {
            let at = at.cloned().unwrap_or_else(Span::command_line);
            return Err(ConfigError::invalid(
                "no ssl_client_certificate for ssl_verify_client",
                &at,
            ));
        }
        let mut hints: Vec<Vec<u8>> = Vec::new();
        for c in &cas {
            if let Some(subject) = subject_der(c) {
                if !hints.contains(&subject) {
                    hints.push(subject);
                }
            }
        }
        Ok(Some(Arc::new(ClientVerify {
            mode,
            trusted,
            hints,
            depth: self
                .verify_depth
                .map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            crls: match &self.crl {
                Some((file, at)) => load_crls(&full(conf_dir, file), at)?,
                None => Vec::new(),
            },
        })))
    }
}

/// nginx's session id context (`ngx_ssl_session_id_context`): the module's name, each certificate's digest (the
/// certificate lines as written, where they name variables), and the client CA names sent.
fn session_context(
    module: Module,
    pairs: &[CertPair],
    lines: Option<&[Line]>,
    client: Option<&ClientVerify>,
) -> SessionContext {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(match module {
        Module::Http => b"HTTP",
        Module::Stream => b"STREAM",
    });
    for p in pairs {
        if let Some(leaf) = p.loaded.cert.first() {
            ctx.update(ring::digest::digest(&ring::digest::SHA256, leaf).as_ref());
        }
    }
    for (raw, _, _) in lines.unwrap_or_default() {
        ctx.update(raw.as_bytes());
    }
    for hint in client.map(|c| c.hints.as_slice()).unwrap_or_default() {
        ctx.update(ring::digest::digest(&ring::digest::SHA256, hint).as_ref());
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The CRLs of a PEM file (`ssl_crl`, nginx's `X509_LOOKUP_load_file`).
pub(super) fn load_crls(path: &Path, at: &Span) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls_pki_types::pem::PemObject;
    let p = path.display();
    let pem = std::fs::read(path).map_err(|e| {
        ConfigError::invalid(
            format!("X509_LOOKUP_load_file(\"{p}\") failed (SSL: error:80000002:system library::{e})"),
            at,
        )
    })?;
    let crls: Vec<Vec<u8>> = rustls_pki_types::CertificateRevocationListDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .map(|c| c.as_ref().to_vec())
        .collect();
    if crls.is_empty() {
        return Err(ConfigError::invalid(
            format!("X509_LOOKUP_load_file(\"{p}\") failed (SSL: error:05800088:x509 certificate routines::no certificate or crl found)"),
            at,
        ));
    }
    Ok(crls)
}

/// The DER of a certificate's subject name (`None`: not a certificate).
fn subject_der(cert: &rustls_pki_types::CertificateDer<'_>) -> Option<Vec<u8>> {
    use x509_parser::prelude::FromDer;
    let (_, c) = x509_parser::certificate::X509Certificate::from_der(cert).ok()?;
    Some(c.subject().as_raw().to_vec())
}

/// A path as nginx's `ngx_conf_full_name(cycle, name, 1)`: relative to the conf prefix.
fn full(conf_dir: &Path, name: &str) -> PathBuf {
    conf_dir.join(name)
}

fn push(slot: &mut Option<Vec<Line>>, d: &Directive, template: Option<KeyTemplate>) {
    slot.get_or_insert_with(Vec::new)
        .push((arg(d, 0).to_string(), d.span.clone(), template));
}

/// `ssl_protocols`: which of TLSv1.2 and TLSv1.3 are on. Older versions are accepted in the list (rustls has
/// none of them, docs/directives.md); a list of only those cannot be honoured.
pub(super) fn protocols(d: &Directive) -> Result<(bool, bool), ConfigError> {
    let (mut tls12, mut tls13) = (false, false);
    for v in &d.args {
        match v.as_str() {
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => {}
            "TLSv1.2" => tls12 = true,
            "TLSv1.3" => tls13 = true,
            _ => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
        }
    }
    if !tls12 && !tls13 {
        return Err(ConfigError::invalid(
            format!("\"{}\" names no protocol corelb has (TLSv1.2, TLSv1.3)", d.name),
            &d.span,
        ));
    }
    Ok((tls12, tls13))
}

/// OpenSSL cipher-string words that only remove suites rustls never offers (or keep all it has).
const HARMLESS: &[&str] = &[
    "aNULL",
    "eNULL",
    "NULL",
    "MD5",
    "RC4",
    "DES",
    "3DES",
    "EXP",
    "EXPORT",
    "LOW",
    "PSK",
    "SRP",
    "DSS",
    "CAMELLIA",
    "SEED",
    "IDEA",
    "ADH",
    "AECDH",
    "aDSS",
    "kRSA",
    "RSA",
    "DH",
    "DHE",
    "EDH",
    "kDHE",
    "kEDH",
    "SHA1",
    "SHA",
    "CBC",
    "AESCCM",
    "AESCCM8",
    "ARIA",
    "aECDH",
    "kDH",
    "kECDH",
    "aPSK",
    "kPSK",
    "SSLv3",
    "COMPLEMENTOFDEFAULT",
];

/// `ssl_ciphers`: an OpenSSL cipher list, as the TLS 1.2 suites rustls has, in the list's order. A word naming
/// suites rustls lacks and no others is an error by name: a list corelb cannot honour is never silently dropped.
pub(super) fn ciphers(d: &Directive) -> Result<Vec<SupportedCipherSuite>, ConfigError> {
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    let mut removed: Vec<SupportedCipherSuite> = Vec::new();
    let list = arg(d, 0);
    for word in list.split([':', ' ', ',']).filter(|w| !w.is_empty()) {
        let (minus, bare) = match word.strip_prefix(['!', '-']) {
            Some(rest) => (true, rest),
            None => (false, word.strip_prefix('+').unwrap_or(word)),
        };
        if bare.starts_with('@') {
            continue; // @STRENGTH, @SECLEVEL=N: ordering and levels, nothing to choose
        }
        // a word may join conditions with `+` (ECDHE+AESGCM): every part must hold
        let matched: Option<Vec<SupportedCipherSuite>> = bare
            .split('+')
            .map(suites_of)
            .try_fold(None::<Vec<SupportedCipherSuite>>, |acc, part| {
                let part = part?;
                Some(Some(match acc {
                    None => part,
                    Some(a) => a.into_iter().filter(|s| part.contains(s)).collect(),
                }))
            })
            .flatten();
        let Some(set) = matched else {
            // a cipher rustls lacks, asked for, cannot be honoured; a word OpenSSL does not know either (the old
            // `ECCdraft`) is skipped as OpenSSL skips it
            if !minus && names_a_cipher(bare) {
                return Err(ConfigError::invalid(
                    format!("SSL_CTX_set_cipher_list(\"{list}\") failed: cipher \"{bare}\" is not supported by corelb"),
                    &d.span,
                ));
            }
            continue;
        };
        if minus {
            out.retain(|s| !set.contains(s));
            if word.starts_with('!') {
                removed.extend(set);
            }
        } else {
            for s in set {
                if !out.contains(&s) && !removed.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(ConfigError::invalid(
            format!("SSL_CTX_set_cipher_list(\"{list}\") failed (SSL: no cipher match)"),
            &d.span,
        ));
    }
    Ok(out)
}

/// The rustls TLS 1.2 suites an OpenSSL cipher word names (`None`: not a word corelb knows).
fn suites_of(word: &str) -> Option<Vec<SupportedCipherSuite>> {
    let all = || TLS12_SUITES.iter().map(|(_, s)| *s);
    let with = |f: &dyn Fn(&str) -> bool| Some(TLS12_SUITES.iter().filter(|(n, _)| f(n)).map(|(_, s)| *s).collect());
    if let Some((_, s)) = TLS12_SUITES.iter().find(|(n, _)| *n == word) {
        return Some(vec![*s]);
    }
    match word {
        "ALL" | "DEFAULT" | "HIGH" | "ECDHE" | "EECDH" | "kECDHE" | "kEECDH" | "AEAD" | "TLSv1.2" | "SHA256"
        | "SHA384" | "FIPS" => Some(all().collect()),
        "MEDIUM" => Some(Vec::new()),
        "aECDSA" | "ECDSA" => with(&|n| n.starts_with("ECDHE-ECDSA")),
        "aRSA" => with(&|n| n.starts_with("ECDHE-RSA")),
        "AESGCM" | "AES" => with(&|n| n.contains("GCM")),
        "AES128" => with(&|n| n.contains("AES128")),
        "AES256" => with(&|n| n.contains("AES256")),
        "CHACHA20" => with(&|n| n.contains("CHACHA20")),
        _ if HARMLESS.iter().any(|h| h.eq_ignore_ascii_case(word)) => Some(Vec::new()),
        _ => None,
    }
}

/// Whether `word` is the name of one cipher suite (`AES128-SHA`, `DHE-RSA-AES256-GCM-SHA384`) rather than a
/// class of them.
fn names_a_cipher(word: &str) -> bool {
    const PARTS: &[&str] = &[
        "AES", "CHACHA", "DES", "RC4", "CAMELLIA", "ARIA", "SEED", "IDEA", "NULL",
    ];
    word.contains('-') && PARTS.iter().any(|p| word.contains(p))
}

/// `ssl_ecdh_curve`: `auto` or a `:`-list of OpenSSL group names.
fn curves(d: &Directive) -> Result<Vec<rustls::NamedGroup>, ConfigError> {
    let list = arg(d, 0);
    if list == "auto" {
        return Ok(TlsConf::defaults().groups);
    }
    let mut out = Vec::new();
    for name in list.split(':') {
        let alias = match name {
            "x25519" => "X25519",
            "P-256" | "secp256r1" => "prime256v1",
            "P-384" => "secp384r1",
            other => other,
        };
        let Some((_, g)) = KX_GROUPS.iter().find(|(n, _)| *n == alias) else {
            return Err(ConfigError::invalid(
                format!(
                    "SSL_CTX_set1_curves_list(\"{list}\") failed (SSL: error:0A080106:SSL routines::passed invalid \
                     argument:group '{name}' cannot be set)"
                ),
                &d.span,
            ));
        };
        out.push(g.name());
    }
    Ok(out)
}

/// `ssl_session_cache off | none | [builtin[:size]] [shared:name:size]`.
fn session_cache(d: &Directive) -> Result<SessionCache, ConfigError> {
    let bad = |v: &str| ConfigError::invalid(format!("invalid session cache \"{v}\""), &d.span);
    let mut sessions = 0usize;
    for v in &d.args {
        match v.as_str() {
            "off" if d.args.len() == 1 => return Ok(SessionCache::Off),
            "none" if d.args.len() == 1 => return Ok(SessionCache::None),
            "builtin" => sessions += 20480,
            _ => {
                if let Some(n) = v.strip_prefix("builtin:") {
                    let n = value::atoi(n).filter(|&n| n > 0).ok_or_else(|| bad(v))?;
                    sessions += usize::try_from(n).map_err(|_| bad(v))?;
                } else if let Some(rest) = v.strip_prefix("shared:") {
                    let (name, size) = rest.rsplit_once(':').ok_or_else(|| bad(v))?;
                    let size = value::parse_size(size).ok_or_else(|| bad(v))?;
                    if name.is_empty() {
                        return Err(bad(v));
                    }
                    if size < 8 * 4096 {
                        return Err(ConfigError::invalid(
                            format!("session cache \"{v}\" is too small"),
                            &d.span,
                        ));
                    }
                    sessions += usize::try_from(size).map_err(|_| bad(v))? / tls::SESSION_BYTES;
                } else {
                    return Err(bad(v));
                }
            }
        }
    }
    Ok(SessionCache::Sessions(sessions))
}

/// Loads the TLS settings of every server (`layers` merged over http for each), checking `listen ... ssl`.
pub fn load_servers(servers: &mut [HttpServer], layers: &[TlsLayer], conf_dir: &Path) -> Result<(), ConfigError> {
    let defaults = default_servers(servers);
    for (index, (s, layer)) in servers.iter_mut().zip(layers).enumerate() {
        // nginx names the server block's line in `no "ssl_certificate" is defined`, not the listen's
        let ssl_listen = s.listens.iter().any(|l| l.ssl).then_some(&s.span);
        let needs = defaults
            .iter()
            .any(|(addr, i)| *i == index && s.listens.iter().any(|l| l.ssl && l.addr == *addr));
        s.tls = layer.conf(conf_dir, ssl_listen, needs, Module::Http)?;
    }
    Ok(())
}

/// Each listen address's default server (the one marked `default_server`, else the first listening there).
fn default_servers(servers: &[HttpServer]) -> Vec<(std::net::SocketAddr, usize)> {
    let mut out: Vec<(std::net::SocketAddr, usize)> = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        for l in &s.listens {
            match out.iter_mut().find(|(a, _)| *a == l.addr) {
                Some(slot) if l.default_server => slot.1 = i,
                Some(_) => {}
                None => out.push((l.addr, i)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directive(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: "t.conf".into(),
                line: 3,
            },
            block: None,
        }
    }

    fn names(v: &[SupportedCipherSuite]) -> Vec<&'static str> {
        v.iter().map(|s| tls::openssl_name(s.suite())).collect()
    }

    #[test]
    fn nginx_s_default_cipher_list_is_every_tls12_suite() {
        let got = ciphers(&directive("ssl_ciphers", &["HIGH:!aNULL:!MD5"])).unwrap();
        assert_eq!(got.len(), TLS12_SUITES.len());
    }

    #[test]
    fn cipher_words_choose_and_order_suites() {
        let got = ciphers(&directive(
            "ssl_ciphers",
            &["ECDHE-RSA-AES128-GCM-SHA256:ECDHE+CHACHA20:!aECDSA"],
        ))
        .unwrap();
        assert_eq!(
            names(&got),
            ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305"]
        );
    }

    #[test]
    fn a_cipher_list_corelb_cannot_honour_is_refused_by_name() {
        let e = ciphers(&directive("ssl_ciphers", &["ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] SSL_CTX_set_cipher_list(\"ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA\") failed: cipher \
             \"AES128-SHA\" is not supported by corelb in t.conf:3"
        );
        // as OpenSSL: a word it does not know is skipped, a list of nothing else matches no cipher
        let e = ciphers(&directive("ssl_ciphers", &["FOO"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] SSL_CTX_set_cipher_list(\"FOO\") failed (SSL: no cipher match) in t.conf:3"
        );
        assert_eq!(
            ciphers(&directive("ssl_ciphers", &["DEFAULT:ECCdraft"])).unwrap().len(),
            TLS12_SUITES.len()
        );
    }

    #[test]
    fn protocols_keep_what_rustls_has() {
        assert_eq!(
            protocols(&directive("ssl_protocols", &["TLSv1", "TLSv1.2"])).unwrap(),
            (true, false)
        );
        assert!(protocols(&directive("ssl_protocols", &["TLSv1", "TLSv1.1"])).is_err());
        assert_eq!(
            protocols(&directive("ssl_protocols", &["TLSv1.4"]))
                .unwrap_err()
                .to_string(),
            "[emerg] invalid value \"TLSv1.4\" in t.conf:3"
        );
    }

    #[test]
    fn session_contexts_follow_the_certificate_lines() {
        let line = |raw: &str| (raw.to_string(), Span::command_line(), None);
        let one = [line("$one.crt")];
        let ctx = |module, lines: &[Line]| session_context(module, &[], Some(lines), None);
        assert_eq!(ctx(Module::Http, &one), ctx(Module::Http, &[line("$one.crt")]));
        assert_ne!(ctx(Module::Http, &one), ctx(Module::Http, &[line("$two.crt")]));
        assert_ne!(ctx(Module::Http, &one), ctx(Module::Stream, &one));
    }

    #[test]
    fn session_cache_sizes() {
        let d = directive("ssl_session_cache", &["shared:SSL:1m"]);
        assert_eq!(session_cache(&d).unwrap(), SessionCache::Sessions(4096));
        assert_eq!(
            session_cache(&directive("ssl_session_cache", &["off"])).unwrap(),
            SessionCache::Off
        );
        assert_eq!(
            session_cache(&directive("ssl_session_cache", &["foo"]))
                .unwrap_err()
                .to_string(),
            "[emerg] invalid session cache \"foo\" in t.conf:3"
        );
    }
}
