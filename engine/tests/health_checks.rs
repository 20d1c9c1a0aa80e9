//! Active health checks and slow start end to end, on real loopback sockets: peers taken out and brought back by
//! probes, `mandatory`, `match` tests, stream TCP checks, and the config errors.

mod support;

use corelb_engine::config::{model::Config, parse_str};
use corelb_engine::health::HealthCheckers;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_shared_state::{PeerFlags, PeerSlot};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use support::{free_addr, get, Proxy};

/// How a [`Switchable`] backend answers.
#[derive(Debug, Clone)]
struct Answer {
    /// 0: close the connection without answering.
    status: u16,
    headers: String,
    body: String,
    /// Extra delay before answering a health probe.
    probe_delay: Duration,
}

impl Answer {
    fn status(status: u16, body: &str) -> Answer {
        Answer {
            status,
            headers: String::new(),
            body: body.into(),
            probe_delay: Duration::ZERO,
        }
    }
}

/// A backend whose answer can change while it runs; it counts client requests and health probes apart.
struct Switchable {
    addr: SocketAddr,
    answer: Arc<Mutex<Answer>>,
    clients: Arc<AtomicUsize>,
    probes: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Switchable {
    fn start(answer: Answer) -> Switchable {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a backend");
        let b = Switchable {
            addr: listener.local_addr().expect("address"),
            answer: Arc::new(Mutex::new(answer)),
            clients: Arc::default(),
            probes: Arc::default(),
            stop: Arc::default(),
        };
        let (answer, clients, probes, stop) = (b.answer.clone(), b.clients.clone(), b.probes.clone(), b.stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (answer, clients, probes) = (answer.clone(), clients.clone(), probes.clone());
                thread::spawn(move || serve(conn, &answer, &clients, &probes));
            }
        });
        b
    }

    fn set(&self, a: Answer) {
        *self.answer.lock().expect("answer lock") = a;
    }

    fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    fn probes(&self) -> usize {
        self.probes.load(Ordering::Relaxed)
    }
}

impl Drop for Switchable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn serve(mut conn: TcpStream, answer: &Mutex<Answer>, clients: &AtomicUsize, probes: &AtomicUsize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let probe = String::from_utf8_lossy(&head).contains("corelb-health-check");
    let a = answer
        .lock()
        .map(|a| a.clone())
        .unwrap_or_else(|_| Answer::status(0, ""));
    if probe {
        probes.fetch_add(1, Ordering::Relaxed);
        thread::sleep(a.probe_delay);
    } else {
        clients.fetch_add(1, Ordering::Relaxed);
    }
    if a.status == 0 {
        return;
    }
    let msg = format!(
        "HTTP/1.1 {} X\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n{}",
        a.status,
        a.headers,
        a.body.len(),
        a.body
    );
    let _ = conn.write_all(msg.as_bytes());
}

fn config(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/health.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The proxy and its health checkers, both stopped when dropped.
struct Running {
    proxy: Proxy,
    health: HealthCheckers,
}

fn run(text: &str) -> Running {
    let proxy = Proxy::start::<Tokio>(config(text), 1);
    let health = HealthCheckers::start(proxy.shared.snapshot.load_full()).expect("checkers start");
    Running { proxy, health }
}

impl Running {
    fn slot(&self, stream: bool, peer: usize) -> Arc<PeerSlot> {
        let snap = self.proxy.shared.snapshot.load();
        let plans = if stream { &snap.stream_plans } else { &snap.http_plans };
        plans[0].primary.peers[peer].slot.clone()
    }
}

/// The bound on a wait for a probe's effect: far above what it takes, so that a loaded machine cannot break it.
const WAIT: Duration = Duration::from_secs(30);

/// Waits (bounded) until `cond` holds; returns how long it took.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}

/// The bodies of `n` requests through the proxy (502s as "502").
fn spread(listen: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| match get(listen, "/") {
            Some(r) if r.status == 200 => r.text(),
            Some(r) => r.status.to_string(),
            None => "none".into(),
        })
        .collect()
}

fn count(picks: &[String], name: &str) -> usize {
    picks.iter().filter(|p| *p == name).count()
}

#[test]
fn a_failing_peer_is_taken_out_and_ramps_back_in_with_slow_start() {
    let a = Switchable::start(Answer::status(200, "a"));
    let b = Switchable::start(Answer::status(200, "b"));
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nhttp {{\n upstream u {{ zone u 64k; server {} weight=10 slow_start=20s; server {} weight=10; }}\n \
         server {{ listen {listen};\n  location / {{ proxy_pass http://u;\n   health_check interval=200ms fails=2 passes=2 \
         uri=/hc; }} }}\n}}\n",
        a.addr, b.addr
    ));
    let interval = Duration::from_millis(200);
    wait_for(WAIT, "first probes", || a.probes() >= 1 && b.probes() >= 1);
    let picks = spread(listen, 20);
    assert_eq!((count(&picks, "a"), count(&picks, "b")), (10, 10), "{picks:?}");

    // a starts failing: out within interval × fails (plus one interval of phase and some slack)
    a.set(Answer::status(500, "a"));
    let took = wait_for(WAIT, "a unhealthy", || {
        r.slot(false, 0).flags().intersects(PeerFlags::UNHEALTHY)
    });
    assert!(took <= interval * 3 + Duration::from_secs(10), "{took:?}");
    let before = a.clients();
    let picks = spread(listen, 20);
    assert_eq!(count(&picks, "b"), 20, "{picks:?}");
    assert_eq!(a.clients(), before, "an unhealthy peer gets no client request");

    // a recovers: back within interval × passes, and slow start keeps its share low at first
    a.set(Answer::status(200, "a"));
    let took = wait_for(WAIT, "a healthy", || !r.slot(false, 0).is_blocked());
    assert!(took <= interval * 3 + Duration::from_secs(10), "{took:?}");
    assert!(r.slot(false, 0).recovered_at() > 0);
    let picks = spread(listen, 22);
    // within the first seconds of a 20 s ramp a's weight is max(1, 10·t/20) ≤ 2 against b's 10
    assert!((1..=5).contains(&count(&picks, "a")), "{picks:?}");
    let health = r.slot(false, 0).stats().health;
    assert!(health.checks >= 5 && health.fails >= 2 && health.last_passed && health.last_status == 200);
    drop(r.health);
}

// Where a test needs a healthy peer to stay in, its check has fails=3: one probe late on a loaded machine (the
// probe's timeout is the interval) does not take the peer out.

#[test]
fn a_peer_that_closes_is_taken_out() {
    let a = Switchable::start(Answer::status(0, "a"));
    let b = Switchable::start(Answer::status(200, "b"));
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nhttp {{\n upstream u {{ zone u 64k; server {}; server {}; }}\n server {{ listen {listen};\n  \
         location / {{ proxy_pass http://u; proxy_next_upstream off; health_check interval=200ms fails=3; }} }}\n}}\n",
        a.addr, b.addr
    ));
    wait_for(WAIT, "a unhealthy", || r.slot(false, 0).is_blocked());
    let picks = spread(listen, 10);
    assert_eq!(count(&picks, "b"), 10, "{picks:?}");
    assert_eq!(a.clients(), 0);
    assert_eq!(r.slot(false, 0).stats().health.last_status, 0);
}

#[test]
fn mandatory_peers_get_no_traffic_before_their_first_passing_check() {
    let slow_fail = Answer {
        probe_delay: Duration::from_millis(1000),
        ..Answer::status(500, "a")
    };
    let a = Switchable::start(slow_fail);
    let b = Switchable::start(Answer::status(200, "b"));
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nhttp {{\n upstream u {{ zone u 64k; server {}; server {}; }}\n server {{ listen {listen};\n  \
         location / {{ proxy_pass http://u; health_check interval=2s mandatory; }} }}\n}}\n",
        a.addr, b.addr
    ));
    // the first round lasts as long as a's slow probe: everyone is still checking
    assert!(r.slot(false, 1).flags().intersects(PeerFlags::CHECKING));
    assert_eq!(spread(listen, 3), ["502", "502", "502"]);
    wait_for(WAIT, "b checked", || !r.slot(false, 1).is_blocked());
    let picks = spread(listen, 10);
    assert_eq!(count(&picks, "b"), 10, "{picks:?}");
    assert_eq!(a.clients(), 0, "a failed its first check: no traffic ever");
    assert!(r.slot(false, 0).flags().intersects(PeerFlags::UNHEALTHY));
}

#[test]
fn match_tests_status_headers_and_body() {
    let answer = |status: u16, headers: &str, body: &str| Answer {
        headers: headers.into(),
        ..Answer::status(status, body)
    };
    let good = Switchable::start(answer(200, "X-Ready: yes\r\n", "good: ready"));
    let no_header = Switchable::start(answer(200, "X-Ready: no\r\n", "no-header: ready"));
    let bad_body = Switchable::start(answer(200, "X-Ready: yes\r\n", "bad-body: busy"));
    let bad_status = Switchable::start(answer(503, "X-Ready: yes\r\n", "bad-status: ready"));
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nhttp {{\n match ready {{ status 200-299 304; header X-Ready = yes; header ! X-Broken; \
         body ~ \"ready$\"; }}\n upstream u {{ zone u 64k; server {}; server {}; server {}; server {}; }}\n \
         server {{ listen {listen};\n  location / {{ proxy_pass http://u; health_check interval=300ms fails=3 match=ready; }} \
         }}\n}}\n",
        good.addr, no_header.addr, bad_body.addr, bad_status.addr
    ));
    for (i, b) in [&good, &no_header, &bad_body, &bad_status].iter().enumerate() {
        wait_for(WAIT, "probed", || r.slot(false, i).stats().health.checks >= 3);
        assert!(b.probes() >= 1);
    }
    let blocked: Vec<bool> = (0..4).map(|i| r.slot(false, i).is_blocked()).collect();
    assert_eq!(blocked, [false, true, true, true]);
    let picks = spread(listen, 8);
    assert_eq!(count(&picks, "good: ready"), 8, "{picks:?}");
}

#[test]
fn stream_tcp_checks_take_out_a_dead_port() {
    let (live, _stats) = support::backend::tcp_echo();
    let dead = support::dead_addr();
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nstream {{\n upstream s {{ zone s 64k; server {live}; server {dead}; }}\n server {{ listen \
         {listen}; proxy_pass s; health_check interval=200ms fails=1; }}\n}}\n"
    ));
    wait_for(WAIT, "dead port unhealthy", || r.slot(true, 1).is_blocked());
    assert!(!r.slot(true, 0).is_blocked());
    let selected = r.slot(true, 1).stats().selected;
    for i in 0..6u8 {
        let mut c = TcpStream::connect(listen).expect("connect to proxy");
        c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        c.write_all(&[i; 4]).expect("send");
        let mut back = [0u8; 4];
        c.read_exact(&mut back).expect("echo");
        assert_eq!(back, [i; 4]);
    }
    assert_eq!(
        r.slot(true, 1).stats().selected,
        selected,
        "the dead peer was never tried"
    );
}

#[test]
fn config_errors_name_the_line() {
    let cases = [
        (
            "http {\n upstream u { server 127.0.0.1:1; }\n server { listen 127.0.0.1:1;\n location / { proxy_pass \
             http://u;\n health_check; } }\n}\n",
            "\"health_check\" requires upstream \"u\" to have a \"zone\" in /etc/corelb/health.conf:6",
        ),
        (
            "http {\n upstream u { zone u 64k; server 127.0.0.1:1; }\n server { listen 127.0.0.1:1;\n location / { \
             proxy_pass http://u;\n health_check match=nope; } }\n}\n",
            "match \"nope\" not found in /etc/corelb/health.conf:6",
        ),
        (
            "http {\n upstream u { zone u 64k; server 127.0.0.1:1; }\n server { listen 127.0.0.1:1;\n location / { \
             proxy_pass http://u;\n health_check fails=0; } }\n}\n",
            "invalid parameter \"fails=0\" in /etc/corelb/health.conf:6",
        ),
        (
            "http {\n server { listen 127.0.0.1:1;\n location / {\n health_check; } }\n}\n",
            "\"health_check\" requires \"proxy_pass\" in its location in /etc/corelb/health.conf:5",
        ),
        (
            "http {\n match m {\n status 2xx; }\n}\n",
            "invalid parameter \"2xx\" in /etc/corelb/health.conf:4",
        ),
        (
            "http {\n upstream u {\n ip_hash;\n server 127.0.0.1:1 slow_start=30s; }\n}\n",
            "balancing method does not support parameter \"slow_start=30s\" in /etc/corelb/health.conf:5",
        ),
        (
            "http {\n upstream u {\n server 127.0.0.1:1 slow_start=30s;\n hash $uri; }\n}\n",
            "balancing method does not support parameter \"slow_start=30s\" in /etc/corelb/health.conf:4",
        ),
        (
            "stream {\n upstream s { server 127.0.0.1:1; }\n server { listen 127.0.0.1:2; proxy_pass s;\n \
             health_check; }\n}\n",
            "\"health_check\" requires upstream \"s\" to have a \"zone\" in /etc/corelb/health.conf:5",
        ),
    ];
    for (body, msg) in cases {
        let text = format!("events {{}}\n{body}");
        let e = parse_str(&text, Path::new("/etc/corelb/health.conf")).expect_err(body);
        assert_eq!(e.to_string(), format!("[emerg] {msg}"), "{body}");
    }
}

#[test]
fn server_start_runs_the_checkers_and_stops_them() {
    let a = Switchable::start(Answer::status(500, "a"));
    let b = Switchable::start(Answer::status(200, "b"));
    let listen = free_addr();
    let conf = config(&format!(
        "events {{}}\nhttp {{\n upstream u {{ zone u 64k; server {}; server {}; }}\n server {{ listen {listen};\n  \
         location / {{ proxy_pass http://u; health_check interval=200ms fails=3; }} }}\n}}\n",
        a.addr, b.addr
    ));
    let running = corelb_engine::server::start(conf, corelb_engine::config::model::RuntimeKind::Tokio).expect("start");
    let slot = running.shared.snapshot.load().http_plans[0].primary.peers[0]
        .slot
        .clone();
    wait_for(WAIT, "a unhealthy", || slot.is_blocked());
    assert_eq!(count(&spread(listen, 4), "b"), 4);
    running.drain_and_join();
    // stopped: no more probes
    let probes = a.probes();
    thread::sleep(Duration::from_millis(500));
    assert_eq!(a.probes(), probes);
}

#[test]
fn port_sends_the_probes_elsewhere() {
    let a = Switchable::start(Answer::status(200, "a"));
    let b = Switchable::start(Answer::status(200, "b"));
    let status_page = Switchable::start(Answer::status(200, "up"));
    let listen = free_addr();
    let r = run(&format!(
        "events {{}}\nhttp {{\n upstream u {{ zone u 64k; server {}; server {}; }}\n server {{ listen {listen};\n  \
         location / {{ proxy_pass http://u; health_check interval=200ms fails=3 port={}; }} }}\n}}\n",
        a.addr,
        b.addr,
        status_page.addr.port()
    ));
    wait_for(WAIT, "probes on the port", || status_page.probes() >= 2);
    assert_eq!((a.probes(), b.probes()), (0, 0));
    // fails=3: one probe late on a loaded machine (its timeout is the 200 ms interval) does not take a peer out
    let picks = spread(listen, 4);
    assert_eq!((count(&picks, "a"), count(&picks, "b")), (2, 2), "{picks:?}");
    status_page.set(Answer::status(500, "down"));
    wait_for(WAIT, "both unhealthy", || {
        r.slot(false, 0).is_blocked() && r.slot(false, 1).is_blocked()
    });
    assert_eq!(spread(listen, 2), ["502", "502"]);
}

#[test]
fn the_model_of_a_checked_location() {
    let c = config(
        "events {}\nhttp {\n upstream u { zone u 64k; server 127.0.0.1:1 slow_start=30s; }\n server { listen \
         127.0.0.1:2;\n  location / { proxy_pass http://u; proxy_connect_timeout 2s;\n   health_check interval=10s \
         fails=3 passes=2 uri=/status match=late mandatory; } }\n match late { status 200; }\n}\n",
    );
    let http = c.http.expect("http");
    assert_eq!(http.upstreams[0].servers[0].slow_start, Duration::from_secs(30));
    let hc = &http.health.checks[0];
    assert_eq!((hc.upstream, hc.fails, hc.passes, hc.mandatory), (0, 3, 2, true));
    assert_eq!(
        (hc.uri.as_str(), hc.host.as_str(), hc.matcher),
        ("/status", "u", Some(0))
    );
    assert_eq!(
        (hc.interval, hc.connect_timeout),
        (Duration::from_secs(10), Duration::from_secs(2))
    );
    assert_eq!(hc.span.line, 6);
    assert_eq!(http.health.matches[0].name, "late");
}
