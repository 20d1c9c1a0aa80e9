//! HTTP/1.x framing, free of sockets: request and response heads, chunked bodies, hop-by-hop rules, fixed answers.

pub mod basic_auth;
pub mod charset;
pub mod chunked;
pub mod gzip;
pub mod handshake_vars;
pub mod head_buffers;
pub mod host;
pub mod keepalive;
pub mod limit_status;
pub mod names;
pub mod not_modified;
pub mod pages;
pub mod proxy_protocol;
pub mod ranges;
pub mod realip;
pub mod request;
pub mod response;
pub mod uri;
pub mod user_vars;
pub mod var_cache;
pub mod vars;

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// `Content-Length: N` (N > 0).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (responses only).
    UntilClose,
}

/// A request refused before it reaches an upstream: the status to answer with, then close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {reason}")]
pub struct Rejection {
    pub status: u16,
    pub reason: &'static str,
}

impl Rejection {
    /// A rejection with `status`.
    pub const fn new(status: u16, reason: &'static str) -> Self {
        Rejection { status, reason }
    }

    /// A 400 Bad Request.
    pub const fn bad(reason: &'static str) -> Self {
        Rejection { status: 400, reason }
    }
}

/// Whether the comma-separated header `value` lists `token` (ASCII case-insensitive).
pub fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&c| c == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The largest length nginx accepts (its `off_t`): a `Content-Length` or chunk size above it is invalid.
pub const MAX_LENGTH: u64 = i64::MAX as u64;

/// A `Content-Length` value: ASCII digits only (no sign, no list), at most [`MAX_LENGTH`].
pub fn parse_content_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?
            .checked_add(u64::from(d - b'0'))
            .filter(|&n| n <= MAX_LENGTH)
    })
}

/// Request headers the proxy never copies from the client: nginx replaces them (`Host`, `Connection`, the body
/// framing) or clears them (`Keep-Alive`, `TE`, `Expect`, `Upgrade`); corelb also drops the hop-by-hop
/// `Proxy-Connection` and `Trailer` that nginx passes on (and any header the client's `Connection` names).
pub const REQUEST_HOP_BY_HOP: [&str; 10] = [
    "host",
    "connection",
    "keep-alive",
    "te",
    "expect",
    "upgrade",
    "content-length",
    "transfer-encoding",
    "proxy-connection",
    "trailer",
];

/// Response headers the proxy never copies to the client: the hop-by-hop ones (corelb frames the client's
/// response itself).
pub fn hop_by_hop_response_header(name: &str) -> bool {
    HOP_BY_HOP_RESPONSE.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// The names [`hop_by_hop_response_header`] holds, lower case.
pub const HOP_BY_HOP_RESPONSE: [&str; 4] = ["connection", "keep-alive", "transfer-encoding", "proxy-connection"];

/// nginx's `ngx_http_proxy_hide_headers`: upstream headers not passed unless `proxy_pass_header` names them
/// (lower case; corelb sends its own `Server` and `Date`).
pub const PROXY_HIDE_DEFAULT: [&str; 8] = [
    "date",
    "server",
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// Response headers the proxy does not copy to the client by default: hop-by-hop ones, and nginx's
/// [`PROXY_HIDE_DEFAULT`].
pub fn hidden_response_header(name: &str) -> bool {
    hop_by_hop_response_header(name) || PROXY_HIDE_DEFAULT.iter().any(|h| name.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_lengths() {
        assert!(has_token(b"Keep-Alive, Upgrade", b"upgrade"));
        assert!(!has_token(b"closed", b"close"));
        assert_eq!(parse_content_length(b" 42 "), Some(42));
        assert_eq!(parse_content_length(b"4 2"), None);
        assert_eq!(parse_content_length(b"+4"), None);
        assert_eq!(parse_content_length(b"0005"), Some(5));
        assert_eq!(parse_content_length(b"9223372036854775807"), Some(MAX_LENGTH));
        for bad in [
            &b"9223372036854775808"[..],
            b"99999999999999999999999",
            b"",
            b"0x5",
            b"5,5",
            b"-1",
            b"5 5",
        ] {
            assert_eq!(parse_content_length(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert!(hidden_response_header("X-Accel-Redirect") && hidden_response_header("Server"));
        assert!(!hidden_response_header("Content-Type") && !hidden_response_header("X-Accel-Other"));
    }
}
