//! End-to-end tests of the `corelb` binary: `-t`, `--version`, `pick`, and its answers to bad input.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("corelb-cli-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        fs::write(&p, text).expect("write scratch file");
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn corelb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corelb"))
        .args(args)
        .output()
        .expect("run corelb")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn http_conf(upstreams: &str) -> String {
    format!(
        "worker_processes 1;\nevents {{}}\nhttp {{\n{upstreams}\n    server {{\n        listen 127.0.0.1:18190;\n        \
         location / {{ proxy_pass http://backend; }}\n    }}\n}}\n"
    )
}

const WEIGHTED: &str = "    upstream backend {\n        server 127.0.0.1:8081 weight=5;\n        \
                        server 127.0.0.1:8082;\n        server 127.0.0.1:8083;\n    }";

fn upstream(method: &str) -> String {
    format!(
        "    upstream backend {{\n        {method}\n        server 127.0.0.1:8081;\n        \
         server 127.0.0.1:8082;\n        server 127.0.0.1:8083;\n    }}"
    )
}

fn pick(conf: &Path, extra: &[&str]) -> Output {
    let conf = conf.to_str().expect("utf-8 path");
    let mut args = vec!["pick", "-c", conf, "--upstream", "backend"];
    args.extend_from_slice(extra);
    corelb(&args)
}

/// The peers of each output line (the text after `-> `).
fn peers(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "corelb failed: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| l.split_once(" -> ").map(|(_, p)| p.to_string()).unwrap_or_default())
        .collect()
}

fn port(p: u16) -> String {
    format!("127.0.0.1:{p}")
}

#[test]
fn version_prints_the_crate_version() {
    let out = corelb(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        format!("corelb version {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn test_flag_accepts_a_good_config_in_nginx_words() {
    let s = Scratch::new();
    let conf = s.file("good.conf", &http_conf(WEIGHTED));
    let out = corelb(&["-t", "-c", conf.to_str().unwrap()]);
    let f = conf.display();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stderr),
        format!("corelb: the configuration file {f} syntax is ok\ncorelb: configuration file {f} test is successful\n")
    );
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn every_bundled_example_passes_the_config_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut tested = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "conf") {
            let out = corelb(&["-t", "-c", path.to_str().unwrap()]);
            assert!(out.status.success(), "{}: {}", path.display(), text(&out.stderr));
            assert!(text(&out.stderr).contains("test is successful"));
            tested += 1;
        }
    }
    assert!(tested >= 2, "the quick start and weighted examples");
}

#[test]
fn test_flag_reports_the_error_and_fails() {
    let s = Scratch::new();
    let conf = s.file("bad.conf", "worker_processes 1;\nevents {}\nfoo bar;\n");
    let out = corelb(&["-t", "-c", conf.to_str().unwrap()]);
    let f = conf.display();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("corelb: [emerg] unknown directive \"foo\" in {f}:3\ncorelb: configuration file {f} test failed\n")
    );

    let missing = s.0.join("missing.conf");
    let out = corelb(&["-t", "-c", missing.to_str().unwrap()]);
    let f = missing.display();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("corelb: [emerg] open() \"{f}\" failed (")),
        "{err}"
    );
    assert!(
        err.ends_with(&format!("\ncorelb: configuration file {f} test failed\n")),
        "{err}"
    );
}

#[test]
fn no_config_and_run_without_runtime_fail_cleanly() {
    let out = corelb(&["-t"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no configuration file given"));
    let s = Scratch::new();
    let conf = s.file("run.conf", &http_conf(WEIGHTED));
    // (`-c` with a good config now runs the proxy: bin/tests/run.rs covers serving, signals and exit codes.)
    let out = corelb(&["-c", conf.to_str().unwrap(), "--runtime", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn pick_follows_smooth_weighted_round_robin() {
    let s = Scratch::new();
    let conf = s.file("rr.conf", &http_conf(WEIGHTED));
    let out = pick(&conf, &["--count", "7"]);
    assert_eq!(peers(&out), [8081, 8081, 8082, 8081, 8083, 8081, 8081].map(port));
    assert!(text(&out.stdout).starts_with("127.0.0.1 / -> 127.0.0.1:8081\n"));
}

#[test]
fn pick_takes_fixed_answers_for_resolve_names() {
    let s = Scratch::new();
    let ups = "    resolver 127.0.0.1:5353;\n    upstream backend {\n        zone b 64k;\n        \
               server app.test:8080 resolve;\n        server srv.test service=http resolve;\n    }";
    let conf = s.file("resolve.conf", &http_conf(ups));
    // unresolved: no peers
    assert_eq!(
        peers(&pick(&conf, &["--count", "1"])),
        ["backend (no live upstreams) => 502"]
    );
    let out = pick(
        &conf,
        &[
            "--count",
            "4",
            "--resolve",
            "APP.test=127.0.0.2,127.0.0.3",
            "--resolve",
            "srv.test=a.srv.test@127.0.0.4:81/10/2,b.srv.test@127.0.0.5:82/20",
        ],
    );
    let got = peers(&out);
    for want in ["127.0.0.2:8080", "127.0.0.3:8080", "127.0.0.4:81"] {
        assert!(got.contains(&want.to_string()), "{got:?}");
    }
    assert!(
        !got.contains(&"127.0.0.5:82".to_string()),
        "the higher priority is backup: {got:?}"
    );
    let out = pick(&conf, &["--resolve", "x"]);
    assert!(!out.status.success());
}

#[test]
fn pick_hashes_the_normalized_uri_and_refuses_what_nginx_refuses() {
    let s = Scratch::new();
    let conf = s.file("uri.conf", &http_conf(&upstream("hash $uri;")));
    let plain = peers(&pick(&conf, &["--uri", "/a/b"]));
    for same in ["/a//b", "/a/./b", "/a/x/../b", "/%61/b", "/a/b?x=1"] {
        assert_eq!(peers(&pick(&conf, &["--uri", same])), plain, "{same} is /a/b to nginx");
    }
    let out = pick(&conf, &["--uri", "/x/../../a"]);
    assert_eq!(peers(&out), ["(refused, no upstream) => 400"]);
}

#[test]
fn pick_shows_failed_peers_and_the_retry() {
    let s = Scratch::new();
    let conf = s.file("fail.conf", &http_conf(&upstream("")));
    let out = pick(&conf, &["--count", "4", "--fail", "127.0.0.1:8081"]);
    let want = [
        "127.0.0.1:8081 (error), 127.0.0.1:8082".to_string(),
        port(8083),
        port(8082),
        port(8083),
    ];
    assert_eq!(peers(&out), want);
    let out = pick(&conf, &["--count", "1", "--fail", "127.0.0.1:8081=e502"]);
    assert_eq!(peers(&out), ["127.0.0.1:8081 => 502"]);
}

#[test]
fn pick_takes_simulated_latencies_for_the_timed_methods() {
    let s = Scratch::new();
    let lat = [
        "--count",
        "8",
        "--latency",
        "127.0.0.1:8081=300",
        "--latency",
        "127.0.0.1:8082=50",
        "--latency",
        "127.0.0.1:8083=100",
    ];
    // least_time: the three unmeasured peers tie and SWRR takes them in turn; then the fastest, 8082, only
    let conf = s.file("lt.conf", &http_conf(&upstream("least_time header;")));
    let want = [8081, 8082, 8083, 8082, 8082, 8082, 8082, 8082].map(port);
    assert_eq!(peers(&pick(&conf, &lat)), want);
    // random two ewma (the simulator's seeded draws): once measured, 8081 (300 ms) loses every pair it is in and
    // 8083 (100 ms) wins only its pairs with 8081
    let conf = s.file("ewma.conf", &http_conf(&upstream("random two ewma;")));
    let want = [8081, 8083, 8082, 8082, 8082, 8083, 8082, 8083].map(port);
    assert_eq!(peers(&pick(&conf, &lat)), want);
    // without latencies every peer answers in 0 ms (1 ms to the EWMA): no peer is preferred
    let out = peers(&pick(&conf, &["--count", "30"]));
    assert!([8081, 8082, 8083].iter().all(|&p| out.contains(&port(p))), "{out:?}");
}

#[test]
fn pick_maglev_and_bounded_load_with_held_requests() {
    let s = Scratch::new();
    let hot = s.file("hot.trace", &"127.0.0.1 /?k=hot hold\n".repeat(9));
    let t = hot.to_str().expect("utf-8 path");
    let spread = |method: &str| {
        let conf = s.file("h.conf", &http_conf(&upstream(method)));
        let out = peers(&pick(&conf, &["--trace", t]));
        [8081, 8082, 8083].map(|p| out.iter().filter(|o| **o == port(p)).count())
    };
    // one hot key: all nine on its peer, with the ring and with the Maglev table
    assert!(spread("hash $arg_k consistent;").contains(&9));
    assert!(spread("hash $arg_k maglev;").contains(&9));
    // bounded at 125 %: a peer takes a request while it holds fewer than its slots (ceil((n + 1) x 1.25) / 3,
    // rounded up), so the nine spread 4, 3, 2 at most
    let bounded = spread("hash $arg_k consistent balance_factor=125;");
    assert_eq!(bounded.iter().sum::<usize>(), 9);
    assert!(bounded.iter().all(|&n| n <= 4), "{bounded:?}");
}

#[test]
fn pick_ip_hash_over_a_trace() {
    // docs/algorithms.md §6 vector IPH, equal weights (verified on nginx)
    let s = Scratch::new();
    let conf = s.file("iph.conf", &http_conf(&upstream("ip_hash;")));
    let trace = s.file(
        "trace",
        "# client uri\n127.0.0.1 /\n127.0.1.1 /a\n\n127.1.0.1 /\n10.0.0.1 /\n192.168.1.10 /\n172.16.5.4 /\n\
         8.8.8.8 /\n1.2.3.4 /\n::1 /\n2001:db8::1 /\n",
    );
    let out = pick(&conf, &["--trace", trace.to_str().unwrap()]);
    let want = [8083, 8081, 8082, 8081, 8082, 8082, 8083, 8082, 8083, 8083].map(port);
    assert_eq!(peers(&out), want);
    assert!(text(&out.stdout).contains("\n127.0.1.1 /a -> 127.0.0.1:8081\n"));

    // trace fields: a held request keeps its connection, so least_conn avoids its peer
    let lc = s.file("lc.conf", &http_conf(&upstream("least_conn;")));
    let trace = s.file(
        "lc-trace",
        "127.0.0.1 /slow hold\n127.0.0.1 / t=1\n127.0.0.1 / host=a.test\n",
    );
    let out = pick(&lc, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(peers(&out), [8081, 8082, 8083].map(port));
    assert!(text(&out.stdout).starts_with("127.0.0.1 /slow hold -> "));
    assert!(text(&out.stdout).contains("127.0.0.1 / host=a.test -> "));

    // --remote-addr cycles
    let out = pick(
        &conf,
        &["--remote-addr", "8.8.8.8", "--remote-addr", "10.0.0.1", "--count", "3"],
    );
    assert_eq!(peers(&out), [8083, 8081, 8083].map(port));
    assert!(text(&out.stdout).starts_with("8.8.8.8 / -> "));
}

#[test]
fn pick_with_keys_follows_the_hash_vectors() {
    // docs/algorithms.md §7 vector H and §8 vector CH (verified on nginx)
    let s = Scratch::new();
    let conf = s.file("h.conf", &http_conf(&upstream("hash $arg_k;")));
    let out = pick(&conf, &["--key", "a", "--key", "b", "--key", "c"]);
    assert_eq!(peers(&out), [8083, 8081, 8083].map(port));
    assert!(text(&out.stdout).starts_with("127.0.0.1 key=a -> "));
    let out = pick(&conf, &["--uri", "/?k=b"]);
    assert_eq!(peers(&out), [port(8081)]);

    let conf = s.file("ch.conf", &http_conf(&upstream("hash $arg_k consistent;")));
    let keys = ["a", "b", "c", "/index.html", "x", "user42", "k1025"];
    let args: Vec<&str> = keys.iter().flat_map(|k| ["--key", k]).collect();
    let out = pick(&conf, &args);
    assert_eq!(peers(&out), [8082, 8083, 8083, 8083, 8081, 8082, 8081].map(port));
}

#[test]
fn pick_in_stream_and_with_a_name_in_both_blocks() {
    let s = Scratch::new();
    let conf = s.file(
        "both.conf",
        &format!(
            "worker_processes 1;\nevents {{}}\nhttp {{\n{}\n    server {{ listen 127.0.0.1:18190; location / {{ \
             proxy_pass http://backend; }} }}\n}}\nstream {{\n{}\n    server {{ listen 127.0.0.1:18191; \
             proxy_pass backend; }}\n}}\n",
            upstream("ip_hash;"),
            upstream("hash $remote_addr consistent;")
        ),
    );
    let out = pick(&conf, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("both http and stream") && err.contains("--stream"),
        "{err}"
    );
    let out = pick(&conf, &["--http", "--remote-addr", "8.8.8.8"]);
    assert_eq!(peers(&out), [port(8083)]);
    let out = pick(
        &conf,
        &["--stream", "--key", "a", "--key", "b", "--fail", "127.0.0.1:8082"],
    );
    assert_eq!(
        peers(&out),
        ["127.0.0.1:8082 (error), 127.0.0.1:8083".to_string(), port(8083)]
    );
}

#[test]
fn pick_rejects_bad_input_clearly() {
    let s = Scratch::new();
    let conf = s.file("iph.conf", &http_conf(&upstream("ip_hash;")));
    let c = conf.to_str().unwrap();
    let fails = |args: &[&str], code: i32, msg: &str| {
        let out = corelb(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    fails(
        &["pick", "-c", c, "--upstream", "nope"],
        1,
        "corelb: [emerg] no upstream \"nope\" in the configuration",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--stream"],
        1,
        "no upstream \"backend\" in the stream block",
    );
    let missing = s.0.join("missing-trace");
    let m = missing.to_str().unwrap();
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--trace", m],
        1,
        "corelb: cannot read the trace",
    );
    let bad = s.file("bad-trace", "127.0.0.1 /\n\nnot-an-ip /x\n");
    let b = bad.to_str().unwrap();
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--trace", b],
        1,
        "line 3: invalid address \"not-an-ip\"",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--remote-addr", "1.2.3"],
        2,
        "invalid IP address",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--fail", "127.0.0.1:9"],
        1,
        "no such peer",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--latency", "127.0.0.1:9=5"],
        1,
        "corelb: --latency 127.0.0.1:9: no such peer in upstream \"backend\"",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--latency", "127.0.0.1:8081"],
        2,
        "is not ADDR=MS",
    );
    fails(
        &[
            "pick",
            "-c",
            c,
            "--upstream",
            "backend",
            "--fail",
            "127.0.0.1:8081=bogus",
        ],
        2,
        "unknown backend mode",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--key", "abc"],
        1,
        "uses ip_hash",
    );
    fails(
        &["pick", "-c", c, "--upstream", "backend", "--count", "0"],
        2,
        "--count",
    );
    let m = s.0.join("missing.conf");
    fails(
        &["pick", "-c", m.to_str().unwrap(), "--upstream", "backend"],
        1,
        "corelb: [emerg] open() ",
    );
}
