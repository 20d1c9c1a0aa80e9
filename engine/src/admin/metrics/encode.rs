//! The Prometheus text (0.0.4) encoding of a [`Reading`], through `prometheus-client`'s collector interface: every
//! family is written from the reading's plain data, so the encoder holds no metric objects of its own.

use super::read::{NameReading, PeerReading, Reading};
use crate::resolve::names::NameStatus;
use corelb_shared_state::{Answered, Asked};
use corelb_shared_state::{LatencySnapshot, LATENCY_BOUNDS_US, LATENCY_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::fmt;

/// Microseconds in a second, for the `_seconds` series.
const MICROS: f64 = 1_000_000.0;

/// The labels of one peer: `upstream`, `peer` (address), `server` (the line as written), `backup`.
type PeerLabels<'a> = [(&'static str, &'a str); 4];

fn peer_labels(p: &PeerReading) -> PeerLabels<'_> {
    [
        ("upstream", p.upstream.as_str()),
        ("peer", p.peer.as_str()),
        ("server", p.server.as_str()),
        ("backup", if p.backup { "true" } else { "false" }),
    ]
}

/// A classic histogram of response times, buckets as the zone keeps them.
#[derive(Debug)]
struct Latency(LatencySnapshot);

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), fmt::Error> {
        let mut buckets = [(f64::INFINITY, 0u64); LATENCY_BUCKETS];
        for (i, (out, &n)) in buckets.iter_mut().zip(&self.0.buckets).enumerate() {
            let bound = LATENCY_BOUNDS_US.get(i).map_or(f64::INFINITY, |&us| us as f64 / MICROS);
            *out = (bound, n);
        }
        let sum = self.0.sum_us as f64 / MICROS;
        encoder.encode_histogram::<NoLabelSet>(sum, self.0.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Writes one family (nothing when it has no series). A counter's name gets `_total` from the encoder.
fn family<S: EncodeLabelSet, M: EncodeMetric>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (S, M)>,
) -> Result<(), fmt::Error> {
    let mut series = series.into_iter().peekable();
    let Some((_, first)) = series.peek() else {
        return Ok(());
    };
    let kind = first.metric_type();
    let mut metric = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, m) in series {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn gauge<N>(v: N) -> ConstGauge<N> {
    ConstGauge::new(v)
}

fn seconds(micros: u64) -> ConstGauge<f64> {
    ConstGauge::new(micros as f64 / MICROS)
}

impl Collector for Reading {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        self.encode_process(&mut enc)?;
        self.encode_shards(&mut enc)?;
        encode_peers(&mut enc, "upstream_peer", &self.http, Protocol::Http)?;
        encode_peers(&mut enc, "stream_upstream_peer", &self.stream, Protocol::Stream)?;
        self.encode_xdp(&mut enc)?;
        self.encode_resolvers(&mut enc)
    }
}

impl Reading {
    fn encode_process(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let c = &self.control;
        let none: [(&str, &str); 0] = [];
        let one = |v: u64| [(none, counter(v))];
        family(
            enc,
            "config_generation",
            "The running config's generation (1 at start, +1 per change).",
            [(none, gauge(c.generation))],
        )?;
        family(enc, "config_reloads", "Successful reloads.", one(c.reloads))?;
        family(
            enc,
            "config_reload_failures",
            "Refused reloads (the old config kept serving).",
            one(c.reload_failures),
        )?;
        family(enc, "api_changes", "Changes made through the API.", one(c.api_changes))?;
        family(
            enc,
            "agent_changes",
            "New generations made for the weights agents and load reports set.",
            one(c.agent_changes),
        )?;
        family(
            enc,
            "resolve_changes",
            "New generations made because a `server NAME resolve` name's addresses changed.",
            one(c.resolve_changes),
        )?;
        family(
            enc,
            "start_time_seconds",
            "When the process started, seconds since the Unix epoch.",
            [(none, gauge(c.started_at))],
        )
    }

    /// The XDP data path's counters per real server, as its program counts them (summed over CPUs).
    fn encode_xdp(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let each = |f: fn(&crate::l4::RealCounters) -> u64| {
            self.xdp
                .iter()
                .map(move |r| ([("server", r.server.to_string())], counter(f(r))))
        };
        family(
            enc,
            "xdp_real_packets",
            "Packets the XDP program sent to the real server (NAT: its replies too).",
            each(|r| r.packets),
        )?;
        family(enc, "xdp_real_bytes", "Bytes of those packets.", each(|r| r.bytes))?;
        family(
            enc,
            "xdp_real_flows",
            "New flows the XDP program scheduled to the real server.",
            each(|r| r.flows),
        )
    }

    /// The resolvers' status zones (nginx Plus's `/resolvers/`) and the state of every `resolve` name.
    fn encode_resolvers(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let requests = self.resolvers.iter().flat_map(|r| {
            let by = Asked::NAMES.iter().zip(r.requests);
            by.map(|(kind, n)| ([("zone", r.zone.as_str()), ("type", *kind)], counter(n)))
        });
        family(
            enc,
            "resolver_requests",
            "Queries a resolver with status_zone= sent, by type (name: A/AAAA, srv: SRV, addr: PTR).",
            requests,
        )?;
        let responses = self.resolvers.iter().flat_map(|r| {
            let by = Answered::NAMES.iter().zip(r.responses);
            by.map(|(code, n)| ([("zone", r.zone.as_str()), ("code", *code)], counter(n)))
        });
        family(
            enc,
            "resolver_responses",
            "How a resolver's queries ended, by answer code (timedout: no answer in resolver_timeout).",
            responses,
        )?;
        let labels = |n: &'_ NameReading| [("name", n.host.clone()), ("service", n.service.clone())];
        let gauges = |f: fn(&NameStatus) -> i64| self.names.iter().map(move |n| (labels(n), gauge(f(&n.status))));
        family(
            enc,
            "resolve_name_addresses",
            "The addresses a `server NAME resolve` name has now.",
            gauges(|s| i64::try_from(s.addresses).unwrap_or(i64::MAX)),
        )?;
        family(
            enc,
            "resolve_name_ok",
            "1 when the name's last lookup succeeded, 0 when it failed (then its addresses were kept, or removed on NXDOMAIN).",
            gauges(|s| i64::from(matches!(s.last, Some(Ok(()))))),
        )?;
        let counters = |f: fn(&NameStatus) -> u64| self.names.iter().map(move |n| (labels(n), counter(f(&n.status))));
        family(
            enc,
            "resolve_name_lookups",
            "Lookups of the name so far.",
            counters(|s| s.lookups),
        )?;
        family(
            enc,
            "resolve_name_failures",
            "Lookups of the name that failed.",
            counters(|s| s.failures),
        )?;
        let last_error = self.names.iter().filter_map(|n| {
            let Some(Err(e)) = n.status.last else { return None };
            let code = Answered::NAMES[e.answered() as usize];
            Some((
                [
                    ("name", n.host.clone()),
                    ("service", n.service.clone()),
                    ("code", code.to_string()),
                ],
                gauge(1i64),
            ))
        });
        family(
            enc,
            "resolve_name_last_error",
            "Present, with the answer code, while the name's last lookup failed.",
            last_error,
        )
    }

    fn encode_shards(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let names: Vec<String> = (0..self.shards.len()).map(|i| i.to_string()).collect();
        let by_shard = || names.iter().map(|n| [("shard", n.as_str())]).zip(&self.shards);
        let counters =
            |f: fn(&corelb_shared_state::ShardStats) -> u64| by_shard().map(move |(l, s)| (l, counter(f(s))));
        family(
            enc,
            "shard_connections_accepted",
            "Client connections accepted.",
            counters(|s| s.accepted),
        )?;
        let active = by_shard().map(|(l, s)| (l, gauge(s.active)));
        family(enc, "shard_connections_active", "Client connections open now.", active)?;
        family(
            enc,
            "shard_requests",
            "Request heads parsed and routed.",
            counters(|s| s.requests),
        )?;
        family(
            enc,
            "shard_bad_requests",
            "Requests refused as malformed (400).",
            counters(|s| s.bad_requests),
        )?;
        family(
            enc,
            "shard_client_aborts",
            "Clients that closed mid-request.",
            counters(|s| s.client_aborts),
        )?;
        let gateway = by_shard().flat_map(|([shard], s)| {
            [("502", s.bad_gateway), ("504", s.gateway_timeout)]
                .map(|(status, n)| ([shard, ("status", status)], counter(n)))
        });
        family(
            enc,
            "shard_gateway_errors",
            "Upstream error answers: 502 and 504.",
            gateway,
        )?;
        let lag = by_shard().map(|(l, s)| (l, seconds(s.loop_lag_us)));
        family(
            enc,
            "shard_loop_lag_seconds",
            "How late the shard's last 100 ms tick woke.",
            lag,
        )?;
        let max = by_shard().map(|(l, s)| (l, seconds(s.loop_lag_max_us)));
        family(
            enc,
            "shard_loop_lag_max_seconds",
            "The largest tick lag since the shard started.",
            max,
        )
    }
}

/// Which block the peers are from: http peers have response classes and a response time histogram, stream peers a
/// session time histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http,
    Stream,
}

fn encode_peers(
    enc: &mut DescriptorEncoder<'_>,
    prefix: &str,
    peers: &[PeerReading],
    protocol: Protocol,
) -> Result<(), fmt::Error> {
    let name = |suffix: &str| format!("{prefix}_{suffix}");
    let states = peers.iter().flat_map(|p| {
        super::read::PeerState::ALL.map(|s| {
            (
                (peer_labels(p), [("state", s.as_str())]),
                gauge(u32::from(p.state == s)),
            )
        })
    });
    family(
        enc,
        &name("state"),
        "1 for the peer's state (up, down, unavail, unhealthy, draining, checking).",
        states,
    )?;
    let weights = peers
        .iter()
        .map(|p| ((peer_labels(p), [("source", p.weight_source.name())]), gauge(p.weight)));
    family(
        enc,
        &name("weight"),
        "The peer's effective weight, by who set it (config, api, agent).",
        weights,
    )?;
    let each = |f: fn(&PeerReading) -> u64| peers.iter().map(move |p| (peer_labels(p), counter(f(p))));
    let active = peers.iter().map(|p| (peer_labels(p), gauge(p.stats.conns)));
    family(
        enc,
        &name("active"),
        "Connections to the peer held now, over all shards.",
        active,
    )?;
    family(
        enc,
        &name("selected"),
        "Times the balancer picked the peer.",
        each(|p| p.stats.selected),
    )?;
    family(
        enc,
        &name("requests"),
        "Requests (sessions for stream) sent to the peer.",
        each(|p| p.stats.requests),
    )?;
    if protocol == Protocol::Http {
        let classes = peers.iter().flat_map(|p| {
            let classes = ["1xx", "2xx", "3xx", "4xx", "5xx"];
            classes
                .into_iter()
                .zip(p.stats.responses)
                .map(move |(c, n)| ((peer_labels(p), [("class", c)]), counter(n)))
        });
        family(
            enc,
            &name("responses"),
            "Responses passed to clients, by status class.",
            classes,
        )?;
    }
    family(
        enc,
        &name("failures"),
        "Tries on the peer that failed.",
        each(|p| p.stats.failures),
    )?;
    let fails = peers.iter().map(|p| (peer_labels(p), gauge(p.stats.fails)));
    family(
        enc,
        &name("fails"),
        "nginx's fails count now (max_fails is tested against it).",
        fails,
    )?;
    family(
        enc,
        &name("unavail"),
        "Times failures reached max_fails and took the peer out.",
        each(|p| p.stats.unavail),
    )?;
    family(
        enc,
        &name("sent_bytes"),
        "Bytes sent to the peer (http: requests whose response was passed to the client).",
        each(|p| p.stats.bytes_sent),
    )?;
    family(
        enc,
        &name("received_bytes"),
        "Bytes received from the peer (http: responses passed to the client, head and body).",
        each(|p| p.stats.bytes_received),
    )?;
    family(
        enc,
        &name("health_checks"),
        "Active health probes run.",
        each(|p| p.stats.health.checks),
    )?;
    family(
        enc,
        &name("health_check_fails"),
        "Active health probes failed.",
        each(|p| p.stats.health.fails),
    )?;
    let turns = each(|p| p.stats.health.unhealthy);
    family(
        enc,
        &name("health_check_unhealthy"),
        "Times the checks turned the peer unhealthy.",
        turns,
    )?;
    let passed = peers
        .iter()
        .map(|p| (peer_labels(p), gauge(u32::from(p.stats.health.last_passed))));
    family(
        enc,
        &name("health_check_last_passed"),
        "1 when the last probe passed (0 before any).",
        passed,
    )?;
    let latency = peers.iter().map(|p| (peer_labels(p), Latency(p.latency)));
    match protocol {
        Protocol::Http => family(
            enc,
            &name("response_seconds"),
            "Upstream response time (connect to last byte).",
            latency,
        ),
        Protocol::Stream => family(enc, &name("session_seconds"), "Upstream session time.", latency),
    }
}
