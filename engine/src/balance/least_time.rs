//! `least_time`: the lowest estimated time to finish per weight, ties by SWRR, as nginx 1.31 does it.
//!
//! A peer's estimate (nginx's `ngx_http_upstream_least_time_eta`) starts from the zone's moving average of the
//! configured time (`header`/`last_byte` in http, `connect`/`first_byte`/`last_byte` in stream), halved once per
//! `fail_timeout + 1` seconds past `fail_timeout` since the peer was last `checked` (so slow peers get a chance
//! again), raised to the average in-flight time while requests are in flight (`inflight`), capped at 5000 ms (where
//! every slow peer is equally bad and the pick is least_conn's) or else rounded up to the next 20 ms step (so close
//! times round-robin), and multiplied by `1 + conns`. The averages are written where an attempt ends
//! ([`LeastTimeConf::on_free`], nginx's `free`) and, with `inflight`, when the measured phase is reached
//! ([`LeastTimeConf::notify`], nginx's `notify`).

use super::{round_robin, swrr, Balancer, Choice, ListKind, Outcome, Peer, PickCx};
use crate::config::model::LeastTimeMode;
use corelb_shared_state::{PeerTimes, TimeMetric};

/// Above this average (ms) peers are equally bad.
pub const MAX_RT_MS: u64 = 5000;
/// The width of the clusters times are rounded up to (ms).
pub const CLUSTER_MS: u64 = 20;

/// What an upstream's `least_time` directive says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeastTimeConf {
    /// The time averaged and compared.
    pub mode: LeastTimeMode,
    /// `inflight`: requests still in flight count with their age.
    pub inflight: bool,
}

/// The averages an upstream's method records: `least_time MODE [inflight]`'s own, or `random two least_time=MODE`'s
/// (as `least_time MODE` without `inflight`); `None` for every other method.
pub fn timing_of(method: &crate::config::model::Method) -> Option<LeastTimeConf> {
    use crate::config::model::{Method, RandomTwo};
    match *method {
        Method::LeastTime { mode, inflight } => Some(LeastTimeConf { mode, inflight }),
        Method::Random {
            two: Some(RandomTwo::LeastTime(mode)),
        } => Some(LeastTimeConf { mode, inflight: false }),
        _ => None,
    }
}

/// What one try measured, in milliseconds from the start of its connect (nginx's `u->state` times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryTimes {
    /// Nothing was measured (the upstream is not `least_time`, or the simulator).
    None,
    /// An http try.
    Http {
        /// To the end of the try (nginx's `response_time`).
        response: u64,
        /// To the response header; `None`: no header was read.
        header: Option<u64>,
    },
    /// A stream session.
    Stream {
        /// To the end of the session.
        response: u64,
        /// To the connection.
        connect: u64,
        /// To the first upstream byte; `None`: none came.
        first_byte: Option<u64>,
    },
}

/// A phase of a try that `notify` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The http response header was read.
    Header,
    /// The stream connection is up.
    Connect,
    /// The first byte came from the stream upstream.
    FirstByte,
}

impl LeastTimeConf {
    /// The average the mode compares.
    pub fn metric(self) -> TimeMetric {
        match self.mode {
            LeastTimeMode::Header => TimeMetric::Header,
            LeastTimeMode::LastByte => TimeMetric::Response,
            LeastTimeMode::Connect => TimeMetric::Connect,
            LeastTimeMode::FirstByte => TimeMetric::FirstByte,
        }
    }

    /// The phase whose `notify` records the mode's average (with `inflight`), if the mode has one.
    fn phase(self) -> Option<Phase> {
        match self.mode {
            LeastTimeMode::Header => Some(Phase::Header),
            LeastTimeMode::Connect => Some(Phase::Connect),
            LeastTimeMode::FirstByte => Some(Phase::FirstByte),
            LeastTimeMode::LastByte => None,
        }
    }

    /// nginx's eta of `peer` at `now` (seconds), in ms × requests.
    pub fn eta(self, peer: &Peer, now: u64) -> u64 {
        let times = peer.slot.times();
        let mut rt = times.avg(self.metric());
        let since = now.saturating_sub(peer.slot.checked());
        if since > peer.fail_timeout {
            // nginx shifts by the count itself; a count of 64 or more (a peer unpicked for 64 windows) is 0 here,
            // where x86 would mask the count in nginx.
            let halvings = since / peer.fail_timeout.saturating_add(1);
            rt = u32::try_from(halvings)
                .ok()
                .and_then(|h| rt.checked_shr(h))
                .unwrap_or(0);
        }
        if times.inflight_reqs() > 0 {
            rt = rt.max(times.inflight_time());
        }
        if rt > MAX_RT_MS {
            rt = MAX_RT_MS;
        } else {
            rt += CLUSTER_MS - rt % CLUSTER_MS;
        }
        rt.saturating_mul(1 + u64::from(peer.slot.conns()))
    }

    /// A peer was chosen for a try (nginx's end of `get`): with `inflight`, one more request is in flight on it.
    /// Returns whether the attempt now holds an in-flight unit.
    pub fn on_pick(self, times: &PeerTimes, now_ms: u64) -> bool {
        if self.inflight {
            times.inflight_start(now_ms);
        }
        self.inflight
    }

    /// nginx's `notify` (set only with `inflight`): when the try reaches the mode's phase after `ms`, the average is
    /// recorded now and the in-flight unit given back. Returns whether it did (the unit is then gone).
    pub fn notify(self, times: &PeerTimes, phase: Phase, ms: u64, now_ms: u64, holding: bool) -> bool {
        if !self.inflight || self.phase() != Some(phase) {
            return false;
        }
        times.record(self.metric(), ms);
        if holding {
            times.inflight_done(now_ms, ms);
        }
        true
    }

    /// nginx's `free`: gives back the in-flight unit (with the try's whole time), then, for a successful try only,
    /// records the averages; the mode's own one is skipped when `notify` already recorded it.
    pub fn on_free(self, times: &PeerTimes, outcome: Outcome, measured: TryTimes, now_ms: u64, cx: FreeCx) {
        let response = match measured {
            TryTimes::None => 0,
            TryTimes::Http { response, .. } | TryTimes::Stream { response, .. } => response,
        };
        if cx.holding {
            times.inflight_done(now_ms, response);
        }
        if outcome != Outcome::Success {
            return;
        }
        let skip = |m: TimeMetric| cx.notified && m == self.metric();
        match measured {
            TryTimes::None => {}
            TryTimes::Http { header: None, .. } => {}
            TryTimes::Http {
                response,
                header: Some(header),
            } => {
                times.record(TimeMetric::Response, response);
                // nginx skips the header average whenever `inflight` is on with `header` (notify took it)
                if !(self.inflight && self.mode == LeastTimeMode::Header) {
                    times.record(TimeMetric::Header, header);
                }
            }
            TryTimes::Stream {
                response,
                connect,
                first_byte,
            } => {
                times.record(TimeMetric::Response, response);
                if !(self.inflight && self.mode == LeastTimeMode::Connect) {
                    times.record(TimeMetric::Connect, connect);
                }
                if let Some(fb) = first_byte.filter(|_| !skip(TimeMetric::FirstByte)) {
                    times.record(TimeMetric::FirstByte, fb);
                }
            }
        }
    }
}

/// What an attempt knows of its least_time accounting when the try ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct FreeCx {
    /// The try still holds an in-flight unit.
    pub holding: bool,
    /// `notify` recorded the mode's average already.
    pub notified: bool,
}

/// `least_time`.
#[derive(Debug, Clone, Copy)]
pub struct LeastTime(pub LeastTimeConf);

impl Balancer for LeastTime {
    /// nginx's `ngx_http_upstream_get_least_time_peer`: among untried, usable peers of the current list (each
    /// scanned peer with requests in flight first adds a sample of their age to its `inflight_time`), the lowest
    /// `eta / weight` by cross-multiplication with the configured weight, the earliest on a tie; several tied run
    /// an SWRR pass among them from the first tied one. Nothing usable moves the request to the backup list once.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let kind = cx.attempt.list;
        if kind == ListKind::Primary && cx.plan.single {
            return round_robin::choose(cx);
        }
        let lt = self.0;
        let list = cx.plan.list(kind);
        // (index, eta, weight) of the best peer so far
        let mut best: Option<(usize, u128, u128)> = None;
        let mut many = false;
        for i in 0..list.peers.len() {
            let Some(peer) = list.candidate(i, &cx.attempt.tried, cx.now) else {
                continue;
            };
            peer.slot.times().sample_inflight(cx.now_ms);
            let (eta, weight) = (u128::from(lt.eta(peer, cx.now)), u128::from(peer.weight));
            match best {
                Some((_, be, bw)) if eta * bw > be * weight => {}
                Some((_, be, bw)) if eta * bw == be * weight => many = true,
                _ => {
                    best = Some((i, eta, weight));
                    many = false;
                }
            }
        }
        let Some((first, be, bw)) = best else {
            return round_robin::on_backup(cx, |cx| self.choose(cx));
        };
        if !many {
            return Some(Choice {
                list: kind,
                index: first,
            });
        }
        let now = cx.now;
        let tied = (first..list.len()).filter(|&i| {
            list.peers
                .get(i)
                .is_some_and(|p| u128::from(lt.eta(p, now)) * bw == be * u128::from(p.weight))
        });
        let index = swrr::pass(list, cx.shard.weights(kind), &cx.attempt.tried, now, tied).unwrap_or(first);
        Some(Choice { list: kind, index })
    }

    fn name(&self) -> &'static str {
        "least_time"
    }
}

#[cfg(test)]
mod tests;
