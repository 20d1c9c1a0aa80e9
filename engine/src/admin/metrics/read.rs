//! One scrape's reading of the running process: the control plane's counters, every shard's counters, and every
//! peer of the running snapshot with its state, counters and response time histogram, copied out as plain data.

use crate::balance::{Peer, UpstreamPlan};
use crate::control::ControlStats;
use crate::resolve::names::{Answers, NameStatus};
use crate::state::Shared;
use corelb_shared_state::{LatencySnapshot, PeerFlags, PeerStats, ShardStats};
use std::collections::HashSet;

/// A peer's state as nginx Plus names it, exposed one-hot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    Up,
    Down,
    Unavail,
    Unhealthy,
    Draining,
    Checking,
}

impl PeerState {
    /// Every state, in the order the series are written.
    pub const ALL: [PeerState; 6] = [
        PeerState::Up,
        PeerState::Down,
        PeerState::Unavail,
        PeerState::Unhealthy,
        PeerState::Draining,
        PeerState::Checking,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerState::Up => "up",
            PeerState::Down => "down",
            PeerState::Unavail => "unavail",
            PeerState::Unhealthy => "unhealthy",
            PeerState::Draining => "draining",
            PeerState::Checking => "checking",
        }
    }

    /// The state of `peer` at `now` (seconds): `down` (config or API) first, then the health checks' `checking`
    /// and `unhealthy`, then `draining`, then `unavail` (out by `max_fails` within `fail_timeout`), else `up`.
    pub fn of(peer: &Peer, now: u64) -> PeerState {
        let flags = peer.slot.flags();
        if peer.down || flags.intersects(PeerFlags::ADMIN_DOWN) || flags.intersects(PeerFlags::AGENT_MAINT) {
            PeerState::Down
        } else if flags.intersects(PeerFlags::CHECKING) {
            PeerState::Checking
        } else if flags.intersects(PeerFlags::UNHEALTHY) || flags.intersects(PeerFlags::AGENT_DOWN) {
            PeerState::Unhealthy
        } else if flags.intersects(PeerFlags::DRAIN_KINDS) {
            PeerState::Draining
        } else if peer.slot.is_failed(now, peer.max_fails, peer.fail_timeout) {
            PeerState::Unavail
        } else {
            PeerState::Up
        }
    }
}

/// One peer's reading.
#[derive(Debug, Clone)]
pub struct PeerReading {
    pub upstream: String,
    /// The resolved address.
    pub peer: String,
    /// The `server` line's argument as written.
    pub server: String,
    pub backup: bool,
    pub state: PeerState,
    /// The effective weight and who set it.
    pub weight: u32,
    pub weight_source: crate::balance::WeightSource,
    pub stats: PeerStats,
    pub latency: LatencySnapshot,
}

/// One resolver status zone's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverReading {
    pub zone: String,
    /// By [`corelb_shared_state::Asked::NAMES`].
    pub requests: [u64; 3],
    /// By [`corelb_shared_state::Answered::NAMES`].
    pub responses: [u64; 8],
}

/// One `server NAME resolve` name's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameReading {
    pub host: String,
    /// The `service=` (empty for a plain name).
    pub service: String,
    pub status: NameStatus,
}

/// Everything one scrape exposes.
#[derive(Debug, Clone)]
pub struct Reading {
    pub control: ControlStats,
    /// By shard index.
    pub shards: Vec<ShardStats>,
    pub http: Vec<PeerReading>,
    pub stream: Vec<PeerReading>,
    pub resolvers: Vec<ResolverReading>,
    pub names: Vec<NameReading>,
    /// The XDP data path's counters per real server (empty without `listen ... xdp=`).
    pub xdp: Vec<crate::l4::RealCounters>,
}

impl Reading {
    /// Reads `shared` at `now` (seconds).
    pub fn take(shared: &Shared, now: u64) -> Reading {
        let snap = shared.snapshot.load();
        Reading {
            control: shared.control_stats(),
            shards: shared.zone.shard_stats(),
            http: peers(&snap.http_plans, now),
            stream: peers(&snap.stream_plans, now),
            resolvers: snap
                .resolvers
                .zones
                .iter()
                .map(|(zone, s)| ResolverReading {
                    zone: zone.clone(),
                    requests: s.requests(),
                    responses: s.responses(),
                })
                .collect(),
            names: names(&shared.control.names),
            xdp: crate::l4::counters(),
        }
    }
}

/// The names of `resolve` lines asked so far, each once (a name asked through two resolvers is shown by the
/// first in order: the series have no resolver label).
fn names(answers: &Answers) -> Vec<NameReading> {
    let mut out: Vec<NameReading> = Vec::new();
    for (key, status) in answers.statuses() {
        let service = key.service.unwrap_or_default();
        if out.iter().any(|n| n.host == key.host && n.service == service) {
            continue;
        }
        out.push(NameReading {
            host: key.host,
            service,
            status,
        });
    }
    out
}

/// The peers of `plans`, primary then backup, each identity once (a `server` line repeated in an upstream shares
/// one slot, and two series with the same labels would be invalid).
fn peers(plans: &[UpstreamPlan], now: u64) -> Vec<PeerReading> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for plan in plans {
        let lists = [(&plan.primary, false), (&plan.backup, true)];
        for (list, backup) in lists {
            for p in &list.peers {
                if !seen.insert((plan.name.as_str(), p.addr, p.server.clone())) {
                    continue;
                }
                out.push(PeerReading {
                    upstream: plan.name.clone(),
                    peer: crate::config::unix_addr::to_text(&p.addr),
                    server: p.server.to_string(),
                    backup,
                    state: PeerState::of(p, now),
                    weight: p.weight,
                    weight_source: p.weight_source,
                    stats: p.slot.stats(),
                    latency: p.slot.latency().snapshot(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_str;
    use corelb_shared_state::Zone;
    use std::path::Path;

    fn plans(text: &str) -> Vec<UpstreamPlan> {
        let config = parse_str(text, Path::new("/etc/corelb/t.conf")).expect("config");
        let zone = Zone::new();
        let http = config.http.as_ref().expect("http");
        http.upstreams
            .iter()
            .map(|u| UpstreamPlan::build(u, &zone).expect("plan"))
            .collect()
    }

    const CONF: &str = "events {} http { upstream u { server 127.0.0.1:1; server 127.0.0.1:2 max_fails=1; \
        server 127.0.0.1:3 down; server 127.0.0.1:1; server 127.0.0.1:4 backup; } \
        server { listen 127.0.0.1:9; location / { proxy_pass http://u; } } }";

    #[test]
    fn peers_are_listed_once_with_their_list() {
        let plans = plans(CONF);
        let got: Vec<_> = peers(&plans, 0)
            .into_iter()
            .map(|p| (p.peer, p.backup, p.state))
            .collect();
        let want = [
            ("127.0.0.1:1", false, PeerState::Up),
            ("127.0.0.1:2", false, PeerState::Up),
            ("127.0.0.1:3", false, PeerState::Down),
            ("127.0.0.1:4", true, PeerState::Up),
        ];
        let want: Vec<_> = want.iter().map(|&(a, b, s)| (a.to_string(), b, s)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn state_follows_flags_then_failures() {
        let plans = plans(CONF);
        let list = &plans[0].primary.peers;
        let (a, b) = (&list[0], &list[1]);
        b.slot.record_failure(100);
        assert_eq!(PeerState::of(b, 105), PeerState::Unavail);
        assert_eq!(PeerState::of(b, 200), PeerState::Up);
        a.slot.set_flags(PeerFlags::DRAINING);
        assert_eq!(PeerState::of(a, 0), PeerState::Draining);
        a.slot.set_flags(PeerFlags::UNHEALTHY);
        assert_eq!(PeerState::of(a, 0), PeerState::Unhealthy);
        a.slot.set_flags(PeerFlags::CHECKING);
        assert_eq!(PeerState::of(a, 0), PeerState::Checking);
        a.slot.set_flags(PeerFlags::ADMIN_DOWN);
        assert_eq!(PeerState::of(a, 0), PeerState::Down);
        let names: Vec<_> = PeerState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["up", "down", "unavail", "unhealthy", "draining", "checking"]);
    }
}
