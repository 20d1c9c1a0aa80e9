//! One shard of the bench: its connections, each replaying the request list on its own schedule (back to back in
//! a closed loop; every `connections / rate` seconds in an open loop, latency counted from the scheduled time as
//! wrk2 does), recording into the shard's stats without locks.

use super::exchange::{Exchanger, Response};
use super::net::ClientRuntime;
use super::pacer::Pacer;
use super::requests::Prepared;
use super::stats::{ErrorKind, Sample, ShardStats};
use super::target::Mode;
use super::Plan;
use corelb_engine::runtime::timeout;
use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How often a shard publishes its counts for the progress line.
const PROGRESS_TICK: Duration = Duration::from_millis(100);
/// How long a closed-loop connection waits after a failed connect before trying again.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);

/// The run's clock, shared by every shard.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The origin of every schedule.
    pub start: Instant,
    /// Results count from here (the end of the warmup).
    pub measure_from: Instant,
    /// No request is sent, and none in flight is waited for, after this.
    pub end: Instant,
}

/// A shard's counters as the progress line reads them; one cache line per shard.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct ShardProgress {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
}

/// An early stop (Ctrl-C), set by the main thread and seen by every shard within a progress tick: the time since
/// the clock's start at which the run ends instead, or none.
#[derive(Debug)]
pub(crate) struct EarlyStop(AtomicU64);

impl EarlyStop {
    pub fn new() -> Self {
        EarlyStop(AtomicU64::new(u64::MAX))
    }

    /// Ends the run at `at`.
    pub fn set(&self, clock: &Clock, at: Instant) {
        let since = at.saturating_duration_since(clock.start).as_nanos();
        self.0
            .store(u64::try_from(since).unwrap_or(u64::MAX - 1), Ordering::Relaxed);
    }

    /// When the run was stopped early, if it was.
    pub fn get(&self, clock: &Clock) -> Option<Instant> {
        let n = self.0.load(Ordering::Relaxed);
        (n != u64::MAX).then(|| clock.start + Duration::from_nanos(n))
    }
}

/// What a shard thread is given.
pub(crate) struct ShardJob {
    pub plan: Arc<Plan>,
    /// Global index of this shard's first connection, and how many it runs.
    pub first_conn: usize,
    pub conns: usize,
    pub clock: Clock,
    pub progress: Arc<ShardProgress>,
    pub stop: Arc<EarlyStop>,
    pub results: mpsc::Sender<ShardStats>,
}

struct Shard {
    plan: Arc<Plan>,
    clock: Clock,
    stats: RefCell<ShardStats>,
    /// Wakes open-loop connections at their send times.
    pacer: Pacer,
    /// The end of the run: the clock's, or earlier after an early stop.
    end: Cell<Instant>,
    stop: Arc<EarlyStop>,
}

impl Shard {
    /// Whether a request finished at `done` is inside the run (an early stop may not have been seen yet).
    fn in_run(&self, done: Instant) -> bool {
        done <= self.end.get() && !matches!(self.stop.get(&self.clock), Some(at) if done > at)
    }
}

/// Counts a shard's live connection tasks.
struct Live(Rc<Cell<usize>>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Runs one shard: starts its connections at the clock's start, publishes progress, and sends its stats back when
/// every connection has stopped.
pub(crate) async fn run_shard<R: ClientRuntime>(job: ShardJob) {
    let shard = Rc::new(Shard {
        plan: job.plan,
        clock: job.clock,
        stats: RefCell::new(ShardStats::default()),
        pacer: Pacer::new(),
        end: Cell::new(job.clock.end),
        stop: job.stop.clone(),
    });
    if shard.plan.interval().is_some() {
        let shard = shard.clone();
        R::spawn(async move { shard.pacer.run::<R>(shard.clock.end).await });
    }
    let live = Rc::new(Cell::new(0usize));
    for k in 0..job.conns {
        live.set(live.get() + 1);
        let guard = Live(live.clone());
        let shard = shard.clone();
        let index = job.first_conn + k;
        R::spawn(async move {
            let _live = guard;
            connection::<R>(&shard, index).await;
        });
    }
    while live.get() > 0 {
        R::sleep(PROGRESS_TICK).await;
        publish(&shard.stats.borrow(), &job.progress);
        if let Some(at) = job.stop.get(&shard.clock) {
            if at < shard.end.get() {
                shard.end.set(at);
                shard.pacer.stop();
            }
        }
    }
    let stats = std::mem::take(&mut *shard.stats.borrow_mut());
    publish(&stats, &job.progress);
    // The receiver only goes away when the run is abandoned; then there is nobody to report to.
    let _ = job.results.send(stats);
}

fn publish(stats: &ShardStats, progress: &ShardProgress) {
    progress.requests.store(stats.progress_requests, Ordering::Relaxed);
    progress.errors.store(stats.progress_errors, Ordering::Relaxed);
}

/// An open client connection and the source address it is bound to.
struct Open<S> {
    stream: S,
    src: Option<IpAddr>,
}

/// How one scheduled request went.
enum Outcome {
    Done(Response, Instant),
    Failed(ErrorKind),
    /// The run ended while it was in flight: not counted.
    Stopped,
}

async fn sleep_until<R: ClientRuntime>(t: Instant) {
    let now = Instant::now();
    if t > now {
        R::sleep(t - now).await;
    }
}

/// One connection's loop, until the end of the run.
async fn connection<R: ClientRuntime>(shard: &Shard, index: usize) {
    let plan = &*shard.plan;
    let clock = shard.clock;
    let interval = plan.interval();
    let mut next = index * plan.requests.len() / plan.connections;
    // Open-loop connections are spread evenly over the first interval so that they do not send in bursts.
    let phase = interval.map_or(Duration::ZERO, |i| i.mul_f64(index as f64 / plan.connections as f64));
    let mut scheduled = clock.start + phase;
    let mut open: Option<Open<R::Stream>> = None;
    let mut ex = Exchanger::default();
    sleep_until::<R>(clock.start).await;
    loop {
        if interval.is_some() {
            if scheduled >= shard.end.get() {
                break;
            }
            shard.pacer.until(scheduled).await;
        }
        let now = Instant::now();
        if now >= shard.end.get() {
            break;
        }
        let Some(request) = plan.requests.get(next) else { break };
        next = (next + 1) % plan.requests.len();
        // Open loop: latency counts from the schedule. Closed loop: from the write (a connect is not latency).
        let scheduled_at = interval.map(|_| scheduled);
        if let Some(i) = interval {
            scheduled += i;
        }
        let outcome = attempt::<R>(plan, shard.end.get(), &mut open, &mut ex, request).await;
        match outcome {
            Outcome::Done(resp, sent) => {
                let done = Instant::now();
                if !shard.in_run(done) {
                    break; // completed after an early stop: outside the measured window
                }
                let intended = scheduled_at.unwrap_or(sent);
                let sample = Sample {
                    corrected: done.saturating_duration_since(intended),
                    uncorrected: done.saturating_duration_since(sent),
                    status: resp.status,
                    read: resp.read,
                    written: request.bytes.len() as u64,
                };
                shard.stats.borrow_mut().record(&sample, intended >= clock.measure_from);
            }
            Outcome::Failed(kind) => {
                let at = Instant::now();
                if !shard.in_run(at) {
                    break;
                }
                shard.stats.borrow_mut().record_error(kind, at >= clock.measure_from);
                if kind == ErrorKind::Connect && interval.is_none() {
                    sleep_until::<R>((at + CONNECT_BACKOFF).min(shard.end.get())).await;
                }
            }
            Outcome::Stopped => break,
        }
    }
}

/// Sends `request` (connecting first when there is no connection from its source address) and reads the answer,
/// within the request timeout and never past `end`.
async fn attempt<R: ClientRuntime>(
    plan: &Plan,
    end: Instant,
    open: &mut Option<Open<R::Stream>>,
    ex: &mut Exchanger,
    request: &Prepared,
) -> Outcome {
    let left = end.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Outcome::Stopped;
    }
    let limit = plan.timeout.min(left);
    let cut_short = |kind| {
        if Instant::now() >= end {
            Outcome::Stopped
        } else {
            Outcome::Failed(kind)
        }
    };
    if !matches!(open, Some(o) if o.src == request.src) {
        *open = None;
        match timeout::<R, _>(limit, R::open(plan.target.addr, request.src, limit)).await {
            Ok(Ok(stream)) => {
                *open = Some(Open {
                    stream,
                    src: request.src,
                })
            }
            Ok(Err(_)) | Err(_) => return cut_short(ErrorKind::Connect),
        }
    }
    let Some(conn) = open.as_mut() else {
        return Outcome::Failed(ErrorKind::Connect);
    };
    let sent = Instant::now();
    let exchange = async {
        match plan.target.mode {
            Mode::Http => ex.http(&mut conn.stream, &request.bytes, request.head).await,
            Mode::Echo => ex.echo(&mut conn.stream, &request.bytes).await,
        }
    };
    match timeout::<R, _>(limit, exchange).await {
        Ok(Ok(resp)) => {
            if !resp.reusable {
                *open = None;
            }
            Outcome::Done(resp, sent)
        }
        Ok(Err(e)) => {
            *open = None;
            cut_short(e.kind())
        }
        Err(_) => {
            *open = None;
            cut_short(ErrorKind::Timeout)
        }
    }
}
