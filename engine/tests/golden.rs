//! Golden traces recorded from nginx 1.22.1, and nginx 1.31.5 for `least_time` (`python3 tools/record_golden.py`):
//! every scenario under `tests/golden/` is parsed, simulated and compared, request by request, with what nginx did.
//! A scenario with a `sent` file (least_time's) runs each request at the millisecond the recording sent it, and
//! ends a held one when the recording got its answer. No nginx is needed.

mod support;

use corelb_engine::balance::UpstreamPlan;
use corelb_engine::config;
use corelb_engine::simulate::{self, parse_trace, Backends, Hold, Simulator};
use corelb_shared_state::Zone;
use std::fs;
use std::path::Path;

/// The simulated clock at the start of every scenario; `t=` offsets are added to it.
const BASE: u64 = 1_000_000;

fn read(dir: &Path, file: &str) -> Result<String, String> {
    fs::read_to_string(dir.join(file)).map_err(|e| format!("{file}: {e}"))
}

/// Simulates one scenario; `Ok` with the number of requests when every line matches, else the differences.
fn check(dir: &Path) -> Result<usize, String> {
    let config = config::load(&dir.join("corelb.conf")).map_err(|e| e.to_string())?;
    let name = config
        .http
        .iter()
        .flat_map(|h| &h.upstreams)
        .chain(config.stream.iter().flat_map(|s| &s.upstreams))
        .find(|u| !u.implicit)
        .map(|u| u.name.clone())
        .ok_or("no upstream in corelb.conf")?;
    let located = simulate::locate(&config, &name, None).map_err(|e| e.to_string())?;
    let plan = UpstreamPlan::build(located.upstream, &Zone::new()).map_err(|e| e.to_string())?;
    let backends = Backends::parse(&read(dir, "backends")?).map_err(|e| format!("backends: {e}"))?;
    let trace = parse_trace(&read(dir, "requests")?).map_err(|e| format!("requests: {e}"))?;
    let expected = read(dir, "expected")?;
    let expected: Vec<&str> = expected.lines().collect();
    if expected.len() != trace.len() {
        return Err(format!(
            "{} requests but {} expected lines",
            trace.len(),
            expected.len()
        ));
    }
    let sent = support::goldens::read(dir)?.sent;
    let mut sim = Simulator::new(&plan, located.policy, backends);
    let mut now = BASE;
    let mut diffs = Vec::new();
    for (i, (t, want)) in trace.iter().zip(&expected).enumerate() {
        if let Some(at) = t.at {
            now = BASE + at;
        }
        let result = match sent.as_ref().map(|s| s[i]) {
            Some((start, end)) => {
                let hold = if t.hold {
                    Hold::Until(BASE * 1000 + end)
                } else {
                    Hold::No
                };
                now = BASE + start / 1000;
                sim.run_ms(&t.request, hold, BASE * 1000 + start)
            }
            None => sim.run(&t.request, t.hold, now),
        };
        let got = result.golden_line(&plan.name);
        if got != *want {
            let r = &t.request;
            diffs.push(format!(
                "  request {} ({} {}{}): nginx `{want}`, corelb `{got}`",
                i + 1,
                r.remote,
                r.uri,
                r.host.as_deref().map(|h| format!(" host={h}")).unwrap_or_default()
            ));
        }
    }
    sim.release_held(now);
    if diffs.is_empty() {
        Ok(trace.len())
    } else {
        Err(format!(
            "{} of {} requests differ:\n{}",
            diffs.len(),
            trace.len(),
            diffs.join("\n")
        ))
    }
}

#[test]
fn golden_traces_match_nginx() {
    let dirs = support::goldens::dirs();
    assert!(
        dirs.len() >= 30,
        "expected the recorded scenarios, found {}",
        dirs.len()
    );
    let timed = dirs.iter().filter(|d| d.join("sent").is_file()).count();
    assert!(
        timed >= 12,
        "expected the least_time scenarios recorded from nginx 1.31, found {timed}"
    );
    let mut failed = Vec::new();
    let mut requests = 0;
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match check(dir) {
            Ok(n) => requests += n,
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} golden scenarios differ from nginx:\n{}",
        failed.len(),
        dirs.len(),
        failed.join("\n")
    );
    assert!(requests > 500, "only {requests} requests checked");
}

#[test]
fn a_wrong_expectation_is_reported() {
    // The comparison itself must be able to fail: a scenario with one expected line changed is reported.
    let src = support::goldens::dirs()
        .into_iter()
        .find(|d| d.ends_with("rr-5-1-1"))
        .expect("rr-5-1-1 is recorded");
    let tmp = std::env::temp_dir().join(format!("corelb-golden-{}", std::process::id()));
    fs::create_dir_all(&tmp).expect("temp dir");
    for f in ["corelb.conf", "requests", "backends"] {
        fs::copy(src.join(f), tmp.join(f)).expect("copy");
    }
    let expected = fs::read_to_string(src.join("expected")).expect("expected");
    let changed = expected.replacen("200 127.0.0.1:18082", "200 127.0.0.1:18083", 1);
    fs::write(tmp.join("expected"), changed).expect("write");
    let err = check(&tmp).expect_err("a changed expectation must not match");
    fs::remove_dir_all(&tmp).ok();
    assert!(
        err.contains("request 3 (127.0.0.1 /): nginx `200 127.0.0.1:18083`"),
        "{err}"
    );
}
