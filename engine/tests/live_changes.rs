//! Everything live at once, on two shards, for a bounded time: keepalive clients, API changes (weights, drain),
//! reloads of the config with other weights, Prometheus scrapes, and an access log. No client sees an error, every
//! scrape parses, and the access log has exactly one line per proxied request. Both runtimes.

mod support;

use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use prometheus_parse::Scrape;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::api_client::{api, config};
use support::backend::{Backend, Mode};
use support::{free_addr, get, glommio_usable, Client, Proxy};

/// How long the changes run at least; then until each kind has run its minimum (bounded by `LIMIT`), so that a
/// loaded machine lengthens the run instead of failing it.
const RUN: Duration = Duration::from_secs(3);
const LIMIT: Duration = Duration::from_secs(120);
const CLIENTS: usize = 4;
/// The least of each: proxied requests, API rounds, reloads, scrapes.
const MIN: [u64; 4] = [100, 10, 5, 5];

/// The config, with the first peer at `weight`.
fn text(listen: SocketAddr, peers: &[SocketAddr; 3], log: &Path, weight: u32) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; server {} weight={weight}; server {}; server {}; keepalive 8; }}\n \
         server {{ listen {listen}; access_log {} combined;\n  location / {{ proxy_pass http://b; \
         proxy_http_version 1.1; proxy_set_header Connection \"\"; }}\n  \
         location /api/ {{ access_log off; api write=on; }}\n  location = /metrics {{ access_log off; metrics; }} }}\n}}\n",
        peers[0],
        peers[1],
        peers[2],
        log.display()
    )
}

/// Keepalive requests until `stop` (a new connection when the proxy closes one, as after `keepalive_requests`);
/// (answers 200, anything else).
fn client(listen: SocketAddr, stop: &AtomicBool, served: &AtomicU64) -> (u64, u64) {
    let (mut ok, mut bad) = (0, 0);
    let mut c = Client::connect(listen);
    while !stop.load(Ordering::Relaxed) {
        c.send(b"GET / HTTP/1.1\r\nHost: live\r\n\r\n");
        match c.read_response() {
            Some(r) if r.status == 200 => {
                ok += 1;
                served.fetch_add(1, Ordering::Relaxed);
                if r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
                    c = Client::connect(listen);
                }
            }
            other => {
                bad += 1;
                eprintln!("failed: {:?}", other.map(|r| (r.status, r.text())));
                c = Client::connect(listen);
            }
        }
    }
    (ok, bad)
}

/// Repeats `step` every `every` until `stop`, counting the runs in `done`; how many times it ran.
fn repeat(stop: &AtomicBool, every: Duration, done: &AtomicU64, mut step: impl FnMut(u64)) -> u64 {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        step(n);
        n += 1;
        done.store(n, Ordering::Relaxed);
        thread::sleep(every);
    }
    n
}

fn temp_log(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-live-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join("access.log")
}

fn everything_at_once<R: Runtime>(tag: &str) {
    let backends: Vec<Backend> = (0..3).map(|i| Backend::start(&format!("p{i}"), Mode::Ok)).collect();
    let peers = [backends[0].addr, backends[1].addr, backends[2].addr];
    let listen = free_addr();
    let log = temp_log(tag);
    let proxy = Proxy::start::<R>(config(&text(listen, &peers, &log, 1)), 2);
    let shared = Arc::clone(&proxy.shared);
    let stop = Arc::new(AtomicBool::new(false));
    // served, API rounds, reloads, scrapes so far
    let progress: Arc<[AtomicU64; 4]> = Arc::new(Default::default());

    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (stop, progress) = (Arc::clone(&stop), Arc::clone(&progress));
            thread::spawn(move || client(listen, &stop, &progress[0]))
        })
        .collect();
    let changes = {
        let (stop, progress) = (Arc::clone(&stop), Arc::clone(&progress));
        thread::spawn(move || {
            repeat(&stop, Duration::from_millis(30), &progress[1], |n| {
                let (status, _) = api(
                    listen,
                    "PATCH",
                    "/api/9/http/upstreams/b/servers/1",
                    &format!("{{\"weight\":{}}}", 1 + n % 4),
                );
                assert_eq!(status, 200, "weight change {n}");
                let drain = format!("{{\"drain\":{}}}", n % 2 == 0);
                assert_eq!(api(listen, "PATCH", "/api/9/http/upstreams/b/servers/2", &drain).0, 200);
            })
        })
    };
    let reloads = {
        let (stop, shared, log, progress) = (
            Arc::clone(&stop),
            Arc::clone(&shared),
            log.clone(),
            Arc::clone(&progress),
        );
        thread::spawn(move || {
            repeat(&stop, Duration::from_millis(100), &progress[2], |n| {
                let next = config(&text(listen, &peers, &log, 1 + (n % 3) as u32));
                shared.apply(ChangeKind::Reload, |_| Ok(next)).expect("reload applies");
            })
        })
    };
    let scraper = {
        let (stop, progress) = (Arc::clone(&stop), Arc::clone(&progress));
        thread::spawn(move || {
            repeat(&stop, Duration::from_millis(50), &progress[3], |_| {
                let r = get(listen, "/metrics").expect("a scrape answer");
                assert_eq!(r.status, 200);
                let text = r.text();
                Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the scrape parses");
            })
        })
    };

    let started = Instant::now();
    thread::sleep(RUN);
    let counts = || -> Vec<u64> { progress.iter().map(|c| c.load(Ordering::Relaxed)).collect() };
    while counts().iter().zip(MIN).any(|(&n, least)| n < least) && started.elapsed() < LIMIT {
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut bad) = (0, 0);
    for c in clients {
        let (o, b) = c.join().expect("client thread");
        ok += o;
        bad += b;
    }
    let changed = changes.join().expect("API thread");
    let reloaded = reloads.join().expect("reload thread");
    scraper.join().expect("scraper thread");
    let elapsed = started.elapsed();

    assert_eq!(bad, 0, "{tag}: {bad} failed requests of {}", ok + bad);
    let scrapes = progress[3].load(Ordering::Relaxed);
    assert!(
        ok >= MIN[0] && changed >= MIN[1] && reloaded >= MIN[2] && scrapes >= MIN[3],
        "{tag}: in {elapsed:?}, {ok} requests, {changed} API rounds, {reloaded} reloads, {scrapes} scrapes"
    );
    assert!(shared.control_stats().reloads >= reloaded);
    assert!(
        shared.flush_access_logs(Duration::from_secs(10), true),
        "{tag}: the access log flushed"
    );
    let lines = std::fs::read_to_string(&log).expect("access log").lines().count() as u64;
    assert_eq!(lines, ok, "{tag}: one access log line per proxied request");
    drop(proxy);
    let _ = std::fs::remove_dir_all(log.parent().expect("dir"));
}

#[test]
fn reloads_api_changes_scrapes_and_logs_under_load_on_tokio() {
    everything_at_once::<Tokio>("tokio");
}

#[test]
fn reloads_api_changes_scrapes_and_logs_under_load_on_glommio() {
    if glommio_usable() {
        everything_at_once::<Glommio>("glommio");
    }
}
