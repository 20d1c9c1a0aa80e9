//! The Prometheus text exposition (`location = /metrics { metrics; }`): process, shard and per-peer series read
//! from the control plane, the zone and the running snapshot at scrape time, encoded with `prometheus-client`.
//!
//! Nothing is kept for metrics outside the zone: a scrape copies the counters out ([`read`]) and encodes them
//! ([`encode`]). The response time histograms are the zone's striped atomic buckets (see
//! [`corelb_shared_state::LatencyHistogram`] for why not an `hdrhistogram`).

pub mod encode;
pub mod read;

use super::{AdminRequest, AdminResponse};
use crate::state::Shared;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;
use read::Reading;

/// Every series name starts with `corelb_`.
pub const PREFIX: &str = "corelb";

/// Answers a scrape (GET or HEAD).
pub fn handle(shared: &Shared, req: &AdminRequest<'_>) -> AdminResponse {
    if req.method != "GET" && req.method != "HEAD" {
        return text(405, Some("GET, HEAD"), b"method not allowed\n".to_vec());
    }
    match render(Reading::take(shared, crate::clock::now_secs())) {
        Ok(body) => AdminResponse {
            status: 200,
            content_type: prometheus_text::CONTENT_TYPE,
            allow: None,
            body: body.into_bytes(),
        },
        Err(_) => text(500, None, b"the metrics could not be encoded\n".to_vec()),
    }
}

/// The text exposition of `reading`.
pub fn render(reading: Reading) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(reading));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

fn text(status: u16, allow: Option<&'static str>, body: Vec<u8>) -> AdminResponse {
    AdminResponse {
        status,
        content_type: "text/plain; charset=utf-8",
        allow,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::read::{NameReading, PeerReading, PeerState, ResolverReading};
    use super::*;
    use crate::control::ControlStats;
    use crate::resolve::dns::DnsError;
    use crate::resolve::names::NameStatus;
    use corelb_shared_state::{LatencySnapshot, PeerStats, ShardStats};

    fn reading() -> Reading {
        let mut latency = LatencySnapshot::default();
        latency.buckets[0] = 2; // ≤ 0.5 ms
        latency.buckets[14] = 1; // > 10 s
        latency.sum_us = 11_000_600;
        let stats = PeerStats {
            conns: 1,
            requests: 3,
            responses: [0, 2, 0, 0, 1],
            unavail: 5,
            health: corelb_shared_state::HealthStats {
                checks: 9,
                fails: 4,
                last_passed: true,
                unhealthy: 2,
                ..Default::default()
            },
            ..PeerStats::default()
        };
        let peer = |server: &str, backup, state| PeerReading {
            upstream: "be\"x".into(),
            peer: "127.0.0.1:81".into(),
            server: server.into(),
            backup,
            state,
            weight: 1,
            weight_source: crate::balance::WeightSource::Config,
            stats,
            latency,
        };
        Reading {
            control: ControlStats {
                generation: 3,
                reloads: 1,
                reload_failures: 1,
                api_changes: 2,
                agent_changes: 0,
                resolve_changes: 0,
                started_at: 1_700_000_000,
                loaded_at_ms: 1_700_000_000_000,
            },
            shards: vec![
                ShardStats {
                    bad_gateway: 4,
                    loop_lag_us: 1_500,
                    ..ShardStats::default()
                },
                ShardStats::default(),
            ],
            http: vec![peer("a.test:81", false, PeerState::Draining)],
            stream: vec![peer("127.0.0.1:81", true, PeerState::Up)],
            resolvers: vec![ResolverReading {
                zone: "dns".into(),
                requests: [7, 2, 0],
                responses: [5, 0, 1, 2, 0, 0, 1, 0],
            }],
            names: vec![
                NameReading {
                    host: "a.test".into(),
                    service: String::new(),
                    status: NameStatus {
                        addresses: 2,
                        last: Some(Err(DnsError::ServFail)),
                        lookups: 4,
                        failures: 1,
                    },
                },
                NameReading {
                    host: "s.test".into(),
                    service: "http".into(),
                    status: NameStatus {
                        addresses: 3,
                        last: Some(Ok(())),
                        lookups: 1,
                        failures: 0,
                    },
                },
            ],
            xdp: vec![crate::l4::RealCounters {
                server: "10.0.0.11:80".parse().unwrap(),
                packets: 7,
                bytes: 700,
                flows: 2,
            }],
        }
    }

    #[test]
    fn renders_each_kind_of_series() {
        let text = render(reading()).unwrap();
        let labels = r#"upstream="be\"x",peer="127.0.0.1:81",server="a.test:81",backup="false""#;
        for line in [
            "corelb_config_generation 3".to_string(),
            "corelb_config_reload_failures_total 1".into(),
            "corelb_api_changes_total 2".into(),
            "corelb_agent_changes_total 0".into(),
            "corelb_resolve_changes_total 0".into(),
            "corelb_start_time_seconds 1700000000".into(),
            r#"corelb_shard_gateway_errors_total{shard="0",status="502"} 4"#.into(),
            r#"corelb_shard_gateway_errors_total{shard="1",status="504"} 0"#.into(),
            r#"corelb_shard_loop_lag_seconds{shard="0"} 0.0015"#.into(),
            format!(r#"corelb_upstream_peer_state{{{labels},state="draining"}} 1"#),
            format!(r#"corelb_upstream_peer_state{{{labels},state="up"}} 0"#),
            format!(r#"corelb_upstream_peer_responses_total{{{labels},class="5xx"}} 1"#),
            format!(r#"corelb_upstream_peer_active{{{labels}}} 1"#),
            format!(r#"corelb_upstream_peer_weight{{{labels},source="config"}} 1"#),
            format!(r#"corelb_upstream_peer_unavail_total{{{labels}}} 5"#),
            format!(r#"corelb_upstream_peer_health_checks_total{{{labels}}} 9"#),
            format!(r#"corelb_upstream_peer_health_check_fails_total{{{labels}}} 4"#),
            format!(r#"corelb_upstream_peer_health_check_unhealthy_total{{{labels}}} 2"#),
            format!(r#"corelb_upstream_peer_health_check_last_passed{{{labels}}} 1"#),
            format!(r#"corelb_upstream_peer_response_seconds_bucket{{{labels},le="0.0005"}} 2"#),
            format!(r#"corelb_upstream_peer_response_seconds_bucket{{{labels},le="10"}} 2"#),
            format!(r#"corelb_upstream_peer_response_seconds_bucket{{{labels},le="+Inf"}} 3"#),
            format!(r#"corelb_upstream_peer_response_seconds_count{{{labels}}} 3"#),
            format!(r#"corelb_upstream_peer_response_seconds_sum{{{labels}}} 11.0006"#),
            "# TYPE corelb_stream_upstream_peer_session_seconds histogram".into(),
            "# TYPE corelb_stream_upstream_peer_sent_bytes_total counter".into(),
            r#"corelb_resolver_requests_total{zone="dns",type="name"} 7"#.into(),
            r#"corelb_xdp_real_packets_total{server="10.0.0.11:80"} 7"#.into(),
            r#"corelb_xdp_real_bytes_total{server="10.0.0.11:80"} 700"#.into(),
            r#"corelb_xdp_real_flows_total{server="10.0.0.11:80"} 2"#.into(),
            r#"corelb_resolver_requests_total{zone="dns",type="srv"} 2"#.into(),
            r#"corelb_resolver_responses_total{zone="dns",code="nxdomain"} 2"#.into(),
            r#"corelb_resolver_responses_total{zone="dns",code="timedout"} 1"#.into(),
            r#"corelb_resolve_name_addresses{name="a.test",service=""} 2"#.into(),
            r#"corelb_resolve_name_ok{name="a.test",service=""} 0"#.into(),
            r#"corelb_resolve_name_ok{name="s.test",service="http"} 1"#.into(),
            r#"corelb_resolve_name_lookups_total{name="a.test",service=""} 4"#.into(),
            r#"corelb_resolve_name_failures_total{name="a.test",service=""} 1"#.into(),
            r#"corelb_resolve_name_last_error{name="a.test",service="",code="servfail"} 1"#.into(),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("corelb_stream_upstream_peer_responses_total"));
        assert!(
            !text.contains(r#"corelb_resolve_name_last_error{name="s.test""#),
            "no error: no series"
        );
        assert!(text.contains("# TYPE corelb_upstream_peer_sent_bytes_total counter"));
    }

    #[test]
    fn every_line_parses_as_the_text_format() {
        let text = render(reading()).unwrap();
        for line in text.lines() {
            let info = prometheus_parse::LineInfo::parse(line);
            assert!(
                !matches!(
                    info,
                    prometheus_parse::LineInfo::Ignored | prometheus_parse::LineInfo::Empty
                ),
                "{line:?}"
            );
        }
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        assert!(scrape.samples.len() > 40);
    }

    #[test]
    fn only_get_and_head_are_answered() {
        let shared = crate::state::Shared::new(
            crate::snapshot::Snapshot::build(Default::default(), &corelb_shared_state::Zone::new(), 1).unwrap(),
            std::sync::Arc::new(corelb_shared_state::Zone::new()),
            1,
        );
        let req = |method| AdminRequest {
            method,
            path: "/metrics",
            args: None,
            body: b"",
        };
        let post = handle(&shared, &req("POST"));
        assert_eq!((post.status, post.allow), (405, Some("GET, HEAD")));
        let get = handle(&shared, &req("GET"));
        assert_eq!(get.status, 200);
        assert!(String::from_utf8_lossy(&get.body).contains("corelb_config_generation"));
    }
}
