//! End-to-end fault tests on real loopback sockets, on both runtimes: a backend killed under steady load (its
//! pooled keepalive connections included), a backend that hangs, every backend down and back, active health checks
//! taking a peer out and back in time, and a stream upstream losing a backend under load.

mod support;

use corelb_engine::config::{model::Config, parse_str};
use corelb_engine::health::HealthCheckers;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use corelb_shared_state::PeerSlot;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::killable::{Killable, Proto};
use support::{free_addr, get, glommio_usable, Client, Proxy};

fn config(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/faults.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The zone slot of peer `peer` of the first http (or stream) upstream.
fn slot(proxy: &Proxy, stream: bool, peer: usize) -> Arc<PeerSlot> {
    let snap = proxy.shared.snapshot.load();
    let plans = if stream { &snap.stream_plans } else { &snap.http_plans };
    plans[0].primary.peers[peer].slot.clone()
}

/// `server` lines for `backends`, each with `params`.
fn servers(backends: &[&Killable], params: &str) -> String {
    backends
        .iter()
        .map(|b| format!("server {} {params}; ", b.addr))
        .collect()
}

/// An http block proxying `/` to upstream `u` (made of `upstream_body`) with `location_extra` directives.
fn http_conf(listen: SocketAddr, upstream_body: &str, location_extra: &str) -> Config {
    config(&format!(
        "events {{}}\nhttp {{\n upstream u {{ {upstream_body} }}\n server {{ listen {listen};\n  location / {{ \
         proxy_pass http://u; {location_extra} }} }}\n}}\n"
    ))
}

/// One request as a load client saw it.
#[derive(Debug, Clone)]
struct Seen {
    sent: Instant,
    /// 0: the connection closed without an answer.
    status: u16,
    body: String,
}

/// Sends `n` GETs on keep-alive connections (a new one when the proxy closes), counting each into `done`.
fn keepalive_load(listen: SocketAddr, n: usize, done: &AtomicUsize) -> Vec<Seen> {
    let mut client: Option<Client> = None;
    let mut seen = Vec::with_capacity(n);
    for _ in 0..n {
        let c = client.get_or_insert_with(|| Client::connect(listen));
        let sent = Instant::now();
        c.send(b"GET / HTTP/1.1\r\nHost: faults\r\n\r\n");
        let answer = c.read_response();
        let keep = answer
            .as_ref()
            .is_some_and(|r| r.header("connection").as_deref() == Some("keep-alive"));
        seen.push(match answer {
            Some(r) => Seen {
                sent,
                status: r.status,
                body: r.text(),
            },
            None => Seen {
                sent,
                status: 0,
                body: String::new(),
            },
        });
        if !keep {
            client = None;
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    seen
}

/// Waits (bounded) until `cond` holds; returns how long it took.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

const CLIENTS: usize = 4;
const PER_CLIENT: usize = 500;

/// Fault 1: two shards, three keep-alive backends, four keep-alive clients making 2,000 GETs; one backend dies (its
/// listener and every connection, the ones idle in the proxy's pools included) a third of the way through. No
/// client sees an error, and the dead peer is left after the few picks it takes to find it dead.
fn backend_killed_under_load<R: Runtime>() {
    let names = ["b0", "b1", "b2"];
    let backends: Vec<Killable> = names.iter().map(|n| Killable::start(n, Proto::Http)).collect();
    let refs: Vec<&Killable> = backends.iter().collect();
    let listen = free_addr();
    let upstream = format!("{} keepalive 16;", servers(&refs, ""));
    let keepalive = "proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_next_upstream error timeout;";
    let proxy = Proxy::start::<R>(http_conf(listen, &upstream, keepalive), 2);
    let done = AtomicUsize::new(0);
    let t0 = Instant::now();
    let (seen, killed_at, picks_at_kill) = thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| s.spawn(|| keepalive_load(listen, PER_CLIENT, &done)))
            .collect();
        wait_for(Duration::from_secs(20), "a third of the load", || {
            done.load(Ordering::SeqCst) >= CLIENTS * PER_CLIENT / 3
        });
        let picks_at_kill = slot(&proxy, false, 1).stats().selected;
        backends[1].kill();
        let killed_at = Instant::now();
        let seen: Vec<Seen> = clients
            .into_iter()
            .flat_map(|c| c.join().expect("client thread"))
            .collect();
        (seen, killed_at, picks_at_kill)
    });
    let took = t0.elapsed();
    let errors: Vec<&Seen> = seen.iter().filter(|r| r.status != 200).collect();
    assert!(errors.is_empty(), "client-visible errors: {errors:?}");
    assert_eq!(seen.len(), CLIENTS * PER_CLIENT);
    assert!(seen.iter().all(|r| names.contains(&r.body.as_str())));
    let late_b1 = seen.iter().filter(|r| r.sent > killed_at && r.body == "b1").count();
    assert_eq!(
        late_b1, 0,
        "answers from the dead backend to requests sent after its death"
    );
    let after = seen.iter().filter(|r| r.sent > killed_at).count();
    assert!(
        after >= CLIENTS * PER_CLIENT / 2,
        "the kill came too late to test: {after} requests after it"
    );
    let b1 = slot(&proxy, false, 1).stats();
    let picks_after = b1.selected - picks_at_kill;
    eprintln!(
        "killed under load: {} requests in {took:?}, b1 had {} connections for {} requests, {} unanswered at \
         death; picks of b1 after its death: {picks_after}, fails {} failures {}",
        seen.len(),
        backends[1].accepts(),
        backends[1].requests(),
        backends[1].unanswered(),
        b1.fails,
        b1.failures
    );
    assert!(
        backends[1].requests() >= 2 * backends[1].accepts(),
        "keepalive pools were in use"
    );
    assert!(b1.fails >= 1, "the death was counted");
    // Each shard meets the dead peer at most once per request in flight when the failure lands (nginx, which sees
    // the pooled connections close while idle, does the same); it is then skipped for fail_timeout (10 s).
    assert!(
        picks_after <= (2 * CLIENTS) as u64,
        "{picks_after} picks of the dead peer"
    );
}

#[test]
fn tokio_backend_killed_under_load() {
    backend_killed_under_load::<Tokio>();
}

#[test]
fn glommio_backend_killed_under_load() {
    if glommio_usable() {
        backend_killed_under_load::<Glommio>();
    }
}

/// Every backend restarts (closing its idle keep-alive connections, as a backend's own idle timeout does too):
/// the proxy's pools hold only dead connections. nginx's keepalive module sees such connections close while idle
/// and drops them, so the next requests connect afresh and succeed; so must corelb's.
fn all_backends_restarted_under_pooled_keepalive<R: Runtime>() {
    let names = ["r0", "r1", "r2"];
    let backends: Vec<Killable> = names.iter().map(|n| Killable::start(n, Proto::Http)).collect();
    let refs: Vec<&Killable> = backends.iter().collect();
    let listen = free_addr();
    let upstream = format!("{} keepalive 16;", servers(&refs, ""));
    let keepalive = "proxy_http_version 1.1; proxy_set_header Connection \"\";";
    let proxy = Proxy::start::<R>(http_conf(listen, &upstream, keepalive), 2);
    let fill = AtomicUsize::new(0);
    thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| s.spawn(|| keepalive_load(listen, 30, &fill)))
            .collect();
        for c in clients {
            let seen = c.join().expect("client");
            let bad: Vec<(u16, &str)> = seen
                .iter()
                .filter(|r| r.status != 200)
                .map(|r| (r.status, r.body.as_str()))
                .collect();
            assert!(bad.is_empty(), "before the restart: {bad:?}");
        }
    });
    let pooled: usize = backends.iter().map(Killable::accepts).sum();
    for b in &backends {
        b.kill();
        b.restart();
    }
    let answers: Vec<(u16, String)> = (0..2 * pooled)
        .map(|_| get(listen, "/").map_or((0, String::new()), |r| (r.status, r.text())))
        .collect();
    assert!(
        answers.iter().all(|(s, _)| *s == 200),
        "after a restart of every backend: {answers:?}"
    );
    let fails: Vec<u32> = (0..3).map(|i| slot(&proxy, false, i).fails()).collect();
    assert_eq!(
        fails,
        [0, 0, 0],
        "a connection closed while idle is no failure of its peer"
    );
}

#[test]
fn tokio_all_backends_restarted_under_pooled_keepalive() {
    all_backends_restarted_under_pooled_keepalive::<Tokio>();
}

#[test]
fn glommio_all_backends_restarted_under_pooled_keepalive() {
    if glommio_usable() {
        all_backends_restarted_under_pooled_keepalive::<Glommio>();
    }
}

/// One GET on a fresh connection: status, body and how long it took (status 0: no answer).
fn timed_get(listen: SocketAddr) -> (u16, String, Duration) {
    let t = Instant::now();
    let r = get(listen, "/");
    let took = t.elapsed();
    r.map_or((0, String::new(), took), |r| (r.status, r.text(), took))
}

/// Fault 2: a backend that reads requests and never answers: with `proxy_read_timeout 1s` the try is cut at about 1 s
/// and passed to the next peer, the fail is counted (max_fails=1) and the peer is avoided for fail_timeout; alone
/// in its upstream (nginx's single peer: no fail accounting) every request gets a 504 after 1 s.
fn hanging_backend<R: Runtime>() {
    let hung = Killable::start("hung", Proto::Http);
    hung.set_hang(true);
    let ok = Killable::start("ok", Proto::Http);
    let listen = free_addr();
    let upstream = servers(&[&hung, &ok], "max_fails=1 fail_timeout=10s");
    let location = "proxy_read_timeout 1s; proxy_next_upstream error timeout;";
    let proxy = Proxy::start::<R>(http_conf(listen, &upstream, location), 1);
    let (status, body, took) = timed_get(listen);
    eprintln!("hung peer then ok: {status} {body} after {took:?}");
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert!(cut_at_the_read_timeout(took), "{took:?}");
    assert_eq!((hung.requests(), ok.requests()), (1, 1));
    let hung_slot = slot(&proxy, false, 0).stats();
    assert_eq!(
        (hung_slot.fails, hung_slot.failures),
        (1, 1),
        "the timeout counts as a fail"
    );
    for _ in 0..6 {
        let (status, body, _) = timed_get(listen);
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    assert_eq!(
        hung.requests(),
        1,
        "no request reached the failed peer within fail_timeout"
    );
    drop(proxy);

    let listen = free_addr();
    let _alone = Proxy::start::<R>(http_conf(listen, &servers(&[&hung], ""), location), 1);
    for round in 1..=2 {
        let (status, _, took) = timed_get(listen);
        eprintln!("hung peer alone: {status} after {took:?}");
        assert_eq!(status, 504);
        assert!(cut_at_the_read_timeout(took), "{took:?}");
        assert_eq!(hung.requests(), 1 + round, "a single peer is never marked failed");
    }
}

/// Whether a request took `proxy_read_timeout 1s`: never less, and far less than the 60 s default (the margin is
/// for a loaded machine; how long it takes exactly is no claim of these tests).
fn cut_at_the_read_timeout(took: Duration) -> bool {
    took >= Duration::from_millis(950) && took < Duration::from_secs(20)
}

/// A bound on what must come "at once" (a refused connect, a skipped peer): far below the 60 s connect and read
/// timeouts that a wrong path would wait for, far above what a loaded machine adds.
const AT_ONCE: Duration = Duration::from_secs(10);

#[test]
fn tokio_hanging_backend() {
    hanging_backend::<Tokio>();
}

#[test]
fn glommio_hanging_backend() {
    if glommio_usable() {
        hanging_backend::<Glommio>();
    }
}

/// Fault 3: every backend down: 502 at once (connect is refused on loopback); the peers are then skipped without a
/// connect for fail_timeout=1s (nginx counts in whole seconds: 1 to 2 s), and once the backends are back on the
/// same ports requests succeed again.
fn all_backends_down_then_back<R: Runtime>() {
    let a = Killable::start_dead("a", Proto::Http);
    let b = Killable::start_dead("b", Proto::Http);
    let listen = free_addr();
    let upstream = servers(&[&a, &b], "max_fails=1 fail_timeout=1s");
    let proxy = Proxy::start::<R>(http_conf(listen, &upstream, ""), 2);
    let failed_at = Instant::now();
    let (status, _, took) = timed_get(listen);
    eprintln!("all down: {status} after {took:?}");
    assert_eq!(status, 502);
    assert!(took < AT_ONCE, "{took:?}");
    assert_eq!((slot(&proxy, false, 0).fails(), slot(&proxy, false, 1).fails()), (1, 1));
    a.restart();
    b.restart();
    let mut answers = Vec::new();
    let recovered = loop {
        let (status, body, took) = timed_get(listen);
        assert!(took < AT_ONCE, "every answer is fast: {status} after {took:?}");
        answers.push(status);
        if status == 200 {
            assert!(body == "a" || body == "b", "{body}");
            break failed_at.elapsed();
        }
        assert_eq!(status, 502);
        assert!(
            failed_at.elapsed() < Duration::from_secs(30),
            "no recovery: {answers:?}"
        );
        thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "all down then back: first 200 {recovered:?} after the failure, {} answers",
        answers.len()
    );
    assert!(
        recovered >= Duration::from_millis(950),
        "peers skipped for fail_timeout: {recovered:?}"
    );
    assert!(recovered < Duration::from_secs(1) + AT_ONCE, "{recovered:?}");
    wait_for(Duration::from_secs(30), "both backends serve again", || {
        let (status, _, _) = timed_get(listen);
        assert_eq!(status, 200);
        a.requests() > 0 && b.requests() > 0
    });
}

#[test]
fn tokio_all_backends_down_then_back() {
    all_backends_down_then_back::<Tokio>();
}

#[test]
fn glommio_all_backends_down_then_back() {
    if glommio_usable() {
        all_backends_down_then_back::<Glommio>();
    }
}

/// Sends GETs on one keep-alive connection until `stop`, about every 5 ms: when each was sent and its body
/// (or its status when it was not 200).
fn steady_load(listen: SocketAddr, stop: &AtomicUsize) -> Vec<(Instant, String)> {
    let mut client = Client::connect(listen);
    let mut seen = Vec::new();
    while stop.load(Ordering::SeqCst) == 0 {
        let sent = Instant::now();
        client.send(b"GET / HTTP/1.1\r\nHost: faults\r\n\r\n");
        let r = client.read_response();
        let body = match &r {
            Some(r) if r.status == 200 => r.text(),
            Some(r) => r.status.to_string(),
            None => "none".into(),
        };
        seen.push((sent, body));
        if r.is_none() {
            client = Client::connect(listen);
        }
        thread::sleep(Duration::from_millis(5));
    }
    seen
}

/// Fault 4: `health_check interval=500ms fails=2 passes=2` under client load, on the data plane of each runtime: a peer
/// whose probes start failing leaves the rotation after two failed probes (within about interval × fails), gets no
/// client request while out, and is back after two passed probes (within about interval × passes).
fn health_check_timing<R: Runtime>() {
    let a = Killable::start("a", Proto::Http);
    let b = Killable::start("b", Proto::Http);
    let listen = free_addr();
    let location = "health_check interval=500ms fails=2 passes=2 uri=/hc;";
    let proxy = Proxy::start::<R>(
        http_conf(listen, &format!("zone u 64k; {}", servers(&[&a, &b], "")), location),
        2,
    );
    let _checkers = HealthCheckers::start(proxy.shared.snapshot.load_full()).expect("checkers start");
    let interval = Duration::from_millis(500);
    // for a loaded machine: probes and requests run late there, never early
    let slack = Duration::from_secs(5);
    let a_slot = slot(&proxy, false, 0);
    wait_for(Duration::from_secs(30), "first probes", || {
        a.probes() >= 1 && b.probes() >= 1
    });
    let stop = AtomicUsize::new(0);
    let (seen, sick_at, out_after, healed_at, back_after) = thread::scope(|s| {
        let load = s.spawn(|| steady_load(listen, &stop));
        wait_for(Duration::from_secs(30), "a serves clients", || a.requests() >= 3);
        a.set_sick(true);
        let sick_at = Instant::now();
        let out_after = wait_for(interval * 2 + slack, "a out of rotation", || a_slot.is_blocked());
        assert!(a_slot.health().consecutive_fails >= 2, "out only after 2 failed probes");
        thread::sleep(Duration::from_millis(100)); // requests picked before the flag was seen end
        let requests_while_out = a.requests();
        thread::sleep(interval * 3);
        assert_eq!(
            a.requests(),
            requests_while_out,
            "an unhealthy peer gets no client request"
        );
        assert!(a_slot.is_blocked());
        a.set_sick(false);
        let healed_at = Instant::now();
        let back_after = wait_for(interval * 2 + slack, "a back in rotation", || !a_slot.is_blocked());
        assert!(
            a_slot.health().consecutive_passes >= 2,
            "back only after 2 passed probes"
        );
        wait_for(Duration::from_secs(30), "a serves clients again", || {
            a.requests() > requests_while_out
        });
        stop.store(1, Ordering::SeqCst);
        let seen = load.join().expect("load thread");
        (seen, sick_at, out_after, healed_at, back_after)
    });
    let bad: Vec<_> = seen.iter().filter(|(_, body)| body != "a" && body != "b").collect();
    assert!(bad.is_empty(), "client-visible errors: {bad:?}");
    let last_a = seen
        .iter()
        .filter(|(t, body)| *t > sick_at && *t < healed_at && body == "a")
        .map(|(t, _)| *t)
        .max();
    let first_a_back = seen
        .iter()
        .filter(|(t, body)| *t > healed_at && body == "a")
        .map(|(t, _)| *t)
        .min();
    let client_out = last_a.map_or(Duration::ZERO, |t| t - sick_at);
    let client_back = first_a_back.map(|t| t - healed_at).expect("a answered again");
    eprintln!(
        "health: out after {out_after:?} (last client answer from a {client_out:?} after it fell sick), back after \
         {back_after:?} (first client answer {client_back:?} after it healed); {} client requests",
        seen.len()
    );
    assert!(client_out <= interval * 2 + slack, "{client_out:?}");
    assert!(
        client_back <= interval * 2 + slack + Duration::from_millis(200),
        "{client_back:?}"
    );
}

#[test]
fn tokio_health_check_timing() {
    health_check_timing::<Tokio>();
}

#[test]
fn glommio_health_check_timing() {
    if glommio_usable() {
        health_check_timing::<Glommio>();
    }
}

/// What a stream client saw: when it connected, and the backend's name or why it failed.
type StreamSeen = (Instant, Result<String, String>);

/// Opens `n` connections one after another through the stream proxy: each sends `ping`, reads `NAME:ping` back,
/// and closes.
fn stream_load(listen: SocketAddr, n: usize, done: &AtomicUsize) -> Vec<StreamSeen> {
    (0..n)
        .map(|_| {
            let started = Instant::now();
            let got = echo_once(listen);
            done.fetch_add(1, Ordering::SeqCst);
            (started, got)
        })
        .collect()
}

fn echo_once(listen: SocketAddr) -> Result<String, String> {
    let mut c = TcpStream::connect(listen).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    c.write_all(b"ping").map_err(|e| format!("write: {e}"))?;
    let mut back = [0u8; 7];
    let mut got = 0;
    while got < back.len() {
        match c.read(&mut back[got..]) {
            Ok(0) => return Err(format!("closed after {got} bytes")),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&back).into_owned();
    text.strip_suffix(":ping").map(str::to_string).ok_or(text)
}

/// Fault 5: a stream upstream under load loses one of three backends: connections opened after its death all reach
/// the others (`proxy_next_upstream on`), the dead peer is marked failed and left.
fn stream_backend_killed_under_load<R: Runtime>() {
    let names = ["s0", "s1", "s2"];
    let backends: Vec<Killable> = names.iter().map(|n| Killable::start(n, Proto::Echo)).collect();
    let refs: Vec<&Killable> = backends.iter().collect();
    let listen = free_addr();
    let conf = config(&format!(
        "events {{}}\nstream {{\n upstream s {{ {} }}\n server {{ listen {listen}; proxy_pass s; }}\n}}\n",
        servers(&refs, "")
    ));
    let proxy = Proxy::start::<R>(conf, 2);
    let per_client = 150;
    let done = AtomicUsize::new(0);
    let (seen, killed_at, picks_at_kill) = thread::scope(|s| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| s.spawn(|| stream_load(listen, per_client, &done)))
            .collect();
        wait_for(Duration::from_secs(20), "a third of the load", || {
            done.load(Ordering::SeqCst) >= CLIENTS * per_client / 3
        });
        let picks_at_kill = slot(&proxy, true, 1).stats().selected;
        backends[1].kill();
        let killed_at = Instant::now();
        let seen: Vec<StreamSeen> = clients.into_iter().flat_map(|c| c.join().expect("client")).collect();
        (seen, killed_at, picks_at_kill)
    });
    let after: Vec<&StreamSeen> = seen.iter().filter(|(t, _)| *t > killed_at).collect();
    let failed_after: Vec<_> = after.iter().filter(|(_, r)| r.is_err()).collect();
    let in_flight = seen.iter().filter(|(t, r)| *t <= killed_at && r.is_err()).count();
    let s1 = slot(&proxy, true, 1).stats();
    eprintln!(
        "stream kill: {} connections, {} after the kill, {in_flight} cut in flight, picks of s1 after its death: {}, \
         fails {}",
        seen.len(),
        after.len(),
        s1.selected - picks_at_kill,
        s1.fails
    );
    assert!(
        failed_after.is_empty(),
        "failed connections after the kill: {failed_after:?}"
    );
    assert!(
        in_flight <= CLIENTS,
        "only connections open at the kill may be cut: {in_flight}"
    );
    assert!(
        after.len() >= CLIENTS * per_client / 2,
        "the kill came too late: {}",
        after.len()
    );
    assert!(after.iter().all(|(_, r)| matches!(r.as_deref(), Ok("s0" | "s2"))));
    assert!(s1.fails >= 1, "the refused connect was counted");
    assert!(
        s1.selected - picks_at_kill <= (2 * CLIENTS) as u64,
        "the dead peer is left"
    );
}

#[test]
fn tokio_stream_backend_killed_under_load() {
    stream_backend_killed_under_load::<Tokio>();
}

#[test]
fn glommio_stream_backend_killed_under_load() {
    if glommio_usable() {
        stream_backend_killed_under_load::<Glommio>();
    }
}
