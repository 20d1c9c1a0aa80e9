//! `corelb pick`: which peer(s) each request would reach, through the engine's simulator.

use clap::Args;
use corelb_engine::balance::{KeySpec, UpstreamPlan};
use corelb_engine::config::{self, ConfigError};
use corelb_engine::resolve::names;
use corelb_engine::simulate::{
    self, parse_trace, BackendMode, Backends, Context, Hop, LocateError, Request, SimResult, Simulator, TraceError,
    TraceLine,
};
use corelb_shared_state::Zone;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

/// The simulated clock at the first request (whole seconds); a trace's `t=` offsets are added to it.
const BASE_TIME: u64 = 1_000_000;

/// `corelb pick` arguments.
#[derive(Debug, Args)]
pub struct PickArgs {
    /// The configuration file.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// The upstream to pick from.
    #[arg(long, value_name = "NAME")]
    upstream: String,
    /// How many requests [default: the number of --remote-addr or --key values, at least 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000), conflicts_with = "trace")]
    count: Option<u32>,
    /// The client address (repeatable: requests cycle through them) [default: 127.0.0.1].
    #[arg(long = "remote-addr", value_name = "IP", conflicts_with = "trace")]
    remote_addr: Vec<IpAddr>,
    /// The request URI.
    #[arg(long, value_name = "URI", default_value = "/", conflicts_with = "trace")]
    uri: String,
    /// The request method (a POST, LOCK or PATCH is not resent once a peer got it, unless non_idempotent).
    #[arg(long, value_name = "METHOD", default_value = "GET", conflicts_with = "trace")]
    method: String,
    /// The hash key, instead of evaluating the upstream's key (repeatable, cycles); for ip_hash, a client address.
    #[arg(long = "key", value_name = "K")]
    key: Vec<String>,
    /// Requests from a file: `REMOTE_ADDR URI [t=SECONDS] [hold] [host=HOST]` per line; `#` comments.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// A peer that fails (repeatable); MODE is dead (default), reset, timeout or eNNN (answers status NNN).
    #[arg(long = "fail", value_name = "ADDR[=MODE]")]
    fail: Vec<FailSpec>,
    /// A peer's simulated answer time in ms (repeatable), which `least_time`, `random two ewma` and
    /// `random two least_time=` measure (the header, first byte and last byte come after it; a connect takes no
    /// time); unlisted peers answer in 0 ms.
    #[arg(long = "latency", value_name = "ADDR=MS")]
    latency: Vec<LatencySpec>,
    /// A fixed answer for a `server NAME resolve` name (repeatable): `NAME=IP[,IP...]`, or for a `service=` line
    /// `NAME=TARGET@IP:PORT[/PRIORITY[/WEIGHT]][,...]` (SRV records, each target's one address).
    #[arg(long = "resolve", value_name = "NAME=ADDRS")]
    resolve: Vec<ResolveSpec>,
    /// Pick from the stream upstream of that name.
    #[arg(long, conflicts_with = "http")]
    stream: bool,
    /// Pick from the http upstream of that name.
    #[arg(long)]
    http: bool,
}

/// `--fail ADDR[=MODE]`.
#[derive(Debug, Clone)]
struct FailSpec {
    addr: SocketAddr,
    mode: BackendMode,
}

impl FromStr for FailSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, mode) = s.split_once('=').unwrap_or((s, "dead"));
        let addr = addr
            .parse()
            .map_err(|_| format!("\"{addr}\" is not an address with a port (e.g. 127.0.0.1:8081)"))?;
        let mode = mode.parse().map_err(|e: TraceError| e.to_string())?;
        Ok(FailSpec { addr, mode })
    }
}

/// `--resolve NAME=ADDRS`.
#[derive(Debug, Clone)]
struct ResolveSpec {
    host: String,
    found: Vec<names::Found>,
}

impl FromStr for ResolveSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (host, addrs) = s
            .split_once('=')
            .ok_or_else(|| format!("\"{s}\" is not NAME=IP[,IP...] (e.g. backend.example=10.0.0.1,10.0.0.2)"))?;
        let found = addrs.split(',').map(found).collect::<Result<_, _>>()?;
        Ok(ResolveSpec {
            host: host.to_ascii_lowercase(),
            found,
        })
    }
}

/// One address of `--resolve`: `IP`, or `TARGET@IP:PORT[/PRIORITY[/WEIGHT]]`.
fn found(a: &str) -> Result<names::Found, String> {
    let bad = || format!("\"{a}\" is not IP or TARGET@IP:PORT[/PRIORITY[/WEIGHT]]");
    let Some((target, rest)) = a.split_once('@') else {
        let ip: IpAddr = a.parse().map_err(|_| bad())?;
        return Ok(names::found_at(ip, 0, "", 0, 1));
    };
    let mut parts = rest.split('/');
    let addr: SocketAddr = parts.next().unwrap_or_default().parse().map_err(|_| bad())?;
    let mut number = |default: u16| parts.next().map_or(Ok(default), |n| n.parse().map_err(|_| bad()));
    let (priority, weight) = (number(0)?, number(1)?);
    Ok(names::found_at(
        addr.ip(),
        addr.port(),
        &target.to_ascii_lowercase(),
        priority,
        weight,
    ))
}

/// `--latency ADDR=MS`.
#[derive(Debug, Clone)]
struct LatencySpec {
    addr: SocketAddr,
    ms: u64,
}

impl FromStr for LatencySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, ms) = s
            .split_once('=')
            .ok_or_else(|| format!("\"{s}\" is not ADDR=MS (e.g. 127.0.0.1:8081=150)"))?;
        let addr = addr
            .parse()
            .map_err(|_| format!("\"{addr}\" is not an address with a port (e.g. 127.0.0.1:8081)"))?;
        let ms = ms
            .parse()
            .map_err(|_| format!("\"{ms}\" is not a number of milliseconds"))?;
        Ok(LatencySpec { addr, ms })
    }
}

/// Why `pick` could not run.
#[derive(Debug, thiserror::Error)]
pub enum PickError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("[emerg] {0}")]
    Locate(#[from] LocateError),
    #[error("[emerg] {0}")]
    Plan(#[from] corelb_engine::balance::PlanError),
    #[error("cannot read the trace {0}: {1}")]
    ReadTrace(PathBuf, io::Error),
    #[error("trace {0}: {1}")]
    Trace(PathBuf, TraceError),
    #[error("--{0} {1}: no such peer in upstream \"{2}\"")]
    UnknownPeer(&'static str, SocketAddr, String),
    #[error("--key \"{0}\": upstream \"{1}\" uses ip_hash, so the key is a client address (e.g. 192.168.1.10)")]
    KeyNotAddress(String, String),
    #[error("cannot write the output: {0}")]
    Output(io::Error),
}

/// Runs `pick` and prints errors nginx-style; the exit code says whether it worked.
pub fn main(args: &PickArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match run(args, &mut out).and_then(|()| out.flush().map_err(PickError::Output)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(PickError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corelb: {e}");
            ExitCode::from(1)
        }
    }
}

/// Simulates the requests `args` describes and writes one line per request to `out`.
pub fn run(args: &PickArgs, out: &mut dyn Write) -> Result<(), PickError> {
    let mut config = config::load(&args.config)?;
    let fixed: Vec<(String, Vec<names::Found>)> =
        args.resolve.iter().map(|r| (r.host.clone(), r.found.clone())).collect();
    names::fill_fixed(&mut config, &fixed);
    let context = match (args.stream, args.http) {
        (true, _) => Some(Context::Stream),
        (_, true) => Some(Context::Http),
        _ => None,
    };
    let located = simulate::locate(&config, &args.upstream, context)?;
    let plan = UpstreamPlan::build(located.upstream, &Zone::new())?;
    let backends = backends(args, &plan)?;
    let requests = requests(args)?;
    let keys = keys(args, &plan)?;
    let mut sim = Simulator::new(&plan, located.policy, backends);
    let mut now = BASE_TIME;
    for (i, t) in requests.iter().enumerate() {
        if let Some(at) = t.at {
            now = BASE_TIME + at;
        }
        let r = &t.request;
        let (label, result) = match keys.get(i % keys.len().max(1)) {
            Some((text, bytes)) => (
                format!("key={text}"),
                sim.run_with_key(bytes, r.non_idempotent(), t.hold, now),
            ),
            None => (r.uri.clone(), sim.run(r, t.hold, now)),
        };
        let host = r.host.as_deref().map(|h| format!(" host={h}")).unwrap_or_default();
        let method = if r.method == "GET" {
            String::new()
        } else {
            format!(" method={}", r.method)
        };
        let hold = if t.hold { " hold" } else { "" };
        let line = format!(
            "{} {label}{host}{method}{hold} -> {}",
            r.remote,
            describe(&result, &plan.name)
        );
        writeln!(out, "{line}").map_err(PickError::Output)?;
    }
    sim.release_held(now);
    Ok(())
}

/// The backends: every peer answers in 0 ms, except the `--fail` ones and those with a `--latency`.
fn backends(args: &PickArgs, plan: &UpstreamPlan) -> Result<Backends, PickError> {
    let mut backends = Backends::new();
    let known = |option, addr| {
        let mut peers = plan.primary.peers.iter().chain(&plan.backup.peers);
        match peers.any(|p| p.addr == addr) {
            true => Ok(()),
            false => Err(PickError::UnknownPeer(option, addr, plan.name.clone())),
        }
    };
    for f in &args.fail {
        known("fail", f.addr)?;
        backends.set(f.addr, f.mode);
    }
    for l in &args.latency {
        known("latency", l.addr)?;
        backends.set_latency(l.addr, l.ms);
    }
    Ok(backends)
}

/// The requests: the trace's lines, or `--count` requests cycling through `--remote-addr`.
fn requests(args: &PickArgs) -> Result<Vec<TraceLine>, PickError> {
    if let Some(path) = &args.trace {
        let text = std::fs::read_to_string(path).map_err(|e| PickError::ReadTrace(path.clone(), e))?;
        return parse_trace(&text).map_err(|e| PickError::Trace(path.clone(), e));
    }
    let default = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let addrs = if args.remote_addr.is_empty() {
        &default[..]
    } else {
        &args.remote_addr[..]
    };
    let count = args.count.map_or(addrs.len().max(args.key.len()), |n| n as usize);
    let requests = addrs.iter().cycle().take(count).map(|&ip| TraceLine {
        request: Request {
            method: args.method.to_ascii_uppercase(),
            ..Request::new(ip, args.uri.clone())
        },
        at: None,
        hold: false,
        line: 0,
    });
    Ok(requests.collect())
}

/// The `--key` values as key bytes for this plan; none when the plan reads no key (with a warning).
fn keys(args: &PickArgs, plan: &UpstreamPlan) -> Result<Vec<(String, Vec<u8>)>, PickError> {
    if args.key.is_empty() {
        return Ok(Vec::new());
    }
    match &plan.key {
        KeySpec::None => {
            eprintln!(
                "corelb: [warn] upstream \"{}\" uses {}, which reads no key: --key is ignored",
                plan.name,
                plan.balancer.name()
            );
            Ok(Vec::new())
        }
        KeySpec::ClientAddr => args
            .key
            .iter()
            .map(|k| {
                let ip: IpAddr = k
                    .parse()
                    .map_err(|_| PickError::KeyNotAddress(k.clone(), plan.name.clone()))?;
                let mut bytes = Vec::new();
                corelb_engine::balance::ip_hash::key_into(ip, &mut bytes);
                Ok((k.clone(), bytes))
            })
            .collect(),
        KeySpec::Template(_) => Ok(args.key.iter().map(|k| (k.clone(), k.as_bytes().to_vec())).collect()),
    }
}

/// `127.0.0.1:8089 (error), 127.0.0.1:8082`, with ` => STATUS` when the answer is not 200.
fn describe(result: &SimResult, upstream: &str) -> String {
    if result.hops.is_empty() {
        // Refused before any upstream (a path above the root, a bad escape), as nginx refuses it.
        return format!("(refused, no upstream) => {}", result.status);
    }
    let hops: Vec<String> = result
        .hops
        .iter()
        .map(|h| match h {
            Hop::Peer { addr, failure: Some(f) } => format!("{addr} ({f})"),
            Hop::Peer { addr, failure: None } => addr.to_string(),
            Hop::NoLive => format!("{upstream} (no live upstreams)"),
        })
        .collect();
    let mut line = hops.join(", ");
    if result.status != 200 {
        line.push_str(&format!(" => {}", result.status));
    }
    line
}
