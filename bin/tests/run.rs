//! `corelb -c FILE` as a process: serving, signals (SIGTERM fast stop, SIGQUIT graceful stop), the pid file, and
//! the exit codes of start-up failures. Loopback only, free ports, bounded waits.

mod common;

use common::{free_port, get, skip, wait_exit, wait_listening, wait_pid_file};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn start(conf: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_corelb"))
        .arg("-c")
        .arg(conf)
        .args(extra)
        .env_remove("CORELB_RUNTIME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start corelb")
}

/// Waits until the child accepts on `port`; panics if it exits or never does.
fn wait_port(child: &mut Child, port: u16) {
    assert!(
        wait_listening(port, child),
        "port {port} never opened: {:?}",
        child.try_wait()
    );
}

/// How long a stop may take on a loaded machine (a bound on the wait, not a timing check).
const STOP_LIMIT: Duration = Duration::from_secs(15);

/// The quick-start layout on free ports: three `return` backends, weights 5,1,1 in front.
fn quickstart(dir: &Path, front: u16, extra_main: &str) -> PathBuf {
    let ports = [free_port(), free_port(), free_port()];
    let conf = format!(
        "worker_processes 1;\n{extra_main}\nevents {{ worker_connections 256; }}\nhttp {{\n\
         upstream backends {{ server 127.0.0.1:{a} weight=5; server 127.0.0.1:{b}; server 127.0.0.1:{c}; keepalive 8; }}\n\
         server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://backends; proxy_http_version 1.1; \
         proxy_set_header Connection \"\"; }} }}\n\
         server {{ listen 127.0.0.1:{a}; return 200 a; }}\n\
         server {{ listen 127.0.0.1:{b}; return 200 b; }}\n\
         server {{ listen 127.0.0.1:{c}; return 200 c; }}\n}}\n",
        a = ports[0],
        b = ports[1],
        c = ports[2],
    );
    let path = dir.join("corelb.conf");
    std::fs::write(&path, conf).expect("write config");
    path
}

#[test]
fn serves_the_weighted_sequence_writes_pid_and_log_files_and_stops_on_sigterm() {
    let dir = common::temp_dir("run", "term");
    let front = free_port();
    let pid_file = dir.join("corelb.pid");
    let log = dir.join("error.log");
    let conf = quickstart(
        &dir,
        front,
        &format!("pid {};\nerror_log {} notice;", pid_file.display(), log.display()),
    );
    let mut child = start(&conf, &[]);
    wait_port(&mut child, front);
    let seq: String = (0..7).map(|_| get(front, "/")).collect();
    assert_eq!(seq, "aabacaa");
    // the file holds the child's pid and a newline (nginx's format)
    let pid = wait_pid_file(&pid_file, &mut child);
    assert_eq!(std::fs::read_to_string(&pid_file).ok(), Some(format!("{pid}\n")));
    common::signal(pid, "TERM");
    let st = wait_exit(&mut child, STOP_LIMIT).expect("exits after SIGTERM");
    assert!(st.success(), "{st:?}");
    assert!(!pid_file.exists(), "pid file removed");
    let logged = std::fs::read_to_string(&log).expect("error log written");
    assert!(logged.contains("shard(s) started"), "{logged}");
}

#[test]
fn sigquit_lets_an_in_flight_request_finish() {
    // The backend tells when the request has reached it, and answers once corelb has logged the SIGQUIT.
    let slow = TcpListener::bind("127.0.0.1:0").expect("slow backend");
    let slow_addr: SocketAddr = slow.local_addr().expect("addr");
    let (arrived, reached) = std::sync::mpsc::channel();
    let (quit_sent, answer) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Some(mut c) = slow.incoming().flatten().next() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = arrived.send(());
            let _ = answer.recv();
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow");
        }
    });
    let dir = common::temp_dir("run", "quit");
    let front = free_port();
    let conf = dir.join("corelb.conf");
    let text = format!(
        "error_log stderr notice;\nevents {{}}\n\
         http {{ server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://{slow_addr}; }} }} }}\n"
    );
    std::fs::write(&conf, text).expect("write config");
    let mut child = start(&conf, &[]);
    wait_port(&mut child, front);
    let in_flight = std::thread::spawn(move || get(front, "/"));
    reached
        .recv_timeout(Duration::from_secs(30))
        .expect("the request reached the backend");
    let stderr = child.stderr.take().expect("piped stderr");
    let log = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if line.contains("SIGQUIT: graceful shutdown") {
                let _ = quit_sent.send(());
            }
            lines.push(line);
        }
        lines
    });
    common::signal(child.id(), "QUIT");
    assert_eq!(in_flight.join().expect("client thread"), "slow");
    let st = wait_exit(&mut child, STOP_LIMIT).expect("exits once idle");
    assert!(st.success(), "{st:?}");
    let lines = log.join().expect("stderr reader");
    assert!(
        lines.iter().any(|l| l.contains("SIGQUIT: graceful shutdown")),
        "{lines:?}"
    );
}

#[test]
fn start_up_failures_have_their_exit_codes() {
    let dir = common::temp_dir("run", "fail");
    let bad = dir.join("bad.conf");
    std::fs::write(&bad, "events {}\nhttp { bogus_directive on; }\n").expect("write");
    let mut child = start(&bad, &[]);
    let st = wait_exit(&mut child, Duration::from_secs(5)).expect("exits");
    assert_eq!(st.code(), Some(1), "config error");

    let taken = TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let port = taken.local_addr().expect("addr").port();
    let conf = dir.join("taken.conf");
    std::fs::write(
        &conf,
        format!("events {{}}\nhttp {{ server {{ listen 127.0.0.1:{port}; return 200; }} }}\n"),
    )
    .expect("write");
    let mut child = start(&conf, &[]);
    let st = wait_exit(&mut child, Duration::from_secs(5)).expect("exits");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert_eq!(st.code(), Some(3), "bind failure: {err}");
    assert!(err.contains(&format!("bind() to 127.0.0.1:{port} failed")), "{err}");
}

#[test]
fn glommio_runtime_serves_or_explains_why_not() {
    let dir = common::temp_dir("run", "glommio");
    let front = free_port();
    let conf = quickstart(&dir, front, "");
    let mut child = start(&conf, &["--runtime", "glommio"]);
    let listening = wait_listening(front, &mut child);
    if let Ok(Some(st)) = child.try_wait() {
        // No io_uring (or too little locked memory) here: a distinct exit code, not a panic.
        assert!(matches!(st.code(), Some(4) | Some(5)), "{st:?}");
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        skip::skip(skip::Skip {
            need: skip::Need::IoUring,
            cases: 1,
            what: "glommio run",
            why: &format!("corelb {st}: {}", err.lines().last().unwrap_or("")),
        });
        return;
    }
    assert!(listening, "never listened on {front}");
    let seq: String = (0..7).map(|_| get(front, "/")).collect();
    assert_eq!(seq, "aabacaa");
    common::signal(child.id(), "TERM");
    assert!(wait_exit(&mut child, STOP_LIMIT).is_some_and(|s| s.success()));
}

#[test]
fn glommio_with_too_little_locked_memory_exits_5_with_the_numbers() {
    let dir = common::temp_dir("run", "memlock");
    let front = free_port();
    let conf = quickstart(&dir, front, "worker_runtime glommio;");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -l 64 && exec {} -c {}",
            env!("CARGO_BIN_EXE_corelb"),
            conf.display()
        ))
        .env_remove("CORELB_RUNTIME")
        .output()
        .expect("run under a 64 KiB memlock limit");
    let err = String::from_utf8_lossy(&out.stderr);
    if let Err(e) = corelb_engine::preflight::probe_io_uring() {
        assert_eq!(out.status.code(), Some(4), "{err}");
        skip::skip(skip::Skip {
            need: skip::Need::IoUring,
            cases: 1,
            what: "locked-memory check",
            why: &e.to_string(),
        });
        return;
    }
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(err.contains("RLIMIT_MEMLOCK is 65536 bytes"), "{err}");
}
