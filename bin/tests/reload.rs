//! Reload as a process sees it: SIGHUP and `corelb -s reload` re-read the config file, a broken file keeps the
//! running config serving and logs the error with its file:line, `-s reopen` reopens the error log, `-s quit` stops
//! gracefully through the pid file, and `-s` failures are worded as nginx words them. Both runtimes.

mod common;

use common::{free_port, signal, skip, wait_exit, wait_listening, wait_pid_file, wait_until, START_LIMIT};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn corelb(args: &[&str], conf: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corelb"))
        .args(args)
        .arg("-c")
        .arg(conf)
        .env_remove("CORELB_RUNTIME")
        .output()
        .expect("run corelb")
}

/// `corelb -c conf` as a child killed when the test ends; stdout dropped, stderr as given.
fn spawn(conf: &Path, stderr: Stdio) -> common::KillOnDrop {
    common::KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .arg("-c")
            .arg(conf)
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start corelb"),
    )
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn log_has(log: &Path, text: &str) -> bool {
    wait_until(START_LIMIT, || {
        std::fs::read_to_string(log).is_ok_and(|l| l.contains(text))
    })
}

/// A proxy on `front` to one upstream peer, the `return` server named `peer` (a or b) of the same config.
fn write_conf(path: &Path, main: &str, front: u16, backs: [u16; 2], peer: usize, extra_http: &str) {
    let conf = format!(
        "{main}\nevents {{ worker_connections 64; }}\nhttp {{\n\
         upstream u {{ server 127.0.0.1:{up}; }}\n\
         server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://u; }} }}\n\
         server {{ listen 127.0.0.1:{a}; return 200 a; }}\n\
         server {{ listen 127.0.0.1:{b}; return 200 b; }}\n{extra_http}}}\n",
        up = backs[peer],
        a = backs[0],
        b = backs[1],
    );
    std::fs::write(path, conf).expect("write config");
}

fn reload_by_signals(runtime: &str) {
    let dir = common::temp_dir("reload", runtime);
    let (conf, pid_file, log) = (dir.join("corelb.conf"), dir.join("corelb.pid"), dir.join("error.log"));
    let main = format!(
        "worker_processes 1;\nworker_runtime {runtime};\npid {};\nerror_log {} notice;",
        pid_file.display(),
        log.display()
    );
    let (front, backs) = (free_port(), [free_port(), free_port()]);
    write_conf(&conf, &main, front, backs, 0, "");
    let mut child = spawn(&conf, Stdio::null());
    let listening = wait_listening(front, &mut child);
    if let Ok(Some(st)) = child.try_wait() {
        // glommio refused here (io_uring or locked memory): exit 4 or 5, explained in the log
        assert!(
            runtime == "glommio" && matches!(st.code(), Some(4 | 5)),
            "{runtime}: {st:?}"
        );
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let why = format!("corelb {st}: {}", logged.lines().last().unwrap_or(""));
        skip::skip(skip::Skip {
            need: skip::Need::IoUring,
            cases: 1,
            what: "glommio run",
            why: &why,
        });
        return;
    }
    assert!(listening, "{runtime}: never listened");
    assert_eq!(common::get(front, "/"), "a");
    wait_pid_file(&pid_file, &mut child);

    // A broken file: SIGHUP logs the error with its place, and the old config keeps serving.
    std::fs::write(&conf, std::fs::read_to_string(&conf).expect("read") + "bogus on;\n").expect("break");
    signal(child.id(), "HUP");
    let at = format!("[emerg] unknown directive \"bogus\" in {}:12", conf.display());
    assert!(log_has(&log, &at), "{runtime}: no `{at}` in the log");
    assert!(log_has(&log, "the running configuration (generation 1) keeps serving"));
    assert_eq!(common::get(front, "/"), "a");
    // `-s reload` reads the config too: a broken file is refused before any signal, as nginx does.
    let refused = corelb(&["-s", "reload"], &conf);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr_of(&refused).contains(&at), "{}", stderr_of(&refused));

    // A good file through `-s reload`: the upstream moves to b; worker_processes needs a restart and is kept.
    let main2 = main.replace("worker_processes 1;", "worker_processes 2;");
    write_conf(&conf, &main2, front, backs, 1, "");
    let sent = corelb(&["-s", "reload"], &conf);
    assert!(sent.status.success(), "{}", stderr_of(&sent));
    assert!(log_has(&log, "generation 2 serves"), "{runtime}: no reload notice");
    assert!(log_has(
        &log,
        "\"worker_processes\" changed from 1 to 2: a reload keeps 1"
    ));
    assert_eq!(common::get(front, "/"), "b", "{runtime}");

    // `-s reopen`: the error log is opened again after a rotation.
    let rotated = dir.join("error.log.1");
    std::fs::rename(&log, &rotated).expect("rotate");
    assert!(corelb(&["-s", "reopen"], &conf).status.success());
    assert!(log_has(&log, "reopened the error log"), "{runtime}: no new log");

    // `-s quit`: graceful stop through the pid file, which goes with the process.
    assert!(corelb(&["-s", "quit"], &conf).status.success());
    let st = wait_exit(&mut child, Duration::from_secs(15)).expect("stopped after -s quit");
    assert_eq!(st.code(), Some(0), "{runtime}");
    assert!(!pid_file.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sighup_and_dash_s_reload_quit_and_reopen_tokio() {
    reload_by_signals("tokio");
}

#[test]
fn sighup_and_dash_s_reload_quit_and_reopen_glommio() {
    reload_by_signals("glommio");
}

#[test]
fn dash_s_failures_are_worded_as_nginx_and_exit_1() {
    let dir = common::temp_dir("reload", "errors");
    let (conf, pid_file) = (dir.join("corelb.conf"), dir.join("corelb.pid"));
    std::fs::write(&conf, format!("pid {};\nevents {{}}\n", pid_file.display())).expect("config");
    let out = corelb(&["-s", "reload"], &conf);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out).trim_end(),
        format!(
            "corelb: [error] open() \"{}\" failed (2: No such file or directory)",
            pid_file.display()
        )
    );
    std::fs::write(&pid_file, "abc\n").expect("pid file");
    let out = corelb(&["-s", "stop"], &conf);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out).trim_end(),
        format!(
            "corelb: [error] invalid PID number \"abc\" in \"{}\"",
            pid_file.display()
        )
    );
    let out = corelb(&["-s", "restart"], &conf);
    assert_ne!(out.status.code(), Some(0), "an unknown -s name is a usage error");
    std::fs::write(&conf, "events {}\n").expect("config");
    let out = corelb(&["-s", "quit"], &conf);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("no \"pid\" directive"), "{}", stderr_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload adds an access log the first config did not have; `-s reopen` after a rotation moves the lines to the new
/// file (the old one keeps what was written before).
#[test]
fn a_reload_adds_an_access_log_and_reopen_follows_its_rotation() {
    let dir = common::temp_dir("reload", "access-log");
    let (conf, pid_file, log) = (dir.join("corelb.conf"), dir.join("corelb.pid"), dir.join("error.log"));
    let access = dir.join("access.log");
    let port = free_port();
    let write = |logging: &str| {
        let text = format!(
            "worker_processes 1;\npid {};\nerror_log {} notice;\nevents {{}}\n\
             http {{ {logging} server {{ listen 127.0.0.1:{port}; return 200 ok; }} }}\n",
            pid_file.display(),
            log.display()
        );
        std::fs::write(&conf, text).expect("write config");
    };
    write("");
    let mut child = spawn(&conf, Stdio::null());
    assert!(wait_listening(port, &mut child), "never listened on {port}");
    wait_pid_file(&pid_file, &mut child);
    assert_eq!(common::get(port, "/before"), "ok");

    write(&format!("access_log {} combined;", access.display()));
    assert!(corelb(&["-s", "reload"], &conf).status.success());
    assert!(log_has(&log, "generation 2 serves"), "no reload notice");
    assert_eq!(common::get(port, "/first"), "ok");
    assert!(
        log_has(&access, "\"GET /first HTTP/1.1\" 200 2"),
        "the added access log has no line"
    );

    let rotated = dir.join("access.log.1");
    std::fs::rename(&access, &rotated).expect("rotate");
    assert!(corelb(&["-s", "reopen"], &conf).status.success());
    assert!(log_has(&log, "reopened the error log"));
    assert_eq!(common::get(port, "/second"), "ok");
    assert!(
        log_has(&access, "\"GET /second HTTP/1.1\" 200 2"),
        "no line in the reopened file"
    );
    let old = std::fs::read_to_string(&rotated).expect("rotated file");
    assert!(old.contains("GET /first") && !old.contains("/second"), "{old}");
    assert!(!old.contains("/before"), "the first config logged nothing: {old}");

    assert!(corelb(&["-s", "quit"], &conf).status.success());
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(15)).and_then(|s| s.code()),
        Some(0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload from `error_log FILE` to `error_log stderr` sends later messages back to the stderr the process started
/// with.
#[test]
fn a_reload_can_move_the_error_log_back_to_stderr() {
    use std::io::Read;
    let dir = common::temp_dir("reload", "stderr-back");
    let (conf, pid_file, log) = (dir.join("corelb.conf"), dir.join("corelb.pid"), dir.join("error.log"));
    let port = free_port();
    let write = |error_log: &str| {
        let text = format!(
            "worker_processes 1;\npid {};\nerror_log {error_log} notice;\nevents {{}}\n\
             http {{ server {{ listen 127.0.0.1:{port}; return 200 ok; }} }}\n",
            pid_file.display()
        );
        std::fs::write(&conf, text).expect("write config");
    };
    write(&log.display().to_string());
    let mut child = spawn(&conf, Stdio::piped());
    assert!(wait_listening(port, &mut child), "never listened on {port}");
    wait_pid_file(&pid_file, &mut child);
    write("stderr");
    assert!(corelb(&["-s", "reload"], &conf).status.success());
    assert!(
        log_has(&log, "signal 1 (SIGHUP) received"),
        "the reload starts in the file"
    );
    assert_eq!(common::get(port, "/"), "ok");
    assert!(corelb(&["-s", "quit"], &conf).status.success());
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(15)).and_then(|s| s.code()),
        Some(0)
    );
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(err.contains("[notice] SIGQUIT: graceful shutdown"), "stderr: {err}");
    let in_file = std::fs::read_to_string(&log).expect("error log");
    assert!(!in_file.contains("graceful shutdown"), "{in_file}");
    let _ = std::fs::remove_dir_all(&dir);
}
