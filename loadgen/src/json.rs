//! The machine-readable summary of a run (`--json FILE`): one JSON object, written by hand with proper string
//! escaping (latencies in microseconds).

use super::report::{Report, PERCENTILES};
use super::target::Mode;
use hdrhistogram::Histogram;
use std::fmt::Write;

/// Escapes `s` as a JSON string, quotes included.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A finite number as JSON (`null` for NaN or infinities, which JSON cannot carry).
fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

fn latency(h: &Histogram<u64>) -> String {
    let mut out = String::from("{");
    for p in PERCENTILES {
        let _ = write!(out, "\"p{p}\": {}, ", h.value_at_percentile(p));
    }
    let _ = write!(
        out,
        "\"min\": {}, \"max\": {}, \"mean\": {}, \"stdev\": {}, \"count\": {}}}",
        h.min(),
        h.max(),
        number(h.mean()),
        number(h.stdev()),
        h.len()
    );
    out
}

/// The summary of `r`.
pub fn summary(r: &Report) -> String {
    let s = &r.stats;
    let statuses: Vec<String> = s
        .status_counts()
        .iter()
        .map(|(code, n)| format!("\"{code}\": {n}"))
        .collect();
    let e = s.errors;
    let mut out = String::from("{\n");
    let _ = writeln!(out, "  \"url\": {},", string(&r.url));
    let mode = match r.mode {
        Mode::Http => "http",
        Mode::Echo => "echo",
    };
    let _ = writeln!(out, "  \"mode\": \"{mode}\",");
    let _ = writeln!(out, "  \"runtime\": \"{}\",", r.runtime);
    let _ = writeln!(out, "  \"shards\": {},", r.shards);
    let _ = writeln!(out, "  \"connections\": {},", r.connections);
    let rate = r.rate.map_or("null".into(), number);
    let _ = writeln!(out, "  \"rate\": {rate},");
    let _ = writeln!(out, "  \"duration_s\": {},", number(r.duration.as_secs_f64()));
    let _ = writeln!(out, "  \"warmup_s\": {},", number(r.warmup.as_secs_f64()));
    let _ = writeln!(out, "  \"interrupted\": {},", r.stopped_early);
    let _ = writeln!(out, "  \"requests\": {},", s.requests);
    let _ = writeln!(out, "  \"requests_per_sec\": {},", number(r.requests_per_sec()));
    let _ = writeln!(out, "  \"bytes_read\": {},", s.bytes_read);
    let _ = writeln!(out, "  \"bytes_written\": {},", s.bytes_written);
    let _ = writeln!(out, "  \"bytes_read_per_sec\": {},", number(r.bytes_per_sec()));
    let _ = writeln!(out, "  \"latency_us\": {},", latency(&s.corrected));
    let _ = writeln!(out, "  \"uncorrected_latency_us\": {},", latency(&s.uncorrected));
    let _ = writeln!(out, "  \"status\": {{{}}},", statuses.join(", "));
    let _ = writeln!(out, "  \"non_2xx_3xx\": {},", s.non_2xx_3xx());
    let _ = writeln!(
        out,
        "  \"errors\": {{\"connect\": {}, \"read\": {}, \"write\": {}, \"timeout\": {}}}",
        e.connect, e.read, e.write, e.timeout
    );
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        assert_eq!(string("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
        assert_eq!(number(f64::NAN), "null");
        assert_eq!(number(2.5), "2.5");
    }
}
