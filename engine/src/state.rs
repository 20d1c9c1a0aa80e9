//! Process-wide state every shard, the admin endpoints and the server share: the running snapshot, the zone, the
//! control plane, the access log writer, the shards' heartbeats and the graceful-stop flag.

use crate::access_log::ProcessLogs;
use crate::config::model::Config;
use crate::control::{ApplyError, ChangeKind, Control, ControlStats, ControlThread};
use crate::snapshot::Snapshot;
use arc_swap::ArcSwap;
use corelb_shared_state::Zone;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What every shard shares: the current snapshot, the zone, the control plane, and the stop flag.
#[derive(Debug)]
pub struct Shared {
    pub snapshot: ArcSwap<Snapshot>,
    pub zone: Arc<Zone>,
    /// Reloads and API changes go through here.
    pub control: Control,
    /// Where shards send control-plane work (API changes), so they never wait on it (`None`: the thread could not
    /// start; the work then runs on the shard).
    pub control_thread: Option<ControlThread>,
    draining: AtomicBool,
    /// Per shard: ticks so far (the stall watchdog reads them).
    heartbeats: Vec<AtomicU64>,
    /// Open client connections over all shards.
    pub connections: AtomicUsize,
    /// The access log writer thread and flush requests (none only if the thread could not start).
    pub access_logs: Option<ProcessLogs>,
}

impl Shared {
    /// Shared state for `shards` shards starting from `snapshot`.
    pub fn new(snapshot: Snapshot, zone: Arc<Zone>, shards: usize) -> Arc<Shared> {
        let access_logs = ProcessLogs::start();
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(snapshot),
            zone,
            control: Control::default(),
            control_thread: ControlThread::start()
                .map_err(|e| crate::log_alert!("could not start the control thread ({e}): API changes run on shards"))
                .ok(),
            draining: AtomicBool::new(false),
            heartbeats: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            connections: AtomicUsize::new(0),
            access_logs,
        });
        // The agent checkers' weights, applied through the control plane; a weak handle, so that the checkers
        // (owned by the control plane) do not keep the process state alive.
        let weak = Arc::downgrade(&shared);
        shared
            .control
            .set_reweigh(crate::health::agent::Reweigh(Arc::new(move || {
                if let Some(shared) = weak.upgrade() {
                    if let Err(e) = shared.control.reweigh(&shared.snapshot, &shared.zone) {
                        crate::log_alert!("the agents' weights were not applied: {}", e.log_line());
                    }
                }
            })));
        start_names(&shared);
        shared
    }

    /// Makes the config `change` builds from the running one the running snapshot (see [`Control::apply`]).
    pub fn apply(
        &self,
        kind: ChangeKind,
        change: impl FnOnce(&Config) -> Result<Config, ApplyError>,
    ) -> Result<u64, ApplyError> {
        self.control.apply(&self.snapshot, &self.zone, kind, change)
    }

    /// The control plane's counters.
    pub fn control_stats(&self) -> ControlStats {
        self.control.stats(&self.snapshot)
    }

    /// Waits (at most `limit`) until the access log lines handed over so far are on disk; with `running`, first
    /// makes every running shard hand over its buffers (at its next tick). Returns whether all was done in time.
    pub fn flush_access_logs(&self, limit: Duration, running: bool) -> bool {
        self.access_logs
            .as_ref()
            .is_none_or(|l| l.flush(limit, running.then_some(self.heartbeats.len())))
    }

    /// Graceful stop: shards stop accepting, close idle connections, finish in-flight requests, then end.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        // the shards close their duplicates of the shared listening sockets as they stop accepting
        self.control.listen_sockets.close_all();
    }

    /// Whether a graceful stop is under way.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// How many shards the process runs.
    pub fn shards(&self) -> usize {
        self.heartbeats.len()
    }

    /// Shard `i`'s tick count so far (its heartbeat).
    pub fn beat(&self, i: usize, ticks: u64) {
        if let Some(h) = self.heartbeats.get(i) {
            h.store(ticks, Ordering::Relaxed);
        }
    }

    /// The heartbeat counter of shard `i` (0 if there is no such shard).
    pub fn heartbeat(&self, i: usize) -> u64 {
        self.heartbeats.get(i).map_or(0, |h| h.load(Ordering::Relaxed))
    }
}

/// Starts the thread that resolves the upstreams' `resolve` names (it ends when the process state goes or
/// drains); a weak handle, so that it does not keep the state alive.
fn start_names(shared: &Arc<Shared>) {
    use crate::resolve::names::{self, Process};
    let answers = Arc::clone(&shared.control.names);
    let (by_names, by_publish) = (Arc::downgrade(shared), Arc::downgrade(shared));
    let process = Process {
        names: move || {
            let shared = by_names.upgrade().filter(|s| !s.draining())?;
            let snap = shared.snapshot.load();
            Some(names::names_of(&snap.config))
        },
        publish: move || {
            let Some(shared) = by_publish.upgrade() else {
                return true;
            };
            match shared.apply(ChangeKind::Resolve, |c| Ok(c.clone())) {
                Ok(_) => true,
                Err(e) => {
                    crate::log_alert!("the resolved addresses were not applied: {}", e.log_line());
                    false
                }
            }
        },
    };
    let started = std::thread::Builder::new()
        .name("corelb-resolve".into())
        .spawn(move || names::run(&answers, process));
    if let Err(e) = started {
        crate::log_alert!("could not start the upstream name resolver ({e}): \"resolve\" servers stay unresolved");
    }
}
