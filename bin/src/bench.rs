//! `corelb bench URL`: the load generator's command line. Parses the options, runs the bench (the `corelb-loadgen`
//! crate), shows a progress line on a terminal, prints the summary and writes the `.hgrm`, JSON and SVG files.
//! Exit codes: 0 done, 1 the run failed (target unreachable, a shard could not start, a file not written),
//! 2 bad input.

use clap::Args;
use corelb_engine::config::model::RuntimeKind;
use corelb_engine::server::{block_signals, wait_signal};
use corelb_loadgen::plan::parse_duration;
use corelb_loadgen::{hgrm, json, svg, Flow, LoadgenError, Options, Plan, Progress, Report};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `corelb bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The target: http://HOST[:PORT][/PATH] (HTTP/1.1, keepalive) or tcp://HOST:PORT (echo the --body payload).
    url: String,
    /// Connections, spread over the shards.
    #[arg(short = 'c', long, default_value_t = 10)]
    connections: usize,
    /// How long to measure (e.g. 10s, 500ms, 1m).
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Run this long before measuring.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// Shards (threads), each pinned to one allowed CPU in turn [default: one per allowed CPU].
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// The CPUs to run one shard each on, e.g. 0,1 (instead of --threads).
    #[arg(long, value_delimiter = ',', conflicts_with = "threads")]
    cores: Option<Vec<usize>>,
    /// Open loop: requests per second over all connections, latency measured from when each request should have
    /// been sent (coordinated-omission correction). Without it: closed loop, as fast as responses come.
    #[arg(short = 'R', long)]
    rate: Option<f64>,
    /// An extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// The request method.
    #[arg(short = 'm', long, default_value = "GET")]
    method: String,
    /// The request body (or the echo payload of a tcp:// target); @FILE reads it from FILE.
    #[arg(long)]
    body: Option<String>,
    /// Replay the requests of FILE, one "[SRC_IP] METHOD URI" per line (SRC_IP: bind the client socket to it).
    #[arg(long = "requests", value_name = "FILE")]
    requests: Option<PathBuf>,
    /// Give up on a request (and count a timeout) after this long.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    timeout: Duration,
    /// The shard runtime.
    #[arg(long, value_parser = ["tokio", "glommio"], default_value = "tokio")]
    runtime: String,
    /// Write the latency percentile distribution (HdrHistogram .hgrm text, milliseconds) to FILE.
    #[arg(long, value_name = "FILE")]
    hgrm: Option<PathBuf>,
    /// Write a JSON summary to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a latency-by-percentile chart (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// Runs `corelb bench`.
pub fn main(args: &BenchArgs) -> ExitCode {
    match bench(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corelb bench: {e}");
            ExitCode::from(exit_code(&e))
        }
    }
}

fn exit_code(e: &LoadgenError) -> u8 {
    match e {
        LoadgenError::Unreachable { .. }
        | LoadgenError::Runtime(_)
        | LoadgenError::Thread(_)
        | LoadgenError::LostShard
        | LoadgenError::Output { .. }
        | LoadgenError::Plot(_) => 1,
        _ => 2,
    }
}

fn options(a: &BenchArgs) -> Result<Options, LoadgenError> {
    let body = match a.body.as_deref() {
        Some(b) => Some(match b.strip_prefix('@') {
            Some(path) => std::fs::read(path).map_err(|source| LoadgenError::ReadFile {
                path: path.into(),
                source,
            })?,
            None => b.as_bytes().to_vec(),
        }),
        None => None,
    };
    Ok(Options {
        url: a.url.clone(),
        connections: a.connections,
        threads: a.threads,
        cores: a.cores.clone(),
        duration: a.duration,
        warmup: a.warmup,
        rate: a.rate,
        headers: a.headers.clone(),
        method: a.method.clone(),
        body,
        request_file: a.requests.clone(),
        timeout: a.timeout,
        runtime: if a.runtime == "glommio" {
            RuntimeKind::Glommio
        } else {
            RuntimeKind::Tokio
        },
    })
}

/// Whether SIGINT or SIGTERM has come (they are blocked, so only this sees them).
fn interrupted() -> Flow {
    match wait_signal(Duration::ZERO) {
        Some(_) => Flow::Stop,
        None => Flow::Go,
    }
}

fn bench(a: &BenchArgs) -> Result<(), LoadgenError> {
    let plan = Plan::build(&options(a)?)?;
    // Ctrl-C ends the run early with a report of what was measured, as in wrk; the shard threads inherit the mask.
    block_signals();
    let report = if std::io::stderr().is_terminal() {
        let mut line = ProgressLine::default();
        let r = corelb_loadgen::run(plan, &mut |p| {
            line.show(p);
            interrupted()
        });
        line.clear();
        r?
    } else {
        corelb_loadgen::run(plan, &mut |_| interrupted())?
    };
    print!("{}", report.text());
    write_files(a, &report)
}

fn write_files(a: &BenchArgs, r: &Report) -> Result<(), LoadgenError> {
    let s = &r.stats;
    if let Some(path) = &a.hgrm {
        let text = hgrm::percentile_distribution(&s.corrected, hgrm::TICKS_PER_HALF_DISTANCE, hgrm::MICROS_PER_MILLI);
        write(path, &text)?;
    }
    if let Some(path) = &a.json {
        write(path, &json::summary(r))?;
    }
    if let Some(path) = &a.svg {
        let title = format!("Latency by percentile: {}", r.url);
        let chart = if r.rate.is_some() {
            svg::chart(&title, &[("corrected", &s.corrected), ("uncorrected", &s.uncorrected)])?
        } else {
            svg::chart(&title, &[("latency", &s.corrected)])?
        };
        write(path, &chart)?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), LoadgenError> {
    std::fs::write(path, text).map_err(|source| LoadgenError::Output {
        path: path.to_path_buf(),
        source,
    })
}

/// The live line on stderr, redrawn about once a second: elapsed time, requests, the rate since the last redraw,
/// errors.
#[derive(Debug, Default)]
struct ProgressLine {
    last: Option<Progress>,
}

impl ProgressLine {
    fn show(&mut self, p: &Progress) {
        if self
            .last
            .is_some_and(|l| p.elapsed < l.elapsed + Duration::from_millis(950))
        {
            return;
        }
        let rate = match self.last {
            Some(l) if p.elapsed > l.elapsed => {
                (p.requests.saturating_sub(l.requests)) as f64 / (p.elapsed - l.elapsed).as_secs_f64()
            }
            _ => p.requests as f64 / p.elapsed.as_secs_f64().max(1e-3),
        };
        let phase = if p.warming_up { " (warmup)" } else { "" };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K  {:6.1}s{phase}  {} requests  {:.0} req/s  {} errors",
            p.elapsed.as_secs_f64(),
            p.requests,
            rate,
            p.errors
        );
        let _ = err.flush();
        self.last = Some(*p);
    }

    fn clear(&self) {
        if self.last.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
