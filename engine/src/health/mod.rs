//! Active health checks (nginx Plus `health_check`): one checker thread per checked upstream, outside the shards.
//! The agent checks of [`agent`] run beside them, one thread per upstream with agents.
//!
//! Probes run once per upstream, not once per shard: each upstream with `health_check` lines gets one thread that
//! runs every check of that upstream at its interval, probing the peers of a round in parallel (one short-lived
//! scoped thread per peer) on blocking std sockets with timeouts. Results go to the zone: `UNHEALTHY` after
//! `fails` consecutive failures, cleared after `passes` consecutive passes (with `recovered_at` set, which starts
//! slow start), `CHECKING` from start until the first probe when `mandatory`. Every shard sees the flags at once,
//! and every balancer skips blocked peers. A peer is unhealthy when any check of its upstream says so.
//!
//! After a reload the new checkers start from each kept peer's flags: an unhealthy peer stays out until it passes
//! `passes` probes; under `mandatory` every peer is checking until its first probe, except, with `persistent`, a
//! peer that was healthy before the reload.
//!
//! Probe timeouts: connect within `min(interval, proxy_connect_timeout)`, whole response within
//! `min(interval, proxy_read_timeout)` of the location (the stream server's `proxy_connect_timeout` for TCP).

pub mod agent;
pub mod agent_reply;
pub mod matcher;
pub mod probe;

use crate::balance::UpstreamPlan;
use crate::config::model::{HealthCheck, HealthConf};
use crate::snapshot::Snapshot;
use corelb_shared_state::{PeerFlags, PeerSlot};
use matcher::Matcher;
use probe::{Limits, Verdict};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The running checkers; stopped (and joined) by [`HealthCheckers::stop`] or on drop.
#[derive(Debug, Default)]
pub struct HealthCheckers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// What kind of probe a check runs.
#[derive(Debug)]
enum Probe {
    /// The request bytes, and the `match` block if any.
    Http {
        request: Vec<u8>,
        matcher: Option<Matcher>,
    },
    Tcp,
}

/// One `health_check` line at run time.
#[derive(Debug)]
struct CheckRun {
    probe: Probe,
    interval: Duration,
    jitter: Duration,
    fails: u32,
    passes: u32,
    port: Option<u16>,
    limits: Limits,
    /// Per peer, in the checker's peer order.
    states: Vec<PeerState>,
    next: Instant,
}

/// One check's view of one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PeerState {
    fails_in_row: u32,
    passes_in_row: u32,
    unhealthy: bool,
    /// `mandatory` and no probe done yet.
    checking: bool,
}

impl PeerState {
    /// Counts one probe. A first probe under `mandatory` decides at once (pass: healthy, fail: unhealthy);
    /// otherwise `fails` failures in a row make the peer unhealthy and `passes` passes in a row healthy again.
    fn apply(&mut self, passed: bool, fails: u32, passes: u32) {
        if passed {
            self.passes_in_row = self.passes_in_row.saturating_add(1);
            self.fails_in_row = 0;
        } else {
            self.fails_in_row = self.fails_in_row.saturating_add(1);
            self.passes_in_row = 0;
        }
        if self.checking {
            self.checking = false;
            self.unhealthy = !passed;
        } else if self.unhealthy && self.passes_in_row >= passes {
            self.unhealthy = false;
        } else if !self.unhealthy && self.fails_in_row >= fails {
            self.unhealthy = true;
        }
    }
}

/// One checked upstream: its peers (config-`down` ones left out) and its checks.
#[derive(Debug)]
struct UpstreamChecker {
    peers: Vec<(SocketAddr, Arc<PeerSlot>)>,
    checks: Vec<CheckRun>,
}

impl HealthCheckers {
    /// Marks the peers under `mandatory` checks as `CHECKING` (before this returns, so no request reaches them
    /// first) and starts one thread per checked upstream of `snap`. No thread when nothing is checked.
    pub fn start(snap: Arc<Snapshot>) -> io::Result<HealthCheckers> {
        Self::start_after(snap, None, None)
    }

    /// As [`HealthCheckers::start`] for a reload from `previous`: peers kept from it start from their zone flags
    /// (see the module doc); peers of upstreams no longer checked are healthy again. The agent checkers
    /// ([`agent`]) start here too, applying changed weights with `reweigh`.
    pub fn start_after(
        snap: Arc<Snapshot>,
        previous: Option<&Snapshot>,
        reweigh: Option<&agent::Reweigh>,
    ) -> io::Result<HealthCheckers> {
        let kept = KeptPeers::of(previous);
        let mut checkers = Vec::new();
        if let Some(http) = &snap.config.http {
            checkers.extend(build_checkers(&http.health, &snap.http_plans, true, &kept));
        }
        if let Some(stream) = &snap.config.stream {
            checkers.extend(build_checkers(&stream.health, &snap.stream_plans, false, &kept));
        }
        let mut running = HealthCheckers::default();
        for (name, checker) in checkers {
            let stop = running.stop.clone();
            let handle = thread::Builder::new()
                .name(format!("corelb-health-{name}"))
                .spawn(move || checker.run(&stop))?;
            running.threads.push(handle);
        }
        let mut agents = Vec::new();
        if let Some(http) = &snap.config.http {
            agents.extend(agent::build(&http.upstreams, &snap.http_plans, reweigh));
        }
        if let Some(stream) = &snap.config.stream {
            agents.extend(agent::build(&stream.upstreams, &snap.stream_plans, reweigh));
        }
        for (name, checker) in agents {
            let stop = running.stop.clone();
            let handle = thread::Builder::new()
                .name(format!("corelb-agent-{name}"))
                .spawn(move || checker.run(&stop))?;
            running.threads.push(handle);
        }
        Ok(running)
    }

    /// Number of checker threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether no upstream is checked.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Tells every checker to stop after its current round, without waiting.
    pub fn signal_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.threads {
            t.thread().unpark();
        }
    }

    /// Tells every checker to stop after its current round and lets the threads end on their own (for a swap to
    /// new checkers, which must not wait for a probe in flight).
    pub fn detach(mut self) {
        self.signal_stop();
        self.threads.clear();
    }

    /// Stops every checker and waits for it (a probe in flight ends within its timeouts).
    pub fn stop(&mut self) {
        self.signal_stop();
        let me = thread::current().id();
        // an agent checker's reweigh may end up dropping the process state on its own thread: never join oneself
        for t in self.threads.drain(..).filter(|t| t.thread().id() != me) {
            if t.join().is_err() {
                crate::log_alert!("a health check thread panicked");
            }
        }
    }
}

impl Drop for HealthCheckers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The peer slots of the snapshot before a reload (empty at start-up).
struct KeptPeers(std::collections::HashSet<*const PeerSlot>);

impl KeptPeers {
    fn of(previous: Option<&Snapshot>) -> Self {
        let plans = previous
            .into_iter()
            .flat_map(|s| s.http_plans.iter().chain(&s.stream_plans));
        let peers = plans.flat_map(|p| p.primary.peers.iter().chain(&p.backup.peers));
        KeptPeers(peers.map(|p| Arc::as_ptr(&p.slot)).collect())
    }

    /// The state a check starts a peer in: the slot's health if the peer was kept, "checking" under `mandatory`
    /// unless `persistent` keeps a peer that was healthy before.
    fn initial(&self, slot: &Arc<PeerSlot>, c: &HealthCheck) -> PeerState {
        let kept = self.0.contains(&Arc::as_ptr(slot));
        let flags = slot.flags();
        let unhealthy = kept && flags.intersects(PeerFlags::UNHEALTHY);
        let was_healthy = kept && !flags.intersects(PeerFlags::UNHEALTHY) && !flags.intersects(PeerFlags::CHECKING);
        PeerState {
            unhealthy,
            checking: c.mandatory && !(c.persistent && was_healthy),
            ..PeerState::default()
        }
    }
}

/// The checkers of one block's upstreams (each with its name), `CHECKING` already set where a check starts a peer
/// in it; the peers of unchecked upstreams lose any health flag an earlier config's checks left.
fn build_checkers(
    health: &HealthConf,
    plans: &[UpstreamPlan],
    http: bool,
    kept: &KeptPeers,
) -> Vec<(String, UpstreamChecker)> {
    let mut out = Vec::new();
    for (ui, plan) in plans.iter().enumerate() {
        let lines: Vec<&HealthCheck> = health.checks.iter().filter(|c| c.upstream == ui).collect();
        if lines.is_empty() {
            for p in plan.primary.peers.iter().chain(&plan.backup.peers) {
                p.slot.clear_flags(PeerFlags::UNHEALTHY);
                p.slot.clear_flags(PeerFlags::CHECKING);
            }
            continue;
        }
        let peers: Vec<(SocketAddr, Arc<PeerSlot>)> = plan
            .primary
            .peers
            .iter()
            .chain(&plan.backup.peers)
            .filter(|p| !p.down)
            .map(|p| (p.addr, p.slot.clone()))
            .collect();
        let now = Instant::now();
        let checks: Vec<CheckRun> = lines
            .into_iter()
            .map(|c| check_run(c, health, http, &peers, kept, now))
            .collect();
        for (pi, (_, slot)) in peers.iter().enumerate() {
            if checks.iter().any(|c| c.states.get(pi).is_some_and(|s| s.checking)) {
                slot.set_flags(PeerFlags::CHECKING);
            }
        }
        out.push((plan.name.clone(), UpstreamChecker { peers, checks }));
    }
    out
}

/// The run-time form of one `health_check` line over `peers`, due at `now`.
fn check_run(
    c: &HealthCheck,
    health: &HealthConf,
    http: bool,
    peers: &[(SocketAddr, Arc<PeerSlot>)],
    kept: &KeptPeers,
    now: Instant,
) -> CheckRun {
    let probe = if http {
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: corelb-health-check\r\nConnection: close\r\n\r\n",
            c.uri, c.host
        );
        // The patterns compiled at config load, so a failure here cannot happen; such a match would fail probes.
        let matcher = c
            .matcher
            .and_then(|i| health.matches.get(i))
            .map(|m| Matcher::compile(m).unwrap_or_else(|_| Matcher::never()));
        Probe::Http {
            request: request.into_bytes(),
            matcher,
        }
    } else {
        Probe::Tcp
    };
    CheckRun {
        probe,
        interval: c.interval,
        jitter: c.jitter,
        fails: c.fails,
        passes: c.passes,
        port: c.port,
        limits: Limits {
            connect: c.interval.min(c.connect_timeout),
            read: c.interval.min(c.read_timeout),
        },
        states: peers.iter().map(|(_, slot)| kept.initial(slot, c)).collect(),
        next: now,
    }
}

impl UpstreamChecker {
    /// Runs the checks as they fall due until `stop`.
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            for ci in 0..self.checks.len() {
                if self.checks.get(ci).is_some_and(|c| c.next <= now) {
                    self.round(ci, stop);
                }
            }
            let Some(next) = self.checks.iter().map(|c| c.next).min() else {
                return;
            };
            thread::park_timeout(next.saturating_duration_since(Instant::now()));
        }
    }

    /// One round of check `ci`: every peer probed (in parallel), the results counted and published (unless the
    /// checker was stopped meanwhile: a reload's new checker owns the flags now).
    fn round(&mut self, ci: usize, stop: &AtomicBool) {
        let Some(check) = self.checks.get(ci) else { return };
        let verdicts: Vec<Verdict> = thread::scope(|s| {
            let probes: Vec<_> = self
                .peers
                .iter()
                .map(|(addr, _)| {
                    let mut addr = *addr;
                    if let Some(port) = check.port {
                        addr.set_port(port);
                    }
                    // Without a thread to spare, the probe runs here, in turn.
                    thread::Builder::new()
                        .spawn_scoped(s, move || check.probe_once(addr))
                        .map_err(|_| check.probe_once(addr))
                })
                .collect();
            probes
                .into_iter()
                .map(|p| match p {
                    Ok(h) => h.join().unwrap_or(Verdict::FAILED),
                    Err(v) => v,
                })
                .collect()
        });
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // The data plane's clock (`now` of the balancers), for `recovered_at`.
        let now = crate::clock::now_secs();
        if let Some(check) = self.checks.get_mut(ci) {
            for ((_, slot), (state, v)) in self.peers.iter().zip(check.states.iter_mut().zip(&verdicts)) {
                slot.record_check(v.passed, v.status);
                state.apply(v.passed, check.fails, check.passes);
            }
            check.next = Instant::now() + check.interval + check.random_jitter();
        }
        for (pi, (_, slot)) in self.peers.iter().enumerate() {
            let states = self.checks.iter().filter_map(|c| c.states.get(pi));
            let (unhealthy, checking) = states.fold((false, false), |(u, c), s| (u || s.unhealthy, c || s.checking));
            publish(slot, unhealthy, checking, now);
        }
    }
}

impl CheckRun {
    /// A random delay in `[0, jitter]`.
    fn random_jitter(&self) -> Duration {
        if self.jitter.is_zero() {
            return Duration::ZERO;
        }
        self.jitter.mul_f64(rand::random::<f64>())
    }

    fn probe_once(&self, addr: SocketAddr) -> Verdict {
        match &self.probe {
            Probe::Http { request, matcher } => probe::http(addr, request, self.limits, matcher.as_ref()),
            Probe::Tcp => probe::tcp(addr, self.limits),
        }
    }
}

/// Writes a peer's state to its zone slot: `UNHEALTHY` is set before `CHECKING` is cleared (no window where a
/// failed first probe lets traffic through); clearing `UNHEALTHY` resets the passive failure count and records the
/// recovery at `now` for slow start.
fn publish(slot: &PeerSlot, unhealthy: bool, checking: bool, now: u64) {
    let was_unhealthy = slot.flags().intersects(PeerFlags::UNHEALTHY);
    if unhealthy {
        slot.set_flags(PeerFlags::UNHEALTHY);
    }
    if checking {
        slot.set_flags(PeerFlags::CHECKING);
    } else {
        slot.clear_flags(PeerFlags::CHECKING);
    }
    if !unhealthy && was_unhealthy {
        slot.reset_fails();
        slot.mark_recovered(now);
        slot.clear_flags(PeerFlags::UNHEALTHY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_and_passes_in_a_row_flip_the_state() {
        let mut s = PeerState::default();
        // fails=2, passes=3
        s.apply(false, 2, 3);
        assert!(!s.unhealthy);
        s.apply(true, 2, 3);
        s.apply(false, 2, 3);
        assert!(!s.unhealthy, "failures must be consecutive");
        s.apply(false, 2, 3);
        assert!(s.unhealthy);
        s.apply(true, 2, 3);
        s.apply(true, 2, 3);
        assert!(s.unhealthy);
        s.apply(true, 2, 3);
        assert!(!s.unhealthy);
    }

    #[test]
    fn mandatory_decides_on_the_first_probe() {
        let mut pass = PeerState {
            checking: true,
            ..PeerState::default()
        };
        pass.apply(true, 1, 5);
        assert!(!pass.checking && !pass.unhealthy);
        let mut fail = PeerState {
            checking: true,
            ..PeerState::default()
        };
        fail.apply(false, 3, 1);
        assert!(!fail.checking && fail.unhealthy);
    }

    #[test]
    fn publish_sets_flags_and_marks_the_recovery() {
        let slot = PeerSlot::new();
        slot.set_flags(PeerFlags::CHECKING);
        publish(&slot, true, false, 100);
        assert!(slot.flags().intersects(PeerFlags::UNHEALTHY));
        assert!(!slot.flags().intersects(PeerFlags::CHECKING));
        slot.record_failure(100);
        publish(&slot, true, false, 105);
        assert_eq!(slot.recovered_at(), 0);
        publish(&slot, false, false, 110);
        assert!(!slot.is_blocked());
        assert_eq!((slot.recovered_at(), slot.fails()), (110, 0));
        // healthy staying healthy is no recovery
        publish(&slot, false, false, 120);
        assert_eq!(slot.recovered_at(), 110);
    }
}
