//! A client connection's TLS step on a `listen ... ssl` address: the handshake (within the default server's
//! `client_header_timeout`), or a plain HTTP client that nginx answers with its 400 page after reading the head.

use super::conn_snapshot::ConnSnapshot;
use crate::http::pages;
use crate::http::Rejection;
use crate::runtime::Runtime;
use crate::shard::Buffers;
use crate::tls::{Accepted, TlsFacts};
use corelb_shared_state::ShardSlot;

/// nginx's answer to plain HTTP on a TLS port (`NGX_HTTP_TO_HTTPS`, sent as 400).
pub const TO_HTTPS: Rejection = Rejection::new(pages::TO_HTTPS, "plain HTTP request to a TLS port");

/// The connection to serve, and whether it is plain HTTP on a TLS port; `None`: it closed in its handshake. A
/// plain address returns `sock` as it is. `remote` is what `$remote_addr` in a certificate name reads at the
/// handshake, and the `client:` of its error (unknown: empty).
pub async fn open<R: Runtime>(
    at: &ConnSnapshot,
    sock: R::Conn,
    remote: Option<std::net::SocketAddr>,
    bufs: &mut Buffers,
    counters: &ShardSlot,
) -> Option<(R::Conn, bool)> {
    let Some(config) = at.snap.http_ports.get(at.port()).and_then(|p| p.tls.as_ref()) else {
        bufs.tls = None;
        return Some((sock, false));
    };
    let facts = bufs.tls.get_or_insert_with(TlsFacts::default);
    // boxed: the handshake's state (a rustls session) is not part of every connection's future, plain ones included
    let accepting = Box::pin(crate::tls::accept::<R>(
        sock,
        remote,
        config,
        at.defaults().client_header_timeout,
        facts,
    ));
    match accepting.await {
        Accepted::Tls(sock) => {
            counters.count_handshake(facts.reused);
            Some((sock, false))
        }
        Accepted::Plain(sock) => {
            bufs.tls = None;
            Some((sock, true))
        }
        Accepted::Failed => {
            counters.count_handshake_failed();
            None
        }
    }
}
