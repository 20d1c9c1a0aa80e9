//! The access-log line of a request refused before routing, end to end on both runtimes: nginx logs it in the
//! default server's log with `$request` as far as read and what its head set before it failed (the lines below
//! are the ones nginx 1.22 wrote for the same heads and format, checked on loopback).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;
use support::{free_addr, glommio_usable, Proxy};

fn log_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-log-refused-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("log dir");
    d
}

/// Sends `head` on its own connection and returns the status line of the answer.
fn status_line(front: std::net::SocketAddr, head: &[u8]) -> String {
    let mut c = TcpStream::connect(front).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(head).expect("send");
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or_default().to_string()
}

fn refused<R: Runtime>() {
    let dir = log_dir(&std::any::type_name::<R>().len().to_string());
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format t '$remote_addr "$request" $status m=$request_method u=$uri ru=$request_uri a=$args p=$server_protocol h=$http_host sn=$server_name';
  server {{
    listen {front};
    server_name localhost;
    access_log {dir}/a.log t;
    location / {{ access_log {dir}/loc.log t; return 200 OK; }}
  }}
  server {{ listen {front}; server_name other; access_log {dir}/other.log t; }}
}}
"#,
        dir = dir.display()
    );
    let config = corelb_engine::config::parse_str(&text, &dir.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let heads: [&[u8]; 6] = [
        b"GET /../bad?x=1 HTTP/1.0\r\nHost: other\r\n\r\n",
        b"FOO\x16bar baz\r\n\r\n",
        b"GET /ok HTTP/1.0\r\nBad Header\r\n\r\n",
        b"GET / HTTP/1.0\r\nHost: a/b\r\n\r\n",
        b"GET / HTTP/2.5\r\n\r\n",
        b"\r\nGET /x%zz HTTP/1.0\r\n\r\n",
    ];
    let statuses: Vec<String> = heads.iter().map(|h| status_line(front, h)).collect();
    assert_eq!(statuses[0], "HTTP/1.1 400 Bad Request");
    assert_eq!(statuses[4], "HTTP/1.1 505 HTTP Version Not Supported");
    assert!(proxy.shared.flush_access_logs(Duration::from_secs(5), true));
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap_or_default();
    assert_eq!(
        log,
        "127.0.0.1 \"GET /../bad?x=1 HTTP/1.0\" 400 m=GET u= ru=- a=- p=HTTP/1.0 h=- sn=localhost\n\
         127.0.0.1 \"FOO\\x16bar baz\" 400 m=- u=- ru=- a=- p=- h=- sn=localhost\n\
         127.0.0.1 \"GET /ok HTTP/1.0\" 400 m=GET u=/ok ru=/ok a=- p=HTTP/1.0 h=- sn=localhost\n\
         127.0.0.1 \"GET / HTTP/1.0\" 400 m=GET u=/ ru=/ a=- p=HTTP/1.0 h=a/b sn=localhost\n\
         127.0.0.1 \"GET / HTTP/2.5\" 505 m=- u=- ru=- a=- p= h=- sn=localhost\n\
         127.0.0.1 \"GET /x%zz HTTP/1.0\" 400 m=GET u= ru=- a=- p=HTTP/1.0 h=- sn=localhost\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("loc.log")).unwrap_or_default(),
        "",
        "not a location's"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("other.log")).unwrap_or_default(),
        "",
        "the default server's"
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_logs_refused_requests_in_the_default_server() {
    refused::<Tokio>();
}

#[test]
fn glommio_logs_refused_requests_in_the_default_server() {
    if glommio_usable() {
        refused::<Glommio>();
    }
}
