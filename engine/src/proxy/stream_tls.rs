//! A stream session's TLS steps, in nginx's phase order: the handshake of `listen ... ssl` (within
//! `ssl_handshake_timeout`; the client's certificate checked as `ssl_verify_client` says), `ssl_preread`'s read of
//! the client's hello (kept, to be sent to the upstream first; at most `preread_buffer_size` bytes within
//! `preread_timeout`), and the handshake of `proxy_ssl on` towards the upstream.

use crate::access_log::stream::{BAD_REQUEST, OK};
use crate::config::tls::StreamSsl;
use crate::log::{ErrorLogs, Level};
use crate::runtime::iobuf::IoBuf;
use crate::runtime::{io_timeout, timeout, Conn, Runtime};
use crate::tls::client_auth::{refusal, Verdict};
use crate::tls::client_config::UpstreamTls;
use crate::tls::preread::{self, Parsed, Preread};
use crate::tls::{Accepted, PortTls, TlsFacts};
use corelb_shared_state::ShardSlot;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The longest wait taken (a larger timeout is as good as forever, and a clock sum cannot overflow).
const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs the handshake of `sock` (from `remote`) with `tls` within `wait`: the session and its facts, or `None`
/// when it failed (nginx ends the session with 500).
pub async fn handshake<R: Runtime>(
    sock: R::Conn,
    remote: SocketAddr,
    tls: &PortTls,
    wait: Duration,
    counters: &ShardSlot,
    errors: Option<&ErrorLogs>,
) -> Option<(R::Conn, TlsFacts)> {
    let mut facts = TlsFacts::default();
    // boxed: the handshake's state (a rustls session) is not part of every session's future
    let accepting = Box::pin(crate::tls::accept::<R>(sock, Some(remote), tls, wait, &mut facts));
    let sock = match accepting.await {
        Accepted::Tls(sock) => sock,
        Accepted::Plain(_) | Accepted::Failed => {
            counters.count_handshake_failed();
            crate::log_in!(errors, Level::Info, "SSL handshake failed while SSL handshaking");
            return None;
        }
    };
    counters.count_handshake(facts.reused);
    Some((sock, facts))
}

/// Whether the server's `ssl_verify_client` (its `ssl`) refuses the client of a handshake with `facts` (nginx
/// ends the session with 500), logged as nginx logs it.
pub fn client_refused(facts: &TlsFacts, ssl: &StreamSsl, errors: Option<&ErrorLogs>) -> bool {
    let Some(mode) = ssl.server.as_ref().and_then(|c| c.client.as_ref()).map(|c| c.mode) else {
        return false;
    };
    if refusal(mode, facts.client).is_none() {
        return false;
    }
    match facts.client {
        Verdict::Failed(e) => crate::log_in!(errors, Level::Info, "client SSL certificate verify error: {e}"),
        _ => crate::log_in!(errors, Level::Info, "client sent no required SSL certificate"),
    }
    true
}

/// `ssl_preread`: reads the client's first bytes (after `early`, what came with its PROXY protocol header) until
/// they are a whole hello or not one. The bytes read, to go to the upstream first, and the hello's facts (`None`:
/// declined); `Err(status)` ends the session: 400 for a full buffer, 200 for a client that left or was too slow.
pub async fn read_hello<R: Runtime>(
    client: &mut R::Conn,
    early: Option<&IoBuf>,
    ssl: &StreamSsl,
    errors: Option<&ErrorLogs>,
) -> Result<(IoBuf, Option<Preread>), u16> {
    let mut buf = IoBuf::new(ssl.preread_buffer_size.max(1));
    if let Some(e) = early {
        let bytes = e.readable();
        let n = bytes.len().min(buf.spare().len());
        if let (Some(to), Some(from)) = (buf.spare().get_mut(..n), bytes.get(..n)) {
            to.copy_from_slice(from);
        }
        buf.commit(n);
    }
    let deadline = Instant::now() + ssl.preread_timeout.min(LONGEST);
    let mut facts = Preread::default();
    loop {
        if !buf.readable().is_empty() {
            match preread::parse(buf.readable(), &mut facts) {
                Parsed::Hello => return Ok((buf, Some(facts))),
                Parsed::Declined => return Ok((buf, None)),
                Parsed::More if buf.is_full() => {
                    crate::log_in!(errors, Level::Error, "preread buffer full");
                    return Err(BAD_REQUEST);
                }
                Parsed::More => {}
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match timeout::<R, _>(left, buf.fill_untimed(client)).await {
            Ok(Ok(1..)) => {}
            _ => return Err(OK),
        }
    }
}

/// `proxy_ssl on`: the TLS session over the fresh upstream connection `conn` to `addr`, within `wait` (nginx's
/// handshake timer is the connect one).
pub async fn to_upstream<R: Runtime>(
    conn: R::Conn,
    tls: &UpstreamTls,
    addr: SocketAddr,
    wait: Duration,
    errors: Option<&ErrorLogs>,
) -> std::io::Result<R::Conn> {
    // boxed: a session's handshake state is not part of every session's future, plain ones included
    let opening = Box::pin(conn.connect_tls(std::sync::Arc::clone(&tls.config), tls.name.clone()));
    let result = io_timeout::<R, _>(wait, opening).await;
    if let Err(e) = &result {
        match crate::tls::verify::PeerRefused::of_io(e) {
            Some(crate::tls::verify::PeerRefused::Name) => crate::log_in!(
                errors,
                Level::Error,
                "upstream SSL certificate does not match \"{}\" while SSL handshaking to upstream, upstream: {addr}",
                tls.name_text
            ),
            Some(r) => crate::log_in!(
                errors,
                Level::Error,
                "{r} while SSL handshaking to upstream, upstream: {addr}"
            ),
            None => crate::log_in!(
                errors,
                Level::Error,
                "SSL_do_handshake() failed ({e}) while SSL handshaking to upstream, upstream: {addr}"
            ),
        }
    }
    result
}
