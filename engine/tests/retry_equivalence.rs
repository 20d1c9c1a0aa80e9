//! The simulator (`corelb pick`'s engine) and the live proxy under the same failure scripts: generated upstreams
//! (round robin with weights, least_conn, hash, ip_hash, consistent hash; backup; max_fails), `proxy_next_upstream`
//! conditions and tries, backends failing in `corelb pick --fail` modes (dead, reset, timeout, eNNN), and request
//! sequences (GET/POST, keys, client addresses). Every request must reach the same peers, in order, with the same
//! final status, in both: as the proxy logs it, as the backends saw it, and as the client got it. Stream upstreams
//! likewise, with the sessions' refused peers, the peer that took each session and its status.

mod support;

use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config::{self, model::Config};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use corelb_engine::simulate::{self, BackendMode, Backends, Context, Hop, Request, SimResult, Simulator};
use corelb_shared_state::Zone;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use support::scripted::{self, Farm, HttpRequest, Proto, TryLog};
use support::{free_addr, glommio_usable, Proxy};

/// The simulated clock (whole seconds): constant, as every `fail_timeout` outlasts a case.
const NOW: u64 = 1_000_000;

/// `proxy_read_timeout` when a peer never answers (else nginx's 60 s stands).
const READ_TIMEOUT: &str = "300ms";

/// What one run compared.
#[derive(Debug, Default)]
struct Tally {
    /// Requests alike in both.
    agreed: AtomicUsize,
    /// Of them, those passed to a next peer.
    retried: AtomicUsize,
    /// Of them, those not answered 200.
    not_200: AtomicUsize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Balance {
    RoundRobin,
    LeastConn,
    Hash,
    IpHash,
    Consistent,
}

impl Balance {
    fn directive(self) -> &'static str {
        match self {
            Balance::RoundRobin => "",
            Balance::LeastConn => "least_conn;",
            Balance::Hash => "hash $arg_k;",
            Balance::IpHash => "ip_hash;",
            Balance::Consistent => "hash $arg_k consistent;",
        }
    }

    /// nginx refuses `backup` with hash and ip_hash.
    fn allows_backup(self) -> bool {
        matches!(self, Balance::RoundRobin | Balance::LeastConn)
    }
}

#[derive(Debug, Clone)]
struct PeerSpec {
    weight: u32,
    max_fails: u32,
    backup: bool,
    mode: BackendMode,
}

#[derive(Debug, Clone)]
struct Req {
    post: bool,
    key: u8,
    src: IpAddr,
}

#[derive(Debug, Clone)]
struct Case {
    balance: Balance,
    peers: Vec<PeerSpec>,
    /// `proxy_next_upstream` conditions; empty is `off`.
    next: Vec<&'static str>,
    tries: u32,
    requests: Vec<Req>,
}

impl Case {
    /// The config, with the peers at `addrs`, the proxy at `front` and the tries log `log`.
    fn config_text(&self, addrs: &[SocketAddr], front: SocketAddr, log: &TryLog) -> String {
        let mut servers = String::new();
        for (p, a) in self.peers.iter().zip(addrs) {
            let backup = if p.backup { " backup" } else { "" };
            let _ = writeln!(
                servers,
                "        server {a} weight={} max_fails={} fail_timeout=60s{backup};",
                p.weight, p.max_fails
            );
        }
        let next = if self.next.is_empty() {
            "off".to_string()
        } else {
            self.next.join(" ")
        };
        let timeout = if self.peers.iter().any(|p| p.mode == BackendMode::Timeout) {
            format!("proxy_read_timeout {READ_TIMEOUT};")
        } else {
            String::new()
        };
        format!(
            "events {{}}\nhttp {{\n    {log}    upstream u {{\n        {balance}\n{servers}    }}\n    server {{\n        \
             listen {front};\n        location / {{\n            proxy_pass http://u;\n            \
             proxy_next_upstream {next};\n            proxy_next_upstream_tries {tries};\n            {timeout}\n        \
             }}\n    }}\n}}\n",
            log = log.directives(),
            balance = self.balance.directive(),
            tries = self.tries,
        )
    }
}

fn mode() -> impl Strategy<Value = BackendMode> {
    prop_oneof![
        4 => Just(BackendMode::Ok),
        1 => Just(BackendMode::Dead),
        1 => Just(BackendMode::Reset),
        1 => Just(BackendMode::Timeout),
        2 => prop::sample::select(vec![502u16, 503, 504, 404, 403, 429]).prop_map(BackendMode::Status),
    ]
}

fn peer() -> impl Strategy<Value = PeerSpec> {
    (
        1u32..=3,
        prop::sample::select(vec![0u32, 1, 2]),
        prop::bool::weighted(0.25),
        mode(),
    )
        .prop_map(|(weight, max_fails, backup, mode)| PeerSpec {
            weight,
            max_fails,
            backup,
            mode,
        })
}

const CONDITIONS: [&str; 9] = [
    "error",
    "timeout",
    "http_502",
    "http_503",
    "http_504",
    "http_403",
    "http_404",
    "http_429",
    "non_idempotent",
];

const SOURCES: [[u8; 4]; 6] = [
    [127, 0, 0, 1],
    [127, 0, 1, 1],
    [127, 1, 0, 1],
    [127, 0, 0, 77],
    [127, 3, 2, 1],
    [127, 9, 9, 9],
];

fn request() -> impl Strategy<Value = Req> {
    (
        prop::bool::weighted(0.3),
        0u8..8,
        prop::sample::select(SOURCES.to_vec()),
    )
        .prop_map(|(post, key, src)| Req {
            post,
            key,
            src: IpAddr::from(src),
        })
}

fn case() -> impl Strategy<Value = Case> {
    let balance = prop::sample::select(vec![
        Balance::RoundRobin,
        Balance::LeastConn,
        Balance::Hash,
        Balance::IpHash,
        Balance::Consistent,
    ]);
    let next = prop_oneof![
        1 => Just(Vec::new()),
        5 => prop::sample::subsequence(CONDITIONS.to_vec(), 2..=7),
    ];
    (
        balance,
        prop::collection::vec(peer(), 2..=4),
        next,
        prop::sample::select(vec![0u32, 0, 1, 2, 3]),
        prop::collection::vec(request(), 3..=8),
    )
        .prop_map(|(balance, mut peers, next, tries, requests)| {
            // One silent peer at most (each of its tries costs a read timeout), and a primary peer always.
            let mut silent = false;
            for p in &mut peers {
                p.backup &= balance.allows_backup();
                if p.mode == BackendMode::Timeout {
                    if silent {
                        p.mode = BackendMode::Ok;
                    }
                    silent = true;
                }
            }
            peers[0].backup = false;
            Case {
                balance,
                peers,
                next,
                tries,
                requests,
            }
        })
}

/// What happened to one request: the peers tried, as `$upstream_addr` lists them, and the final status.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    upstream: Vec<String>,
    status: u16,
}

fn simulated(r: &SimResult) -> Seen {
    Seen {
        upstream: r.upstream_addr("u").split(", ").map(str::to_string).collect(),
        status: r.status,
    }
}

fn parse(text: &str) -> Result<Config, TestCaseError> {
    config::parse_str(text, std::path::Path::new("/nonexistent-corelb-dir/corelb.conf"))
        .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))
}

/// Upstream `u` of `config` as `corelb pick --fail ADDR=MODE` simulates it: the plan, the retry policy, and the
/// farm's addresses in `modes`.
fn simulated_upstream(
    config: &Config,
    context: Context,
    farm: &Farm,
    modes: &[BackendMode],
) -> Result<(UpstreamPlan, simulate::RetryPolicy, Backends), TestCaseError> {
    let fail = |e: String| TestCaseError::fail(e);
    let located = simulate::locate(config, "u", Some(context)).map_err(|e| fail(e.to_string()))?;
    let plan = UpstreamPlan::build(located.upstream, &Zone::new()).map_err(|e| fail(e.to_string()))?;
    let mut backends = Backends::new();
    for (i, m) in modes.iter().enumerate() {
        backends.set(farm.addr(i), *m);
    }
    Ok((plan, located.policy, backends))
}

/// Runs `case` through the simulator and a live proxy on `R`, request by request.
fn check<R: Runtime>(case: &Case, tag: &str, tally: &Tally) -> Result<(), TestCaseError> {
    let modes: Vec<BackendMode> = case.peers.iter().map(|p| p.mode).collect();
    check_believing::<R>(case, &modes, tag, tally)
}

/// How many times a case runs again when the machine was too busy for a backend to answer in time.
const BUSY_RUNS: usize = 3;

/// How one run of a case ended, when nothing differed.
enum Verdict {
    Alike,
    /// A backend scripted to answer timed out: the run says nothing (see [`scripted::Logged::timed_out_unscripted`]).
    Busy,
}

/// As [`check`], with the simulator told that the peers fail in `modes` (the live backends fail as the case says).
fn check_believing<R: Runtime>(
    case: &Case,
    modes: &[BackendMode],
    tag: &str,
    tally: &Tally,
) -> Result<(), TestCaseError> {
    for run in 1..=BUSY_RUNS {
        match run_once::<R>(case, modes, tag, tally)? {
            Verdict::Alike => return Ok(()),
            Verdict::Busy => eprintln!("RERUN {tag} ({run} of {BUSY_RUNS}): a scripted backend did not answer in time"),
        }
    }
    Err(TestCaseError::fail(format!(
        "{tag}: the machine was too busy {BUSY_RUNS} times for backends to answer within {READ_TIMEOUT}:\n{case:#?}"
    )))
}

fn run_once<R: Runtime>(
    case: &Case,
    modes: &[BackendMode],
    tag: &str,
    tally: &Tally,
) -> Result<Verdict, TestCaseError> {
    let live_modes: Vec<BackendMode> = case.peers.iter().map(|p| p.mode).collect();
    let farm = Farm::start(&live_modes, Proto::Http);
    let front = free_addr();
    let dir = std::env::temp_dir().join(format!("corelb-retry-eq-{tag}-{}", std::process::id()));
    let log = TryLog::new(&dir);
    let text = case.config_text(&farm.addrs(), front, &log);
    let config = parse(&text)?;

    // The simulator, as `corelb pick --fail ADDR=MODE` runs it.
    let (plan, policy, backends) = simulated_upstream(&config, Context::Http, &farm, modes)?;
    let mut sim = Simulator::new(&plan, policy, backends.clone());
    let sims: Vec<SimResult> = case
        .requests
        .iter()
        .map(|r| {
            let method = if r.post { "POST" } else { "GET" };
            let req = Request {
                method: method.into(),
                ..Request::new(r.src, format!("/?k=k{}", r.key))
            };
            sim.run(&req, false, NOW)
        })
        .collect();

    // The live proxy.
    let proxy = Proxy::start::<R>(config.clone(), 1);
    let snap = proxy.shared.snapshot.load_full();
    let live_plan = snap.http_plans.first().ok_or_else(|| TestCaseError::fail("no plan"))?;
    let mut answers = Vec::new();
    for (i, r) in case.requests.iter().enumerate() {
        prop_assert!(
            scripted::settle(live_plan, 0),
            "request {}: peers never went idle",
            i + 1
        );
        let req = HttpRequest {
            src: r.src,
            method: if r.post { "POST" } else { "GET" },
            uri: format!("/?k=k{}", r.key),
            host: "test".into(),
            id: i as u64 + 1,
        };
        answers.push(scripted::http_from(front, &req));
    }
    let sent: Vec<(u64, u16)> = answers
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u64 + 1, a.port))
        .collect();
    let logged = log.read(&proxy.shared, &sent);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    if logged.values().any(|l| l.timed_out_unscripted(&farm)) {
        return Ok(Verdict::Busy);
    }

    for (i, (r, s)) in case.requests.iter().zip(&sims).enumerate() {
        let id = i as u64 + 1;
        let want = simulated(s);
        let live = logged.get(&id).map(|l| Seen {
            upstream: l.upstream.clone(),
            status: l.status,
        });
        let reached: Vec<String> = farm.reached_by(id).iter().map(|&b| farm.addr(b).to_string()).collect();
        let answered = answers[i].status;
        let agree_with = |w: &Seen| {
            let want_reached: Vec<String> = w
                .upstream
                .iter()
                .filter(|h| {
                    h.parse::<SocketAddr>()
                        .is_ok_and(|a| farm.index_of(a).is_some_and(|b| farm.mode(b) != BackendMode::Dead))
                })
                .cloned()
                .collect();
            live.as_ref() == Some(w) && answered == Some(w.status) && reached == want_reached
        };
        if agree_with(&want) {
            tally.agreed.fetch_add(1, Ordering::Relaxed);
            tally
                .retried
                .fetch_add(usize::from(want.upstream.len() > 1), Ordering::Relaxed);
            tally
                .not_200
                .fetch_add(usize::from(want.status != 200), Ordering::Relaxed);
            continue;
        }
        let story = format!(
            "{tag}: request {id} ({} /?k=k{} from {}) of\n{case:#?}\nconfig:\n{text}\nsimulator: {want:?} ({:?})\nlive: logged \
             {live:?}, client got {answered:?}, backends saw {reached:?}",
            if r.post { "POST" } else { "GET" },
            r.key,
            r.src,
            s.hops,
        );
        return Err(TestCaseError::fail(format!(
            "the simulator and the live proxy differ\n{story}"
        )));
    }
    Ok(Verdict::Alike)
}

/// A stream upstream under a failure script: sessions from client addresses.
#[derive(Debug, Clone)]
struct StreamCase {
    balance: Balance,
    peers: Vec<PeerSpec>,
    /// `proxy_next_upstream on|off`.
    next_upstream: bool,
    tries: u32,
    sources: Vec<IpAddr>,
}

impl StreamCase {
    fn config_text(&self, addrs: &[SocketAddr], front: SocketAddr) -> String {
        let mut servers = String::new();
        for (p, a) in self.peers.iter().zip(addrs) {
            let backup = if p.backup { " backup" } else { "" };
            let _ = writeln!(
                servers,
                "        server {a} weight={} max_fails={} fail_timeout=60s{backup};",
                p.weight, p.max_fails
            );
        }
        let balance = self.balance.directive().replace("$arg_k", "$remote_addr");
        let next = if self.next_upstream { "on" } else { "off" };
        format!(
            "events {{}}\nstream {{\n    upstream u {{\n        {balance}\n{servers}    }}\n    server {{\n        \
             listen {front};\n        proxy_pass u;\n        proxy_next_upstream {next};\n        \
             proxy_next_upstream_tries {tries};\n    }}\n}}\n",
            tries = self.tries,
        )
    }
}

fn stream_case() -> impl Strategy<Value = StreamCase> {
    let balance = prop::sample::select(vec![
        Balance::RoundRobin,
        Balance::LeastConn,
        Balance::Hash,
        Balance::Consistent,
    ]);
    // In stream a connected session is a success whatever follows: only a refused connect passes to the next peer.
    let mode = prop_oneof![
        3 => Just(BackendMode::Ok),
        2 => Just(BackendMode::Dead),
        1 => Just(BackendMode::Reset),
    ];
    let peer = (
        1u32..=3,
        prop::sample::select(vec![0u32, 1, 2]),
        prop::bool::weighted(0.25),
        mode,
    )
        .prop_map(|(weight, max_fails, backup, mode)| PeerSpec {
            weight,
            max_fails,
            backup,
            mode,
        });
    (
        balance,
        prop::collection::vec(peer, 2..=4),
        prop::bool::weighted(0.8),
        prop::sample::select(vec![0u32, 0, 1, 2]),
        prop::collection::vec(prop::sample::select(SOURCES.to_vec()).prop_map(IpAddr::from), 3..=8),
    )
        .prop_map(|(balance, mut peers, next_upstream, tries, sources)| {
            for p in &mut peers {
                p.backup &= balance.allows_backup();
            }
            // Two primary peers: with one, corelb (as nginx) counts no failure the zone would show.
            peers[0].backup = false;
            peers[1].backup = false;
            StreamCase {
                balance,
                peers,
                next_upstream,
                tries,
                sources,
            }
        })
}

/// A stream session reduced to what both sides can tell: the refused peers (as a sorted set: the live order is
/// not observable), the peer that took the session, and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SeenSession {
    failed: Vec<SocketAddr>,
    served: Option<SocketAddr>,
    status: u16,
}

/// Runs `case` through the simulator and a live stream proxy on `R`, session by session.
fn check_stream<R: Runtime>(case: &StreamCase, tally: &Tally) -> Result<(), TestCaseError> {
    let modes: Vec<BackendMode> = case.peers.iter().map(|p| p.mode).collect();
    let farm = Farm::start(&modes, Proto::Stream);
    let front = free_addr();
    let text = case.config_text(&farm.addrs(), front);
    let config = parse(&text)?;
    let (plan, policy, backends) = simulated_upstream(&config, Context::Stream, &farm, &modes)?;
    let mut sim = Simulator::new(&plan, policy, backends);
    let sims: Vec<SimResult> = case
        .sources
        .iter()
        .map(|&src| sim.run(&Request::new(src, "/"), false, NOW))
        .collect();

    let proxy = Proxy::start::<R>(config.clone(), 1);
    let snap = proxy.shared.snapshot.load_full();
    let live_plan = snap
        .stream_plans
        .first()
        .ok_or_else(|| TestCaseError::fail("no plan"))?;
    for (i, (&src, s)) in case.sources.iter().zip(&sims).enumerate() {
        let mut failed: Vec<SocketAddr> = s
            .hops
            .iter()
            .filter_map(|h| match h {
                Hop::Peer { addr, failure: Some(_) } => Some(*addr),
                _ => None,
            })
            .collect();
        failed.sort();
        let served = s.hops.iter().find_map(|h| match h {
            Hop::Peer { addr, failure: None } => Some(*addr),
            _ => None,
        });
        let want = SeenSession {
            failed,
            served,
            status: s.status,
        };
        let session = scripted::stream_session(&farm, live_plan, front, src);
        prop_assert!(session.is_some(), "session {}: peers never went idle", i + 1);
        let session = session.unwrap_or_else(|| unreachable!());
        let mut failed = session.failed.clone();
        failed.sort();
        let got = SeenSession {
            failed,
            served: match session.accepted[..] {
                [b] => Some(farm.addr(b)),
                _ => None,
            },
            status: if session.accepted.is_empty() { 502 } else { 200 },
        };
        prop_assert!(
            got == want && session.accepted.len() <= 1,
            "stream session {} from {src} of\n{case:#?}\nconfig:\n{text}\nsimulator: {want:?} ({:?})\nlive: {got:?} ({session:?})",
            i + 1,
            s.hops
        );
        if let Some(b) = session.accepted.first().filter(|&&b| farm.mode(b) == BackendMode::Ok) {
            prop_assert_eq!(&session.data, &farm.addr(*b).to_string().into_bytes());
        }
        tally.agreed.fetch_add(1, Ordering::Relaxed);
        tally.retried.fetch_add(
            usize::from(!want.failed.is_empty() && want.served.is_some()),
            Ordering::Relaxed,
        );
        tally
            .not_200
            .fetch_add(usize::from(want.status != 200), Ordering::Relaxed);
    }
    Ok(())
}

fn runner_config(cases: u32) -> RunnerConfig {
    RunnerConfig {
        cases,
        max_shrink_iters: 24,
        failure_persistence: None,
        ..RunnerConfig::default()
    }
}

fn run_cases<R: Runtime>(tag: &str, cases: u32) {
    let tally = Tally::default();
    let mut runner = proptest::test_runner::TestRunner::new(runner_config(cases));
    if let Err(e) = runner.run(&case(), |c| check::<R>(&c, tag, &tally)) {
        panic!("{e}");
    }
    report(tag, "http", cases, &tally);
    let tally = Tally::default();
    let mut runner = proptest::test_runner::TestRunner::new(runner_config(cases / 2));
    if let Err(e) = runner.run(&stream_case(), |c| check_stream::<R>(&c, &tally)) {
        panic!("{e}");
    }
    report(tag, "stream", cases / 2, &tally);
}

fn report(tag: &str, what: &str, cases: u32, tally: &Tally) {
    let n = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    let (agreed, retried, not_200) = (n(&tally.agreed), n(&tally.retried), n(&tally.not_200));
    eprintln!(
        "{tag} {what}: {cases} cases, {agreed} requests alike ({retried} passed to a next peer, {not_200} not 200)"
    );
    assert!(agreed >= cases as usize, "{agreed} requests compared in {cases} cases");
}

#[test]
fn simulator_and_tokio_proxy_pick_the_same_peers_under_failures() {
    run_cases::<Tokio>("tokio", 24);
}

#[test]
fn simulator_and_glommio_proxy_pick_the_same_peers_under_failures() {
    if glommio_usable() {
        run_cases::<Glommio>("glommio", 12);
    } else {
        eprintln!("SKIP the glommio proxy against the simulator: io_uring or locked memory is not available here");
    }
}

fn peers(specs: &[(BackendMode, u32, bool)]) -> Vec<PeerSpec> {
    specs
        .iter()
        .map(|&(mode, max_fails, backup)| PeerSpec {
            weight: 1,
            max_fails,
            backup,
            mode,
        })
        .collect()
}

/// Requests from words: `G3` is a GET with key `k3`, `P0` a POST with key `k0`; sources cycle.
fn requests(spec: &str) -> Vec<Req> {
    spec.split_whitespace()
        .enumerate()
        .map(|(i, r)| Req {
            post: r.starts_with('P'),
            key: r.get(1..).and_then(|k| k.parse().ok()).unwrap_or(0),
            src: IpAddr::from(SOURCES[i % SOURCES.len()]),
        })
        .collect()
}

#[test]
fn fixed_failure_scripts_agree() {
    // Every failure mode passed on by its condition, whatever the generator draws: resets, a silent peer, statuses,
    // the tries limit, backups, POSTs with `non_idempotent`, and every balancing method.
    use BackendMode::*;
    let cases = [
        Case {
            balance: Balance::RoundRobin,
            peers: peers(&[
                (Reset, 1, false),
                (Ok, 1, false),
                (Status(502), 2, false),
                (Ok, 1, false),
            ]),
            next: vec!["error", "timeout", "http_502"],
            tries: 0,
            requests: requests("G0 G0 G0 G0 G0 G0"),
        },
        Case {
            balance: Balance::LeastConn,
            peers: peers(&[(Dead, 1, false), (Timeout, 0, false), (Ok, 1, true)]),
            next: vec!["error", "timeout"],
            tries: 0,
            requests: requests("G0 G0 G0 G0"),
        },
        Case {
            balance: Balance::Hash,
            peers: peers(&[(Status(404), 1, false), (Status(404), 1, false), (Ok, 1, false)]),
            next: vec!["http_404"],
            tries: 2,
            requests: requests("G1 G2 G3 G4 G5 G6"),
        },
        Case {
            balance: Balance::IpHash,
            peers: peers(&[(Status(503), 1, false), (Ok, 1, false), (Status(429), 0, false)]),
            next: vec!["http_503", "http_429", "non_idempotent"],
            tries: 0,
            requests: requests("P0 P0 P0 P0 P0 P0"),
        },
        Case {
            balance: Balance::Consistent,
            peers: peers(&[
                (Dead, 0, false),
                (Ok, 1, false),
                (Status(504), 0, false),
                (Status(403), 0, false),
            ]),
            next: vec!["error", "http_504", "http_403"],
            tries: 1,
            requests: requests("G1 G2 G3 G4 G5 G6 G7"),
        },
        Case {
            balance: Balance::RoundRobin,
            peers: peers(&[(Status(502), 0, false), (Status(502), 0, false), (Ok, 1, true)]),
            next: vec!["http_502"],
            tries: 2,
            requests: requests("G0 G0 G0"),
        },
    ];
    let tally = Tally::default();
    for (i, case) in cases.iter().enumerate() {
        if let Err(e) = check::<Tokio>(case, &format!("fixed-{i}"), &tally) {
            panic!("{e}");
        }
    }
    let n = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    assert_eq!(n(&tally.agreed), 32, "every request compared");
    // What the cases whose picks do not hang on ports come to (the consistent hash one adds to it).
    assert!(n(&tally.retried) >= 19, "{tally:?}");
    assert!(n(&tally.not_200) >= 7, "{tally:?}");
    let streams = [
        StreamCase {
            balance: Balance::RoundRobin,
            peers: peers(&[(Dead, 1, false), (Reset, 1, false), (Ok, 1, false), (Dead, 0, true)]),
            next_upstream: true,
            tries: 0,
            sources: requests("G G G G G").iter().map(|r| r.src).collect(),
        },
        StreamCase {
            balance: Balance::Consistent,
            peers: peers(&[(Dead, 0, false), (Dead, 0, false), (Ok, 1, false)]),
            next_upstream: true,
            tries: 2,
            sources: requests("G G G G G G").iter().map(|r| r.src).collect(),
        },
        StreamCase {
            balance: Balance::LeastConn,
            peers: peers(&[(Dead, 1, false), (Ok, 1, false)]),
            next_upstream: false,
            tries: 0,
            sources: requests("G G G").iter().map(|r| r.src).collect(),
        },
    ];
    let tally = Tally::default();
    for case in &streams {
        if let Err(e) = check_stream::<Tokio>(case, &tally) {
            panic!("{e}");
        }
    }
    assert_eq!(n(&tally.agreed), 14, "every session compared");
    // (The consistent hash case's picks hang on its ports: only the other two count here.)
    assert!(n(&tally.retried) >= 1 && n(&tally.not_200) >= 1, "{tally:?}");
}

#[test]
fn a_post_is_not_resent_once_a_peer_got_it() {
    // nginx's ngx_http_upstream_next / ngx_http_upstream_test_next without `non_idempotent`: a POST reaches a peer
    // that resets (or answers 502, with `http_502`) and ends there with 502; the simulator, which knows the method,
    // agrees with the live proxy (the simulator once resent it).
    use BackendMode::*;
    for (first, next) in [(Reset, vec!["error"]), (Status(502), vec!["error", "http_502"])] {
        let case = Case {
            balance: Balance::RoundRobin,
            peers: peers(&[(first, 1, false), (Ok, 1, false)]),
            next,
            tries: 0,
            requests: requests("P0"),
        };
        let tally = Tally::default();
        if let Err(e) = check::<Tokio>(&case, "post", &tally) {
            panic!("{e}");
        }
        let n = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        assert_eq!(
            (n(&tally.agreed), n(&tally.retried), n(&tally.not_200)),
            (1, 0, 1),
            "{first:?}: one peer, a 502"
        );
    }
}

#[test]
fn a_difference_is_reported() {
    // The comparison must be able to fail: the simulator told that a peer answers while it is dead live.
    let case = Case {
        balance: Balance::RoundRobin,
        peers: peers(&[(BackendMode::Dead, 1, false), (BackendMode::Ok, 1, false)]),
        next: vec!["error"],
        tries: 0,
        requests: requests("G1"),
    };
    let tally = Tally::default();
    check::<Tokio>(&case, "agree", &tally).expect("a dead first peer is skipped by both");
    let err = check_believing::<Tokio>(&case, &[BackendMode::Ok, BackendMode::Ok], "differ", &tally)
        .expect_err("a simulator told the dead peer answers must differ");
    let err = err.to_string();
    assert!(err.contains("the simulator and the live proxy differ"), "{err}");
    assert!(err.contains("request 1 (GET /?k=k1 from 127.0.0.1)"), "{err}");
}

#[test]
fn a_timeout_on_an_answering_backend_is_told_apart() {
    // A run where a backend scripted to answer timed out (a machine too busy) is run again, not compared.
    let farm = Farm::start(
        &[BackendMode::Ok, BackendMode::Timeout, BackendMode::Status(504)],
        Proto::Http,
    );
    let logged = |hops: &[usize], statuses: &[&str]| scripted::Logged {
        upstream: hops.iter().map(|&i| farm.addr(i).to_string()).collect(),
        status: 200,
        upstream_status: statuses.iter().map(|s| s.to_string()).collect(),
        header_ms: None,
        response_ms: None,
    };
    assert!(logged(&[0], &["504"]).timed_out_unscripted(&farm));
    assert!(logged(&[1, 0], &["504", "504"]).timed_out_unscripted(&farm));
    assert!(!logged(&[1, 0], &["504", "200"]).timed_out_unscripted(&farm));
    assert!(!logged(&[2, 0], &["504", "200"]).timed_out_unscripted(&farm));
    assert!(!logged(&[0], &["502"]).timed_out_unscripted(&farm));
}
