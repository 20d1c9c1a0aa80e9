//! What a peer's agent said last (HAProxy's agent-check), and the load reports proxied responses carry: the weight,
//! `maxconn` and load figures a config build reads back, as atomics the one checker thread (and, for reports, any
//! shard) writes.

use std::sync::atomic::{AtomicU64, Ordering};

/// The weight an agent set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentWeight {
    /// `N%` of the configured weight.
    Percent(u32),
    /// An absolute weight (`weight:N`, or one the load-report formula gave).
    Absolute(u32),
}

/// A load report: CPU and memory use, each a fraction in `0..=1` when present.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadReport {
    /// CPU use.
    pub cpu: Option<f64>,
    /// Memory use.
    pub mem: Option<f64>,
}

/// Load figures are kept in steps of 1/10000.
const STEPS: f64 = 10_000.0;
const PERCENT: u64 = 1 << 32;
const ABSOLUTE: u64 = 2 << 32;
const CPU_SET: u64 = 1 << 32;
const MEM_SET: u64 = 1 << 33;

/// One peer's agent record (see the module doc). Every field is independent: `Relaxed` throughout.
#[derive(Debug, Default)]
pub struct AgentSlot {
    /// 0: none; else `PERCENT | n` or `ABSOLUTE | n`.
    weight: AtomicU64,
    /// 0: none; else `maxconn + 1`.
    maxconn: AtomicU64,
    /// The last `endpoint-load-metrics` report: cpu steps (bits 0..16), mem steps (16..32), `CPU_SET`, `MEM_SET`.
    report: AtomicU64,
}

fn steps(x: f64) -> u64 {
    // clamped to 0..=1 first, so the product fits 16 bits
    (x.clamp(0.0, 1.0) * STEPS).round() as u64
}

impl AgentSlot {
    /// The weight the agent set, if any.
    pub fn weight(&self) -> Option<AgentWeight> {
        let v = self.weight.load(Ordering::Relaxed);
        let n = (v & u64::from(u32::MAX)) as u32;
        match v & !u64::from(u32::MAX) {
            PERCENT => Some(AgentWeight::Percent(n)),
            ABSOLUTE => Some(AgentWeight::Absolute(n)),
            _ => None,
        }
    }

    /// Sets (or with `None` clears) the agent's weight; says whether it changed.
    pub fn set_weight(&self, w: Option<AgentWeight>) -> bool {
        let v = match w {
            None => 0,
            Some(AgentWeight::Percent(n)) => PERCENT | u64::from(n),
            Some(AgentWeight::Absolute(n)) => ABSOLUTE | u64::from(n),
        };
        self.weight.swap(v, Ordering::Relaxed) != v
    }

    /// The `maxconn:` the agent set, if any.
    pub fn maxconn(&self) -> Option<u32> {
        let v = self.maxconn.load(Ordering::Relaxed);
        (v != 0).then(|| u32::try_from(v - 1).unwrap_or(u32::MAX))
    }

    /// Sets (or clears) the agent's `maxconn`; says whether it changed.
    pub fn set_maxconn(&self, m: Option<u32>) -> bool {
        let v = m.map_or(0, |n| u64::from(n) + 1);
        self.maxconn.swap(v, Ordering::Relaxed) != v
    }

    /// Records a load report (a figure not in it is left as it was).
    pub fn report(&self, r: LoadReport) {
        let mut v = self.report.load(Ordering::Relaxed);
        if let Some(c) = r.cpu {
            v = (v & !0xffff) | steps(c) | CPU_SET;
        }
        if let Some(m) = r.mem {
            v = (v & !(0xffff << 16)) | (steps(m) << 16) | MEM_SET;
        }
        self.report.store(v, Ordering::Relaxed);
    }

    /// The last load report (figures in steps of 1/10000).
    pub fn last_report(&self) -> LoadReport {
        let v = self.report.load(Ordering::Relaxed);
        let fig = |set: u64, shift: u32| (v & set != 0).then(|| ((v >> shift) & 0xffff) as f64 / STEPS);
        LoadReport {
            cpu: fig(CPU_SET, 0),
            mem: fig(MEM_SET, 16),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_maxconn_and_reports_round_trip() {
        let a = AgentSlot::default();
        assert_eq!((a.weight(), a.maxconn()), (None, None));
        assert!(a.set_weight(Some(AgentWeight::Percent(50))));
        assert!(!a.set_weight(Some(AgentWeight::Percent(50))), "no change");
        assert_eq!(a.weight(), Some(AgentWeight::Percent(50)));
        assert!(a.set_weight(Some(AgentWeight::Absolute(0))));
        assert_eq!(a.weight(), Some(AgentWeight::Absolute(0)));
        assert!(a.set_maxconn(Some(0)));
        assert_eq!(a.maxconn(), Some(0));
        assert!(a.set_maxconn(None));
        assert_eq!(a.maxconn(), None);
        assert_eq!(a.last_report(), LoadReport::default());
        a.report(LoadReport {
            cpu: Some(0.3),
            mem: None,
        });
        a.report(LoadReport {
            cpu: None,
            mem: Some(7.0),
        });
        assert_eq!(
            a.last_report(),
            LoadReport {
                cpu: Some(0.3),
                mem: Some(1.0)
            }
        );
    }
}
