//! The control plane: the one way a config becomes the running snapshot (start, reload, an API change), serialized
//! by one lock and never on the request path. It builds the snapshot (the zone keeps unchanged peers' slots),
//! swaps the health checkers over to it, publishes it to every shard at once, and counts what happened. A new
//! listen address is tried before the swap, so a reload that could not listen there changes nothing. Reloads from
//! the config file ([`reload_from`]) keep what only a restart can change.

use crate::config::error::errno_text;
use crate::config::model::{Config, RuntimeKind, Workers};
use crate::health::agent::Reweigh;
use crate::health::HealthCheckers;
use crate::runtime::shared_listen::SharedListeners;
use crate::snapshot::{Snapshot, SnapshotError};
use arc_swap::ArcSwap;
use corelb_shared_state::Zone;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a new config was not applied (the running one stays).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The change itself was refused (a config error with its file:line, or a bad API request).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("could not start the health checks ({0})")]
    Health(io::Error),
    /// A listen address the new config adds cannot be bound (nginx's wording).
    #[error("bind() to {} failed ({})", crate::config::unix_addr::Display(.addr), errno_text(.source))]
    Bind { addr: SocketAddr, source: io::Error },
}

impl ApplyError {
    /// The error as one nginx-style log line body: `[emerg] ...` (a config error already carries its level and
    /// `in FILE:LINE`).
    pub fn log_line(&self) -> String {
        match self {
            ApplyError::Refused(m) if m.starts_with('[') => m.clone(),
            other => format!("[emerg] {other}"),
        }
    }
}

/// What the control plane has done so far (read by the metrics and the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlStats {
    /// The running snapshot's generation (1 for the config the process started with).
    pub generation: u64,
    /// Successful reloads (SIGHUP, `-s reload`).
    pub reloads: u64,
    /// Reloads refused (the old config kept serving).
    pub reload_failures: u64,
    /// Changes made through the API.
    pub api_changes: u64,
    /// New generations made for the agents' weights (`agent_port=`, `endpoint_load_metrics`).
    pub agent_changes: u64,
    /// New generations made because a `resolve` server's name changed its addresses.
    pub resolve_changes: u64,
    /// When the process started, seconds since the Unix epoch.
    pub started_at: u64,
    /// When the running snapshot was made (start, reload or API change), milliseconds since the Unix epoch.
    pub loaded_at_ms: u64,
}

/// Which path a change came through (for the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Reload,
    Api,
    /// The upstream name resolver found other addresses (`server NAME resolve`).
    Resolve,
}

/// The control plane's state; lives in [`crate::state::Shared`].
#[derive(Debug)]
pub struct Control {
    /// Held for the whole of a change, so two changes never interleave.
    health: Mutex<HealthCheckers>,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    api_changes: AtomicU64,
    agent_changes: AtomicU64,
    resolve_changes: AtomicU64,
    /// The addresses of the upstreams' `resolve` names, put into every config built here.
    pub names: Arc<crate::resolve::names::Answers>,
    started_at: u64,
    loaded_at_ms: AtomicU64,
    /// How the agent checkers apply weights (set once by the state layer, which owns what a reweigh needs).
    reweigh: std::sync::OnceLock<Reweigh>,
    /// The TCP listening sockets the shards share (the `listen` addresses without `reuseport`).
    pub listen_sockets: SharedListeners,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            health: Mutex::new(HealthCheckers::default()),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            api_changes: AtomicU64::new(0),
            agent_changes: AtomicU64::new(0),
            resolve_changes: AtomicU64::new(0),
            names: Arc::default(),
            reweigh: std::sync::OnceLock::new(),
            started_at: crate::clock::now_ms() / 1000,
            loaded_at_ms: AtomicU64::new(crate::clock::now_ms()),
            listen_sockets: SharedListeners::default(),
        }
    }
}

impl Control {
    /// Starts the health checkers of the first snapshot (before any shard serves it).
    pub fn start_health(&self, snap: Arc<Snapshot>) -> io::Result<()> {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *health).detach();
        *health = HealthCheckers::start_after(snap, None, self.reweigh.get())?;
        Ok(())
    }

    /// Sets how agent checkers apply the weights they read (once; later calls are ignored).
    pub fn set_reweigh(&self, reweigh: Reweigh) {
        let _ = self.reweigh.set(reweigh);
    }

    /// Makes a new generation of the running config, so the plans take the weights and `maxconn` the agents put
    /// in the zone: serialized with every other change, the health and agent checkers left running (the peers are
    /// the same), and marked so shards keep their balancer weights (SWRR's `effective_weight` then moves to the
    /// new weight) and keepalive pools. Returns the new generation.
    pub fn reweigh(&self, current: &ArcSwap<Snapshot>, zone: &Zone) -> Result<u64, ApplyError> {
        let _serial = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let old = current.load_full();
        let mut snap = Snapshot::build(old.config.clone(), zone, old.generation + 1)?;
        snap.config_generation = old.config_generation;
        let generation = snap.generation;
        current.store(Arc::new(snap));
        self.agent_changes.fetch_add(1, Ordering::Relaxed);
        self.loaded_at_ms.store(crate::clock::now_ms(), Ordering::Relaxed);
        Ok(generation)
    }

    /// Stops the health checkers without waiting for probes in flight (graceful stop).
    pub fn signal_stop(&self) {
        self.health.lock().unwrap_or_else(PoisonError::into_inner).signal_stop();
    }

    /// Builds a config from the running one with `change` and makes it the running snapshot: the zone keeps the
    /// slots of peers whose identity is unchanged, the health checkers move to the new peers, and every shard
    /// picks the new snapshot up on its next request. On any error the running snapshot stays. Returns the new
    /// generation.
    pub fn apply(
        &self,
        current: &ArcSwap<Snapshot>,
        zone: &Zone,
        kind: ChangeKind,
        change: impl FnOnce(&Config) -> Result<Config, ApplyError>,
    ) -> Result<u64, ApplyError> {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let (done, failed) = match kind {
            ChangeKind::Reload => (&self.reloads, Some(&self.reload_failures)),
            ChangeKind::Api => (&self.api_changes, None),
            ChangeKind::Resolve => (&self.resolve_changes, None),
        };
        let names = &self.names;
        let before: Vec<(SocketAddr, bool)> = listen_addrs(&current.load().config).collect();
        // the sockets this change bound for good (unix-domain ones, the process's: see runtime/unix.rs; shared TCP
        // ones, this instance's: see runtime/shared_listen.rs)
        let mut fresh = Vec::new();
        let sockets = &self.listen_sockets;
        match Self::build(current, zone, sockets, &mut fresh, |old| {
            let mut config = change(old)?;
            names.fill(&mut config);
            Ok(config)
        })
        .and_then(|snap| Self::publish(snap, &mut health, current, self.reweigh.get()))
        {
            Ok(generation) => {
                // a listener the new config has not: the process's socket closed (a unix-domain one's file
                // removed, as nginx does); the shards close theirs when they see the new snapshot
                let after: Vec<(SocketAddr, bool)> = listen_addrs(&current.load().config).collect();
                for gone in before.iter().filter(|a| !after.contains(a)) {
                    forget_socket(sockets, *gone);
                }
                done.fetch_add(1, Ordering::Relaxed);
                self.loaded_at_ms.store(crate::clock::now_ms(), Ordering::Relaxed);
                Ok(generation)
            }
            Err(e) => {
                // a refused change binds nothing for good: the sockets it bound go again
                for addr in fresh {
                    forget_socket(sockets, (addr, false));
                }
                if let Some(f) = failed {
                    f.fetch_add(1, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    fn build(
        current: &ArcSwap<Snapshot>,
        zone: &Zone,
        sockets: &SharedListeners,
        fresh: &mut Vec<SocketAddr>,
        change: impl FnOnce(&Config) -> Result<Config, ApplyError>,
    ) -> Result<(Arc<Snapshot>, Arc<Snapshot>), ApplyError> {
        let old = current.load_full();
        let config = change(&old.config)?;
        // Before the build: building attaches the new peers to the zone, which a refused change must not do.
        try_new_listens(&old.config, &config, sockets, fresh)?;
        let snap = Snapshot::build(config, zone, old.generation + 1)?;
        Ok((old, Arc::new(snap)))
    }

    /// New checkers first (they mark `mandatory` peers before any request can reach them), then the swap.
    fn publish(
        (old, snap): (Arc<Snapshot>, Arc<Snapshot>),
        health: &mut HealthCheckers,
        current: &ArcSwap<Snapshot>,
        reweigh: Option<&Reweigh>,
    ) -> Result<u64, ApplyError> {
        let next = HealthCheckers::start_after(Arc::clone(&snap), Some(&old), reweigh).map_err(ApplyError::Health)?;
        std::mem::replace(health, next).detach();
        let generation = snap.generation;
        current.store(snap);
        Ok(generation)
    }

    /// The counters, with the generation of `current`.
    pub fn stats(&self, current: &ArcSwap<Snapshot>) -> ControlStats {
        ControlStats {
            generation: current.load().generation,
            reloads: self.reloads.load(Ordering::Relaxed),
            reload_failures: self.reload_failures.load(Ordering::Relaxed),
            api_changes: self.api_changes.load(Ordering::Relaxed),
            agent_changes: self.agent_changes.load(Ordering::Relaxed),
            resolve_changes: self.resolve_changes.load(Ordering::Relaxed),
            started_at: self.started_at,
            loaded_at_ms: self.loaded_at_ms.load(Ordering::Relaxed),
        }
    }
}

/// A job for the control thread.
type Job = Box<dyn FnOnce() + Send>;

/// The control thread: runs control-plane work a shard asked for (an API change: a config build, a state file
/// written and synced, health checker threads started) one job at a time, so that no shard's connections wait
/// on it. Jobs come over a crossbeam channel; each answer goes back on a one-shot channel the shard awaits.
#[derive(Debug)]
pub struct ControlThread {
    jobs: crossbeam_channel::Sender<Job>,
}

impl ControlThread {
    /// Starts the thread; it ends when the last sender (this value) is dropped and the queue is done.
    pub fn start() -> io::Result<ControlThread> {
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        std::thread::Builder::new()
            .name("corelb-control".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })?;
        Ok(ControlThread { jobs })
    }

    /// Runs `job` on the control thread; the future gives its result (`None` if the thread is gone).
    pub fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Option<T>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = self.jobs.send(Box::new(move || {
            let _ = tx.send(job());
        }));
        async move {
            queued.ok()?;
            rx.await.ok()
        }
    }
}

/// Binds each listen address `new` has and `old` has not before anything moved, so that an address another program
/// holds fails the change. A shared TCP socket (no `reuseport`) and a unix-domain one are bound for good (the shards
/// accept on duplicates of them) and their address pushed on `fresh`; a `reuseport` or UDP address is tried the way
/// a shard binds it (`SO_REUSEPORT`) and let go. Addresses kept are not touched.
fn try_new_listens(
    old: &Config,
    new: &Config,
    sockets: &SharedListeners,
    fresh: &mut Vec<SocketAddr>,
) -> Result<(), ApplyError> {
    let before: Vec<(SocketAddr, bool)> = listen_addrs(old).collect();
    for (addr, udp) in listen_addrs(new) {
        if before.contains(&(addr, udp)) {
            continue;
        }
        let bound = if crate::config::unix_addr::is_unix(&addr) {
            // one socket for the process, bound here and kept
            crate::runtime::unix::bind_listener(addr, crate::runtime::unix::BACKLOG).map(|()| true)
        } else {
            let options = socket_options(new, addr, udp);
            if udp || options.reuseport {
                try_bind_reuseport(addr, udp).map(|()| false)
            } else {
                sockets.bind(addr, options)
            }
        };
        match bound {
            Ok(true) => fresh.push(addr),
            Ok(false) => {}
            Err(source) => return Err(ApplyError::Bind { addr, source }),
        }
    }
    Ok(())
}

/// Closes the process's socket of the listen address `(addr, udp)` (a unix-domain one's file removed), if it has one.
fn forget_socket(sockets: &SharedListeners, (addr, udp): (SocketAddr, bool)) {
    if crate::config::unix_addr::is_unix(&addr) {
        crate::runtime::unix::remove(addr);
    } else if !udp {
        sockets.remove(addr);
    }
}

/// Every `listen` address of `config` (http and stream), with whether it is UDP.
fn listen_addrs(config: &Config) -> impl Iterator<Item = (SocketAddr, bool)> + '_ {
    listens(config).map(|l| (l.addr, l.udp))
}

fn listens(config: &Config) -> impl Iterator<Item = &crate::config::model::Listen> + '_ {
    let http = config.http.iter().flat_map(|h| &h.servers).flat_map(|s| &s.listens);
    let stream = config.stream.iter().flat_map(|s| &s.servers).flat_map(|s| &s.listens);
    http.chain(stream)
}

/// The socket options of the listen address `(addr, udp)` of `config` (one of its `listen` lines sets them).
fn socket_options(config: &Config, addr: SocketAddr, udp: bool) -> crate::config::model::SocketOptions {
    listens(config)
        .filter(|l| l.addr == addr && l.udp == udp)
        .fold(Default::default(), |o, l| o.or(l.socket))
}

fn try_bind_reuseport(addr: SocketAddr, udp: bool) -> io::Result<()> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = if udp {
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?
    } else {
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?
    };
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())
}

/// The change a reload makes: the config file at `path` read again (its `[warn]` lines logged), with the settings
/// only a restart can change kept from the running config.
pub fn reload_from(path: &Path) -> impl FnOnce(&Config) -> Result<Config, ApplyError> + '_ {
    move |running| {
        let mut next = crate::config::load(path).map_err(|e| ApplyError::Refused(e.to_string()))?;
        let kept = keep_restart_only(running, &mut next);
        for w in next.warnings.iter().chain(&kept) {
            crate::log_warn!("{w}");
        }
        Ok(next)
    }
}

/// Puts back in `next` what a reload cannot change (the number of shards and their runtime are fixed at start), and
/// says what was kept.
pub fn keep_restart_only(running: &Config, next: &mut Config) -> Vec<String> {
    let mut kept = Vec::new();
    let (was, now) = (running.main.worker_processes, next.main.worker_processes);
    if was != now {
        kept.push(format!(
            "\"worker_processes\" changed from {} to {}: a reload keeps {}, a restart applies it",
            workers_text(was),
            workers_text(now),
            workers_text(was)
        ));
        next.main.worker_processes = was;
    }
    let (was, now) = (running.main.runtime, next.main.runtime);
    if was != now {
        kept.push(format!(
            "\"worker_runtime\" changed from {} to {}: a reload keeps the running runtime, a restart applies it",
            runtime_text(was),
            runtime_text(now)
        ));
        next.main.runtime = was;
    }
    // Once serving as `user`, the process cannot take another account back (nginx's master, still root, can).
    if next.main.user.is_some() && next.main.user != running.main.user {
        kept.push("\"user\" changed: a reload keeps the running account, a restart applies it".into());
    }
    next.main.user = running.main.user.clone();
    next.main.rlimit_nofile = running.main.rlimit_nofile;
    // the shards stay on the CPUs they started on
    next.main.cpu_affinity = running.main.cpu_affinity.clone();
    kept
}

fn workers_text(w: Workers) -> String {
    match w {
        Workers::Auto => "auto".into(),
        Workers::Count(n) => n.to_string(),
    }
}

fn runtime_text(r: Option<RuntimeKind>) -> &'static str {
    match r {
        None => "(unset)",
        Some(RuntimeKind::Tokio) => "tokio",
        Some(RuntimeKind::Glommio) => "glommio",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_str;
    use std::net::TcpListener;

    #[test]
    fn the_control_thread_runs_jobs_in_order_off_the_caller() {
        let control = ControlThread::start().expect("control thread");
        let order = Arc::new(Mutex::new(Vec::new()));
        let pending: Vec<_> = (0..5)
            .map(|i| {
                let order = Arc::clone(&order);
                control.run(move || {
                    order.lock().unwrap().push(i);
                    (i, std::thread::current().name().map(str::to_string))
                })
            })
            .collect();
        for (i, fut) in pending.into_iter().enumerate() {
            let (n, thread) = futures_lite::future::block_on(fut).expect("answered");
            assert_eq!((n, thread.as_deref()), (i, Some("corelb-control")));
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }

    fn config(text: &str) -> Config {
        parse_str(&format!("events {{}}\n{text}"), Path::new("t.conf")).expect("config")
    }

    fn return_server(listen: SocketAddr) -> String {
        format!("http {{ server {{ listen {listen}; return 200 x; }} }}")
    }

    #[test]
    fn restart_only_settings_are_kept_with_a_warning() {
        let running = config("worker_processes 2; worker_runtime tokio;");
        let mut next = config("worker_processes auto; worker_runtime glommio;");
        let kept = keep_restart_only(&running, &mut next);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(kept[0].contains("from 2 to auto"), "{}", kept[0]);
        assert!(kept[1].contains("from tokio to glommio"), "{}", kept[1]);
        assert_eq!(next.main.worker_processes, Workers::Count(2));
        assert_eq!(next.main.runtime, Some(RuntimeKind::Tokio));
        let mut same = config("worker_processes 2; worker_runtime tokio;");
        assert!(keep_restart_only(&running, &mut same).is_empty());
    }

    #[test]
    fn a_new_listen_address_held_elsewhere_refuses_the_change() {
        let zone = Zone::new();
        let free = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let held_addr = held.local_addr().unwrap();
        let old = Snapshot::build(config(&return_server(free)), &zone, 1).unwrap();
        let current = ArcSwap::from_pointee(old);
        let control = Control::default();
        let to = |addr: SocketAddr| move |_: &Config| Ok(config(&return_server(addr)));
        let e = control
            .apply(&current, &zone, ChangeKind::Reload, to(held_addr))
            .unwrap_err();
        assert_eq!(
            e.log_line(),
            format!("[emerg] bind() to {held_addr} failed (98: Address already in use)")
        );
        assert_eq!(control.stats(&current).generation, 1);
        assert_eq!(control.stats(&current).reload_failures, 1);
        drop(held);
        assert_eq!(
            control
                .apply(&current, &zone, ChangeKind::Reload, to(held_addr))
                .unwrap(),
            2
        );
        assert_eq!(current.load().http_port_of(held_addr), Some(0));
    }

    #[test]
    fn a_reload_binds_a_new_shared_listen_address_for_good_and_closes_a_dropped_one() {
        let zone = Zone::new();
        let addr = |_| TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let [first, shared, own] = [0, 1, 2].map(addr);
        let current = ArcSwap::from_pointee(Snapshot::build(config(&return_server(first)), &zone, 1).unwrap());
        let control = Control::default();
        let two = move |_: &Config| {
            Ok(config(&format!(
                "http {{ server {{ listen {shared}; listen {own} reuseport; return 200 x; }} }}"
            )))
        };
        assert_eq!(control.apply(&current, &zone, ChangeKind::Reload, two).unwrap(), 2);
        // the shared address listens from the reload on (the kernel completes a handshake before any accept);
        // the `reuseport` one was only tried: its shards bind it
        assert!(std::net::TcpStream::connect(shared).is_ok());
        assert!(std::net::TcpStream::connect(own).is_err());
        let back = move |_: &Config| Ok(config(&return_server(first)));
        assert_eq!(control.apply(&current, &zone, ChangeKind::Reload, back).unwrap(), 3);
        assert!(
            std::net::TcpStream::connect(shared).is_err(),
            "closed by the reload that dropped it"
        );
        // a change refused after the bind (its next address is held elsewhere) lets the socket go again
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let held_addr = held.local_addr().unwrap();
        let refused = move |_: &Config| {
            Ok(config(&format!(
                "http {{ server {{ listen {shared}; return 200 x; }} server {{ listen {held_addr}; return 200 y; }} }}"
            )))
        };
        assert!(control.apply(&current, &zone, ChangeKind::Reload, refused).is_err());
        assert!(std::net::TcpStream::connect(shared).is_err());
    }

    #[test]
    fn a_reweigh_is_a_new_generation_of_the_same_config() {
        use corelb_shared_state::AgentWeight;
        let zone = Zone::new();
        let listen = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let text = format!(
            "http {{ upstream u {{ server 127.0.0.1:1 weight=4 agent_port=9; }} \
             server {{ listen {listen}; location / {{ proxy_pass http://u; }} }} }}"
        );
        let current = ArcSwap::from_pointee(Snapshot::build(config(&text), &zone, 1).unwrap());
        let control = Control::default();
        let peer = |s: &Snapshot| s.http_plans[0].primary.peers[0].clone();
        peer(&current.load())
            .slot
            .agent()
            .set_weight(Some(AgentWeight::Percent(50)));
        assert_eq!(control.reweigh(&current, &zone).unwrap(), 2);
        let snap = current.load_full();
        assert_eq!((snap.generation, snap.config_generation), (2, 1));
        assert_eq!(peer(&snap).weight, 2);
        let stats = control.stats(&current);
        assert_eq!((stats.agent_changes, stats.reloads, stats.api_changes), (1, 0, 0));
        // a reload is a config generation of its own, and keeps the agent's word for the kept peer
        let reload = |_: &Config| Ok(config(&text));
        assert_eq!(control.apply(&current, &zone, ChangeKind::Reload, reload).unwrap(), 3);
        let snap = current.load_full();
        assert_eq!((snap.config_generation, peer(&snap).weight), (3, 2));
        assert_eq!(control.reweigh(&current, &zone).unwrap(), 4);
        assert_eq!(current.load().config_generation, 3);
    }

    #[test]
    fn a_config_error_is_logged_with_its_place() {
        let e = ApplyError::Refused("[emerg] unknown directive \"x\" in t.conf:3".into());
        assert_eq!(e.log_line(), "[emerg] unknown directive \"x\" in t.conf:3");
        let dir = std::env::temp_dir().join(format!("corelb-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.conf");
        std::fs::write(&path, "worker_processes 1;\nhttp {\n  bogus on;\n}\n").unwrap();
        let e = reload_from(&path)(&Config::default()).unwrap_err();
        assert_eq!(
            e.log_line(),
            format!("[emerg] unknown directive \"bogus\" in {}:3", path.display())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
