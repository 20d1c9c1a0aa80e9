//! One request's tries against an upstream: nginx's rules for passing to the next peer (`proxy_next_upstream`
//! conditions, tries, `_timeout`, non-idempotent methods) and for reporting each try's outcome to the balancer.

use super::exchange::{Failure, FailureKind, Sent};
use crate::balance::{Attempt, Outcome};
use crate::http::pages::DateCache;
use crate::runtime::Runtime;
use crate::shard::Shard;
use crate::snapshot::route::ProxyPlan;
use crate::snapshot::Snapshot;
use std::time::Instant;

/// What a request asks that the retry rules read.
#[derive(Debug, Clone, Copy)]
pub struct RequestKind {
    /// POST, LOCK or PATCH.
    pub non_idempotent: bool,
}

/// What follows a failed try.
pub enum Then {
    Retry,
    Answer(u16),
    /// Answer this status and close (the client's body was refused while it was streamed).
    Refuse(u16),
    Close,
}

/// One request's tries against an upstream: the attempt and what decides whether another try may follow.
pub struct Tries<'a, R: Runtime> {
    pub shard: &'a Shard<R>,
    pub snap: &'a Snapshot,
    pub plan: &'a ProxyPlan,
    pub attempt: Attempt<'a>,
    pub started: Instant,
    /// The whole request is held, so it can be sent again.
    pub replayable: bool,
}

impl<R: Runtime> Tries<'_, R> {
    /// Reports the current try's outcome.
    pub fn report(&mut self, outcome: Outcome) {
        let attempt = &mut self.attempt;
        self.shard.with_http_state(self.snap, self.plan.upstream, |st| {
            attempt.report(outcome, st, DateCache::now_secs())
        });
    }

    /// Whether `proxy_next_upstream_timeout` still allows another try.
    fn in_time(&self) -> bool {
        let limit = self.plan.conf.next_upstream_timeout;
        limit.is_zero() || self.started.elapsed() < limit
    }

    /// nginx's test on an upstream status: pass to the next peer (reporting this one) when `http_XXX` is set, a
    /// try is left after this one, and the request may be sent again.
    pub fn retry_on_status(&mut self, status: u16, req: RequestKind) -> bool {
        let next = &self.plan.conf.next_upstream;
        let retry = next.on_status(status)
            && self.attempt.tries_left() > 1
            && self.replayable
            && (!req.non_idempotent || next.non_idempotent)
            && self.in_time();
        if retry {
            self.report(if status == 403 || status == 404 {
                Outcome::Next
            } else {
                Outcome::Failed
            });
        }
        retry
    }

    /// Reports a failed try and decides what follows (nginx's `ngx_http_upstream_next`).
    pub fn after_failure(&mut self, f: Failure, req: RequestKind, addr: std::net::SocketAddr) -> Then {
        match f.kind {
            FailureKind::ClientGone => return Then::Close,
            FailureKind::BadBody => return Then::Refuse(400),
            FailureKind::ClientTimeout => return Then::Refuse(408),
            FailureKind::BodyTooLarge => return Then::Refuse(413),
            _ => {}
        }
        crate::log_error!("upstream {addr} ({}): {}", self.plan_name(), f.kind);
        self.report(Outcome::Failed);
        let next = &self.plan.conf.next_upstream;
        let allowed = match f.kind {
            FailureKind::Timeout(_) => next.timeout,
            FailureKind::InvalidHeader => next.invalid_header,
            _ => next.error,
        };
        let may_resend = f.sent == Sent::No || !req.non_idempotent || next.non_idempotent;
        if allowed && may_resend && self.replayable && self.attempt.tries_left() > 0 && self.in_time() {
            Then::Retry
        } else {
            Then::Answer(if f.kind.is_timeout() { 504 } else { 502 })
        }
    }

    fn plan_name(&self) -> &str {
        self.attempt.plan().name.as_str()
    }
}
