//! The HTTP/1.1 request flow of one client connection: read and check a head, route it, answer a `return` or
//! proxy it (pick a peer, reuse or open an upstream connection, send, read the answer, retry as nginx's
//! `proxy_next_upstream` allows, report the outcome), stream the bodies, keep both sides alive when allowed.

use super::answer::{admin, answer, fixed, reject, Request};
use super::body::{forward_body, send, BodyError, Limits, Relay};
use super::conn_snapshot::ConnSnapshot;
use super::exchange::{exchange, ClientTimeouts, ResponseInfo, StreamedBody};
use super::retry::{Then, Tries};
use crate::access_log::record::TryPeer;
use crate::balance::{Attempt, Outcome};
use crate::config::model::AdminEndpoint;
use crate::config::model::ClientConf;
use crate::http::chunked::ChunkedDecoder;
use crate::http::head_buffers;
use crate::http::pages::DateCache;
use crate::http::request::{parse_request, RequestHead, MAX_HEADERS};
use crate::http::response::{parse_response, write_client_head};
use crate::http::vars::{ConnVars, RequestVars};
use crate::http::{BodyFraming, Rejection};
use crate::runtime::{timeout, Conn, Runtime};
use crate::shard::{Buffers, Shard};
use crate::snapshot::route::{FixedAnswer, LocationPlan, ProxyPlan};
use crate::snapshot::Snapshot;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

enum Route<'s> {
    Fixed(&'s FixedAnswer),
    Proxy(&'s ProxyPlan),
    /// An `api` or `metrics` location, with the request's method and target (copied: the head is consumed).
    Admin(AdminEndpoint, Box<(String, String)>),
}

/// Serves one client connection accepted on the http listen address `listen` until it closes.
pub async fn serve<R: Runtime>(shard: Rc<Shard<R>>, mut client: R::Conn, remote: SocketAddr, listen: SocketAddr) {
    let Some(mut at) = ConnSnapshot::take(&shard, listen) else {
        return;
    };
    let vars = ConnVars {
        remote,
        local: client.local_addr().unwrap_or(listen),
    };
    let mut bufs = shard.take_buffers(at.snap.client_buffer);
    bufs.log.new_connection(shard.next_connection_id());
    let mut decoder = ChunkedDecoder::new();
    let mut served = 0u64;
    loop {
        at.refresh(&shard);
        let step = loop {
            let waits = HeadWaits {
                idle: at.client.keepalive_timeout,
                head: at.client.client_header_timeout,
            };
            match next_request::<R>(&shard, &at.snap, at.port, vars, served, &mut client, &mut bufs, waits).await {
                // The first bytes of a request after a keepalive wait: it runs on the config running now.
                Next::Arrived => at.refresh(&shard),
                step => break step,
            }
        };
        let (mut req, route) = match step {
            Next::Closed | Next::Arrived => break,
            Next::Reject(r) => {
                reject::<R>(&shard, &mut client, &mut bufs, r, at.client.send_timeout).await;
                shard.log_request(&at.snap, &mut bufs.log);
                break;
            }
            Next::Request(req, route) => (req, route),
        };
        req.keepalive &= !at.gone;
        let snap = &*at.snap;
        shard.counters.count_request();
        served += 1;
        if req.expect_continue && bufs.client.readable().is_empty() {
            // The body is read next: tell the client to send it (nginx's ngx_http_test_expect).
            if send::<R>(&mut client, b"HTTP/1.1 100 Continue\r\n\r\n", req.timeouts.send)
                .await
                .is_err()
            {
                break;
            }
        }
        let keep = match route {
            Route::Fixed(answer) => fixed::<R>(&shard, answer, &req, &mut client, &mut bufs, &mut decoder).await,
            Route::Proxy(plan) => proxy::<R>(&shard, snap, plan, &req, &mut client, &mut bufs, &mut decoder).await,
            Route::Admin(endpoint, target) => {
                admin::<R>(&shard, endpoint, &target, &req, &mut client, &mut bufs, &mut decoder).await
            }
        };
        shard.log_request(snap, &mut bufs.log);
        if !keep || shard.draining() {
            break;
        }
    }
    shard.give_buffers(bufs);
}

enum Next<'s> {
    Closed,
    /// Bytes came on a connection with none buffered: take the running snapshot, then route.
    Arrived,
    Reject(Rejection),
    Request(Request, Route<'s>),
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

/// Reads the next request head (within `waits`, or until a graceful stop between requests) and routes it; for a
/// proxied request the upstream head and the hash key are written into `bufs`.
#[allow(clippy::too_many_arguments)]
async fn next_request<'s, R: Runtime>(
    shard: &Shard<R>,
    snap: &'s Snapshot,
    port: usize,
    vars: ConnVars,
    served: u64,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    waits: HeadWaits,
) -> Next<'s> {
    let head_deadline = |now: Instant| now.checked_add(waits.head);
    let mut deadline = if served == 0 || !bufs.client.readable().is_empty() {
        head_deadline(Instant::now())
    } else {
        None
    };
    loop {
        match route_head(snap, port, vars, served, bufs) {
            Ok(Some(next)) => return next,
            Ok(None) => {}
            Err(r) => return Next::Reject(r),
        }
        if bufs.client.is_full() {
            return Next::Reject(Rejection::bad("request head too large"));
        }
        let idle = bufs.client.readable().is_empty();
        let wait = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => waits.idle,
        };
        if wait.is_zero() {
            return Next::Closed;
        }
        let read = futures_lite::future::or(
            async { Some(timeout::<R, _>(wait, bufs.client.fill_untimed(client)).await) },
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
                    deadline = head_deadline(Instant::now());
                }
            }
            Some(Ok(_)) if !idle => {
                // The client left (or failed) half-way through a head.
                shard.counters.count_client_abort();
                return Next::Closed;
            }
            _ => return Next::Closed,
        }
    }
}

/// Parses and routes the head in the client buffer, if complete.
fn route_head<'s>(
    snap: &'s Snapshot,
    port: usize,
    vars: ConnVars,
    served: u64,
    bufs: &mut Buffers,
) -> Result<Option<Next<'s>>, Rejection> {
    let first = snap.header_buffers(port, None);
    head_buffers::check(bufs.client.readable(), first, |host| {
        snap.header_buffers(port, Some(host))
    })?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let Some(head) = parse_request(bufs.client.readable(), &mut headers)? else {
        return Ok(None);
    };
    let uri = head.uri(&mut bufs.uri)?;
    #[cfg(feature = "fault-injection")]
    if head.header("x-corelb-panic").is_some() {
        panic!("fault injection: x-corelb-panic");
    }
    let server = snap
        .server_for(port, head.host)
        .ok_or(Rejection::new(500, "no server"))?;
    let (loc, fixed_server) = match &server.ret {
        Some(r) => (None, Some(r)),
        None => (server.location(uri), None),
    };
    let client_conf: &ClientConf = loc.map_or(&server.client, |l| &l.client);
    super::request_log::begin_request(snap, server, loc, &head, uri, vars, served + 1, &mut bufs.log);
    if let BodyFraming::Length(n) = head.body {
        if client_conf.client_max_body_size != 0 && n > client_conf.client_max_body_size {
            return Err(Rejection::new(413, "body larger than client_max_body_size"));
        }
    }
    let req = Request {
        head_len: head.head_len,
        body: head.body,
        head_request: head.method == "HEAD",
        non_idempotent: head.non_idempotent(),
        client_11: head.version_11,
        keepalive: head.keepalive
            && !client_conf.keepalive_timeout.is_zero()
            && served + 1 < client_conf.keepalive_requests,
        expect_continue: head.expect_continue && head.body != BodyFraming::None,
        max_body: client_conf.client_max_body_size,
        timeouts: ClientTimeouts {
            body: client_conf.client_body_timeout,
            send: client_conf.send_timeout,
        },
    };
    let route = match (fixed_server, loc) {
        (Some(f), _) => Route::Fixed(f),
        (None, None) => Route::Fixed(&server.not_found),
        (None, Some(LocationPlan { fixed: Some(f), .. })) => Route::Fixed(f),
        (None, Some(LocationPlan { admin: Some(a), .. })) => {
            Route::Admin(*a, Box::new((head.method.to_string(), head.target.to_string())))
        }
        (None, Some(LocationPlan { proxy: Some(p), .. })) => {
            prepare_upstream_head(
                snap,
                p,
                &head,
                uri,
                vars,
                &mut bufs.key,
                &mut bufs.scratch,
                &mut bufs.request,
            );
            Route::Proxy(p)
        }
        (None, Some(_)) => Route::Fixed(&server.not_found),
    };
    let len = req.head_len;
    bufs.client.consume(len);
    Ok(Some(Next::Request(req, route)))
}

/// Writes the upstream request head and evaluates the balancer key.
#[allow(clippy::too_many_arguments)]
fn prepare_upstream_head(
    snap: &Snapshot,
    plan: &ProxyPlan,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    key: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    request: &mut Vec<u8>,
) {
    let Some(up) = snap.http_plans.get(plan.upstream) else {
        return;
    };
    let vars = RequestVars {
        req: head,
        uri,
        conn,
        proxy_host: &up.name,
    };
    up.key.eval_into(&vars, conn.remote.ip(), key);
    plan.write_request_head(head, uri, &vars, scratch, request);
}

/// Proxies one request; returns whether the client connection stays open.
async fn proxy<R: Runtime>(
    shard: &Shard<R>,
    snap: &Snapshot,
    plan: &ProxyPlan,
    req: &Request,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    decoder: &mut ChunkedDecoder,
) -> bool {
    let Some(up) = snap.http_plans.get(plan.upstream) else {
        return false;
    };
    let replayable = match buffer_whole_body(req, bufs, decoder) {
        Ok(r) => r,
        Err(refusal) => {
            reject::<R>(shard, client, bufs, refusal, req.timeouts.send).await;
            return false;
        }
    };
    let mut tries = Tries {
        shard,
        snap,
        plan,
        attempt: Attempt::new(up, plan.conf.next_upstream_tries, &bufs.key),
        started: Instant::now(),
        replayable,
    };
    loop {
        let now = DateCache::now_secs();
        let picked = shard
            .with_http_state(snap, plan.upstream, |st| tries.attempt.pick(st, &bufs.key, now))
            .flatten();
        let Some(peer) = picked else {
            crate::log_error!("no live upstreams while connecting to upstream \"{}\"", up.name);
            bufs.log.no_live(plan.upstream);
            return answer::<R>(shard, client, bufs, 502, req, replayable).await;
        };
        peer.slot.count_request();
        bufs.log.try_start(TryPeer::Addr(peer.addr));
        let body = (!replayable).then_some(StreamedBody {
            client: &mut *client,
            framing: req.body,
            max: req.max_body,
            timeout: req.timeouts.body,
        });
        let head_request = req.head_request;
        let (ubuf, cbuf) = (&mut bufs.upstream, &mut bufs.client);
        let try_started = Instant::now();
        let got = exchange::<R>(
            shard,
            snap,
            plan,
            peer.addr,
            &bufs.request,
            body,
            cbuf,
            ubuf,
            decoder,
            head_request,
            &mut bufs.log,
        )
        .await;
        match got {
            Ok((conn, info)) if !tries.retry_on_status(info.status, req.kind()) => {
                peer.slot.count_response(info.status);
                let sent = info.sent;
                let (keep, received) =
                    pass_response::<R>(shard, snap, plan, req, conn, info, peer.addr, client, bufs, decoder).await;
                peer.slot.record_response_time(shard.index, try_started.elapsed());
                peer.slot.count_bytes(sent, received);
                tries.report(Outcome::Success);
                return keep;
            }
            Ok(_) => {}
            Err(f) => match {
                bufs.log.mark_failed(f.kind.is_timeout());
                tries.after_failure(f, req.kind(), peer.addr)
            } {
                Then::Retry => {}
                Then::Answer(status) => return answer::<R>(shard, client, bufs, status, req, replayable).await,
                Then::Refuse(status) => {
                    let refusal = Rejection::new(status, "request body refused");
                    reject::<R>(shard, client, bufs, refusal, req.timeouts.send).await;
                    return false;
                }
                Then::Close => {
                    shard.counters.count_client_abort();
                    bufs.log.answered(499, 0, 0);
                    return false;
                }
            },
        }
    }
}

/// Passes an upstream response to the client (head rewritten, body streamed) and keeps the upstream connection
/// when it can serve again. Returns whether the client connection stays open, and the bytes read from the upstream.
#[allow(clippy::too_many_arguments)]
async fn pass_response<R: Runtime>(
    shard: &Shard<R>,
    snap: &Snapshot,
    plan: &ProxyPlan,
    req: &Request,
    mut conn: R::Conn,
    info: ResponseInfo,
    addr: std::net::SocketAddr,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    decoder: &mut ChunkedDecoder,
) -> (bool, u64) {
    let chunked = info.body == BodyFraming::Chunked;
    let relay = if chunked && !req.client_11 {
        Relay::Dechunk
    } else {
        Relay::Verbatim
    };
    let keep_client = req.keepalive && info.body != BodyFraming::UntilClose && relay == Relay::Verbatim;
    let mut headers = [httparse::EMPTY_HEADER; crate::http::response::MAX_HEADERS];
    let Ok(Some(resp)) = parse_response(bufs.upstream.readable(), &mut headers, req.head_request) else {
        return (false, info.head_len as u64);
    };
    let chunked_out = chunked && relay == Relay::Verbatim;
    shard.date(DateCache::now_secs(), |d| {
        write_client_head(&resp, d, keep_client, chunked_out, &mut bufs.out)
    });
    bufs.upstream.consume(info.head_len);
    let limits = Limits {
        read: plan.conf.read_timeout,
        write: req.timeouts.send,
        max_body: 0,
    };
    let (ubuf, out) = (&mut bufs.upstream, &mut bufs.out);
    let head_bytes = out.len();
    let sent = forward_body::<R>(&mut conn, ubuf, info.body, relay, decoder, client, out, limits).await;
    let body = *sent.as_ref().unwrap_or(&0);
    bufs.log.answered(info.status, head_bytes, body);
    let received = info.head_len as u64 + body;
    let keep = match sent {
        Ok(_) => {
            if info.reusable && plan.upstream_keepalive && bufs.upstream.readable().is_empty() {
                shard.pool_put(snap, plan.upstream, addr, conn, info.requests + 1);
            }
            keep_client
        }
        Err(BodyError::Write(_)) => false,
        Err(e) => {
            crate::log_error!("upstream {addr}: {e} while sending the response to the client");
            false
        }
    };
    (keep, received)
}

/// When the whole request body is already in the client buffer, moves it behind the upstream head (so a retry can
/// send it again) and returns true; otherwise it will be streamed, and the request cannot be resent. A chunked
/// body already malformed in the buffer is an error: it is never forwarded.
fn buffer_whole_body(req: &Request, bufs: &mut Buffers, decoder: &mut ChunkedDecoder) -> Result<bool, Rejection> {
    let avail = bufs.client.readable();
    let take = match req.body {
        BodyFraming::None | BodyFraming::UntilClose => return Ok(true),
        BodyFraming::Length(n) => match usize::try_from(n) {
            Ok(n) if n <= avail.len() => n,
            _ => return Ok(false),
        },
        BodyFraming::Chunked => {
            decoder.reset();
            let mut data = 0u64;
            let used = decoder
                .feed(avail, |d| data += d.len() as u64)
                .map_err(|_| Rejection::bad("malformed chunked body"))?;
            if req.max_body != 0 && data > req.max_body {
                return Err(Rejection::new(413, "body larger than client_max_body_size"));
            }
            if !decoder.is_done() {
                return Ok(false);
            }
            used
        }
    };
    bufs.request.extend_from_slice(&avail[..take]);
    bufs.client.consume(take);
    Ok(true)
}
