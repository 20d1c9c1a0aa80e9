//! The nginx goldens (`tests/golden/`) replayed through the live proxy, on both runtimes: each scenario's config
//! with its servers moved to free loopback ports (their `server` text kept, so consistent hashing hashes what nginx
//! hashed), real backends failing as recorded, each request sent from its recorded 127.x.y.z address. Every request
//! must reach exactly the peers nginx used, in order, and end with nginx's status: as the proxy logs it
//! (`$upstream_addr`, `$status`), as the backends saw it, and as the client got it.
//!
//! The least_time scenarios (recorded from nginx 1.31, with a `sent` file) have backends that answer after their
//! recorded delays and send each request at the millisecond the recording sent it. Their picks depend on the
//! times the proxy measures, which nginx rounds up to 20 ms clusters; a run in which a measured time fell in
//! another cluster than the recorded delay's (a machine too busy) is run again, not compared.

mod support;

use corelb_engine::config::{self, model::Config};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use corelb_engine::simulate::BackendMode;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::goldens::{self, Golden, Outcome};
use support::scripted::{self, Farm, HttpRequest, Proto, TryLog};
use support::{free_addr, glommio_usable, Proxy};

/// The Host header of a request whose trace line names none: what the recorder's client sent to nginx.
const RECORDED_HOST: &str = "127.0.0.1:18090";

/// A scenario's config, moved to free ports: the proxy's front, and the way back from a live address to the
/// recorded one.
struct Moved {
    config: Config,
    front: SocketAddr,
    recorded: HashMap<SocketAddr, SocketAddr>,
    farm: Farm,
    upstream: String,
}

/// Parses the scenario's config (with the tries log for http), starts a backend per recorded server address in
/// its recorded mode, and points the servers and the listener at free ports.
fn prepare(g: &Golden, log: &TryLog) -> Result<Moved, String> {
    let text = if g.stream {
        g.conf.clone()
    } else {
        g.conf
            .replacen("http {\n", &format!("http {{\n    {}", log.directives()), 1)
    };
    let mut config = config::parse_str(&text, &g.dir.join("corelb.conf")).map_err(|e| e.to_string())?;
    let ups = match (&mut config.http, &mut config.stream) {
        (Some(h), None) => &mut h.upstreams,
        (None, Some(s)) => &mut s.upstreams,
        _ => return Err("expected one http or one stream block".into()),
    };
    let upstream = ups
        .iter()
        .find(|u| !u.implicit)
        .map(|u| u.name.clone())
        .ok_or("no upstream")?;
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for line in ups.iter().flat_map(|u| &u.servers) {
        for a in &line.addrs {
            if !addrs.contains(a) {
                addrs.push(*a);
            }
        }
    }
    let modes: Vec<_> = addrs.iter().map(|a| (g.mode(*a), g.timing(*a))).collect();
    let proto = if g.stream { Proto::Stream } else { Proto::Http };
    let farm = Farm::start_timed(&modes, proto);
    let live: HashMap<SocketAddr, SocketAddr> = addrs.iter().enumerate().map(|(i, a)| (*a, farm.addr(i))).collect();
    for line in ups.iter_mut().flat_map(|u| &mut u.servers) {
        for a in &mut line.addrs {
            *a = live[a];
        }
    }
    let front = free_addr();
    let listens = match (&mut config.http, &mut config.stream) {
        (Some(h), _) => h.servers.iter_mut().flat_map(|s| &mut s.listens).collect::<Vec<_>>(),
        (_, Some(s)) => s.servers.iter_mut().flat_map(|s| &mut s.listens).collect(),
        _ => Vec::new(),
    };
    for l in listens {
        l.addr = front;
    }
    Ok(Moved {
        config,
        front,
        recorded: live.into_iter().map(|(rec, now)| (now, rec)).collect(),
        farm,
        upstream,
    })
}

impl Moved {
    /// A live hop as the recording names it (an address moved back; a name or `-` as is).
    fn recorded_hop(&self, hop: &str) -> String {
        hop.parse::<SocketAddr>()
            .ok()
            .and_then(|a| self.recorded.get(&a))
            .map_or(hop.to_string(), SocketAddr::to_string)
    }

    /// The recorded address of backend `i`.
    fn recorded_backend(&self, i: usize) -> String {
        self.recorded_hop(&self.farm.addr(i).to_string())
    }
}

/// Sleeps until just after a whole second, as the recorder started timed scenarios (so that `t=` offsets fall on
/// the same whole seconds of the proxy's clock as they did on nginx's).
fn align_to_second() {
    let sub = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0);
    std::thread::sleep(Duration::from_millis(u64::from(1150 - sub)));
}

/// nginx's least_time cluster of a time (ms): rounded up to the next multiple of 20 (`rt += 20 - rt % 20`).
fn cluster(ms: u64) -> u64 {
    ms + 20 - ms % 20
}

/// Whether a try on backend `b` measured `got` ms where the script says `scripted`: out of its cluster.
fn off_cluster(got: Option<u64>, scripted: u64) -> bool {
    got.is_some_and(|ms| cluster(ms) != cluster(scripted))
}

/// Sleeps until `ms` after `start`, when the scenario recorded when each request was sent.
fn wait_sent(g: &Golden, i: usize, start: Instant) {
    if let Some((at, _)) = g.sent.as_ref().and_then(|s| s.get(i)) {
        std::thread::sleep((start + Duration::from_millis(*at)).saturating_duration_since(Instant::now()));
    }
}

/// How many times a scenario runs again when the machine was too busy for a backend to answer in time.
const BUSY_RUNS: usize = 3;

/// How one run of a scenario ended, when nothing differed.
enum Verdict {
    Alike,
    /// A backend scripted to answer timed out (see [`scripted::Logged::timed_out_unscripted`]), or a least_time
    /// scenario's time fell out of its cluster: the run says nothing.
    Busy,
}

/// Replays one scenario through a proxy on runtime `R`; `Ok` with the number of requests when every one matched.
fn replay<R: Runtime>(g: &Golden, tag: &str) -> Result<usize, String> {
    for run in 1..=BUSY_RUNS {
        match replay_once::<R>(g, tag)? {
            Verdict::Alike => return Ok(g.trace.len()),
            Verdict::Busy => eprintln!(
                "RERUN {tag} {} ({run} of {BUSY_RUNS}): a backend did not answer in time",
                g.name
            ),
        }
    }
    Err(format!(
        "the machine was too busy {BUSY_RUNS} times for backends to answer in time"
    ))
}

fn replay_once<R: Runtime>(g: &Golden, tag: &str) -> Result<Verdict, String> {
    let dir = std::env::temp_dir().join(format!("corelb-golden-live-{tag}-{}-{}", g.name, std::process::id()));
    let log = TryLog::new(&dir);
    let moved = prepare(g, &log)?;
    let proxy = Proxy::start::<R>(moved.config.clone(), 1);
    let result = if g.stream {
        replay_stream(g, &moved, &proxy)
    } else {
        replay_http(g, &moved, &proxy, &log)
    };
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn replay_http(g: &Golden, m: &Moved, proxy: &Proxy, log: &TryLog) -> Result<Verdict, String> {
    let snap = proxy.shared.snapshot.load_full();
    let plan = snap.http_plans.iter().find(|p| p.name == m.upstream).ok_or("no plan")?;
    if g.sent.is_some() || g.trace.iter().any(|t| t.at.is_some()) {
        align_to_second();
    }
    let start = Instant::now();
    let mut answers = vec![None; g.trace.len()];
    let mut holds = Vec::new();
    let mut held = 0;
    for (i, t) in g.trace.iter().enumerate() {
        let id = i as u64 + 1;
        if let (Some(at), None) = (t.at, &g.sent) {
            std::thread::sleep((start + Duration::from_secs(at)).saturating_duration_since(Instant::now()));
        }
        wait_sent(g, i, start);
        if !scripted::settle(plan, held) {
            return Err(format!("request {id}: the peers never went back to {held} connections"));
        }
        let req = HttpRequest {
            src: t.request.remote,
            method: "GET",
            uri: t.request.uri.clone(),
            host: t.request.host.clone().unwrap_or_else(|| RECORDED_HOST.into()),
            id,
        };
        if t.hold {
            let front = m.front;
            holds.push((i, std::thread::spawn(move || scripted::http_from(front, &req))));
            if !m.farm.wait_arrival(id) {
                return Err(format!("held request {id} never reached a backend"));
            }
            held += 1;
        } else {
            answers[i] = Some(scripted::http_from(m.front, &req));
        }
    }
    m.farm.release();
    for (i, h) in holds {
        answers[i] = Some(h.join().map_err(|_| "a held request panicked")?);
    }
    let answers: Vec<scripted::Answered> = answers.into_iter().flatten().collect();
    // corelb writes no access log line for a request it refuses before routing it (nginx's `400 -`, which nginx
    // logs): those are checked by the client's status and the backends alone, and not waited for in the log.
    let unrouted = |want: &Outcome| want.upstream == ["-"];
    let sent: Vec<(u64, u16)> = (answers.iter().zip(&g.expected).enumerate())
        .filter(|(_, (_, want))| !unrouted(want))
        .map(|(i, (a, _))| (i as u64 + 1, a.port))
        .collect();
    let logged = log.read(&proxy.shared, &sent);
    if logged.values().any(|l| l.timed_out_unscripted(&m.farm)) {
        return Ok(Verdict::Busy);
    }
    let mut diffs = Vec::new();
    let mut off = false;
    for (i, want) in g.expected.iter().enumerate() {
        let id = i as u64 + 1;
        if let (Some(_), Some(l), false) = (&g.sent, logged.get(&id), g.trace[i].hold) {
            let last = l
                .upstream
                .last()
                .and_then(|h| h.parse().ok())
                .and_then(|a| m.farm.index_of(a));
            if let Some(b) = last {
                let t = m.farm.timing(b);
                off |= off_cluster(l.header_ms, t.head) || off_cluster(l.response_ms, t.last_byte());
            }
        }
        let got_log = logged.get(&id).map(|l| Outcome {
            status: l.status,
            upstream: l.upstream.iter().map(|h| m.recorded_hop(h)).collect(),
        });
        let reached: Vec<String> = m
            .farm
            .reached_by(id)
            .into_iter()
            .map(|b| m.recorded_backend(b))
            .collect();
        let want_reached: Vec<String> = want
            .upstream
            .iter()
            .filter(|h| h.parse::<SocketAddr>().is_ok_and(|a| g.mode(a) != BackendMode::Dead))
            .cloned()
            .collect();
        let t = &g.trace[i];
        let what = format!("request {id} ({} {})", t.request.remote, t.request.uri);
        if got_log.as_ref() != Some(want) && !(got_log.is_none() && unrouted(want)) {
            diffs.push(format!("  {what}: nginx {want:?}, the proxy logged {got_log:?}"));
        }
        if answers[i].status != Some(want.status) {
            diffs.push(format!(
                "  {what}: nginx answered {}, the client got {:?}",
                want.status, answers[i].status
            ));
        }
        if reached != want_reached {
            diffs.push(format!(
                "  {what}: nginx reached {want_reached:?}, the backends saw {reached:?}"
            ));
        }
    }
    if diffs.is_empty() {
        Ok(Verdict::Alike)
    } else if off {
        Ok(Verdict::Busy)
    } else {
        Err(diffs.join("\n"))
    }
}

/// Stream sessions: the peers are the refused ones, then the one that accepted (see [`scripted::Session`]); the
/// `$status` is 200 when a backend accepted the session, 502 when none did.
fn replay_stream(g: &Golden, m: &Moved, proxy: &Proxy) -> Result<Verdict, String> {
    let snap = proxy.shared.snapshot.load_full();
    let plan = snap
        .stream_plans
        .iter()
        .find(|p| p.name == m.upstream)
        .ok_or("no plan")?;
    let mut diffs = Vec::new();
    let mut off = false;
    if g.sent.is_some() {
        align_to_second();
    }
    let start = Instant::now();
    for (i, (t, want)) in g.trace.iter().zip(&g.expected).enumerate() {
        let what = format!("session {} ({})", i + 1, t.request.remote);
        wait_sent(g, i, start);
        let s = scripted::stream_session(&m.farm, plan, m.front, t.request.remote)
            .ok_or_else(|| format!("{what}: the peers never went back to 0 connections"))?;
        if let (Some(_), [b]) = (&g.sent, &s.accepted[..]) {
            let timing = m.farm.timing(*b);
            off |= off_cluster(s.first_ms, timing.head) || off_cluster(Some(s.total_ms), timing.last_byte());
        }
        let mut hops: Vec<String> = s.failed.iter().map(|a| m.recorded_hop(&a.to_string())).collect();
        hops.extend(s.accepted.iter().map(|&b| m.recorded_backend(b)));
        let got = Outcome {
            status: if s.accepted.is_empty() { 502 } else { 200 },
            upstream: hops,
        };
        if &got != want {
            diffs.push(format!("  {what}: nginx {want:?}, the proxy {got:?}"));
        }
        if let [b] = s.accepted[..] {
            if m.farm.mode(b) == BackendMode::Ok && s.data != m.farm.addr(b).to_string().into_bytes() {
                diffs.push(format!(
                    "  {what}: the client got {:?}",
                    String::from_utf8_lossy(&s.data)
                ));
            }
        }
    }
    if diffs.is_empty() {
        Ok(Verdict::Alike)
    } else if off {
        Ok(Verdict::Busy)
    } else {
        Err(diffs.join("\n"))
    }
}

/// Replays every scenario on runtime `R` and fails with every difference found.
fn replay_all<R: Runtime>(tag: &str) {
    let all = goldens::all();
    assert!(all.len() >= 30, "expected the recorded scenarios, found {}", all.len());
    let mut failed = Vec::new();
    let mut requests = 0;
    for g in &all {
        match replay::<R>(g, tag) {
            Ok(n) => requests += n,
            Err(e) => failed.push(format!("{}:\n{e}", g.name)),
        }
    }
    assert!(
        failed.is_empty(),
        "{tag}: {} of {} golden scenarios differ from nginx through the live proxy:\n{}",
        failed.len(),
        all.len(),
        failed.join("\n")
    );
    assert!(requests > 500, "only {requests} requests replayed");
    eprintln!(
        "{tag}: {} golden scenarios, {requests} requests, all as nginx did",
        all.len()
    );
}

#[test]
fn goldens_replay_through_the_tokio_proxy() {
    replay_all::<Tokio>("tokio");
}

#[test]
fn goldens_replay_through_the_glommio_proxy() {
    if glommio_usable() {
        replay_all::<Glommio>("glommio");
    } else {
        eprintln!("SKIP goldens through the glommio proxy: io_uring or locked memory is not available here");
    }
}

#[test]
fn a_wrong_expectation_is_reported_live() {
    // The comparison itself must be able to fail: one recorded peer changed is reported, on all three accounts.
    let mut g = goldens::all()
        .into_iter()
        .find(|g| g.name == "rr-5-1-1")
        .expect("rr-5-1-1 is recorded");
    assert_eq!(g.expected[2].upstream, ["127.0.0.1:18082"]);
    g.expected[2].upstream = vec!["127.0.0.1:18083".into()];
    let err = replay::<Tokio>(&g, "wrong").expect_err("a changed expectation must not match");
    assert!(err.contains("request 3 (127.0.0.1 /): nginx Outcome { status: 200, upstream: [\"127.0.0.1:18083\"] }, the proxy logged Some(Outcome { status: 200, upstream: [\"127.0.0.1:18082\"] })"), "{err}");
    assert!(
        err.contains(
            "request 3 (127.0.0.1 /): nginx reached [\"127.0.0.1:18083\"], the backends saw [\"127.0.0.1:18082\"]"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
}

#[test]
fn a_wrong_stream_expectation_is_reported_live() {
    // The same for stream: the session nginx passed from the dead peer to the next one, expected without the retry.
    let mut g = goldens::all()
        .into_iter()
        .find(|g| g.name == "stream-rr-dead-peer")
        .expect("stream-rr-dead-peer is recorded");
    assert_eq!(g.expected[2].upstream, ["127.0.0.1:18089", "127.0.0.1:18083"]);
    g.expected[2].upstream = vec!["127.0.0.1:18083".into()];
    let err = replay::<Tokio>(&g, "wrong-stream").expect_err("a changed expectation must not match");
    assert_eq!(
        err,
        "  session 3 (127.0.0.1): nginx Outcome { status: 200, upstream: [\"127.0.0.1:18083\"] }, the proxy \
         Outcome { status: 200, upstream: [\"127.0.0.1:18089\", \"127.0.0.1:18083\"] }"
    );
}
