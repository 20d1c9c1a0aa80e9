//! `corelb bench` end to end on loopback: the histogram against a server with known delays, coordinated-omission
//! correction against a server that stalls for 1 s, the `.hgrm` text parsed back, and request-list replay with
//! source addresses. Every run is bounded (≤ 3 s) and every server stops when its client goes away.

use corelb_engine::config::model::RuntimeKind;
use corelb_engine::http::request::{parse_request, MAX_HEADERS};
use corelb_engine::http::BodyFraming;
use corelb_loadgen::{hgrm, run, Flow, Options, Plan, Report};
use hdrhistogram::Histogram;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One request as the test server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    uri: String,
    src: IpAddr,
    body: Vec<u8>,
}

/// A keepalive HTTP/1.1 server on a fresh loopback port, one thread per connection. Request `n` (counted over all
/// connections from 0) is answered after `delay(n)`; every request is recorded.
struct TestServer {
    addr: SocketAddr,
    log: Arc<Log>,
}

/// What the test server keeps.
#[derive(Default)]
struct Log {
    /// Every request, as it was parsed.
    seen: Mutex<Vec<Seen>>,
    /// For every answered request, how long it was held from being parsed to its response's first byte: the
    /// client wrote it before and reads the response after, so its latency is at least this, however loaded the
    /// machine is.
    held: Mutex<Vec<Duration>>,
}

/// What every connection of the test server shares.
struct Handler {
    delay: Box<dyn Fn(u64) -> Duration + Send + Sync>,
    counter: AtomicU64,
    log: Arc<Log>,
}

impl TestServer {
    fn start(delay: impl Fn(u64) -> Duration + Send + Sync + 'static) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Log::default());
        let handler = Arc::new(Handler {
            delay: Box::new(delay),
            counter: AtomicU64::new(0),
            log: log.clone(),
        });
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let handler = handler.clone();
                thread::spawn(move || serve(stream, &handler));
            }
        });
        TestServer { addr, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.log.seen.lock().unwrap().clone()
    }

    /// How long each answered request was held, in whole microseconds, shortest first.
    fn held_micros(&self) -> Vec<u64> {
        let mut held: Vec<u64> = self
            .log
            .held
            .lock()
            .unwrap()
            .iter()
            .map(|d| d.as_micros() as u64)
            .collect();
        held.sort_unstable();
        held
    }
}

fn serve(mut s: TcpStream, handler: &Handler) {
    let src = s.peer_addr().unwrap().ip();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let parsed = parse_request(&buf, &mut hs).ok().flatten().map(|h| {
            let len = match h.body {
                BodyFraming::Length(n) => n as usize,
                _ => 0,
            };
            (h.method.to_string(), h.target.to_string(), h.head_len, len)
        });
        let Some((method, uri, head_len, body_len)) = parsed.filter(|p| buf.len() >= p.2 + p.3) else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let body = buf[head_len..head_len + body_len].to_vec();
        buf.drain(..head_len + body_len);
        let parsed_at = Instant::now();
        let n = handler.counter.fetch_add(1, Ordering::SeqCst);
        handler.log.seen.lock().unwrap().push(Seen { method, uri, src, body });
        thread::sleep((handler.delay)(n));
        handler.log.held.lock().unwrap().push(parsed_at.elapsed());
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

fn bench(url: String, tweak: impl FnOnce(&mut Options)) -> Report {
    let mut o = Options {
        url,
        connections: 1,
        threads: Some(1),
        timeout: Duration::from_secs(5),
        ..Options::default()
    };
    tweak(&mut o);
    run(Plan::build(&o).unwrap(), &mut |_| Flow::Go).unwrap()
}

const MS: u64 = 1000;

/// Runs `attempt` for `base`, then 4 and 16 times as long, until its result is `enough`: a test that needs some
/// number of requests waits for them instead of assuming what a starved machine serves in a fixed time. Returns
/// the last result.
fn until_enough<T>(base: Duration, mut attempt: impl FnMut(Duration) -> T, enough: impl Fn(&T) -> bool) -> T {
    let mut out = attempt(base);
    for factor in [4, 16] {
        if enough(&out) {
            break;
        }
        out = attempt(base * factor);
    }
    out
}

/// Every sample in `h`, smallest first, each as the highest value its bucket stands for (at least the true one).
fn samples_high(h: &Histogram<u64>) -> Vec<u64> {
    let mut all = Vec::new();
    for v in h.iter_recorded() {
        all.resize(all.len() + v.count_at_value() as usize, v.value_iterated_to());
    }
    all
}

/// Every sample in `h`, smallest first, each as the lowest value its bucket stands for (at most the true one).
fn samples_low(h: &Histogram<u64>) -> Vec<u64> {
    samples_high(h).into_iter().map(|v| h.lowest_equivalent(v)).collect()
}

/// The sum of the samples in `h`, rounded down: at most the true sum.
fn total_low(h: &Histogram<u64>) -> u64 {
    samples_low(h).iter().sum()
}

/// Asserts that every rank of `upper` is at least the same rank of `lower` (both sorted): what holds for the sorted
/// lists when every sample of `upper` is at least its own counterpart in `lower`, a superset of them.
fn assert_dominates(upper: &[u64], lower: &[u64], what: &str) {
    assert!(
        upper.len() <= lower.len(),
        "{what}: {} samples, {} counterparts",
        upper.len(),
        lower.len()
    );
    for (k, (u, l)) in upper.iter().zip(lower).enumerate() {
        assert!(u >= l, "{what}: rank {k} is {u} us, below its counterpart's {l} us");
    }
}

#[test]
fn percentiles_match_known_server_delays() {
    // Every tenth request takes 60 ms, the others 10 ms: p50 is 10 ms, p99 and max are 60 ms, 10% are slow.
    let slow = |n: u64| n % 10 == 9;
    let server = TestServer::start(move |n| Duration::from_millis(if slow(n) { 60 } else { 10 }));
    let duration = Duration::from_millis(1500);
    let r = bench(server.url("/"), |o| o.duration = duration);
    let h = &r.stats.corrected;
    let served_slow = (0..server.seen().len() as u64).filter(|&n| slow(n)).count() as u64;
    assert!(h.len() >= 20, "{} requests", h.len());
    // A loaded machine only adds to a latency, so the checks are the bounds that holds for: from below, each
    // sample is at least what the server held its request (rank by rank, as both lists are sorted); from above,
    // one connection's requests follow each other inside the run, so their latencies add up to at most its length.
    assert_dominates(&samples_high(h), &server.held_micros(), "latency vs. the server's hold");
    assert!(h.min() >= 10 * MS, "min {}", h.min());
    assert!(
        total_low(h) <= duration.as_micros() as u64,
        "latencies add up to more than the run"
    );
    // Every slow request takes at least 60 ms; the last one may be cut off by the end of the run.
    let recorded_slow = h.count_between(60 * MS, u64::MAX);
    assert!(
        recorded_slow + 1 >= served_slow,
        "{recorded_slow} slow recorded, {served_slow} served"
    );
    let p99 = h.value_at_percentile(99.0);
    assert!(p99 >= 60 * MS, "p99 {p99}: 10% of the requests take 60 ms");
    // Tells 10 ms from 60 ms: only holding up most of the fast requests by 50 ms each would break it.
    let p50 = h.value_at_percentile(50.0);
    assert!(p50 < 60 * MS, "p50 {p50}: 90% of the requests take 10 ms");
    assert_eq!(r.stats.status_counts(), vec![(200, h.len())]);
    assert_eq!(r.stats.errors.total(), 0);
    // A closed loop has no schedule: both histograms count from the write.
    assert!(r.stats.corrected == r.stats.uncorrected);
}

#[test]
fn warmup_results_are_not_counted() {
    // The first 0.5 s (the warmup) is served slowly, the measured 0.5 s quickly.
    let start = std::time::Instant::now();
    let server = TestServer::start(move |_| {
        let slow = start.elapsed() < Duration::from_millis(400);
        Duration::from_millis(if slow { 200 } else { 1 })
    });
    let r = bench(server.url("/"), |o| {
        o.warmup = Duration::from_millis(500);
        o.duration = Duration::from_millis(500);
    });
    let h = &r.stats.corrected;
    // How many requests one connection completes in 0.5 s depends on the machine; at least one was measured.
    assert!(!h.is_empty(), "{} requests", h.len());
    // A warmup request takes at least 200 ms; a measured one 1 ms, plus whatever a loaded machine adds.
    assert!(h.max() < 200 * MS, "a warmup request was counted: max {}", h.max());
    assert!(server.seen().len() as u64 > h.len(), "warmup requests were sent");
    assert!(r.text().contains("after 500.00ms warmup"));
}

#[test]
fn open_loop_corrects_for_coordinated_omission() {
    // 100 requests/s on one connection; the request due at 1.0 s stalls the server for 1 s.
    let server = TestServer::start(|n| Duration::from_millis(if n == 100 { 1000 } else { 0 }));
    let r = bench(server.url("/"), |o| {
        o.duration = Duration::from_secs(3);
        o.rate = Some(100.0);
    });
    let (c, u) = (&r.stats.corrected, &r.stats.uncorrected);
    // The schedule has 300 slots; the stalled request is the 101st.
    assert_eq!(c.len(), u.len());
    assert!((101..=300).contains(&c.len()), "{} requests", c.len());
    assert!(u.max() >= 1000 * MS, "uncorrected max {}", u.max());
    // Each request's corrected latency counts from its slot, no later than its write: at least its uncorrected one.
    assert_dominates(&samples_high(c), &samples_low(u), "corrected vs. uncorrected");
    // Corrected: the requests queued behind the stall are sent when it ends, at least 1 s after the stalled slot,
    // so the i-th of them waited at least 1 s - i * 10 ms. Requests go out in slot order, so with `c.len()` sent,
    // slots 101.. up to `c.len()` were: the stalled one and min(sent behind it, 10) of 900 ms, min(.., 50) of
    // 500 ms (on a quiet machine all 300 slots are sent: 10 and 50, the top 1% and 10% of the run).
    let behind = c.len().saturating_sub(101);
    assert!(
        c.count_between(900 * MS, u64::MAX) > behind.min(10),
        "corrected samples of 900 ms or more"
    );
    assert!(
        c.count_between(500 * MS, u64::MAX) > behind.min(50),
        "corrected samples of 500 ms or more"
    );
    let c99 = c.value_at_percentile(99.0);
    assert!(c99 >= 900 * MS, "corrected p99 {c99}");
    assert!(c.value_at_percentile(90.0) >= 500 * MS);
    // Counted from the schedule, not from the start of the run: the stall and a second of late wake-ups at most.
    assert!(c.max() < 2000 * MS, "corrected max {}", c.max());
    // Uncorrected: one connection's writes and responses follow each other inside the 3 s run, so their latencies
    // add up to at most 3 s: besides the stalled request, at most 5 more samples can reach 500 ms; the tail hides.
    assert!(
        total_low(u) <= 3_000 * MS,
        "uncorrected latencies add up to more than the run"
    );
    assert!(
        u.count_between(500 * MS, u64::MAX) <= 6,
        "uncorrected samples of 500 ms or more"
    );
}

/// A parsed `.hgrm` row: value (ms), percentile (0..1), total count, and 1/(1-p) when given.
type Row = (f64, f64, u64, Option<f64>);

fn parse_hgrm(text: &str) -> (Vec<Row>, f64, u64) {
    let mut rows = Vec::new();
    let (mut max, mut total) = (f64::NAN, 0);
    for line in text.lines().skip(2) {
        if let Some(rest) = line.strip_prefix("#[Max     =") {
            let (m, t) = rest.split_once(", Total count    =").unwrap();
            max = m.trim().parse().unwrap();
            total = t.trim_end_matches(']').trim().parse().unwrap();
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() == 3 || f.len() == 4, "row {line:?}");
        rows.push((
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f.get(3).map(|v| v.parse().unwrap()),
        ));
    }
    (rows, max, total)
}

fn check_hgrm_matches(h: &Histogram<u64>) {
    let text = hgrm::percentile_distribution(h, 5, 1000.0);
    let (rows, max, total) = parse_hgrm(&text);
    assert_eq!(total, h.len());
    assert_eq!((max * 1000.0).round() as u64, h.max());
    assert!(rows.len() > 10);
    assert_eq!(rows.last().unwrap().2, h.len());
    assert_eq!(rows.last().unwrap().3, None, "the 100% row has no 1/(1-p)");
    for w in rows.windows(2) {
        assert!(w[0].0 <= w[1].0 && w[0].1 <= w[1].1 && w[0].2 <= w[1].2, "{w:?}");
    }
    for (value, p, count, inv) in rows {
        let us = (value * 1000.0).round() as u64;
        assert_eq!(h.count_between(0, us), count, "count up to {value} ms");
        assert!(count as f64 / h.len() as f64 >= p - 1e-9, "{count} at {p}");
        if let Some(inv) = inv {
            assert!((inv - 1.0 / (1.0 - p)).abs() < 0.006, "{inv} vs {p}");
        }
    }
}

#[test]
fn hgrm_output_parses_back_to_the_histogram() {
    let server = TestServer::start(|n| Duration::from_micros(200 + (n % 7) * 300));
    let run_for = |d| {
        bench(server.url("/"), |o| {
            o.duration = d;
            o.connections = 2;
        })
    };
    let r = until_enough(Duration::from_millis(800), run_for, |r| r.stats.corrected.len() > 50);
    assert!(r.stats.corrected.len() > 50);
    check_hgrm_matches(&r.stats.corrected);
}

#[test]
fn replays_the_request_list_with_source_addresses() {
    let dir = std::env::temp_dir().join(format!("corelb-loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("requests.txt");
    let lines = "# replayed in order\n127.0.0.2 GET /a\n127.0.0.3 POST /b?x=1\nGET /c\n\n127.0.0.3 PUT /d\n";
    std::fs::write(&list, lines).unwrap();
    // A fresh server per run: the list must replay in order from its first line, twice at least.
    let run_for = |d| {
        let server = TestServer::start(|_| Duration::ZERO);
        let r = bench(server.url("/ignored"), |o| {
            o.duration = d;
            o.request_file = Some(list.clone());
            o.body = Some(b"hi".to_vec());
            o.headers = vec!["X-Test: 1".into()];
        });
        (r, server.seen())
    };
    let (r, seen) = until_enough(Duration::from_millis(500), run_for, |(_, seen)| seen.len() >= 8);
    std::fs::remove_dir_all(&dir).unwrap();
    let expected: Vec<(&str, &str, &str)> = vec![
        ("GET", "/a", "127.0.0.2"),
        ("POST", "/b?x=1", "127.0.0.3"),
        ("GET", "/c", "127.0.0.1"),
        ("PUT", "/d", "127.0.0.3"),
    ];
    assert!(seen.len() >= 8, "{} requests seen", seen.len());
    for (i, s) in seen.iter().enumerate() {
        let (method, uri, src) = expected[i % expected.len()];
        assert_eq!((s.method.as_str(), s.uri.as_str()), (method, uri), "request {i}");
        assert_eq!(s.src, src.parse::<IpAddr>().unwrap(), "request {i}");
        assert_eq!(s.body, b"hi");
    }
    let recorded = r.stats.requests;
    assert!(recorded == seen.len() as u64 || recorded + 1 == seen.len() as u64);
}

/// A server that answers one request per connection, its body delimited by the close.
fn closing_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            while let Ok(n @ 1..) = s.read(&mut buf) {
                head.extend_from_slice(&buf[..n]);
                if head.ends_with(b"\r\n\r\n") {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye");
                    break;
                }
            }
        }
    });
    addr
}

#[test]
fn reconnects_after_close_delimited_responses() {
    let url = format!("http://{}/", closing_server());
    let run_for = |d| bench(url.clone(), |o| o.duration = d);
    let r = until_enough(Duration::from_millis(300), run_for, |r| r.stats.requests >= 2);
    // Every answer closes its connection: a second request means the generator reconnected (how many fit in
    // 0.3 s is the machine's business).
    assert!(r.stats.requests >= 2, "{} requests", r.stats.requests);
    assert_eq!(r.stats.errors.total(), 0);
    assert_eq!(r.stats.status_counts(), vec![(200, r.stats.requests)]);
}

#[test]
fn a_request_without_answer_times_out_and_the_run_goes_on() {
    // The fourth request is never answered (the server sleeps past the end of the run); the client gives up after
    // 200 ms, reconnects, and carries on.
    // A fresh server per run (its fourth request is the held one); a starved machine gets a longer run.
    let run_for = |d: Duration| {
        let server =
            TestServer::start(move |n| Duration::from_millis(if n == 3 { 3000 + d.as_millis() as u64 } else { 1 }));
        let r = bench(server.url("/"), |o| {
            o.duration = d;
            o.timeout = Duration::from_millis(200);
        });
        (r, server.seen().len() as u64)
    };
    let (r, seen) = until_enough(Duration::from_millis(700), run_for, |(r, _)| r.stats.requests > 3);
    assert_eq!(r.stats.errors.timeout, 1);
    assert_eq!(r.stats.errors.total(), 1);
    // Three answered before the one that timed out, and the run went on after it.
    assert!(r.stats.requests > 3, "{} requests", r.stats.requests);
    // A timed-out request is not a latency sample: one sample per answered request, and the server got one more
    // (the held fourth) than were answered. (A bound on the samples' size would also catch a late answer of a
    // starved machine.)
    assert_eq!(r.stats.corrected.len(), r.stats.requests);
    assert!(seen > r.stats.requests, "{seen} seen, {} answered", r.stats.requests);
}

#[test]
fn echo_mode_and_shards() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let r = bench(format!("tcp://{addr}"), |o| {
        o.duration = Duration::from_millis(400);
        o.connections = 4;
        o.threads = Some(2);
        o.body = Some(vec![b'z'; 3000]);
    });
    assert!(r.stats.requests > 0);
    assert_eq!(r.stats.errors.total(), 0);
    assert_eq!(r.stats.bytes_read, r.stats.requests * 3000);
    assert!(r.stats.status_counts().is_empty());
    assert_eq!(r.shards, 2);
}

#[test]
fn glommio_runs_where_io_uring_does() {
    // Whether this machine can run glommio is known before the run: the same two preflight checks the run makes,
    // with the same figures. That decides the one correct outcome: a run without errors, or the check's message.
    let io_memory = 2 * corelb_engine::runtime::glommio_rt::IO_MEMORY as u64;
    let refusal = corelb_engine::preflight::probe_io_uring()
        .and_then(|()| corelb_engine::preflight::ensure_memlock(io_memory, 1))
        .err()
        .map(|e| e.to_string());
    let server = TestServer::start(|_| Duration::ZERO);
    let run_for = |duration| {
        let o = Options {
            url: server.url("/"),
            connections: 2,
            threads: Some(1),
            duration,
            runtime: RuntimeKind::Glommio,
            ..Options::default()
        };
        run(Plan::build(&o).unwrap(), &mut |_| Flow::Go)
    };
    let served = |r: &Result<Report, _>| r.as_ref().map_or(true, |r| r.stats.requests > 0);
    let result = until_enough(Duration::from_millis(300), run_for, served);
    match (result, refusal) {
        (Ok(r), None) => {
            assert!(r.stats.requests > 0, "{} requests", r.stats.requests);
            assert_eq!((r.runtime, r.stats.errors.total()), ("glommio", 0));
            assert_eq!(r.stats.status_counts(), vec![(200, r.stats.requests)]);
        }
        // Without io_uring (or enough locked memory) the run fails with the preflight's message, not a panic.
        (Err(e), Some(refusal)) => assert_eq!(e.to_string(), refusal),
        (Ok(_), Some(refusal)) => panic!("glommio ran although the preflight refused it: {refusal}"),
        (Err(e), None) => panic!("glommio is usable here, yet the run failed: {e}"),
    }
}
