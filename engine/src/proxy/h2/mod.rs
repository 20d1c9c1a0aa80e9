//! HTTP/2 to clients (`http2 on`, `listen ... http2`) with the h2 crate: a TLS connection that chose `h2` by ALPN,
//! or a plain one that starts with HTTP/2's connection preface (prior knowledge; nginx takes no `Upgrade: h2c`).
//! Each stream is one request served by the HTTP/1.1 flow ([`super::http::serve_requests`]) over an in-memory
//! pipe ([`stream`]): every location, handler, balancer, retry, filter, error page and log line is the one
//! HTTP/1.1 has, at the cost of writing the request and parsing the answer once more (the design choice: one
//! request path, not two). The connection's limits and the HTTP/2 attacks' bounds are here.

mod answer;

pub(crate) use answer::trim as trim_relays;
mod frames;
mod stream;
mod unsent;

use super::client::ClientConn;
use super::conn_snapshot::ConnSnapshot;
use crate::config::model::Http2Conf;
use crate::runtime::tokio_io::TokioIo;
use crate::runtime::{timeout, Conn, Runtime};
use crate::shard::Shard;
use bytes::Bytes;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// HTTP/2's connection preface (RFC 9113 3.4), the first bytes of a prior-knowledge client.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How a connection on an `http2` address speaks.
pub(super) enum Detected {
    Http1,
    /// `h2` (TLS, by ALPN) or `h2c` (plain, by its preface): the value of `$http2`.
    Http2(&'static str),
    /// It closed (or timed out) before saying.
    Closed,
}

/// Tells HTTP/2 from HTTP/1 on an `http2` address: ALPN on a TLS connection; on a plain one, the first bytes
/// (read into the client buffer within the default server's `client_header_timeout`, as nginx's first read).
pub(super) async fn detect<R: Runtime>(conn: &mut ClientConn<R>, at: &ConnSnapshot) -> Detected {
    if let Some(tls) = conn.sock.tls() {
        return match tls.alpn_protocol() {
            Some(b"h2") => Detected::Http2("h2"),
            _ => Detected::Http1,
        };
    }
    let deadline = Instant::now() + at.defaults().client_header_timeout;
    loop {
        let got = conn.bufs.client.readable();
        let n = got.len().min(PREFACE.len());
        if got[..n] != PREFACE[..n] {
            return Detected::Http1;
        }
        if n == PREFACE.len() {
            return Detected::Http2("h2c");
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match timeout::<R, _>(wait, conn.bufs.client.fill_untimed(&mut conn.sock)).await {
            Ok(Ok(n)) if n > 0 => {}
            // a short head that closed: the HTTP/1 flow answers or logs it as it would
            _ if n > 0 => return Detected::Http1,
            _ => return Detected::Closed,
        }
    }
}

/// What a connection's streams share with its accept loop.
struct ConnState {
    /// Streams being served.
    active: Cell<usize>,
    /// Streams answered in full.
    answered: Cell<u64>,
    /// Streams the client reset before their answer was complete.
    reset_by_peer: Cell<u64>,
    /// When the last stream ended (the idle `keepalive_timeout` runs from then).
    last: Cell<Instant>,
}

/// The facts of the connection every stream's request sees (`$remote_addr`, `$ssl_*`, `$proxy_protocol_*`).
#[derive(Clone)]
pub(super) struct ConnFacts {
    pub(super) remote: SocketAddr,
    pub(super) local: SocketAddr,
    pub(super) listen: SocketAddr,
    pub(super) kind: &'static str,
    pub(super) tls: Option<crate::tls::TlsFacts>,
    pub(super) proxy: Option<crate::http::proxy_protocol::ProxyAddrs>,
    pub(super) tlvs: Vec<u8>,
    pub(super) connection: u64,
    pub(super) chunk_size: usize,
    /// `http2_body_preread_size`: a body without `content-length` this short is sent on with its length.
    pub(super) preread: usize,
    /// The answer bytes handed h2 and not written yet, per stream being relayed.
    unsent: Rc<unsent::Unsent>,
}

/// Resets by the client beyond the answered streams and this many times the stream limit close the connection
/// with `ENHANCE_YOUR_CALM` (rapid reset, CVE-2023-44487; nginx refuses streams past twice its limit per read).
const RESET_ALLOWANCE: u64 = 2;

/// The h2 settings of an address: the stream limit and windows, the header list bound (the total of
/// `large_client_header_buffers`), and h2's own bounds on reset streams and buffered sends.
fn builder(conf: &Http2Conf, header_list: u32) -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    b.max_concurrent_streams(conf.max_concurrent_streams)
        .initial_window_size(conf.body_preread_size.clamp(1, (1 << 31) - 1))
        // as nginx: the connection's window opened all the way at once (each stream's bounds what it holds)
        .initial_connection_window_size((1 << 31) - 1)
        .max_frame_size(16 * 1024)
        .max_header_list_size(header_list)
        .max_send_buffer_size(conf.largest_chunk_size as usize * 2)
        .max_pending_accept_reset_streams(conf.max_concurrent_streams.max(20) as usize)
        .max_local_error_reset_streams(Some(1024));
    b
}

/// Serves an HTTP/2 connection until it closes: the handshake, then each stream as a task of its own.
pub(super) async fn serve<R: Runtime>(conn: ClientConn<R>, at: ConnSnapshot, conf: Http2Conf, kind: &'static str) {
    let ClientConn {
        shard,
        sock,
        mut bufs,
        vars,
        ..
    } = conn;
    let read = bufs.client.readable().to_vec();
    bufs.client.consume(usize::MAX);
    // shared by the streams (a clone each would copy the TLS facts' strings)
    let facts = Rc::new(ConnFacts {
        remote: vars.peer,
        local: vars.local,
        listen: at.listen(),
        kind,
        tls: bufs.tls.clone(),
        proxy: bufs.proxy,
        tlvs: bufs.tlvs.clone(),
        connection: bufs.log.connection,
        chunk_size: conf.chunk_size as usize,
        preread: conf.body_preread_size as usize,
        unsent: Rc::default(),
    });
    let header_list = at
        .snap
        .servers
        .get(at.snap.http_ports.get(at.port()).map_or(0, |p| p.default_server))
        .map_or(32 * 1024, |s| {
            let b = s.client.large_client_header_buffers;
            b.capacity(s.client.client_header_buffer_size)
        });
    shard.give_buffers(bufs);
    let watch = Rc::new(frames::Watch::default());
    let early = conf.body_preread_size < 65_535;
    let linger = at.defaults().lingering.close != crate::config::model::LingeringClose::Off;
    let io = frames::Checked::new(
        TokioIo::new(sock, read),
        Rc::clone(&watch),
        Rc::clone(&facts.unsent),
        early,
        linger,
    );
    let handshake = builder(&conf, u32::try_from(header_list).unwrap_or(u32::MAX)).handshake::<_, Bytes>(io);
    let mut h2 = match timeout::<R, _>(at.defaults().client_header_timeout, handshake).await {
        Ok(Ok(c)) => c,
        _ => return,
    };
    let state = Rc::new(ConnState {
        active: Cell::new(0),
        answered: Cell::new(0),
        reset_by_peer: Cell::new(0),
        last: Cell::new(Instant::now()),
    });
    let cx = LoopCx {
        shard: &shard,
        at: &at,
        conf: &conf,
        facts: &facts,
        watch: &watch,
        state: &state,
    };
    serve_streams(cx, &mut h2).await;
}

/// What the connection's loop works with.
struct LoopCx<'a, R: Runtime> {
    shard: &'a Rc<Shard<R>>,
    at: &'a ConnSnapshot,
    conf: &'a Http2Conf,
    facts: &'a Rc<ConnFacts>,
    watch: &'a frames::Watch,
    state: &'a Rc<ConnState>,
}

type H2<R> = h2::server::Connection<frames::Checked<TokioIo<<R as Runtime>::Conn>>, Bytes>;

/// Takes the connection's streams until it ends: idle past `keepalive_timeout`, a connection error, the shard
/// stopping (GOAWAY, the streams in flight finish), or a reload (nginx's GOAWAY with the last stream taken, the
/// streams in flight finish, later ones are not served).
async fn serve_streams<R: Runtime>(cx: LoopCx<'_, R>, h2: &mut H2<R>) {
    let LoopCx {
        shard,
        at,
        conf,
        facts,
        watch,
        state,
    } = cx;
    let idle = at.defaults().keepalive_timeout;
    let limits = KeepLimits::of(at);
    let bound = u64::from(conf.max_concurrent_streams) * RESET_ALLOWANCE;
    // the highest stream taken, and the last one served after a reload or a keepalive limit
    let mut last_sid = 0u32;
    let mut taken = 0u64;
    let mut going_away: Option<u32> = None;
    loop {
        let wait = match (state.active.get(), going_away) {
            // before the first stream: not shorter than the header timeout (`keepalive_timeout 0` still serves one)
            (0, _) if taken == 0 => idle
                .max(at.defaults().client_header_timeout)
                .saturating_sub(state.last.get().elapsed()),
            (0, _) => idle.saturating_sub(state.last.get().elapsed()),
            // the streams in flight at a reload are watched for their end
            (_, Some(_)) => Duration::from_millis(100),
            _ => idle.max(Duration::from_secs(1)),
        };
        if wait.is_zero() || shard.draining() {
            break;
        }
        let reloaded = going_away.is_none() && shard.current_config_generation() != at.snap.config_generation;
        if going_away.is_some() && state.active.get() == 0 {
            // the last stream's task is done: what h2 still holds of its answer goes out before the close
            watch.linger();
            break;
        }
        if reloaded && state.active.get() == 0 {
            // an idle connection at the reload: h2's GOAWAY names its last stream
            watch.linger();
            return close::<R>(h2, h2::Reason::NO_ERROR, at.defaults().send_timeout).await;
        }
        if reloaded {
            watch.go_away(last_sid);
            going_away = Some(last_sid);
        }
        let accept = async { Event::Accepted(timeout::<R, _>(wait, h2.accept()).await) };
        let refuse = async { Event::Refused(watch.failed().await) };
        let header = header_timer::<R, _>(watch, at.defaults().client_header_timeout);
        let stall = send_timer::<R, _>(watch, at.defaults().send_timeout);
        let reload = async {
            shard.reloaded().await;
            Event::Reload
        };
        let stop = async {
            shard.stopped().await;
            Event::Stop
        };
        use futures_lite::future::or;
        match or(accept, or(refuse, or(header, or(stall, or(reload, stop))))).await {
            Event::Accepted(Ok(Some(Ok((request, respond))))) => {
                let sid = u32::from(respond.stream_id());
                // a header block that timed out or a stream refused (reset by corelb), or a stream after the
                // reload's GOAWAY: nginx skips it
                if watch.skipped(sid) || going_away.is_some_and(|last| sid > last) {
                    continue;
                }
                last_sid = last_sid.max(sid);
                if state.reset_by_peer.get() > state.answered.get() + bound {
                    h2.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    break;
                }
                taken += 1;
                spawn_stream(shard, state, facts, request, respond);
                if going_away.is_none() && limits.reached(taken) {
                    // nginx's GOAWAY with this stream as the last: it is served, later ones are not
                    watch.go_away(sid);
                    going_away = Some(sid);
                }
            }
            // the idle wait ran out, or a reload: checked again at the loop's top
            Event::Accepted(Err(_)) | Event::Reload => {}
            Event::Accepted(Ok(_)) => return,
            Event::HeaderTimeout(sid) => watch.time_out(sid),
            // nginx's `send_timeout` on the connection's writes: it is closed, its streams with it
            Event::SendTimeout => return,
            // nginx's connection error: GOAWAY with its code, the streams in flight ended with it
            Event::Refused(reason) => return close::<R>(h2, reason, at.defaults().send_timeout).await,
            Event::Stop => break,
        }
    }
    h2.graceful_shutdown();
    // the GOAWAY out and the streams in flight done, within the send timeout
    let _ = timeout::<R, _>(at.defaults().send_timeout, async {
        while let Some(Ok(_)) = h2.accept().await {}
    })
    .await;
    let _ = timeout::<R, _>(
        at.defaults().send_timeout,
        std::future::poll_fn(|cx| h2.poll_closed(cx)),
    )
    .await;
}

/// The default server's bounds on a connection's life that nginx checks as each stream opens.
struct KeepLimits {
    /// `keepalive_requests`: the streams a connection serves.
    requests: u64,
    /// `keepalive_time`: no stream opened after the connection has been open this long is followed by another.
    time: Duration,
    /// `keepalive_timeout 0`: each connection serves one stream.
    off: bool,
    opened: Instant,
}

impl KeepLimits {
    fn of(at: &ConnSnapshot) -> Self {
        let server = at.snap.http_ports.get(at.port()).map(|p| p.default_server);
        let client = server.and_then(|s| at.snap.servers.get(s)).map(|s| &s.client);
        KeepLimits {
            requests: client.map_or(1000, |c| c.keepalive_requests),
            time: client.map_or(Duration::from_secs(3600), |c| c.keepalive_time),
            off: at.defaults().keepalive_timeout.is_zero(),
            opened: Instant::now(),
        }
    }

    /// Whether the stream just taken (the `taken`th) is the connection's last.
    fn reached(&self, taken: u64) -> bool {
        self.off || taken >= self.requests || self.opened.elapsed() > self.time
    }
}

/// Sends GOAWAY with `reason` (h2's, naming the last stream it took) and closes the connection once what is
/// queued is out, within `send_timeout`.
async fn close<R: Runtime>(h2: &mut H2<R>, reason: h2::Reason, send_timeout: Duration) {
    h2.abrupt_shutdown(reason);
    let _ = timeout::<R, _>(send_timeout, std::future::poll_fn(|cx| h2.poll_closed(cx))).await;
}

/// Completes when a header block has stayed incomplete for `client_header_timeout` (nginx's timer on a stream
/// whose HEADERS have not all come): its stream.
async fn header_timer<R: Runtime, T>(watch: &frames::Watch, wait: Duration) -> Event<T> {
    loop {
        // the adapter notes an open block while h2 reads, on this task: this is polled again right after
        let (sid, since) = std::future::poll_fn(|_| match watch.header_block() {
            Some(b) => std::task::Poll::Ready(b),
            None => std::task::Poll::Pending,
        })
        .await;
        R::sleep(wait.saturating_sub(since.elapsed())).await;
        if watch.header_block() == Some((sid, since)) {
            return Event::HeaderTimeout(sid);
        }
    }
}

/// Completes when h2's writing has waited for the socket for `send_timeout` without a byte going out (nginx's
/// timer on the connection's write event: the connection is closed).
async fn send_timer<R: Runtime, T>(watch: &frames::Watch, wait: Duration) -> Event<T> {
    loop {
        // the adapter notes the wait while h2 writes, on this task: this is polled again right after
        let since = std::future::poll_fn(|_| match watch.stalled() {
            Some(s) => std::task::Poll::Ready(s),
            None => std::task::Poll::Pending,
        })
        .await;
        R::sleep(wait.saturating_sub(since.elapsed())).await;
        if watch.stalled() == Some(since) {
            return Event::SendTimeout;
        }
    }
}

/// What the connection's loop waits for.
enum Event<T> {
    /// h2's next stream (or its end, error or the idle wait running out).
    Accepted(T),
    /// A frame nginx answers with a connection error.
    Refused(h2::Reason),
    /// This stream's header block did not end within `client_header_timeout`.
    HeaderTimeout(u32),
    /// The connection's writes waited for the socket past `send_timeout`.
    SendTimeout,
    /// A reload put a new config in place.
    Reload,
    /// The shard stops.
    Stop,
}

/// Runs one stream as a task of the shard (a panic in it ends that stream only).
fn spawn_stream<R: Runtime>(
    shard: &Rc<Shard<R>>,
    state: &Rc<ConnState>,
    facts: &Rc<ConnFacts>,
    request: http::Request<h2::RecvStream>,
    respond: h2::server::SendResponse<Bytes>,
) {
    use futures_lite::FutureExt;
    let (shard, state, facts) = (Rc::clone(shard), Rc::clone(state), Rc::clone(facts));
    state.active.set(state.active.get() + 1);
    R::spawn(async move {
        // boxed: the stream's future (the flow's state and the relay's, some kilobytes) is moved once, into its
        // box, rather than as the task is made, started and finished (three copies of the whole task)
        let run = std::panic::AssertUnwindSafe(Box::pin(stream::serve(&shard, &facts, request, respond)));
        let end = run.catch_unwind().await.unwrap_or(stream::End::Failed);
        match end {
            stream::End::Answered => state.answered.set(state.answered.get() + 1),
            stream::End::ResetByPeer => state.reset_by_peer.set(state.reset_by_peer.get() + 1),
            stream::End::Failed => {}
        }
        state.active.set(state.active.get().saturating_sub(1));
        state.last.set(Instant::now());
    });
}

/// A connection's answer framing conditions that the stream code tests without sockets.
#[cfg(test)]
mod tests {
    use super::PREFACE;

    #[test]
    fn preface_is_rfc_9113s() {
        assert_eq!(PREFACE.len(), 24);
        assert!(PREFACE.starts_with(b"PRI * HTTP/2.0"));
    }
}
