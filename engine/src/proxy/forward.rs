//! Proxying one routed request to its upstream: hold a body that fits (so a retry can send it again), pick a
//! peer, run a try ([`super::exchange`]), follow nginx's retry decision ([`super::retry`]), then pass the response
//! to the client and keep both connections when they can serve again.

use super::body::{forward_body, BodyCopy, BodyError, Limits, Relay};
use super::charset::{CharsetEdits, RecodeStream};
use super::client::{ClientConn, Routed};
use super::exchange::{exchange, Failure, FailureKind, ResponseInfo, Sent, StreamedBody, TryIo, TryTarget};
use super::gzip::{self, CopyIo, GzipAnswer, GzipEdits, GzipOut};
use super::read_ahead;
use super::retry::{NextStep, RetryState};
use crate::access_log::head_vars::HeadVars;
use crate::access_log::record::TryPeer;
use crate::balance::{Attempt, Outcome, Peer};
use crate::http::chunked::ChunkedDecoder;
use crate::http::response::{reparse_response_uninit, write_client_head_with, ClientHead, HeadEdits};
use crate::http::{BodyFraming, Rejection};
use crate::runtime::{Conn, Runtime};
use crate::shard::Buffers;
use crate::snapshot::charset::CharsetScratch;
use crate::snapshot::proxied::ProxiedEdits;
use crate::snapshot::route::ProxyPlan;
use crate::snapshot::Snapshot;
use std::net::SocketAddr;
use std::rc::Rc;

/// How one try on a peer ended, for the loop over peers.
enum TryResult {
    /// The response went to the client; whether the client connection stays open.
    Done(bool),
    /// The peer's status is passed to the next peer (already reported).
    Retry,
    /// The try failed before a usable answer.
    Failed(super::exchange::Failure),
}

impl<R: Runtime> ClientConn<R> {
    /// Proxies one request; returns whether the client connection stays open.
    pub(super) async fn proxy(&mut self, snap: &Snapshot, plan: &ProxyPlan, req: &Routed) -> bool {
        if !plan.is_resolved() && snap.http_plans.get(plan.upstream).is_none() {
            return false;
        }
        // an error page reads the body sent whole (kept only where the location has error pages)
        let pages = plan.error_pages.is_some();
        self.bufs.body.sent_at(None, pages);
        let held = if plan.passes_client_body() && req.body == BodyFraming::Chunked && !plan.conf.http_version_11 {
            // an HTTP/1.0 upstream cannot take a chunked body: nginx reads it whole and sends its length
            match self.hold_dechunked(req, pages).await {
                Ok(()) => Ok(true),
                Err(BodyError::Chunk(_)) => Err(Rejection::bad("malformed chunked body")),
                Err(BodyError::TooLarge) => Err(Rejection::new(413, "body larger than client_max_body_size")),
                Err(BodyError::Read(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    Err(Rejection::new(408, "client timed out sending the body"))
                }
                Err(_) => return false,
            }
        } else if plan.passes_client_body() {
            hold_whole_body(req, pages, &mut self.bufs, &mut self.decoder)
        } else {
            // `proxy_pass_request_body off` or `proxy_set_body`: nginx reads the client's body first, then sends
            // the request without it
            match self.drain_body(req).await {
                Ok(_) => Ok(true),
                Err(BodyError::Chunk(_)) => Err(Rejection::bad("malformed chunked body")),
                Err(_) => return false,
            }
        };
        let replayable = match held {
            Ok(r) => r,
            Err(refusal) => {
                self.refuse(refusal, req.timeouts.send).await;
                return false;
            }
        };
        let shard = Rc::clone(&self.shard);
        let resolved;
        let (up, own) = match snap.http_plans.get(plan.upstream) {
            Some(up) => (up, None),
            None => match Box::pin(self.resolve_host(plan)).await {
                Ok(made) => {
                    resolved = made;
                    let rng = rand::SeedableRng::seed_from_u64(rand::random());
                    (
                        &*resolved,
                        Some(Box::new(crate::balance::ShardState::new(&resolved, rng))),
                    )
                }
                Err(()) => {
                    if self.page_for_error(plan, 502, req, replayable) {
                        return true;
                    }
                    return self.error_page(502, &plan.headers, req, replayable).await;
                }
            },
        };
        let mut retry = RetryState {
            shard: &shard,
            snap,
            plan,
            attempt: Attempt::new(up, plan.conf.next_upstream_tries, &self.bufs.key),
            started: crate::clock::instant(),
            replayable,
            clock: Default::default(),
            own,
        };
        if let Some(sticky) = up.sticky.as_deref() {
            if let Some(sid) = sticky.bound_sid(&self.bufs.sticky, crate::clock::now_ms()) {
                retry.attempt.bind(sid.as_bytes());
            }
        }
        let mut first = true;
        loop {
            let picked = match retry.pick(&self.bufs.key) {
                // boxed: the wait's state stays out of every request's future, allocated only when it queues
                None if first && up.queue.is_some() => match Box::pin(self.wait_in_queue(&mut retry)).await {
                    super::queue::Waited::Peer(p) => Some(p),
                    super::queue::Waited::Refused => None,
                    super::queue::Waited::ClientGone => {
                        self.shard.counters.count_client_abort();
                        self.bufs.log.answered(499, 0, 0);
                        return false;
                    }
                },
                picked => picked,
            };
            first = false;
            let Some(peer) = picked else {
                crate::log_in!(
                    plan.errors.as_deref(),
                    crate::log::Level::Error,
                    "no live upstreams while connecting to upstream \"{}\"",
                    up.name
                );
                self.bufs.log.no_live(plan.upstream);
                if self.page_for_error(plan, 502, req, replayable) {
                    return true;
                }
                return self.error_page(502, &plan.headers, req, replayable).await;
            };
            let failure = match self.try_peer(&mut retry, req, peer).await {
                TryResult::Done(keep) => return keep,
                TryResult::Retry => continue,
                TryResult::Failed(f) => f,
            };
            self.bufs.log.mark_failed(failure.kind.is_timeout());
            match retry.after_failure(failure, req.kind(), peer.addr) {
                NextStep::Retry => {}
                NextStep::Answer(status) if self.page_for_error(plan, status, req, replayable) => return true,
                NextStep::Answer(status) => return self.error_page(status, &plan.headers, req, replayable).await,
                NextStep::Refuse(status) => {
                    self.refuse(Rejection::new(status, "request body refused"), req.timeouts.send)
                        .await;
                    return false;
                }
                NextStep::Close => {
                    self.shard.counters.count_client_abort();
                    self.bufs.log.answered(499, 0, 0);
                    return false;
                }
            }
        }
    }

    /// Reads a chunked body whole, without its framing, behind the upstream head, whose `Transfer-Encoding:
    /// chunked` line becomes its `Content-Length` (for an HTTP/1.0 upstream). At most `client_max_body_size`, or
    /// [`DECHUNKED_MAX`] when that is 0 (corelb keeps the body in memory where nginx spills it to a file).
    async fn hold_dechunked(&mut self, req: &Routed, pages: bool) -> Result<(), BodyError> {
        let limit = match req.max_body {
            0 => DECHUNKED_MAX,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let mut body = Vec::new();
        let bufs = &mut self.bufs;
        let read = super::body::collect_body::<R>(
            &mut self.sock,
            &mut bufs.client,
            BodyFraming::Chunked,
            &mut self.decoder,
            req.timeouts.body,
            limit,
            &mut body,
        )
        .await;
        if let Err(e) = read {
            match &e {
                BodyError::Chunk(_) => self.shard.counters.count_bad_request(),
                BodyError::Read(_) | BodyError::Truncated => self.shard.counters.count_client_abort(),
                _ => {}
            }
            return Err(e);
        }
        let head = &mut bufs.request;
        if let Some(at) = chunked_line(head) {
            with_length(head, at, body.len() as u64);
        }
        let kept = body.len() as u64 <= super::request_body::in_memory(req.body_buffer, BodyFraming::Chunked);
        bufs.body.sent_at(kept.then_some(head.len()), pages);
        head.extend_from_slice(&body);
        Ok(())
    }

    /// The upstream of the URL host a resolved plan's request goes to: its address, or the addresses the
    /// location's `resolver` finds for its name (`Err`: nginx's 502, logged as nginx logs it).
    /// Boxed: a plain request's future does not carry it.
    async fn resolve_host(&mut self, plan: &ProxyPlan) -> Result<Box<crate::balance::UpstreamPlan>, ()> {
        let target = crate::snapshot::var_pass::target_of(&mut self.bufs.proxy_url).ok_or(())?;
        let url = &self.bufs.proxy_url;
        let proxy_host = crate::snapshot::var_pass::proxy_host_text(url, &target.proxy_host);
        if target.host(url).starts_with(b"unix:") {
            // a unix path that is not a valid one (empty, too long, the table full) fails as a connect would
            let token = target.unix.ok_or(())?;
            return crate::snapshot::var_pass::unix_upstream(proxy_host, token)
                .map(Box::new)
                .ok_or(());
        }
        let addrs = match (target.addr, plan.conf.resolver.as_deref()) {
            (Some(addr), _) => std::rc::Rc::from([addr]),
            (None, Some(conf)) => match self.shard.resolver.lookup::<R>(conf, target.host(url)).await {
                Ok(addrs) => addrs,
                Err(e) => {
                    let name = String::from_utf8_lossy(target.host(url));
                    crate::log_in!(
                        plan.errors.as_deref(),
                        crate::log::Level::Error,
                        "{name} could not be resolved ({e})"
                    );
                    return Err(());
                }
            },
            (None, None) => return Err(()),
        };
        let first = if addrs.len() > 1 { rand::random::<usize>() } else { 0 };
        crate::snapshot::var_pass::resolved_upstream(proxy_host, &addrs, target.port, first)
            .map(Box::new)
            .ok_or(())
    }

    /// One try on `peer`: send the request, read the head, and either pass the response on or say why not.
    async fn try_peer(&mut self, retry: &mut RetryState<'_, R>, req: &Routed, peer: &Peer) -> TryResult {
        peer.slot.count_request();
        self.bufs.log.try_start(TryPeer::Addr(peer.addr));
        let sticky = retry.attempt.plan().sticky.as_deref();
        if let (Some(s), Some(c)) = (sticky, retry.attempt.current_choice()) {
            s.on_try(c, &mut self.bufs.sticky);
        }
        let io = TryIo {
            request: &self.bufs.request,
            client_buf: &mut self.bufs.client,
            ubuf: &mut self.bufs.upstream,
            decoder: &mut self.decoder,
            log: &mut self.bufs.log,
            head_request: req.head_request,
            upgrade: req.upgrade,
        };
        let to = TryTarget {
            shard: retry.shard,
            snap: retry.snap,
            plan: retry.plan,
            addr: peer.addr,
        };
        let started = crate::clock::instant();
        let tried = if retry.replayable {
            // nginx watches the client while the upstream is asked: a client that closes frees its place (its
            // limit_conn unit, the upstream connection) at once, answered 499 (`proxy_ignore_client_abort off`)
            let gone = self.sock.closed();
            futures_lite::future::or(async { Some(exchange::<R>(to, None, io).await) }, async {
                gone.await;
                None
            })
            .await
        } else {
            let body = StreamedBody {
                client: &mut self.sock,
                framing: req.body,
                max: req.max_body,
                timeout: req.timeouts.body,
            };
            Some(exchange::<R>(to, Some(body), io).await)
        };
        let Some(tried) = tried else {
            return TryResult::Failed(Failure {
                kind: FailureKind::ClientGone,
                stale: false,
                sent: Sent::Yes,
            });
        };
        match tried {
            Ok((conn, info)) if !retry.retry_on_status(info.status, req.kind()) => {
                retry.header_read();
                peer.slot.count_response(info.status);
                if retry.attempt.plan().load_metrics {
                    let head = self.bufs.upstream.readable().get(..info.head_len).unwrap_or_default();
                    crate::proxy::load_report::record(&peer.slot, head);
                }
                if (to.plan.error_pages.is_some() || info.accel_redirect) && self.diverts(to, &info) {
                    self.divert(to, conn, &info, req);
                    retry.report(Outcome::Success);
                    return TryResult::Done(true);
                }
                let sent = info.sent;
                let (keep, received) = self.pass_response(to, req, conn, info).await;
                if let Some(s) = sticky.filter(|s| !s.learns_at_header()) {
                    s.learn(&self.bufs.sticky, crate::clock::now_ms());
                }
                peer.slot.record_response_time(
                    self.shard.index,
                    crate::clock::instant().saturating_duration_since(started),
                );
                peer.slot.count_bytes(sent, received);
                retry.report(Outcome::Success);
                TryResult::Done(keep)
            }
            Ok(_) => TryResult::Retry,
            Err(f) => TryResult::Failed(f),
        }
    }

    /// Passes an upstream response to the client (head rewritten, body streamed) and keeps the upstream connection
    /// when it can serve again. Returns whether the client connection stays open, and the bytes read from the
    /// upstream.
    async fn pass_response(
        &mut self,
        from: TryTarget<'_, R>,
        req: &Routed,
        mut conn: R::Conn,
        info: ResponseInfo,
    ) -> (bool, u64) {
        if info.status == 101 {
            return (false, self.tunnel(from, req, conn, info).await);
        }
        let chunked = info.body == BodyFraming::Chunked;
        let relay = if chunked && !req.client_11 {
            Relay::Dechunk
        } else {
            Relay::Verbatim
        };
        let bufs = &mut self.bufs;
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; crate::http::response::MAX_HEADERS];
        let Ok(Some(resp)) = reparse_response_uninit(bufs.upstream.readable(), &mut headers, req.head_request) else {
            return (false, info.head_len as u64);
        };
        // `proxy_buffering` (an upstream's `X-Accel-Buffering` decides for its answer): read ahead of the client;
        // not with `limit_rate` (its pace is the client's), nor for an answer that is compressed or recoded
        let accel = from
            .plan
            .accel_buffering
            .then(|| read_ahead::accel_buffering(resp.headers))
            .flatten();
        let buffering = accel.unwrap_or(from.plan.conf.buffering) && req.rate.is_none();
        let now = crate::clock::now_secs();
        let gzip = from
            .plan
            .gzip
            .as_ref()
            .map_or(GzipAnswer::default(), |g| gzip::for_upstream(g, req.gzip, &resp, now));
        let compress = gzip.compress && !req.head_request;
        // nginx's charset filter runs before gzip's: its edit, and the table that recodes the body
        let cs = from.plan.charset.as_deref().and_then(|plan| {
            let answer = super::charset::upstream_answer(&resp, from.plan.accel_charset);
            plan.decide(&answer, CharsetScratch::of(&bufs.charset))
                .map(|edit| (plan, edit, answer.accel_charset))
        });
        let recode = cs.and_then(|c| c.1.recode).filter(|_| !req.head_request);
        // a body gzip or UTF-8 recoding changes has no length: chunked to HTTP/1.1, ended by the close for 1.0
        let resized = compress || recode.is_some_and(|r| !matches!(r, crate::config::charset::Recode::Byte(_)));
        let keep_client = req.keepalive.and(if resized {
            req.client_11
        } else {
            info.body != BodyFraming::UntilClose && relay == Relay::Verbatim
        });
        let chunked_out = if resized {
            req.client_11
        } else {
            chunked && relay == Relay::Verbatim
        };
        let response = HeadVars {
            status: info.status,
            rec: &bufs.log,
            upstream_head: bufs.upstream.readable().get(..info.head_len).unwrap_or_default(),
            upstream_name: bufs.headers.upstream_name(),
            cache: &bufs.vars,
        };
        let edits = ProxiedEdits {
            plan: &from.plan.response,
            headers: &from.plan.headers,
            prepared: &bufs.headers,
            response: &response,
            now,
        };
        let cs_edits = cs.map(|(plan, edit, accel)| CharsetEdits {
            inner: &edits,
            plan,
            edit,
            name: plan.name(&edit, accel, CharsetScratch::of(&bufs.charset)),
        });
        let edits: &dyn HeadEdits = match &cs_edits {
            Some(c) => c,
            None => &edits,
        };
        let gzip_edits = GzipEdits {
            inner: edits,
            answer: gzip,
        };
        let edits: &dyn HeadEdits = if gzip.any() { &gzip_edits } else { edits };
        self.shard.date(now, |date| {
            let head = ClientHead {
                date,
                keepalive: keep_client,
                chunked_out,
                upgrade: false,
            };
            write_client_head_with(&resp, head, edits, &mut bufs.out)
        });
        if let Some(s) = from
            .snap
            .http_plans
            .get(from.plan.upstream)
            .and_then(|u| u.sticky.as_deref())
        {
            s.answer(&mut bufs.out, &response, &mut bufs.sticky);
            if s.learns_at_header() {
                s.learn(&bufs.sticky, crate::clock::now_ms());
            }
        }
        let status = bufs.pages.state.restatus(&mut bufs.out, 0, info.status);
        let upstream_head = bufs.upstream.readable().get(..info.head_len).unwrap_or_default();
        bufs.log.capture_headers(&bufs.out, upstream_head);
        bufs.upstream.consume(info.head_len);
        let copy = BodyCopy {
            framing: info.body,
            relay,
            limits: Limits {
                read: from.plan.conf.read_timeout,
                write: req.timeouts.send,
                max_body: 0,
            },
            pace: req.rate,
        };
        let head_bytes = bufs.out.len();
        let (ubuf, out) = (&mut bufs.upstream, &mut bufs.out);
        let mut sent_to = None;
        let mut sent = if compress || recode.is_some() {
            let mut stream = from
                .plan
                .gzip
                .as_ref()
                .filter(|_| compress)
                .map(|g| self.shard.gzip.take(g.level));
            let how = GzipOut {
                chunked: chunked_out,
                limits: copy.limits,
            };
            let io = CopyIo {
                src: &mut conn,
                buf: ubuf,
                decoder: &mut self.decoder,
                dst: &mut self.sock,
                out,
            };
            let moved = match (recode, stream.as_mut()) {
                (Some(table), g) => {
                    let mut rs = RecodeStream::new(table, g, CharsetScratch::lent(&mut bufs.charset));
                    let moved = gzip::compress_body::<R>(io, &mut rs, info.body, how).await;
                    rs.give_back(CharsetScratch::lent(&mut bufs.charset));
                    moved
                }
                (None, Some(g)) => gzip::compress_body::<R>(io, g, info.body, how).await,
                (None, None) => Ok(Default::default()),
            };
            if let Some(s) = stream {
                self.shard.gzip.give(s);
            }
            moved.map(|m| (m.read, m.sent))
        } else if buffering {
            let ahead = from.plan.conf.read_ahead;
            let whole =
                read_ahead::read_ahead::<R>(&mut conn, ubuf, &mut self.decoder, &mut self.sock, out, copy, ahead);
            whole.await.map(|w| {
                sent_to = Some(w.sent_to);
                (w.read, w.read)
            })
        } else {
            forward_body::<R>(&mut conn, ubuf, &mut self.decoder, &mut self.sock, out, copy)
                .await
                .map(|n| (n, n))
        };
        let mut upstream = Some(conn);
        let reusable = info.reusable && from.plan.upstream_keepalive;
        if let (Some(at), Ok(_)) = (sent_to, &sent) {
            // the upstream's part is over: its connection goes back to the pool while the client takes the rest
            if reusable && bufs.upstream.readable().is_empty() {
                if let Some(c) = upstream.take() {
                    from.shard
                        .pool_put(from.snap, from.plan.upstream, from.addr, c, info.age.served_one());
                }
            }
            if let Err(e) = read_ahead::finish::<R>(&mut self.sock, &bufs.out, at, req.timeouts.send).await {
                sent = Err(BodyError::Write(e));
            }
            bufs.out.clear();
            if bufs.out.capacity() > read_ahead::KEPT_OUT {
                bufs.out = Vec::with_capacity(read_ahead::KEPT_OUT);
            }
        }
        let (read, body) = *sent.as_ref().unwrap_or(&(0, 0));
        bufs.log.answered(status, head_bytes, body);
        let received = info.head_len as u64 + read;
        bufs.log.try_received(received, read);
        let keep = match sent {
            Ok(_) => {
                if let Some(c) = upstream.filter(|_| reusable && bufs.upstream.readable().is_empty()) {
                    from.shard
                        .pool_put(from.snap, from.plan.upstream, from.addr, c, info.age.served_one());
                }
                keep_client.keeps()
            }
            Err(BodyError::Write(_)) => false,
            Err(e) => {
                log_response_error(from.plan.errors.as_deref(), from.addr, &e);
                false
            }
        };
        (keep, received)
    }
}

/// The most a chunked body for an HTTP/1.0 upstream is held in memory when `client_max_body_size` is 0.
const DECHUNKED_MAX: usize = 16 << 20;

fn log_response_error(logs: Option<&crate::log::ErrorLogs>, addr: SocketAddr, e: &BodyError) {
    crate::log_in!(
        logs,
        crate::log::Level::Error,
        "upstream {addr}: {e} while sending the response to the client"
    );
}

/// When the whole request body is already in the client buffer, moves it behind the upstream head (so a retry can
/// send it again) and returns true; otherwise it will be streamed, and the request cannot be resent. A chunked
/// body already malformed in the buffer is an error: it is never forwarded.
/// `pages`: the location has error pages, which read the body held.
fn hold_whole_body(
    req: &Routed,
    pages: bool,
    bufs: &mut Buffers,
    decoder: &mut ChunkedDecoder,
) -> Result<bool, Rejection> {
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
            if let Some(at) = chunked_line(&bufs.request) {
                // read whole before the request goes: nginx sends it with its length, as a buffered body
                with_length(&mut bufs.request, at, data);
                let request = &mut bufs.request;
                let kept = data <= super::request_body::in_memory(req.body_buffer, BodyFraming::Chunked);
                bufs.body.sent_at(kept.then_some(request.len()), pages);
                decoder.reset();
                let _ = decoder.feed(&avail[..used], |d| request.extend_from_slice(d));
                bufs.client.consume(used);
                return Ok(true);
            }
            used
        }
    };
    let kept = take as u64 <= super::request_body::in_memory(req.body_buffer, req.body);
    bufs.body.sent_at(kept.then_some(bufs.request.len()), pages);
    bufs.request.extend_from_slice(&avail[..take]);
    bufs.client.consume(take);
    Ok(true)
}

/// The line announcing a chunked body in the upstream head `request` (its offset), written by the route plan.
fn chunked_line(request: &[u8]) -> Option<usize> {
    request.windows(CHUNKED_LINE.len()).position(|w| w == CHUNKED_LINE)
}

const CHUNKED_LINE: &[u8] = b"\r\nTransfer-Encoding: chunked\r\n";

/// Replaces the chunked line at `at` of the upstream head by `Content-Length: len` (the body is read whole).
fn with_length(head: &mut Vec<u8>, at: usize, len: u64) {
    use std::io::Write;
    let mut line = [0u8; 48];
    let mut free = &mut line[..];
    // (48 bytes hold the line with any u64)
    let _ = write!(free, "\r\nContent-Length: {len}\r\n");
    let n = 48 - free.len();
    head.splice(at..at + CHUNKED_LINE.len(), line[..n].iter().copied());
}
