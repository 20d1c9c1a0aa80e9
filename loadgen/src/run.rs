//! Running a bench: a reachability check, one pinned shard thread per CPU of the plan (tokio or glommio through
//! the runtime seam), a progress callback about once a second, and the shards' stats merged into a report.

use super::report::Report;
use super::stats::ShardStats;
use super::worker::{run_shard, Clock, EarlyStop, ShardJob, ShardProgress};
use super::{LoadgenError, Plan};
use corelb_engine::config::model::RuntimeKind;
use corelb_engine::preflight::{ensure_memlock, probe_io_uring};
use corelb_engine::runtime::glommio_rt::{Glommio, IO_MEMORY};
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time given to the shard threads to start before the first request is due.
const START_SLACK: Duration = Duration::from_millis(100);
/// How often the progress callback runs (and so how soon an early stop is seen).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What the progress callback wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep running.
    Go,
    /// End the run now (e.g. on Ctrl-C) and report what was measured so far.
    Stop,
}

/// A snapshot for the progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Since the first request was due.
    pub elapsed: Duration,
    /// Completed requests so far, warmup included.
    pub requests: u64,
    /// Failed requests so far, warmup included.
    pub errors: u64,
    /// Still in the warmup.
    pub warming_up: bool,
}

/// Runs `plan`, calling `on_progress` four times a second, and returns the merged results.
pub fn run(plan: Plan, on_progress: &mut dyn FnMut(&Progress) -> Flow) -> Result<Report, LoadgenError> {
    check_reachable(&plan)?;
    if plan.runtime == RuntimeKind::Glommio {
        probe_io_uring().map_err(|e| LoadgenError::Runtime(e.to_string()))?;
        ensure_memlock(2 * IO_MEMORY as u64 * plan.cpus.len() as u64, plan.cpus.len())
            .map_err(|e| LoadgenError::Runtime(e.to_string()))?;
    }
    let plan = Arc::new(plan);
    let start = Instant::now() + START_SLACK;
    let measure_from = start + plan.warmup;
    let clock = Clock {
        start,
        measure_from,
        end: measure_from + plan.duration,
    };
    let stop = Arc::new(EarlyStop::new());
    let (tx, rx) = mpsc::channel();
    let mut progress = Vec::new();
    let mut threads = Vec::new();
    let mut first_conn = 0;
    for (i, &cpu) in plan.cpus.iter().enumerate() {
        let shard_progress = Arc::new(ShardProgress::default());
        progress.push(shard_progress.clone());
        let job = ShardJob {
            plan: plan.clone(),
            first_conn,
            conns: plan.connections_of(i),
            clock,
            progress: shard_progress,
            stop: stop.clone(),
            results: tx.clone(),
        };
        first_conn += job.conns;
        let name = format!("bench-{i}");
        let started = match plan.runtime {
            RuntimeKind::Tokio => Tokio::start_thread(name, Some(cpu), move || run_shard::<Tokio>(job)),
            RuntimeKind::Glommio => Glommio::start_thread(name, Some(cpu), move || run_shard::<Glommio>(job)),
        };
        threads.push(started.map_err(LoadgenError::Thread)?);
    }
    drop(tx);
    let shards = Shards {
        rx: &rx,
        threads: &threads,
        progress: &progress,
        stop: &stop,
    };
    let results = collect(&shards, clock, on_progress);
    let measured = match stop.get(&clock) {
        Some(at) if at < clock.end => Some(at.saturating_duration_since(clock.measure_from)),
        _ => None,
    };
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(LoadgenError::Thread(e)),
            Err(_) => return Err(LoadgenError::LostShard),
        }
    }
    if results.len() != plan.cpus.len() {
        return Err(LoadgenError::LostShard);
    }
    let mut total = ShardStats::default();
    for r in &results {
        total.merge(r);
    }
    let mut report = Report::new(&plan, total);
    if let Some(d) = measured {
        report.duration = d;
        report.stopped_early = true;
    }
    Ok(report)
}

/// Connects once from this thread, so an unreachable target is an error before any shard starts.
fn check_reachable(plan: &Plan) -> Result<(), LoadgenError> {
    let addr = plan.target.addr;
    let limit = plan.timeout.min(Duration::from_secs(5));
    match std::net::TcpStream::connect_timeout(&addr, limit) {
        Ok(_) => Ok(()),
        Err(source) => Err(LoadgenError::Unreachable { addr, source }),
    }
}

/// The main thread's view of the running shards.
struct Shards<'a> {
    rx: &'a mpsc::Receiver<ShardStats>,
    threads: &'a [JoinHandle<io::Result<()>>],
    progress: &'a [Arc<ShardProgress>],
    stop: &'a EarlyStop,
}

/// Waits for every shard's stats (or for every shard thread to end), reporting progress on the way and passing an
/// early stop on to the shards.
fn collect(s: &Shards<'_>, clock: Clock, on_progress: &mut dyn FnMut(&Progress) -> Flow) -> Vec<ShardStats> {
    let mut results = Vec::new();
    let mut next_tick = clock.start + PROGRESS_EVERY;
    while results.len() < s.threads.len() {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match s.rx.recv_timeout(wait) {
            Ok(stats) => results.push(stats),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                next_tick = now + PROGRESS_EVERY;
                let flow = on_progress(&Progress {
                    elapsed: now.saturating_duration_since(clock.start),
                    requests: s.progress.iter().map(|p| p.requests.load(Ordering::Relaxed)).sum(),
                    errors: s.progress.iter().map(|p| p.errors.load(Ordering::Relaxed)).sum(),
                    warming_up: now < clock.measure_from,
                });
                if flow == Flow::Stop && s.stop.get(&clock).is_none() {
                    s.stop.set(&clock, now);
                }
                if s.threads.iter().all(JoinHandle::is_finished) {
                    break;
                }
            }
        }
    }
    while let Ok(stats) = s.rx.try_recv() {
        results.push(stats);
    }
    results
}
