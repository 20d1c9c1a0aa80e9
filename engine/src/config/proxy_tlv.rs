//! `$proxy_protocol_tlv_NAME`: the PROXY protocol v2 TLV a variable names (nginx's `ngx_proxy_protocol_get_tlv`
//! names and `0xHH` numbers), resolved once at load.

/// A TLV a `$proxy_protocol_tlv_NAME` variable names, resolved at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlvName {
    /// A top-level TLV of this type (`alpn`, `authority`, `unique_id`, `ssl`, `netns`, `0xHH`).
    Top(u16),
    /// A sub-TLV of the `ssl` TLV (`ssl_version`, `ssl_cn`, `ssl_cipher`, `ssl_sig_alg`, `ssl_key_alg`,
    /// `ssl_0xHH`).
    Ssl(u16),
    /// `ssl_verify`: the `ssl` TLV's 32-bit verify field, in decimal.
    SslVerify,
    /// A name nginx does not know: it logs "unknown PROXY protocol TLV" and the value is empty.
    Unknown,
}

const TLV_NAMES: &[(&str, u16)] = &[
    ("alpn", 0x01),
    ("authority", 0x02),
    ("unique_id", 0x05),
    ("ssl", 0x20),
    ("netns", 0x30),
];
const TLV_SSL_NAMES: &[(&str, u16)] = &[
    ("version", 0x21),
    ("cn", 0x22),
    ("cipher", 0x23),
    ("sig_alg", 0x24),
    ("key_alg", 0x25),
];
/// The `ssl` TLV, which holds the `ssl_*` sub-TLVs.
pub const TLV_SSL: u16 = 0x20;

impl TlvName {
    /// The TLV of a variable's suffix (after `proxy_protocol_tlv_`, lower-case), as nginx's
    /// `ngx_proxy_protocol_get_tlv` reads it; `None` for a `0x` with no hex number (nginx's "invalid PROXY
    /// protocol TLV").
    pub fn parse(name: &str) -> Option<TlvName> {
        let (ssl, rest) = match name.strip_prefix("ssl_") {
            Some("verify") => return Some(TlvName::SslVerify),
            Some(r) => (true, r),
            None => (false, name),
        };
        let make = |t: u16| if ssl { TlvName::Ssl(t) } else { TlvName::Top(t) };
        if let Some(hex) = rest.strip_prefix("0x") {
            if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            // a type above 0xff matches no TLV (nginx compares it with the one-byte type)
            let t = u16::from_str_radix(hex.trim_start_matches('0'), 16)
                .ok()
                .or(hex.bytes().all(|c| c == b'0').then_some(0))
                .unwrap_or(u16::MAX);
            return Some(make(t));
        }
        let names = if ssl { TLV_SSL_NAMES } else { TLV_NAMES };
        Some(
            names
                .iter()
                .find(|(n, _)| *n == rest)
                .map_or(TlvName::Unknown, |&(_, t)| make(t)),
        )
    }
}
