//! Hot reload through the control plane, in process on real loopback sockets: no request lost and no connection
//! reset under keepalive load while reloads change weights and peers (both runtimes, 2 shards), keepalive
//! connections moving to the new config at their next request, listeners following the config, and the zone
//! state of unchanged peers (`conns`, `fails`, slow start, health) carried over.

mod support;

use corelb_engine::config::model::Config;
use corelb_engine::config::parse_str;
use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use corelb_engine::snapshot::Snapshot;
use corelb_engine::state::Shared;
use corelb_shared_state::{PeerFlags, PeerSlot, Zone};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Client, Proxy};

fn config(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/reload.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// An http block: one upstream `u` (with a zone and upstream keepalive) over `servers`, and one server per listen
/// address proxying to it.
fn proxy_conf(listens: &[SocketAddr], servers: &str, check: &str) -> String {
    let servers_blocks: String = listens
        .iter()
        .map(|l| {
            format!(
                "server {{ listen {l}; location / {{ proxy_pass http://u; proxy_http_version 1.1; \
                 proxy_set_header Connection \"\"; {check} }} }}\n"
            )
        })
        .collect();
    format!("events {{}}\nhttp {{\nupstream u {{ zone u 64k; {servers} keepalive 8; }}\n{servers_blocks}}}\n")
}

fn reload(shared: &Shared, text: &str) -> u64 {
    let next = config(text);
    shared
        .apply(ChangeKind::Reload, move |_| Ok(next))
        .unwrap_or_else(|e| panic!("reload refused: {e}"))
}

fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

fn get_on(c: &mut Client) -> Option<(u16, String)> {
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    c.read_response().map(|r| (r.status, r.text()))
}

/// What the load of one client saw.
#[derive(Debug, Default)]
struct Seen {
    failures: usize,
    names: BTreeSet<String>,
}

/// `n` requests on one keepalive connection, counted in `served`; any error, other status or close is a failure.
fn keepalive_run(c: &mut Client, n: usize, seen: &mut Seen, served: &AtomicUsize) {
    for _ in 0..n {
        match get_on(c) {
            Some((200, name)) => {
                seen.names.insert(name);
                served.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                seen.failures += 1;
                eprintln!("keepalive client: {other:?}");
                return;
            }
        }
    }
}

fn reload_under_load<R: Runtime>() {
    let names = ["a", "b", "c", "d"];
    let backends: Vec<Backend> = names.iter().map(|n| Backend::start(n, Mode::Ok)).collect();
    let line = |i: usize, params: &str| format!("server {} {params};", backends[i].addr);
    let listen = free_addr();
    let conf = |servers: String| proxy_conf(&[listen], &servers, "");
    let steps = [
        conf(format!("{} {} {}", line(0, ""), line(1, ""), line(2, ""))),
        conf(format!("{} {} {}", line(0, "weight=3"), line(1, ""), line(2, ""))),
        conf(format!(
            "{} {} {} {}",
            line(0, "weight=3"),
            line(1, "weight=2"),
            line(2, ""),
            line(3, "")
        )),
        conf(format!("{} {} {}", line(0, ""), line(1, "weight=2"), line(3, ""))),
        conf(format!("{} {}", line(0, ""), line(1, "weight=4"))),
    ];
    let proxy = Proxy::start::<R>(config(&steps[0]), 2);
    let (clients, per_client) = (4, 600);
    let done_loading = Arc::new(Barrier::new(clients + 1));
    let final_applied = Arc::new(Barrier::new(clients + 1));
    let served = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let (loaded, applied, served) = (done_loading.clone(), final_applied.clone(), served.clone());
            thread::spawn(move || {
                let mut c = Client::connect(listen);
                let mut before = Seen::default();
                keepalive_run(&mut c, per_client, &mut before, &served);
                loaded.wait();
                applied.wait();
                // The same connection, after the last reload: the new config answers.
                let mut after = Seen::default();
                keepalive_run(&mut c, 30, &mut after, &AtomicUsize::new(0));
                (before, after)
            })
        })
        .collect();
    // New connections all along: an unchanged listen address refuses none during the reloads.
    let stop_fresh = Arc::new(AtomicUsize::new(0));
    let fresh = {
        let stop = stop_fresh.clone();
        thread::spawn(move || {
            let (mut ok, mut failed) = (0usize, 0usize);
            while stop.load(Ordering::Relaxed) == 0 {
                match support::get(listen, "/") {
                    Some(r) if r.status == 200 => ok += 1,
                    other => {
                        eprintln!("fresh connection: {other:?}");
                        failed += 1;
                    }
                }
            }
            (ok, failed)
        })
    };
    // Each reload comes once the keepalive clients have made 40 more requests, not after a guessed delay: c, in
    // the first three generations, is served before the fourth removes it.
    let mut generations = Vec::new();
    for step in &steps[1..steps.len() - 1] {
        let target = served.load(Ordering::Relaxed) + 40;
        wait_for(Duration::from_secs(60), "40 more keepalive requests", || {
            served.load(Ordering::Relaxed) >= target
        });
        generations.push(reload(&proxy.shared, step));
    }
    done_loading.wait();
    generations.push(reload(&proxy.shared, &steps[steps.len() - 1]));
    final_applied.wait();
    let results: Vec<(Seen, Seen)> = handles.into_iter().map(|h| h.join().expect("client")).collect();
    stop_fresh.store(1, Ordering::Relaxed);
    let (fresh_ok, fresh_failed) = fresh.join().expect("fresh client");
    assert_eq!(generations, [2, 3, 4, 5], "{}", R::NAME);
    let failures: usize = results.iter().map(|(b, a)| b.failures + a.failures).sum();
    assert_eq!(failures, 0, "{}: failed or reset requests under reload", R::NAME);
    assert_eq!(fresh_failed, 0, "{}: refused or failed new connections", R::NAME);
    assert!(fresh_ok > 0, "{}", R::NAME);
    let before: BTreeSet<String> = results.iter().flat_map(|(b, _)| b.names.clone()).collect();
    assert!(
        before.contains("c"),
        "{}: c served before it was removed: {before:?}",
        R::NAME
    );
    for (_, after) in &results {
        let allowed: BTreeSet<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        assert!(
            after.names.is_subset(&allowed) && !after.names.is_empty(),
            "{}: a keepalive connection stayed on an old config: {:?}",
            R::NAME,
            after.names
        );
    }
    assert_eq!(proxy.shared.control_stats().reloads, 4);
}

#[test]
fn reloads_under_keepalive_load_lose_no_request_tokio() {
    reload_under_load::<Tokio>();
}

#[test]
fn reloads_under_keepalive_load_lose_no_request_glommio() {
    if glommio_usable() {
        reload_under_load::<Glommio>();
    }
}

fn listeners_follow<R: Runtime>() {
    let backend = Backend::start("a", Mode::Ok);
    let servers = format!("server {};", backend.addr);
    let (one, two) = (free_addr(), free_addr());
    let proxy = Proxy::start::<R>(config(&proxy_conf(&[one], &servers, "")), 2);
    let mut on_one = Client::connect(one);
    assert_eq!(get_on(&mut on_one), Some((200, "a".into())));
    // Add `two` (http) and `three` (a stream server): every shard binds them.
    let (echo, _) = support::backend::tcp_echo();
    let three = free_addr();
    let stream = format!("stream {{ upstream s {{ server {echo}; }} server {{ listen {three}; proxy_pass s; }} }}\n");
    reload(&proxy.shared, &(proxy_conf(&[one, two], &servers, "") + &stream));
    wait_for(Duration::from_secs(5), "the new address to listen", || {
        TcpStream::connect(two).is_ok()
    });
    assert_eq!(support::get(two, "/").map(|r| r.status), Some(200), "{}", R::NAME);
    wait_for(Duration::from_secs(5), "the stream address to listen", || {
        TcpStream::connect(three).is_ok()
    });
    let mut s = TcpStream::connect(three).expect("stream connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(b"ping").expect("send");
    let mut got = [0u8; 4];
    s.read_exact(&mut got).expect("echo");
    assert_eq!(&got, b"ping", "{}", R::NAME);
    // Remove `one`: no more connections there, while the keepalive connection accepted on it serves its next
    // request (and then closes: the config no longer has its server).
    reload(&proxy.shared, &proxy_conf(&[two], &servers, ""));
    wait_for(Duration::from_secs(5), "the removed address to refuse", || {
        TcpStream::connect(one).is_err()
    });
    on_one.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let last = on_one
        .read_response()
        .expect("the accepted connection answers its next request");
    assert_eq!((last.status, last.text()), (200, "a".to_string()), "{}", R::NAME);
    assert_eq!(last.header("connection").as_deref(), Some("close"), "{}", R::NAME);
    assert!(on_one.closed(), "{}", R::NAME);
    // `two` was kept: still serving.
    assert_eq!(support::get(two, "/").map(|r| r.status), Some(200));
}

#[test]
fn listeners_follow_the_config_tokio() {
    listeners_follow::<Tokio>();
}

#[test]
fn listeners_follow_the_config_glommio() {
    if glommio_usable() {
        listeners_follow::<Glommio>();
    }
}

#[test]
fn a_listen_address_held_elsewhere_fails_the_reload_and_the_old_config_serves() {
    let backend = Backend::start("a", Mode::Ok);
    let servers = format!("server {};", backend.addr);
    let one = free_addr();
    let held = TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let held_addr = held.local_addr().expect("address");
    let proxy = Proxy::start::<Tokio>(config(&proxy_conf(&[one], &servers, "")), 2);
    let next = config(&proxy_conf(&[one, held_addr], &servers, ""));
    let e = proxy
        .shared
        .apply(ChangeKind::Reload, move |_| Ok(next))
        .expect_err("the bind test refuses the reload");
    assert!(
        e.log_line().contains(&format!("bind() to {held_addr} failed (98:")),
        "{e}"
    );
    assert_eq!(proxy.shared.control_stats().generation, 1);
    assert_eq!(support::get(one, "/").map(|r| r.status), Some(200));
}

/// A backend for health probes and requests: answers `status` (after `delay_ms`), always closing.
struct Probed {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    delay_ms: Arc<AtomicU64>,
}

impl Probed {
    fn start(status: u16) -> Probed {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = Probed {
            addr: listener.local_addr().expect("address"),
            status: Arc::new(AtomicU16::new(status)),
            delay_ms: Arc::new(AtomicU64::new(0)),
        };
        let (status, delay) = (p.status.clone(), p.delay_ms.clone());
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (status, delay) = (status.clone(), delay.clone());
                thread::spawn(move || answer_once(conn, &status, &delay));
            }
        });
        p
    }
}

fn answer_once(mut conn: TcpStream, status: &AtomicU16, delay: &AtomicU64) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    thread::sleep(Duration::from_millis(delay.load(Ordering::Relaxed)));
    let s = status.load(Ordering::Relaxed);
    let _ = conn.write_all(format!("HTTP/1.1 {s} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
}

/// The control plane alone (no shards): a snapshot of `text` with its health checkers running.
fn control_plane(text: &str) -> Arc<Shared> {
    let zone = Arc::new(Zone::new());
    let snap = Snapshot::build(config(text), &zone, 1).expect("snapshot");
    let shared = Shared::new(snap, zone, 1);
    shared
        .control
        .start_health(shared.snapshot.load_full())
        .expect("checkers");
    shared
}

/// The slot of the peer at `addr` of upstream 0 (primary list) in the running snapshot.
fn slot(shared: &Shared, addr: SocketAddr) -> Arc<PeerSlot> {
    let snap = shared.snapshot.load();
    let plan = snap.http_plans.first().expect("upstream");
    let peer = plan.primary.peers.iter().find(|p| p.addr == addr).expect("peer");
    peer.slot.clone()
}

#[test]
fn zone_state_of_unchanged_peers_survives_a_reload() {
    let (a, b, c, d) = (
        Probed::start(200),
        Probed::start(500),
        Probed::start(200),
        Probed::start(200),
    );
    let listen = free_addr();
    let check = "health_check interval=200ms passes=3;";
    let servers = |extra: &str| {
        format!(
            "server {} max_fails=5 slow_start=30s {extra}; server {}; {}",
            a.addr,
            b.addr,
            if extra.is_empty() {
                format!("server {};", c.addr)
            } else {
                format!("server {};", d.addr)
            }
        )
    };
    let shared = control_plane(&proxy_conf(&[listen], &servers(""), check));
    let (sa, sb) = (slot(&shared, a.addr), slot(&shared, b.addr));
    wait_for(Duration::from_secs(5), "b unhealthy", || {
        sb.flags().intersects(PeerFlags::UNHEALTHY)
    });
    let held = [sa.try_acquire(0).expect("conn"), sa.try_acquire(0).expect("conn")];
    sa.record_failure(100);
    sa.record_failure(101);
    sa.mark_recovered(90);
    // weights change, c leaves, d comes
    let generation = reload(&shared, &proxy_conf(&[listen], &servers("weight=7"), check));
    assert_eq!(generation, 2);
    let (sa2, sb2) = (slot(&shared, a.addr), slot(&shared, b.addr));
    assert!(
        Arc::ptr_eq(&sa, &sa2) && Arc::ptr_eq(&sb, &sb2),
        "unchanged peers keep their slots"
    );
    assert_eq!((sa2.conns(), sa2.fails(), sa2.recovered_at()), (2, 2, 90));
    assert_eq!(shared.snapshot.load().http_plans[0].primary.peers[0].weight, 7);
    assert!(
        sb2.flags().intersects(PeerFlags::UNHEALTHY),
        "the new checker starts from UNHEALTHY"
    );
    drop(held);
    assert_eq!(sa2.conns(), 0);
    // b recovers: it stays out until `passes` (3) probes in a row pass under the new checker.
    let checks_before = sb2.health().checks;
    b.status.store(200, Ordering::Relaxed);
    wait_for(Duration::from_secs(5), "a passing probe of b", || {
        sb2.health().checks > checks_before && sb2.health().last_passed
    });
    if sb2.health().consecutive_passes < 3 {
        assert!(
            sb2.flags().intersects(PeerFlags::UNHEALTHY),
            "out before its third pass"
        );
    }
    wait_for(Duration::from_secs(5), "b healthy again", || {
        !sb2.flags().intersects(PeerFlags::UNHEALTHY)
    });
    assert!(sb2.health().consecutive_passes >= 3, "{:?}", sb2.health());
    assert!(sb2.recovered_at() > 0, "recovery starts b's slow start");
    shared.control.signal_stop();
}

#[test]
fn mandatory_checks_again_after_a_reload_unless_persistent_and_healthy() {
    let (a, b) = (Probed::start(200), Probed::start(200));
    let listen = free_addr();
    let conf =
        |servers: String, params: &str| proxy_conf(&[listen], &servers, &format!("health_check interval=5s {params};"));
    let one = format!("server {};", a.addr);
    let shared = control_plane(&conf(one.clone(), "mandatory persistent"));
    let sa = slot(&shared, a.addr);
    wait_for(Duration::from_secs(5), "a's first probe", || !sa.is_blocked());
    // Probes now take 400 ms: a peer put in the checking state stays there that long.
    a.delay_ms.store(400, Ordering::Relaxed);
    b.delay_ms.store(400, Ordering::Relaxed);
    let both = format!("server {}; server {};", a.addr, b.addr);
    reload(&shared, &conf(both.clone(), "mandatory persistent"));
    let sb = slot(&shared, b.addr);
    assert!(
        !sa.flags().intersects(PeerFlags::CHECKING),
        "persistent: a was healthy, it stays up"
    );
    assert!(
        sb.flags().intersects(PeerFlags::CHECKING),
        "b is new: checking until its first probe"
    );
    wait_for(Duration::from_secs(5), "b's first probe", || !sb.is_blocked());
    reload(&shared, &conf(both, "mandatory"));
    assert!(
        sa.flags().intersects(PeerFlags::CHECKING),
        "mandatory alone: checking again after a reload"
    );
    wait_for(Duration::from_secs(5), "a's probe after the reload", || {
        !sa.is_blocked()
    });
    // No health_check any more: an unhealthy mark left by the old checks is lifted.
    sb.set_flags(PeerFlags::UNHEALTHY);
    let plain = format!("server {}; server {};", a.addr, b.addr);
    reload(&shared, &proxy_conf(&[listen], &plain, ""));
    assert!(!sb.is_blocked());
    shared.control.signal_stop();
}
