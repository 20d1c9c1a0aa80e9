//! The Prometheus endpoint end to end: a known mix of traffic through two shards (200s from one peer, 503s from
//! another, 404s from a `return`, 502s from dead peers, one stream session), then exact counts per peer, status
//! class, shard and histogram in the scraped text, which must parse as the Prometheus text format.

mod support;

use corelb_engine::config::{model::Config, parse_str};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use prometheus_parse::{LineInfo, Sample, Scrape, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use support::backend::{tcp_echo, Backend, Mode};
use support::{dead_addr, free_addr, get, glommio_usable, Proxy};

const OK_REQUESTS: usize = 30;
const UNAVAILABLE_REQUESTS: usize = 10;
const MISSING_REQUESTS: usize = 5;
const DEAD_REQUESTS: usize = 2;

struct Setup {
    listen: SocketAddr,
    stream_listen: SocketAddr,
    ok: Backend,
    unavailable: Backend,
    dead: [SocketAddr; 2],
    echo: SocketAddr,
}

fn config(s: &Setup) -> Config {
    let text = format!(
        "events {{}}
        http {{
            upstream ok {{ server {ok}; }}
            upstream unavailable {{ server {unavailable}; }}
            upstream dead {{ server {d0} max_fails=1; server {d1} max_fails=1; }}
            server {{
                listen {listen};
                location /ok {{ proxy_pass http://ok; }}
                location /unavailable {{ proxy_pass http://unavailable; }}
                location /dead {{ proxy_pass http://dead; }}
                location = /missing {{ return 404; }}
                location = /metrics {{ metrics; }}
            }}
        }}
        stream {{
            upstream echo {{ server {echo}; }}
            server {{ listen {stream}; proxy_pass echo; }}
        }}",
        ok = s.ok.addr,
        unavailable = s.unavailable.addr,
        d0 = s.dead[0],
        d1 = s.dead[1],
        listen = s.listen,
        echo = s.echo,
        stream = s.stream_listen,
    );
    parse_str(&text, Path::new("/etc/corelb/metrics.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Scrapes `/metrics`, checks every line is a comment or a sample the text format allows, and parses it.
fn scrape(listen: SocketAddr) -> (String, Scrape) {
    let resp = get(listen, "/metrics").expect("a scrape answer");
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = resp.text();
    for line in text.lines() {
        let info = LineInfo::parse(line);
        assert!(
            !matches!(info, LineInfo::Ignored | LineInfo::Empty),
            "not the text format: {line:?}"
        );
    }
    let parsed = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");
    (text, parsed)
}

/// The value of the sample `metric` whose labels include every pair of `labels`.
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    match &found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{metric}: not a number: {other:?}"),
    }
}

/// The `+Inf` bucket of histogram `metric` for the peer at `addr`.
fn histogram_total(scrape: &Scrape, metric: &str, addr: &str) -> f64 {
    let s = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get("peer") == Some(addr))
        .unwrap_or_else(|| panic!("no {metric} for {addr}"));
    let Value::Histogram(buckets) = &s.value else {
        panic!("{metric}: not a histogram")
    };
    let inf = buckets.iter().find(|b| b.less_than.is_infinite()).expect("+Inf bucket");
    assert!(
        buckets.windows(2).all(|w| w[0].count <= w[1].count),
        "cumulative buckets"
    );
    inf.count
}

fn status(listen: SocketAddr, path: &str) -> u16 {
    get(listen, path).map_or(0, |r| r.status)
}

/// One stream session: 5 bytes each way.
fn stream_session(addr: SocketAddr) {
    let mut c = TcpStream::connect(addr).expect("stream connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(b"hello").expect("send");
    let mut buf = [0u8; 5];
    c.read_exact(&mut buf).expect("echo");
    assert_eq!(&buf, b"hello");
}

fn mix_is_counted<R: Runtime>() {
    let (echo, _) = tcp_echo();
    let s = Setup {
        listen: free_addr(),
        stream_listen: free_addr(),
        ok: Backend::start("ok", Mode::Ok),
        unavailable: Backend::start("unavailable", Mode::Status(503)),
        dead: [dead_addr(), dead_addr()],
        echo,
    };
    let proxy = Proxy::start::<R>(config(&s), 2);
    for (path, n, want) in [
        ("/ok", OK_REQUESTS, 200),
        ("/unavailable", UNAVAILABLE_REQUESTS, 503),
        ("/missing", MISSING_REQUESTS, 404),
        ("/dead", DEAD_REQUESTS, 502),
    ] {
        for _ in 0..n {
            assert_eq!(status(s.listen, path), want, "{path}");
        }
    }
    stream_session(s.stream_listen);
    // The session is recorded when both sides have closed: scrape until it shows (bounded).
    let end = Instant::now() + Duration::from_secs(5);
    let mut scrapes = 0.0;
    let (text, m) = loop {
        let got = scrape(s.listen);
        scrapes += 1.0;
        let sessions =
            got.1.samples.iter().any(|x| {
                x.metric == "corelb_stream_upstream_peer_session_seconds_count" && x.value == Value::Untyped(1.0)
            });
        if sessions || Instant::now() > end {
            break got;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    check_peers(&s, &m);
    check_shards_and_process(&m, scrapes);
    check_stream(&s, &m);
    assert!(text.contains("# TYPE corelb_upstream_peer_response_seconds histogram"));
    drop(proxy);
}

fn check_peers(s: &Setup, m: &Scrape) {
    let (ok, unavailable) = (s.ok.addr.to_string(), s.unavailable.addr.to_string());
    let ok_peer = [("upstream", "ok"), ("peer", ok.as_str())];
    let bad_peer = [("upstream", "unavailable"), ("peer", unavailable.as_str())];
    let class = |peer: &[(&'static str, &str); 2], c: &'static str| {
        let labels = [peer[0], peer[1], ("class", c)];
        value(m, "corelb_upstream_peer_responses_total", &labels)
    };
    assert_eq!(
        value(m, "corelb_upstream_peer_requests_total", &ok_peer),
        OK_REQUESTS as f64
    );
    assert_eq!(class(&ok_peer, "2xx"), OK_REQUESTS as f64);
    assert_eq!(class(&ok_peer, "5xx"), 0.0);
    assert_eq!(
        value(m, "corelb_upstream_peer_requests_total", &bad_peer),
        UNAVAILABLE_REQUESTS as f64
    );
    assert_eq!(class(&bad_peer, "5xx"), UNAVAILABLE_REQUESTS as f64);
    assert_eq!(class(&bad_peer, "2xx"), 0.0);
    let hist = "corelb_upstream_peer_response_seconds";
    assert_eq!(histogram_total(m, hist, &ok), OK_REQUESTS as f64);
    assert_eq!(histogram_total(m, hist, &unavailable), UNAVAILABLE_REQUESTS as f64);
    let count = |peer: &[(&str, &str)]| value(m, "corelb_upstream_peer_response_seconds_count", peer);
    assert_eq!(count(&ok_peer), OK_REQUESTS as f64);
    assert_eq!(count(&bad_peer), UNAVAILABLE_REQUESTS as f64);
    // Bytes of the exchanges passed to clients: every /ok answer is the backend's same 2-byte-body response.
    let answer = "HTTP/1.1 200 X\r\nServer: test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    assert_eq!(
        value(m, "corelb_upstream_peer_received_bytes_total", &ok_peer),
        (OK_REQUESTS * answer.len()) as f64
    );
    let sent = value(m, "corelb_upstream_peer_sent_bytes_total", &ok_peer);
    assert!(
        sent >= (OK_REQUESTS * "GET /ok HTTP/1.0\r\n\r\n".len()) as f64,
        "{sent}"
    );
    assert_eq!(sent % OK_REQUESTS as f64, 0.0, "the same request each time: {sent}");
    let state = |peer: &[(&'static str, &str); 2], st: &'static str| {
        value(m, "corelb_upstream_peer_state", &[peer[0], peer[1], ("state", st)])
    };
    assert_eq!((state(&ok_peer, "up"), state(&ok_peer, "unavail")), (1.0, 0.0));
    for dead in s.dead.map(|a| a.to_string()) {
        let peer = [("upstream", "dead"), ("peer", dead.as_str())];
        // Each dead peer was tried once by the first request (which then had no peer left) and taken out.
        assert_eq!(value(m, "corelb_upstream_peer_failures_total", &peer), 1.0);
        assert_eq!(value(m, "corelb_upstream_peer_unavail_total", &peer), 1.0);
        assert_eq!(value(m, "corelb_upstream_peer_fails", &peer), 1.0);
        assert_eq!((state(&peer, "unavail"), state(&peer, "up")), (1.0, 0.0));
        assert_eq!(histogram_total(m, hist, &dead), 0.0);
    }
}

/// Sums a per-shard series over the shards.
fn over_shards(m: &Scrape, metric: &str, extra: &[(&str, &str)]) -> f64 {
    let shards: Vec<_> = m.samples.iter().filter(|s| s.metric == metric).collect();
    assert!(!shards.is_empty(), "{metric}");
    (0..2)
        .map(|i| {
            let i = i.to_string();
            let mut labels = vec![("shard", i.as_str())];
            labels.extend_from_slice(extra);
            value(m, metric, &labels)
        })
        .sum()
}

fn check_shards_and_process(m: &Scrape, scrapes: f64) {
    let http = (OK_REQUESTS + UNAVAILABLE_REQUESTS + MISSING_REQUESTS + DEAD_REQUESTS) as f64;
    // Every scrape is a request too, counted before it is answered.
    assert_eq!(over_shards(m, "corelb_shard_requests_total", &[]), http + scrapes);
    // http connections (one per request) and the stream session
    assert_eq!(
        over_shards(m, "corelb_shard_connections_accepted_total", &[]),
        http + scrapes + 1.0
    );
    let e502 = over_shards(m, "corelb_shard_gateway_errors_total", &[("status", "502")]);
    assert_eq!(e502, DEAD_REQUESTS as f64);
    assert_eq!(
        over_shards(m, "corelb_shard_gateway_errors_total", &[("status", "504")]),
        0.0
    );
    assert_eq!(over_shards(m, "corelb_shard_bad_requests_total", &[]), 0.0);
    let max_lag = over_shards(m, "corelb_shard_loop_lag_max_seconds", &[]);
    assert!((0.0..5.0).contains(&max_lag), "{max_lag}");
    assert_eq!(value(m, "corelb_config_generation", &[]), 1.0);
    assert_eq!(value(m, "corelb_config_reloads_total", &[]), 0.0);
    assert_eq!(value(m, "corelb_config_reload_failures_total", &[]), 0.0);
    assert_eq!(value(m, "corelb_api_changes_total", &[]), 0.0);
    let started = value(m, "corelb_start_time_seconds", &[]);
    assert!(started > 1.6e9, "{started}");
}

fn check_stream(s: &Setup, m: &Scrape) {
    let echo = s.echo.to_string();
    let peer = [("upstream", "echo"), ("peer", echo.as_str())];
    assert_eq!(value(m, "corelb_stream_upstream_peer_requests_total", &peer), 1.0);
    assert_eq!(value(m, "corelb_stream_upstream_peer_sent_bytes_total", &peer), 5.0);
    assert_eq!(value(m, "corelb_stream_upstream_peer_received_bytes_total", &peer), 5.0);
    assert_eq!(
        value(m, "corelb_stream_upstream_peer_session_seconds_count", &peer),
        1.0
    );
    assert_eq!(
        histogram_total(m, "corelb_stream_upstream_peer_session_seconds", &echo),
        1.0
    );
}

#[test]
fn a_known_mix_is_counted_exactly_with_tokio() {
    mix_is_counted::<Tokio>();
}

#[test]
fn a_known_mix_is_counted_exactly_with_glommio() {
    if glommio_usable() {
        mix_is_counted::<Glommio>();
    }
}
