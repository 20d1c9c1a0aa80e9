//! What a TLS connection's variables read (`$ssl_protocol`, `$ssl_cipher`, `$ssl_server_name`,
//! `$ssl_session_reused`), taken once when its handshake is done.

use super::client_auth::Verdict;
use super::resolve::SniCerts;
use crate::config::tls::openssl_name;
use crate::config::var::Var;

/// The facts of one TLS connection's handshake.
#[derive(Debug, Clone, Default)]
pub struct TlsFacts {
    /// OpenSSL's name of the version (`TLSv1.3`).
    pub protocol: &'static str,
    /// OpenSSL's name of the suite (`TLS_AES_128_GCM_SHA256`, `ECDHE-RSA-AES128-GCM-SHA256`).
    pub cipher: &'static str,
    /// The name the client sent (SNI), empty without one.
    pub server_name: String,
    /// The session was resumed (`r`, else `.`).
    pub reused: bool,
    /// The client certificate's verdict (`$ssl_client_verify`), where the handshake's server verifies clients.
    pub client: Verdict,
    /// The client's certificate (DER; empty: none, or not verified here), for the `$ssl_client_*` variables.
    pub client_cert: Vec<u8>,
    /// The facts fewer configs read, apart (boxed: an idle connection's buffers hold the facts whole).
    pub more: Box<MoreFacts>,
}

/// The facts of a handshake that fewer variables read.
#[derive(Debug, Clone, Default)]
pub struct MoreFacts {
    /// `$ssl_session_id`: given to a new session, read back from the ticket or cache entry of a resumed one.
    pub session_id: [u8; 32],
    /// The protocol ALPN chose (`$ssl_alpn_protocol`).
    pub alpn: Vec<u8>,
    /// The suites the client offered (`$ssl_ciphers`), where the address keeps them.
    pub ciphers: String,
}

impl TlsFacts {
    /// The facts of `session`, into `self` (its name buffer reused); a session that is not resumed has the id
    /// `fresh`, which its handshake put into its tickets.
    pub fn take(&mut self, session: &rustls::ServerConnection, fresh: [u8; 32]) {
        self.protocol = match session.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "",
        };
        self.cipher = session
            .negotiated_cipher_suite()
            .map_or("", |s| openssl_name(s.suite()));
        self.server_name.clear();
        self.server_name.push_str(session.server_name().unwrap_or_default());
        self.reused = session.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let more = &mut *self.more;
        more.session_id = fresh;
        more.alpn.clear();
        more.alpn.extend_from_slice(session.alpn_protocol().unwrap_or_default());
        more.ciphers.clear();
        if let Some(id) = session.received_resumption_data().filter(|_| self.reused) {
            if let Ok(id) = <[u8; 32]>::try_from(id) {
                more.session_id = id;
            }
        }
        self.client = Verdict::None;
        self.client_cert.clear();
    }

    /// The client certificate of `session` checked for the server its SNI picked among `certs`.
    pub fn take_client(&mut self, session: &rustls::ServerConnection, certs: &SniCerts) {
        let peer = session.peer_certificates();
        let now = rustls::pki_types::UnixTime::now();
        self.client = super::client_auth::verdict(certs, session.server_name(), peer, now);
        if self.client != Verdict::None {
            if let Some(ee) = peer.and_then(|p| p.first()) {
                self.client_cert.extend_from_slice(ee);
            }
        }
    }
}

/// nginx writes a session id in lower-case hex (`ngx_hex_dump`).
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the value of `$https` or an `$ssl_*` variable for a connection with the handshake `tls` (none: plain).
pub fn append(tls: Option<&TlsFacts>, var: &Var, out: &mut Vec<u8>) {
    let Some(t) = tls else {
        return;
    };
    match var {
        Var::Https => out.extend_from_slice(b"on"),
        Var::SslProtocol => out.extend_from_slice(t.protocol.as_bytes()),
        Var::SslCipher => out.extend_from_slice(t.cipher.as_bytes()),
        Var::SslServerName => out.extend_from_slice(t.server_name.as_bytes()),
        Var::SslSessionReused => out.push(if t.reused { b'r' } else { b'.' }),
        Var::SslAlpnProtocol => out.extend_from_slice(&t.more.alpn),
        Var::SslCiphers => out.extend_from_slice(t.more.ciphers.as_bytes()),
        Var::SslSessionId => {
            for b in t.more.session_id {
                let digit = |n: u8| HEX.get(usize::from(n)).copied().unwrap_or(b'0');
                out.extend_from_slice(&[digit(b >> 4), digit(b & 15)]);
            }
        }
        _ => {}
    }
}
