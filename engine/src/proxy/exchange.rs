//! One try of a proxied request against one peer: take a pooled connection or connect, send the head (and stream
//! the body when it was not buffered), read the response head. Failures are classified as nginx's
//! `proxy_next_upstream` sees them (error, timeout, invalid header). A pooled connection the upstream had closed
//! while idle is replaced by a fresh one to the same peer within the try (it is not the peer's fault).

use super::body::{forward_body, send, BodyCopy, BodyError, Limits, Relay};
use crate::access_log::record::RequestRecord;
use crate::http::chunked::ChunkedDecoder;
use crate::http::response::{parse_response_uninit, MAX_HEADERS};
use crate::http::BodyFraming;
use crate::runtime::iobuf::IoBuf;
use crate::runtime::{Conn, Runtime};
use crate::shard::{ConnAge, Shard};
use crate::snapshot::route::ProxyPlan;
use crate::snapshot::Snapshot;
use crate::tls::verify::PeerRefused;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// What went wrong with a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FailureKind {
    #[error("connection failed or closed while {0}")]
    Error(&'static str),
    #[error("timed out while {0}")]
    Timeout(&'static str),
    #[error("sent an invalid header")]
    InvalidHeader,
    /// No socket could be made for the connect (nginx's `socket() failed`, with the errno: 24 at
    /// `RLIMIT_NOFILE`): answer 500, the peer not blamed.
    #[error("socket() failed ({}) while connecting to upstream", crate::config::error::errno_text(&io::Error::from_raw_os_error(*.0)))]
    NoSocket(i32),
    /// The client went away while its body was streamed: nothing to answer.
    #[error("the client closed the connection")]
    ClientGone,
    /// The client sent nothing of its streamed body for `client_body_timeout`: answer 408 and close.
    #[error("the client timed out sending its body")]
    ClientTimeout,
    /// The client's streamed chunked body was malformed: answer 400 and close.
    #[error("the client sent a malformed chunked body")]
    BadBody,
    /// The client's streamed body passed `client_max_body_size`: answer 413 and close.
    #[error("the client's body is larger than client_max_body_size")]
    BodyTooLarge,
    /// An `https` upstream's certificate failed `proxy_ssl_verify` (nginx: an error, the next peer).
    #[error("{0} while SSL handshaking to upstream")]
    Refused(PeerRefused),
}

impl FailureKind {
    /// Whether this is nginx's `timeout` condition.
    pub fn is_timeout(&self) -> bool {
        matches!(self, FailureKind::Timeout(_))
    }
}

/// A request body streamed from the client while it is sent (it was not buffered whole).
pub struct StreamedBody<'c, C> {
    pub client: &'c mut C,
    pub framing: BodyFraming,
    /// `client_max_body_size` (0 = no limit).
    pub max: u64,
    /// `client_body_timeout`.
    pub timeout: Duration,
}

/// Whether any of the request reached the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    No,
    Yes,
}

/// A failed try.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    pub kind: FailureKind,
    /// A pooled connection that the upstream had closed: no byte of an answer came back.
    pub stale: bool,
    pub sent: Sent,
}

/// A response head that arrived (it sits at the start of the upstream buffer).
#[derive(Debug, Clone, Copy)]
pub struct ResponseInfo {
    pub status: u16,
    pub head_len: usize,
    pub body: BodyFraming,
    pub reusable: bool,
    /// The connection's use before this request.
    pub age: ConnAge,
    /// Bytes sent to the upstream: the head, and the body (buffered or streamed).
    pub sent: u64,
    /// The head has an `X-Accel-Redirect` line.
    pub accel_redirect: bool,
}

fn io_kind(e: &io::Error, phase: &'static str) -> FailureKind {
    if let Some(errno @ (libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) = e.raw_os_error() {
        // only `socket()` fails so (a connect's own errors are refusals, resets, unreachable networks)
        FailureKind::NoSocket(errno)
    } else if e.kind() == io::ErrorKind::TimedOut {
        FailureKind::Timeout(phase)
    } else {
        FailureKind::Error(phase)
    }
}

/// Whether `e` is a TLS session's error (an upstream's alert, a bad record).
fn tls_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<rustls::Error>())
}

/// Where one try goes: the shard (its keepalive pools), the snapshot and proxy plan of the request, the peer.
pub struct TryTarget<'a, R: Runtime> {
    pub shard: &'a Shard<R>,
    pub snap: &'a Snapshot,
    pub plan: &'a ProxyPlan,
    pub addr: SocketAddr,
}

// Only references and an address: copied freely (a derive would ask `R: Copy`).
impl<R: Runtime> Clone for TryTarget<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Runtime> Copy for TryTarget<'_, R> {}

/// The buffers one try works with: the upstream request (head and a buffered body), the client's buffer (a
/// streamed body), the upstream buffer, the chunked decoder and the access log's record of the tries.
pub struct TryIo<'b> {
    pub request: &'b [u8],
    pub client_buf: &'b mut IoBuf,
    pub ubuf: &'b mut IoBuf,
    pub decoder: &'b mut ChunkedDecoder,
    pub log: &'b mut RequestRecord,
    /// A HEAD request: the response has no body whatever its headers say.
    pub head_request: bool,
    /// The client asked for an upgrade: a `101` is an answer (else it is an invalid header).
    pub upgrade: bool,
}

impl TryIo<'_> {
    fn reborrow(&mut self) -> TryIo<'_> {
        TryIo {
            request: self.request,
            client_buf: &mut *self.client_buf,
            ubuf: &mut *self.ubuf,
            decoder: &mut *self.decoder,
            log: &mut *self.log,
            head_request: self.head_request,
            upgrade: self.upgrade,
        }
    }
}

/// An upstream connection a try runs on: pooled (used as `age` says) or fresh.
#[derive(Debug, Clone, Copy)]
struct UpstreamConn {
    pooled: bool,
    age: ConnAge,
}

/// Runs one try against `to.addr`, noting in the log record when it connected and read the head. `body` is the
/// client and its body framing when the body must be streamed (it was not buffered whole).
pub async fn exchange<R: Runtime>(
    to: TryTarget<'_, R>,
    mut body: Option<StreamedBody<'_, R::Conn>>,
    mut io: TryIo<'_>,
) -> Result<(R::Conn, ResponseInfo), Failure> {
    let conf = &to.plan.conf;
    let pooled = to.shard.pool_take(to.snap, to.plan.upstream, to.addr);
    // a connection of the other kind (plain, TLS) to the same peer, left by a location proxying to the same
    // upstream with the other scheme, is closed
    let pooled = pooled.filter(|(c, _)| c.upstream_tls().is_some() == to.plan.tls.is_some());
    if let Some((conn, age)) = pooled {
        let resendable = body.is_none();
        let pooled = UpstreamConn { pooled: true, age };
        match try_on::<R>(conn, pooled, body.take(), io.reborrow(), to.plan).await {
            // The upstream had closed it while it sat idle. nginx's keepalive module sees such a connection close
            // in its cache and drops it, so the request goes out on a fresh connection to the same peer: no
            // failure for the peer, no try spent. Do the same (once) when the request can be sent again.
            Err(f) if f.stale && resendable => {}
            done => return done,
        }
    }
    let conn = R::connect(to.addr, conf.connect_timeout).await.map_err(|e| Failure {
        kind: io_kind(&e, "connecting"),
        stale: false,
        sent: Sent::No,
    })?;
    // Nagle's algorithm stays on where the request goes out in one write (nginx sets `TCP_NODELAY` on an upstream
    // connection only for its TLS handshake or a body sent in parts): a syscall saved per connect
    let conn = match &to.plan.tls {
        None => conn,
        Some(tls) => {
            let _ = conn.set_nodelay(true);
            handshake::<R>(conn, tls, conf.connect_timeout).await?
        }
    };
    let fresh = UpstreamConn {
        pooled: false,
        age: ConnAge::fresh(crate::clock::instant()),
    };
    try_on::<R>(conn, fresh, body, io, to.plan).await
}

/// Opens the TLS session of an `https` upstream on the fresh `conn`, within `proxy_connect_timeout` (nginx's
/// handshake timer is the connect one).
#[inline(never)]
async fn handshake<R: Runtime>(
    conn: R::Conn,
    tls: &crate::tls::client_config::UpstreamTls,
    wait: Duration,
) -> Result<R::Conn, Failure> {
    let phase = "SSL handshaking to upstream";
    // boxed: a session's handshake state is not part of every try's future, plain ones included
    let opening = Box::pin(conn.connect_tls(std::sync::Arc::clone(&tls.config), tls.name.clone()));
    crate::runtime::io_timeout::<R, _>(wait, opening)
        .await
        .map_err(|e| Failure {
            kind: match PeerRefused::of_io(&e) {
                Some(r) => FailureKind::Refused(r),
                None => io_kind(&e, phase),
            },
            stale: false,
            sent: Sent::No,
        })
}

/// Sends the request on `conn` and reads the head.
async fn try_on<R: Runtime>(
    mut conn: R::Conn,
    how: UpstreamConn,
    body: Option<StreamedBody<'_, R::Conn>>,
    io: TryIo<'_>,
    plan: &ProxyPlan,
) -> Result<(R::Conn, ResponseInfo), Failure> {
    let conf = &plan.conf;
    let TryIo {
        request,
        client_buf,
        ubuf,
        decoder,
        log,
        head_request,
        upgrade,
    } = io;
    let cached = how.pooled;
    log.try_connected();
    let sent = send_request::<R>(&mut conn, cached, request, body, client_buf, decoder, conf.send_timeout).await?;
    log.try_sent(sent);
    let (status, head_len, body, reusable, accel_redirect) = read_head::<R>(
        &mut conn,
        cached,
        ubuf,
        ReadHead { head_request, upgrade },
        conf.read_timeout,
    )
    .await?;
    log.try_header(status);
    let info = ResponseInfo {
        status,
        head_len,
        body,
        reusable,
        age: how.age,
        sent,
        accel_redirect,
    };
    Ok((conn, info))
}

fn sent_failure(kind: FailureKind, stale: bool) -> Failure {
    Failure {
        kind,
        stale,
        sent: Sent::Yes,
    }
}

/// Sends the head (and a buffered body), or the head then the body streamed from the client; returns the bytes
/// sent.
async fn send_request<R: Runtime>(
    conn: &mut R::Conn,
    cached: bool,
    request: &[u8],
    body: Option<StreamedBody<'_, R::Conn>>,
    client_buf: &mut IoBuf,
    decoder: &mut ChunkedDecoder,
    send_timeout: Duration,
) -> Result<u64, Failure> {
    let Some(StreamedBody {
        client,
        framing,
        max,
        timeout,
    }) = body
    else {
        return match send::<R>(conn, request, send_timeout).await {
            Ok(()) => Ok(request.len() as u64),
            Err(e) => {
                let kind = io_kind(&e, "sending the request");
                Err(sent_failure(kind, cached && !kind.is_timeout()))
            }
        };
    };
    // the head, then the body as the client sends it: writes that must not wait for the upstream's ACKs
    let _ = conn.set_nodelay(true);
    let mut head = request.to_vec();
    let limits = Limits {
        read: timeout,
        write: send_timeout,
        max_body: max,
    };
    let copy = BodyCopy {
        framing,
        relay: match framing {
            BodyFraming::Chunked => Relay::Rechunk,
            _ => Relay::Verbatim,
        },
        limits,
        pace: None,
    };
    match forward_body::<R>(client, client_buf, decoder, conn, &mut head, copy).await {
        Ok(body) => Ok(request.len() as u64 + body),
        Err(BodyError::Write(e)) => Err(sent_failure(io_kind(&e, "sending the request body"), false)),
        Err(BodyError::Chunk(_)) => Err(sent_failure(FailureKind::BadBody, false)),
        Err(BodyError::TooLarge) => Err(sent_failure(FailureKind::BodyTooLarge, false)),
        Err(BodyError::Read(e)) if e.kind() == io::ErrorKind::TimedOut => {
            Err(sent_failure(FailureKind::ClientTimeout, false))
        }
        Err(_) => Err(sent_failure(FailureKind::ClientGone, false)),
    }
}

/// What the request says about the response head to expect.
#[derive(Debug, Clone, Copy)]
struct ReadHead {
    head_request: bool,
    upgrade: bool,
}

/// Reads until a final (non-1xx) response head is in `ubuf`, or a `101` when the client asked for an upgrade:
/// its status, length, body framing, reusability and whether it has an `X-Accel-Redirect` line.
async fn read_head<R: Runtime>(
    conn: &mut R::Conn,
    cached: bool,
    ubuf: &mut IoBuf,
    expect: ReadHead,
    read_timeout: Duration,
) -> Result<(u16, usize, BodyFraming, bool, bool), Failure> {
    let head_request = expect.head_request;
    ubuf.consume(usize::MAX);
    let mut got_any = false;
    loop {
        // (in a block: the header slots are not part of the future, held across the read below; nothing to parse
        // before the first read)
        if !ubuf.readable().is_empty() {
            let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            match parse_response_uninit(ubuf.readable(), &mut headers, head_request) {
                Err(_) => return Err(sent_failure(FailureKind::InvalidHeader, false)),
                // nginx's proxy module: a 101 switches protocols when the client sent `Upgrade`
                Ok(Some(r)) if r.status == 101 && expect.upgrade => {
                    return Ok((101, r.head_len, BodyFraming::None, false, false))
                }
                Ok(Some(r)) if r.status == 101 => return Err(sent_failure(FailureKind::InvalidHeader, false)),
                Ok(Some(r)) if r.status < 200 => {
                    let n = r.head_len;
                    ubuf.consume(n);
                    continue;
                }
                Ok(Some(r)) => return Ok((r.status, r.head_len, r.body, r.reusable, r.accel_redirect)),
                Ok(None) => {}
            }
        }
        let phase = "reading the response header";
        match ubuf.fill::<R>(conn, read_timeout).await {
            Ok(0) => return Err(sent_failure(FailureKind::Error(phase), cached && !got_any)),
            Ok(_) => got_any = true,
            // (a TLS session's alert or record error is an error, as nginx's `SSL_read() failed`)
            Err(e) if e.kind() == io::ErrorKind::InvalidData && !tls_error(&e) => {
                return Err(sent_failure(FailureKind::InvalidHeader, false))
            }
            Err(e) => {
                let kind = io_kind(&e, phase);
                return Err(sent_failure(kind, cached && !got_any && !kind.is_timeout()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{io_kind, FailureKind};
    use std::io;

    #[test]
    fn a_socket_that_cannot_be_made_is_named_with_its_errno() {
        let kind = io_kind(&io::Error::from_raw_os_error(libc::EMFILE), "connecting");
        assert_eq!(kind, FailureKind::NoSocket(libc::EMFILE));
        assert_eq!(
            kind.to_string(),
            "socket() failed (24: Too many open files) while connecting to upstream"
        );
        let refused = io_kind(&io::Error::from_raw_os_error(libc::ECONNREFUSED), "connecting");
        assert_eq!(refused, FailureKind::Error("connecting"));
    }
}
