//! The API's process-wide status views, from every shard's counters: `/connections`, `/http/requests`,
//! `/workers` (one per shard), `/processes` and `/ssl` (TLS handshakes), shaped per API version.

use super::json::Json;
use crate::state::Shared;
use corelb_shared_state::ShardStats;

/// `/connections` of `s`: nginx Plus counts `active` without the `idle` (keepalive-waiting) ones; corelb stops
/// accepting at `worker_connections` rather than dropping, so `dropped` is 0.
fn connections(s: &ShardStats) -> Json {
    Json::obj([
        ("accepted", Json::Num(s.accepted)),
        ("dropped", Json::Num(0)),
        ("active", Json::Num(s.active.saturating_sub(s.waiting))),
        ("idle", Json::Num(s.waiting)),
    ])
}

/// `/http/requests` of `s`: requests begun, and those being read or answered now.
fn requests(s: &ShardStats) -> Json {
    Json::obj([
        ("total", Json::Num(s.http_requests)),
        ("current", Json::Num(s.reading + s.writing)),
    ])
}

/// The sum of every shard's counters (the fields the views read).
fn total(shards: &[ShardStats]) -> ShardStats {
    shards.iter().fold(ShardStats::default(), |t, s| ShardStats {
        accepted: t.accepted + s.accepted,
        active: t.active + s.active,
        http_requests: t.http_requests + s.http_requests,
        reading: t.reading + s.reading,
        writing: t.writing + s.writing,
        waiting: t.waiting + s.waiting,
        handshakes: t.handshakes + s.handshakes,
        session_reuses: t.session_reuses + s.session_reuses,
        handshakes_failed: t.handshakes_failed + s.handshakes_failed,
        ..t
    })
}

/// `/api/N/connections`.
pub fn all_connections(shared: &Shared) -> Json {
    connections(&total(&shared.zone.shard_stats()))
}

/// `/api/N/http/requests`.
pub fn all_requests(shared: &Shared) -> Json {
    requests(&total(&shared.zone.shard_stats()))
}

/// `/api/9/workers`: each shard as an nginx worker (all in one process, so one `pid`).
pub fn workers(shared: &Shared) -> Json {
    let pid = u64::from(std::process::id());
    let shards = shared.zone.shard_stats();
    let items = shards.iter().enumerate().map(|(i, s)| {
        Json::obj([
            ("id", Json::Num(i as u64)),
            ("pid", Json::Num(pid)),
            ("connections", connections(s)),
            ("http", Json::obj([("requests", requests(s))])),
        ])
    });
    Json::Arr(items.collect())
}

/// `/api/N/processes`: corelb's shards are threads that are never respawned.
pub fn processes() -> Json {
    Json::obj([("respawned", Json::Num(0))])
}

/// `/api/N/ssl`: every shard's handshakes; version 8 added the failure details, which corelb does not tell apart
/// (0: every failure is in `handshakes_failed`) and no client certificate reaches (corelb asks for none).
pub fn all_ssl(shared: &Shared, version: u32) -> Json {
    ssl(&total(&shared.zone.shard_stats()), version)
}

fn ssl(s: &ShardStats, version: u32) -> Json {
    let mut f = vec![
        ("handshakes", Json::Num(s.handshakes)),
        ("handshakes_failed", Json::Num(s.handshakes_failed)),
        ("session_reuses", Json::Num(s.session_reuses)),
    ];
    if version >= 8 {
        f.extend([
            ("no_common_protocol", Json::Num(0)),
            ("no_common_cipher", Json::Num(0)),
            ("handshake_timeout", Json::Num(0)),
            ("peer_rejected_cert", Json::Num(0)),
        ]);
        let verify = ["no_cert", "expired_cert", "revoked_cert", "hostname_mismatch", "other"];
        f.push(("verify_failures", Json::obj(verify.map(|k| (k, Json::Num(0))))));
    }
    Json::obj(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_shape_as_nginx_plus() {
        let shards = [
            ShardStats {
                accepted: 5,
                active: 3,
                http_requests: 9,
                reading: 1,
                writing: 1,
                waiting: 1,
                ..ShardStats::default()
            },
            ShardStats {
                accepted: 2,
                active: 1,
                http_requests: 2,
                writing: 1,
                ..ShardStats::default()
            },
        ];
        let t = total(&shards);
        assert_eq!(
            connections(&t).render(),
            r#"{"accepted":7,"dropped":0,"active":3,"idle":1}"#
        );
        assert_eq!(requests(&t).render(), r#"{"total":11,"current":3}"#);
    }

    #[test]
    fn ssl_details_come_with_version_8() {
        let s = ShardStats {
            handshakes: 5,
            session_reuses: 2,
            handshakes_failed: 1,
            ..ShardStats::default()
        };
        assert_eq!(
            ssl(&s, 7).render(),
            r#"{"handshakes":5,"handshakes_failed":1,"session_reuses":2}"#
        );
        assert_eq!(
            ssl(&ShardStats::default(), 8).render(),
            r#"{"handshakes":0,"handshakes_failed":0,"session_reuses":0,"no_common_protocol":0,"no_common_cipher":0,"handshake_timeout":0,"peer_rejected_cert":0,"verify_failures":{"no_cert":0,"expired_cert":0,"revoked_cert":0,"hostname_mismatch":0,"other":0}}"#
        );
    }
}
