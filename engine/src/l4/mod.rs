//! The control plane of the XDP L4 data path (`listen ... xdp=`, the `corelb-xdp` crate): a thread that loads the
//! program when the config first has a VIP and, ten times a second, brings its maps to the running snapshot and
//! the zone (servers taken out by health checks, `down`, drain or the API leave the tables; reloads change VIPs
//! and servers without reloading the program, so the connection table survives them). Stopping it detaches the
//! program; the kernel does so too when the process ends any other way (see `corelb_xdp::loader`).

pub mod plan;
pub mod sync;
pub mod table;

use crate::state::Shared;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the maps are brought to the running state.
const PERIOD: Duration = Duration::from_millis(100);
/// Least connections: how many periods between two recounts of the active flows (10 s).
const RECOUNT_PERIODS: u32 = 100;

/// One real server's counters from the program (summed over CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealCounters {
    pub server: SocketAddrV4,
    pub packets: u64,
    pub bytes: u64,
    pub flows: u64,
}

/// The latest counters, for `/metrics` and the API (written by the thread each period).
static COUNTERS: Mutex<Vec<RealCounters>> = Mutex::new(Vec::new());

/// The real servers' counters as last read.
pub fn counters() -> Vec<RealCounters> {
    COUNTERS.lock().map(|c| c.clone()).unwrap_or_default()
}

/// The running data path's thread.
pub struct L4Path {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl L4Path {
    /// Loads the program and writes the maps for the running snapshot, when it has a VIP (`None` otherwise), and
    /// starts the thread that keeps them up to date. An error is the start's `[emerg]`.
    pub fn start(shared: &Arc<Shared>) -> Result<Option<L4Path>, String> {
        let now = plan::vips_now(&shared.snapshot.load());
        if now.is_empty() {
            return Ok(None);
        }
        let mut syncer = sync::Syncer::load().map_err(|e| e.to_string())?;
        let warned = syncer.sync(&now).map_err(|e| e.to_string())?;
        for w in &warned {
            crate::log_warn!("{w}");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, shared) = (stop.clone(), shared.clone());
        let thread = std::thread::Builder::new()
            .name("corelb-xdp".into())
            .spawn(move || run(&shared, &mut syncer, &flag, warned))
            .map_err(|e| format!("the XDP control thread could not start ({e})"))?;
        Ok(Some(L4Path {
            stop,
            thread: Some(thread),
        }))
    }
}

impl Drop for L4Path {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: the maps to the running state each period, counters read, errors logged once each (and warnings:
/// `warned`, those the start logged).
fn run(shared: &Shared, syncer: &mut sync::Syncer, stop: &AtomicBool, mut warned: Vec<String>) {
    let mut last_error = String::new();
    let mut periods = 0u32;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(PERIOD);
        let now = plan::vips_now(&shared.snapshot.load());
        periods += 1;
        if periods == RECOUNT_PERIODS {
            periods = 0;
            syncer.recount(&now);
        }
        match syncer.sync(&now) {
            Ok(warnings) => {
                last_error.clear();
                for w in warnings {
                    if !warned.contains(&w) {
                        crate::log_warn!("{w}");
                        warned.push(w);
                    }
                }
            }
            Err(e) => {
                let e = e.to_string();
                if e != last_error {
                    crate::log_error!("{e}");
                    last_error = e;
                }
            }
        }
        let counts: Vec<RealCounters> = syncer
            .owners
            .iter()
            .map(|&(id, server)| {
                let c = syncer.counters(id);
                RealCounters {
                    server,
                    packets: c.packets,
                    bytes: c.bytes,
                    flows: c.flows,
                }
            })
            .collect();
        if let Ok(mut slot) = COUNTERS.lock() {
            *slot = counts;
        }
    }
    // the program off the devices before the thread ends (the syncer's drop detaches)
}
