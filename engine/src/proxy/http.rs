//! The HTTP/1.1 request flow of one client connection: read and check a head, route it, then answer it here
//! ([`super::client`]: `return`, endpoints, error pages) or proxy it ([`super::forward`]), and keep the connection
//! for the next request when both sides allow.

use super::body::send;
use super::burst::Burst;
use super::client::{ClientConn, ClientTimeouts, Routed};
use super::conn_snapshot::ConnSnapshot;
use super::error_page::{Go, PageState, Pass, Resume};
use super::idle::Woken;
use super::phase::ConnPhase;
use super::request_body::BodyWait;
use super::request_log::begin_request;
use super::rewrite_phase::{self, Answer, PhaseBufs};
use super::static_file::{self, FileAnswer, Filters};
use super::var_pass;
use crate::balance::UpstreamPlan;
use crate::config::key::VarSource;
use crate::config::model::{AdminEndpoint, ClientConf};
use crate::http::chunked::ChunkedDecoder;
use crate::http::head_buffers::{self, FirstBuffers};
use crate::http::keepalive;
use crate::http::request::{parse_request_uninit, RequestHead, MAX_HEADERS};
use crate::http::vars::{ConnVars, ProxyVars, RequestExt, RequestVars, ServerMatch};
use crate::http::{BodyFraming, Rejection};
use crate::runtime::{timeout, Conn, Runtime};
use crate::shard::{Buffers, Shard};
use crate::snapshot::charset::CharsetScratch;
use crate::snapshot::error_pages::ErrorPagesPlan;
use crate::snapshot::gzip::{GzipAsk, GzipPlan};
use crate::snapshot::headers::{HeadersPlan, NO_HEADERS};
use crate::snapshot::proxied::HostOrAddr;
use crate::snapshot::route::{FixedAnswer, LocationPlan, ProxyPlan, Target};
use crate::snapshot::{ServerPlan, Snapshot};
use corelb_shared_state::HttpPhase;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Where a routed request goes.
enum Route<'s> {
    /// With the headers plan prepared for the request (a script's `return` has none of its own).
    Fixed(&'s FixedAnswer, &'s HeadersPlan),
    /// A redirecting `rewrite`'s answer; its `Location` is in the connection's `Buffers::rewrite`.
    Redirect(&'s FixedAnswer, &'s HeadersPlan),
    Proxy(&'s ProxyPlan),
    /// An `api` or `metrics` location, with the request's method and target (copied: the head is consumed).
    Endpoint(AdminEndpoint, Box<(String, String)>),
    /// A location (or a server outside its locations) serving files, with its `add_header`, gzip and charset
    /// plans.
    Static(FileAnswer<'s>, &'s HeadersPlan, Filters<'s>),
}

/// What reading the next head gave.
enum Next<'s> {
    Closed,
    /// Bytes came on a connection with none buffered: take the running snapshot, then route.
    Arrived,
    Reject(Rejection),
    /// A request, routed: its facts are in the `Routed` the caller passed (written in place, not moved).
    Request(Route<'s>),
}

/// How far a client connection has come: requests answered, and when it was accepted (for `keepalive_time`).
#[derive(Debug, Clone, Copy)]
struct ConnProgress {
    served: u64,
    started: Instant,
}

/// How long the next request head may take.
#[derive(Debug, Clone, Copy)]
struct HeadWaits {
    /// `keepalive_timeout`: for the first byte of a request after the first one.
    idle: Duration,
    /// `client_header_timeout`: for the whole head, from the connection's start (first request) or its first byte
    /// (later ones), however slowly it trickles in, as nginx's timer.
    head: Duration,
}

/// A client connection's state from its accept to its close, held by its task: what was accepted, then (after its
/// TLS handshake, PROXY protocol header and HTTP/2 detection) the HTTP/1.1 connection, all that an idle one keeps.
pub(super) enum ConnSlot<R: Runtime> {
    Accepted {
        shard: Rc<Shard<R>>,
        sock: R::Conn,
        remote: SocketAddr,
        listen: SocketAddr,
    },
    Open(OpenConn<R>),
    Closed,
}

/// An HTTP/1.1 connection between its bursts of requests.
pub(super) struct OpenConn<R: Runtime> {
    conn: ClientConn<R>,
    at: ConnSnapshot,
    progress: ConnProgress,
    /// `keepalive_timeout` for the next wait: the last request's location's (none yet: the default server's).
    keepalive: KeepaliveMs,
    /// Plain HTTP on a TLS address.
    to_https: bool,
}

/// A `keepalive_timeout` in milliseconds (nginx's unit), or none yet: 4 bytes where an `Option<Duration>` takes 16
/// (an idle connection keeps it, and a glommio task over 512 bytes takes jemalloc's 640-byte class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeepaliveMs(u32);

impl KeepaliveMs {
    const NONE: KeepaliveMs = KeepaliveMs(u32::MAX);

    /// `d` in milliseconds (up to 49 days).
    fn of(d: Duration) -> Self {
        KeepaliveMs(u32::try_from(d.as_millis()).unwrap_or(u32::MAX - 1))
    }

    fn get(self) -> Option<Duration> {
        (self != Self::NONE).then(|| Duration::from_millis(u64::from(self.0)))
    }
}

/// How a burst of requests ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// The last answer is sent and nothing of a next request is buffered: wait for it holding no buffer.
    Idle,
    Closed,
}

/// Serves one client connection accepted on the http listen address `listen` until it closes.
pub fn serve<R: Runtime>(
    shard: Rc<Shard<R>>,
    sock: R::Conn,
    remote: SocketAddr,
    listen: SocketAddr,
) -> impl Future<Output = ()> {
    // used in place by the task (an async fn's arguments are held twice: as given, and moved into its body)
    let mut slot = ConnSlot::Accepted {
        shard,
        sock,
        remote,
        listen,
    };
    async move { run(&mut slot).await }
}

/// Serves the requests of `conn` (the HTTP/1.1 flow) until it closes: an HTTP/2 stream's over its pipe;
/// `to_https`: plain HTTP on a TLS address.
pub(super) fn serve_requests<R: Runtime>(
    conn: ClientConn<R>,
    at: ConnSnapshot,
    to_https: bool,
) -> impl Future<Output = ()> {
    let mut slot = ConnSlot::Open(OpenConn::new(conn, at, to_https));
    async move { run(&mut slot).await }
}

/// Runs a connection: its bursts of requests, each in a block of the thread's free list ([`Burst`]), and between
/// them its keepalive waits, which hold no buffer (nginx frees them too) and none of a request's state.
async fn run<R: Runtime>(slot: &mut ConnSlot<R>) {
    let mut woken = Woken::Bytes;
    loop {
        let burst_slot = &mut *slot;
        if Burst::new(move || burst(burst_slot, woken)).await == Flow::Closed {
            return;
        }
        let ConnSlot::Open(open) = slot else {
            return;
        };
        let wait = open.next_wait();
        let keepalive = open.progress.served > 0;
        // SAFETY: awaited here, within the future that holds the connection (`slot`): the wait cannot be leaked
        // apart from the connection.
        woken = unsafe { open.conn.wait_idle(open.at.snap.client_buffer, wait, keepalive) }.await;
    }
}

/// One burst: the connection's opening on its first (then a wait for its first bytes, if none came with its
/// opening), its requests for as long as they come without a wait, and its close (after them, or when `woken` says
/// so).
async fn burst<R: Runtime>(slot: &mut ConnSlot<R>, woken: Woken) -> Flow {
    if matches!(slot, ConnSlot::Accepted { .. }) {
        if !open(slot).await {
            return Flow::Closed;
        }
        // a connection that has sent nothing yet waits for its first request as for a next one, holding no buffer
        // (nginx reads the first bytes before it allocates a request's buffers too)
        if let ConnSlot::Open(conn) = slot {
            if conn.conn.bufs.client.readable().is_empty() {
                return Flow::Idle;
            }
        }
    }
    let ConnSlot::Open(conn) = slot else {
        return Flow::Closed;
    };
    if woken == Woken::Bytes && conn.serve_burst().await == Flow::Idle {
        return Flow::Idle;
    }
    let ConnSlot::Open(conn) = std::mem::replace(slot, ConnSlot::Closed) else {
        return Flow::Closed;
    };
    conn.close().await;
    Flow::Closed
}

/// Opens an accepted connection: its TLS handshake, PROXY protocol header and HTTP/2 detection (an HTTP/2
/// connection is served here, whole). False when it closed.
async fn open<R: Runtime>(slot: &mut ConnSlot<R>) -> bool {
    let ConnSlot::Accepted {
        shard,
        sock,
        remote,
        listen,
    } = std::mem::replace(slot, ConnSlot::Closed)
    else {
        return false;
    };
    let Some(at) = ConnSnapshot::take(&shard, listen) else {
        return false;
    };
    let mut bufs = shard.take_buffers(at.snap.client_buffer);
    let Some((sock, to_https)) = super::tls_conn::open::<R>(&at, sock, Some(remote), &mut bufs, &shard.counters).await
    else {
        shard.give_buffers(bufs);
        return false;
    };
    // the local address is the listening one, unless that is a wildcard (or a unix socket's token): nginx asks
    // the socket (`getsockname`) only then
    let local = match listen.ip().is_unspecified() || listen.port() == 0 || crate::config::unix_addr::is_unix(&listen) {
        true => sock.local_addr().unwrap_or(listen),
        false => listen,
    };
    let vars = ConnVars::new(remote, local);
    bufs.log.new_connection(shard.next_connection_id());
    bufs.proxy = None;
    bufs.tlvs.clear();
    bufs.http2 = None;
    bufs.http2_chunk = None;
    let phase = ConnPhase::waiting(&shard.counters);
    let mut conn = ClientConn {
        shard,
        sock,
        bufs,
        decoder: ChunkedDecoder::new(),
        vars,
        phase,
    };
    if at.snap.http_ports.get(at.port()).is_some_and(|p| p.proxy_protocol) && !conn.proxy_header(&at).await {
        conn.shard.give_buffers(conn.bufs);
        return false;
    }
    if let Some(h2) = at
        .snap
        .http_ports
        .get(at.port())
        .and_then(|p| p.http2)
        .filter(|_| !to_https)
    {
        // out of line and boxed: an HTTP/1 connection's burst keeps its size
        match Box::pin(super::h2::detect(&mut conn, &at)).await {
            super::h2::Detected::Http1 => {}
            super::h2::Detected::Http2(kind) => {
                Box::pin(super::h2::serve(conn, at, h2, kind)).await;
                return false;
            }
            super::h2::Detected::Closed => {
                conn.shard.give_buffers(conn.bufs);
                return false;
            }
        }
    }
    *slot = ConnSlot::Open(OpenConn::new(conn, at, to_https));
    true
}

/// The size of a burst's future: the block a connection holds only while it is served.
#[cfg(test)]
pub(super) fn burst_size<R: Runtime>() -> usize {
    let mut slot = ConnSlot::<R>::Closed;
    let size = std::mem::size_of_val(&burst(&mut slot, Woken::Close));
    size
}

impl<R: Runtime> OpenConn<R> {
    fn new(conn: ClientConn<R>, at: ConnSnapshot, to_https: bool) -> Self {
        OpenConn {
            conn,
            at,
            progress: ConnProgress {
                served: 0,
                started: crate::clock::instant(),
            },
            keepalive: KeepaliveMs::NONE,
            to_https,
        }
    }

    /// How long the wait for the next request's first bytes may take: the last request's `keepalive_timeout`, or
    /// before the first request what is left of the default server's `client_header_timeout` (nginx's wait for the
    /// first bytes, which its head's timer goes on from).
    fn next_wait(&self) -> Duration {
        self.keepalive.get().unwrap_or_else(|| {
            let header = self.at.defaults().client_header_timeout;
            header.saturating_sub(crate::clock::instant().saturating_duration_since(self.progress.started))
        })
    }

    /// Serves requests for as long as the next one is there without a wait (the first one's, a pipelined one's,
    /// or the bytes a keepalive wait brought).
    async fn serve_burst(&mut self) -> Flow {
        let OpenConn {
            conn,
            at,
            progress,
            keepalive: idle,
            to_https,
        } = self;
        // the routed request's facts, rewritten in place for each request
        let mut req = Routed::NONE;
        loop {
            at.refresh(&conn.shard);
            let step = loop {
                let defaults = at.defaults();
                let waits = HeadWaits {
                    idle: idle.get().unwrap_or(defaults.keepalive_timeout),
                    head: defaults.client_header_timeout,
                };
                match conn.next_request(&at.snap, at.port(), *progress, waits, &mut req).await {
                    // The first bytes of a request after a keepalive wait: it runs on the config running now (the
                    // head is routed again, nothing of it consumed yet).
                    Next::Arrived => at.refresh(&conn.shard),
                    step => break step,
                }
            };
            let snap = &*at.snap;
            let route = match step {
                Next::Closed | Next::Arrived => return Flow::Closed,
                Next::Reject(r) => {
                    if conn.bufs.log.routed != progress.served + 1 {
                        let read = conn.bufs.client.readable();
                        let requests = progress.served + 1;
                        let log = &mut conn.bufs.log;
                        super::request_log::begin_refused(snap, at.port(), conn.vars, read, requests, log);
                    }
                    conn.refuse(r, at.defaults().send_timeout).await;
                    conn.shard.log_request(snap, &mut conn.bufs.log);
                    conn.bufs.linger = Some((at.defaults().lingering, false));
                    return Flow::Closed;
                }
                Next::Request(..) if *to_https => {
                    conn.refuse(super::tls_conn::TO_HTTPS, at.defaults().send_timeout).await;
                    conn.shard.log_request(snap, &mut conn.bufs.log);
                    conn.bufs.linger = Some((at.defaults().lingering, false));
                    return Flow::Closed;
                }
                Next::Request(route) => route,
            };
            req.keepalive = req.keepalive.and(!at.gone);
            conn.shard.counters.count_request();
            progress.served += 1;
            if !req.delay.is_zero() && !conn.limit_delay(req.delay).await {
                // the client left during limit_req's delay
                conn.shard.counters.count_client_abort();
                conn.bufs.log.answered(499, 0, 0);
                conn.shard.log_request(snap, &mut conn.bufs.log);
                return Flow::Closed;
            }
            if !conn.continue_if_expected(&req).await {
                return Flow::Closed;
            }
            // a stop that began while the request waited (limit_req's delay): its answer says the connection
            // closes, as nginx's header filter does when the worker is exiting
            req.keepalive = req.keepalive.and(!conn.shard.draining());
            let mut keep = match route {
                Route::Fixed(answer, headers) => conn.serve_fixed(answer, headers, &req).await,
                Route::Redirect(answer, headers) => conn.serve_redirect(answer, headers, &req).await,
                Route::Proxy(plan) => conn.proxy(snap, plan, &req).await,
                Route::Endpoint(endpoint, target) => conn.serve_endpoint(endpoint, &target, &req).await,
                Route::Static(answer, headers, filters) => conn.serve_file(answer, headers, filters, &req).await,
            };
            if conn.bufs.pages.state.pending.is_some() {
                // a proxied error (or intercepted answer) with an error page, out of line (boxed: the plain path's
                // future keeps its shape)
                keep = Box::pin(conn.serve_pending(snap, at.port(), *progress, &req)).await;
            }
            conn.shard.log_request(snap, &mut conn.bufs.log);
            if conn.bufs.limited {
                conn.bufs.end_limits();
            }
            *idle = KeepaliveMs::of(req.timeouts.keepalive);
            if !keep || conn.shard.draining() {
                // how the connection closes after this answer: nginx's lingering close, and whether it had a body
                conn.bufs.linger = (!keep).then_some((req.lingering, req.body != BodyFraming::None));
                return Flow::Closed;
            }
            if conn.bufs.client.readable().is_empty() {
                return Flow::Idle;
            }
        }
    }

    /// Closes the connection once its named access-log lines are written; its buffers go back to the shard, then
    /// it lingers as nginx's lingering close says (not an HTTP/2 stream's pipe, nor after `return 444` or a client
    /// that left).
    async fn close(self) {
        let mut conn = self.conn;
        if conn.bufs.log.named_ticket != 0 {
            conn.shard.logs_written(conn.bufs.log.named_ticket).await;
        }
        let linger = conn
            .bufs
            .linger
            .take()
            .filter(|_| conn.bufs.http2.is_none() && !matches!(conn.bufs.log.status, 444 | 499))
            .filter(|(conf, body)| {
                super::linger::wanted(conf, *body, || {
                    !conn.bufs.client.readable().is_empty() || conn.sock.bytes_waiting()
                })
            });
        let ClientConn {
            shard, mut sock, bufs, ..
        } = conn;
        shard.give_buffers(bufs);
        if let Some((conf, _)) = linger {
            // boxed: its read buffer is not part of every connection's future
            Box::pin(super::linger::close::<R>(&shard, &mut sock, conf)).await;
        }
    }
}

impl<R: Runtime> ClientConn<R> {
    /// Reads the connection's PROXY protocol header within the default server's `client_header_timeout`, as
    /// nginx's; false when it is broken or missing (the connection closes).
    async fn proxy_header(&mut self, at: &ConnSnapshot) -> bool {
        let read = super::proxy_header::HeaderRead::<R> {
            sock: &mut self.sock,
            buf: &mut self.bufs.client,
            tlvs: &mut self.bufs.tlvs,
            peer: self.vars.peer,
            local: self.vars.local,
        };
        match read.read(at.defaults().client_header_timeout).await {
            Ok(addrs) => {
                self.bufs.proxy = addrs;
                true
            }
            Err(_) => false,
        }
    }

    /// Routes the request again to the error page of its proxied error (or intercepted answer), as many times as
    /// pages lead to pages; returns whether the connection stays open.
    async fn serve_pending(&mut self, snap: &Snapshot, port: usize, progress: ConnProgress, req: &Routed) -> bool {
        let mut keep = false;
        while let Some(resume) = self.bufs.pages.state.pending.take() {
            let mut again = Routed::NONE;
            keep = match route_pending(snap, port, self.vars, progress, &mut self.bufs, resume, &mut again) {
                Some(route) => self.answer(snap, route, &again).await,
                None => self.error_page(resume.status, &NO_HEADERS, req, resume.keep).await,
            };
        }
        keep
    }

    /// Answers a routed request (an error page's); returns whether the connection stays open.
    async fn answer(&mut self, snap: &Snapshot, route: Route<'_>, req: &Routed) -> bool {
        match route {
            Route::Fixed(answer, headers) => self.serve_fixed(answer, headers, req).await,
            Route::Redirect(answer, headers) => self.serve_redirect(answer, headers, req).await,
            Route::Proxy(plan) => self.proxy(snap, plan, req).await,
            Route::Endpoint(endpoint, target) => self.serve_endpoint(endpoint, &target, req).await,
            Route::Static(answer, headers, filters) => self.serve_file(answer, headers, filters, req).await,
        }
    }

    /// Tells a client that waits for it to send its body (nginx's `ngx_http_test_expect`); false if it left.
    async fn continue_if_expected(&mut self, req: &Routed) -> bool {
        if !req.expect_continue || !self.bufs.client.readable().is_empty() {
            return true;
        }
        send::<R>(&mut self.sock, b"HTTP/1.1 100 Continue\r\n\r\n", req.timeouts.send)
            .await
            .is_ok()
    }

    /// Reads the next request head (within `waits`, or until a graceful stop between requests) and routes it; for
    /// a proxied request the upstream head and the hash key are written into the buffers.
    async fn next_request<'s>(
        &mut self,
        snap: &'s Snapshot,
        port: usize,
        progress: ConnProgress,
        waits: HeadWaits,
        req: &mut Routed,
    ) -> Next<'s> {
        let served = progress.served;
        let head_deadline = |now: Instant| now.checked_add(waits.head);
        // when the head's first bytes were there: the time `keepalive_time` is checked at
        let mut arrived = None;
        let mut deadline = if served == 0 || !self.bufs.client.readable().is_empty() {
            let now = crate::clock::instant();
            arrived = Some(now);
            // the first head's runs from the connection's start, its wait for the first bytes included (nginx's
            // timer, set at the accept)
            head_deadline(if served == 0 { progress.started } else { now })
        } else {
            None
        };
        loop {
            let buffered = !self.bufs.client.readable().is_empty();
            self.phase.between_reads(buffered);
            // an empty buffer holds no head: nothing to parse before the first read
            let routed = match buffered {
                true => route_head(snap, port, self.vars, (progress, arrived), &mut self.bufs, req),
                false => Ok(None),
            };
            match routed {
                Ok(Some(next @ Next::Request(..))) => {
                    self.phase.set(HttpPhase::Writing);
                    return next;
                }
                Ok(Some(next)) => return next,
                Ok(None) => {}
                Err(r) => return Next::Reject(r),
            }
            if self.bufs.client.is_full() {
                return Next::Reject(Rejection::bad("request head too large"));
            }
            let idle = self.bufs.client.readable().is_empty();
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(crate::clock::instant()),
                None => waits.idle,
            };
            if wait.is_zero() {
                return Next::Closed;
            }
            let shard = &self.shard;
            let read = futures_lite::future::or(
                async { Some(timeout::<R, _>(wait, self.bufs.client.fill_untimed(&mut self.sock)).await) },
                async {
                    if idle && served > 0 {
                        shard.stopped().await;
                        None
                    } else {
                        std::future::pending().await
                    }
                },
            )
            .await;
            match read {
                Some(Ok(Ok(n))) if n > 0 && idle && served > 0 => return Next::Arrived,
                Some(Ok(Ok(n))) if n > 0 => {
                    if deadline.is_none() {
                        let now = crate::clock::instant();
                        arrived = Some(now);
                        deadline = head_deadline(now);
                    }
                }
                Some(Ok(_)) if !idle => {
                    // The client left (or failed) half-way through a head.
                    self.shard.counters.count_client_abort();
                    return Next::Closed;
                }
                _ => return Next::Closed,
            }
        }
    }
}

/// Parses and routes the head in the client buffer, if complete.
fn route_head<'s>(
    snap: &'s Snapshot,
    port: usize,
    conn: ConnVars,
    progress: (ConnProgress, Option<Instant>),
    bufs: &mut Buffers,
    req: &mut Routed,
) -> Result<Option<Next<'s>>, Rejection> {
    bufs.pages.begin();
    let had_body = bufs.body.ready();
    let mut routed = route_pass::<true>(snap, port, conn, progress, bufs, Pass::First, req);
    if matches!(routed, Ok(None)) && !had_body && bufs.body.ready() {
        // the body for `$request_body`, all here: routed again with it
        bufs.pages.begin();
        routed = route_pass::<true>(snap, port, conn, progress, bufs, Pass::First, req);
    }
    if !matches!(routed, Ok(None)) {
        bufs.body.clear();
    }
    routed
}

/// An error page's internal redirect found by a routing pass: the head is routed again.
#[derive(Clone, Copy)]
struct Again<'s> {
    pass: Pass<'s>,
    /// The length of the head that pass read.
    head_len: usize,
    head_request: bool,
    /// That pass read the client's head (in the client buffer, consumed here).
    first: bool,
}

/// Routes the head again for `again`; the pass calls
/// this again for each further internal redirect (at most nginx's 10, counted in `PageState`).
#[cold]
#[inline(never)]
fn route_again<'s>(
    snap: &'s Snapshot,
    port: usize,
    conn: ConnVars,
    progress: (ConnProgress, Option<Instant>),
    bufs: &mut Buffers,
    again: Again<'s>,
    req: &mut Routed,
) -> Result<Option<Next<'s>>, Rejection> {
    let first = again.first;
    let client = first.then(|| bufs.client.readable().get(..again.head_len).unwrap_or_default());
    match again.pass {
        Pass::Named(_) => bufs.pages.keep_head(client),
        _ => bufs.pages.retarget(client, again.head_request),
    }
    if first {
        bufs.client.consume(again.head_len);
    }
    route_pass::<false>(snap, port, conn, progress, bufs, again.pass, req)
}

/// One routing pass: the client's head, or (after an error page's redirect) the one in `Buffers::pages`.
///
/// `FIRST`: the client's head (`pass` is [`Pass::First`]), compiled apart so that the plain path checks nothing
/// of the others. An internal redirect to an error page routes the head again ([`route_again`]).
fn route_pass<'s, const FIRST: bool>(
    snap: &'s Snapshot,
    port: usize,
    mut conn: ConnVars,
    (progress, arrived): (ConnProgress, Option<Instant>),
    bufs: &mut Buffers,
    pass: Pass<'s>,
    req: &mut Routed,
) -> Result<Option<Next<'s>>, Rejection> {
    bufs.headers.reset();
    let first_pass = FIRST;
    // the address's first header buffer (for the client's head only)
    let first_size = if first_pass { snap.first_header_buffer(port) } else { 0 };
    if first_pass {
        let first = FirstBuffers {
            size: first_size,
            large: snap.header_buffers(port, None),
        };
        head_buffers::check(bufs.client.readable(), first, |host| {
            snap.header_buffers(port, Some(host))
        })?;
    }
    let raw = if first_pass {
        bufs.client.readable()
    } else {
        &bufs.pages.head[..]
    };
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let Some(head) = parse_request_uninit(raw, &mut headers)? else {
        return Ok(None);
    };
    let uri = head.uri(&mut bufs.uri)?;
    #[cfg(feature = "fault-injection")]
    if head.header("x-corelb-panic").is_some() {
        panic!("fault injection: x-corelb-panic");
    }
    let (server, name_regex) = snap
        .server_named(port, head.host, Some(&mut bufs.server_captures))
        .ok_or(Rejection::new(500, "no server"))?;
    // nginx's client certificate checks, before any phase (`ngx_http_process_request`)
    let cert_refusal = match (FIRST, server.verify_client, bufs.tls.as_ref()) {
        (true, Some(mode), Some(tls)) => crate::tls::client_auth::request_refusal(mode, tls, head.host)
            .and_then(|code| server.cert_pages.iter().find(|p| p.status == code)),
        _ => None,
    };
    let maps = snap.config.http.as_ref().map_or(&[][..], |h| h.maps.as_slice());
    bufs.vars.begin(maps.len());
    // after the upstream answered (an error page, an `X-Accel-Redirect`), its `$upstream_*` variables
    let kept = if FIRST {
        None
    } else {
        bufs.pages.upstream.vars(&snap.http_plans)
    };
    let ext = RequestExt {
        server_name: &server.server_name,
        server_match: ServerMatch {
            groups: name_regex.map_or(&[][..], |r| r.groups()),
            caps: name_regex.map(|_| &bufs.server_captures),
            last: None,
        },
        connection: bufs.log.connection,
        requests: progress.served + 1,
        opened: progress.started,
        maps,
        cache: &bufs.vars,
        proxy: ProxyVars {
            addrs: bufs.proxy.as_ref(),
            tlvs: &bufs.tlvs,
        },
        // (after the first pass: the body an error page reads)
        body: bufs
            .body
            .text(FIRST.then(|| bufs.client.readable().get(head.head_len..).unwrap_or_default())),
        tls: bufs.tls.as_ref(),
        http2: bufs.http2,
        upstream: kept.as_ref().map(|u| u as &dyn VarSource),
    };
    let phase_bufs = PhaseBufs {
        rewrite: &mut bufs.rewrite,
        scratch: &mut bufs.scratch,
        key: &mut bufs.key,
        captures: &mut bufs.captures,
        ext,
    };
    // nginx's realip handler: post-read with the server's settings, then preaccess with the location's
    let real = crate::snapshot::realip::apply(server.realip.as_ref(), &head, &mut conn, bufs.proxy.as_ref());
    let phases = match pass {
        _ if FIRST => rewrite_phase::run(snap, server, &head, uri, conn, phase_bufs),
        Pass::Resume(r) => rewrite_phase::Phases {
            loc: r.location.and_then(|i| server.locations.get(i)),
            answer: None,
            changed: None,
        },
        Pass::Named(named) => rewrite_phase::run_from(snap, server, &head, uri, conn, phase_bufs, Some(named)),
        Pass::First | Pass::Internal => rewrite_phase::run_from(snap, server, &head, uri, conn, phase_bufs, None),
        Pass::Accel => match bufs.pages.state.go(server) {
            Go::Uri => {
                // the URI's head (`GET URI`) is routed from the server's rewrites on
                let again = Again {
                    pass: Pass::Internal,
                    head_len: head.head_len,
                    head_request: head.method == "HEAD",
                    first: false,
                };
                return route_again(snap, port, conn, (progress, arrived), bufs, again, req);
            }
            Go::Named(named) => rewrite_phase::run_from(snap, server, &head, uri, conn, phase_bufs, Some(named)),
            Go::Url(_) | Go::Failed => rewrite_phase::Phases {
                loc: None,
                answer: Some(Answer::Fixed(&server.cycle)),
                changed: None,
            },
        },
    };
    let (loc, changed) = (phases.loc, phases.changed);
    if let Some(plan) = loc.and_then(|l| l.realip.as_ref()).filter(|_| !real) {
        // a `return` or a redirect answers in the rewrite phase, before nginx's preaccess
        if phases.answer.is_none() && loc.is_some_and(|l| l.fixed.is_none()) {
            crate::snapshot::realip::apply(Some(plan), &head, &mut conn, bufs.proxy.as_ref());
        }
    }
    // nginx's preaccess phase runs the limits of the location the rewrites found (or of the server without one)
    let limits = match (phases.answer.is_some(), loc) {
        (true, _) => None,
        (false, Some(l)) if l.fixed.is_none() => l.limits.as_deref(),
        (false, Some(_)) => None,
        (false, None) => server.limits.as_deref(),
    };
    let (fixed_server, redirect) = match phases.answer {
        Some(Answer::Fixed(a)) => (Some(a), None),
        Some(Answer::Redirect(a)) => (None, Some(a)),
        // nginx's access phase: after the rewrites (a location's `return` answered before it), before the handler
        None => match loc {
            Some(l) if l.fixed.is_none() => (l.access.as_ref().and_then(|a| a.check(conn.remote)), None),
            Some(_) => (None, None),
            None => (server.access.as_ref().and_then(|a| a.check(conn.remote)), None),
        },
    };
    let (fixed_server, redirect) = match cert_refusal {
        Some(page) => (Some(page), None),
        None => (fixed_server, redirect),
    };
    let uri: &[u8] = if changed.is_some() { &bufs.rewrite } else { uri };
    // nginx's preaccess phase, before try_files and the content handlers (which open files): the limits, once per
    // request, when it is sure to run now (not routed again for its body)
    let early_wait = limits.is_some()
        && first_pass
        && super::request_body::must_wait(loc, &head, body_room(first_size, &bufs.client), &bufs.body) != BodyWait::No;
    let (fixed_server, redirect, delay) = match limits {
        Some(plan) if !early_wait && !bufs.limited => {
            let vars = RequestVars {
                req: &head,
                uri,
                conn,
                proxy_host: "",
                ext: ext.with_captures(&bufs.captures),
            };
            bufs.limited = true;
            match super::limits::preaccess(plan, &vars, &mut bufs.scratch, &mut bufs.limits) {
                super::limits::Preaccess::Go(delay) => (fixed_server, redirect, delay),
                super::limits::Preaccess::Answer(a) => (Some(a), None, Duration::ZERO),
            }
        }
        _ => (fixed_server, redirect, Duration::ZERO),
    };
    // files, and index files reached by internal redirects (which may end in a location that does not serve files)
    let files = (fixed_server.is_none() && redirect.is_none()).then(|| {
        let bufs = static_file::FileBufs {
            path: &mut bufs.path,
            redirect: &mut bufs.redirect,
            captures: &mut bufs.captures,
        };
        static_file::resolve_head(server, loc, uri, &head, conn, ext, bufs)
    });
    let (loc, uri, answer, redirected) = match files {
        Some(f) if f.redirected => (f.loc, &bufs.redirect[..], f.answer, true),
        Some(f) => (f.loc, uri, f.answer, false),
        None => (loc, uri, None, false),
    };
    // from here on `$1`..`$9` and named groups read the request's last regex match
    let ext = ext.with_captures(&bufs.captures);
    let (proxy, given_uri, proxy_failed, resolved_host) = match loc.and_then(|l| l.var_proxy.as_deref()) {
        None => (loc.and_then(|l| l.proxy.as_ref()), None, None, None),
        Some(pass) => {
            let p = var_pass::pick(pass, &head, uri, conn, ext, &mut bufs.proxy_url);
            (p.plan, p.uri, p.answer, p.proxy_host)
        }
    };
    let upstream = proxy.and_then(|p| snap.http_plans.get(p.upstream));
    let proxy_host = match (upstream, resolved_host) {
        (Some(u), _) => u.name.as_str(),
        (None, Some(r)) => crate::snapshot::var_pass::proxy_host_text(&bufs.proxy_url, &r),
        (None, None) => "",
    };
    // an index file's internal redirect is a new location search, as after a `rewrite ... last`
    let changed = if redirected { Some(true) } else { changed };
    let vars = RequestVars {
        req: &head,
        uri,
        conn,
        proxy_host,
        ext,
    };
    if first_pass {
        // routed again once the body is here (the location reads `$request_body`)
        match super::request_body::must_wait(loc, &head, body_room(first_size, &bufs.client), &bufs.body) {
            BodyWait::No => {}
            BodyWait::More => return Ok(None),
            BodyWait::Hold => {
                super::request_body::hold(&mut bufs.body, head.body, bufs.client.readable(), head.head_len);
                return Ok(None);
            }
        }
    }
    // the limits left for now: the request waited for its body at first, and an index file led it to a location
    // that does not (rare)
    let (fixed_server, redirect, delay) = match limits {
        Some(plan) if !bufs.limited => {
            bufs.limited = true;
            let units = &mut bufs.limits;
            match super::limits::preaccess(plan, &vars, &mut bufs.scratch, units) {
                super::limits::Preaccess::Go(d) => (fixed_server, redirect, d),
                super::limits::Preaccess::Answer(a) => (Some(a), None, Duration::ZERO),
            }
        }
        _ => (fixed_server, redirect, delay),
    };
    if first_pass {
        begin_request(snap, server, loc, &vars, progress.served + 1, &mut bufs.log);
    }
    let headers = loc.map_or(&server.headers, |l| &l.headers);
    headers.prepare(&vars, &mut bufs.scratch, &mut bufs.headers);
    if let Some(c) = loc.map_or(&server.charset, |l| &l.charset) {
        c.prepare(&vars, CharsetScratch::lent(&mut bufs.charset));
    }
    let client_conf: &ClientConf = loc.map_or(&server.client, |l| &l.client);
    if let Some(chunk) = &bufs.http2_chunk {
        chunk.set(client_conf.http2_chunk_size);
    }
    let pages = loc.map_or(&server.error_pages, |l| &l.error_pages).as_deref();
    let mut too_large = false;
    if let BodyFraming::Length(n) = head.body {
        if client_conf.client_max_body_size != 0 && n > client_conf.client_max_body_size {
            if pages.and_then(|p| bufs.pages.state.wanted(p, 413)).is_none() {
                return Err(Rejection::new(413, "body larger than client_max_body_size"));
            }
            // the location's page for 413; the body is not read and the connection closes after it, as nginx's
            too_large = true;
            bufs.pages.state.body_refused();
        }
    }
    let open_for = arrived.map_or_else(
        || crate::clock::instant().saturating_duration_since(progress.started),
        |a| a.saturating_duration_since(progress.started),
    );
    *req = routed(&head, client_conf, progress.served, open_for);
    req.delay = delay;
    if cert_refusal.is_some() {
        // nginx closes after these answers
        req.keepalive = crate::http::keepalive::Connection::CLOSE;
    }
    req.gzip = gzip_of(server, loc).map_or(GzipAsk::No, |g| g.ask(&head));
    req.rate = super::limit_rate::RateLimit::of(client_conf, bufs.vars.users.limit_rate());
    let route = match (fixed_server, loc, proxy) {
        _ if redirect.is_some() => Route::Redirect(redirect.unwrap_or(&server.cycle), headers),
        (Some(f), _, _) => Route::Fixed(f, headers),
        _ if answer.is_some() => Route::Static(
            answer.unwrap_or(FileAnswer::Error(500)),
            headers_of(server, loc),
            filters_of(server, loc),
        ),
        (None, Some(LocationPlan { fixed: Some(f), .. }), _) => Route::Fixed(f, headers),
        (None, Some(LocationPlan { admin: Some(a), .. }), _) => {
            Route::Endpoint(*a, Box::new((head.method.to_string(), head.target.to_string())))
        }
        (None, Some(_), _) if proxy_failed.is_some() => Route::Fixed(proxy_failed.unwrap_or(&server.cycle), headers),
        (None, Some(_), Some(p)) => {
            if let Some(sticky) = upstream.and_then(|up| up.sticky.as_deref()) {
                sticky.prepare(&vars, crate::clock::now_secs(), &mut bufs.sticky);
            }
            if upstream.is_some() || p.is_resolved() {
                let out = UpstreamHeadOut {
                    key: &mut bufs.key,
                    scratch: &mut bufs.scratch,
                    request: &mut bufs.request,
                };
                let given = given_uri.and_then(|r| bufs.proxy_url.get(r));
                write_upstream_head(p, upstream, &vars, changed, given, out);
            }
            let host = head
                .host
                .map_or(HostOrAddr::Addr(vars.conn.local.ip()), HostOrAddr::Host);
            p.response.prepare(
                &vars,
                host,
                vars.conn.local.port(),
                &mut bufs.scratch,
                &mut bufs.headers,
            );
            Route::Proxy(p)
        }
        // every location (or server) that serves files has its answer above
        (None, _, _) => Route::Static(FileAnswer::Error(500), headers_of(server, loc), filters_of(server, loc)),
    };
    let at = PageAt {
        pass,
        too_large,
        server,
        loc,
    };
    let route = match pages.and_then(|p| page_route(at, p, &route, &vars, &mut bufs.pages.state)) {
        None => route,
        Some(Ok(page)) => page,
        Some(Err(pass)) => {
            let again = Again {
                pass,
                head_len: req.head_len,
                head_request: req.head_request,
                first: FIRST,
            };
            return route_again(snap, port, conn, (progress, arrived), bufs, again, req);
        }
    };
    if let Route::Fixed(f, _) = &route {
        f.eval_text(&vars, &mut bufs.answer);
    }
    if bufs.pages.state.active() {
        bufs.pages.state.url_into(&mut bufs.rewrite);
        if let Some(keep) = bufs.pages.state.body_gone() {
            // after a proxied error (or a refused body) the page's route reads no body
            req.body = BodyFraming::None;
            req.expect_continue = false;
            req.keepalive = req.keepalive.and(keep);
        }
    }
    if FIRST {
        if let Route::Proxy(p) = route {
            // routed again from this head if the upstream fails, its answer is intercepted or redirects
            let filled = req.body != BodyFraming::None || upstream.is_some_and(|u| u.queue.is_some());
            bufs.pages.keep_proxied_head(p, &bufs.client, req.head_len, filled);
        }
        bufs.client.consume(req.head_len);
    }
    Ok(Some(Next::Request(route)))
}

/// The client buffer as `$request_body`'s wait sees it (`first_size`: the address's first header buffer).
fn body_room(first_size: usize, client: &crate::runtime::iobuf::IoBuf) -> super::request_body::Room<'_> {
    super::request_body::Room {
        readable: client.readable(),
        capacity: client.capacity(),
        first_buffer: first_size,
    }
}

/// Where an answer's error page is looked for.
#[derive(Clone, Copy)]
struct PageAt<'s> {
    pass: Pass<'s>,
    /// The body is over `client_max_body_size` (413).
    too_large: bool,
    server: &'s ServerPlan,
    loc: Option<&'s LocationPlan>,
}

/// The answer `route` when `pages` has a page for it (`ngx_http_special_response_handler`): the page's redirect
/// answer, or (`Err`) the pass that routes the request to it; `None` to answer as routed.
fn page_route<'s>(
    at: PageAt<'s>,
    pages: &'s ErrorPagesPlan,
    route: &Route<'_>,
    vars: &RequestVars<'_, '_, '_>,
    state: &mut PageState,
) -> Option<Result<Route<'s>, Pass<'s>>> {
    let status = match at.pass {
        Pass::Resume(r) => r.status,
        _ if at.too_large => 413,
        _ => special_status(route)?,
    };
    let Some(page) = state.wanted(pages, status) else {
        // the upstream's error, when its page is not taken after all: nginx's own page
        return match at.pass {
            Pass::Resume(r) => Some(Ok(Route::Static(
                FileAnswer::Error(r.status),
                headers_of(at.server, at.loc),
                filters_of(at.server, at.loc),
            ))),
            _ => None,
        };
    };
    Some(match state.take(pages, page, at.server, vars) {
        Go::Uri => Err(Pass::Internal),
        Go::Named(named) => Err(Pass::Named(named)),
        Go::Url(answer) => Ok(Route::Redirect(answer, headers_of(at.server, at.loc))),
        Go::Failed => Ok(Route::Fixed(&at.server.cycle, headers_of(at.server, at.loc))),
    })
}

/// The status of an answer nginx sends as a special response (where `error_page` applies), if it is one.
fn special_status(route: &Route<'_>) -> Option<u16> {
    match route {
        Route::Fixed(f, _) if f.special => Some(f.status),
        Route::Redirect(f, _) => Some(f.status),
        Route::Static(FileAnswer::Error(status), _, _) => Some(*status),
        Route::Static(FileAnswer::ToSlash, _, _) => Some(301),
        _ => None,
    }
}

/// Routes the request again to the error page of its proxied error (`resume`), from the head kept for it.
fn route_pending<'s>(
    snap: &'s Snapshot,
    port: usize,
    conn: ConnVars,
    progress: ConnProgress,
    bufs: &mut Buffers,
    resume: Resume,
    req: &mut Routed,
) -> Option<Route<'s>> {
    bufs.pages.resumed(resume);
    bufs.pages.upstream.keep_tries(&bufs.log.tries);
    // the page's `$request_body`: the body that went upstream
    bufs.body.keep_for_page(&bufs.request);
    let pass = match resume.accel {
        false => Pass::Resume(resume),
        true => {
            let target = bufs.pages.state.target();
            if target.first() != Some(&b'@') && !super::accel_redirect::safe_uri(target) {
                // nginx's 404 for an unsafe URI
                return None;
            }
            Pass::Accel
        }
    };
    let routed = route_pass::<false>(snap, port, conn, (progress, None), bufs, pass, req);
    bufs.body.unhold();
    match routed {
        Ok(Some(Next::Request(route))) => Some(route),
        _ => None,
    }
}

/// The `add_header` plan of the location answering (or the server's, outside any location).
fn headers_of<'s>(server: &'s ServerPlan, loc: Option<&'s LocationPlan>) -> &'s HeadersPlan {
    loc.map_or(&server.headers, |l| &l.headers)
}

/// The answer filters of the location answering (or the server's).
fn filters_of<'s>(server: &'s ServerPlan, loc: Option<&'s LocationPlan>) -> Filters<'s> {
    Filters {
        gzip: gzip_of(server, loc),
        charset: loc.map_or(&server.charset, |l| &l.charset).as_deref(),
    }
}

/// The gzip plan of the location answering (or the server's), `None` when gzip is off there.
fn gzip_of<'s>(server: &'s ServerPlan, loc: Option<&'s LocationPlan>) -> Option<&'s GzipPlan> {
    loc.map_or(&server.gzip, |l| &l.gzip).as_ref()
}

/// What the request path keeps of a head once routed, under its location's client settings.
/// `open_for`: how long the connection had been open when the head arrived.
fn routed(head: &RequestHead<'_, '_>, client: &ClientConf, served: u64, open_for: Duration) -> Routed {
    Routed {
        head_len: head.head_len,
        body: head.body,
        head_request: head.method == "HEAD",
        non_idempotent: head.non_idempotent(),
        client_11: head.version_11,
        keepalive: keepalive::connection(head, client, served, open_for),
        expect_continue: head.expect_continue && head.body != BodyFraming::None,
        upgrade: head.upgrade,
        max_body: client.client_max_body_size,
        timeouts: ClientTimeouts {
            body: client.client_body_timeout,
            send: client.send_timeout,
            keepalive: client.keepalive_timeout,
        },
        gzip: GzipAsk::No,
        rate: None,
        delay: Duration::ZERO,
        body_buffer: client.client_body_buffer_size,
        lingering: client.lingering,
    }
}

/// Evaluates the balancer key into `key` and writes the upstream request head into `request`.
/// `changed`: a `rewrite` replaced the URI (`vars.uri`), see [`rewrite_phase::Phases::changed`]; `given`: the URI
/// of a `proxy_pass` URL with variables, sent as is.
fn write_upstream_head(
    plan: &ProxyPlan,
    up: Option<&UpstreamPlan>,
    vars: &RequestVars<'_, '_, '_>,
    changed: Option<bool>,
    given: Option<&[u8]>,
    out: UpstreamHeadOut<'_>,
) {
    match up {
        Some(up) => up
            .key
            .eval_into(vars, crate::config::unix_addr::client_ip(&vars.conn.remote), out.key),
        // a URL host's addresses are tried in turn: no key
        None => out.key.clear(),
    }
    let (target, uri) = match (given, changed) {
        (Some(uri), _) => (Target::Given, uri),
        (None, None) => (Target::AsSent, vars.uri),
        (None, Some(searched)) => (Target::Rewritten { searched }, vars.uri),
    };
    plan.write_request_head(vars.req, uri, target, vars, out.scratch, out.request);
}

/// The buffers the upstream request head is written with.
struct UpstreamHeadOut<'a> {
    key: &'a mut Vec<u8>,
    scratch: &'a mut Vec<u8>,
    request: &'a mut Vec<u8>,
}
