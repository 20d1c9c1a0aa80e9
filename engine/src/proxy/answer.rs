//! The answers corelb writes itself on an HTTP connection: fixed answers (`return`, a 404), nginx's error pages,
//! refusals that close, and the `api`/`metrics` endpoints (a change answered on the control thread) — each noted
//! for the access log. Also the routed request's facts they and the proxy flow share.

use super::body::{collect_body, discard_body, send, BodyError};
use super::exchange::ClientTimeouts;
use super::retry::RequestKind;
use crate::admin::AdminRequest;
use crate::config::model::AdminEndpoint;
use crate::http::chunked::ChunkedDecoder;
use crate::http::pages::{sent_status, DateCache};
use crate::http::{BodyFraming, Rejection};
use crate::runtime::Runtime;
use crate::shard::{Buffers, Shard};
use crate::snapshot::route::FixedAnswer;
use std::time::Duration;

/// What a request head asks for, once routed.
pub(super) struct Request {
    pub(super) head_len: usize,
    pub(super) body: BodyFraming,
    pub(super) head_request: bool,
    pub(super) non_idempotent: bool,
    pub(super) client_11: bool,
    /// The client wants, and the config allows, another request on this connection.
    pub(super) keepalive: bool,
    /// The client waits for `100 Continue` before sending its body.
    pub(super) expect_continue: bool,
    /// `client_max_body_size` of the location (0 = no limit).
    pub(super) max_body: u64,
    /// `client_body_timeout` and `send_timeout` of the location.
    pub(super) timeouts: ClientTimeouts,
}

impl Request {
    pub(super) fn kind(&self) -> RequestKind {
        RequestKind {
            non_idempotent: self.non_idempotent,
        }
    }
}

/// Answers a request with a fixed answer (`return`, or a 404), after reading and dropping its body.
pub(super) async fn fixed<R: Runtime>(
    shard: &Shard<R>,
    answer: &FixedAnswer,
    req: &Request,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    decoder: &mut ChunkedDecoder,
) -> bool {
    let drained = discard_body::<R>(client, &mut bufs.client, req.body, decoder, req.timeouts.body).await;
    match &drained {
        Err(BodyError::Chunk(_)) => shard.counters.count_bad_request(),
        Err(BodyError::Read(_) | BodyError::Truncated) => shard.counters.count_client_abort(),
        _ => {}
    }
    let keep = req.keepalive && drained.is_ok();
    bufs.out.clear();
    shard.date(DateCache::now_secs(), |d| {
        answer.write(d, keep, req.head_request, &mut bufs.out)
    });
    record_answer(bufs, answer, req.head_request);
    send::<R>(client, &bufs.out, req.timeouts.send).await.is_ok() && keep
}

/// Answers a request to an `api` or `metrics` location, after reading its body.
pub(super) async fn admin<R: Runtime>(
    shard: &Shard<R>,
    endpoint: AdminEndpoint,
    target: &(String, String),
    req: &Request,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    decoder: &mut ChunkedDecoder,
) -> bool {
    let mut body = std::mem::take(&mut bufs.scratch);
    let read = collect_body::<R>(
        client,
        &mut bufs.client,
        req.body,
        decoder,
        req.timeouts.body,
        crate::admin::MAX_BODY,
        &mut body,
    )
    .await;
    let answer = match read {
        Ok(()) => {
            let (method, t) = target;
            let (path, args) = t.split_once('?').map_or((t.as_str(), None), |(p, a)| (p, Some(a)));
            let request = AdminRequest {
                method,
                path,
                args,
                body: &body,
            };
            Some(admin_answer(&shard.shared, endpoint, request).await)
        }
        Err(BodyError::TooLarge) => Some(crate::admin::api::error(413, "BodyTooLarge", "request body too large")),
        Err(BodyError::Chunk(_)) => {
            shard.counters.count_bad_request();
            None
        }
        Err(_) => {
            shard.counters.count_client_abort();
            None
        }
    };
    bufs.scratch = body;
    let Some(answer) = answer else {
        return false;
    };
    shard.counters.count_answer(answer.status);
    let keep = req.keepalive && read.is_ok();
    bufs.out.clear();
    shard.date(DateCache::now_secs(), |d| {
        answer.write(d, keep, req.head_request, &mut bufs.out)
    });
    let body = if req.head_request { 0 } else { answer.body.len() };
    bufs.log
        .answered(answer.status, bufs.out.len().saturating_sub(body), body as u64);
    send::<R>(client, &bufs.out, req.timeouts.send).await.is_ok() && keep
}

/// Answers an endpoint request: a change on the control thread (the shard serves its other connections
/// meanwhile), anything else here.
async fn admin_answer(
    shared: &std::sync::Arc<crate::state::Shared>,
    endpoint: AdminEndpoint,
    request: AdminRequest<'_>,
) -> crate::admin::AdminResponse {
    let Some(control) = shared
        .control_thread
        .as_ref()
        .filter(|_| crate::admin::changes(endpoint, request.method))
    else {
        return crate::admin::handle(shared, endpoint, &request);
    };
    let owned = crate::admin::OwnedAdminRequest {
        method: request.method.to_string(),
        path: request.path.to_string(),
        args: request.args.map(str::to_string),
        body: request.body.to_vec(),
    };
    let on_control = std::sync::Arc::clone(shared);
    let job = move || crate::admin::handle(&on_control, endpoint, &owned.as_request());
    control
        .run(job)
        .await
        .unwrap_or_else(|| crate::admin::api::error(500, "InternalError", "the control thread is gone"))
}

/// Answers a refused request and closes.
pub(super) async fn reject<R: Runtime>(
    shard: &Shard<R>,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    r: Rejection,
    wait: Duration,
) {
    shard.counters.count_answer(sent_status(r.status));
    bufs.out.clear();
    let page = shard.error_answer(r.status);
    shard.date(DateCache::now_secs(), |d| page.write(d, false, false, &mut bufs.out));
    record_answer(bufs, page, false);
    let _ = send::<R>(client, &bufs.out, wait).await;
}

/// Notes a fixed answer (now in `bufs.out`) for the access log.
fn record_answer(bufs: &mut Buffers, answer: &FixedAnswer, head_request: bool) {
    let body = if head_request { 0 } else { answer.body_len() };
    bufs.log.answered(
        sent_status(answer.status),
        bufs.out.len().saturating_sub(body),
        body as u64,
    );
}

/// Sends nginx's error page for `status`; the connection stays open only if the request body was consumed.
pub(super) async fn answer<R: Runtime>(
    shard: &Shard<R>,
    client: &mut R::Conn,
    bufs: &mut Buffers,
    status: u16,
    req: &Request,
    body_consumed: bool,
) -> bool {
    shard.counters.count_answer(status);
    let keep = req.keepalive && body_consumed;
    bufs.out.clear();
    let page = shard.error_answer(status);
    shard.date(DateCache::now_secs(), |d| {
        page.write(d, keep, req.head_request, &mut bufs.out)
    });
    record_answer(bufs, page, req.head_request);
    send::<R>(client, &bufs.out, req.timeouts.send).await.is_ok() && keep
}
