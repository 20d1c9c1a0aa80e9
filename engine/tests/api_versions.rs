//! The nginx Plus API's versions and the endpoints the Prometheus exporter's client reads, end to end: `GET /api`
//! (the location's own path) and `/api/` list versions 1 to 9, each version answers its own paths and shapes
//! (what a version lacks is `PathNotFound` there), the connection and request counts are the shards' real
//! ones, and what corelb has none of (caches, server zones, limit zones in a config without them...) is nginx
//! Plus's empty `{}`.

mod support;

use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use support::api_client::{api, error_code, start};
use support::backend::{Backend, Mode};
use support::free_addr;

fn text(listen: SocketAddr, backend: SocketAddr) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; server {backend}; }}\n \
         server {{ listen {listen}; location / {{ proxy_pass http://b; }} location /api {{ api; }} }}\n}}\n"
    )
}

fn versions_and_paths(rt: usize) {
    let a = Backend::start("a", Mode::Ok);
    let listen = free_addr();
    let _p = start(rt, &text(listen, a.addr));
    let all = json!([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for path in ["/api", "/api/", "/api//"] {
        assert_eq!(api(listen, "GET", path, ""), (200, all.clone()), "{path}");
    }

    // Root and block lists as each version has them.
    let (_, v4) = api(listen, "GET", "/api/4/", "");
    assert_eq!(
        v4,
        json!(["nginx", "processes", "connections", "slabs", "http", "stream", "ssl"])
    );
    let (_, v8) = api(listen, "GET", "/api/8", "");
    assert_eq!(
        v8,
        json!([
            "nginx",
            "processes",
            "connections",
            "slabs",
            "http",
            "stream",
            "resolvers",
            "ssl"
        ])
    );
    let (_, h1) = api(listen, "GET", "/api/1/http", "");
    assert_eq!(
        h1,
        json!(["requests", "server_zones", "caches", "keyvals", "upstreams"])
    );
    let (_, s6) = api(listen, "GET", "/api/6/stream/", "");
    assert_eq!(s6, json!(["server_zones", "limit_conns", "keyvals", "upstreams"]));

    // Every endpoint the exporter's client reads, in the version it asks for (8) and in 9.
    let empty = [
        "slabs",
        "http/server_zones",
        "http/location_zones",
        "http/caches",
        "http/limit_reqs",
        "http/limit_conns",
        "http/keyvals",
        "stream/server_zones",
        "stream/limit_conns",
        "stream/keyvals",
        "resolvers",
    ];
    for v in [8, 9] {
        for path in empty {
            assert_eq!(
                api(listen, "GET", &format!("/api/{v}/{path}"), ""),
                (200, json!({})),
                "{v}/{path}"
            );
        }
        let (status, up) = api(listen, "GET", &format!("/api/{v}/stream/upstreams"), "");
        assert_eq!((status, up), (200, json!({})));
        let (status, processes) = api(listen, "GET", &format!("/api/{v}/processes"), "");
        assert_eq!((status, processes), (200, json!({"respawned": 0})));
        let (status, zone_sync) = api(listen, "GET", &format!("/api/{v}/stream/zone_sync"), "");
        assert_eq!((status, error_code(&zone_sync)), (404, "PathNotFound"));
    }

    // Paths a version does not have yet.
    for (path, code) in [
        ("/api/4/http/location_zones", "PathNotFound"),
        ("/api/4/resolvers", "PathNotFound"),
        ("/api/5/http/limit_reqs", "PathNotFound"),
        ("/api/5/stream/limit_conns", "PathNotFound"),
        ("/api/8/workers", "PathNotFound"),
        ("/api/1/stream/keyvals", "PathNotFound"),
        ("/api/0/nginx", "UnknownVersion"),
        ("/api/10", "UnknownVersion"),
        ("/api/9/http/server_zones/www", "ServerZoneNotFound"),
        ("/api/9/slabs/one", "SlabNotFound"),
    ] {
        let (status, v) = api(listen, "GET", path, "");
        assert_eq!((status, error_code(&v)), (404, code), "{path}: {v}");
    }

    // Shapes that differ: SSL details since 8, `path`/`method` in errors before 4, `drain` since 2.
    let ssl7 = json!({"handshakes": 0, "handshakes_failed": 0, "session_reuses": 0});
    assert_eq!(api(listen, "GET", "/api/7/ssl", ""), (200, ssl7));
    let (_, ssl8) = api(listen, "GET", "/api/8/ssl", "");
    assert_eq!(ssl8["verify_failures"]["hostname_mismatch"], 0, "{ssl8}");
    assert_eq!(ssl8["no_common_protocol"], 0, "{ssl8}");
    let (_, e3) = api(listen, "GET", "/api/3/nope", "");
    assert_eq!(
        (&e3["path"], &e3["method"], error_code(&e3)),
        (&json!(""), &json!(""), "PathNotFound")
    );
    let (_, e4) = api(listen, "GET", "/api/4/nope", "");
    assert!(e4.get("path").is_none() && e4.get("method").is_none(), "{e4}");
    let (_, s1) = api(listen, "GET", "/api/1/http/upstreams/b/servers/0", "");
    let (_, s2) = api(listen, "GET", "/api/2/http/upstreams/b/servers/0", "");
    assert_eq!((s1.get("drain"), &s2["drain"]), (None, &json!(false)), "{s1} {s2}");
    assert_eq!(s1["server"], a.addr.to_string());
}

/// `/connections`, `/http/requests` and `/workers` after known traffic: the shards' own counts.
fn counts_are_the_shards(rt: usize) {
    let a = Backend::start("a", Mode::Ok);
    let listen = free_addr();
    let p = start(rt, &text(listen, a.addr));
    for _ in 0..5 {
        assert_eq!(support::get(listen, "/x").map(|r| r.status), Some(200));
    }
    // Each connection ends on its shard a moment after the client read its answer.
    let settle = || {
        let closed = support::wait_until(Duration::from_secs(5), || {
            p.shared.zone.shard_stats().iter().all(|s| s.active == 0)
        });
        assert!(closed, "every earlier connection ended");
    };
    settle();
    // The sixth connection and request is the API's own.
    let (_, conns) = api(listen, "GET", "/api/8/connections", "");
    assert_eq!(conns, json!({"accepted": 6, "dropped": 0, "active": 1, "idle": 0}));
    settle();
    let (_, reqs) = api(listen, "GET", "/api/8/http/requests?fields=total", "");
    assert_eq!(reqs, json!({"total": 7}));
    settle();
    let (_, workers) = api(listen, "GET", "/api/9/workers", "");
    let want = json!([{
        "id": 0,
        "pid": std::process::id(),
        "connections": {"accepted": 8, "dropped": 0, "active": 1, "idle": 0},
        "http": {"requests": {"total": 8, "current": 1}},
    }]);
    assert_eq!(workers, want);
    let (_, up) = api(listen, "GET", "/api/8/http/upstreams/b", "");
    assert_eq!(
        (&up["peers"][0]["requests"], &up["peers"][0]["responses"]["2xx"]),
        (&json!(5), &json!(5))
    );
}

#[test]
fn versions_and_paths_tokio() {
    versions_and_paths(0);
}

#[test]
fn versions_and_paths_glommio() {
    versions_and_paths(1);
}

#[test]
fn counts_are_the_shards_tokio() {
    counts_are_the_shards(0);
}

#[test]
fn counts_are_the_shards_glommio() {
    counts_are_the_shards(1);
}
