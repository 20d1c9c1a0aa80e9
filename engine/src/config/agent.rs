//! corelb's agent settings as read from an upstream: a `server` line's `agent_port=`/`agent_inter=`/`agent_send=`
//! (HAProxy's agent-check), the upstream's `load_weight` formula and its `endpoint_load_metrics` switch.

use corelb_shared_state::AgentWeight;
use std::time::Duration;

/// HAProxy's `agent-inter` default.
pub const DEFAULT_INTER: Duration = Duration::from_secs(2);

/// The largest weight an agent or a load report may give (a larger one is taken as this).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// A `server` line's agent check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConf {
    /// `agent_port=N`: the agent listens on the server's address at this port.
    pub port: u16,
    /// `agent_inter=TIME` (default 2s): one check per interval, which also bounds connect and read.
    pub inter: Duration,
    /// `agent_send=STRING`: sent once connected (nothing by default).
    pub send: Option<String>,
}

/// `load_weight cpu=A mem=B base=C scale=K`: a load report's weight is
/// `max(1, int(K / (cpu × A + mem × B + C)))`; the default is issue 13's `A = 0.6, B = 0.4, C = 0.1, K = 10`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadFormula {
    pub cpu: f64,
    pub mem: f64,
    /// Above 0, so the quotient is finite.
    pub base: f64,
    pub scale: f64,
}

impl Default for LoadFormula {
    fn default() -> Self {
        LoadFormula {
            cpu: 0.6,
            mem: 0.4,
            base: 0.1,
            scale: 10.0,
        }
    }
}

impl LoadFormula {
    /// The weight for `cpu` and `mem` use (fractions, clamped to `0..=1`; a missing one counts as 0), from 1 to
    /// [`MAX_WEIGHT`].
    pub fn weight(&self, cpu: f64, mem: f64) -> u32 {
        let score = 1.0 / (cpu.clamp(0.0, 1.0) * self.cpu + mem.clamp(0.0, 1.0) * self.mem + self.base);
        let w = (score * self.scale).clamp(1.0, f64::from(MAX_WEIGHT));
        // clamped, so the cast neither saturates nor drops a NaN (base > 0 keeps the score finite)
        w as u32
    }
}

/// `endpoint_load_metrics on [interval=TIME]` (http upstreams): the ORCA `endpoint-load-metrics` header of each
/// proxied response is read, and its last report turned into a weight every interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadMetricsConf {
    /// Default 2s.
    pub interval: Duration,
}

/// The weight `w` gives a peer configured with `configured`: `N%` of it rounded down, or the absolute weight; at
/// most [`MAX_WEIGHT`].
pub fn resolve(w: AgentWeight, configured: u32) -> u32 {
    match w {
        AgentWeight::Percent(p) => {
            let w = u64::from(configured) * u64::from(p) / 100;
            u32::try_from(w).unwrap_or(u32::MAX).min(MAX_WEIGHT)
        }
        AgentWeight::Absolute(n) => n.min(MAX_WEIGHT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_formula_is_the_issue_s() {
        let f = LoadFormula::default();
        assert_eq!(f.weight(0.0, 0.0), 100);
        assert_eq!(f.weight(1.0, 1.0), 9);
        // cpu 0.9, mem 0.5: 1 / (0.54 + 0.2 + 0.1) = 1.19 -> 11
        assert_eq!(f.weight(0.9, 0.5), 11);
        // cpu 0.3, mem 0.5: 1 / (0.18 + 0.2 + 0.1) = 2.08 -> 20
        assert_eq!(f.weight(0.3, 0.5), 20);
        let tiny = LoadFormula {
            base: 1e-9,
            scale: 1e9,
            ..f
        };
        assert_eq!(tiny.weight(0.0, 0.0), MAX_WEIGHT);
        let small = LoadFormula { scale: 0.01, ..f };
        assert_eq!(small.weight(1.0, 1.0), 1, "at least 1");
    }
}
