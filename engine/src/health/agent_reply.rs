//! What a backend's agent says (HAProxy's agent-check protocol), and the weight it gives: the reply line's words
//! parsed into one [`AgentReply`], and the load-report formula turning `cpu=`/`mem=` into a weight.
//!
//! The agent check itself is [`super::agent`]; `endpoint_load_metrics` reads its header with
//! [`LoadMetrics::parse`].
//!
//! A reply is one line of words separated by spaces, tabs or commas, in any order, up to a `#` (the rest is a
//! description). Words of one kind override each other, the last one winning: a weight (`N%` of the configured
//! weight, or `weight:N` absolute), `maxconn:N`, an administrative state (`ready`, `drain`, `maint`), an operational
//! state (`up`, or `down`, `fail`, `failed`, `stopped`), and the load report (`cpu=X`, `mem=X`, each a fraction
//! `0..=1` or a percentage `N%`). Unknown words are ignored, as HAProxy ignores them.

use crate::config::agent::{resolve, LoadFormula, MAX_WEIGHT};
pub use corelb_shared_state::AgentWeight;
use corelb_shared_state::LoadReport;

/// `ready`, `drain`, `maint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminState {
    /// Takes traffic (cancels the agent's own `drain`/`maint`).
    Ready,
    /// Takes no new requests; requests in flight finish.
    Drain,
    /// Out of service.
    Maint,
}

/// `up`, or `down`/`fail`/`failed`/`stopped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperState {
    /// Up again (only the agent undoes its own down).
    Up,
    /// Down.
    Down,
}

/// One reply, each kind's last word.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AgentReply {
    pub weight: Option<AgentWeight>,
    pub maxconn: Option<u32>,
    pub admin: Option<AdminState>,
    pub oper: Option<OperState>,
    /// `cpu=`, as a fraction.
    pub cpu: Option<f64>,
    /// `mem=`, as a fraction.
    pub mem: Option<f64>,
}

/// A load figure: `0.42` or `42%`, clamped to `0..=1`; `None` when it is not a number.
fn fraction(v: &str) -> Option<f64> {
    let (num, scale) = match v.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (v, 1.0),
    };
    let x: f64 = num.parse().ok()?;
    x.is_finite().then(|| (x / scale).clamp(0.0, 1.0))
}

/// A whole number of up to 9 digits (no sign, no blanks).
fn count(v: &str) -> Option<u32> {
    (!v.is_empty() && v.len() <= 9 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

impl AgentReply {
    /// Parses one reply line (a trailing `\r\n` or `\n` is fine).
    pub fn parse(line: &str) -> AgentReply {
        let line = line.split('#').next().unwrap_or("");
        let mut r = AgentReply::default();
        for word in line.split([' ', '\t', ',', '\r', '\n']).filter(|w| !w.is_empty()) {
            let lower = word.to_ascii_lowercase();
            match lower.as_str() {
                "ready" => r.admin = Some(AdminState::Ready),
                "drain" => r.admin = Some(AdminState::Drain),
                "maint" => r.admin = Some(AdminState::Maint),
                "up" => r.oper = Some(OperState::Up),
                "down" | "fail" | "failed" | "stopped" => r.oper = Some(OperState::Down),
                w => {
                    if let Some(p) = w.strip_suffix('%').and_then(count) {
                        r.weight = Some(AgentWeight::Percent(p));
                    } else if let Some(n) = w.strip_prefix("weight:").and_then(count) {
                        r.weight = Some(AgentWeight::Absolute(n));
                    } else if let Some(n) = w.strip_prefix("maxconn:").and_then(count) {
                        r.maxconn = Some(n);
                    } else if let Some(x) = w.strip_prefix("cpu=").and_then(fraction) {
                        r.cpu = Some(x);
                    } else if let Some(x) = w.strip_prefix("mem=").and_then(fraction) {
                        r.mem = Some(x);
                    }
                }
            }
        }
        r
    }

    /// The weight this reply asks for: the load report's under `formula` when it has `cpu=` or `mem=` (a missing
    /// one counts as 0), else `N%` or `weight:N` (at most [`MAX_WEIGHT`]), else `None` (the weight stays as it is).
    /// A weight of 0 takes no new requests.
    pub fn agent_weight(&self, formula: &LoadFormula) -> Option<AgentWeight> {
        if self.cpu.is_some() || self.mem.is_some() {
            let w = formula.weight(self.cpu.unwrap_or(0.0), self.mem.unwrap_or(0.0));
            return Some(AgentWeight::Absolute(w));
        }
        Some(match self.weight? {
            AgentWeight::Percent(p) => AgentWeight::Percent(p.min(MAX_WEIGHT)),
            AgentWeight::Absolute(n) => AgentWeight::Absolute(n.min(MAX_WEIGHT)),
        })
    }

    /// The weight this reply gives a peer configured with `configured` under the default formula (see
    /// [`AgentReply::agent_weight`] and [`resolve`](crate::config::agent::resolve)).
    pub fn weight(&self, configured: u32) -> Option<u32> {
        self.agent_weight(&LoadFormula::default())
            .map(|w| resolve(w, configured))
    }
}

/// The ORCA `endpoint-load-metrics` header's text form: `TEXT cpu_utilization=0.3, mem_utilization=0.5` (named
/// metrics and other fields ignored; the `BIN` and `JSON` forms are not read).
pub struct LoadMetrics;

impl LoadMetrics {
    /// The report in a header value; `None` when it is not the text form or has neither figure.
    pub fn parse(value: &[u8]) -> Option<LoadReport> {
        let text = std::str::from_utf8(value).ok()?.trim();
        let rest = text.strip_prefix("TEXT").filter(|r| r.starts_with([' ', '\t']))?;
        let mut r = LoadReport::default();
        for field in rest.split(',') {
            let Some((name, v)) = field.trim().split_once('=') else {
                continue;
            };
            let x = v.trim().parse::<f64>().ok().filter(|x| x.is_finite());
            match name.trim() {
                "cpu_utilization" => r.cpu = x.map(|x| x.clamp(0.0, 1.0)).or(r.cpu),
                "mem_utilization" => r.mem = x.map(|x| x.clamp(0.0, 1.0)).or(r.mem),
                _ => {}
            }
        }
        (r.cpu.is_some() || r.mem.is_some()).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_s_last_word_wins() {
        let r = AgentReply::parse("75% maxconn:30 drain down weight:7 ready up maxconn:10\r\n");
        assert_eq!(r.weight, Some(AgentWeight::Absolute(7)));
        assert_eq!(r.maxconn, Some(10));
        assert_eq!(r.admin, Some(AdminState::Ready));
        assert_eq!(r.oper, Some(OperState::Up));
        let r = AgentReply::parse("weight:7,50%\tstopped # going away, 100%");
        assert_eq!(r.weight, Some(AgentWeight::Percent(50)));
        assert_eq!(
            r.oper,
            Some(OperState::Down),
            "stopped is down; the description is not read"
        );
        assert_eq!(AgentReply::parse("FAIL MAINT").admin, Some(AdminState::Maint));
        assert_eq!(AgentReply::parse("failed").oper, Some(OperState::Down));
    }

    #[test]
    fn nothing_said_changes_nothing() {
        let r = AgentReply::parse("hello -5% weight:x maxconn: 12345678901%\n");
        assert_eq!(r, AgentReply::default());
        assert_eq!(r.weight(5), None);
    }

    #[test]
    fn percent_and_absolute_weights() {
        assert_eq!(AgentReply::parse("50%").weight(10), Some(5));
        assert_eq!(AgentReply::parse("33%").weight(10), Some(3), "rounded down");
        assert_eq!(AgentReply::parse("0%").weight(10), Some(0));
        assert_eq!(AgentReply::parse("200%").weight(3), Some(6));
        assert_eq!(AgentReply::parse("weight:42").weight(1), Some(42));
    }

    #[test]
    fn the_load_report_formula() {
        // idle: 1 / 0.1 = 10 -> 100; saturated: 1 / 1.1 -> 9; half: 1 / 0.6 = 1.67 -> 16
        assert_eq!(AgentReply::parse("cpu=0 mem=0").weight(1), Some(100));
        assert_eq!(AgentReply::parse("cpu=1 mem=1").weight(1), Some(9));
        assert_eq!(AgentReply::parse("cpu=0.5 mem=0.5").weight(1), Some(16));
        let f = LoadFormula {
            scale: 100.0,
            ..LoadFormula::default()
        };
        assert_eq!(
            AgentReply::parse("cpu=0.5 mem=0.5").agent_weight(&f),
            Some(AgentWeight::Absolute(166))
        );
        // cpu 0.9, mem 0.2: 1 / (0.54 + 0.08 + 0.1) = 1.388 -> 13
        assert_eq!(AgentReply::parse("cpu=0.9 mem=0.2").weight(1), Some(13));
        assert_eq!(AgentReply::parse("cpu=90% mem=20%").weight(1), Some(13));
        // the load report wins over a weight word; a missing figure is 0; out of range is clamped
        assert_eq!(AgentReply::parse("50% cpu=0.9 mem=0.2").weight(10), Some(13));
        assert_eq!(AgentReply::parse("cpu=0.5").weight(1), Some(25));
        assert_eq!(AgentReply::parse("cpu=7 mem=-1").weight(1), Some(14));
        assert_eq!(AgentReply::parse("cpu=NaN").cpu, None);
        assert_eq!(AgentReply::parse("weight:999999999").weight(1), Some(MAX_WEIGHT));
    }

    #[test]
    fn the_endpoint_load_metrics_header() {
        let r = LoadMetrics::parse(b"TEXT cpu_utilization=0.3, mem_utilization=0.5");
        assert_eq!(
            r,
            Some(LoadReport {
                cpu: Some(0.3),
                mem: Some(0.5)
            })
        );
        let r = LoadMetrics::parse(b"TEXT rps_fractional=10, named_metrics.foo=1,cpu_utilization=2");
        assert_eq!(
            r,
            Some(LoadReport {
                cpu: Some(1.0),
                mem: None
            })
        );
        for bad in [
            &b"JSON {\"cpu_utilization\": 0.3}"[..],
            b"TEXT",
            b"TEXTcpu_utilization=0.3",
            b"TEXT cpu_utilization=x, mem_utilization=NaN",
            b"\xff",
        ] {
            assert_eq!(LoadMetrics::parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
