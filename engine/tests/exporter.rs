//! The nginx Prometheus exporter people already run (Debian's `prometheus-nginx-exporter`), against corelb both
//! ways: from `stub_status` its `nginx_connections_*` and `nginx_http_requests_total`, and in nginx Plus mode from
//! the API its `nginxplus_upstream_server_*` series, each checked against the counts corelb itself reports after
//! a known number of proxied requests. Without the exporter the test says `SKIP` (a failure when
//! `CORELB_REQUIRE` lists `exporter`).

mod support;

use corelb_engine::admin::stub_status::StubCounts;
use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use prometheus_parse::{Sample, Scrape, Value};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::api_client::api;
use support::backend::{Backend, Mode};
use support::skip::{skip, Need, Skip};
use support::{free_addr, get, glommio_usable, wait_until, Proxy};

/// Requests proxied before the scrapes (round robin over two servers: 4 and 3).
const REQUESTS: usize = 7;

/// The exporter binary: Debian's name, or upstream's, on `PATH` or in `/usr/bin`.
fn exporter_binary() -> Option<PathBuf> {
    let names = ["prometheus-nginx-exporter", "nginx-prometheus-exporter"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]);
    let dirs: Vec<PathBuf> = dirs.collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// The exporter, ended when dropped.
struct Exporter {
    child: Child,
    listen: SocketAddr,
}

impl Exporter {
    /// Starts it with `args` on a loopback port of its own (an address no other test uses, a port the kernel just
    /// gave; another on a clash), and waits until it listens. Panics with its log when it does not start.
    fn start(bin: &Path, args: &[&str]) -> Exporter {
        let mut log = String::new();
        for attempt in 0..3u8 {
            let ip = [127, 0, 91, 1 + attempt];
            let port = TcpListener::bind(SocketAddr::from((ip, 0)))
                .and_then(|l| l.local_addr())
                .expect("a loopback port for the exporter");
            let listen = SocketAddr::from((ip, port.port()));
            let child = Command::new(bin)
                .args(args)
                .arg("-web.listen-address")
                .arg(listen.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the exporter");
            let mut exporter = Exporter { child, listen };
            let up = wait_until(Duration::from_secs(10), || {
                TcpStream::connect(listen).is_ok() || !matches!(exporter.child.try_wait(), Ok(None))
            });
            if up && matches!(exporter.child.try_wait(), Ok(None)) {
                return exporter;
            }
            let _ = exporter.child.kill();
            let _ = exporter.child.wait();
            if let Some(mut err) = exporter.child.stderr.take() {
                let _ = err.read_to_string(&mut log);
            }
        }
        panic!("the exporter did not start with {args:?}:\n{log}");
    }

    /// One scrape of its `/metrics`.
    fn scrape(&self) -> Scrape {
        let resp = get(self.listen, "/metrics").expect("a scrape of the exporter");
        assert_eq!(resp.status, 200, "{}", resp.head);
        let text = resp.text();
        Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the exporter's text parses")
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the one sample `name` with `labels`.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "one {name}{labels:?} sample: {found:?}");
    match found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{name}: {other:?}"),
    }
}

fn config_text(listen: SocketAddr, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        "events {{}}
        http {{
            upstream backends {{ zone backends 64k; server {a}; server {b}; }}
            server {{
                listen {listen};
                location / {{ proxy_pass http://backends; }}
                location = /stub_status {{ stub_status; }}
                location /api {{ api; }}
            }}
        }}"
    )
}

fn scraped_both_ways<R: Runtime>(bin: &Path) {
    let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
    let listen = free_addr();
    let text = config_text(listen, a.addr, b.addr);
    let config = parse_str(&text, Path::new("/etc/corelb/exporter.conf")).expect("config");
    let p = Proxy::start::<R>(config, 2);
    for _ in 0..REQUESTS {
        assert_eq!(get(listen, "/").map(|r| r.status), Some(200));
    }
    assert!(wait_until(Duration::from_secs(5), || StubCounts::take(&p.shared)
        .active
        == 0));

    // stub_status: the exporter reads the page once at start and once per scrape.
    let stub = Exporter::start(bin, &["-nginx.scrape-uri", &format!("http://{listen}/stub_status")]);
    let s = stub.scrape();
    let own = StubCounts::take(&p.shared);
    assert_eq!(value(&s, "nginx_up", &[]), 1.0);
    assert_eq!(value(&s, "nginx_http_requests_total", &[]), (REQUESTS + 2) as f64);
    assert_eq!(own.requests, (REQUESTS + 2) as u64, "{own:?}");
    assert_eq!(value(&s, "nginx_connections_accepted", &[]), own.accepts as f64);
    assert_eq!(value(&s, "nginx_connections_handled", &[]), own.handled as f64);
    // During the scrape its own request was the one being written; its client may keep the start-up one idle.
    assert_eq!(value(&s, "nginx_connections_writing", &[]), 1.0);
    assert_eq!(value(&s, "nginx_connections_reading", &[]), 0.0);
    let waiting = value(&s, "nginx_connections_waiting", &[]);
    assert_eq!(value(&s, "nginx_connections_active", &[]), 1.0 + waiting);
    assert!(
        own.accepts == REQUESTS as u64 + 1 + waiting as u64,
        "{own:?}, waiting {waiting}"
    );
    drop(stub);

    // nginx Plus mode: its client (API version 8) finds its version in /api's list and reads every endpoint.
    let plus = Exporter::start(
        bin,
        &["-nginx.plus", "-nginx.scrape-uri", &format!("http://{listen}/api")],
    );
    let s = plus.scrape();
    assert_eq!(value(&s, "nginxplus_up", &[]), 1.0);
    let (status, up) = api(listen, "GET", "/api/8/http/upstreams/backends", "");
    assert_eq!(status, 200, "{up}");
    let mut proxied = 0.0;
    for (peer, backend) in [(0, &a), (1, &b)] {
        let server = backend.addr.to_string();
        let labels = [("upstream", "backends"), ("server", server.as_str())];
        let own = &up["peers"][peer];
        assert_eq!(own["server"], server);
        let requests = value(&s, "nginxplus_upstream_server_requests", &labels);
        assert_eq!(requests, own["requests"].as_f64().unwrap_or(-1.0));
        assert_eq!(requests, backend.requests() as f64);
        proxied += requests;
        let ok = [labels[0], labels[1], ("code", "2xx")];
        assert_eq!(
            value(&s, "nginxplus_upstream_server_responses", &ok),
            own["responses"]["2xx"].as_f64().unwrap_or(-1.0)
        );
        assert_eq!(value(&s, "nginxplus_upstream_server_state", &labels), 1.0, "up");
        for (series, field) in [
            ("nginxplus_upstream_server_sent", "sent"),
            ("nginxplus_upstream_server_received", "received"),
            ("nginxplus_upstream_server_fails", "fails"),
            ("nginxplus_upstream_server_active", "active"),
        ] {
            let want = own[field].as_f64().unwrap_or(-1.0);
            assert_eq!(value(&s, series, &labels), want, "{series}");
        }
    }
    assert_eq!(proxied, REQUESTS as f64);
    // The process-wide series come from /connections: every connection so far was accepted there.
    let accepted = value(&s, "nginxplus_connections_accepted", &[]);
    let own = StubCounts::take(&p.shared);
    assert!(
        accepted > REQUESTS as f64 && accepted <= own.accepts as f64,
        "{accepted} of {own:?}"
    );
    drop(plus);
}

fn with_exporter(run: impl FnOnce(&Path)) {
    match exporter_binary() {
        Some(bin) => run(&bin),
        None => skip(Skip {
            need: Need::Exporter,
            cases: 1,
            what: "exporter runs",
            why: "no prometheus-nginx-exporter (apt-get install prometheus-nginx-exporter)",
        }),
    }
}

#[test]
fn scraped_both_ways_tokio() {
    with_exporter(scraped_both_ways::<Tokio>);
}

#[test]
fn scraped_both_ways_glommio() {
    if glommio_usable() {
        with_exporter(scraped_both_ways::<Glommio>);
    }
}
