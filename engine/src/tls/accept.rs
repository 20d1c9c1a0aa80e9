//! The first step of a connection on a TLS address: peek at its first byte (nginx's `ngx_http_ssl_handshake`):
//! a TLS record (0x16, or an SSLv2 hello's high bit) runs the handshake within `client_header_timeout`; anything
//! else is plain HTTP sent to a TLS port, which nginx answers with its 400 page once the request head is read.
//! Where a server has `ssl_reject_handshake on`, the client's hello is read first (peeked, left in the socket)
//! and a handshake naming that server gets nginx's `unrecognized_name` alert; where a value names `$ssl_ciphers`,
//! the peeked hello gives the suites it offers.

use super::{PortTls, TlsFacts};
use crate::runtime::{io_timeout, Conn, Runtime};
use futures_lite::AsyncWriteExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What accepting a connection on a TLS address gave.
pub enum Accepted<C> {
    /// The handshake is done: the connection reads and writes through its session.
    Tls(C),
    /// The client sent something other than a TLS record: plain HTTP.
    Plain(C),
    /// The client left, sent a bad or truncated handshake, was too slow, or was refused: the connection is closed.
    Failed,
}

/// The TLS handshake record's content type.
const HANDSHAKE: u8 = 0x16;

/// A fatal `unrecognized_name` alert record (RFC 8446 6.2: level 2, description 112), as OpenSSL sends it when
/// nginx's server-name callback rejects a handshake.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70];

/// The most of a client hello peeked at for its name (a hello is one record, at most 16 KiB and its header).
const HELLO_MAX: usize = 16 * 1024 + 5;

/// Accepts `sock` (from `remote`, where the caller knows it) on a TLS address with `tls`, the whole step within
/// `wait`; a TLS connection's facts go into `facts`.
pub async fn accept<R: Runtime>(
    sock: R::Conn,
    remote: Option<SocketAddr>,
    tls: &PortTls,
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
    let left = || wait.saturating_sub(start.elapsed());
    let mut ciphers = String::new();
    if tls.ciphers {
        // `$ssl_ciphers`: the suites the hello offers, as OpenSSL names them
        let offered = |h: &rustls::server::ClientHello<'_>| {
            let mut names = String::new();
            for (i, c) in h.cipher_suites().iter().enumerate() {
                if i > 0 {
                    names.push(':');
                }
                match crate::config::tls::openssl_name(*c) {
                    "" => names.push_str(&format!("0x{:04x}", u16::from(*c))),
                    name => names.push_str(name),
                }
            }
            names
        };
        match io_timeout::<R, _>(left(), peek_hello::<R, _>(&sock, offered)).await {
            Ok(names) => ciphers = names.unwrap_or_default(),
            Err(_) => return Accepted::Failed,
        }
    }
    if let Some(certs) = &tls.rejecting {
        let names = |h: &rustls::server::ClientHello<'_>| certs.rejects(h.server_name());
        match io_timeout::<R, _>(left(), peek_hello::<R, _>(&sock, names)).await {
            Ok(None | Some(false)) => {}
            Ok(Some(true)) => {
                let mut sock = sock;
                let _ = io_timeout::<R, _>(left(), sock.write_all(&UNRECOGNIZED_NAME)).await;
                return Accepted::Failed;
            }
            Err(_) => return Accepted::Failed,
        }
    }
    let tls_conf = tls;
    let session_id = rand::random::<[u8; 32]>();
    let config = match tls.per_conn.is_some() {
        true => {
            let unknown = || SocketAddr::from(([0, 0, 0, 0], 0));
            tls.for_conn(remote, sock.local_addr().unwrap_or_else(|_| unknown()))
        }
        false => Arc::clone(&tls.config),
    };
    match io_timeout::<R, _>(left(), sock.accept_tls(config, session_id)).await {
        Ok(tls) => {
            if let Some(session) = tls.tls() {
                facts.take(session, session_id);
                facts.more.ciphers = ciphers;
                if let Some(certs) = &tls_conf.clients {
                    facts.take_client(session, certs);
                }
            }
            Accepted::Tls(tls)
        }
        Err(_) => Accepted::Failed,
    }
}

/// What `look` finds in the client hello waiting in `sock`, left in the socket for the handshake (`None`: not a
/// hello, left for the handshake to fail on).
async fn peek_hello<R: Runtime, T>(
    sock: &R::Conn,
    look: impl Fn(&rustls::server::ClientHello<'_>) -> T,
) -> std::io::Result<Option<T>> {
    let mut buf = vec![0u8; HELLO_MAX];
    let mut seen = 0;
    loop {
        let n = sock.peek(&mut buf).await?;
        let mut acceptor = rustls::server::Acceptor::default();
        let mut bytes = buf.get(..n).unwrap_or_default();
        while !bytes.is_empty() {
            match acceptor.read_tls(&mut bytes) {
                Ok(1..) => {}
                _ => return Ok(None),
            }
        }
        match acceptor.accept() {
            Ok(Some(hello)) => return Ok(Some(look(&hello.client_hello()))),
            Ok(None) if n < buf.len() && n > 0 => {}
            _ => return Ok(None),
        }
        if n == seen {
            // the rest of the hello has not come yet: the peek would find the same bytes at once
            R::sleep(Duration::from_millis(5)).await;
        }
        seen = n;
    }
}
