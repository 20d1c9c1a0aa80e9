//! The agent check (HAProxy's agent-check protocol, corelb's `agent_port=`) and the load reports of
//! `endpoint_load_metrics`, on the health-check threads: one thread per upstream that has either.
//!
//! Every `agent_inter` each agent peer is asked once: a TCP connect to the server's address at `agent_port`,
//! `agent_send` sent, one line read (at most [`LINE_LIMIT`] bytes, within `agent_inter`) and parsed by
//! [`AgentReply`]. What it says goes to the peer's zone slot: `drain`/`maint`/`ready` and `down`/`up` as flags every
//! shard sees at once (only the agent clears its own), a weight (`N%`, `weight:N`, or the load report's under the
//! upstream's `load_weight`) and `maxconn:N` as the slot's agent record. An unreachable agent, a timeout or an
//! empty answer changes nothing. Under `endpoint_load_metrics`, every interval the last report the shards stored
//! from responses becomes the peer's weight the same way.
//!
//! A weight or `maxconn` that changed is applied through the control plane's `reweigh` (a new generation of the
//! same config; the plan build reads the slot's record), never by a reload; flags need no new generation.

use super::agent_reply::{AdminState, AgentReply, OperState};
use crate::balance::UpstreamPlan;
use crate::config::agent::LoadFormula;
use crate::config::model::UpstreamConf;
use corelb_shared_state::{AgentWeight, PeerFlags, PeerSlot};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The longest reply line read.
pub const LINE_LIMIT: usize = 1024;

/// Makes the running snapshot take the agents' weights (the control plane's, given by the state layer).
#[derive(Clone)]
pub struct Reweigh(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Reweigh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reweigh")
    }
}

/// One peer's agent.
struct AgentPeer {
    /// The server's address at `agent_port`.
    addr: SocketAddr,
    slot: Arc<PeerSlot>,
    inter: Duration,
    send: Vec<u8>,
    next: Instant,
}

/// The load reports of one upstream's peers.
struct Reports {
    interval: Duration,
    slots: Vec<Arc<PeerSlot>>,
    next: Instant,
}

/// The agents and load reports of one upstream.
pub(super) struct AgentChecker {
    peers: Vec<AgentPeer>,
    reports: Option<Reports>,
    formula: LoadFormula,
    reweigh: Option<Reweigh>,
}

/// The checkers of `plans` (built from `confs`, in the same order) that have an agent or load reports, each with
/// its upstream's name.
pub(super) fn build(
    confs: &[UpstreamConf],
    plans: &[UpstreamPlan],
    reweigh: Option<&Reweigh>,
) -> Vec<(String, AgentChecker)> {
    let now = Instant::now();
    let mut out = Vec::new();
    for (conf, plan) in confs.iter().zip(plans) {
        if conf.load_metrics.is_none() && conf.servers.iter().all(|l| l.agent.is_none()) {
            continue;
        }
        // the plan's peers in line order, as `UpstreamPlan::build_with` made them
        let (mut primary, mut backup) = (plan.primary.peers.iter(), plan.backup.peers.iter());
        let mut peers = Vec::new();
        let mut slots = Vec::new();
        for line in &conf.servers {
            for _ in &line.addrs {
                let peer = if line.backup { backup.next() } else { primary.next() };
                let Some(peer) = peer else { continue };
                slots.push(peer.slot.clone());
                if let Some(agent) = &line.agent {
                    let mut addr = peer.addr;
                    addr.set_port(agent.port);
                    peers.push(AgentPeer {
                        addr,
                        slot: peer.slot.clone(),
                        inter: agent.inter,
                        send: agent.send.clone().unwrap_or_default().into_bytes(),
                        next: now,
                    });
                }
            }
        }
        let reports = conf.load_metrics.map(|m| Reports {
            interval: m.interval,
            slots,
            next: now + m.interval,
        });
        let checker = AgentChecker {
            peers,
            reports,
            formula: conf.load_weight,
            reweigh: reweigh.cloned(),
        };
        out.push((plan.name.clone(), checker));
    }
    out
}

impl AgentChecker {
    /// Asks the agents and reads the reports as they fall due until `stop`.
    pub(super) fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let mut changed = self.ask_due();
            if let Some(r) = self.reports.as_mut().filter(|r| r.next <= Instant::now()) {
                for slot in &r.slots {
                    let report = slot.agent().last_report();
                    if report.cpu.is_some() || report.mem.is_some() {
                        let w = self
                            .formula
                            .weight(report.cpu.unwrap_or(0.0), report.mem.unwrap_or(0.0));
                        changed |= slot.agent().set_weight(Some(AgentWeight::Absolute(w)));
                    }
                }
                r.next = Instant::now() + r.interval;
            }
            // a stopped checker's peers may be another config's now: the new checker owns the weights
            if changed && !stop.load(Ordering::Relaxed) {
                if let Some(reweigh) = &self.reweigh {
                    (reweigh.0)();
                }
            }
            let next = self
                .peers
                .iter()
                .map(|p| p.next)
                .chain(self.reports.as_ref().map(|r| r.next))
                .min();
            let Some(next) = next else { return };
            thread::park_timeout(next.saturating_duration_since(Instant::now()));
        }
    }

    /// Asks every due agent (in parallel) and applies the answers; says whether a weight or `maxconn` changed.
    fn ask_due(&mut self) -> bool {
        let now = Instant::now();
        let due: Vec<&mut AgentPeer> = self.peers.iter_mut().filter(|p| p.next <= now).collect();
        if due.is_empty() {
            return false;
        }
        let replies: Vec<Option<String>> = thread::scope(|s| {
            let asks: Vec<_> = due
                .iter()
                .map(|p| {
                    let (addr, send, limit) = (p.addr, p.send.as_slice(), p.inter);
                    thread::Builder::new()
                        .spawn_scoped(s, move || ask(addr, send, limit))
                        .map_err(|_| ask(addr, send, limit))
                })
                .collect();
            asks.into_iter()
                .map(|a| match a {
                    Ok(h) => h.join().unwrap_or(None),
                    Err(r) => r,
                })
                .collect()
        });
        let mut changed = false;
        let done = Instant::now();
        for (peer, reply) in due.into_iter().zip(replies) {
            if let Some(line) = reply {
                changed |= apply(&peer.slot, &AgentReply::parse(&line), &self.formula);
            }
            peer.next = done + peer.inter;
        }
        changed
    }
}

/// One question to the agent at `addr`: connect, send `send`, read one line, all within `limit`. `None` for no
/// answer (refused, timed out, closed without a word).
pub fn ask(addr: SocketAddr, send: &[u8], limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    let mut stream = TcpStream::connect_timeout(&addr, limit).ok()?;
    if !send.is_empty() {
        stream.set_write_timeout(Some(limit)).ok()?;
        stream.write_all(send).ok()?;
    }
    let mut line = Vec::with_capacity(128);
    let mut chunk = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
        if line.contains(&b'\n') || line.len() >= LINE_LIMIT {
            break;
        }
    }
    line.truncate(LINE_LIMIT);
    if let Some(end) = line.iter().position(|&b| b == b'\n') {
        line.truncate(end);
    }
    let text = String::from_utf8_lossy(&line).into_owned();
    (!text.trim().is_empty()).then_some(text)
}

/// Puts what `reply` says into `slot`; says whether the weight or `maxconn` changed (the flags take effect at once).
pub fn apply(slot: &PeerSlot, reply: &AgentReply, formula: &LoadFormula) -> bool {
    match reply.admin {
        Some(AdminState::Ready) => {
            slot.clear_flags(PeerFlags::AGENT_DRAIN);
            slot.clear_flags(PeerFlags::AGENT_MAINT);
        }
        Some(AdminState::Drain) => {
            slot.set_flags(PeerFlags::AGENT_DRAIN);
            slot.clear_flags(PeerFlags::AGENT_MAINT);
        }
        Some(AdminState::Maint) => {
            slot.set_flags(PeerFlags::AGENT_MAINT);
            slot.clear_flags(PeerFlags::AGENT_DRAIN);
        }
        None => {}
    }
    match reply.oper {
        Some(OperState::Up) => slot.clear_flags(PeerFlags::AGENT_DOWN),
        Some(OperState::Down) => slot.set_flags(PeerFlags::AGENT_DOWN),
        None => {}
    }
    let mut changed = false;
    if let Some(w) = reply.agent_weight(formula) {
        changed |= slot.agent().set_weight(Some(w));
    }
    if let Some(m) = reply.maxconn {
        changed |= slot.agent().set_maxconn(Some(m));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-connection agent that reads what comes within 100 ms and answers `answer` (holds the connection
    /// silent for 600 ms when it is empty).
    fn agent_once(answer: &'static [u8]) -> (SocketAddr, thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let h = thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return Vec::new() };
            let mut got = vec![0u8; 64];
            s.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
            let n = s.read(&mut got).unwrap_or(0);
            got.truncate(n);
            if answer.is_empty() {
                thread::sleep(Duration::from_millis(600));
            } else {
                let _ = s.write_all(answer);
            }
            got
        });
        (addr, h)
    }

    #[test]
    fn ask_reads_one_line_and_sends_agent_send() {
        let limit = Duration::from_millis(400);
        let (addr, h) = agent_once(b"75% drain\nignored\n");
        assert_eq!(ask(addr, b"hello\n", limit).as_deref(), Some("75% drain"));
        assert_eq!(h.join().unwrap(), b"hello\n");
        // closed without a newline: what came is the line
        let (addr, h) = agent_once(b"up");
        assert_eq!(ask(addr, b"", limit).as_deref(), Some("up"));
        h.join().unwrap();
        // a silent agent times out: no answer
        let (addr, h) = agent_once(b"");
        let t = Instant::now();
        assert_eq!(ask(addr, b"", limit), None);
        assert!(t.elapsed() < Duration::from_millis(590), "{:?}", t.elapsed());
        h.join().unwrap();
        // a long line is cut at the limit
        let long: &'static [u8] = Box::leak(vec![b'x'; 3000].into_boxed_slice());
        let (addr, h) = agent_once(long);
        assert_eq!(ask(addr, b"", limit).map(|l| l.len()), Some(LINE_LIMIT));
        h.join().unwrap();
        // refused
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert_eq!(ask(closed, b"", limit), None);
    }

    #[test]
    fn replies_set_the_slot_and_only_the_agent_undoes_its_own_state() {
        let slot = PeerSlot::new();
        let f = LoadFormula::default();
        let say = |line: &str| apply(&slot, &AgentReply::parse(line), &f);
        assert!(say("50% maxconn:3"));
        assert_eq!(slot.agent().weight(), Some(AgentWeight::Percent(50)));
        assert_eq!(slot.agent().maxconn(), Some(3));
        assert!(!say("50%"), "the same weight is no change");
        assert!(!say("down"));
        assert!(slot.is_blocked() && slot.flags().intersects(PeerFlags::AGENT_DOWN));
        assert!(!say("ready"), "ready is the admin state, not up");
        assert!(slot.is_blocked());
        say("up");
        assert!(!slot.is_blocked());
        say("maint");
        assert!(slot.flags().intersects(PeerFlags::AGENT_MAINT));
        say("drain");
        assert!(slot.flags().intersects(PeerFlags::AGENT_DRAIN) && !slot.flags().intersects(PeerFlags::AGENT_MAINT));
        say("ready");
        assert!(!slot.is_blocked());
        assert!(say("cpu=0.9 mem=0.5"));
        assert_eq!(slot.agent().weight(), Some(AgentWeight::Absolute(11)));
        assert!(!say("hello"), "nothing said, nothing changed");
        assert_eq!(slot.agent().weight(), Some(AgentWeight::Absolute(11)));
    }
}
