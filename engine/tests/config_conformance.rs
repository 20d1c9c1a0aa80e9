//! The configs the repository's tools feed corelb parse into the model they describe: every scenario the nginx
//! oracle renders (`tools/conformance/oracle.py --render`), the vector config of the balancer model
//! (`tools/model/nginx_model.py --write-conf`; its directives outside corelb's subset are refused by name), and the
//! side-by-side benchmark's front and backend configs (`tools/bench/side_by_side.py --write-configs`). The tools
//! are run with python3 from the repository root; nothing outside the repository is read.

use corelb_engine::config::model::{Config, LocationMatch, Method};
use corelb_engine::config::{parse_str, ConfigError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the engine crate's parent).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs one of the repository's python tools (a path from the root) with `args`; returns its stdout.
fn tool(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-conformance-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn config_every_oracle_scenario_parses_to_its_upstream() {
    let out = tool("tools/conformance/oracle.py", &["--render", "20000"]);
    let mut count = 0;
    for line in out.lines() {
        count += 1;
        let conf = json_string_field(line, "conf");
        let c = parse_str(&conf, Path::new("/tmp/front.conf")).unwrap_or_else(|e| panic!("{e}\n{conf}"));
        let stream = conf.contains("stream {");
        let (upstreams, listen) = if stream {
            let s = c.stream.as_ref().expect("stream");
            (&s.upstreams, s.servers[0].listens[0].addr)
        } else {
            let h = c.http.as_ref().expect("http");
            let pass = h.servers[0].locations[0].proxy_pass.as_ref().expect("proxy_pass");
            assert_eq!(h.upstreams[pass.upstream].name, "backend");
            (&h.upstreams, h.servers[0].listens[0].addr)
        };
        assert_eq!(listen, "127.0.0.1:20000".parse().unwrap());
        let u = upstreams.iter().find(|u| u.name == "backend").expect("backend");
        // One server line per scenario server, on the ports given, with the parameters written.
        for (i, s) in u.servers.iter().enumerate() {
            assert_eq!(s.addrs[0].port(), 20001 + i as u16);
            let line = conf
                .lines()
                .find(|l| l.contains(&format!(":{};", 20001 + i)) || l.contains(&format!(":{} ", 20001 + i)));
            let line = line.expect("server line");
            assert_eq!(s.backup, line.contains(" backup"), "{line}");
            if let Some(w) = line.split("weight=").nth(1) {
                assert_eq!(s.weight.to_string(), w.trim_end_matches(';').split(' ').next().unwrap());
            }
        }
        let method_ok = match &u.method {
            Method::IpHash => conf.contains("ip_hash;"),
            Method::Hash { key, consistent } => {
                let raw = key.raw();
                (conf.contains(&format!("hash {raw}")) || conf.contains(&format!("hash \"{raw}\"")))
                    && *consistent == conf.contains(" consistent;")
            }
            Method::Maglev { .. } => conf.contains(" maglev;"),
            Method::BoundedHash { .. } => conf.contains(" balance_factor="),
            Method::Fair { .. } => conf.contains("fair"),
            Method::LeastConn => conf.contains("least_conn;"),
            Method::Random { .. } => conf.contains("random"),
            Method::LeastTime { .. } => conf.contains("least_time"),
            Method::RoundRobin => !conf.contains("hash") && !conf.contains("least_conn") && !conf.contains("random"),
        };
        assert!(method_ok, "{:?} for\n{conf}", u.method);
    }
    // The basic scenarios (tools/conformance/basic.py) and corelb's own (tools/conformance/scenarios.py).
    assert!(count >= 25, "only {count} scenarios rendered");
}

/// The value of a top-level string field of a one-line JSON object (enough for python's json.dumps output).
fn json_string_field(line: &str, field: &str) -> String {
    let key = format!("\"{field}\": \"");
    let start = line.find(&key).expect("field") + key.len();
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return out,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                }
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    panic!("unterminated string field {field}");
}

/// The directives of the vector config that are outside corelb's subset (none since realip; its `*_temp_path`
/// lines are accepted: corelb writes no temporary files).
const OUTSIDE: &[&str] = &[];

/// Lines left out of the model check although corelb reads the directive: `add_header X-Up $upstream_addr`
/// names a variable corelb does not know yet.
const UNKNOWN_VARIABLE: &[&str] = &["add_header"];

/// `text` without the statements of the directives in `drop`.
fn without(text: &str, drop: &[&str]) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let mut kept = String::new();
        for stmt in line.split_inclusive(';') {
            let name = stmt.split_whitespace().next().unwrap_or("");
            if !drop.contains(&name) {
                kept.push_str(stmt);
            }
        }
        // Keep the line count, so refusals point at the vector file's own lines.
        if kept.trim().is_empty() && !line.trim().is_empty() {
            kept = "\n".into();
        }
        out.push_str(&kept);
    }
    out
}

#[test]
fn config_the_vector_config_is_refused_by_name_then_parses_without_those_directives() {
    let dir = scratch("vectors");
    tool("tools/model/nginx_model.py", &["--write-conf", dir.to_str().unwrap()]);
    let path = dir.join("nginx.conf");
    let text = std::fs::read_to_string(&path).expect("vector config written");
    // Each directive outside the subset is refused by name, on its line.
    for name in OUTSIDE {
        let others: Vec<&str> = OUTSIDE.iter().copied().filter(|n| n != name).collect();
        let one = without(&text, &others);
        let line = one
            .lines()
            .position(|l| l.split_whitespace().any(|w| w == *name))
            .expect("kept")
            + 1;
        match parse_str(&one, &path) {
            Err(ConfigError::Unsupported { name: n, at }) => {
                assert_eq!((n.as_str(), at.line), (*name, line));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let dropped: Vec<&str> = OUTSIDE.iter().chain(UNKNOWN_VARIABLE).copied().collect();
    let c = parse_str(&without(&text, &dropped), &path).unwrap_or_else(|e| panic!("{e}"));
    check_vector_model(&c);
    let _ = std::fs::remove_dir_all(&dir);
}

fn check_vector_model(c: &Config) {
    assert_eq!(c.main.worker_connections, 256);
    assert_eq!(c.main.error_log.as_ref().and_then(|e| e.1.as_deref()), Some("info"));
    let h = c.http.as_ref().expect("http");
    let names: Vec<&str> = h.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["rr", "lc", "iph", "iphw", "iphd", "h", "hd", "ch", "chw", "chd", "ft"]
    );
    assert_eq!(h.upstream("rr").unwrap().servers[0].weight, 5);
    assert_eq!(h.upstream("lc").unwrap().method, Method::LeastConn);
    assert_eq!(h.upstream("iphd").unwrap().method, Method::IpHash);
    assert!(h.upstream("iphd").unwrap().servers[1].down);
    assert!(matches!(
        h.upstream("chw").unwrap().method,
        Method::Hash { consistent: true, .. }
    ));
    assert!(matches!(
        h.upstream("hd").unwrap().method,
        Method::Hash { consistent: false, .. }
    ));
    let ft = &h.upstream("ft").unwrap().servers[0];
    assert_eq!((ft.max_fails, ft.fail_timeout.as_secs()), (2, 1));
    assert_eq!(h.servers.len(), 4);
    let front = &h.servers[3];
    // `set_real_ip_from 127.0.0.0/8; real_ip_header X-Real-IP;` of the front server, in each of its locations
    let realip = front.realip.as_deref().expect("realip");
    assert_eq!(realip.from.len(), 1);
    assert_eq!(
        (realip.from[0].addr.to_string(), realip.from[0].bits),
        ("127.0.0.0".into(), 8)
    );
    assert_eq!(realip.header, corelb_engine::config::realip::RealIpHeader::XRealIp);
    assert!(front.locations.iter().all(|l| l.realip.as_deref() == Some(realip)));
    assert_eq!(front.locations.len(), 11);
    for l in &front.locations {
        let LocationMatch::Prefix(uri) = &l.matcher else {
            panic!("{:?}", l.matcher)
        };
        let up = &h.upstreams[l.proxy_pass.as_ref().expect("proxy_pass").upstream];
        assert_eq!(format!("/{}", up.name), *uri);
    }
    assert_eq!(h.servers[0].ret.as_ref().and_then(|r| r.text.as_deref()), Some("s1"));
}

#[test]
fn config_the_benchmark_configs_parse() {
    for (workers, algo) in [
        ("1", ""),
        ("2", "least_conn;"),
        ("1", "hash $request_uri consistent;"),
        ("1", "random two least_conn;"),
        ("1", "ip_hash;"),
    ] {
        let dir = scratch("bench");
        let args = [
            "--write-configs",
            dir.to_str().unwrap(),
            "--workers",
            workers,
            "--algo",
            algo,
        ];
        tool("tools/bench/side_by_side.py", &args);
        let front = dir.join("front.conf");
        let c = corelb_engine::config::load(&front).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.main.worker_connections, 4096);
        let h = c.http.as_ref().expect("http");
        let u = h.upstream("backend").expect("backend");
        assert_eq!((u.keepalive, u.servers.len()), (Some(64), 2));
        let l = &h.servers[0].locations[0];
        assert!(l.proxy.http_version_11);
        assert_eq!(l.proxy.set_headers[0].0, "Connection");
        assert!(l.client.access_log.is_empty(), "access_log off");
        let backend = corelb_engine::config::load(&dir.join("backend.conf")).unwrap_or_else(|e| panic!("{e}"));
        let b = backend.http.expect("http");
        assert_eq!(b.servers.len(), 2);
        assert_eq!(b.servers[0].locations[0].ret.as_ref().map(|r| r.code), Some(200));
        assert_eq!(b.servers[0].client.keepalive_requests, 1_000_000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
