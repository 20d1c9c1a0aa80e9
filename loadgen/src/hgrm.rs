//! HdrHistogram's percentile distribution text (`.hgrm`), as Java's `outputPercentileDistribution` prints it and
//! the HdrHistogram plotter reads it: `Value Percentile TotalCount 1/(1-Percentile)` rows, then the
//! `#[Mean = ..., StdDeviation = ...]`, `#[Max ...]` and `#[Buckets ...]` footer.

use hdrhistogram::Histogram;
use std::fmt::Write;

/// Divides the recorded microseconds into milliseconds on output (as wrk2's `--u_latency` output does).
pub const MICROS_PER_MILLI: f64 = 1000.0;
/// Percentile ticks per half distance to 100%, as in Java's default and wrk2.
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The sub-bucket count of a histogram with `sigfig` significant digits (Java's `subBucketCount`).
fn sub_bucket_count(sigfig: u8) -> u64 {
    let largest_single_unit = 2 * 10u64.pow(u32::from(sigfig));
    1u64 << (64 - (largest_single_unit - 1).leading_zeros())
}

/// Renders `h` with values divided by `scale`.
pub fn percentile_distribution(h: &Histogram<u64>, ticks_per_half_distance: u32, scale: f64) -> String {
    let digits = usize::from(h.sigfig());
    let mut out = String::new();
    let _ = write!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(ticks_per_half_distance.max(1)) {
        total += v.count_since_last_iteration();
        let value = v.value_iterated_to() as f64 / scale;
        let q = v.quantile_iterated_to();
        if q < 1.0 {
            let _ = writeln!(out, "{value:12.digits$} {q:2.12} {total:10} {:14.2}", 1.0 / (1.0 - q));
        } else {
            let _ = writeln!(out, "{value:12.digits$} {q:2.12} {total:10}");
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.digits$}, StdDeviation   = {:12.digits$}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.digits$}, Total count    = {:12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_java_layout() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in 1..=100u64 {
            h.record(v * 1000).unwrap();
        }
        let text = percentile_distribution(&h, 5, 1000.0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "       Value     Percentile TotalCount 1/(1-Percentile)");
        assert_eq!(lines[1], "");
        assert_eq!(lines[2], "       1.000 0.000000000000          1           1.00");
        assert!(
            lines.contains(&"      50.015 0.500000000000         50           2.00"),
            "{text}"
        );
        let last_row = lines[lines.len() - 4];
        assert_eq!(last_row, "     100.031 1.000000000000        100");
        let (mean, sd) = (h.mean() / 1000.0, h.stdev() / 1000.0);
        assert!((mean - 50.5).abs() < 0.1 && (sd - 28.87).abs() < 0.1, "{mean} {sd}");
        assert_eq!(
            lines[lines.len() - 3],
            format!("#[Mean    = {mean:12.3}, StdDeviation   = {sd:12.3}]")
        );
        assert_eq!(
            lines[lines.len() - 2],
            "#[Max     =      100.031, Total count    =          100]"
        );
        assert_eq!(
            lines[lines.len() - 1],
            format!("#[Buckets = {:12}, SubBuckets     =         2048]", h.buckets())
        );
        assert_eq!(sub_bucket_count(2), 256);
    }
}
