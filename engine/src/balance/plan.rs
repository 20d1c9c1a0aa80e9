//! The plan: an upstream's peers as plain data bound to their zone slots, and its balancer, built at config load.

use super::attempt::Tried;
use super::Balancer;
use crate::config::key::{KeyTemplate, VarSource};
use crate::config::model::{ServerLine, UpstreamConf};
use corelb_shared_state::{PeerFlags, PeerKey, PeerSlot, Zone};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Which of an upstream's two lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// The servers without `backup`.
    Primary,
    /// The `backup` servers, tried when no primary peer is usable.
    Backup,
}

/// One peer: one resolved address of one `server` line.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The `server` line's argument as written (consistent hashing keys on it).
    pub server: Arc<str>,
    /// The address connected to.
    pub addr: SocketAddr,
    /// `weight=` (default 1).
    pub weight: u32,
    /// `max_fails=` (default 1; 0 = failures never take the peer out).
    pub max_fails: u32,
    /// Seconds.
    pub fail_timeout: u64,
    /// 0 = unlimited.
    pub max_conns: u32,
    /// `slow_start` in whole seconds; 0 = off.
    pub slow_start: u64,
    /// `down` in the config.
    pub down: bool,
    /// Where `weight` came from (the API and metrics show it).
    pub weight_source: WeightSource,
    /// The shared state in the zone.
    pub slot: Arc<PeerSlot>,
}

/// Who set a peer's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightSource {
    /// The `server` line's `weight=`.
    #[default]
    Config,
    /// A `PATCH` or `POST` of the API.
    Api,
    /// The peer's agent (`agent_port=`) or its load reports (`endpoint_load_metrics`).
    Agent,
}

impl WeightSource {
    /// `config`, `api`, `agent`.
    pub fn name(self) -> &'static str {
        match self {
            WeightSource::Config => "config",
            WeightSource::Api => "api",
            WeightSource::Agent => "agent",
        }
    }
}

/// A peer's weight and `max_conns` after what its agent set in `slot` (the agent's weight over the line's; a weight
/// of 0 drains the peer, keeping weight 1 for the methods that need one), and the weight's source.
///
/// A peer no agent or load report may set (no `agent_port=`, no `endpoint_load_metrics`, say after a reload took
/// them away) has its agent record cleared here.
fn effective(line: &crate::config::model::ServerLine, slot: &PeerSlot, agent_on: bool) -> (u32, u32, WeightSource) {
    let agent = slot.agent();
    if !agent_on {
        agent.set_weight(None);
        agent.set_maxconn(None);
        slot.clear_flags(PeerFlags::AGENT_DOWN);
        slot.clear_flags(PeerFlags::AGENT_MAINT);
        slot.clear_flags(PeerFlags::AGENT_DRAIN);
    }
    let max_conns = agent.maxconn().unwrap_or(line.max_conns);
    let configured = line.weight.max(1);
    let source = if line.weight_by_api {
        WeightSource::Api
    } else {
        WeightSource::Config
    };
    match agent.weight() {
        None => {
            slot.clear_flags(PeerFlags::AGENT_ZERO);
            (configured, max_conns, source)
        }
        Some(w) => {
            let weight = crate::config::agent::resolve(w, configured);
            if weight == 0 {
                slot.set_flags(PeerFlags::AGENT_ZERO);
            } else {
                slot.clear_flags(PeerFlags::AGENT_ZERO);
            }
            (weight.max(1), max_conns, WeightSource::Agent)
        }
    }
}

impl Peer {
    /// nginx's eligibility test: not down (config or run time), not failed within its window, not at `max_conns`.
    /// The caller also skips tried peers.
    #[inline]
    pub fn usable(&self, now: u64) -> bool {
        !self.down
            && !self.slot.is_blocked()
            && !self.slot.is_failed(now, self.max_fails, self.fail_timeout)
            && self.slot.has_room(self.max_conns)
    }

    /// The weight SWRR may use for this peer at `now`: during its slow start (the `slow_start` seconds after the
    /// zone's `recovered_at`) `max(1, weight × elapsed / slow_start)`, otherwise `weight`. One atomic load, and
    /// only for peers with `slow_start`.
    #[inline]
    pub fn ramp_weight(&self, now: u64) -> i64 {
        let weight = i64::from(self.weight);
        if self.slow_start == 0 {
            return weight;
        }
        let since = self.slot.recovered_at();
        let elapsed = now.saturating_sub(since);
        if since == 0 || elapsed >= self.slow_start {
            return weight;
        }
        // elapsed < slow_start, so the quotient is below `weight` and fits.
        let ramped = u128::from(self.weight) * u128::from(elapsed) / u128::from(self.slow_start);
        i64::try_from(ramped).unwrap_or(weight).clamp(1, weight)
    }
}

/// A list of peers (primary or backup) with nginx's per-list totals.
#[derive(Debug, Clone, Default)]
pub struct PeerList {
    /// The peers in config order.
    pub peers: Vec<Peer>,
    /// Σ weight over all peers, down ones included (the hash walks depend on it).
    pub total_weight: u64,
    /// Number of peers not marked `down`.
    pub tries: usize,
}

impl PeerList {
    /// The peer at `i` if this request may try it: not tried yet, and [`Peer::usable`] at `now`. The one
    /// eligibility test every method runs on a candidate.
    #[inline]
    pub fn candidate(&self, i: usize, tried: &Tried, now: u64) -> Option<&Peer> {
        if tried.contains(i) {
            return None;
        }
        self.peers.get(i).filter(|p| p.usable(now))
    }

    /// A list with its totals computed.
    pub fn new(peers: Vec<Peer>) -> Self {
        let total_weight = peers.iter().map(|p| u64::from(p.weight)).sum();
        let tries = peers.iter().filter(|p| !p.down).count();
        PeerList {
            peers,
            total_weight,
            tries,
        }
    }

    /// Number of peers.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether the list has no peer.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The index of the peer that weight position `w` (< total_weight) falls on, walking configured weights as
    /// nginx's ip_hash and hash do.
    pub fn weight_walk(&self, mut w: u64) -> usize {
        let mut i = 0;
        while i + 1 < self.peers.len() && w >= u64::from(self.peers[i].weight) {
            w -= u64::from(self.peers[i].weight);
            i += 1;
        }
        i
    }
}

/// What a request contributes to the pick.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySpec {
    /// The method reads no key.
    None,
    /// `ip_hash`: the client address bytes (first 3 octets of IPv4, all 16 of IPv6).
    ClientAddr,
    /// `hash KEY [consistent]`.
    Template(KeyTemplate),
}

impl KeySpec {
    /// Writes a request's key bytes into `out` (a reused buffer): nothing, the client address as `ip_hash` reads
    /// it, or the `hash` template over the request's variables. The one key evaluation of the HTTP proxy, the
    /// stream proxy and the simulator.
    pub fn eval_into(&self, vars: &dyn VarSource, client: Option<IpAddr>, out: &mut Vec<u8>) {
        match self {
            KeySpec::None => out.clear(),
            KeySpec::ClientAddr => match client {
                Some(ip) => super::ip_hash::key_into(ip, out),
                // a unix-domain client: the empty key, hashed as nginx's three zero bytes
                None => out.clear(),
            },
            KeySpec::Template(t) => t.eval_into(vars, out),
        }
    }
}

/// Why a plan could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// An upstream without a `server` line (nginx refuses it the same way).
    #[error("no servers are inside upstream \"{0}\"")]
    NoServers(String),
    /// nginx's refusal of a `sticky learn` zone that a reload moves to another upstream.
    #[error("sticky zone \"{zone}\" is used in upstream \"{upstream}\" while previously it was used in upstream \"{before}\"")]
    StickyZoneMoved {
        /// The zone's name.
        zone: String,
        /// The upstream that names it now.
        upstream: String,
        /// The upstream that used it before.
        before: String,
    },
}

/// An upstream ready for picking: both lists, totals, `single`, and its balancer.
#[derive(Debug)]
pub struct UpstreamPlan {
    /// The upstream's name.
    pub name: String,
    /// The primary peers.
    pub primary: PeerList,
    /// The backup peers.
    pub backup: PeerList,
    /// nginx's `single`: one primary peer and no backup list.
    pub single: bool,
    /// What a request contributes to the pick.
    pub key: KeySpec,
    /// The method, built at load.
    pub balancer: Box<dyn Balancer>,
    /// `least_time`'s settings: the attempt's timing hooks run only when this is set.
    pub least_time: Option<super::least_time::LeastTimeConf>,
    /// `random two ewma`: each try's round trip goes into the peer's peak-EWMA ([`super::peak_ewma::on_free`]).
    pub ewma: bool,
    /// `sticky`: the peers' server ids and the binding; `None` (no cost to a pick) without it.
    pub sticky: Option<Box<super::sticky::StickyPlan>>,
    /// `queue N [timeout=T]`: a request that finds no usable peer waits (see `proxy::queue`).
    pub queue: Option<crate::config::queue::QueueConf>,
    /// `endpoint_load_metrics on`: each response's load report is read (see `proxy::load_report`).
    pub load_metrics: bool,
}

impl UpstreamPlan {
    /// Builds the plan of `conf`, binding each peer to its slot in `zone` (existing slots are kept, see
    /// [`Zone::attach`]).
    pub fn build(conf: &UpstreamConf, zone: &Zone) -> Result<UpstreamPlan, PlanError> {
        let mut keys: Vec<PeerKey> = Vec::new();
        for line in &conf.servers {
            for addr in &line.addrs {
                let same = |k: &&PeerKey| k.server == line.text && k.addr == *addr;
                let nth = u32::try_from(keys.iter().filter(same).count()).unwrap_or(u32::MAX);
                keys.push(PeerKey {
                    upstream: conf.name.clone(),
                    server: line.text.clone(),
                    addr: *addr,
                    nth,
                });
            }
        }
        let mut slots = zone.attach(&keys).into_iter();
        let mut plan = Self::build_with(conf, || slots.next().unwrap_or_default())?;
        if let Some(learn) = conf.sticky.as_ref().and_then(|s| s.learn.as_ref()) {
            let table = zone
                .sticky_table(&learn.zone, &conf.name, learn.size)
                .map_err(|before| PlanError::StickyZoneMoved {
                    zone: learn.zone.clone(),
                    upstream: conf.name.clone(),
                    before,
                })?;
            plan.sticky = super::sticky::build(conf, &plan, Some(table));
        }
        Ok(plan)
    }

    /// Builds the plan of `conf` with fresh slots from `next_slot` (one call per peer, in line order).
    pub fn build_with(
        conf: &UpstreamConf,
        mut next_slot: impl FnMut() -> Arc<PeerSlot>,
    ) -> Result<UpstreamPlan, PlanError> {
        let mut primary = Vec::new();
        let mut backup = Vec::new();
        for line in &conf.servers {
            let server: Arc<str> = Arc::from(line.text.as_str());
            for addr in &line.addrs {
                let slot = next_slot();
                // The config (or the API's change to it) is the truth for `drain` at every apply.
                if line.drain {
                    slot.set_flags(PeerFlags::DRAINING);
                } else {
                    slot.clear_flags(PeerFlags::DRAINING);
                }
                let agent_on = line.agent.is_some() || conf.load_metrics.is_some();
                let (weight, max_conns, weight_source) = effective(line, &slot, agent_on);
                let peer = Peer {
                    server: server.clone(),
                    addr: *addr,
                    weight,
                    max_fails: line.max_fails,
                    fail_timeout: line.fail_timeout.as_secs(),
                    max_conns,
                    slow_start: line.slow_start.as_secs(),
                    down: line.down,
                    weight_source,
                    slot,
                };
                if line.backup {
                    backup.push(peer);
                } else {
                    primary.push(peer);
                }
            }
        }
        // An upstream kept in a state file may have no server yet, nor one whose names have not resolved (or were
        // removed): every pick is then "no live upstreams" (502).
        if primary.is_empty() && conf.state.is_none() && !conf.servers.iter().any(ServerLine::is_template) {
            return Err(PlanError::NoServers(conf.name.clone()));
        }
        let primary = PeerList::new(primary);
        let backup = PeerList::new(backup);
        let single = primary.len() == 1 && backup.is_empty();
        let (balancer, key) = super::build_balancer(&conf.method, &primary);
        let mut plan = UpstreamPlan {
            name: conf.name.clone(),
            primary,
            backup,
            single,
            key,
            balancer,
            least_time: super::least_time::timing_of(&conf.method),
            ewma: matches!(
                conf.method,
                crate::config::model::Method::Random {
                    two: Some(crate::config::model::RandomTwo::PeakEwma)
                }
            ),
            sticky: None,
            queue: conf.queue,
            load_metrics: conf.load_metrics.is_some(),
        };
        plan.sticky = super::sticky::build(conf, &plan, None);
        Ok(plan)
    }

    /// Whether a try's times are measured: `least_time` (or `random two least_time=`) or `random two ewma`.
    pub fn timed(&self) -> bool {
        self.least_time.is_some() || self.ewma
    }

    /// The list of `kind`.
    pub fn list(&self, kind: ListKind) -> &PeerList {
        match kind {
            ListKind::Primary => &self.primary,
            ListKind::Backup => &self.backup,
        }
    }

    /// The peer a choice names.
    pub fn peer(&self, c: super::Choice) -> &Peer {
        &self.list(c.list).peers[c.index]
    }

    /// nginx's initial tries budget: non-down peers of both lists, clamped to `next_upstream_tries` when non-zero.
    pub fn initial_tries(&self, next_upstream_tries: usize) -> usize {
        let t = self.primary.tries + self.backup.tries;
        if next_upstream_tries != 0 && t > next_upstream_tries {
            next_upstream_tries
        } else {
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::line;
    use crate::config::model::{Method, ServerLine};

    #[test]
    fn the_agent_s_record_sets_weight_max_conns_and_source() {
        use corelb_shared_state::AgentWeight;
        let slot = Arc::new(PeerSlot::new());
        let agent = crate::config::agent::AgentConf {
            port: 9,
            inter: std::time::Duration::from_secs(2),
            send: None,
        };
        let mut conf = UpstreamConf::new(
            "u",
            Method::RoundRobin,
            vec![ServerLine {
                weight: 10,
                max_conns: 4,
                agent: Some(agent),
                ..line("127.0.0.1:1")
            }],
        );
        let peer = |conf: &UpstreamConf| {
            let plan = UpstreamPlan::build_with(conf, || slot.clone()).unwrap();
            let p = &plan.primary.peers[0];
            (p.weight, p.max_conns, p.weight_source, p.slot.is_blocked())
        };
        assert_eq!(peer(&conf), (10, 4, WeightSource::Config, false));
        slot.agent().set_weight(Some(AgentWeight::Percent(250)));
        slot.agent().set_maxconn(Some(1));
        assert_eq!(peer(&conf), (25, 1, WeightSource::Agent, false));
        // weight 0: no new requests, weight 1 kept for the methods
        slot.agent().set_weight(Some(AgentWeight::Absolute(0)));
        assert_eq!(peer(&conf), (1, 1, WeightSource::Agent, true));
        // the API's weight, once the agent is gone from the line: its record is cleared
        slot.set_flags(PeerFlags::AGENT_DOWN);
        conf.servers[0].agent = None;
        conf.servers[0].weight_by_api = true;
        assert_eq!(peer(&conf), (10, 4, WeightSource::Api, false));
        assert_eq!((slot.agent().weight(), slot.agent().maxconn()), (None, None));
    }

    /// stream_upstream_max_conns.t's `u_many`: two equal lines are two peers, each with its own connections (and
    /// each keeps its slot across a reload).
    #[test]
    fn equal_lines_are_peers_of_their_own() {
        let zone = Zone::new();
        let conf = UpstreamConf::new(
            "u",
            Method::RoundRobin,
            vec![line("127.0.0.1:1"), line("127.0.0.1:1"), line("127.0.0.1:2")],
        );
        let slots = |p: &UpstreamPlan| p.primary.peers.iter().map(|p| Arc::clone(&p.slot)).collect::<Vec<_>>();
        let first = slots(&UpstreamPlan::build(&conf, &zone).expect("plan"));
        assert!(!Arc::ptr_eq(&first[0], &first[1]));
        let again = slots(&UpstreamPlan::build(&conf, &zone).expect("plan"));
        assert!(first.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
    }

    #[test]
    fn drain_in_the_config_sets_and_clears_the_kept_slot_s_flag() {
        let zone = Zone::new();
        let draining = |conf: &UpstreamConf| {
            let p = UpstreamPlan::build(conf, &zone).expect("plan");
            p.primary
                .peers
                .iter()
                .map(|p| p.slot.flags().intersects(PeerFlags::DRAINING))
                .collect::<Vec<_>>()
        };
        let drained = ServerLine {
            drain: true,
            ..line("127.0.0.1:1")
        };
        let mut conf = UpstreamConf::new("u", Method::RoundRobin, vec![drained, line("127.0.0.1:2")]);
        assert_eq!(draining(&conf), [true, false]);
        let kept = zone.get(&PeerKey {
            upstream: "u".into(),
            server: "127.0.0.1:1".into(),
            addr: "127.0.0.1:1".parse().expect("addr"),
            nth: 0,
        });
        conf.servers[0].drain = false;
        conf.servers[1].drain = true;
        assert_eq!(draining(&conf), [false, true]);
        assert!(
            kept.is_some_and(|s| !s.flags().intersects(PeerFlags::DRAINING)),
            "the same slot, cleared"
        );
    }
}
