//! The API's read views, as nginx Plus API version 9 shapes them: `/nginx`, upstreams with their peers' state and
//! counters (from the zone), and the servers' configuration (from the running snapshot).

use super::json::{timestamp_ms, Json};
use super::route::Block;
use crate::balance::{Peer, UpstreamPlan};
use crate::config::model::UpstreamConf;
use crate::snapshot::limits::LimitZones;
use crate::snapshot::resolvers::ResolverZones;
use crate::snapshot::Snapshot;
use crate::state::Shared;
use corelb_shared_state::{Answered, Asked, PeerFlags, PeerStats, TimeMetric, Zone};
use std::borrow::Cow;

/// An upstream of the running snapshot with its plan.
#[derive(Clone, Copy)]
pub struct UpstreamRef<'s> {
    pub index: usize,
    pub conf: &'s UpstreamConf,
    pub plan: &'s UpstreamPlan,
}

impl<'s> UpstreamRef<'s> {
    /// Whether the API may show and change it: nginx Plus requires a `zone`.
    pub fn is_dynamic(&self) -> bool {
        self.conf.zone.is_some()
    }

    /// Every peer, primary ones first, each with whether it is a backup.
    pub fn peers(&self) -> impl Iterator<Item = (&'s Peer, bool)> {
        let primary = self.plan.primary.peers.iter().map(|p| (p, false));
        primary.chain(self.plan.backup.peers.iter().map(|p| (p, true)))
    }

    /// The peer with API id `id`.
    pub fn peer_by_id(&self, id: u32) -> Option<(&'s Peer, bool)> {
        self.peers().find(|(p, _)| p.slot.id() == id)
    }
}

/// The upstreams of `block` in `snap`, in config order.
pub fn upstreams(snap: &Snapshot, block: Block) -> Vec<UpstreamRef<'_>> {
    let (confs, plans) = match block {
        Block::Http => (snap.config.http.as_ref().map(|h| &h.upstreams), &snap.http_plans),
        Block::Stream => (snap.config.stream.as_ref().map(|s| &s.upstreams), &snap.stream_plans),
    };
    let Some(confs) = confs else {
        return Vec::new();
    };
    confs
        .iter()
        .zip(plans)
        .enumerate()
        .map(|(index, (conf, plan))| UpstreamRef { index, conf, plan })
        .collect()
}

/// The upstream of `block` called `name`.
pub fn find_upstream<'s>(snap: &'s Snapshot, block: Block, name: &str) -> Option<UpstreamRef<'s>> {
    upstreams(snap, block).into_iter().find(|u| u.conf.name == name)
}

/// `limit_reqs` (every zone, by name) or one zone of it (`None` when there is no such zone): nginx Plus's
/// `passed`, `delayed`, `rejected`, `delayed_dry_run`, `rejected_dry_run`. A request counts once in each zone it
/// passed, or in the zone that delayed or rejected it.
pub fn limit_reqs(zones: &LimitZones, name: Option<&str>) -> Option<Json> {
    let one = |d: [u64; 5]| {
        Json::obj([
            ("passed", Json::Num(d[0])),
            ("delayed", Json::Num(d[1])),
            ("rejected", Json::Num(d[2])),
            ("delayed_dry_run", Json::Num(d[3])),
            ("rejected_dry_run", Json::Num(d[4])),
        ])
    };
    let all = zones.req.iter().map(|z| (z.name.as_str(), z.table.decisions.get()));
    by_name(all, name, one)
}

/// `limit_conns` of a block, or one zone of it: nginx Plus's `passed`, `rejected`, `rejected_dry_run`.
pub fn limit_conns(zones: &LimitZones, name: Option<&str>) -> Option<Json> {
    let one = |d: [u64; 5]| {
        Json::obj([
            ("passed", Json::Num(d[0])),
            ("rejected", Json::Num(d[2])),
            ("rejected_dry_run", Json::Num(d[4])),
        ])
    };
    let all = zones.conn.iter().map(|z| (z.name.as_str(), z.table.decisions.get()));
    by_name(all, name, one)
}

/// `/api/N/stream/xdp` (corelb's): each real server's packets, bytes and new flows through the XDP program, by
/// `addr:port`.
pub fn xdp(counters: &[crate::l4::RealCounters]) -> Json {
    Json::Obj(
        counters
            .iter()
            .map(|c| {
                let one = Json::obj([
                    ("packets", Json::Num(c.packets)),
                    ("bytes", Json::Num(c.bytes)),
                    ("flows", Json::Num(c.flows)),
                ]);
                (c.server.to_string().into(), one)
            })
            .collect(),
    )
}

/// `/resolvers`, or one zone of it: nginx Plus's `requests` (`name`, `srv`, `addr`) and `responses` (by code).
pub fn resolvers(zones: &ResolverZones, name: Option<&str>) -> Option<Json> {
    let one = |s: &corelb_shared_state::ResolverStats| {
        let fields = |names: &'static [&'static str], counts: &[u64]| {
            Json::Obj(
                names
                    .iter()
                    .zip(counts)
                    .map(|(n, c)| ((*n).into(), Json::Num(*c)))
                    .collect(),
            )
        };
        Json::obj([
            ("requests", fields(&Asked::NAMES, &s.requests())),
            ("responses", fields(&Answered::NAMES, &s.responses())),
        ])
    };
    match name {
        Some(n) => zones.get(n).map(one),
        None => Some(Json::Obj(
            zones.zones.iter().map(|(n, s)| (n.clone().into(), one(s))).collect(),
        )),
    }
}

/// The object of every `(name, counts)` by name, or the one of `name`.
fn by_name<'a>(
    mut all: impl Iterator<Item = (&'a str, [u64; 5])>,
    name: Option<&str>,
    one: impl Fn([u64; 5]) -> Json,
) -> Option<Json> {
    match name {
        Some(n) => all.find(|(z, _)| *z == n).map(|(_, d)| one(d)),
        None => Some(Json::Obj(all.map(|(z, d)| (z.to_string().into(), one(d))).collect())),
    }
}

/// `/api/9/nginx`.
pub fn nginx(shared: &Shared, now_ms: u64) -> Json {
    let control = shared.control_stats();
    Json::obj([
        ("version", Json::str(env!("CARGO_PKG_VERSION"))),
        ("build", Json::str("corelb")),
        ("generation", Json::Num(control.generation)),
        ("load_timestamp", Json::str(timestamp_ms(control.loaded_at_ms))),
        ("timestamp", Json::str(timestamp_ms(now_ms))),
        ("pid", Json::Num(u64::from(std::process::id()))),
        ("ppid", Json::Num(u64::from(std::os::unix::process::parent_id()))),
    ])
}

/// One upstream's status: its peers, `zombies` and `zone`.
pub fn upstream(up: UpstreamRef<'_>, block: Block, zone: &Zone, now: u64) -> Json {
    let peers = up.peers().map(|(p, backup)| peer(p, backup, block, now)).collect();
    let zone_name = up.conf.zone.as_ref().map(|z| z.name.clone()).unwrap_or_default();
    Json::obj([
        ("peers", Json::Arr(peers)),
        ("zombies", Json::Num(zone.zombies(&up.conf.name) as u64)),
        ("zone", Json::str(zone_name)),
    ])
}

/// Every dynamic upstream of `block` by name, each limited to `fields` when given.
pub fn upstream_map(snap: &Snapshot, block: Block, zone: &Zone, now: u64, fields: Option<&[&str]>) -> Json {
    let items = upstreams(snap, block)
        .into_iter()
        .filter(UpstreamRef::is_dynamic)
        .map(|u| {
            let mut v = upstream(u, block, zone, now);
            if let Some(f) = fields {
                v.keep_fields(f);
            }
            (Cow::Owned(u.conf.name.clone()), v)
        })
        .collect();
    Json::Obj(items)
}

/// corelb's `weight_source` (`api` or `agent`) when the weight is not the config's: absent otherwise, so nginx
/// Plus's schema is unchanged for a config's weights.
fn push_weight_source(f: &mut Vec<(&'static str, Json)>, p: &Peer) {
    if p.weight_source != crate::balance::WeightSource::Config {
        f.push(("weight_source", Json::str(p.weight_source.name())));
    }
}

/// nginx Plus's peer state.
pub fn state(p: &Peer, now: u64) -> &'static str {
    let flags = p.slot.flags();
    if p.down || flags.intersects(PeerFlags::ADMIN_DOWN) || flags.intersects(PeerFlags::AGENT_MAINT) {
        "down"
    } else if flags.intersects(PeerFlags::DRAIN_KINDS) {
        "draining"
    } else if flags.intersects(PeerFlags::UNHEALTHY) || flags.intersects(PeerFlags::AGENT_DOWN) {
        "unhealthy"
    } else if flags.intersects(PeerFlags::CHECKING) {
        "checking"
    } else if p.slot.is_failed(now, p.max_fails, p.fail_timeout) {
        "unavail"
    } else {
        "up"
    }
}

/// One peer's status and counters (`/http/upstreams/NAME` `peers[]`).
pub fn peer(p: &Peer, backup: bool, block: Block, now: u64) -> Json {
    let s = p.slot.stats();
    let mut f = vec![
        ("id", Json::Num(u64::from(s.id))),
        ("server", Json::str(crate::config::unix_addr::to_text(&p.addr))),
        ("name", Json::str(p.server.to_string())),
        ("backup", Json::Bool(backup)),
        ("weight", Json::Num(u64::from(p.weight))),
        ("state", Json::str(state(p, now))),
        ("active", Json::Num(u64::from(s.conns))),
    ];
    push_weight_source(&mut f, p);
    if p.max_conns != 0 {
        f.push(("max_conns", Json::Num(u64::from(p.max_conns))));
    }
    match block {
        Block::Http => {
            f.push(("requests", Json::Num(s.requests)));
            f.push(("responses", responses(&s)));
        }
        Block::Stream => f.push(("connections", Json::Num(s.requests))),
    }
    f.extend([
        ("sent", Json::Num(s.bytes_sent)),
        ("received", Json::Num(s.bytes_received)),
        ("fails", Json::Num(s.failures)),
        ("unavail", Json::Num(s.unavail)),
        ("health_checks", health_checks(&s)),
    ]);
    if s.last_selected != 0 {
        f.push((
            "selected",
            Json::str(timestamp_ms(s.last_selected.saturating_mul(1000))),
        ));
    }
    // nginx Plus's average times, in milliseconds: a `least_time` upstream's moving averages from the zone (the
    // ones it balances on), otherwise the mean of the response time histogram.
    let times = p.slot.times();
    let averaged = times.avg(TimeMetric::Response);
    if averaged != 0 {
        let phases: &[(&str, TimeMetric)] = match block {
            Block::Http => &[("header_time", TimeMetric::Header)],
            Block::Stream => &[
                ("connect_time", TimeMetric::Connect),
                ("first_byte_time", TimeMetric::FirstByte),
            ],
        };
        for &(name, metric) in phases {
            f.push((name, Json::Num(times.avg(metric))));
        }
        f.push(("response_time", Json::Num(averaged)));
        return Json::obj(f);
    }
    let timed = p.slot.latency().snapshot();
    if let Some(avg_us) = timed.sum_us.checked_div(timed.count()) {
        f.push(("response_time", Json::Num(avg_us / 1000)));
    }
    Json::obj(f)
}

fn responses(s: &PeerStats) -> Json {
    let [r1, r2, r3, r4, r5] = s.responses;
    Json::obj([
        ("1xx", Json::Num(r1)),
        ("2xx", Json::Num(r2)),
        ("3xx", Json::Num(r3)),
        ("4xx", Json::Num(r4)),
        ("5xx", Json::Num(r5)),
        ("total", Json::Num(s.responses.iter().sum())),
    ])
}

fn health_checks(s: &PeerStats) -> Json {
    let h = &s.health;
    let mut f = vec![
        ("checks", Json::Num(h.checks)),
        ("fails", Json::Num(h.fails)),
        ("unhealthy", Json::Num(h.unhealthy)),
    ];
    if h.checks != 0 {
        f.push(("last_passed", Json::Bool(h.last_passed)));
    }
    Json::obj(f)
}

/// One server's configuration (`/http/upstreams/NAME/servers[/ID]`).
pub fn server_conf(p: &Peer, backup: bool, block: Block) -> Json {
    let mut f = vec![
        ("id", Json::Num(u64::from(p.slot.id()))),
        ("server", Json::str(crate::config::unix_addr::to_text(&p.addr))),
        ("weight", Json::Num(u64::from(p.weight))),
        ("max_conns", Json::Num(u64::from(p.max_conns))),
        ("max_fails", Json::Num(u64::from(p.max_fails))),
        ("fail_timeout", Json::str(format!("{}s", p.fail_timeout))),
        ("slow_start", Json::str(format!("{}s", p.slow_start))),
    ];
    push_weight_source(&mut f, p);
    if block == Block::Http {
        f.push(("route", Json::str("")));
    }
    f.push(("backup", Json::Bool(backup)));
    f.push(("down", Json::Bool(p.down)));
    if block == Block::Http {
        f.push(("drain", Json::Bool(p.slot.flags().intersects(PeerFlags::DRAINING))));
    }
    Json::obj(f)
}

/// Every server's configuration of `up`.
pub fn server_confs(up: UpstreamRef<'_>, block: Block) -> Json {
    Json::Arr(up.peers().map(|(p, backup)| server_conf(p, backup, block)).collect())
}
