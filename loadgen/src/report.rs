//! A finished bench: the merged stats with what was run, the derived rates, and the text summary (percentile
//! table, requests/s, transfer rate, status codes, socket errors).

use super::stats::ShardStats;
use super::target::Mode;
use super::Plan;
use corelb_engine::config::model::RuntimeKind;
use hdrhistogram::Histogram;
use std::fmt::Write;
use std::time::Duration;

/// The percentiles of the summary table.
pub const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 99.99];

/// The results of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target as given.
    pub url: String,
    /// HTTP or echo.
    pub mode: Mode,
    /// Connections over all shards.
    pub connections: usize,
    /// Shards (threads) that ran.
    pub shards: usize,
    /// The runtime's name (`tokio`, `glommio`).
    pub runtime: &'static str,
    /// The target rate of an open loop.
    pub rate: Option<f64>,
    /// The measured time: `--duration`, or less after an early stop.
    pub duration: Duration,
    /// The run before the measured time.
    pub warmup: Duration,
    /// Stopped before the end (Ctrl-C).
    pub stopped_early: bool,
    /// The merged measurements of every shard.
    pub stats: ShardStats,
}

impl Report {
    /// A report of `plan` with the merged `stats`.
    pub fn new(plan: &Plan, stats: ShardStats) -> Report {
        let t = &plan.target;
        let url = match t.mode {
            Mode::Http => format!("http://{}{}", t.authority, t.path),
            Mode::Echo => format!("tcp://{}", t.authority),
        };
        Report {
            url,
            mode: t.mode,
            connections: plan.connections,
            shards: plan.cpus.len(),
            runtime: match plan.runtime {
                RuntimeKind::Tokio => "tokio",
                RuntimeKind::Glommio => "glommio",
            },
            rate: plan.rate,
            duration: plan.duration,
            warmup: plan.warmup,
            stopped_early: false,
            stats,
        }
    }

    /// Completed requests per second in the measured window (0 when nothing was measured).
    pub fn requests_per_sec(&self) -> f64 {
        self.per_sec(self.stats.requests)
    }

    /// Bytes read per second in the measured window.
    pub fn bytes_per_sec(&self) -> f64 {
        self.per_sec(self.stats.bytes_read)
    }

    fn per_sec(&self, n: u64) -> f64 {
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            n as f64 / secs
        } else {
            0.0
        }
    }

    /// The human-readable summary.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Running {:.2?} test @ {}", self.duration, self.url);
        if self.stopped_early {
            let _ = writeln!(out, "  interrupted: measured {:.2?}", self.duration);
        }
        let _ = writeln!(out, "  {}", self.header());
        let _ = writeln!(out, "{:>14}{}", "Latency", latency_header());
        let co_note = if self.rate.is_some() { "corrected" } else { "" };
        let _ = writeln!(out, "{:>14}{}", co_note, latency_row(&self.stats.corrected));
        if self.rate.is_some() {
            let _ = writeln!(out, "{:>14}{}", "uncorrected", latency_row(&self.stats.uncorrected));
        }
        let _ = writeln!(
            out,
            "  {} requests in {:.2?}, {} read",
            self.stats.requests,
            self.duration,
            human_bytes(self.stats.bytes_read as f64)
        );
        let _ = writeln!(out, "Requests/sec: {:>12.2}", self.requests_per_sec());
        let _ = writeln!(out, "Transfer/sec: {:>12}", human_bytes(self.bytes_per_sec()));
        if self.mode == Mode::Http {
            let codes: Vec<String> = self
                .stats
                .status_counts()
                .iter()
                .map(|(s, n)| format!("{s}: {n}"))
                .collect();
            let codes = if codes.is_empty() {
                "none".to_string()
            } else {
                codes.join(", ")
            };
            let _ = writeln!(out, "  Status codes: {codes}");
            let non_ok = self.stats.non_2xx_3xx();
            if non_ok > 0 {
                let _ = writeln!(out, "  Non-2xx or 3xx responses: {non_ok}");
            }
        }
        let e = self.stats.errors;
        let _ = writeln!(
            out,
            "  Socket errors: connect {}, read {}, write {}, timeout {}",
            e.connect, e.read, e.write, e.timeout
        );
        out
    }

    fn header(&self) -> String {
        let schedule = match self.rate {
            Some(r) => format!("open loop at {r} req/s"),
            None => "closed loop".to_string(),
        };
        let warmup = if self.warmup.is_zero() {
            String::new()
        } else {
            format!(" after {:.2?} warmup", self.warmup)
        };
        format!(
            "{} shard(s) ({}), {} connection(s), {schedule}{warmup}",
            self.shards, self.runtime, self.connections
        )
    }
}

fn latency_header() -> String {
    let mut s = String::new();
    for p in PERCENTILES {
        let _ = write!(s, "{:>10}", format!("p{p}"));
    }
    let _ = write!(s, "{:>10}{:>10}", "max", "mean");
    s
}

fn latency_row(h: &Histogram<u64>) -> String {
    let mut s = String::new();
    for p in PERCENTILES {
        let _ = write!(s, "{:>10}", human_micros(h.value_at_percentile(p) as f64));
    }
    let _ = write!(s, "{:>10}{:>10}", human_micros(h.max() as f64), human_micros(h.mean()));
    s
}

/// A latency in microseconds as wrk prints it: `85us`, `1.23ms`, `2.00s`.
pub fn human_micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

/// A byte count with a binary unit: `512B`, `1.50KB`, `12.00MB`.
pub fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if b < 1024.0 {
        return format!("{b:.0}B");
    }
    let mut v = b / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.2}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Options;
    use crate::stats::Sample;

    #[test]
    fn units() {
        assert_eq!(human_micros(85.0), "85us");
        assert_eq!(human_micros(1234.0), "1.23ms");
        assert_eq!(human_micros(2_000_000.0), "2.00s");
        assert_eq!(human_bytes(512.0), "512B");
        assert_eq!(human_bytes(1536.0), "1.50KB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0), "3.00MB");
    }

    #[test]
    fn summarizes() {
        let plan = Plan::build(&Options {
            url: "http://127.0.0.1:1/x".into(),
            threads: Some(1),
            duration: Duration::from_secs(2),
            rate: Some(10.0),
            ..Options::default()
        })
        .unwrap();
        let mut stats = ShardStats::default();
        for ms in [1, 2, 3, 400] {
            let s = Sample {
                corrected: Duration::from_millis(ms),
                uncorrected: Duration::from_millis(1),
                status: Some(if ms > 100 { 502 } else { 200 }),
                read: 100,
                written: 10,
            };
            stats.record(&s, true);
        }
        let r = Report::new(&plan, stats);
        assert_eq!(r.requests_per_sec(), 2.0);
        assert_eq!(r.bytes_per_sec(), 200.0);
        let text = r.text();
        assert!(text.contains("http://127.0.0.1:1/x"), "{text}");
        assert!(text.contains("Status codes: 200: 3, 502: 1"), "{text}");
        assert!(text.contains("Non-2xx or 3xx responses: 1"), "{text}");
        assert!(text.contains("uncorrected"), "{text}");
        let max = human_micros(r.stats.corrected.max() as f64);
        assert!(max.starts_with("400.") && text.contains(&max), "{text}");
    }
}
