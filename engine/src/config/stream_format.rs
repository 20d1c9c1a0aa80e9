//! Stream values compiled once at load: a stream `log_format` (nginx's `ngx_stream_log_compile_format`), an
//! `access_log ... if=` condition and a `return` value, all text and nginx's stream variables
//! (`ngx_stream_variables.c`, `ngx_stream_upstream.c`), with the http log's escaping modes.

use crate::config::log_format::{self, Escape, FormatError, Piece};

/// A variable of nginx's stream module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamVar {
    RemoteAddr,
    /// The client address as 4 (IPv4) or 16 (IPv6) bytes.
    BinaryRemoteAddr,
    RemotePort,
    /// The connection's own peer, before `set_real_ip_from`.
    RealipRemoteAddr,
    RealipRemotePort,
    /// What the connection's PROXY protocol header said; empty without one.
    ProxyProtocolAddr,
    ProxyProtocolPort,
    ProxyProtocolServerAddr,
    ProxyProtocolServerPort,
    ProxyProtocolTlv(crate::config::proxy_tlv::TlvName),
    ServerAddr,
    ServerPort,
    /// `TCP` (corelb has no UDP stream servers).
    Protocol,
    Connection,
    Pid,
    Hostname,
    /// corelb's version, as `$nginx_version` is nginx's.
    NginxVersion,
    Msec,
    TimeLocal,
    TimeIso8601,
    // Known when the session ends.
    Status,
    BytesSent,
    BytesReceived,
    SessionTime,
    UpstreamAddr,
    UpstreamBytesSent,
    UpstreamBytesReceived,
    UpstreamConnectTime,
    UpstreamFirstByteTime,
    UpstreamSessionTime,
    /// A stream `map` variable: index into the stream block's maps (their sources are known at the start).
    Map(usize),
    /// `$limit_conn_status` (`-` where no `limit_conn` key was counted).
    LimitConnStatus,
    /// A TLS variable (`listen ... ssl`, `ssl_preread`).
    Tls(StreamTls),
}

/// The TLS variables of a stream session (`ngx_stream_ssl_module`, `ngx_stream_ssl_preread_module`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamTls {
    Protocol,
    Cipher,
    ServerName,
    SessionReused,
    SessionId,
    AlpnProtocol,
    Client(crate::config::var::ClientVar),
    Preread(crate::config::var::PrereadVar),
}

impl StreamTls {
    /// The variable of the http side's variables it is.
    pub fn var(self) -> crate::config::var::Var {
        use crate::config::var::Var;
        match self {
            StreamTls::Protocol => Var::SslProtocol,
            StreamTls::Cipher => Var::SslCipher,
            StreamTls::ServerName => Var::SslServerName,
            StreamTls::SessionReused => Var::SslSessionReused,
            StreamTls::SessionId => Var::SslSessionId,
            StreamTls::AlpnProtocol => Var::SslAlpnProtocol,
            StreamTls::Client(c) => Var::SslClient(c),
            StreamTls::Preread(p) => Var::SslPreread(p),
        }
    }

    /// The stream TLS variable `var` is, if it is one.
    fn of(var: &crate::config::var::Var) -> Option<StreamTls> {
        use crate::config::var::Var;
        Some(match var {
            Var::SslProtocol => StreamTls::Protocol,
            Var::SslCipher => StreamTls::Cipher,
            Var::SslServerName => StreamTls::ServerName,
            Var::SslSessionReused => StreamTls::SessionReused,
            Var::SslSessionId => StreamTls::SessionId,
            Var::SslAlpnProtocol => StreamTls::AlpnProtocol,
            Var::SslClient(c) => StreamTls::Client(*c),
            Var::SslPreread(p) => StreamTls::Preread(*p),
            _ => return None,
        })
    }
}

const NAMES: &[(&str, StreamVar)] = &[
    ("remote_addr", StreamVar::RemoteAddr),
    ("binary_remote_addr", StreamVar::BinaryRemoteAddr),
    ("remote_port", StreamVar::RemotePort),
    ("realip_remote_addr", StreamVar::RealipRemoteAddr),
    ("realip_remote_port", StreamVar::RealipRemotePort),
    ("proxy_protocol_addr", StreamVar::ProxyProtocolAddr),
    ("proxy_protocol_port", StreamVar::ProxyProtocolPort),
    ("proxy_protocol_server_addr", StreamVar::ProxyProtocolServerAddr),
    ("proxy_protocol_server_port", StreamVar::ProxyProtocolServerPort),
    ("server_addr", StreamVar::ServerAddr),
    ("server_port", StreamVar::ServerPort),
    ("protocol", StreamVar::Protocol),
    ("connection", StreamVar::Connection),
    ("pid", StreamVar::Pid),
    ("hostname", StreamVar::Hostname),
    ("nginx_version", StreamVar::NginxVersion),
    ("msec", StreamVar::Msec),
    ("time_local", StreamVar::TimeLocal),
    ("time_iso8601", StreamVar::TimeIso8601),
    ("status", StreamVar::Status),
    ("limit_conn_status", StreamVar::LimitConnStatus),
    ("bytes_sent", StreamVar::BytesSent),
    ("bytes_received", StreamVar::BytesReceived),
    ("session_time", StreamVar::SessionTime),
    ("upstream_addr", StreamVar::UpstreamAddr),
    ("upstream_bytes_sent", StreamVar::UpstreamBytesSent),
    ("upstream_bytes_received", StreamVar::UpstreamBytesReceived),
    ("upstream_connect_time", StreamVar::UpstreamConnectTime),
    ("upstream_first_byte_time", StreamVar::UpstreamFirstByteTime),
    ("upstream_session_time", StreamVar::UpstreamSessionTime),
];

impl StreamVar {
    /// The variable of an nginx name (without `$`, any case), or `None` if corelb does not know it.
    pub fn from_name(name: &str) -> Option<StreamVar> {
        let lower = name.to_ascii_lowercase();
        if let Some(t) = lower.strip_prefix("proxy_protocol_tlv_").filter(|t| !t.is_empty()) {
            let tlv = crate::config::proxy_tlv::TlvName::parse(t);
            return Some(StreamVar::ProxyProtocolTlv(
                tlv.unwrap_or(crate::config::proxy_tlv::TlvName::Unknown),
            ));
        }
        NAMES.iter().find(|(n, _)| *n == lower).map(|&(_, v)| v).or_else(|| {
            crate::config::var::Var::from_name(&lower)
                .as_ref()
                .and_then(StreamTls::of)
                .map(StreamVar::Tls)
        })
    }

    /// Whether the value is known when the session starts (a `return` value may name only these).
    pub fn at_start(self) -> bool {
        !matches!(
            self,
            StreamVar::Status
                | StreamVar::BytesSent
                | StreamVar::BytesReceived
                | StreamVar::SessionTime
                | StreamVar::UpstreamAddr
                | StreamVar::UpstreamBytesSent
                | StreamVar::UpstreamBytesReceived
                | StreamVar::UpstreamConnectTime
                | StreamVar::UpstreamFirstByteTime
                | StreamVar::UpstreamSessionTime
        )
    }
}

/// One piece of a stream value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamOp {
    Text(Vec<u8>),
    Var(StreamVar),
}

/// A compiled stream format (`log_format`), condition (`if=`) or value (`return`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFormat {
    pub name: String,
    pub escape: Escape,
    ops: Vec<StreamOp>,
}

/// A name a format named that is not a stream variable (nginx reports it when the stream block ends).
pub type Unknown = String;

/// The stream block's `map` variables: a name (any case) to its map's index.
pub type MapNames<'a> = &'a dyn Fn(&str) -> Option<usize>;

impl StreamFormat {
    /// `log_format NAME [escape=...] STRING ...`: `args` are the arguments after the name, joined without a
    /// separator as nginx does. An unknown variable is left out and returned beside the format (nginx's error
    /// comes when the block ends).
    pub fn compile(name: &str, args: &[String]) -> Result<(StreamFormat, Vec<Unknown>), FormatError> {
        Self::compile_with(name, args, &|_| None)
    }

    /// [`StreamFormat::compile`] in a block whose `map` variables `maps` resolves (name to map index).
    pub fn compile_with(
        name: &str,
        args: &[String],
        maps: MapNames<'_>,
    ) -> Result<(StreamFormat, Vec<Unknown>), FormatError> {
        let mut escape = Escape::Default;
        let mut strings = args;
        if let Some(mode) = args.first().and_then(|a| a.strip_prefix("escape=")) {
            escape = match mode {
                "default" => Escape::Default,
                "json" => Escape::Json,
                "none" => Escape::None,
                other => return Err(FormatError::Escaping(other.into())),
            };
            strings = args.get(1..).unwrap_or_default();
        }
        let mut format = StreamFormat {
            name: name.into(),
            escape,
            ops: Vec::new(),
        };
        let mut unknown = Vec::new();
        for s in strings {
            format.scan(s, maps, &mut unknown)?;
        }
        Ok((format, unknown))
    }

    /// A value written as it is (`if=`, `return`): no escaping, a missing value is empty.
    pub fn value(name: &str, text: &str) -> Result<(StreamFormat, Vec<Unknown>), FormatError> {
        Self::value_with(name, text, &|_| None)
    }

    /// [`StreamFormat::value`] in a block whose `map` variables `maps` resolves (name to map index).
    pub fn value_with(name: &str, text: &str, maps: MapNames<'_>) -> Result<(StreamFormat, Vec<Unknown>), FormatError> {
        let mut format = StreamFormat {
            name: name.into(),
            escape: Escape::None,
            ops: Vec::new(),
        };
        let mut unknown = Vec::new();
        format.scan(text, maps, &mut unknown)?;
        Ok((format, unknown))
    }

    /// The compiled pieces.
    pub fn ops(&self) -> &[StreamOp] {
        &self.ops
    }

    /// The text, when the value has no variables.
    pub fn fixed(&self) -> Option<&[u8]> {
        match self.ops.as_slice() {
            [] => Some(b""),
            [StreamOp::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The first variable not known when the session starts.
    pub fn first_late(&self) -> Option<StreamVar> {
        self.ops.iter().find_map(|op| match op {
            StreamOp::Var(v) if !v.at_start() => Some(*v),
            _ => None,
        })
    }

    fn push_text(&mut self, text: &[u8]) {
        if text.is_empty() {
            return;
        }
        match self.ops.last_mut() {
            Some(StreamOp::Text(t)) => t.extend_from_slice(text),
            _ => self.ops.push(StreamOp::Text(text.to_vec())),
        }
    }

    /// One string: nginx's `$name` / `${name}` scan, with its messages ([`log_format::scan`]).
    fn scan(&mut self, s: &str, maps: MapNames<'_>, unknown: &mut Vec<Unknown>) -> Result<(), FormatError> {
        log_format::scan(s, |piece| {
            match piece {
                Piece::Text(t) => self.push_text(t),
                Piece::Var(name) => match maps(name).map(StreamVar::Map).or_else(|| StreamVar::from_name(name)) {
                    Some(v) => self.ops.push(StreamOp::Var(v)),
                    None => unknown.push(name.to_ascii_lowercase()),
                },
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn formats_join_strings_and_know_stream_variables() {
        let (f, unknown) = StreamFormat::compile(
            "addr",
            &args(&[
                "$binary_remote_addr:$Remote_Addr:",
                "${upstream_addr}x",
                " $session_time",
            ]),
        )
        .unwrap();
        assert!(unknown.is_empty());
        assert_eq!(f.escape, Escape::Default);
        assert_eq!(
            f.ops(),
            &[
                StreamOp::Var(StreamVar::BinaryRemoteAddr),
                StreamOp::Text(b":".to_vec()),
                StreamOp::Var(StreamVar::RemoteAddr),
                StreamOp::Text(b":".to_vec()),
                StreamOp::Var(StreamVar::UpstreamAddr),
                StreamOp::Text(b"x ".to_vec()),
                StreamOp::Var(StreamVar::SessionTime),
            ]
        );
        assert_eq!(f.fixed(), None);
        assert_eq!(f.first_late(), Some(StreamVar::UpstreamAddr));
        let (j, _) = StreamFormat::compile("j", &args(&["escape=json", "{\"s\":$status}"])).unwrap();
        assert_eq!(j.escape, Escape::Json);
        assert_eq!(j.ops()[1], StreamOp::Var(StreamVar::Status));
    }

    #[test]
    fn http_variables_are_unknown_in_stream() {
        let (f, unknown) = StreamFormat::compile("x", &args(&["$request $status $http_host"])).unwrap();
        assert_eq!(unknown, vec!["request".to_string(), "http_host".to_string()]);
        assert_eq!(f.ops()[1], StreamOp::Var(StreamVar::Status));
    }

    #[test]
    fn values_and_nginx_errors() {
        let (v, _) = StreamFormat::value("return", "OK").unwrap();
        assert_eq!((v.escape, v.fixed()), (Escape::None, Some(&b"OK"[..])));
        let (v, _) = StreamFormat::value("return", "$remote_addr $time_iso8601\n").unwrap();
        assert_eq!(v.first_late(), None);
        let err = |a: &[&str]| StreamFormat::compile("x", &args(a)).unwrap_err().to_string();
        assert_eq!(err(&["escape=xml", "$status"]), "unknown log format escaping \"xml\"");
        assert_eq!(err(&["a $"]), "invalid parameter \"$\"");
        assert_eq!(err(&["a $-b"]), "invalid parameter \"$-b\"");
        assert_eq!(
            err(&["${status"]),
            "the closing bracket in \"status\" variable is missing"
        );
    }
}
