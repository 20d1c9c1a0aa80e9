//! Stream access logs and stream `return` end to end, on both runtimes: a known session sequence (a session
//! retried from a dead peer to a TCP echo, a session whose two peers are dead, then its "no live upstreams" one, a
//! `return` with variables, a server with `access_log off`) and the exact lines written (nginx's
//! `ngx_stream_log_module` variables), with times checked by shape.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use regex::Regex;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;
use support::backend::tcp_echo;
use support::{dead_addr, free_addr, glommio_usable, lines_when, Proxy};

fn log_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-stream-log-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("log dir");
    d
}

fn assert_shape(line: &str, pattern: &str) {
    let re = Regex::new(&format!("^{pattern}$")).expect("pattern");
    assert!(re.is_match(line), "line:\n  {line}\ndoes not match:\n  {pattern}");
}

/// One session: sends `data`, half-closes, reads until the proxy closes. Returns what came back and the
/// client's port.
fn session(addr: SocketAddr, data: &[u8]) -> (Vec<u8>, u16) {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let port = c.local_addr().expect("local").port();
    if !data.is_empty() {
        c.write_all(data).expect("send");
    }
    let _ = c.shutdown(Shutdown::Write);
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    (got, port)
}

const T: &str = r"\d+\.\d{3}";

fn esc(a: SocketAddr) -> String {
    regex::escape(&a.to_string())
}

fn sequence<R: Runtime>() {
    let dir = log_dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    let (echo, _) = tcp_echo();
    let (d1, d2, d3) = (dead_addr(), dead_addr(), dead_addr());
    let (f1, f2, f3, f4) = (free_addr(), free_addr(), free_addr(), free_addr());
    let text = format!(
        r#"events {{}}
stream {{
  proxy_half_close on;
  log_format addr '$remote_addr:$remote_port $server_addr:$server_port $protocol $status '
                  '$bytes_received:$bytes_sent up=$upstream_addr ub=$upstream_bytes_sent/$upstream_bytes_received '
                  'ct=$upstream_connect_time fb=$upstream_first_byte_time us=$upstream_session_time '
                  'st=$session_time c=$connection';
  log_format time escape=json '{{"t":"$time_local","i":"$time_iso8601","m":$msec,"p":$pid,"h":"$hostname",'
                              '"b":"$binary_remote_addr"}}';
  upstream retried {{ server {d1}; server {echo}; }}
  upstream dead {{ server {d2}; server {d3}; }}
  access_log {dir}/all.log addr;
  server {{ listen {f1}; proxy_pass retried; }}
  server {{ listen {f2}; proxy_pass dead; }}
  server {{
    listen {f3};
    return "hello $remote_addr:$server_port $status\n";
    access_log {dir}/ret.log addr;
    access_log {dir}/json.log time if=$remote_port;
    access_log {dir}/never.log addr if=$upstream_addr;
  }}
  server {{ listen {f4}; return quiet; access_log off; }}
}}
"#,
        dir = dir.display()
    );
    let config = corelb_engine::config::parse_str(&text, &dir.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let (got, p1) = session(f1, b"SEE-THIS");
    assert_eq!(got, b"SEE-THIS", "echoed after the retry");
    let (got, p2) = session(f2, b"");
    assert_eq!(got, b"", "both peers dead: closed");
    let (got, p3) = session(f2, b"");
    assert_eq!(got, b"", "no live upstreams: closed");
    let (got, p4) = session(f3, b"");
    assert_eq!(got, format!("hello 127.0.0.1:{} 000\n", f3.port()).as_bytes());
    let (got, _) = session(f4, b"");
    assert_eq!(got, b"quiet");
    let all = lines_when(&dir.join("all.log"), 3);
    let ret = lines_when(&dir.join("ret.log"), 1);
    let json = lines_when(&dir.join("json.log"), 1);
    let (d1, d2, d3, echo) = (esc(d1), esc(d2), esc(d3), esc(echo));
    let front = |port: u16, f: SocketAddr| format!(r"127\.0\.0\.1:{port} 127\.0\.0\.1:{} TCP", f.port());
    let expect_all = [
        format!(
            r"{} 200 8:8 up={d1}, {echo} ub=0, 8/0, 8 ct=-, {T} fb=-, {T} us={T}, {T} st={T} c=1",
            front(p1, f1)
        ),
        format!(
            r"{} 502 0:0 up={d2}, {d3} ub=0, 0/0, 0 ct=-, - fb=-, - us={T}, {T} st={T} c=2",
            front(p2, f2)
        ),
        format!(r"{} 502 0:0 up=dead ub=0/0 ct=- fb=- us={T} st={T} c=3", front(p3, f2)),
    ];
    assert_eq!(all.len(), expect_all.len(), "{all:#?}");
    for (line, shape) in all.iter().zip(&expect_all) {
        assert_shape(line, shape);
    }
    let hello = format!("hello 127.0.0.1:{} 000\n", f3.port()).len();
    assert_eq!(ret.len(), 1, "{ret:?}");
    assert_shape(
        &ret[0],
        &format!(r"{} 200 0:{hello} up=- ub=-/- ct=- fb=- us=- st={T} c=4", front(p4, f3)),
    );
    assert_eq!(json.len(), 1, "{json:?}");
    assert_shape(
        &json[0],
        &format!(
            r#"\{{"t":"\d{{2}}/[A-Z][a-z]{{2}}/\d{{4}}:\d{{2}}:\d{{2}}:\d{{2}} [+-]\d{{4}}","i":"\d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}[+-]\d{{2}}:\d{{2}}","m":\d{{10}}\.\d{{3}},"p":{pid},"h":"{host}","b":"\x7f\\u0000\\u0000\\u0001"\}}"#,
            pid = std::process::id(),
            host = regex::escape(&hostname()),
        ),
    );
    drop(proxy);
    assert_eq!(
        std::fs::read(dir.join("never.log")).expect("opened at load"),
        b"",
        "if= with an empty value skips the line"
    );
    let after = std::fs::read_to_string(dir.join("all.log")).expect("all.log");
    assert_eq!(after.lines().count(), 3, "access_log off logs nothing: {after}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The host's name as nginx's `$hostname` has it (lower case).
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    name.trim().to_ascii_lowercase()
}

#[test]
fn tokio_writes_nginx_stream_lines_for_a_known_sequence() {
    sequence::<Tokio>();
}

#[test]
fn glommio_writes_nginx_stream_lines_for_a_known_sequence() {
    if glommio_usable() {
        sequence::<Glommio>();
    }
}
