//! The variables corelb knows, by nginx name, and the one list of when each is known: at the request head (hash
//! keys, `proxy_set_header`, `return`, log values captured then) or only once the answer is done (log values read
//! from the request's record; elsewhere they are empty, as nginx's before its response).

/// A variable a template may name. Names follow nginx; `$http_*`, `$arg_*`, `$cookie_*`, `$sent_http_*`,
/// `$upstream_http_*` and `$upstream_cookie_*` carry their suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    RemoteAddr,
    /// The client address as 4 (IPv4) or 16 (IPv6) bytes.
    BinaryRemoteAddr,
    RemotePort,
    /// The connection's own peer, before `set_real_ip_from` (`$realip_remote_addr`, `_port`).
    RealipRemoteAddr,
    RealipRemotePort,
    /// What the connection's PROXY protocol header said (`$proxy_protocol_addr`, `_port`, `_server_addr`,
    /// `_server_port`); empty without one.
    ProxyProtocolAddr,
    ProxyProtocolPort,
    ProxyProtocolServerAddr,
    ProxyProtocolServerPort,
    /// `$proxy_protocol_tlv_NAME`: a TLV of the connection's v2 header.
    ProxyProtocolTlv(super::proxy_tlv::TlvName),
    ServerAddr,
    ServerPort,
    RequestUri,
    Uri,
    Args,
    /// `?` when the request has arguments, else empty.
    IsArgs,
    Host,
    RequestMethod,
    Scheme,
    /// `on` on a TLS connection, else empty.
    Https,
    /// `$ssl_protocol`, `$ssl_cipher`, `$ssl_server_name`, `$ssl_session_reused`: of a TLS connection's
    /// handshake (empty on a plain one).
    SslProtocol,
    SslCipher,
    SslServerName,
    SslSessionReused,
    /// `$ssl_session_id`: the session's id in hex (64 digits), kept in its tickets so a resumed session has it.
    SslSessionId,
    /// `$ssl_alpn_protocol`: the protocol the handshake's ALPN chose (empty: none).
    SslAlpnProtocol,
    /// `$ssl_ciphers`: the suites the client offered, OpenSSL's names joined by `:`.
    SslCiphers,
    /// `$ssl_preread_server_name`, `$ssl_preread_protocol`, `$ssl_preread_alpn_protocols` (stream `ssl_preread`).
    SslPreread(PrereadVar),
    /// `$ssl_client_verify`, `$ssl_client_s_dn` and the other client certificate variables.
    SslClient(ClientVar),
    ProxyHost,
    ProxyAddXForwardedFor,
    /// `$http_NAME`: the request header NAME, with `_` read as `-`, case-insensitive (stored lower-case with `-`).
    Http(String),
    /// `$arg_NAME`: the query argument NAME (case-insensitive, as nginx).
    Arg(String),
    /// `$cookie_NAME`: the cookie NAME (stored lower-case; nginx lower-cases variable names and matches cookie
    /// names without case).
    Cookie(String),
    ContentLength,
    ContentType,
    /// The request line: `GET /x HTTP/1.1`.
    Request,
    ServerProtocol,
    /// `$http2`: `h2` (over TLS) or `h2c` (cleartext) on an HTTP/2 connection, else empty.
    Http2,
    /// The first name of the server the request was routed to.
    ServerName,
    /// 32 hex digits of 16 random bytes, one value per request.
    RequestId,
    Hostname,
    /// corelb's version (`docs/directives.md`).
    NginxVersion,
    Pid,
    Connection,
    ConnectionRequests,
    /// `$connection_time` (nginx 1.19.10): seconds the connection has been open, with milliseconds.
    ConnectionTime,
    RemoteUser,
    Msec,
    TimeLocal,
    TimeIso8601,
    /// `$request_body`: the body, when a location naming it had it read whole into the client buffer.
    RequestBody,
    /// A `map` variable: index into its block's maps.
    Map(usize),
    /// A variable of `set $name VALUE`: index into the block's user variables (empty until a `set` runs).
    User(usize),
    /// `$limit_rate`: the request's response rate in bytes per second (`set $limit_rate` changes it).
    LimitRate,
    /// `$limit_req_status`, `$limit_conn_status`: what the request's limits decided (not found before).
    LimitReqStatus,
    LimitConnStatus,
    /// A `map` whose value needs the answer (its source or values name `$status`, `$upstream_*`...), as an access
    /// log reads it: evaluated when the line is written.
    AnswerMap(usize),
    /// `$1`..`$9` (or a named group) of a `map` regex entry, in that entry's value; elsewhere `$1`..`$9` of the
    /// request's last regex match (a location, `rewrite` or `if` regex, else its regex server name).
    Capture(usize),
    /// `$NAME` of a named group of a location, `rewrite` or `if` regex (`location ~ ^/(?<name>.+)$`): the
    /// group of the request's last regex match, empty when that regex has no such group.
    RegexCapture(String),
    /// A named group of a regex `server_name` (`~^(?<sub>.+)\.example\.com$`): index into the http block's
    /// group names ([`crate::config::server_names::capture_names`]); set by the server's name match.
    ServerCapture(usize),
    // Known once the answer is done.
    Status,
    BodyBytesSent,
    BytesSent,
    RequestLength,
    RequestTime,
    /// `$sent_http_NAME`: a header of the answer sent (stored lower-case with `-`).
    SentHttp(String),
    /// `$upstream_http_NAME`: a header of the upstream's answer (stored lower-case with `-`).
    UpstreamHttp(String),
    /// `$upstream_cookie_NAME`: a `Set-Cookie` of the upstream's answer (stored lower-case).
    UpstreamCookie(String),
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    UpstreamResponseLength,
    UpstreamBytesReceived,
    UpstreamBytesSent,
}

/// The capture `$1`..`$9` a name means (one digit, as nginx reads captures).
pub fn capture_number(name: &str) -> Option<usize> {
    match name.as_bytes() {
        [d @ b'1'..=b'9'] => Some(usize::from(d - b'0')),
        _ => None,
    }
}

/// When a variable's value is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Once the request head is read.
    Request,
    /// Once the answer is done (an access log reads it then; before, it is empty).
    Response,
}

/// Names without a suffix, and their variables.
const NAMES: &[(&str, Var)] = &[
    ("remote_addr", Var::RemoteAddr),
    ("binary_remote_addr", Var::BinaryRemoteAddr),
    ("remote_port", Var::RemotePort),
    ("realip_remote_addr", Var::RealipRemoteAddr),
    ("realip_remote_port", Var::RealipRemotePort),
    ("proxy_protocol_addr", Var::ProxyProtocolAddr),
    ("proxy_protocol_port", Var::ProxyProtocolPort),
    ("proxy_protocol_server_addr", Var::ProxyProtocolServerAddr),
    ("proxy_protocol_server_port", Var::ProxyProtocolServerPort),
    ("server_addr", Var::ServerAddr),
    ("server_port", Var::ServerPort),
    ("request_uri", Var::RequestUri),
    ("uri", Var::Uri),
    ("document_uri", Var::Uri),
    ("args", Var::Args),
    ("query_string", Var::Args),
    ("is_args", Var::IsArgs),
    ("host", Var::Host),
    ("request_method", Var::RequestMethod),
    ("scheme", Var::Scheme),
    ("https", Var::Https),
    ("ssl_protocol", Var::SslProtocol),
    ("ssl_cipher", Var::SslCipher),
    ("ssl_server_name", Var::SslServerName),
    ("ssl_session_reused", Var::SslSessionReused),
    ("ssl_session_id", Var::SslSessionId),
    ("ssl_alpn_protocol", Var::SslAlpnProtocol),
    ("ssl_ciphers", Var::SslCiphers),
    ("ssl_preread_server_name", Var::SslPreread(PrereadVar::ServerName)),
    ("ssl_preread_protocol", Var::SslPreread(PrereadVar::Protocol)),
    ("ssl_preread_alpn_protocols", Var::SslPreread(PrereadVar::AlpnProtocols)),
    ("proxy_host", Var::ProxyHost),
    ("proxy_add_x_forwarded_for", Var::ProxyAddXForwardedFor),
    ("content_length", Var::ContentLength),
    ("content_type", Var::ContentType),
    ("request", Var::Request),
    ("server_protocol", Var::ServerProtocol),
    ("http2", Var::Http2),
    ("server_name", Var::ServerName),
    ("request_id", Var::RequestId),
    ("hostname", Var::Hostname),
    ("nginx_version", Var::NginxVersion),
    ("pid", Var::Pid),
    ("connection", Var::Connection),
    ("connection_requests", Var::ConnectionRequests),
    ("connection_time", Var::ConnectionTime),
    ("remote_user", Var::RemoteUser),
    ("msec", Var::Msec),
    ("time_local", Var::TimeLocal),
    ("time_iso8601", Var::TimeIso8601),
    ("request_body", Var::RequestBody),
    ("limit_rate", Var::LimitRate),
    ("limit_req_status", Var::LimitReqStatus),
    ("limit_conn_status", Var::LimitConnStatus),
    ("status", Var::Status),
    ("body_bytes_sent", Var::BodyBytesSent),
    ("bytes_sent", Var::BytesSent),
    ("request_length", Var::RequestLength),
    ("request_time", Var::RequestTime),
    ("upstream_addr", Var::UpstreamAddr),
    ("upstream_status", Var::UpstreamStatus),
    ("upstream_response_time", Var::UpstreamResponseTime),
    ("upstream_connect_time", Var::UpstreamConnectTime),
    ("upstream_header_time", Var::UpstreamHeaderTime),
    ("upstream_response_length", Var::UpstreamResponseLength),
    ("upstream_bytes_received", Var::UpstreamBytesReceived),
    ("upstream_bytes_sent", Var::UpstreamBytesSent),
];

/// The variables a `stream` value may use (of those corelb knows).
const STREAM: &[&str] = &[
    "remote_addr",
    "binary_remote_addr",
    "remote_port",
    "realip_remote_addr",
    "realip_remote_port",
    "proxy_protocol_addr",
    "proxy_protocol_port",
    "proxy_protocol_server_addr",
    "proxy_protocol_server_port",
    "server_addr",
    "server_port",
    "hostname",
    "nginx_version",
    "pid",
    "msec",
    "time_local",
    "time_iso8601",
    "ssl_protocol",
    "ssl_cipher",
    "ssl_server_name",
    "ssl_session_reused",
    "ssl_session_id",
    "ssl_alpn_protocol",
    "ssl_preread_server_name",
    "ssl_preread_protocol",
    "ssl_preread_alpn_protocols",
];

/// One of the stream `ssl_preread` variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrereadVar {
    ServerName,
    Protocol,
    AlpnProtocols,
}

/// One of the `$ssl_client_*` variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientVar {
    Verify,
    SubjectDn,
    IssuerDn,
    SubjectDnLegacy,
    IssuerDnLegacy,
    Serial,
    Fingerprint,
    /// `$ssl_client_v_start`, `$ssl_client_v_end` (`Dec  1 00:00:00 2026 GMT`), `$ssl_client_v_remain` (days).
    ValidFrom,
    ValidTo,
    DaysLeft,
    /// `$ssl_client_cert`: the PEM with every line after the first indented by a tab (nginx's old form).
    Cert,
    RawCert,
    EscapedCert,
}

/// The variables by name (without `$`).
pub const CLIENT_NAMES: &[(&str, ClientVar)] = &[
    ("ssl_client_verify", ClientVar::Verify),
    ("ssl_client_s_dn", ClientVar::SubjectDn),
    ("ssl_client_i_dn", ClientVar::IssuerDn),
    ("ssl_client_s_dn_legacy", ClientVar::SubjectDnLegacy),
    ("ssl_client_i_dn_legacy", ClientVar::IssuerDnLegacy),
    ("ssl_client_serial", ClientVar::Serial),
    ("ssl_client_fingerprint", ClientVar::Fingerprint),
    ("ssl_client_v_start", ClientVar::ValidFrom),
    ("ssl_client_v_end", ClientVar::ValidTo),
    ("ssl_client_v_remain", ClientVar::DaysLeft),
    ("ssl_client_cert", ClientVar::Cert),
    ("ssl_client_raw_cert", ClientVar::RawCert),
    ("ssl_client_escaped_cert", ClientVar::EscapedCert),
];

/// `$proxy_protocol_tlv_NAME`.
const TLV_PREFIX: &str = "proxy_protocol_tlv_";

/// Header-like prefixes: the suffix is a header name, `_` read as `-`.
const HEADER_PREFIXES: &[&str] = &["http_", "sent_http_", "upstream_http_"];

impl Var {
    /// The variable of an nginx name (without `$`; case-insensitive, as nginx), or `None` if corelb does not know
    /// it. Map variables are resolved by the config builder, before this.
    pub fn from_name(name: &str) -> Option<Var> {
        let lower = name.to_ascii_lowercase();
        if let Some((_, v)) = NAMES.iter().find(|(n, _)| *n == lower) {
            return Some(v.clone());
        }
        if let Some((_, v)) = CLIENT_NAMES.iter().find(|(n, _)| *n == lower) {
            return Some(Var::SslClient(*v));
        }
        // nginx tries the longer prefixes first: `sent_http_` before `http_` cannot clash, `upstream_cookie_`
        // and `upstream_http_` are distinct.
        for prefix in HEADER_PREFIXES {
            if let Some(h) = lower.strip_prefix(prefix) {
                let header = h.replace('_', "-");
                return Some(match *prefix {
                    "http_" => Var::Http(header),
                    "sent_http_" => Var::SentHttp(header),
                    _ => Var::UpstreamHttp(header),
                });
            }
        }
        if let Some(t) = lower.strip_prefix(TLV_PREFIX).filter(|s| !s.is_empty()) {
            // nginx resolves the name when the variable is read: a malformed one is empty then
            let name = super::proxy_tlv::TlvName::parse(t).unwrap_or(super::proxy_tlv::TlvName::Unknown);
            return Some(Var::ProxyProtocolTlv(name));
        }
        if let Some(a) = lower.strip_prefix("arg_") {
            return Some(Var::Arg(a.to_string()));
        }
        if let Some(c) = lower.strip_prefix("cookie_") {
            return Some(Var::Cookie(c.to_string()));
        }
        if let Some(c) = lower.strip_prefix("upstream_cookie_") {
            return Some(Var::UpstreamCookie(c.to_string()));
        }
        None
    }

    /// Whether a `stream` value may name `name` (a stream `map` variable aside).
    pub fn in_stream(name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        STREAM.contains(&lower.as_str())
            || CLIENT_NAMES.iter().any(|(n, _)| *n == lower)
            || lower.strip_prefix(TLV_PREFIX).is_some_and(|t| !t.is_empty())
    }

    /// Whether the value is read from an answer's headers (`$sent_http_*`, `$upstream_http_*`,
    /// `$upstream_cookie_*`).
    pub fn is_answer_header(&self) -> bool {
        matches!(self, Var::SentHttp(_) | Var::UpstreamHttp(_) | Var::UpstreamCookie(_))
    }

    /// Whether the value is a list over the request's upstream tries (`$upstream_addr`, `$upstream_status`, their
    /// times and sizes): read from the request's record of them.
    pub fn is_upstream_try(&self) -> bool {
        matches!(
            self,
            Var::UpstreamAddr
                | Var::UpstreamStatus
                | Var::UpstreamResponseTime
                | Var::UpstreamConnectTime
                | Var::UpstreamHeaderTime
                | Var::UpstreamResponseLength
                | Var::UpstreamBytesReceived
                | Var::UpstreamBytesSent
        )
    }

    /// When the value is known. A `map` is a request-time value.
    pub fn phase(&self) -> Phase {
        match self {
            Var::Status
            | Var::BodyBytesSent
            | Var::BytesSent
            | Var::RequestLength
            | Var::RequestTime
            | Var::Msec
            | Var::TimeLocal
            | Var::TimeIso8601
            | Var::SentHttp(_)
            | Var::UpstreamHttp(_)
            | Var::UpstreamCookie(_)
            | Var::UpstreamAddr
            | Var::UpstreamStatus
            | Var::UpstreamResponseTime
            | Var::UpstreamConnectTime
            | Var::UpstreamHeaderTime
            | Var::UpstreamResponseLength
            | Var::UpstreamBytesReceived
            | Var::UpstreamBytesSent
            | Var::AnswerMap(_) => Phase::Response,
            _ => Phase::Request,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes() {
        assert_eq!(Var::from_name("Server_Name"), Some(Var::ServerName));
        assert_eq!(Var::from_name("document_uri"), Some(Var::Uri));
        assert_eq!(
            Var::from_name("sent_http_cache_control"),
            Some(Var::SentHttp("cache-control".into()))
        );
        assert_eq!(
            Var::from_name("upstream_http_X_Len"),
            Some(Var::UpstreamHttp("x-len".into()))
        );
        assert_eq!(
            Var::from_name("upstream_cookie_SID"),
            Some(Var::UpstreamCookie("sid".into()))
        );
        assert_eq!(Var::from_name("http_user_agent"), Some(Var::Http("user-agent".into())));
        // a prefix alone names the variable with an empty suffix (empty, as nginx's `$arg_`, `nginx -t`)
        assert_eq!(Var::from_name("upstream_http_"), Some(Var::UpstreamHttp(String::new())));
        assert_eq!(Var::from_name("arg_"), Some(Var::Arg(String::new())));
        assert_eq!(Var::from_name("nope"), None);
        assert!(Var::in_stream("Hostname") && !Var::in_stream("request_uri"));
        assert_eq!(Var::Status.phase(), Phase::Response);
        assert_eq!(Var::RequestId.phase(), Phase::Request);
        assert!(Var::UpstreamAddr.is_upstream_try() && Var::UpstreamBytesSent.is_upstream_try());
        assert!(!Var::UpstreamHttp("x".into()).is_upstream_try() && !Var::Status.is_upstream_try());
    }
}
