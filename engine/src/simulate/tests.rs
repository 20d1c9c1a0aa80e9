//! Unit tests of the simulator's retry and accounting rules, over a stand-in balancer (the first usable, untried
//! peer in order) so that they do not depend on any algorithm.

use super::*;
use crate::balance::{Balancer, Choice, KeySpec, ListKind, PickCx};
use crate::config::model::{
    HttpConf, HttpProxyConf, HttpServer, Location, LocationMatch, Method, ProxyPass, ServerLine, Span, StreamConf,
    StreamServer,
};
use corelb_shared_state::PeerSlot;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Picks the first usable, untried peer of the current list, switching to backup as nginx does; records the keys.
#[derive(Debug, Default)]
struct FirstUsable {
    keys: Mutex<Vec<Vec<u8>>>,
}

impl Balancer for FirstUsable {
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(cx.key.to_vec());
        }
        loop {
            let list = cx.plan.list(cx.attempt.list);
            let found = (0..list.len()).find(|&i| !cx.attempt.tried.contains(i) && list.peers[i].usable(cx.now));
            if let Some(index) = found {
                return Some(Choice {
                    list: cx.attempt.list,
                    index,
                });
            }
            if cx.attempt.list == ListKind::Primary && !cx.plan.backup.is_empty() {
                cx.attempt.switch_to_backup();
                continue;
            }
            return None;
        }
    }

    fn name(&self) -> &'static str {
        "first_usable"
    }
}

fn line(port: u16, params: &str) -> ServerLine {
    let text = format!("127.0.0.1:{port}");
    let has = |p: &str| params.split_whitespace().any(|w| w == p);
    let addrs = vec![text.parse().unwrap()];
    ServerLine {
        max_fails: if has("max_fails=0") { 0 } else { 1 },
        backup: has("backup"),
        down: has("down"),
        ..ServerLine::new(text, addrs)
    }
}

fn upstream(lines: Vec<ServerLine>) -> UpstreamConf {
    UpstreamConf::new("backend", Method::RoundRobin, lines)
}

fn plan(lines: Vec<ServerLine>, key: KeySpec) -> UpstreamPlan {
    let mut p = UpstreamPlan::build_with(&upstream(lines), || Arc::new(PeerSlot::new())).unwrap();
    p.balancer = Box::new(FirstUsable::default());
    p.key = key;
    p
}

fn backends(spec: &[(u16, BackendMode)]) -> Backends {
    let mut b = Backends::new();
    for (port, mode) in spec {
        b.set(SocketAddr::from(([127, 0, 0, 1], *port)), *mode);
    }
    b
}

fn http(next_upstream: NextUpstream, tries: usize) -> RetryPolicy {
    RetryPolicy {
        context: Context::Http,
        next_upstream,
        tries,
    }
}

fn req() -> Request {
    Request::new("127.0.0.1".parse().unwrap(), "/")
}

/// Runs `n` requests at `now` and returns their golden lines.
fn run_n(sim: &mut Simulator<'_>, n: usize, now: u64) -> Vec<String> {
    (0..n)
        .map(|_| sim.run(&req(), false, now).golden_line("backend"))
        .collect()
}

const NOW: u64 = 1_000_000;

#[test]
fn error_passes_to_the_next_peer_and_counts_as_a_failure() {
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let mut sim = Simulator::new(
        &p,
        RetryPolicy::default_for(Context::Http),
        backends(&[(1, BackendMode::Dead)]),
    );
    let r = sim.run(&req(), false, NOW);
    assert_eq!(r.golden_line("backend"), "200 127.0.0.1:1, 127.0.0.1:2");
    assert_eq!(
        r.hops[0],
        Hop::Peer {
            addr: "127.0.0.1:1".parse().unwrap(),
            failure: Some(Failure::Error)
        }
    );
    assert_eq!(p.primary.peers[0].slot.fails(), 1);
    // max_fails=1: the dead peer is out for fail_timeout, back after it
    assert_eq!(run_n(&mut sim, 1, NOW + 10), ["200 127.0.0.1:2"]);
    assert_eq!(run_n(&mut sim, 1, NOW + 11), ["200 127.0.0.1:1, 127.0.0.1:2"]);
    assert_eq!(p.primary.peers[0].slot.conns() + p.primary.peers[1].slot.conns(), 0);
}

#[test]
fn next_upstream_off_and_tries_end_the_request_with_502() {
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let mut sim = Simulator::new(&p, http(NextUpstream::OFF, 0), backends(&[(1, BackendMode::Dead)]));
    assert_eq!(run_n(&mut sim, 2, NOW), ["502 127.0.0.1:1", "200 127.0.0.1:2"]);
    // the failure counted even though the request was not retried
    assert_eq!(p.primary.peers[0].slot.fails(), 1);

    let p = plan(vec![line(1, ""), line(2, ""), line(3, "")], KeySpec::None);
    let bk = backends(&[(1, BackendMode::Dead), (2, BackendMode::Dead)]);
    let mut sim = Simulator::new(&p, http(NextUpstream::default(), 2), bk);
    assert_eq!(
        run_n(&mut sim, 2, NOW),
        ["502 127.0.0.1:1, 127.0.0.1:2", "200 127.0.0.1:3"]
    );
}

#[test]
fn timeout_gives_504_when_it_ends_the_request() {
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let bk = backends(&[(1, BackendMode::Timeout), (2, BackendMode::Timeout)]);
    let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Http), bk);
    let r = sim.run(&req(), false, NOW);
    assert_eq!(r.golden_line("backend"), "504 127.0.0.1:1, 127.0.0.1:2");
    assert_eq!(
        r.hops[1],
        Hop::Peer {
            addr: "127.0.0.1:2".parse().unwrap(),
            failure: Some(Failure::Timeout)
        }
    );
}

#[test]
fn http_502_retries_only_with_a_try_left_and_then_passes_through() {
    // docs/algorithms.md §12, verified on nginx: "A, B" -> "B, upstream-name" -> "upstream-name"
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let nu = NextUpstream {
        http_502: true,
        ..NextUpstream::default()
    };
    let bk = backends(&[(1, BackendMode::Status(502)), (2, BackendMode::Status(502))]);
    let mut sim = Simulator::new(&p, http(nu, 0), bk);
    let got = run_n(&mut sim, 3, NOW);
    assert_eq!(
        got,
        [
            "502 127.0.0.1:1, 127.0.0.1:2",
            "502 127.0.0.1:2, backend",
            "502 backend"
        ]
    );
}

#[test]
fn http_404_passes_on_without_counting_a_failure() {
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let nu = NextUpstream {
        http_404: true,
        ..NextUpstream::default()
    };
    let mut sim = Simulator::new(&p, http(nu, 0), backends(&[(1, BackendMode::Status(404))]));
    assert_eq!(run_n(&mut sim, 2, NOW), ["200 127.0.0.1:1, 127.0.0.1:2"; 2]);
    assert_eq!(p.primary.peers[0].slot.fails(), 0);
    // without http_404 the 404 is the answer
    let mut sim = Simulator::new(
        &p,
        http(NextUpstream::default(), 0),
        backends(&[(1, BackendMode::Status(404))]),
    );
    assert_eq!(run_n(&mut sim, 1, NOW), ["404 127.0.0.1:1"]);
}

#[test]
fn single_dead_server_is_retried_on_every_request() {
    let p = plan(vec![line(1, "")], KeySpec::None);
    let mut sim = Simulator::new(
        &p,
        RetryPolicy::default_for(Context::Http),
        backends(&[(1, BackendMode::Dead)]),
    );
    assert_eq!(run_n(&mut sim, 3, NOW), ["502 127.0.0.1:1"; 3]);
}

#[test]
fn backup_takes_over_when_the_primaries_fail() {
    let p = plan(vec![line(1, ""), line(2, "backup")], KeySpec::None);
    let mut sim = Simulator::new(
        &p,
        RetryPolicy::default_for(Context::Http),
        backends(&[(1, BackendMode::Dead)]),
    );
    assert_eq!(
        run_n(&mut sim, 2, NOW),
        ["200 127.0.0.1:1, 127.0.0.1:2", "200 127.0.0.1:2"]
    );
}

#[test]
fn held_requests_keep_their_connection_until_released() {
    let p = plan(vec![line(1, ""), line(2, "")], KeySpec::None);
    let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Http), backends(&[]));
    assert_eq!(sim.run(&req(), true, NOW).golden_line("backend"), "200 127.0.0.1:1");
    assert_eq!(sim.run(&req(), true, NOW).golden_line("backend"), "200 127.0.0.1:1");
    assert_eq!(p.primary.peers[0].slot.conns(), 2);
    sim.run(&req(), false, NOW);
    assert_eq!(p.primary.peers[0].slot.conns(), 2);
    sim.release_held(NOW);
    assert_eq!(p.primary.peers[0].slot.conns(), 0);
}

#[test]
fn stream_counts_only_connect_failures() {
    let p = plan(vec![line(1, ""), line(2, ""), line(3, "")], KeySpec::None);
    let bk = backends(&[(1, BackendMode::Dead), (2, BackendMode::Reset)]);
    let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Stream), bk);
    assert_eq!(
        run_n(&mut sim, 2, NOW),
        ["200 127.0.0.1:1, 127.0.0.1:2", "200 127.0.0.1:2"]
    );
    assert_eq!(p.primary.peers[1].slot.fails(), 0);
    let off = RetryPolicy {
        next_upstream: NextUpstream::OFF,
        ..RetryPolicy::default_for(Context::Stream)
    };
    let p = plan(vec![line(1, "max_fails=0"), line(2, "")], KeySpec::None);
    let mut sim = Simulator::new(&p, off, backends(&[(1, BackendMode::Dead), (2, BackendMode::Timeout)]));
    assert_eq!(run_n(&mut sim, 2, NOW), ["502 127.0.0.1:1", "502 127.0.0.1:1"]);
}

#[test]
fn keys_come_from_the_plan_key_spec() {
    let tpl = crate::config::key::KeyTemplate::compile("$host|$arg_k").unwrap();
    let cases = [
        (KeySpec::None, b"".to_vec()),
        (KeySpec::ClientAddr, vec![10, 1, 2]),
        (KeySpec::Template(tpl), b"x.test|7".to_vec()),
    ];
    for (spec, want) in cases {
        let mut p = plan(vec![line(1, ""), line(2, "")], spec);
        let recorder = Arc::new(FirstUsable::default());
        p.balancer = Box::new(Recorded(recorder.clone()));
        let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Http), backends(&[]));
        let mut r = Request::new("10.1.2.3".parse().unwrap(), "/p?k=7");
        r.host = Some("X.test:81".into());
        sim.run(&r, false, NOW);
        assert_eq!(recorder.keys.lock().unwrap().as_slice(), [want]);
    }
}

/// Shares a [`FirstUsable`] so the test can read the keys it saw.
#[derive(Debug)]
struct Recorded(Arc<FirstUsable>);

impl Balancer for Recorded {
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        self.0.choose(cx)
    }
    fn name(&self) -> &'static str {
        "recorded"
    }
}

fn config_with(http_name: Option<&str>, stream_name: Option<&str>) -> Config {
    let mut c = Config::default();
    if let Some(name) = http_name {
        let mut proxy = HttpProxyConf::default();
        proxy.next_upstream.http_502 = true;
        proxy.next_upstream_tries = 3;
        let loc = Location {
            matcher: LocationMatch::Prefix("/".into()),
            parent: None,
            proxy_pass: Some(ProxyPass {
                scheme: "http".into(),
                upstream: 1,
                uri: None,
                url: None,
            }),
            ret: None,
            script: Vec::new(),
            admin: None,
            proxy,
            client: Default::default(),
            files: Default::default(),
            headers: Default::default(),
            realip: None,
            access: None,
            limits: Default::default(),
            gzip: Default::default(),
            charset: Default::default(),
            error_pages: Default::default(),
            proxy_tls: None,
            span: Span::default(),
        };
        let mut other = upstream(vec![line(9, "")]);
        other.name = "other".into();
        let mut named = upstream(vec![line(1, "")]);
        named.name = name.into();
        c.http = Some(HttpConf {
            upstreams: vec![other, named],
            health: Default::default(),
            maps: Vec::new(),
            limit_zones: Default::default(),
            user_vars: Vec::new(),
            charsets: Default::default(),
            ssl_ciphers: false,
            servers: vec![HttpServer {
                listens: vec![],
                server_names: vec![],
                locations: vec![loc],
                ret: None,
                script: Vec::new(),
                client: Default::default(),
                files: Default::default(),
                headers: Default::default(),
                realip: None,
                access: None,
                limits: Default::default(),
                gzip: Default::default(),
                charset: Default::default(),
                tls: None,
                http2: Default::default(),
                error_pages: Default::default(),
                span: Span::default(),
            }],
        });
    }
    if let Some(name) = stream_name {
        let mut named = upstream(vec![line(2, "")]);
        named.name = name.into();
        c.stream = Some(StreamConf {
            upstreams: vec![named],
            health: Default::default(),
            maps: Vec::new(),
            limit_zones: Default::default(),
            block_logs: Vec::new(),
            xdp: Vec::new(),
            servers: vec![StreamServer {
                listens: vec![],
                server_names: Vec::new(),
                upstream: Some(0),
                pass: None,
                ret: None,
                access_log: Vec::new(),
                error_log: Vec::new(),
                connect_timeout: Duration::from_secs(1),
                timeout: Duration::from_secs(1),
                next_upstream: false,
                next_upstream_tries: 0,
                upload_rate: None,
                download_rate: None,
                udp_requests: 0,
                udp_responses: None,
                half_close: false,
                realip: None,
                access: None,
                limits: Default::default(),
                proxy_protocol: false,
                proxy_protocol_timeout: std::time::Duration::from_secs(30),
                ssl: Default::default(),
                span: Span::default(),
            }],
        });
    }
    c
}

#[test]
fn locate_finds_the_upstream_and_its_retry_settings() {
    let c = config_with(Some("u"), Some("s"));
    let h = locate(&c, "u", None).unwrap();
    assert_eq!(h.upstream.servers[0].text, "127.0.0.1:1");
    assert_eq!(
        (h.policy.context, h.policy.tries, h.policy.next_upstream.http_502),
        (Context::Http, 3, true)
    );
    let s = locate(&c, "s", None).unwrap();
    assert_eq!(s.policy, http(NextUpstream::OFF, 0).with_context(Context::Stream));
    // an upstream nothing proxies to gets the defaults
    assert_eq!(
        locate(&c, "other", None).unwrap().policy,
        RetryPolicy::default_for(Context::Http)
    );
    assert_eq!(
        locate(&c, "nope", None).unwrap_err(),
        LocateError::NotFound("nope".into())
    );
    assert_eq!(
        locate(&c, "u", Some(Context::Stream)).unwrap_err().to_string(),
        "no upstream \"u\" in the stream block"
    );
    let both = config_with(Some("x"), Some("x"));
    assert_eq!(
        locate(&both, "x", None).unwrap_err(),
        LocateError::Ambiguous("x".into())
    );
    assert_eq!(
        locate(&both, "x", Some(Context::Stream)).unwrap().upstream.servers[0].text,
        "127.0.0.1:2"
    );
}

impl RetryPolicy {
    fn with_context(mut self, context: Context) -> Self {
        self.context = context;
        self
    }
}

#[test]
fn a_post_goes_on_only_from_a_peer_it_never_reached() {
    let post = Request {
        method: "POST".into(),
        ..req()
    };
    let p = plan(vec![line(1, ""), line(2, ""), line(3, "")], KeySpec::None);
    let modes = [(1, BackendMode::Dead), (2, BackendMode::Reset)];
    let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Http), backends(&modes));
    // refused by 1 (nothing sent: on to 2), reset by 2 after it got the request: a 502, 3 never asked
    let r = sim.run(&post, false, NOW);
    assert_eq!(r.golden_line("backend"), "502 127.0.0.1:1, 127.0.0.1:2");
    let resend = NextUpstream {
        non_idempotent: true,
        ..NextUpstream::default()
    };
    let p = plan(vec![line(1, ""), line(2, ""), line(3, "")], KeySpec::None);
    let mut sim = Simulator::new(&p, http(resend, 0), backends(&modes));
    let r = sim.run(&post, false, NOW);
    assert_eq!(r.golden_line("backend"), "200 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3");
    // a GET was never held back
    let p = plan(vec![line(1, ""), line(2, ""), line(3, "")], KeySpec::None);
    let mut sim = Simulator::new(&p, RetryPolicy::default_for(Context::Http), backends(&modes));
    assert_eq!(run_n(&mut sim, 1, NOW), ["200 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3"]);
}

#[test]
fn a_trace_line_names_its_method() {
    let lines = parse_trace("127.0.0.1 / method=POST\n127.0.0.2 /a\n").unwrap();
    assert_eq!(
        (lines[0].request.method.as_str(), lines[0].request.non_idempotent()),
        ("POST", true)
    );
    assert_eq!(
        (lines[1].request.method.as_str(), lines[1].request.non_idempotent()),
        ("GET", false)
    );
    let err = parse_trace("127.0.0.1 / method=post").unwrap_err().to_string();
    assert!(err.contains("unknown field \"method=post\""), "{err}");
}
