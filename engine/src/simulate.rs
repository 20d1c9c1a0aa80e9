//! The request simulator: runs requests through a plan, a shard state and attempts as nginx (docs/algorithms.md §12),
//! against backends that answer by mode, with a clock passed in. `corelb pick` and the golden tests use it.

pub mod trace;
pub mod vars;

pub use trace::{parse_trace, BackendMode, Backends, TraceError, TraceLine};
pub use vars::Request;

use crate::balance::least_time::TryTimes;
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

/// Runs requests one at a time through one shard's view of an upstream.
#[derive(Debug)]
pub struct Simulator<'p> {
    plan: &'p UpstreamPlan,
    shard: ShardState,
    policy: RetryPolicy,
    backends: Backends,
    /// The key bytes of the request being run (a reused buffer).
    key: Vec<u8>,
    /// Held requests' attempts: their `conns` stay taken until [`Simulator::release_held`].
    held: Vec<Attempt<'p>>,
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
        if self.policy.context == Context::Http && req.normalized_path().is_err() {
            // nginx answers 400 before any upstream: a path above the root or a bad escape.
            return SimResult {
                hops: Vec::new(),
                status: 400,
            };
        }
        let mut key = std::mem::take(&mut self.key);
        self.plan.key.eval_into(req, req.remote, &mut key);
        let out = self.run_with_key(&key, req.non_idempotent(), hold, now);
        self.key = key;
        out
    }

    /// Runs one request whose key bytes are given directly (`non_idempotent`: a POST, LOCK or PATCH).
    pub fn run_with_key(&mut self, key: &[u8], non_idempotent: bool, hold: bool, now: u64) -> SimResult {
        let mut attempt = Attempt::new(self.plan, self.policy.tries, key);
        let mut hops = Vec::new();
        loop {
            let now_ms = now.saturating_mul(1000);
            let Some(peer) = attempt.pick_at(&mut self.shard, key, now, now_ms) else {
                hops.push(Hop::NoLive);
                return SimResult { hops, status: 502 };
            };
            let addr = peer.addr;
            let end = self.answer(self.backends.mode(addr));
            let (times, done_ms) = self.times(addr, end, now_ms);
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
                    if hold {
                        self.held.push(attempt);
                    } else {
                        attempt.report_timed(Outcome::Success, &mut self.shard, now, times, done_ms);
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
        for mut attempt in std::mem::take(&mut self.held) {
            let times = match attempt.current() {
                Some(peer) => self.times(peer.addr, TryEnd::Status(200), now_ms).0,
                None => TryTimes::None,
            };
            attempt.report_timed(Outcome::Success, &mut self.shard, now, times, now_ms);
        }
    }

    /// What a try on `addr` that ended with `end` measured, and the clock (ms) at its end, for plans that
    /// measure times ([`UpstreamPlan::timed`]): the backend's simulated latency as every phase's time, with no
    /// header when it failed.
    fn times(&self, addr: SocketAddr, end: TryEnd, now_ms: u64) -> (TryTimes, u64) {
        if !self.plan.timed() {
            return (TryTimes::None, now_ms);
        }
        let ms = self.backends.latency(addr);
        let answered = matches!(end, TryEnd::Status(_));
        let times = match self.policy.context {
            Context::Http => TryTimes::Http {
                response: ms,
                header: answered.then_some(ms),
            },
            Context::Stream => TryTimes::Stream {
                response: ms,
                connect: ms,
                first_byte: answered.then_some(ms),
            },
        };
        (times, now_ms.saturating_add(ms))
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
