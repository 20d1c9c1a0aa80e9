//! The first step of a connection on a TLS address: peek at its first byte (nginx's `ngx_http_ssl_handshake`):
//! a TLS record (0x16, or an SSLv2 hello's high bit) runs the handshake within `client_header_timeout`; anything
//! else is plain HTTP sent to a TLS port, which nginx answers with its 400 page once the request head is read.

use super::TlsFacts;
use crate::runtime::{io_timeout, Conn, Runtime};
use rustls::ServerConfig;
use std::sync::Arc;
use std::time::Duration;

/// What accepting a connection on a TLS address gave.
pub enum Accepted<C> {
    /// The handshake is done: the connection reads and writes through its session.
    Tls(C),
    /// The client sent something other than a TLS record: plain HTTP.
    Plain(C),
    /// The client left, sent a bad or truncated handshake, or was too slow: the connection is closed.
    Failed,
}

/// The TLS handshake record's content type.
const HANDSHAKE: u8 = 0x16;

/// Accepts `sock` on a TLS address with `config`, the whole step within `wait`; a TLS connection's facts go into
/// `facts`.
pub async fn accept<R: Runtime>(
    sock: R::Conn,
    config: &Arc<ServerConfig>,
    wait: Duration,
    facts: &mut TlsFacts,
) -> Accepted<R::Conn> {
    let start = std::time::Instant::now();
    let mut first = [0u8; 1];
    match io_timeout::<R, _>(wait, sock.peek(&mut first)).await {
        Ok(1..) => {}
        _ => return Accepted::Failed,
    }
    if first[0] != HANDSHAKE && first[0] & 0x80 == 0 {
        return Accepted::Plain(sock);
    }
    let left = wait.saturating_sub(start.elapsed());
    match io_timeout::<R, _>(left, sock.accept_tls(Arc::clone(config))).await {
        Ok(tls) => {
            if let Some(session) = tls.tls() {
                facts.take(session);
            }
            Accepted::Tls(tls)
        }
        Err(_) => Accepted::Failed,
    }
}
