//! One request's tries against an upstream in the HTTP proxy: the attempt, what nginx's `proxy_next_upstream`
//! decision ([`crate::balance::next::decide`]) reads of the request, and each try's outcome reported to the
//! balancer.

use super::exchange::{Failure, FailureKind, Sent};
use super::try_clock::{self, TryClock};
use crate::balance::least_time::{Phase, TryTimes};
use crate::balance::next::{self, FailCause, Proto, Step, TryCx, TryEnd};
use crate::balance::{Attempt, Outcome, Peer};
use crate::runtime::Runtime;
use crate::shard::Shard;
use crate::snapshot::route::ProxyPlan;
use crate::snapshot::Snapshot;
use crate::tls::verify::PeerRefused;
use std::time::Instant;

/// What a request asks that the retry rules read.
#[derive(Debug, Clone, Copy)]
pub struct RequestKind {
    /// POST, LOCK or PATCH.
    pub non_idempotent: bool,
}

/// What follows a failed try.
pub enum NextStep {
    Retry,
    Answer(u16),
    /// Answer this status and close (the client's body was refused while it was streamed).
    Refuse(u16),
    Close,
}

/// One request's tries against an upstream: the attempt and what decides whether another try may follow.
pub struct RetryState<'a, R: Runtime> {
    pub shard: &'a Shard<R>,
    pub snap: &'a Snapshot,
    pub plan: &'a ProxyPlan,
    pub attempt: Attempt<'a>,
    pub started: Instant,
    /// The whole request is held, so it can be sent again.
    pub replayable: bool,
    /// The current try's times (`least_time` upstreams only).
    pub clock: TryClock,
    /// The balancer state of an upstream made for this request (a URL host's addresses); `None`: the shard's
    /// state of the snapshot's upstream.
    pub own: Option<Box<crate::balance::ShardState>>,
}

impl<'a, R: Runtime> RetryState<'a, R> {
    /// Picks the next peer for this request (`None`: no live upstreams).
    pub fn pick(&mut self, key: &[u8]) -> Option<&'a Peer> {
        let timed = self.attempt.plan().timed();
        let (now, now_ms) = try_clock::pick_time(timed);
        let attempt = &mut self.attempt;
        let picked = match &mut self.own {
            Some(st) => attempt.pick_at(st, key, now, now_ms),
            None => self
                .shard
                .with_http_state(self.snap, self.plan.upstream, |st| {
                    attempt.pick_at(st, key, now, now_ms)
                })
                .flatten(),
        };
        self.clock.start(timed && picked.is_some());
        picked
    }

    /// The current try's response header was read (`least_time`'s `notify`).
    pub fn header_read(&mut self) {
        if let Some(ms) = self.clock.header() {
            self.attempt.notify(Phase::Header, ms, crate::clock::now_ms());
        }
    }

    /// Reports the current try's outcome.
    pub fn report(&mut self, outcome: Outcome) {
        let attempt = &mut self.attempt;
        let times = self.clock.http();
        let (now, now_ms) = try_clock::pick_time(times != TryTimes::None);
        match &mut self.own {
            Some(st) => attempt.report_timed(outcome, st, now, times, now_ms),
            None => {
                self.shard.with_http_state(self.snap, self.plan.upstream, |st| {
                    attempt.report_timed(outcome, st, now, times, now_ms)
                });
            }
        }
        // a connection slot freed: requests in a `queue` look again
        if self.attempt.plan().queue.is_some() {
            self.shard.queue.wake_all();
        }
    }

    /// What the decision reads of this request and its tries.
    fn try_cx(&self, req: RequestKind) -> TryCx {
        let limit = self.plan.conf.next_upstream_timeout;
        TryCx {
            proto: Proto::Http,
            tries_left: self.attempt.tries_left(),
            replayable: self.replayable,
            non_idempotent: req.non_idempotent,
            in_time: limit.is_zero() || self.started.elapsed() < limit,
        }
    }

    /// nginx's test on an upstream status: pass to the next peer (reporting this one) when `http_XXX` is set, a
    /// try is left after this one, and the request may be sent again.
    pub fn retry_on_status(&mut self, status: u16, req: RequestKind) -> bool {
        let rules = &self.plan.conf.next_upstream;
        match next::decide(rules, TryEnd::Status(status), self.try_cx(req)) {
            Step::Retry(outcome) => {
                self.report(outcome);
                true
            }
            Step::Deliver | Step::GiveUp(_) => false,
        }
    }

    /// Reports a failed try and decides what follows (nginx's `ngx_http_upstream_next`).
    pub fn after_failure(&mut self, f: Failure, req: RequestKind, addr: std::net::SocketAddr) -> NextStep {
        let cause = match f.kind {
            FailureKind::ClientGone => return NextStep::Close,
            FailureKind::BadBody => return NextStep::Refuse(400),
            FailureKind::ClientTimeout => return NextStep::Refuse(408),
            FailureKind::BodyTooLarge => return NextStep::Refuse(413),
            FailureKind::Timeout(_) => FailCause::Timeout,
            FailureKind::InvalidHeader => FailCause::InvalidHeader,
            FailureKind::Error(_) | FailureKind::Refused(_) => FailCause::Error,
            FailureKind::NoSocket(_) => {
                // nginx's `ngx_http_upstream_connect` finalizes with 500 and frees the peer as not failed
                crate::log_in!(
                    self.plan.errors.as_deref(),
                    crate::log::Level::Alert,
                    "upstream {addr} ({}): {}",
                    self.plan_name(),
                    f.kind
                );
                self.report(Outcome::Next);
                return NextStep::Answer(500);
            }
        };
        match (f.kind, &self.plan.tls) {
            // nginx names the name the certificate did not match
            (FailureKind::Refused(PeerRefused::Name), Some(tls)) => crate::log_in!(
                self.plan.errors.as_deref(),
                crate::log::Level::Error,
                "upstream {addr} ({}): upstream SSL certificate does not match \"{}\" while SSL handshaking to \
                 upstream",
                self.plan_name(),
                tls.name_text
            ),
            _ => crate::log_in!(
                self.plan.errors.as_deref(),
                crate::log::Level::Error,
                "upstream {addr} ({}): {}",
                self.plan_name(),
                f.kind
            ),
        }
        let end = TryEnd::Failed {
            cause,
            sent: f.sent == Sent::Yes,
        };
        let step = next::decide(&self.plan.conf.next_upstream, end, self.try_cx(req));
        self.report(Outcome::Failed);
        match step {
            Step::Retry(_) => NextStep::Retry,
            Step::GiveUp(status) => NextStep::Answer(status),
            Step::Deliver => NextStep::Answer(502),
        }
    }

    fn plan_name(&self) -> &str {
        self.attempt.plan().name.as_str()
    }
}
