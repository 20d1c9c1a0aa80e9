//! The request simulator: runs requests through a plan, a shard state and attempts as nginx (docs/algorithms.md §12),
//! against backends that answer by mode, with a clock passed in. `corelb pick` and the golden tests use it.

pub mod trace;
pub mod vars;

pub use trace::{parse_trace, BackendMode, Backends, Timing, TraceError, TraceLine};
pub use vars::Request;

use crate::balance::least_time::{Phase, TryTimes};
use crate::balance::next::{self, FailCause, Proto, Step, TryCx, TryEnd};
use crate::balance::{Attempt, Outcome, ShardState, UpstreamPlan};
use crate::config::model::{Config, NextUpstream, UpstreamConf};
use std::fmt;
use std::net::SocketAddr;

/// Which block an upstream lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Http,
    Stream,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Context::Http => "http",
            Context::Stream => "stream",
        })
    }
}

/// When a request passes to the next peer: the `*_next_upstream` conditions and `*_next_upstream_tries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub context: Context,
    /// Stream's `proxy_next_upstream on` is `error timeout` here, `off` is [`NextUpstream::OFF`].
    pub next_upstream: NextUpstream,
    /// 0 = bounded only by the peers.
    pub tries: usize,
}

impl RetryPolicy {
    /// nginx's defaults for `context`.
    pub fn default_for(context: Context) -> Self {
        RetryPolicy {
            context,
            next_upstream: NextUpstream::default(),
            tries: 0,
        }
    }
}

/// An upstream found in a config, with the retry settings of the first place that proxies to it.
#[derive(Debug, Clone, Copy)]
pub struct Located<'c> {
    pub upstream: &'c UpstreamConf,
    pub policy: RetryPolicy,
}

/// Why an upstream could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    #[error("no upstream \"{0}\" in the {1} block")]
    NotIn(String, Context),
    #[error("no upstream \"{0}\" in the configuration")]
    NotFound(String),
    #[error("upstream \"{0}\" exists in both http and stream: choose one (with --stream for the stream one)")]
    Ambiguous(String),
}

/// Finds the upstream `name` in `context` (or in whichever block has it when `None`).
pub fn locate<'c>(config: &'c Config, name: &str, context: Option<Context>) -> Result<Located<'c>, LocateError> {
    let http = config.http.as_ref().and_then(|h| {
        let i = h.upstreams.iter().position(|u| u.name == name)?;
        let mut policy = RetryPolicy::default_for(Context::Http);
        let mut locations = h.servers.iter().flat_map(|s| &s.locations);
        if let Some(loc) = locations.find(|l| l.proxy_pass.as_ref().is_some_and(|p| p.upstream == i)) {
            policy.next_upstream = loc.proxy.next_upstream;
            policy.tries = loc.proxy.next_upstream_tries;
        }
        h.upstreams.get(i).map(|upstream| Located { upstream, policy })
    });
    let stream = config.stream.as_ref().and_then(|s| {
        let i = s.upstreams.iter().position(|u| u.name == name)?;
        let mut policy = RetryPolicy::default_for(Context::Stream);
        if let Some(server) = s.servers.iter().find(|srv| srv.upstream == Some(i)) {
            if !server.next_upstream {
                policy.next_upstream = NextUpstream::OFF;
            }
            policy.tries = server.next_upstream_tries;
        }
        s.upstreams.get(i).map(|upstream| Located { upstream, policy })
    });
    match (context, http, stream) {
        (Some(Context::Http), Some(found), _) | (Some(Context::Stream), _, Some(found)) => Ok(found),
        (Some(ctx), _, _) => Err(LocateError::NotIn(name.into(), ctx)),
        (None, Some(_), Some(_)) => Err(LocateError::Ambiguous(name.into())),
        (None, Some(found), None) | (None, None, Some(found)) => Ok(found),
        (None, None, None) => Err(LocateError::NotFound(name.into())),
    }
}

/// Why an attempt on a peer did not end the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Connect refused, connection reset: nginx's `error`.
    Error,
    /// No answer in time: nginx's `timeout`.
    Timeout,
    /// An answer with this status, passed to the next peer by `http_NNN`.
    Status(u16),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Error => f.write_str("error"),
            Failure::Timeout => f.write_str("timeout"),
            Failure::Status(code) => write!(f, "{code}"),
        }
    }
}

/// One entry of a request's tried list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A peer was tried; `failure` is set when the request went on from it.
    Peer { addr: SocketAddr, failure: Option<Failure> },
    /// No peer was usable: nginx's "no live upstreams" (`$upstream_addr` shows the upstream's name).
    NoLive,
}

/// What happened to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimResult {
    pub hops: Vec<Hop>,
    /// The status sent to the client (for stream, the session's `$status`: 200 or 502).
    pub status: u16,
}

impl SimResult {
    /// The tried list as nginx's `$upstream_addr` prints it: `127.0.0.1:8089, 127.0.0.1:8082`, with the upstream's
    /// name for "no live upstreams".
    pub fn upstream_addr(&self, upstream: &str) -> String {
        self.hops
            .iter()
            .map(|h| match h {
                Hop::Peer { addr, .. } => addr.to_string(),
                Hop::NoLive => upstream.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The golden form: `STATUS UPSTREAM_ADDR` (`-` when no upstream was asked, as nginx logs it).
    pub fn golden_line(&self, upstream: &str) -> String {
        if self.hops.is_empty() {
            return format!("{} -", self.status);
        }
        format!("{} {}", self.status, self.upstream_addr(upstream))
    }
}

/// Whether a request stays open after its peer answered (keeping the peer's `conns` and, with
/// `least_time ... inflight`, counting as in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// It ends when its peer answers.
    No,
    /// It stays open until [`Simulator::release_held`].
    Open,
    /// Its answer comes at this clock (ms): it ends with the first request run at or after it.
    Until(u64),
}

/// A held request: its attempt, when it was picked and when it ends (ms).
#[derive(Debug)]
struct Held<'p> {
    attempt: Attempt<'p>,
    start_ms: u64,
    end_ms: Option<u64>,
}

/// Runs requests one at a time through one shard's view of an upstream.
#[derive(Debug)]
pub struct Simulator<'p> {
    plan: &'p UpstreamPlan,
    shard: ShardState,
    policy: RetryPolicy,
    backends: Backends,
    /// The key bytes of the request being run (a reused buffer).
    key: Vec<u8>,
    /// Held requests: their `conns` stay taken until they end.
    held: Vec<Held<'p>>,
}

impl<'p> Simulator<'p> {
    /// A simulator over `plan` with fresh shard state (fixed RNG seed).
    pub fn new(plan: &'p UpstreamPlan, policy: RetryPolicy, backends: Backends) -> Self {
        Simulator {
            plan,
            shard: ShardState::seeded(plan, 0),
            policy,
            backends,
            key: Vec::new(),
            held: Vec::new(),
        }
    }

    /// The plan simulated.
    pub fn plan(&self) -> &'p UpstreamPlan {
        self.plan
    }

    /// Runs one request at `now` (whole seconds), evaluating its key from the plan's [`KeySpec`].
    pub fn run(&mut self, req: &Request, hold: bool, now: u64) -> SimResult {
        let hold = if hold { Hold::Open } else { Hold::No };
        self.run_ms(req, hold, now.saturating_mul(1000))
    }

    /// Runs one request at `now_ms` (the clock in ms, whose whole seconds are nginx's `ngx_time()`), after ending
    /// the held requests whose answer came before it.
    pub fn run_ms(&mut self, req: &Request, hold: Hold, now_ms: u64) -> SimResult {
        self.release_due(now_ms);
        if self.policy.context == Context::Http && req.normalized_path().is_err() {
            // nginx answers 400 before any upstream: a path above the root or a bad escape.
            return SimResult {
                hops: Vec::new(),
                status: 400,
            };
        }
        let mut key = std::mem::take(&mut self.key);
        self.plan.key.eval_into(req, Some(req.remote), &mut key);
        let out = self.run_key_ms(&key, req.non_idempotent(), hold, now_ms);
        self.key = key;
        out
    }

    /// Runs one request whose key bytes are given directly (`non_idempotent`: a POST, LOCK or PATCH).
    pub fn run_with_key(&mut self, key: &[u8], non_idempotent: bool, hold: bool, now: u64) -> SimResult {
        let hold = if hold { Hold::Open } else { Hold::No };
        self.run_key_ms(key, non_idempotent, hold, now.saturating_mul(1000))
    }

    fn run_key_ms(&mut self, key: &[u8], non_idempotent: bool, hold: Hold, start_ms: u64) -> SimResult {
        let mut attempt = Attempt::new(self.plan, self.policy.tries, key);
        let mut hops = Vec::new();
        let mut now_ms = start_ms;
        loop {
            let now = now_ms / 1000;
            let Some(peer) = attempt.pick_at(&mut self.shard, key, now, now_ms) else {
                hops.push(Hop::NoLive);
                return SimResult { hops, status: 502 };
            };
            let addr = peer.addr;
            let end = self.answer(self.backends.mode(addr));
            let (times, done_ms) = self.times(addr, end, now_ms);
            if hold == Hold::No || !matches!(end, TryEnd::Status(_)) {
                self.notify(&mut attempt, self.backends.timing(addr), end, now_ms);
            }
            let cx = TryCx {
                proto: match self.policy.context {
                    Context::Http => Proto::Http,
                    Context::Stream => Proto::Stream,
                },
                tries_left: attempt.tries_left(),
                replayable: true,
                non_idempotent,
                in_time: true,
            };
            let step = next::decide(&self.policy.next_upstream, end, cx);
            let failure = match end {
                TryEnd::Status(code) => Failure::Status(code),
                TryEnd::Failed {
                    cause: FailCause::Timeout,
                    ..
                } => Failure::Timeout,
                TryEnd::Failed { .. } => Failure::Error,
            };
            match step {
                Step::Deliver => {
                    hops.push(Hop::Peer { addr, failure: None });
                    match hold {
                        Hold::No => attempt.report_timed(Outcome::Success, &mut self.shard, now, times, done_ms),
                        Hold::Open | Hold::Until(_) => self.held.push(Held {
                            attempt,
                            start_ms: now_ms,
                            end_ms: match hold {
                                Hold::Until(end) => Some(end),
                                _ => None,
                            },
                        }),
                    }
                    let status = match end {
                        TryEnd::Status(code) => code,
                        TryEnd::Failed { .. } => 502,
                    };
                    return SimResult { hops, status };
                }
                Step::Retry(outcome) => {
                    attempt.report_timed(outcome, &mut self.shard, now, times, done_ms);
                    hops.push(Hop::Peer {
                        addr,
                        failure: Some(failure),
                    });
                    now_ms = done_ms;
                }
                Step::GiveUp(status) => {
                    attempt.report_timed(Outcome::Failed, &mut self.shard, now, times, done_ms);
                    hops.push(Hop::Peer {
                        addr,
                        failure: Some(failure),
                    });
                    return SimResult { hops, status };
                }
            }
        }
    }

    /// Ends every held request as a success at `now` (their `conns` go back).
    pub fn release_held(&mut self, now: u64) {
        let now_ms = now.saturating_mul(1000);
        for held in std::mem::take(&mut self.held) {
            let end_ms = held.end_ms.unwrap_or(now_ms);
            self.end_held(held, end_ms);
        }
    }

    /// Ends, in the order of their answers, the held requests answered at or before `now_ms`.
    fn release_due(&mut self, now_ms: u64) {
        while let Some(i) = self
            .held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.end_ms.is_some_and(|end| end <= now_ms))
            .min_by_key(|(_, h)| h.end_ms)
            .map(|(i, _)| i)
        {
            let held = self.held.remove(i);
            let end_ms = held.end_ms.unwrap_or(now_ms);
            self.end_held(held, end_ms);
        }
    }

    /// Ends a held request as a success at `end_ms`: its answer took the whole time it was held.
    fn end_held(&mut self, held: Held<'p>, end_ms: u64) {
        let Held {
            mut attempt, start_ms, ..
        } = held;
        let took = end_ms.saturating_sub(start_ms);
        let timing = Timing { head: took, body: 0 };
        self.notify(&mut attempt, timing, TryEnd::Status(200), start_ms);
        let times = match (attempt.current(), self.plan.timed()) {
            (Some(_), true) => self.timed(timing, true),
            _ => TryTimes::None,
        };
        attempt.report_timed(Outcome::Success, &mut self.shard, end_ms / 1000, times, end_ms);
    }

    /// What a try on `addr` that ended with `end` measured, and the clock (ms) at its end: for plans that
    /// measure times ([`UpstreamPlan::timed`]), the backend's simulated [`Timing`] (a connect takes no time), with
    /// no header when it failed.
    fn times(&self, addr: SocketAddr, end: TryEnd, now_ms: u64) -> (TryTimes, u64) {
        let timing = self.backends.timing(addr);
        let done_ms = now_ms.saturating_add(timing.last_byte());
        if !self.plan.timed() {
            return (TryTimes::None, done_ms);
        }
        (self.timed(timing, matches!(end, TryEnd::Status(_))), done_ms)
    }

    /// `least_time ... inflight`'s `notify` of the phases a try on a backend answering after `timing` reached
    /// (nginx's `NOTIFY_HEADER` in http; connect and first byte in stream), from `start_ms`.
    fn notify(&self, attempt: &mut Attempt<'p>, timing: Timing, end: TryEnd, start_ms: u64) {
        if !self.plan.timed() {
            return;
        }
        let answered = matches!(end, TryEnd::Status(_));
        match self.policy.context {
            Context::Http if answered => {
                attempt.notify(Phase::Header, timing.head, start_ms.saturating_add(timing.head));
            }
            Context::Http => {}
            Context::Stream => {
                if !matches!(end, TryEnd::Failed { sent: false, .. }) {
                    attempt.notify(Phase::Connect, 0, start_ms);
                }
                if answered {
                    attempt.notify(Phase::FirstByte, timing.head, start_ms.saturating_add(timing.head));
                }
            }
        }
    }

    /// The times of a try answered (`answered`) or not after `timing`.
    fn timed(&self, timing: Timing, answered: bool) -> TryTimes {
        match self.policy.context {
            Context::Http => TryTimes::Http {
                response: timing.last_byte(),
                header: answered.then_some(timing.head),
            },
            Context::Stream => TryTimes::Stream {
                response: timing.last_byte(),
                connect: 0,
                first_byte: answered.then_some(timing.head),
            },
        }
    }

    /// How a backend in `mode` ends an attempt in this context. In stream a connected session is a success,
    /// whatever follows.
    fn answer(&self, mode: BackendMode) -> TryEnd {
        let failed = |cause| TryEnd::Failed { cause, sent: true };
        match (self.policy.context, mode) {
            // A refused connect: nothing of the request reached the peer.
            (_, BackendMode::Dead) => TryEnd::Failed {
                cause: FailCause::Error,
                sent: false,
            },
            (Context::Stream, _) => TryEnd::Status(200),
            (Context::Http, BackendMode::Ok) => TryEnd::Status(200),
            (Context::Http, BackendMode::Reset) => failed(FailCause::Error),
            (Context::Http, BackendMode::Timeout) => failed(FailCause::Timeout),
            (Context::Http, BackendMode::Status(code)) => TryEnd::Status(code),
        }
    }
}

#[cfg(test)]
mod tests;
