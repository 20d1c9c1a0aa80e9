//! Loud skips: a test part that cannot run here prints one `SKIP` line, and `CORELB_REQUIRE` makes it a failure.
//!
//! `CORELB_REQUIRE` lists what the machine must have, comma-separated: `io_uring` (the glommio runtime: io_uring
//! and enough locked memory), `nginx` (a binary to compare with), `nginx-stream` (its stream module), `exporter`
//! (Debian's `prometheus-nginx-exporter`), `netns` (root, network namespaces and the XDP program: `bin/tests/xdp.rs`). `.ci/run` sets it for what the CI machine can have, and
//! `tools/test.sh` sums up the `SKIP` lines at the end of the run. (The process tests of `bin/tests` include this
//! file too.)
#![allow(dead_code)] // each including test uses its part

use std::io::Write;

/// What a skipped part needed, by its name in `CORELB_REQUIRE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// io_uring and enough locked memory for the glommio runtime.
    IoUring,
    /// An nginx binary to compare with.
    Nginx,
    /// nginx's stream module.
    NginxStream,
    /// The nginx Prometheus exporter (Debian's `prometheus-nginx-exporter`).
    Exporter,
    /// Root, network namespaces, veth and bridges, `ethtool`, and the XDP program built (clang): the XDP tests.
    Netns,
}

impl Need {
    /// Its name in `CORELB_REQUIRE`.
    pub fn name(self) -> &'static str {
        match self {
            Need::IoUring => "io_uring",
            Need::Nginx => "nginx",
            Need::NginxStream => "nginx-stream",
            Need::Exporter => "exporter",
            Need::Netns => "netns",
        }
    }

    /// Whether `CORELB_REQUIRE` lists it (a skip for want of it is then a failure).
    pub fn required(self) -> bool {
        std::env::var("CORELB_REQUIRE").is_ok_and(|list| list.split(',').any(|n| n.trim() == self.name()))
    }
}

/// What a skip dropped: `cases` cases of a kind (`what`, e.g. "stream cases") for want of `need`, and why.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    pub need: Need,
    pub cases: usize,
    pub what: &'a str,
    pub why: &'a str,
}

/// Reports a part of the running test that did not run: `SKIP crate::test: N what (why)` on stderr, written past
/// the test harness's output capture so that a passing test shows it too. Panics instead when `CORELB_REQUIRE`
/// lists the need.
pub fn skip(s: Skip<'_>) {
    let test = test_name();
    assert!(
        !s.need.required(),
        "{test}: {} {} cannot run here ({}), and CORELB_REQUIRE lists {}",
        s.cases,
        s.what,
        s.why,
        s.need.name()
    );
    // One write of a whole line: lines of tests running at once do not interleave.
    let line = format!("SKIP {test}: {} {} ({})\n", s.cases, s.what, s.why);
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// `crate::test` of the running test: the test binary's crate and the name the harness gave the test's thread.
pub fn test_name() -> String {
    let krate = module_path!().split("::").next().unwrap_or("tests");
    let thread = std::thread::current();
    format!("{krate}::{}", thread.name().unwrap_or("main"))
}
