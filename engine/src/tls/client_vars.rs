//! What the `$ssl_client_*` variables read of a connection's client certificate, as nginx writes them:
//! `$ssl_client_verify` (`SUCCESS`, `FAILED:reason`, `NONE`), the subject and issuer DNs (RFC 2253, and the
//! `_legacy` `/CN=...` form), the serial (hex), the SHA-1 fingerprint, and the certificate as PEM (raw, with
//! nginx's tab-indented lines, and URI-escaped).

use super::client_auth::Verdict;
use super::TlsFacts;
use crate::config::var::ClientVar;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// Appends the value of `var` for a connection with the handshake `tls` (none: plain, empty).
pub fn append(tls: Option<&TlsFacts>, var: ClientVar, out: &mut Vec<u8>) {
    let Some(t) = tls else {
        return;
    };
    if var == ClientVar::Verify {
        match t.client {
            Verdict::None => out.extend_from_slice(b"NONE"),
            Verdict::Success => out.extend_from_slice(b"SUCCESS"),
            Verdict::Failed(e) => {
                out.extend_from_slice(b"FAILED:");
                out.extend_from_slice(e.openssl().1.as_bytes());
            }
        }
        return;
    }
    let der = t.client_cert.as_slice();
    if der.is_empty() {
        return;
    }
    match var {
        ClientVar::Fingerprint => {
            let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
            hex(digest.as_ref(), false, out);
        }
        ClientVar::RawCert => out.extend_from_slice(pem(der).as_bytes()),
        ClientVar::Cert => {
            // nginx's `ngx_ssl_get_certificate`: the last newline dropped, a tab after every other one
            let raw = pem(der);
            for b in raw.as_bytes().strip_suffix(b"\n").unwrap_or(raw.as_bytes()) {
                out.push(*b);
                if *b == b'\n' {
                    out.push(b'\t');
                }
            }
        }
        ClientVar::EscapedCert => escape_component(pem(der).as_bytes(), out),
        _ => {
            let Ok((_, cert)) = X509Certificate::from_der(der) else {
                return;
            };
            match var {
                ClientVar::SubjectDn => rfc2253(cert.subject(), out),
                ClientVar::IssuerDn => rfc2253(cert.issuer(), out),
                ClientVar::SubjectDnLegacy => legacy(cert.subject(), out),
                ClientVar::IssuerDnLegacy => legacy(cert.issuer(), out),
                ClientVar::ValidFrom => asn1_time(cert.validity().not_before, out),
                ClientVar::ValidTo => asn1_time(cert.validity().not_after, out),
                ClientVar::DaysLeft => {
                    // nginx's `ngx_ssl_get_client_v_remain`: 0 when less than a day is left
                    let end = cert.validity().not_after.timestamp();
                    let now = x509_parser::time::ASN1Time::now().timestamp();
                    let days = if end < now.saturating_add(86400) {
                        0
                    } else {
                        (end - now) / 86400
                    };
                    out.extend_from_slice(days.to_string().as_bytes());
                }
                ClientVar::Serial => {
                    // OpenSSL's `i2a_ASN1_INTEGER`: the value's bytes, without DER's sign byte
                    let raw = cert.raw_serial();
                    let trimmed = match raw {
                        [0, rest @ ..] if !rest.is_empty() => rest,
                        _ => raw,
                    };
                    hex(trimmed, true, out);
                }
                _ => {}
            }
        }
    }
}

/// OpenSSL's `ASN1_TIME_print`: `Dec  1 23:45:28 2026 GMT`.
fn asn1_time(t: x509_parser::time::ASN1Time, out: &mut Vec<u8>) {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let dt = t.to_datetime();
    let month = MONTHS
        .get(usize::from(u8::from(dt.month())).saturating_sub(1))
        .unwrap_or(&"Jan");
    let text = format!(
        "{month} {:2} {:02}:{:02}:{:02} {} GMT",
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.year()
    );
    out.extend_from_slice(text.as_bytes());
}

fn pem(der: &[u8]) -> String {
    let p = pem::Pem::new("CERTIFICATE", der.to_vec());
    pem::encode_config(&p, pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF))
}

fn hex(bytes: &[u8], upper: bool, out: &mut Vec<u8>) {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    for b in bytes {
        out.push(digits[usize::from(b >> 4)]);
        out.push(digits[usize::from(b & 15)]);
    }
}

/// nginx's `ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT)`: all but letters, digits and `-._~` as `%XX`.
fn escape_component(raw: &[u8], out: &mut Vec<u8>) {
    for b in raw {
        if b.is_ascii_alphanumeric() || b"-._~".contains(b) {
            out.push(*b);
        } else {
            out.push(b'%');
            hex(&[*b], true, out);
        }
    }
}

/// OpenSSL's short names of the attributes of names (`OBJ_nid2sn`), by OID; another is written dotted.
const SHORT_NAMES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "street"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.5", "serialNumber"),
    ("2.5.4.4", "SN"),
    ("2.5.4.42", "GN"),
    ("2.5.4.12", "title"),
    ("2.5.4.43", "initials"),
    ("2.5.4.44", "generationQualifier"),
    ("2.5.4.46", "dnQualifier"),
    ("2.5.4.65", "pseudonym"),
    ("2.5.4.41", "name"),
    ("2.5.4.17", "postalCode"),
    ("2.5.4.15", "businessCategory"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("1.2.840.113549.1.9.1", "emailAddress"),
];

/// One attribute as `SN=value` (OpenSSL's short name, else the dotted OID).
fn attribute(a: &AttributeTypeAndValue<'_>, rfc: bool, out: &mut Vec<u8>) {
    let id = a.attr_type().to_id_string();
    match SHORT_NAMES.iter().find(|(oid, _)| *oid == id) {
        Some((_, sn)) => out.extend_from_slice(sn.as_bytes()),
        None => out.extend_from_slice(id.as_bytes()),
    }
    out.push(b'=');
    let value = a.as_str().map_or_else(|_| a.as_slice(), str::as_bytes);
    let last = value.len().saturating_sub(1);
    for (i, b) in value.iter().enumerate() {
        // RFC 2253's specials, a leading `#` or space and a trailing space are escaped
        let special = b",+\"\\<>;".contains(b) || (i == 0 && (*b == b'#' || *b == b' ')) || (i == last && *b == b' ');
        if rfc && special {
            out.push(b'\\');
        }
        out.push(*b);
    }
}

/// A name as OpenSSL's `X509_NAME_print_ex(XN_FLAG_RFC2253)`: the last RDN first, `,` between them, `+` within.
fn rfc2253(name: &X509Name<'_>, out: &mut Vec<u8>) {
    let rdns: Vec<_> = name.iter_rdn().collect();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        for (j, a) in rdn.iter().enumerate() {
            if j > 0 {
                out.push(b'+');
            }
            attribute(a, true, out);
        }
    }
}

/// A name as OpenSSL's `X509_NAME_oneline`: `/SN=value` for each attribute, in order.
fn legacy(name: &X509Name<'_>, out: &mut Vec<u8>) {
    for a in name.iter_attributes() {
        out.push(b'/');
        attribute(a, false, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_openssl_s() {
        let mut out = Vec::new();
        asn1_time(
            x509_parser::time::ASN1Time::from_timestamp(1_796_168_728).unwrap(),
            &mut out,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "Dec  1 23:45:28 2026 GMT");
    }

    #[test]
    fn a_pem_is_escaped_as_a_uri_component() {
        let mut out = Vec::new();
        escape_component(b"-----BEGIN A+/=\n", &mut out);
        assert_eq!(out, b"-----BEGIN%20A%2B%2F%3D%0A");
    }
}
