//! A resolver's `status_zone=` end to end, on both runtimes, against the loopback DNS server of `support::dns`:
//! the API's `/resolvers/` counts the queries of the upstream name thread (names and SRV) and of the shards
//! (`proxy_pass` with variables) by type and answer code, `DELETE` resets a zone, and `/metrics` shows the
//! zone's counters and each `resolve` name's state and last error.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use hickory_proto::op::ResponseCode;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use support::api_client::api;
use support::backend::{Backend, Mode};
use support::dns::{Answer, DnsServer};
use support::{free_addr, get, glommio_usable, wait_until, Proxy};

const WAIT: Duration = Duration::from_secs(10);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn zone(front: SocketAddr) -> Value {
    let (status, v) = api(front, "GET", "/api/9/resolvers/dns", "");
    assert_eq!(status, 200, "{v}");
    v
}

fn count(v: &Value, group: &str, field: &str) -> u64 {
    v[group][field]
        .as_u64()
        .unwrap_or_else(|| panic!("{group}.{field} in {v}"))
}

fn metrics(front: SocketAddr) -> String {
    get(front, "/metrics").expect("metrics").text()
}

fn run<R: Runtime>() {
    let b = Backend::start("b", Mode::Ok);
    let port = b.addr.port();
    let dns = DnsServer::start();
    dns.set("ok.test", Answer::Addrs(vec![ip("127.0.0.1")], 300));
    dns.set("var.test", Answer::Addrs(vec![ip("127.0.0.1")], 300));
    dns.set("gone.test", Answer::Code(ResponseCode::NXDomain));
    dns.set("fail.test", Answer::Code(ResponseCode::ServFail));
    dns.set(
        "_http._tcp.srv.test",
        Answer::Srv(vec![(1, 1, port, "s1.srv.test".into())], 300),
    );
    dns.set("s1.srv.test", Answer::Addrs(vec![ip("127.0.0.1")], 300));
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  resolver {dns} ipv6=off status_zone=dns;
  resolver_timeout 1s;
  upstream u {{ zone u 1m; server ok.test:{port} resolve; server gone.test:{port} resolve; server fail.test:{port} resolve; }}
  upstream s {{ zone s 1m; server srv.test service=http resolve; }}
  upstream plain {{ zone p 1m; resolver {dns} ipv6=off; server other.test:{port} resolve; }}
  server {{
    listen {front};
    location / {{ proxy_pass http://u; }}
    location /v {{ proxy_pass http://$arg_h:{port}; }}
    location /api/ {{ api write=on; }}
    location = /metrics {{ metrics; }}
  }}
}}
"#,
        dns = dns.addr,
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 2);

    // the name thread's queries: ok.test, gone.test, fail.test and the SRV target by name, the service by SRV
    assert!(
        wait_until(WAIT, || {
            let z = zone(front);
            count(&z, "responses", "nxdomain") >= 1
                && count(&z, "responses", "servfail") >= 1
                && count(&z, "requests", "srv") == 1
                && count(&z, "responses", "noerror") >= 3
        }),
        "the name thread's queries are counted: {}",
        zone(front)
    );
    // a shard's query for a proxy_pass with variables
    let before = zone(front);
    let r = get(front, "/v?h=var.test").expect("answer");
    assert_eq!(r.status, 200, "{}", r.text());
    let after = zone(front);
    assert_eq!(
        count(&after, "responses", "noerror"),
        count(&before, "responses", "noerror") + 1,
        "one shard query: {before} then {after}"
    );
    assert_eq!(count(&after, "requests", "addr"), 0);
    assert_eq!(count(&after, "responses", "timedout"), 0);
    // the upstream with a resolver of its own (no status zone) counts nowhere; the list holds the one zone
    let (status, all) = api(front, "GET", "/api/9/resolvers", "");
    assert_eq!(status, 200);
    let zones: Vec<&String> = all.as_object().expect("object").keys().collect();
    assert_eq!(zones, ["dns"], "{all}");
    let (status, missing) = api(front, "GET", "/api/9/resolvers/nope", "");
    assert_eq!(
        (status, missing["error"]["code"].as_str()),
        (404, Some("ResolverZoneNotFound"))
    );

    // /metrics: the zone's counters and every name's state
    let text = metrics(front);
    for line in [
        r#"corelb_resolver_requests_total{zone="dns",type="srv"} 1"#,
        r#"corelb_resolve_name_ok{name="ok.test",service=""} 1"#,
        r#"corelb_resolve_name_addresses{name="ok.test",service=""} 1"#,
        r#"corelb_resolve_name_ok{name="gone.test",service=""} 0"#,
        r#"corelb_resolve_name_addresses{name="gone.test",service=""} 0"#,
        r#"corelb_resolve_name_last_error{name="gone.test",service="",code="nxdomain"} 1"#,
        r#"corelb_resolve_name_last_error{name="fail.test",service="",code="servfail"} 1"#,
        r#"corelb_resolve_name_ok{name="srv.test",service="http"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains(r#"corelb_resolve_name_last_error{name="ok.test""#));

    // DELETE resets the zone (the names with long TTLs are not asked again)
    let (status, _) = api(front, "DELETE", "/api/9/resolvers/dns", "");
    assert_eq!(status, 204);
    let reset = zone(front);
    assert_eq!(count(&reset, "requests", "srv"), 0, "{reset}");
    assert_eq!(count(&reset, "responses", "noerror"), 0, "{reset}");
    let (status, _) = api(front, "DELETE", "/api/9/resolvers/nope", "");
    assert_eq!(status, 404);
    drop(proxy);
}

#[test]
fn tokio_resolver_status() {
    run::<Tokio>();
}

#[test]
fn glommio_resolver_status() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
