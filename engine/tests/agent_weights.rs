//! Weights reported by the backends, end to end on both runtimes: real TCP agents on loopback (HAProxy's
//! agent-check protocol, `agent_port=`) whose replies the tests change, and backends whose responses carry an ORCA
//! `endpoint-load-metrics` header. The picks are counted at the backends; the API and the metrics show the weights.

mod support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::api_client::{api, wait_for};
use support::Proxy;
use support::{free_addr, get};

/// The agents' interval in these tests.
const INTER: Duration = Duration::from_millis(200);

/// A TCP agent on loopback: answers each connection with its current reply and a newline, or, when the reply is
/// empty, holds the connection without a word for a second (a hung agent).
struct Agent {
    addr: SocketAddr,
    reply: Arc<Mutex<String>>,
    asked: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Agent {
    fn start(reply: &str) -> Agent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an agent");
        let a = Agent {
            addr: listener.local_addr().expect("address"),
            reply: Arc::new(Mutex::new(reply.to_string())),
            asked: Arc::default(),
            stop: Arc::default(),
        };
        let (reply, asked, stop) = (a.reply.clone(), a.asked.clone(), a.stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                asked.fetch_add(1, Ordering::Relaxed);
                let line = reply.lock().expect("reply").clone();
                thread::spawn(move || {
                    if line.is_empty() {
                        thread::sleep(Duration::from_secs(1));
                    } else {
                        let _ = conn.write_all(format!("{line}\n").as_bytes());
                    }
                });
            }
        });
        a
    }

    fn say(&self, reply: &str) {
        *self.reply.lock().expect("reply") = reply.to_string();
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::Relaxed)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// An HTTP backend answering 200 with its name, an optional extra header line, after an optional delay; counts
/// requests.
struct Web {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    header: Arc<Mutex<String>>,
}

impl Web {
    fn start(name: &'static str, delay: Duration) -> Web {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
        let w = Web {
            addr: listener.local_addr().expect("address"),
            accepts: Arc::default(),
            requests: Arc::default(),
            header: Arc::default(),
        };
        let (accepts, requests, header) = (w.accepts.clone(), w.requests.clone(), w.header.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                accepts.fetch_add(1, Ordering::Relaxed);
                let (requests, header) = (requests.clone(), header.clone());
                thread::spawn(move || serve(conn, name, delay, &requests, &header));
            }
        });
        w
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }

    fn set_header(&self, line: &str) {
        *self.header.lock().expect("header") = line.to_string();
    }
}

fn serve(mut conn: TcpStream, name: &str, delay: Duration, requests: &AtomicUsize, header: &Mutex<String>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            requests.fetch_add(1, Ordering::Relaxed);
            thread::sleep(delay);
            let extra = header.lock().expect("header").clone();
            let extra = if extra.is_empty() {
                extra
            } else {
                format!("{extra}\r\n")
            };
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{extra}\r\n{name}", name.len());
            if conn.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The proxy's config: upstream `b` of `servers` (and `extra` directives), the API and the metrics.
fn config(listen: SocketAddr, servers: &str, extra: &str) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; {servers} {extra} }}\n server {{ listen {listen}; \
         location / {{ proxy_pass http://b; }} location /api/ {{ api write=on; }} \
         location = /metrics {{ metrics; }} }}\n}}\n"
    )
}

/// The proxy on runtime `rt` (0 tokio, 1 glommio) with its health and agent checkers running, as the server starts
/// them.
fn start(rt: usize, text: &str) -> Proxy {
    let p = support::api_client::start(rt, text);
    p.shared
        .control
        .start_health(p.shared.snapshot.load_full())
        .expect("the checkers start");
    p
}

/// Peer `addr` of upstream `b` in the API.
fn peer(listen: SocketAddr, addr: SocketAddr) -> Value {
    let (status, v) = api(listen, "GET", "/api/9/http/upstreams/b", "");
    assert_eq!(status, 200, "{v}");
    let peers = v["peers"].as_array().cloned().unwrap_or_default();
    peers
        .into_iter()
        .find(|p| p["server"] == addr.to_string())
        .unwrap_or_else(|| panic!("no peer {addr} in {v}"))
}

/// `n` requests, one connection each: how many answers were 200, and the bodies.
fn requests(listen: SocketAddr, n: usize) -> (usize, Vec<String>) {
    let answers: Vec<_> = (0..n).map(|_| get(listen, "/")).collect();
    let ok = answers
        .iter()
        .filter(|r| r.as_ref().is_some_and(|r| r.status == 200))
        .count();
    (ok, answers.into_iter().flatten().map(|r| r.text()).collect())
}

fn count(bodies: &[String], name: &str) -> usize {
    bodies.iter().filter(|b| *b == name).count()
}

#[test]
fn the_picks_follow_the_agents_within_one_interval_without_a_failed_request() {
    for rt in 0..2 {
        let (a, b) = (Web::start("a", Duration::ZERO), Web::start("b", Duration::ZERO));
        let (aa, ab) = (Agent::start("100%"), Agent::start("100%"));
        let listen = free_addr();
        let servers = format!(
            "server {} weight=10 agent_port={} agent_inter=200ms; server {} weight=10 agent_port={} agent_inter=200ms;",
            a.addr,
            aa.addr.port(),
            b.addr,
            ab.addr.port()
        );
        let p = start(rt, &config(listen, &servers, ""));
        wait_for(Duration::from_secs(5), "the agents asked", || {
            aa.asked() > 0 && ab.asked() > 0
        });
        let (ok, bodies) = requests(listen, 40);
        assert_eq!(
            (ok, count(&bodies, "a"), count(&bodies, "b")),
            (40, 20, 20),
            "runtime {rt}"
        );
        let v = peer(listen, a.addr);
        assert_eq!(
            (&v["weight"], &v["weight_source"]),
            (&json!(10), &json!("agent")),
            "{v}"
        );
        let generation = p.shared.control_stats().generation;

        // a client keeps asking through the change: not one request may fail
        let stop = Arc::new(AtomicBool::new(false));
        let client = {
            let stop = stop.clone();
            thread::spawn(move || {
                let (mut sent, mut failed) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    sent += 1;
                    if get(listen, "/").is_none_or(|r| r.status != 200) {
                        failed += 1;
                    }
                }
                (sent, failed)
            })
        };
        let t0 = Instant::now();
        aa.say("weight:30");
        ab.say("weight:10 # b stays");
        wait_for(Duration::from_secs(5), "a's new weight", || {
            peer(listen, a.addr)["weight"] == 30
        });
        let took = t0.elapsed();
        assert!(took < INTER + Duration::from_millis(600), "runtime {rt}: took {took:?}");
        thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let (sent, failed) = client.join().expect("client");
        assert!(sent > 0 && failed == 0, "runtime {rt}: {failed} of {sent} failed");
        let c = p.shared.control_stats();
        assert!(c.generation > generation && c.agent_changes >= 1, "{c:?}");
        assert_eq!(c.reloads, 0, "no reload");

        // 3:1 now; effective weights have ramped up after 40 requests
        requests(listen, 40);
        let (a0, b0) = (a.requests(), b.requests());
        let (ok, _) = requests(listen, 80);
        let (da, db) = (a.requests() - a0, b.requests() - b0);
        assert_eq!(ok, 80);
        assert!((58..=62).contains(&da) && da + db == 80, "runtime {rt}: a {da}, b {db}");
        let v = peer(listen, a.addr);
        assert_eq!(
            (&v["weight"], &v["weight_source"]),
            (&json!(30), &json!("agent")),
            "{v}"
        );
        let (status, servers) = api(listen, "GET", "/api/9/http/upstreams/b/servers", "");
        assert_eq!(status, 200);
        assert_eq!(servers[0]["weight"], 30, "{servers}");
        assert_eq!(servers[0]["weight_source"], "agent", "{servers}");
        let metrics = get(listen, "/metrics").expect("metrics").text();
        let line = format!(
            "corelb_upstream_peer_weight{{upstream=\"b\",peer=\"{0}\",server=\"{0}\",backup=\"false\",source=\"agent\"}} 30",
            a.addr
        );
        assert!(metrics.lines().any(|l| l == line), "no {line:?} in\n{metrics}");
    }
}

#[test]
fn down_stays_until_the_agent_says_up_and_a_silent_agent_changes_nothing() {
    for rt in 0..2 {
        let (a, b) = (Web::start("a", Duration::ZERO), Web::start("b", Duration::ZERO));
        let aa = Agent::start("weight:3");
        let listen = free_addr();
        let servers = format!(
            "server {} agent_port={} agent_inter=200ms; server {};",
            a.addr,
            aa.addr.port(),
            b.addr
        );
        let _p = start(rt, &config(listen, &servers, ""));
        wait_for(Duration::from_secs(5), "weight 3", || {
            peer(listen, a.addr)["weight"] == 3
        });
        aa.say("down");
        wait_for(Duration::from_secs(5), "a down", || {
            peer(listen, a.addr)["state"] == "unhealthy"
        });
        let (ok, bodies) = requests(listen, 10);
        assert_eq!((ok, count(&bodies, "b")), (10, 10), "runtime {rt}");
        // `ready` is the administrative state: it does not undo the agent's `down`
        aa.say("ready");
        let asked = aa.asked();
        wait_for(Duration::from_secs(5), "asked again", || aa.asked() >= asked + 2);
        assert_eq!(peer(listen, a.addr)["state"], "unhealthy");
        aa.say("up");
        wait_for(Duration::from_secs(5), "a up", || peer(listen, a.addr)["state"] == "up");
        let (ok, bodies) = requests(listen, 8);
        assert_eq!(
            (ok, count(&bodies, "a"), count(&bodies, "b")),
            (8, 6, 2),
            "runtime {rt}"
        );
        aa.say("maint");
        wait_for(Duration::from_secs(5), "a in maint", || {
            peer(listen, a.addr)["state"] == "down"
        });
        aa.say("drain");
        wait_for(Duration::from_secs(5), "a draining", || {
            peer(listen, a.addr)["state"] == "draining"
        });
        let (ok, bodies) = requests(listen, 4);
        assert_eq!((ok, count(&bodies, "b")), (4, 4));
        aa.say("ready");
        wait_for(Duration::from_secs(5), "a back", || {
            peer(listen, a.addr)["state"] == "up"
        });
        // 50% of the configured weight 1, rounded down: 0 takes no new requests (draining)
        aa.say("50%");
        wait_for(Duration::from_secs(5), "weight 0 drains", || {
            peer(listen, a.addr)["state"] == "draining"
        });
        aa.say("weight:2");
        wait_for(Duration::from_secs(5), "weight 2", || {
            peer(listen, a.addr)["weight"] == 2
        });
        assert_eq!(peer(listen, a.addr)["state"], "up");

        // a hung agent, then a gone one: nothing changes
        aa.say("");
        let asked = aa.asked();
        wait_for(Duration::from_secs(5), "asked while hung", || aa.asked() >= asked + 2);
        drop(aa);
        thread::sleep(INTER * 3);
        let v = peer(listen, a.addr);
        assert_eq!(
            (&v["weight"], &v["state"]),
            (&json!(2), &json!("up")),
            "runtime {rt}: {v}"
        );
        let (ok, _) = requests(listen, 6);
        assert_eq!(ok, 6);
    }
}

#[test]
fn maxconn_sets_the_effective_max_conns() {
    for rt in 0..2 {
        let slow = Web::start("slow", Duration::from_millis(400));
        let agent = Agent::start("maxconn:1");
        let listen = free_addr();
        let servers = format!(
            "server {} agent_port={} agent_inter=200ms;",
            slow.addr,
            agent.addr.port()
        );
        let _p = start(rt, &config(listen, &servers, ""));
        wait_for(Duration::from_secs(5), "max_conns 1", || {
            peer(listen, slow.addr)["max_conns"] == 1
        });
        let two: Vec<_> = (0..2)
            .map(|i| {
                thread::sleep(Duration::from_millis(100 * i));
                thread::spawn(move || get(listen, "/").map(|r| r.status))
            })
            .collect();
        let mut statuses: Vec<_> = two.into_iter().map(|t| t.join().expect("client")).collect();
        statuses.sort();
        assert_eq!(statuses, [Some(200), Some(502)], "runtime {rt}");
        agent.say("maxconn:5");
        wait_for(Duration::from_secs(5), "max_conns 5", || {
            peer(listen, slow.addr)["max_conns"] == 5
        });
    }
}

#[test]
fn load_reports_from_the_agent_and_a_reload_keeps_them() {
    for rt in 0..2 {
        let (a, b) = (Web::start("a", Duration::ZERO), Web::start("b", Duration::ZERO));
        let (aa, ab) = (Agent::start("cpu=0.9 mem=0.5"), Agent::start("cpu=90% mem=50%"));
        let listen = free_addr();
        let servers = format!(
            "server {} agent_port={} agent_inter=200ms; server {} agent_port={} agent_inter=200ms;",
            a.addr,
            aa.addr.port(),
            b.addr,
            ab.addr.port()
        );
        let text = config(listen, &servers, "load_weight scale=100;");
        let p = start(rt, &text);
        // issue 13's formula with scale 100: 1 / (0.9 × 0.6 + 0.5 × 0.4 + 0.1) × 100 = 119.05 -> 119
        wait_for(Duration::from_secs(5), "a's load weight", || {
            peer(listen, a.addr)["weight"] == 119
        });
        wait_for(Duration::from_secs(5), "b's load weight", || {
            peer(listen, b.addr)["weight"] == 119
        });
        // a silent agent's weight is kept through a reload (to the default formula: 1 / 0.84 × 10 = 11.9 -> 11)
        aa.say("");
        let reload = config(listen, &servers, "");
        let reloaded = p.shared.apply(corelb_engine::control::ChangeKind::Reload, |_| {
            Ok(support::api_client::config(&reload))
        });
        assert!(reloaded.is_ok(), "{reloaded:?}");
        let v = peer(listen, a.addr);
        assert_eq!(
            (&v["weight"], &v["weight_source"]),
            (&json!(119), &json!("agent")),
            "{v}"
        );
        ab.say("cpu=0.9 mem=0.5");
        aa.say("cpu=0.1 mem=0.1");
        // 1 / (0.06 + 0.04 + 0.1) × 10 = 50
        wait_for(Duration::from_secs(5), "a's new load weight", || {
            peer(listen, a.addr)["weight"] == 50
        });
        // b's agent says what a's said before: its weight under the reloaded (default) formula
        wait_for(Duration::from_secs(5), "b's weight", || {
            peer(listen, b.addr)["weight"] == 11
        });
        let (ok, _) = requests(listen, 20);
        assert_eq!(ok, 20, "runtime {rt}");
        // a reload without the agent takes its weight away
        let plain = config(listen, &format!("server {}; server {};", a.addr, b.addr), "");
        p.shared
            .apply(corelb_engine::control::ChangeKind::Reload, |_| {
                Ok(support::api_client::config(&plain))
            })
            .expect("reload");
        let v = peer(listen, a.addr);
        assert_eq!((&v["weight"], v.get("weight_source")), (&json!(1), None), "{v}");
    }
}

#[test]
fn the_endpoint_load_metrics_header_sets_the_weights() {
    for rt in 0..2 {
        let (a, b) = (Web::start("a", Duration::ZERO), Web::start("b", Duration::ZERO));
        a.set_header("Endpoint-Load-Metrics: TEXT cpu_utilization=0.3, mem_utilization=0.5");
        b.set_header("endpoint-load-metrics: TEXT cpu_utilization=0.9, mem_utilization=0.5");
        let listen = free_addr();
        let servers = format!("server {}; server {};", a.addr, b.addr);
        let p = start(
            rt,
            &config(listen, &servers, "endpoint_load_metrics on interval=200ms;"),
        );
        let (ok, _) = requests(listen, 4);
        assert_eq!(ok, 4);
        // 1 / (0.18 + 0.2 + 0.1) × 10 = 20.8 -> 20; 1 / 0.84 × 10 = 11.9 -> 11
        wait_for(Duration::from_secs(5), "a's weight", || {
            peer(listen, a.addr)["weight"] == 20
        });
        wait_for(Duration::from_secs(5), "b's weight", || {
            peer(listen, b.addr)["weight"] == 11
        });
        assert_eq!(peer(listen, a.addr)["weight_source"], "agent");
        requests(listen, 31);
        let (a0, b0) = (a.requests(), b.requests());
        let (ok, _) = requests(listen, 62);
        let (da, db) = (a.requests() - a0, b.requests() - b0);
        assert_eq!(ok, 62);
        assert!((38..=42).contains(&da) && da + db == 62, "runtime {rt}: a {da}, b {db}");
        // without the header the last report stands
        a.set_header("");
        let g = p.shared.control_stats().generation;
        requests(listen, 4);
        thread::sleep(INTER * 3);
        assert_eq!(peer(listen, a.addr)["weight"], 20);
        assert_eq!(p.shared.control_stats().generation, g, "no change, no new generation");
    }
}

/// One stream session through `listen`: sends `ping` and reads its echo.
fn session(listen: SocketAddr) -> Vec<u8> {
    let mut c = TcpStream::connect(listen).expect("connect to the stream proxy");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(b"ping").expect("send");
    let mut out = vec![0u8; 4];
    match c.read_exact(&mut out) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

#[test]
fn stream_upstreams_take_agents_too() {
    for rt in 0..2 {
        let (e1, s1) = support::backend::tcp_echo();
        let (e2, s2) = support::backend::tcp_echo();
        let agent = Agent::start("weight:3");
        let (listen, web) = (free_addr(), free_addr());
        let text = format!(
            "events {{}}\nhttp {{ server {{ listen {web}; location /api/ {{ api; }} }} }}\nstream {{\n upstream s {{ \
             zone s 64k; server {e1} agent_port={} agent_inter=200ms; server {e2}; }}\n server {{ listen {listen}; \
             proxy_pass s; }}\n}}\n",
            agent.addr.port()
        );
        let _p = start(rt, &text);
        let stream_peer = |addr: SocketAddr| {
            let (status, v) = api(web, "GET", "/api/9/stream/upstreams/s", "");
            assert_eq!(status, 200, "{v}");
            let peers = v["peers"].as_array().cloned().unwrap_or_default();
            peers
                .into_iter()
                .find(|p| p["server"] == addr.to_string())
                .expect("the peer")
        };
        wait_for(Duration::from_secs(5), "weight 3", || stream_peer(e1)["weight"] == 3);
        let before = (s1.accepts.load(Ordering::Relaxed), s2.accepts.load(Ordering::Relaxed));
        for _ in 0..8 {
            assert_eq!(session(listen), b"ping");
        }
        let after = (s1.accepts.load(Ordering::Relaxed), s2.accepts.load(Ordering::Relaxed));
        assert_eq!((after.0 - before.0, after.1 - before.1), (6, 2), "runtime {rt}");
        agent.say("down");
        wait_for(Duration::from_secs(5), "e1 down", || {
            stream_peer(e1)["state"] == "unhealthy"
        });
        for _ in 0..4 {
            assert_eq!(session(listen), b"ping");
        }
        assert_eq!(
            s1.accepts.load(Ordering::Relaxed),
            after.0,
            "runtime {rt}: nothing to the downed peer"
        );
    }
}

#[test]
fn a_reweigh_keeps_the_keepalive_connections() {
    for rt in 0..2 {
        let a = Web::start("a", Duration::ZERO);
        let agent = Agent::start("weight:2");
        let listen = free_addr();
        let servers = format!("server {} agent_port={} agent_inter=200ms;", a.addr, agent.addr.port());
        let text = config(listen, &servers, "keepalive 4;").replace(
            "location / { proxy_pass http://b; }",
            "location / { proxy_pass http://b; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
        );
        let p = start(rt, &text);
        wait_for(Duration::from_secs(5), "weight 2", || {
            peer(listen, a.addr)["weight"] == 2
        });
        assert_eq!(requests(listen, 2).0, 2);
        assert_eq!(
            a.accepts.load(Ordering::Relaxed),
            1,
            "runtime {rt}: one kept connection"
        );
        let generation = p.shared.control_stats().generation;
        agent.say("weight:5");
        wait_for(Duration::from_secs(5), "weight 5", || {
            peer(listen, a.addr)["weight"] == 5
        });
        assert!(p.shared.control_stats().generation > generation);
        assert_eq!(requests(listen, 2).0, 2);
        assert_eq!(
            a.accepts.load(Ordering::Relaxed),
            1,
            "runtime {rt}: the pool survived the new generation"
        );
    }
}
