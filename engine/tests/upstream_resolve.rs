//! `server NAME resolve` and `service=` end to end, on both runtimes, against the loopback DNS server of
//! `support::dns` whose records the test changes: names not yet resolved have no peers; addresses added and
//! removed under steady load with zero failed requests, the zone state (API ids, counters) of addresses that stay
//! kept; the TTL honoured (one query per name for the process, however many shards); SERVFAIL keeps the peers,
//! NXDOMAIN removes them (502) until the name resolves again; a CNAME followed; SRV records by priority (the
//! rest backup) and weight; the API and `/metrics` show the resolved peers with their names; the API adds a name
//! where a resolver exists.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use serde_json::Value;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::api_client::api;
use support::backend::{Backend, Mode};
use support::dns::{Answer, DnsServer};
use support::{free_addr, get, glommio_usable, wait_until, Client, Proxy};

const WAIT: Duration = Duration::from_secs(10);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Requests on one keepalive connection until stopped: how many, and how many were not 200.
struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(front: SocketAddr) -> Load {
        let (stop, done, failed) = (Arc::default(), Arc::default(), Arc::default());
        let (s, d, f): (Arc<AtomicBool>, Arc<AtomicUsize>, Arc<AtomicUsize>) =
            (Arc::clone(&stop), Arc::clone(&done), Arc::clone(&failed));
        let thread = std::thread::spawn(move || {
            let mut c = Client::connect(front);
            while !s.load(Ordering::Relaxed) {
                c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                let mut r = c.read_response();
                if r.is_none() {
                    // the connection reached keepalive_requests and was closed: the request again on a new one
                    c = Client::connect(front);
                    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                    r = c.read_response();
                }
                if r.is_none_or(|r| r.status != 200) {
                    f.fetch_add(1, Ordering::Relaxed);
                    c = Client::connect(front);
                }
                d.fetch_add(1, Ordering::Relaxed);
            }
        });
        Load {
            stop,
            done,
            failed,
            thread: Some(thread),
        }
    }

    /// Stops the load: (requests, failed).
    fn finish(mut self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("load thread");
        }
        (self.done.load(Ordering::Relaxed), self.failed.load(Ordering::Relaxed))
    }
}

/// The backends' names that answered `n` requests to `path`.
fn seen(front: SocketAddr, path: &str, n: usize) -> HashSet<String> {
    (0..n)
        .map(|_| {
            get(front, path).map_or("none".into(), |r| {
                if r.status == 200 {
                    r.text()
                } else {
                    r.status.to_string()
                }
            })
        })
        .collect()
}

fn set_of(names: &[&str]) -> HashSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn peers(front: SocketAddr, upstream: &str) -> Vec<Value> {
    let (status, v) = api(front, "GET", &format!("/api/9/http/upstreams/{upstream}"), "");
    assert_eq!(status, 200, "{v}");
    v["peers"].as_array().cloned().unwrap_or_default()
}

fn run<R: Runtime>() {
    let b1 = Backend::start_on("b1", Mode::Ok, "127.0.0.11:0");
    let port = b1.addr.port();
    let _b2 = Backend::start_on("b2", Mode::Ok, &format!("127.0.0.12:{port}"));
    let b3 = Backend::start_on("b3", Mode::Ok, &format!("127.0.0.13:{port}"));
    let (s1, s2, s3) = (
        Backend::start("s1", Mode::Ok),
        Backend::start("s2", Mode::Ok),
        Backend::start("s3", Mode::Ok),
    );
    let dns = DnsServer::start();
    dns.set("app.test", Answer::Addrs(vec![ip("127.0.0.11")], 1));
    let srv = |b: &Backend, prio: u16, weight: u16, name: &str| (prio, weight, b.addr.port(), name.to_string());
    dns.set(
        "_http._tcp.srv.test",
        Answer::Srv(
            vec![
                srv(&s1, 10, 3, "s1.srv.test"),
                srv(&s2, 10, 1, "s2.srv.test"),
                srv(&s3, 20, 1, "s3.srv.test"),
            ],
            300,
        ),
    );
    for name in ["s1.srv.test", "s2.srv.test", "s3.srv.test"] {
        dns.set(name, Answer::Addrs(vec![ip("127.0.0.1")], 300));
    }
    let (front, tcp_front) = (free_addr(), free_addr());
    let text = format!(
        r#"events {{}}
http {{
  resolver {dns} ipv6=off;
  resolver_timeout 1s;
  upstream u {{ zone u 1m; server app.test:{port} resolve max_fails=0; }}
  upstream s {{ zone s 1m; server srv.test service=http resolve; }}
  upstream h {{ zone h 1m; hash $arg_k consistent; server app.test:{port} resolve; }}
  upstream late {{ zone late 1m; server late.test:{port} resolve; }}
  server {{
    listen {front};
    location / {{ proxy_pass http://u; }}
    location /s {{ proxy_pass http://s; }}
    location /h {{ proxy_pass http://h; }}
    location /late {{ proxy_pass http://late; }}
    location /api/ {{ api write=on; }}
    location = /metrics {{ metrics; }}
  }}
}}
stream {{
  resolver {dns} ipv6=off;
  upstream st {{ zone st 1m; server app.test:{port} resolve; }}
  server {{ listen {tcp_front}; proxy_pass st; }}
}}
"#,
        dns = dns.addr,
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 2);
    let a_queries = |name: &str| dns.queries(name, RecordType::A, "udp");

    // resolved once for the process: two shards, two upstreams with the name, one query
    assert!(
        wait_until(WAIT, || seen(front, "/", 1) == set_of(&["b1"])),
        "app.test resolves"
    );
    assert_eq!(a_queries("app.test"), 1, "one query per name");
    assert_eq!(dns.queries("app.test", RecordType::AAAA, "udp"), 0, "ipv6=off");
    // a name without records has no peers: 502, no request anywhere
    assert_eq!(seen(front, "/late", 2), set_of(&["502"]));
    let peer = &peers(front, "u")[0];
    assert_eq!(
        (peer["server"].as_str(), peer["name"].as_str()),
        (
            Some(b1.addr.to_string().as_str()),
            Some(format!("app.test:{port}").as_str())
        )
    );
    let b1_id = peer["id"].clone();

    // the TTL (1 s) honoured: asked again once it is over (plus nginx's second), not before
    let before = a_queries("app.test");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(a_queries("app.test"), before, "not asked again within the TTL");
    assert!(
        wait_until(WAIT, || a_queries("app.test") > before),
        "asked again after the TTL"
    );

    // addresses added and removed under steady load: no request fails, and the peer that stays keeps its id
    let load = Load::start(front);
    dns.set("app.test", Answer::Addrs(vec![ip("127.0.0.11"), ip("127.0.0.12")], 1));
    assert!(
        wait_until(WAIT, || seen(front, "/", 4) == set_of(&["b1", "b2"])),
        "b2 added"
    );
    let ids: Vec<Value> = peers(front, "u").iter().map(|p| p["id"].clone()).collect();
    assert!(ids.contains(&b1_id), "b1 keeps its API id: {ids:?}");
    let b1_requests = b1.requests();
    dns.set("app.test", Answer::Addrs(vec![ip("127.0.0.12"), ip("127.0.0.13")], 1));
    assert!(
        wait_until(WAIT, || seen(front, "/", 4) == set_of(&["b2", "b3"])),
        "b1 removed, b3 added"
    );
    let after: Vec<Value> = peers(front, "u").iter().map(|p| p["id"].clone()).collect();
    assert!(
        !after.contains(&b1_id) && after.contains(&ids[1]),
        "{ids:?} -> {after:?}"
    );
    let (done, failed) = load.finish();
    assert!(done > 0 && b1_requests > 0 && b3.requests() > 0);
    assert_eq!(failed, 0, "{failed} of {done} requests failed while the name changed");

    // the hash ring rebuilt from the resolved set: every key goes to b2 or b3
    let hashed: HashSet<String> = (0..20)
        .map(|k| get(front, &format!("/h?k={k}")).map_or("none".into(), |r| r.text()))
        .collect();
    assert!(
        hashed.is_subset(&set_of(&["b2", "b3"])) && hashed.len() == 2,
        "{hashed:?}"
    );

    // SERVFAIL keeps the peers (asked again after resolver_timeout)
    dns.set("app.test", Answer::Code(ResponseCode::ServFail));
    let before = a_queries("app.test");
    assert!(
        wait_until(WAIT, || a_queries("app.test") >= before + 2),
        "asked again after SERVFAIL"
    );
    assert_eq!(
        seen(front, "/", 4),
        set_of(&["b2", "b3"]),
        "SERVFAIL keeps the addresses"
    );

    // NXDOMAIN removes them: 502 until the name resolves again
    dns.set("app.test", Answer::Code(ResponseCode::NXDomain));
    assert!(
        wait_until(WAIT, || seen(front, "/", 1) == set_of(&["502"])),
        "NXDOMAIN removes the peers"
    );
    assert!(peers(front, "u").is_empty());
    // a CNAME is followed to its name's records
    dns.set("app.test", Answer::Cname("alias.app.test".into(), 1));
    dns.set("alias.app.test", Answer::Addrs(vec![ip("127.0.0.13")], 1));
    assert!(
        wait_until(WAIT, || seen(front, "/", 2) == set_of(&["b3"])),
        "CNAME followed"
    );

    // SRV: the lowest priority primary with the records' weights (3:1), the rest backup
    let got: Vec<String> = (0..16)
        .map(|_| get(front, "/s").map_or("none".into(), |r| r.text()))
        .collect();
    let count = |n: &str| got.iter().filter(|g| *g == n).count();
    assert!(count("s1") > 0 && count("s2") > 0 && count("s3") == 0, "{got:?}");
    let sp = peers(front, "s");
    let shown: Vec<(String, String, bool, u64)> = sp
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or("").to_string(),
                p["server"].as_str().unwrap_or("").to_string(),
                p["backup"].as_bool().unwrap_or(false),
                p["weight"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("s1.srv.test".to_string(), s1.addr.to_string(), false, 3),
            ("s2.srv.test".to_string(), s2.addr.to_string(), false, 1),
            ("s3.srv.test".to_string(), s3.addr.to_string(), true, 1),
        ]
    );
    assert_eq!(dns.queries("_http._tcp.srv.test", RecordType::SRV, "udp"), 1);

    // /metrics shows the resolved peers by name and address
    let metrics = get(front, "/metrics").expect("metrics").text();
    assert!(
        metrics.contains(&format!("{}", s1.addr)) && metrics.contains("s1.srv.test"),
        "{metrics}"
    );

    // the API: a resolved peer is the name's, not the API's; a name is added where the upstream has a resolver
    let id = sp[0]["id"].as_u64().unwrap_or(0);
    let (status, v) = api(front, "DELETE", &format!("/api/9/http/upstreams/s/servers/{id}"), "");
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("UpstreamServerImmutable")),
        "{v}"
    );
    // (an answer cut over UDP: asked again over TCP)
    dns.set("late.test", Answer::TcpOnly(vec![ip("127.0.0.12")], 1));
    let body = format!(r#"{{"server":"late.test:{port}"}}"#);
    let (status, v) = api(front, "POST", "/api/9/http/upstreams/u/servers", &body);
    assert_eq!(status, 201, "{v}");
    assert!(
        wait_until(WAIT, || seen(front, "/", 4) == set_of(&["b2", "b3"])),
        "late.test added to u"
    );
    assert!(
        wait_until(WAIT, || seen(front, "/late", 1) == set_of(&["b2"])),
        "late.test resolved"
    );
    drop(proxy);
}

#[test]
fn tokio_upstream_resolve() {
    run::<Tokio>();
}

#[test]
fn glommio_upstream_resolve() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
