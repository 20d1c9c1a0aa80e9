//! Shards: one executor thread per worker, each with its own `SO_REUSEPORT` listeners, its own balancer state and
//! upstream keepalive pools, sharing only the config snapshot and the zone. A panic in one connection's task is
//! caught and logged; the shard and its other connections keep running.

mod buffers;
mod listen;
mod pool;
mod spare;

pub use buffers::Buffers;
pub use spare::set_page_return;

use crate::access_log::record::RequestRecord;
use crate::access_log::stream::StreamRecord;
use crate::access_log::ShardLog;
use crate::balance::ShardState;
use crate::config::headers::ServerTokens;
use crate::config::stream_format::StreamFormat;
use crate::http::pages::DateCache;
use crate::runtime::{Conn, Runtime};
use crate::snapshot::route::FixedAnswer;
use crate::snapshot::Role;
use crate::snapshot::Snapshot;
use crate::state::Shared;
use corelb_shared_state::ShardSlot;
use futures_lite::FutureExt;
use listen::Listeners;
pub use pool::ConnAge;
use pool::{Pool, PoolLimits};
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How often a shard checks for a stop request and beats its heart.
const TICK: Duration = Duration::from_millis(100);

/// Ticks between two trims of what a peak left unused (a trim frees what stayed unused since the last one): one
/// second, so that a load whose requests in flight come and go (2,000 connections) keeps the buffer sets and burst
/// blocks it takes again and again; trimmed every tick, they were freed and made again, 0.8 page faults per request
/// (BENCHMARKS.md).
const TRIM_EVERY: u64 = 10;

/// What a shard builds for one snapshot generation: its balancer states and upstream keepalive pools (rebuilt
/// after a reload, as nginx's new workers start afresh).
struct GenerationState<C> {
    snap: Arc<Snapshot>,
    http_states: Vec<ShardState>,
    stream_states: Vec<ShardState>,
    pools: Vec<Pool<C>>,
}

impl<C> GenerationState<C> {
    fn new(snap: Arc<Snapshot>, seed: u64) -> Self {
        let seed_state = |i: usize, p| ShardState::seeded(p, seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
        let http_states = snap
            .http_plans
            .iter()
            .enumerate()
            .map(|(i, p)| seed_state(i, p))
            .collect();
        let stream_states = snap
            .stream_plans
            .iter()
            .enumerate()
            .map(|(i, p)| seed_state(i, p))
            .collect();
        let pools = snap
            .config
            .http
            .iter()
            .flat_map(|h| &h.upstreams)
            .map(|u| {
                Pool::new(PoolLimits {
                    capacity: u.keepalive.unwrap_or(0),
                    max_requests: u.keepalive_requests,
                    idle_timeout: u.keepalive_timeout,
                    max_time: u.keepalive_time,
                })
            })
            .collect();
        GenerationState {
            snap,
            http_states,
            stream_states,
            pools,
        }
    }

    /// Moves to `snap`, a reweigh of this state's config (see [`Snapshot::config_generation`]): the balancer
    /// weights carry over to the new plans and the keepalive pools stay.
    fn reweigh(&mut self, snap: Arc<Snapshot>) {
        for (state, plan) in self.http_states.iter_mut().zip(&snap.http_plans) {
            state.reweigh(plan);
        }
        for (state, plan) in self.stream_states.iter_mut().zip(&snap.stream_plans) {
            state.reweigh(plan);
        }
        self.snap = snap;
    }
}

/// The statuses corelb answers with its own error pages.
const ERROR_PAGES: [u16; 16] = [
    400, 403, 404, 405, 408, 412, 413, 414, 494, 497, 500, 501, 502, 503, 504, 505,
];

/// One shard: everything here belongs to one executor thread.
pub struct Shard<R: Runtime> {
    pub index: usize,
    pub shared: Arc<Shared>,
    /// This shard's counters in the zone (connections, requests, refusals, error answers).
    pub counters: Arc<ShardSlot>,
    local: RefCell<GenerationState<R::Conn>>,
    date: RefCell<DateCache>,
    /// nginx's error pages under `server_tokens on`, then under `off`.
    errors: [Vec<FixedAnswer>; 2],
    /// The buffer sets no connection holds now, and husks.
    spares: spare::Spares,
    active: Cell<usize>,
    accepting: Cell<usize>,
    stop: tokio::sync::Notify,
    /// Woken when a reload puts a new config in place (HTTP/2 connections send GOAWAY then, as nginx's old
    /// workers).
    reload: tokio::sync::Notify,
    /// This shard's access log buffers.
    log: RefCell<ShardLog>,
    /// Connections accepted so far (for `$connection`).
    accepted: Cell<u64>,
    /// Idle gzip compressors for the next compressed answers.
    pub gzip: crate::proxy::gzip::GzipPool,
    /// The tasks waiting in an upstream's `queue` on this shard.
    pub queue: crate::proxy::queue::QueueWakers,
    /// This shard's `resolver` answers.
    pub resolver: crate::resolve::Resolver,
}

impl<R: Runtime> Shard<R> {
    /// A shard over the current snapshot of `shared`.
    pub fn new(index: usize, shared: Arc<Shared>) -> Self {
        let snap = shared.snapshot.load_full();
        // Each shard draws its own random sequence (nginx seeds each worker differently too).
        let seed = rand::random::<u64>() ^ index as u64;
        Shard {
            index,
            counters: shared.zone.shard_slot(index),
            local: RefCell::new(GenerationState::new(snap, seed)),
            shared,
            date: RefCell::new(DateCache::default()),
            errors: [ServerTokens::On, ServerTokens::Off]
                .map(|tokens| ERROR_PAGES.map(|code| FixedAnswer::error(code, tokens)).to_vec()),
            spares: Default::default(),
            active: Cell::new(0),
            accepting: Cell::new(0),
            stop: tokio::sync::Notify::new(),
            reload: tokio::sync::Notify::new(),
            log: RefCell::new(ShardLog::default()),
            accepted: Cell::new(0),
            gzip: Default::default(),
            queue: Default::default(),
            resolver: Default::default(),
        }
    }

    /// A number for a new connection, unique in the process (`$connection`).
    pub fn next_connection_id(&self) -> u64 {
        let n = self.accepted.get() + 1;
        self.accepted.set(n);
        (n - 1) * self.shared.shards().max(1) as u64 + self.index as u64 + 1
    }

    /// Writes the access log lines of a finished request (nothing when its location logs nothing).
    pub fn log_request(&self, snap: &Snapshot, rec: &mut RequestRecord) {
        if rec.set == 0 {
            return;
        }
        if let Some(logs) = &self.shared.access_logs {
            self.log.borrow_mut().write(snap, rec, &logs.writer);
        }
        rec.set = 0;
    }

    /// Waits (at most a second, sleeping a millisecond at a time) until the connection's last line to a path with
    /// variables is written: nginx writes it before it closes the connection, and a client may act on the close.
    /// Nothing to wait for (no such line) returns at once.
    pub async fn logs_written(&self, ticket: u64) {
        let Some(logs) = &self.shared.access_logs else {
            return;
        };
        for _ in 0..1000 {
            if logs.writer.named_written(ticket) {
                return;
            }
            R::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// A record for a new stream session (reused from an ended one when there is one).
    pub fn stream_record(&self) -> StreamRecord {
        self.log.borrow_mut().take_stream_record()
    }

    /// Writes the access log lines of an ended stream session and keeps its record for the next one.
    pub fn log_session(&self, snap: &Snapshot, mut rec: StreamRecord) {
        let mut log = self.log.borrow_mut();
        if let (true, Some(logs)) = (rec.set != 0, &self.shared.access_logs) {
            log.write_stream(snap, &mut rec, &logs.writer);
        }
        log.keep_stream_record(rec);
    }

    /// Puts `value` together for the stream session of `rec` as it is now (a `return` value) into `out`.
    pub fn render_stream_value(&self, snap: &Snapshot, value: &StreamFormat, rec: &StreamRecord, out: &mut Vec<u8>) {
        self.log.borrow_mut().render_stream_value(snap, value, rec, out);
    }

    /// The shard's tick for its logs: hands over buffers past their `flush` time, or all of them when the process
    /// asked (or `all`, when the shard ends).
    fn log_tick(&self, all: bool) {
        if let Some(logs) = &self.shared.access_logs {
            self.log.borrow_mut().tick(logs, all);
        }
    }

    /// The generation of the running snapshot (a cheap check before [`Shard::snapshot`]).
    pub fn current_generation(&self) -> u64 {
        self.shared.snapshot.load().generation
    }

    /// The current snapshot (this shard's state is rebuilt when the generation changed).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let current = self.shared.snapshot.load();
        let mut local = self.local.borrow_mut();
        if local.snap.generation != current.generation {
            if current.config_generation == local.snap.config_generation {
                local.reweigh(Arc::clone(&current));
            } else {
                *local = GenerationState::new(Arc::clone(&current), rand::random::<u64>() ^ self.index as u64);
            }
        }
        Arc::clone(&local.snap)
    }

    /// Runs `f` on this shard's balancer state of http upstream `up` of `snap` (a fresh state when `snap` is not
    /// the shard's current generation).
    pub fn with_http_state<T>(&self, snap: &Snapshot, up: usize, f: impl FnOnce(&mut ShardState) -> T) -> Option<T> {
        self.with_state(snap, up, false, f)
    }

    /// As [`Shard::with_http_state`] for a stream upstream.
    pub fn with_stream_state<T>(&self, snap: &Snapshot, up: usize, f: impl FnOnce(&mut ShardState) -> T) -> Option<T> {
        self.with_state(snap, up, true, f)
    }

    fn with_state<T>(
        &self,
        snap: &Snapshot,
        up: usize,
        stream: bool,
        f: impl FnOnce(&mut ShardState) -> T,
    ) -> Option<T> {
        let mut local = self.local.borrow_mut();
        if local.snap.generation == snap.generation {
            let states = if stream {
                &mut local.stream_states
            } else {
                &mut local.http_states
            };
            return states.get_mut(up).map(f);
        }
        drop(local);
        let plans = if stream { &snap.stream_plans } else { &snap.http_plans };
        plans.get(up).map(|p| f(&mut ShardState::seeded(p, self.index as u64)))
    }

    /// An idle keepalive connection to `addr` of http upstream `up`, with its use so far.
    pub fn pool_take(&self, snap: &Snapshot, up: usize, addr: SocketAddr) -> Option<(R::Conn, ConnAge)> {
        let mut local = self.local.borrow_mut();
        if local.snap.generation != snap.generation {
            return None;
        }
        local.pools.get_mut(up)?.take(addr, crate::clock::instant())
    }

    /// Keeps `conn` for reuse (or drops it when the pool is off or the limits say so).
    pub fn pool_put(&self, snap: &Snapshot, up: usize, addr: SocketAddr, conn: R::Conn, age: ConnAge) {
        let mut local = self.local.borrow_mut();
        if local.snap.generation == snap.generation {
            if let Some(p) = local.pools.get_mut(up) {
                p.put(addr, conn, age, crate::clock::instant());
            }
        }
    }

    /// Whether upstream `up` keeps idle connections.
    pub fn pool_enabled(&self, up: usize) -> bool {
        self.local.borrow().pools.get(up).is_some_and(Pool::enabled)
    }

    /// The `Date` value for `now`.
    pub fn date(&self, now: u64, f: impl FnOnce(&[u8])) {
        f(self.date.borrow_mut().get(now));
    }

    /// nginx's error page answer for `code` under `tokens` (500's page for a code without one here).
    pub fn error_answer(&self, code: u16, tokens: ServerTokens) -> &FixedAnswer {
        let [on, off] = &self.errors;
        let set = match tokens {
            ServerTokens::On => on,
            ServerTokens::Off => off,
        };
        set.iter()
            .find(|a| a.status == code)
            .or_else(|| set.iter().find(|a| a.status == 500))
            .unwrap_or(&set[0])
    }

    /// Buffers for a new connection, with a client buffer of `client_size` bytes (the snapshot's
    /// `client_buffer`); recycled when possible.
    #[inline]
    pub fn take_buffers(&self, client_size: usize) -> Box<Buffers> {
        self.spares.take(client_size)
    }

    /// An empty set of buffers (no heap of its own) for a connection closing after a keepalive wait to hold its facts
    /// in; recycled.
    #[inline]
    pub fn take_husk(&self) -> Box<Buffers> {
        self.spares.take_husk()
    }

    /// Runs `read` on the client buffer of the spare set on top of the list (made if there is none, or if that one
    /// is sized for another generation), and takes the set only when bytes came into it: an idle connection's
    /// read try, which leaves the list as it was when the socket has nothing.
    #[inline]
    pub fn read_into_spare(
        &self,
        client_size: usize,
        read: impl FnOnce(&mut [u8]) -> std::task::Poll<std::io::Result<usize>>,
    ) -> std::task::Poll<Option<Box<Buffers>>> {
        self.spares.read_into_top(client_size, read)
    }

    /// Gives a connection's buffers (or a husk) back.
    #[inline]
    pub fn give_buffers(&self, b: Box<Buffers>) {
        self.spares.give(b)
    }

    /// On the tick: frees the spare sets, husks, burst blocks and HTTP/2 relay buffers that stayed unused since the
    /// last tick (what a peak needed, once it has passed), and hands the allocator's free pages back to the system
    /// when enough was freed (off the request path: a steady load frees nothing here).
    fn trim_after_peak(&self, tick: u64) {
        let t = self.spares.trim();
        let bytes = t.sets * spare::SET_BYTES
            + t.husks * std::mem::size_of::<Buffers>()
            + crate::proxy::trim_bursts()
            + crate::proxy::trim_relays()
            + crate::runtime::pipe::trim();
        self.spares.freed(bytes, tick);
    }

    /// Whether this shard is stopping gracefully.
    pub fn draining(&self) -> bool {
        self.shared.draining()
    }

    /// The config generation of the running snapshot (changed by a reload, not by a weight change).
    pub fn current_config_generation(&self) -> u64 {
        self.shared.snapshot.load().config_generation
    }

    /// Completes at the shard's next tick after a reload put a new config in place.
    pub async fn reloaded(&self) {
        self.reload.notified().await;
    }

    /// Completes when a graceful stop begins (for idle waits).
    pub async fn stopped(&self) {
        if !self.draining() {
            self.stop.notified().await;
        }
    }
}

/// Why a shard could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("bind() to {} failed ({})", crate::config::unix_addr::Display(.addr), crate::config::error::errno_text(.source))]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("could not start shard {shard} ({source})")]
    Thread { shard: usize, source: io::Error },
}

/// Starts one shard per entry of `cpus` (pinned when `Some`), each binding its own listeners. Returns once every
/// shard is listening, or the first error; the handles end when the shards end (after a graceful stop).
pub fn start<R: Runtime>(
    shared: &Arc<Shared>,
    cpus: &[Option<usize>],
) -> Result<Vec<std::thread::JoinHandle<io::Result<()>>>, StartError> {
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for (i, &cpu) in cpus.iter().enumerate() {
        let shared = Arc::clone(shared);
        let tx = tx.clone();
        let h = R::start_thread(format!("corelb-shard-{i}"), cpu, move || run_shard::<R>(i, shared, tx))
            .map_err(|source| StartError::Thread { shard: i, source })?;
        handles.push(h);
    }
    drop(tx);
    for _ in 0..cpus.len() {
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(start_failure(handles)),
        }
    }
    Ok(handles)
}

/// The error of the shard thread that ended during start-up (its executor could not be made).
fn start_failure(handles: Vec<std::thread::JoinHandle<io::Result<()>>>) -> StartError {
    // The channel closes as the failed thread drops its sender, a moment before the thread itself ends.
    for _ in 0..100 {
        if handles.iter().any(|h| h.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for (shard, h) in handles.into_iter().enumerate() {
        if !h.is_finished() {
            continue;
        }
        let source = match h.join() {
            Ok(Err(e)) => e,
            Ok(Ok(())) => io::Error::other("the shard ended during start-up"),
            Err(_) => io::Error::other("the shard panicked during start-up"),
        };
        return StartError::Thread { shard, source };
    }
    StartError::Thread {
        shard: 0,
        source: io::Error::other("a shard ended during start-up"),
    }
}

async fn run_shard<R: Runtime>(index: usize, shared: Arc<Shared>, ready: mpsc::Sender<Result<(), StartError>>) {
    let shard = Rc::new(Shard::<R>::new(index, shared));
    let snap = shard.snapshot();
    let bound = match Listeners::bind_all::<R>(&snap, &shard.shared.control.listen_sockets) {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    drop(ready); // start-up waits for every shard's word, or for the channel to close when one cannot start
    let mut listeners = Listeners::spawn::<R>(&shard, bound, snap.generation);
    drop(snap);
    let mut ticks = 0u64;
    let mut config = shard.current_config_generation();
    loop {
        let asleep = Instant::now();
        R::sleep(TICK).await;
        // Event-loop lag: how much later than asked the tick woke (tasks that hog the thread delay it).
        shard.counters.record_loop_lag(asleep.elapsed().saturating_sub(TICK));
        ticks += 1;
        shard.shared.beat(index, ticks);
        if shard.draining() {
            shard.stop.notify_waiters();
            // idle keepalive waits look at `draining` when woken
            crate::runtime::deadline::wake_all();
            if shard.accepting.get() == 0 && shard.active.get() == 0 {
                shard.log_tick(true);
                return;
            }
        } else {
            listeners.follow::<R>(&shard);
            if shard.current_config_generation() != config {
                config = shard.current_config_generation();
                shard.reload.notify_waiters();
                // the old config's `open_file_cache` lines: their descriptors close as their requests end
                crate::proxy::clear_open_file_caches();
            }
        }
        shard.log_tick(false);
        if ticks.is_multiple_of(TRIM_EVERY) {
            shard.trim_after_peak(ticks);
        }
    }
}

/// Counts a connection for as long as it lives, panics included.
struct Active<R: Runtime>(Rc<Shard<R>>);

impl<R: Runtime> Drop for Active<R> {
    fn drop(&mut self) {
        self.0.active.set(self.0.active.get() - 1);
        self.0.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.0.counters.connection_closed();
    }
}

fn spawn_connection<R: Runtime>(
    shard: &Rc<Shard<R>>,
    conn: R::Conn,
    remote: SocketAddr,
    listen: SocketAddr,
    role: Role,
) {
    let _ = conn.set_nodelay(true);
    match role {
        Role::Http => spawn_counted(
            shard,
            crate::proxy::http::serve::<R>(Rc::clone(shard), conn, remote, listen),
        ),
        Role::Stream => spawn_counted(
            shard,
            crate::proxy::stream::serve::<R>(Rc::clone(shard), conn, remote, listen),
        ),
        // a UDP socket accepts no connection
        Role::Udp => {}
    }
}

/// Runs one connection's (or UDP session's) task, counted as an active connection; a panic in it is logged and
/// ends only that task.
fn spawn_counted<R: Runtime>(shard: &Rc<Shard<R>>, task: impl std::future::Future<Output = ()> + 'static) {
    shard.active.set(shard.active.get() + 1);
    shard.shared.connections.fetch_add(1, Ordering::Relaxed);
    shard.counters.connection_opened();
    R::spawn(Counted {
        task: AssertUnwindSafe(task).catch_unwind(),
        active: Active(Rc::clone(shard)),
    });
}

/// A connection's task with its panics caught, counted while it lives. A struct rather than an async block: a block
/// would hold the task's future twice (as captured, and as the future it awaits), an idle connection's included.
struct Counted<R: Runtime, F> {
    task: F,
    active: Active<R>,
}

impl<R: Runtime, F> std::future::Future for Counted<R, F>
where
    F: std::future::Future<Output = std::thread::Result<()>>,
{
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        // SAFETY: `task` is structurally pinned: it is never moved out of `self`, and is dropped in place with it.
        let (task, index) = unsafe {
            let this = self.get_unchecked_mut();
            (std::pin::Pin::new_unchecked(&mut this.task), this.active.0.index)
        };
        match task.poll(cx) {
            std::task::Poll::Pending => std::task::Poll::Pending,
            std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(()),
            std::task::Poll::Ready(Err(panic)) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(no message)");
                crate::log_alert!(
                    "shard {index}: a connection task panicked ({msg}); connection closed, shard goes on"
                );
                std::task::Poll::Ready(())
            }
        }
    }
}
