//! A bench's options checked and turned into a plan: the resolved target, the rendered requests, the shards and
//! their CPUs, the connection count and the schedule (closed loop, or a fixed rate).

use super::requests::{self, Common, ListEntry, Prepared};
use super::target::{parse_target, Mode, Target};
use super::LoadgenError;
use corelb_engine::config::model::RuntimeKind;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The payload of a `tcp://` echo bench when `--body` is not given.
pub const DEFAULT_ECHO_PAYLOAD: &[u8] = b"corelb bench echo payload......\n";

/// The longest `--duration`, `--warmup`, and time between two requests of one connection.
pub const MAX_SPAN: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most connections one bench opens.
pub const MAX_CONNECTIONS: usize = 100_000;

/// The options as given (the CLI fills this in).
#[derive(Debug, Clone)]
pub struct Options {
    /// The target: `http://HOST[:PORT][/PATH]` or `tcp://HOST:PORT`.
    pub url: String,
    /// Connections over all shards.
    pub connections: usize,
    /// Shard count; `None` means one per allowed CPU (at most one per connection).
    pub threads: Option<usize>,
    /// Explicit CPUs, one shard each (overrides `threads`).
    pub cores: Option<Vec<usize>>,
    /// How long to measure.
    pub duration: Duration,
    /// How long to run before measuring.
    pub warmup: Duration,
    /// Requests per second over all connections; `None` is a closed loop.
    pub rate: Option<f64>,
    /// Extra request headers, each `Name: value`.
    pub headers: Vec<String>,
    /// The request method of the URL's request (a request list gives its own).
    pub method: String,
    /// The request body (HTTP) or the payload to echo (`tcp://`).
    pub body: Option<Vec<u8>>,
    /// A request list to replay instead of the URL's one request.
    pub request_file: Option<PathBuf>,
    /// How long a connect or a request may take before it counts as a timeout.
    pub timeout: Duration,
    /// The shards' runtime.
    pub runtime: RuntimeKind,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            url: String::new(),
            connections: 10,
            threads: None,
            cores: None,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate: None,
            headers: Vec::new(),
            method: "GET".into(),
            body: None,
            request_file: None,
            timeout: Duration::from_secs(2),
            runtime: RuntimeKind::Tokio,
        }
    }
}

/// A checked bench plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where the requests go, and how (HTTP or echo).
    pub target: Target,
    /// Replayed in order by every connection (each starting at its own offset); never empty.
    pub requests: Vec<Prepared>,
    /// Connections over all shards (at least one per shard).
    pub connections: usize,
    /// One entry per shard: the CPU it is pinned to.
    pub cpus: Vec<usize>,
    /// How long to measure.
    pub duration: Duration,
    /// How long to run before measuring.
    pub warmup: Duration,
    /// Requests per second over all connections; `None` is a closed loop.
    pub rate: Option<f64>,
    /// How long a connect or a request may take before it counts as a timeout.
    pub timeout: Duration,
    /// The shards' runtime.
    pub runtime: RuntimeKind,
}

impl Plan {
    /// Checks `o`, resolves the target, reads the request list and renders every request.
    pub fn build(o: &Options) -> Result<Plan, LoadgenError> {
        if o.duration.is_zero() {
            return Err(LoadgenError::Zero("--duration"));
        }
        if o.connections == 0 {
            return Err(LoadgenError::Zero("--connections"));
        }
        if o.timeout.is_zero() {
            return Err(LoadgenError::Zero("--timeout"));
        }
        if o.duration > MAX_SPAN || o.warmup > MAX_SPAN {
            return Err(LoadgenError::Invalid("--duration and --warmup must be at most 7 days"));
        }
        if o.connections > MAX_CONNECTIONS {
            return Err(LoadgenError::Invalid("at most 100000 connections"));
        }
        if let Some(r) = o.rate {
            if !r.is_finite() {
                return Err(LoadgenError::Invalid("--rate must be a finite number"));
            }
            if r <= 0.0 {
                return Err(LoadgenError::Zero("--rate"));
            }
            if o.connections as f64 / r > MAX_SPAN.as_secs_f64() {
                return Err(LoadgenError::Invalid(
                    "--rate is too low: a connection would wait more than 7 days between requests",
                ));
            }
        }
        let target = parse_target(&o.url)?;
        let requests = match target.mode {
            Mode::Http => http_requests(o, &target)?,
            Mode::Echo => echo_requests(o)?,
        };
        let cpus = shard_cpus(o)?;
        if o.connections < cpus.len() {
            return Err(LoadgenError::TooFewConnections {
                connections: o.connections,
                shards: cpus.len(),
            });
        }
        Ok(Plan {
            target,
            requests,
            connections: o.connections,
            cpus,
            duration: o.duration,
            warmup: o.warmup,
            rate: o.rate,
            timeout: o.timeout,
            runtime: o.runtime,
        })
    }

    /// Connections run by shard `i` (the remainder goes to the first shards).
    pub fn connections_of(&self, shard: usize) -> usize {
        let n = self.cpus.len();
        self.connections / n + usize::from(shard < self.connections % n)
    }

    /// The time between two requests of one connection in an open loop.
    pub fn interval(&self) -> Option<Duration> {
        self.rate.map(|r| {
            Duration::try_from_secs_f64(self.connections as f64 / r)
                .unwrap_or(MAX_SPAN)
                .clamp(Duration::from_nanos(1), MAX_SPAN)
        })
    }
}

fn http_requests(o: &Options, target: &Target) -> Result<Vec<Prepared>, LoadgenError> {
    requests::check_method(&o.method)?;
    let headers = o
        .headers
        .iter()
        .map(|h| requests::parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let common = Common {
        authority: target.authority.clone(),
        headers,
        body: o.body.clone().unwrap_or_default(),
    };
    let entries = match &o.request_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| LoadgenError::ReadFile {
                path: path.clone(),
                source,
            })?;
            let entries = requests::parse_list(&text, path)?;
            check_sources(&entries, target)?;
            entries
        }
        None => vec![ListEntry {
            src: None,
            method: o.method.clone(),
            uri: target.path.clone(),
        }],
    };
    Ok(requests::prepare(&entries, &common))
}

/// Every source address of a request list must be of the target's family and bindable here, or every request
/// from it would fail to connect.
fn check_sources(entries: &[ListEntry], target: &Target) -> Result<(), LoadgenError> {
    let mut checked: Vec<IpAddr> = Vec::new();
    for src in entries.iter().filter_map(|e| e.src) {
        if checked.contains(&src) {
            continue;
        }
        if src.is_ipv4() != target.addr.is_ipv4() {
            return Err(LoadgenError::Source {
                src,
                reason: "not of the target's address family".into(),
            });
        }
        std::net::TcpListener::bind(SocketAddr::new(src, 0)).map_err(|e| LoadgenError::Source {
            src,
            reason: e.to_string(),
        })?;
        checked.push(src);
    }
    Ok(())
}

fn echo_requests(o: &Options) -> Result<Vec<Prepared>, LoadgenError> {
    if !o.headers.is_empty() || o.request_file.is_some() {
        return Err(LoadgenError::Invalid(
            "a tcp:// target takes no headers and no request list (only --body)",
        ));
    }
    let bytes = o.body.clone().unwrap_or_else(|| DEFAULT_ECHO_PAYLOAD.to_vec());
    if bytes.is_empty() {
        return Err(LoadgenError::Invalid("the echo payload (--body) must not be empty"));
    }
    Ok(vec![Prepared {
        src: None,
        bytes,
        head: false,
    }])
}

fn shard_cpus(o: &Options) -> Result<Vec<usize>, LoadgenError> {
    let allowed = corelb_engine::runtime::allowed_cpus().map_err(|e| LoadgenError::Cpu(e.to_string()))?;
    if allowed.is_empty() {
        return Err(LoadgenError::Cpu("no CPU is allowed to this process".into()));
    }
    if let Some(cores) = &o.cores {
        if cores.is_empty() {
            return Err(LoadgenError::Zero("the number of --cores"));
        }
        if let Some(c) = cores.iter().find(|c| !allowed.contains(c)) {
            return Err(LoadgenError::Cpu(format!(
                "CPU {c} is not allowed (allowed: {allowed:?})"
            )));
        }
        return Ok(cores.clone());
    }
    let n = match o.threads {
        Some(0) => return Err(LoadgenError::Zero("--threads")),
        Some(n) => n,
        None => allowed.len().min(o.connections.max(1)),
    };
    Ok((0..n).map(|i| allowed[i % allowed.len()]).collect())
}

/// Parses a duration: a number with an optional unit `ms`, `s`, `m` or `h` (seconds when none), e.g. `10s`,
/// `1.5m`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("bad duration \"{s}\": expected e.g. 10s, 500ms, 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in \"{s}\": use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("bad duration \"{s}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(url: &str) -> Options {
        Options {
            url: url.into(),
            threads: Some(1),
            ..Options::default()
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn checks_options() {
        let p = Plan::build(&opts("http://127.0.0.1:1/x")).unwrap();
        assert_eq!(p.requests.len(), 1);
        assert!(p.requests[0]
            .bytes
            .starts_with(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"));
        assert_eq!(p.interval(), None);
        let mut o = opts("http://127.0.0.1:1/");
        o.rate = Some(100.0);
        assert_eq!(Plan::build(&o).unwrap().interval(), Some(Duration::from_millis(100)));
        o.rate = Some(1e9);
        assert_eq!(Plan::build(&o).unwrap().interval(), Some(Duration::from_nanos(10)));
        for bad in [0.0, -1.0] {
            o.rate = Some(bad);
            assert!(matches!(Plan::build(&o), Err(LoadgenError::Zero("--rate"))));
        }
        for bad in [f64::NAN, f64::INFINITY] {
            o.rate = Some(bad);
            assert!(matches!(Plan::build(&o), Err(LoadgenError::Invalid(_))));
        }
        o.rate = Some(1e-300);
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Invalid(_))));
        let mut o = opts("http://127.0.0.1:1/");
        o.warmup = Duration::from_secs(1 << 40);
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Invalid(_))));
        o.warmup = Duration::ZERO;
        o.connections = MAX_CONNECTIONS + 1;
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Invalid(_))));
        let mut o = opts("http://127.0.0.1:1/");
        o.duration = Duration::ZERO;
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Zero("--duration"))));
        let mut o = opts("tcp://127.0.0.1:1");
        o.headers = vec!["X: 1".into()];
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Invalid(_))));
        let mut o = opts("http://127.0.0.1:1/");
        o.connections = 1;
        o.threads = Some(2);
        assert!(matches!(Plan::build(&o), Err(LoadgenError::TooFewConnections { .. })));
    }

    #[test]
    fn checks_source_addresses() {
        let dir = std::env::temp_dir().join(format!("corelb-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let list = dir.join("l.txt");
        let mut o = opts("http://127.0.0.1:1/");
        o.request_file = Some(list.clone());
        std::fs::write(&list, "127.0.0.9 GET /\n127.0.0.9 GET /b\n").unwrap();
        assert_eq!(Plan::build(&o).unwrap().requests.len(), 2);
        // TEST-NET-1 is never a local address.
        std::fs::write(&list, "192.0.2.1 GET /\n").unwrap();
        assert!(matches!(Plan::build(&o), Err(LoadgenError::Source { .. })));
        std::fs::write(&list, "::1 GET /\n").unwrap();
        let err = Plan::build(&o).unwrap_err();
        assert!(err.to_string().contains("address family"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn spreads_connections_over_shards() {
        let mut o = opts("http://127.0.0.1:1/");
        o.connections = 5;
        o.threads = Some(2);
        let p = Plan::build(&o).unwrap();
        assert_eq!((p.connections_of(0), p.connections_of(1)), (3, 2));
    }
}
