//! Access log paths with variables end to end, on both runtimes: each line goes to the file its request names
//! (a missing variable is empty, a relative path is under the prefix), nothing is written while the location's
//! `root` is missing, and `open_log_file_cache` keeps a file used `min_uses` times open across a rename of its
//! directory, as nginx's `access_log.t` checks. The line is written before the connection closes.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::path::{Path, PathBuf};
use support::{free_addr, glommio_usable, Client, Proxy};

fn log_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-log-paths-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("dir")).expect("log dir");
    d
}

/// The config `text`, read from a file in `dir` with `dir` as the prefix (`-p`).
fn config(text: &str, dir: &Path) -> corelb_engine::config::model::Config {
    let file = dir.join("corelb.conf");
    std::fs::write(&file, text).expect("config file");
    let options = corelb_engine::config::LoadOptions {
        prefix: dir.to_path_buf(),
        params: None,
    };
    corelb_engine::config::load_with(&file, &options)
        .unwrap_or_else(|e| panic!("{e}"))
        .config
}

/// One request on its own connection (`Connection: close`); returns once the connection closed.
fn get(front: std::net::SocketAddr, target: &str) {
    let mut c = Client::connect(front);
    c.send(format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().expect("response").status, 200, "{target}");
    assert!(c.closed(), "{target}: closed after the answer");
}

fn read(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

fn paths<R: Runtime>() {
    let tag = std::any::type_name::<R>()
        .rsplit("::")
        .next()
        .unwrap_or("rt")
        .to_string();
    let dir = log_dir(&tag);
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format t "$uri:$status";
  root {dir};
  server {{
    listen {front};
    location /var {{ access_log {dir}/var_${{arg_name}} t; return 200 ok; }}
    location /rel {{ access_log rel_$arg_name.log t; return 200 ok; }}
    location /noroot {{ root {dir}/missing; access_log {dir}/noroot_$arg_name t; return 200 ok; }}
    location /cache {{
      open_log_file_cache max=3 inactive=20s valid=1m min_uses=2;
      access_log {dir}/dir/cache_$arg_name t;
      return 200 ok;
    }}
  }}
}}
"#,
        dir = dir.display()
    );
    let proxy = Proxy::start::<R>(config(&text, &dir), 2);
    // Each check reads the file right after the connection closed: the line is written by then.
    get(front, "/var/a?name=one");
    assert_eq!(read(&dir.join("var_one")), "/var/a:200\n");
    get(front, "/var/b?name=one");
    assert_eq!(read(&dir.join("var_one")), "/var/a:200\n/var/b:200\n");
    get(front, "/var/c");
    assert_eq!(read(&dir.join("var_")), "/var/c:200\n", "a missing value is empty");
    get(front, "/rel?name=x");
    assert_eq!(read(&dir.join("rel_x.log")), "/rel:200\n", "relative to the prefix");
    get(front, "/noroot?name=x");
    assert!(!dir.join("noroot_x").exists(), "nothing while the root is missing");
    for name in ["lru", "lru", "once", "first", "first", "second", "second"] {
        get(front, &format!("/cache?name={name}"));
    }
    let moved = dir.join("dir_moved");
    std::fs::rename(dir.join("dir"), &moved).expect("rename");
    for name in ["lru", "once", "first", "second"] {
        get(front, &format!("/cache?name={name}"));
    }
    std::fs::rename(&moved, dir.join("dir")).expect("rename back");
    let cache = |n: &str| read(&dir.join("dir").join(format!("cache_{n}")));
    assert_eq!(
        cache("lru"),
        "/cache:200\n/cache:200\n",
        "the least recently used was closed"
    );
    assert_eq!(
        cache("once"),
        "/cache:200\n",
        "used fewer than min_uses times: not kept"
    );
    assert_eq!(cache("first"), "/cache:200\n".repeat(3), "kept open");
    assert_eq!(cache("second"), "/cache:200\n".repeat(3), "kept open");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_writes_each_line_to_the_file_its_request_names() {
    paths::<Tokio>();
}

#[test]
fn glommio_writes_each_line_to_the_file_its_request_names() {
    if glommio_usable() {
        paths::<Glommio>();
    }
}
