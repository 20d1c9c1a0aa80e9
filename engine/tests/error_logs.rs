//! `error_log` in http servers and locations, stream and stream servers end to end, on both runtimes: a request's messages go to the lines
//! of its location (or server) whose level takes them, each line written once per message (a file named twice
//! gets it twice, as nginx's list of logs writes it), and nowhere else.

mod support;

use corelb_engine::config::{load_with, LoadOptions};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use support::{dead_addr, free_addr, glommio_usable, Proxy};

fn prefix(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-errlogs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("html")).expect("directories");
    d
}

fn config(dir: &Path, front: SocketAddr, dead: SocketAddr) -> String {
    let (stream_front, stream_other) = (free_addr(), free_addr());
    format!(
        r#"events {{}}
stream {{
  error_log {dir}/stream.log;
  server {{ listen {stream_front}; error_log {dir}/tcp.log; error_log {dir}/tcp_crit.log crit; proxy_pass {dead}; }}
  server {{ listen {stream_other}; proxy_pass {dead}; }}
}}
http {{
  root html;
  error_log {dir}/http.log;
  server {{
    listen {front};
    error_log server.log info;
    location /a/ {{
      error_log {dir}/a_warn.log warn;
      error_log {dir}/a_error.log;
      error_log {dir}/a_crit.log crit;
    }}
    location /dup/ {{ error_log {dir}/dup.log; error_log {dir}/dup.log; }}
    location /quiet/ {{ log_not_found off; error_log {dir}/quiet.log; }}
    location /up/ {{ error_log {dir}/up.log; proxy_pass http://{dead}; }}
  }}
}}
"#,
        dir = dir.display()
    )
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn missing(dir: &Path, path: &str) -> String {
    format!(
        "corelb: [error] open() \"{}/html{path}\" failed (2: No such file or directory)\n",
        dir.display()
    )
}

fn logs<R: Runtime>(tag: &str) {
    let dir = prefix(tag);
    let front = free_addr();
    std::fs::write(dir.join("corelb.conf"), config(&dir, front, dead_addr())).expect("config");
    let options = LoadOptions {
        prefix: dir.clone(),
        params: None,
    };
    let loaded = load_with(&dir.join("corelb.conf"), &options).unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(loaded.config, 1);
    // every file a server or location uses is opened at load, before a request
    for f in [
        "server.log",
        "a_warn.log",
        "a_error.log",
        "a_crit.log",
        "dup.log",
        "up.log",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }

    assert_eq!(support::get(front, "/a/nothing").map(|r| r.status), Some(404));
    assert_eq!(read(&dir, "a_warn.log"), missing(&dir, "/a/nothing"));
    assert_eq!(read(&dir, "a_error.log"), missing(&dir, "/a/nothing"));
    assert_eq!(read(&dir, "a_crit.log"), "", "an error is below crit");

    // no location: the server's lines (relative to the prefix), not the http block's
    assert_eq!(support::get(front, "/nothing").map(|r| r.status), Some(404));
    assert_eq!(read(&dir, "server.log"), missing(&dir, "/nothing"));

    // a file named twice is written twice
    assert_eq!(support::get(front, "/dup/x").map(|r| r.status), Some(404));
    assert_eq!(read(&dir, "dup.log"), missing(&dir, "/dup/x").repeat(2));
    assert_eq!(support::get(front, "/quiet/x").map(|r| r.status), Some(404));
    assert_eq!(read(&dir, "quiet.log"), "", "log_not_found off");

    // the proxy's messages: the upstream that refused
    assert_eq!(support::get(front, "/up/").map(|r| r.status), Some(502));
    let up = read(&dir, "up.log");
    assert!(up.starts_with("corelb: [error] upstream "), "{up}");
    assert_eq!(up.lines().count(), 1, "{up}");

    assert!(
        !dir.join("http.log").exists(),
        "inherited by no server: each has its own"
    );
    assert!(
        !read(&dir, "server.log").contains("/a/"),
        "a location's lines replace the server's"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn error_logs_tokio() {
    logs::<Tokio>("tokio");
}

#[test]
fn error_logs_glommio() {
    if !glommio_usable() {
        return;
    }
    logs::<Glommio>("glommio");
}
