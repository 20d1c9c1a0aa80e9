//! Lean connections, as a process: 2,000 idle keepalive clients (each served one proxied request), and 2,000 that
//! connect and send nothing, grow corelb's RSS by little more than 1 KiB each, on both runtimes; what a peak of
//! clients served at once needed goes back once it has passed; and at `RLIMIT_NOFILE` corelb logs nginx's `accept4() failed (24: Too many open files)`, leaves the new clients
//! waiting in the backlog, and serves them by itself once descriptors are free again.

mod common;

use common::{free_port, skip, wait_listening, KillOnDrop};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Idle clients opened by the memory test.
const IDLE_CLIENTS: usize = 2_000;
/// The bound on RSS growth per idle client, generous (1.8x what was measured) so that it cannot flake, and far
/// under the ~10 KiB future of a request being served and the ~42 KiB each client held while it kept its buffers.
/// What an idle connection keeps (`proxy::idle::tests` prints the sizes of ours): on tokio its task cell (512 B:
/// tokio's 104 bytes around the 400-byte future, aligned to 128) and its socket registration (256 B), which
/// jemalloc holds at their size; on glommio its task (glommio's 48 bytes around the future), and once it has
/// waited a tick its socket parked in the shard's epoll set instead of glommio's `POLL_ADD` source (~500 B) for the
/// read wait. This debug build measured 845-847 B per idle client and 825 B per silent one on tokio (three runs),
/// 1,081 B and 1,132 B on glommio once its task fit jemalloc's 512-byte class (1,185-1,255 B before), 2026-12-06
/// (BENCHMARKS.md, "Idle clients after a peak"), and 608-632 B per idle client on glommio once idle connections park
/// (770-780 B per silent one, measured before all of them have waited the tick that parks them; 2026-12-07,
/// "Idle glommio clients parked").
fn idle_bound(_runtime: &str) -> u64 {
    1536
}
/// Clients served at once by the peak test.
const PEAK_CLIENTS: usize = 400;
/// What a peak of [`PEAK_CLIENTS`] may leave behind once it has passed: the shard's reserve of spare buffer sets
/// and burst blocks and the allocator's partly used pages; far less than what the peak's buffer sets and burst
/// blocks held, which the shard kept before. This debug build measured 9.3-15.2 MB more at the peak and 0.9-1.3 MB
/// more once it had passed (2026-12-06, two runs each on both runtimes).
const PEAK_LEFT: u64 = 4 * 1024 * 1024;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (the clients and corelb, its child, need more
/// than the usual 1,024); the limit it has then.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`; setrlimit reads one.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    lim.rlim_cur
}

/// A config with a front on `front` proxying (upstream keepalive) to a `return` server on `back`.
fn write_conf(dir: &Path, front: u16, back: u16, main: &str) -> PathBuf {
    let conf = format!(
        "{main}
error_log {dir}/error.log info;
pid {dir}/corelb.pid;
events {{ worker_connections 10000; }}
http {{
  access_log off;
  upstream u {{ server 127.0.0.1:{back}; keepalive 16; }}
  server {{ listen 127.0.0.1:{back}; location / {{ return 200 \"b\"; }} }}
  server {{
    listen 127.0.0.1:{front};
    keepalive_timeout 300s;
    keepalive_requests 100000;
    location / {{ proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}
  }}
}}
",
        dir = dir.display()
    );
    let path = dir.join("corelb.conf");
    std::fs::write(&path, conf).expect("write the config");
    path
}

fn start(conf: &Path, runtime: &str, nofile: Option<u64>) -> KillOnDrop {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelb"));
    cmd.arg("-c")
        .arg(conf)
        .args(["--runtime", runtime])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(n) = nofile {
        // SAFETY: the closure runs in the child between fork and exec and calls only setrlimit, which is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    KillOnDrop(cmd.spawn().expect("start corelb"))
}

/// Starts corelb, or says why the runtime cannot run here (glommio without io_uring: exit code 4 or 5).
fn started(conf: &Path, runtime: &str, front: u16, nofile: Option<u64>) -> Option<KillOnDrop> {
    let mut child = start(conf, runtime, nofile);
    let listening = wait_listening(front, &mut child);
    if let Ok(Some(st)) = child.try_wait() {
        assert!(runtime == "glommio" && matches!(st.code(), Some(4) | Some(5)), "{st:?}");
        skip::skip(skip::Skip {
            need: skip::Need::IoUring,
            cases: 1,
            what: "glommio lean connections",
            why: &format!("corelb {st}"),
        });
        return None;
    }
    assert!(listening, "never listened on {front}");
    Some(child)
}

/// The resident set of `pid` in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the child's status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("a VmRSS line");
    kb * 1024
}

/// The exact answer of the `return` backend through the proxy (its `Date` aside).
fn read_answer(s: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    while !all.ends_with(b"\r\n\r\nb") {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e} after {:?}", String::from_utf8_lossy(&all)),
        }
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    text.lines()
        .filter(|l| !l.starts_with("Date: "))
        .collect::<Vec<_>>()
        .join("\n")
}

const ANSWER: &str = concat!(
    "HTTP/1.1 200 OK\nServer: corelb/",
    env!("CARGO_PKG_VERSION"),
    "\nContent-Type: text/plain\nContent-Length: 1\nConnection: keep-alive\n\nb"
);

/// One request on a new keepalive connection, answered; the connection stays open.
fn served_client(front: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", front)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    assert_eq!(read_answer(&mut s), ANSWER);
    s
}

/// A front on `runtime` (one worker) with room for `descriptors` open files, warmed up: 64 clients served and gone,
/// so that the shard's spare buffers, the upstream pool and the allocator's arenas exist before a baseline (and the
/// shard's tick has trimmed what the warm-up left: a later baseline only drops, which makes a bound easier).
/// `None`: the runtime cannot run here (skipped loudly by `started`).
fn warmed_front(runtime: &str, tag: &str, descriptors: u64) -> Option<(KillOnDrop, u16)> {
    let nofile = raise_nofile();
    assert!(
        nofile > descriptors,
        "RLIMIT_NOFILE hard limit {nofile}: too low for the test"
    );
    let dir = common::temp_dir("lean", &format!("{tag}-{runtime}"));
    let (front, back) = (free_port(), free_port());
    let conf = write_conf(&dir, front, back, "worker_processes 1;");
    let child = started(&conf, runtime, front, None)?;
    let warm: Vec<TcpStream> = (0..64).map(|_| served_client(front)).collect();
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    Some((child, front))
}

fn idle_clients_grow_rss_by_little(runtime: &str) {
    let Some((child, front)) = warmed_front(runtime, "idle", 5 * IDLE_CLIENTS as u64 + 200) else {
        return;
    };
    let before = rss(child.id());
    let mut clients: Vec<TcpStream> = (0..IDLE_CLIENTS).map(|_| served_client(front)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let after = rss(child.id());
    let per_client = after.saturating_sub(before) / IDLE_CLIENTS as u64;
    eprintln!("{runtime}: RSS {before} -> {after} bytes with {IDLE_CLIENTS} idle clients: {per_client} B each");
    assert!(
        per_client < idle_bound(runtime),
        "{runtime}: {per_client} B of RSS per idle client (bound {})",
        idle_bound(runtime)
    );
    // and every one of them is still served
    for c in clients.iter_mut().step_by(97) {
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
        assert_eq!(read_answer(c), ANSWER);
    }
    // clients that connect and send nothing wait for their first bytes as idle ones do, holding no buffer
    let before = rss(child.id());
    let mut silent: Vec<TcpStream> = (0..IDLE_CLIENTS)
        .map(|_| TcpStream::connect(("127.0.0.1", front)).expect("connect"))
        .collect();
    // accepted in order: once a client after them is served, they are all accepted
    drop(served_client(front));
    let after = rss(child.id());
    let per_client = after.saturating_sub(before) / IDLE_CLIENTS as u64;
    eprintln!("{runtime}: RSS {before} -> {after} bytes with {IDLE_CLIENTS} silent clients: {per_client} B each");
    assert!(
        per_client < idle_bound(runtime),
        "{runtime}: {per_client} B of RSS per silent client (bound {})",
        idle_bound(runtime)
    );
    for c in silent.iter_mut().step_by(97) {
        c.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
        assert_eq!(read_answer(c), ANSWER);
    }
    drop(clients);
}

#[test]
fn idle_clients_grow_rss_by_little_tokio() {
    idle_clients_grow_rss_by_little("tokio");
}

#[test]
fn idle_clients_grow_rss_by_little_glommio() {
    idle_clients_grow_rss_by_little("glommio");
}

fn a_peaks_memory_goes_back_once_it_has_passed(runtime: &str) {
    let Some((child, front)) = warmed_front(runtime, "peak", 3 * PEAK_CLIENTS as u64 + 200) else {
        return;
    };
    let before = rss(child.id());
    // the peak: every client's request sent before any answer is read, all served at once through the upstream
    let mut peak: Vec<TcpStream> = (0..PEAK_CLIENTS)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", front)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
            s
        })
        .collect();
    for s in peak.iter_mut() {
        assert_eq!(read_answer(s), ANSWER);
    }
    let at_peak = rss(child.id());
    drop(peak);
    let back_down = common::wait_until(Duration::from_secs(10), || rss(child.id()) < before + PEAK_LEFT);
    let after = rss(child.id());
    eprintln!(
        "{runtime}: RSS {before} before a peak of {PEAK_CLIENTS} clients, {at_peak} after it, {after} once passed"
    );
    assert!(
        back_down,
        "{runtime}: RSS {after} B after a peak, {before} B before (at most {PEAK_LEFT} B more expected)"
    );
}

#[test]
fn a_peaks_memory_goes_back_once_it_has_passed_tokio() {
    a_peaks_memory_goes_back_once_it_has_passed("tokio");
}

#[test]
fn a_peaks_memory_goes_back_once_it_has_passed_glommio() {
    a_peaks_memory_goes_back_once_it_has_passed("glommio");
}

fn out_of_descriptors_waits_then_serves(runtime: &str) {
    raise_nofile();
    let dir = common::temp_dir("lean", &format!("nofile-{runtime}"));
    let (front, back) = (free_port(), free_port());
    let conf = write_conf(&dir, front, back, "worker_processes 1;");
    const LIMIT: u64 = 96;
    let Some(mut child) = started(&conf, runtime, front, Some(LIMIT)) else {
        return;
    };
    let log = dir.join("error.log");
    let out_of_fds = || {
        std::fs::read_to_string(&log)
            .is_ok_and(|t| t.contains("[crit]") && t.contains("accept4() failed (24: Too many open files)"))
    };
    // keepalive clients, each served, until one is not: corelb has no descriptor left for it and says so
    let mut held = Vec::new();
    let mut waiting = loop {
        assert!(
            held.len() < LIMIT as usize,
            "{} clients served under RLIMIT_NOFILE {LIMIT}",
            held.len()
        );
        let mut s = TcpStream::connect(("127.0.0.1", front)).expect("connect (the backlog has room)");
        s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
        s.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        let mut one = [0u8; 1];
        let answered = common::wait_until(Duration::from_secs(20), || match s.peek(&mut one) {
            Ok(_) => true,
            Err(_) => out_of_fds(),
        });
        assert!(answered, "neither an answer nor errno 24 in the log");
        if s.peek(&mut one).is_ok() {
            s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
            assert_eq!(read_answer(&mut s), ANSWER);
            held.push(s);
        } else {
            break s;
        }
    };
    // nothing answers it while corelb is out of descriptors
    waiting
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut one = [0u8; 1];
    assert!(waiting.read(&mut one).is_err(), "answered without a descriptor");
    waiting
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // free descriptors: corelb resumes accepting by itself and serves the clients that waited
    held.truncate(held.len() - 16);
    let started = Instant::now();
    assert_eq!(read_answer(&mut waiting), ANSWER);
    // and new clients are taken again
    drop(served_client(front));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(matches!(child.try_wait(), Ok(None)), "corelb exited");
}

#[test]
fn out_of_descriptors_waits_then_serves_tokio() {
    out_of_descriptors_waits_then_serves("tokio");
}

#[test]
fn out_of_descriptors_waits_then_serves_glommio() {
    out_of_descriptors_waits_then_serves("glommio");
}
