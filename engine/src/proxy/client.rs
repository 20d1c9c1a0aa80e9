//! One client connection being served (its shard, socket, recycled buffers and chunked decoder), the routed
//! request's facts, and the answers corelb writes on the connection itself: fixed answers (`return`, a 404),
//! nginx's error pages, refusals that close, and the `api`/`metrics` endpoints (a change answered on the control
//! thread). Each goes through one writer that puts the cached `Date` in and notes the answer for the access log.

use super::body::{collect_body, discard_body, send, BodyError};
use super::retry::RequestKind;
use crate::access_log::head_vars::HeadVars;
use crate::admin::{AdminRequest, AdminResponse};
use crate::config::model::AdminEndpoint;
use crate::http::chunked::ChunkedDecoder;
use crate::http::keepalive::Connection;
use crate::http::pages::{sent_status, server_name};
use crate::http::vars::ConnVars;
use crate::http::{BodyFraming, Rejection};
use crate::runtime::Runtime;
use crate::shard::{Buffers, Shard};
use crate::snapshot::headers::{HeadersPlan, ResponseFacts, NO_HEADERS};
use crate::snapshot::route::FixedAnswer;
use crate::state::Shared;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// nginx's non-standard status of `return 444`: close the connection without an answer.
const CLOSE: u16 = 444;

/// The client-side time limits of a request, each between two successive reads or writes (as nginx's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    /// `client_body_timeout`: for the next read of the request body.
    pub body: Duration,
    /// `send_timeout`: for the next write to the client.
    pub send: Duration,
    /// `keepalive_timeout`: the wait for the next request once this one is answered (nginx sets it with the
    /// location's, `ngx_http_set_keepalive`).
    pub keepalive: Duration,
}

/// What a request head asks for, once routed (the head itself is consumed by then).
pub(super) struct Routed {
    pub(super) head_len: usize,
    pub(super) body: BodyFraming,
    pub(super) head_request: bool,
    pub(super) non_idempotent: bool,
    pub(super) client_11: bool,
    /// The client wants, and the config allows, another request on this connection.
    pub(super) keepalive: Connection,
    /// The client waits for `100 Continue` before sending its body.
    pub(super) expect_continue: bool,
    /// The client sent `Upgrade`: a `101` answer turns the connection into a tunnel.
    pub(super) upgrade: bool,
    /// `client_max_body_size` of the location (0 = no limit).
    pub(super) max_body: u64,
    /// `client_body_timeout` and `send_timeout` of the location.
    pub(super) timeouts: ClientTimeouts,
    /// What the request says about gzip (`No` where the location has no gzip plan).
    pub(super) gzip: crate::snapshot::gzip::GzipAsk,
    /// `limit_rate` (or `set $limit_rate`) of the answer.
    pub(super) rate: Option<super::limit_rate::RateLimit>,
    /// `limit_req`'s delay before the request goes on (zero: none).
    pub(super) delay: Duration,
    /// `client_body_buffer_size` of the location: a body nginx keeps in memory (not in a temporary file).
    pub(super) body_buffer: u64,
    /// The location's lingering close, when the connection closes after the answer.
    pub(super) lingering: crate::config::model::Lingering,
}

impl Routed {
    /// Before the first request of a connection: nothing routed yet.
    pub(super) const NONE: Routed = Routed {
        head_len: 0,
        body: BodyFraming::None,
        head_request: false,
        non_idempotent: false,
        client_11: false,
        keepalive: Connection::CLOSE,
        expect_continue: false,
        upgrade: false,
        max_body: 0,
        timeouts: ClientTimeouts {
            body: Duration::ZERO,
            send: Duration::ZERO,
            keepalive: Duration::ZERO,
        },
        gzip: crate::snapshot::gzip::GzipAsk::No,
        rate: None,
        delay: Duration::ZERO,
        body_buffer: 0,
        lingering: crate::config::model::Lingering {
            close: crate::config::model::LingeringClose::Off,
            time: Duration::ZERO,
            timeout: Duration::ZERO,
        },
    };

    pub(super) fn kind(&self) -> RequestKind {
        RequestKind {
            non_idempotent: self.non_idempotent,
        }
    }
}

/// One client connection and what serving it needs; owned by the connection's task.
pub(super) struct ClientConn<R: Runtime> {
    pub(super) shard: Rc<Shard<R>>,
    pub(super) sock: R::Conn,
    /// The shard's buffers while a request is read or served (given back while the connection waits idle).
    pub(super) bufs: Box<Buffers>,
    pub(super) decoder: ChunkedDecoder,
    /// The connection's addresses (`$remote_addr`, `$server_port`...).
    pub(super) vars: ConnVars,
    /// Waiting, reading or writing, in the shard's counters (stub_status).
    pub(super) phase: super::phase::ConnPhase,
}

/// An answer corelb writes itself, with the cached `Date` put in.
trait OwnAnswer {
    fn status(&self) -> u16;
    /// nginx sends it as a special response (an error page, a redirect): it keeps its status after an error
    /// page's redirect.
    fn special(&self) -> bool {
        true
    }
    fn body_len(&self) -> usize;
    /// The head up to its `Connection` line; `server` is the location's `Server` value.
    fn write_head(&self, server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>);
    fn write_body(&self, head_request: bool, out: &mut Vec<u8>);
}

/// A fixed answer with a `Location` made per request.
struct Located<'a> {
    answer: &'a FixedAnswer,
    location: &'a [u8],
}

impl OwnAnswer for Located<'_> {
    fn status(&self) -> u16 {
        self.answer.status
    }
    fn body_len(&self) -> usize {
        self.answer.body_len()
    }
    fn write_head(&self, _server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        self.answer
            .write_head_located(date, Some(self.location), keepalive, out)
    }
    fn write_body(&self, head_request: bool, out: &mut Vec<u8>) {
        self.answer.write_body(head_request, out)
    }
}

impl OwnAnswer for FixedAnswer {
    fn status(&self) -> u16 {
        self.status
    }
    fn special(&self) -> bool {
        self.special
    }
    fn body_len(&self) -> usize {
        FixedAnswer::body_len(self)
    }
    fn write_head(&self, _server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        // the `Server` line was rendered at load with the location's `server_tokens`
        FixedAnswer::write_head(self, date, keepalive, out)
    }
    fn write_body(&self, head_request: bool, out: &mut Vec<u8>) {
        FixedAnswer::write_body(self, head_request, out)
    }
}

/// A fixed answer whose `return` text has variables, with the text evaluated for this request.
struct WithText<'a> {
    answer: &'a FixedAnswer,
    text: &'a [u8],
}

impl OwnAnswer for WithText<'_> {
    fn status(&self) -> u16 {
        self.answer.status
    }
    fn special(&self) -> bool {
        self.answer.special
    }
    fn body_len(&self) -> usize {
        self.answer.body_len_with(self.text)
    }
    fn write_head(&self, _server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        self.answer.write_head_text(date, self.text, keepalive, out)
    }
    fn write_body(&self, head_request: bool, out: &mut Vec<u8>) {
        self.answer.write_body_with(head_request, self.text, out)
    }
}

impl OwnAnswer for AdminResponse {
    fn status(&self) -> u16 {
        self.status
    }
    fn special(&self) -> bool {
        false
    }
    fn body_len(&self) -> usize {
        self.body.len()
    }
    fn write_head(&self, server: &str, date: &[u8], keepalive: Connection, out: &mut Vec<u8>) {
        AdminResponse::write_head(self, server, date, keepalive, out)
    }
    fn write_body(&self, head_request: bool, out: &mut Vec<u8>) {
        if !head_request {
            out.extend_from_slice(&self.body);
        }
    }
}

impl<R: Runtime> ClientConn<R> {
    /// Writes `answer`, notes it for the access log and sends it within `wait`; returns whether the connection
    /// stays open (`keep`, and the write went through).
    async fn send_own(
        &mut self,
        answer: &impl OwnAnswer,
        headers: &HeadersPlan,
        keep: Connection,
        head_request: bool,
        wait: Duration,
    ) -> bool {
        if headers.reads_record() {
            // nginx's upstream module closes the last try's time before an error page is made
            self.bufs.log.finish_tries(crate::clock::instant());
        }
        let (out, added) = (&mut self.bufs.out, &self.bufs.headers);
        out.clear();
        let now = crate::clock::now_secs();
        let server = server_name(added.tokens());
        self.shard.date(now, |d| answer.write_head(server, d, keep, out));
        if let Some(plan) = headers.charset() {
            let scratch = crate::snapshot::charset::CharsetScratch::lent(&mut self.bufs.charset);
            super::charset::own_answer(plan, answer.status(), out, scratch);
        }
        let facts = ResponseFacts {
            now,
            last_modified: None,
        };
        let pages = &self.bufs.pages.state;
        let status = match pages.active() && !answer.special() {
            false => answer.status(),
            true => pages.restatus(out, 0, answer.status()),
        };
        if pages.active() {
            // the upstream's lines first, as nginx's list has them before `add_header`'s
            pages.add_kept(out, !answer.special());
        }
        let response = HeadVars {
            status,
            rec: &self.bufs.log,
            upstream_head: b"",
            upstream_name: added.upstream_name(),
            cache: &self.bufs.vars,
        };
        headers.append(status, added, &response, facts, out);
        out.extend_from_slice(b"\r\n");
        answer.write_body(head_request, out);
        let body = if head_request { 0 } else { answer.body_len() };
        let head_len = self.bufs.out.len().saturating_sub(body);
        self.bufs.log.answered(sent_status(status), head_len, body as u64);
        let head = self.bufs.out.get(..head_len).unwrap_or_default();
        self.bufs.log.capture_headers(head, b"");
        send::<R>(&mut self.sock, &self.bufs.out, wait).await.is_ok() && keep.keeps()
    }

    /// Reads and drops the request body (counting a malformed one or a client that left).
    pub(super) async fn drain_body(&mut self, req: &Routed) -> Result<(), BodyError> {
        if req.body == BodyFraming::None {
            return Ok(());
        }
        let bufs = &mut self.bufs;
        let drained = discard_body::<R>(
            &mut self.sock,
            &mut bufs.client,
            req.body,
            &mut self.decoder,
            req.timeouts.body,
        )
        .await;
        match &drained {
            Err(BodyError::Chunk(_)) => self.shard.counters.count_bad_request(),
            Err(BodyError::Read(_) | BodyError::Truncated) => self.shard.counters.count_client_abort(),
            _ => {}
        }
        drained
    }

    /// Answers with a redirecting `rewrite`'s `answer`, its `Location` taken from `Buffers::rewrite`.
    pub(super) async fn serve_redirect(&mut self, answer: &FixedAnswer, headers: &HeadersPlan, req: &Routed) -> bool {
        let drained = self.drain_body(req).await;
        let keep = req.keepalive.and(drained.is_ok());
        let location = std::mem::take(&mut self.bufs.rewrite);
        let located = Located {
            answer,
            location: &location,
        };
        let kept = self
            .send_own(&located, headers, keep, req.head_request, req.timeouts.send)
            .await;
        self.bufs.rewrite = location;
        kept
    }

    /// Answers a request with a fixed answer (`return`, or a 404), after reading and dropping its body.
    /// `headers`: the plan prepared for the request (a script's `return` has none of its own).
    pub(super) async fn serve_fixed(&mut self, answer: &FixedAnswer, headers: &HeadersPlan, req: &Routed) -> bool {
        if answer.status == CLOSE {
            // nginx's `return 444`: the connection closes, nothing is sent (the access log says 444)
            self.bufs.log.answered(CLOSE, 0, 0);
            return false;
        }
        let drained = self.drain_body(req).await;
        let keep = req.keepalive.and(drained.is_ok());
        if answer.text.is_none() {
            return self
                .send_own(answer, headers, keep, req.head_request, req.timeouts.send)
                .await;
        }
        let text = std::mem::take(&mut self.bufs.answer);
        let with = WithText { answer, text: &text };
        let kept = self
            .send_own(&with, headers, keep, req.head_request, req.timeouts.send)
            .await;
        self.bufs.answer = text;
        kept
    }

    /// Answers a request to an `api` or `metrics` location (`target`: its method and target), after reading its
    /// body.
    pub(super) async fn serve_endpoint(
        &mut self,
        endpoint: AdminEndpoint,
        target: &(String, String),
        req: &Routed,
    ) -> bool {
        let mut body = std::mem::take(&mut self.bufs.scratch);
        let read = collect_body::<R>(
            &mut self.sock,
            &mut self.bufs.client,
            req.body,
            &mut self.decoder,
            req.timeouts.body,
            crate::admin::MAX_BODY,
            &mut body,
        )
        .await;
        let response = match read {
            Ok(()) => {
                let (method, t) = target;
                let (path, args) = t.split_once('?').map_or((t.as_str(), None), |(p, a)| (p, Some(a)));
                let request = AdminRequest {
                    method,
                    path,
                    args,
                    body: &body,
                };
                Some(endpoint_response(&self.shard.shared, endpoint, request).await)
            }
            Err(BodyError::TooLarge) => Some(crate::admin::api::error(413, "BodyTooLarge", "request body too large")),
            Err(BodyError::Chunk(_)) => {
                self.shard.counters.count_bad_request();
                None
            }
            Err(_) => {
                self.shard.counters.count_client_abort();
                None
            }
        };
        self.bufs.scratch = body;
        let Some(response) = response else {
            return false;
        };
        self.shard.counters.count_answer(response.status);
        let keep = req.keepalive.and(read.is_ok());
        self.send_own(&response, &NO_HEADERS, keep, req.head_request, req.timeouts.send)
            .await
    }

    /// Answers a refused request with nginx's error page for its status; the connection closes after it.
    pub(super) async fn refuse(&mut self, r: Rejection, wait: Duration) {
        self.shard.counters.count_answer(sent_status(r.status));
        let shard = Rc::clone(&self.shard);
        let tokens = self.bufs.headers.tokens();
        self.send_own(
            shard.error_answer(r.status, tokens),
            &NO_HEADERS,
            Connection::CLOSE,
            false,
            wait,
        )
        .await;
    }

    /// Sends nginx's error page for `status` with the location's `headers`; the connection stays open only if the
    /// request body was consumed.
    pub(super) async fn error_page(
        &mut self,
        status: u16,
        headers: &HeadersPlan,
        req: &Routed,
        body_consumed: bool,
    ) -> bool {
        self.shard.counters.count_answer(status);
        let keep = req.keepalive.and(body_consumed);
        let shard = Rc::clone(&self.shard);
        let tokens = self.bufs.headers.tokens();
        self.send_own(
            shard.error_answer(status, tokens),
            headers,
            keep,
            req.head_request,
            req.timeouts.send,
        )
        .await
    }
}

/// Answers an endpoint request: a change on the control thread (the shard serves its other connections
/// meanwhile), anything else here.
async fn endpoint_response(shared: &Arc<Shared>, endpoint: AdminEndpoint, request: AdminRequest<'_>) -> AdminResponse {
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
    let on_control = Arc::clone(shared);
    let job = move || crate::admin::handle(&on_control, endpoint, &owned.as_request());
    control
        .run(job)
        .await
        .unwrap_or_else(|| crate::admin::api::error(500, "InternalError", "the control thread is gone"))
}
