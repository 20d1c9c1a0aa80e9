//! The file of a `listen unix:PATH` socket as a process sees it, as nginx handles it: made at start (mode 0666),
//! served by every worker thread, removed when a reload drops the address and at exit (SIGQUIT and SIGTERM), and
//! a path that exists already refused at start (`bind() ... (98: Address already in use)`: nginx does not remove
//! a stale socket either). Both runtimes.

mod common;

use common::{signal, skip, wait_exit, wait_listening, wait_until, KillOnDrop, START_LIMIT};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn spawn(conf: &Path) -> KillOnDrop {
    KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .arg("-c")
            .arg(conf)
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corelb"),
    )
}

fn get_unix(path: &Path) -> String {
    let mut s = UnixStream::connect(path).expect("connect to the socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut all = String::new();
    let _ = s.read_to_string(&mut all);
    all.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

fn write_conf(path: &Path, runtime: &str, port: u16, socks: &[&Path]) {
    let listens: String = socks
        .iter()
        .map(|s| format!("listen unix:{};\n", s.display()))
        .collect();
    let conf = format!(
        "worker_processes 2;\nworker_runtime {runtime};\nevents {{}}\nhttp {{\n\
         server {{ listen 127.0.0.1:{port};\n{listens} return 200 \"$server_addr\"; }}\n}}\n"
    );
    std::fs::write(path, conf).expect("write config");
}

/// Whether `child` is up; a glommio refusal (io_uring, locked memory) is a skip.
fn started(runtime: &str, port: u16, child: &mut KillOnDrop) -> bool {
    let listening = wait_listening(port, child);
    if let Ok(Some(st)) = child.try_wait() {
        assert!(
            runtime == "glommio" && matches!(st.code(), Some(4 | 5)),
            "{runtime}: {st:?}"
        );
        skip::skip(skip::Skip {
            need: skip::Need::IoUring,
            cases: 1,
            what: "glommio run",
            why: &format!("corelb {st}"),
        });
        return false;
    }
    assert!(listening, "{runtime}: never listened");
    true
}

fn socket_file(runtime: &str, stop: &str) {
    let dir = common::temp_dir("unix-file", &format!("{runtime}-{stop}"));
    let conf = dir.join("corelb.conf");
    let (a, b) = (dir.join("a.sock"), dir.join("b.sock"));
    let port = common::free_port();
    write_conf(&conf, runtime, port, &[&a, &b]);
    let mut child = spawn(&conf);
    if !started(runtime, port, &mut child) {
        return;
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&a).expect("a.sock").permissions());
    assert_eq!(mode & 0o777, 0o666, "{runtime}");
    for _ in 0..10 {
        assert_eq!(get_unix(&a), format!("unix:{}", a.display()), "{runtime}");
    }
    assert_eq!(get_unix(&b), format!("unix:{}", b.display()));

    // a reload without b: b's file goes, a keeps serving
    write_conf(&conf, runtime, port, &[&a]);
    signal(child.id(), "HUP");
    assert!(
        wait_until(START_LIMIT, || !b.exists()),
        "{runtime}: b.sock stays after the reload"
    );
    assert_eq!(get_unix(&a), format!("unix:{}", a.display()));

    signal(child.id(), stop);
    let st = wait_exit(&mut child, Duration::from_secs(15)).expect("stopped");
    assert_eq!(st.code(), Some(0), "{runtime} {stop}");
    assert!(!a.exists(), "{runtime}: a.sock stays after {stop}");

    // a path that exists: the start fails as nginx's does
    std::fs::write(&a, b"").expect("a stale file");
    let out = Command::new(env!("CARGO_BIN_EXE_corelb"))
        .arg("-c")
        .arg(&conf)
        .env_remove("CORELB_RUNTIME")
        .output()
        .expect("run corelb");
    assert_ne!(out.status.code(), Some(0), "{runtime}");
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("bind() to unix:{} failed (98: Address already in use)", a.display());
    assert!(err.contains(&want), "{runtime}: {err}");
    assert!(a.exists(), "the file nginx would not remove is left");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn socket_file_tokio_quit() {
    socket_file("tokio", "QUIT");
}

#[test]
fn socket_file_tokio_term() {
    socket_file("tokio", "TERM");
}

#[test]
fn socket_file_glommio_quit() {
    socket_file("glommio", "QUIT");
}
