//! The control plane: the one way a config becomes the running snapshot (start, reload, an API change), serialized
//! by one lock and never on the request path. It builds the snapshot (the zone keeps unchanged peers' slots),
//! swaps the health checkers over to it, publishes it to every shard at once, and counts what happened.

use crate::config::model::Config;
use crate::health::HealthCheckers;
use crate::snapshot::{Snapshot, SnapshotError};
use arc_swap::ArcSwap;
use corelb_shared_state::Zone;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

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
}

/// The control plane's state; lives in [`crate::shard::Shared`].
#[derive(Debug)]
pub struct Control {
    /// Held for the whole of a change, so two changes never interleave.
    health: Mutex<HealthCheckers>,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    api_changes: AtomicU64,
    started_at: u64,
    loaded_at_ms: AtomicU64,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            health: Mutex::new(HealthCheckers::default()),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            api_changes: AtomicU64::new(0),
            started_at: now_ms() / 1000,
            loaded_at_ms: AtomicU64::new(now_ms()),
        }
    }
}

impl Control {
    /// Starts the health checkers of the first snapshot (before any shard serves it).
    pub fn start_health(&self, snap: Arc<Snapshot>) -> io::Result<()> {
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *health).detach();
        *health = HealthCheckers::start(snap)?;
        Ok(())
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
        };
        match Self::build(current, zone, change).and_then(|snap| Self::publish(snap, &mut health, current)) {
            Ok(generation) => {
                done.fetch_add(1, Ordering::Relaxed);
                self.loaded_at_ms.store(now_ms(), Ordering::Relaxed);
                Ok(generation)
            }
            Err(e) => {
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
        change: impl FnOnce(&Config) -> Result<Config, ApplyError>,
    ) -> Result<Arc<Snapshot>, ApplyError> {
        let old = current.load_full();
        let config = change(&old.config)?;
        Ok(Arc::new(Snapshot::build(config, zone, old.generation + 1)?))
    }

    /// New checkers first (they mark `mandatory` peers before any request can reach them), then the swap.
    fn publish(
        snap: Arc<Snapshot>,
        health: &mut HealthCheckers,
        current: &ArcSwap<Snapshot>,
    ) -> Result<u64, ApplyError> {
        let next = HealthCheckers::start(Arc::clone(&snap)).map_err(ApplyError::Health)?;
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
            started_at: self.started_at,
            loaded_at_ms: self.loaded_at_ms.load(Ordering::Relaxed),
        }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
