//! Access logs end to end: a known request sequence (a retried request, a 502 from a dead upstream, then its "no
//! live upstreams" 502, fixed answers, `access_log off`, a location's own log with `escape=json` and `if=`)
//! through a running proxy on both runtimes, and the exact lines written, with times checked by shape. Also the
//! flush paths: the `flush=` timer, an explicit flush (a fast stop) and a graceful stop.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use regex::Regex;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{dead_addr, free_addr, glommio_usable, lines_when, Client, Proxy};

fn log_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-access-log-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("log dir");
    d
}

fn config(text: &str, dir: &Path) -> corelb_engine::config::model::Config {
    corelb_engine::config::parse_str(text, &dir.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts `line` matches `pattern` (a regex of the whole line).
fn assert_shape(line: &str, pattern: &str) {
    let re = Regex::new(&format!("^{pattern}$")).expect("pattern");
    assert!(re.is_match(line), "line:\n  {line}\ndoes not match:\n  {pattern}");
}

const T: &str = r"\d\.\d{3}";
const TIME_LOCAL: &str = r"\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}";

fn sequence<R: Runtime>() {
    let dir = log_dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    let a = Backend::start("a", Mode::Ok);
    let (d1, d2, d3) = (dead_addr(), dead_addr(), dead_addr());
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format up '$remote_addr "$request" $status $body_bytes_sent ua="$http_user_agent" user=$remote_user '
                'addr=$upstream_addr st=$upstream_status rt=$upstream_response_time '
                'ct=$upstream_connect_time ht=$upstream_header_time '
                'rtime=$request_time n=$connection_requests host=$host sn=$server_name';
  log_format js escape=json '{{"ua":"$http_user_agent","uri":"$request_uri","st":$status,"ref":"$http_referer"}}'
                            ' $msec $time_iso8601 $pid $connection $bytes_sent $request_length $server_protocol'
                            ' $request_method $uri $args $server_port $remote_port';
  upstream u {{ server {d1}; server {a}; }}
  upstream dead {{ server {d2}; server {d3}; }}
  access_log {dir}/combined.log;
  access_log {dir}/up.log up;
  server {{
    listen {front};
    server_name test.local;
    location / {{ proxy_pass http://u; }}
    location /dead {{ proxy_pass http://dead; }}
    location /fixed {{ return 200 "hi"; }}
    location /quiet {{ access_log off; return 200 "q"; }}
    location /json {{ access_log {dir}/json.log js if=$arg_log; return 200 "j"; }}
  }}
}}
"#,
        a = a.addr,
        dir = dir.display()
    );
    let proxy = Proxy::start::<R>(config(&text, &dir), 1);
    let mut c = Client::connect(front);
    let mut get = |target: &str, extra: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: Test.Local\r\n{extra}\r\n").as_bytes());
        c.read_response().expect("response").status
    };
    let ua = "User-Agent: agent \"q\" \\ \u{e9}\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n";
    assert_eq!(get("/r1", ua), 200, "retried on a");
    assert_eq!(get("/r2?x=1", "Referer: http://ref/\r\n"), 200);
    assert_eq!(get("/dead/1", ""), 502);
    assert_eq!(get("/dead/2", ""), 502, "no live upstreams");
    assert_eq!(get("/fixed", ""), 200);
    assert_eq!(get("/quiet", ""), 200);
    assert_eq!(get("/json?log=1", "User-Agent: a\"b\r\n"), 200);
    assert_eq!(get("/json?log=0", ""), 200);
    assert_eq!(get("/json", ""), 200);
    // The default flush (1 s) writes them without being asked.
    let combined = lines_when(&dir.join("combined.log"), 5);
    let up = lines_when(&dir.join("up.log"), 5);
    let json = lines_when(&dir.join("json.log"), 1);
    let page_502 = corelb_engine::snapshot::route::FixedAnswer::error(502, Default::default()).body_len();
    let ua_escaped = r#"agent \\x22q\\x22 \\x5C \\xC3\\xA9"#;
    let expect_combined = [
        format!(r#"127\.0\.0\.1 - alice \[{TIME_LOCAL}\] "GET /r1 HTTP/1\.1" 200 1 "-" "{ua_escaped}""#),
        format!(r#"127\.0\.0\.1 - - \[{TIME_LOCAL}\] "GET /r2\?x=1 HTTP/1\.1" 200 1 "http://ref/" "-""#),
        format!(r#"127\.0\.0\.1 - - \[{TIME_LOCAL}\] "GET /dead/1 HTTP/1\.1" 502 {page_502} "-" "-""#),
        format!(r#"127\.0\.0\.1 - - \[{TIME_LOCAL}\] "GET /dead/2 HTTP/1\.1" 502 {page_502} "-" "-""#),
        format!(r#"127\.0\.0\.1 - - \[{TIME_LOCAL}\] "GET /fixed HTTP/1\.1" 200 2 "-" "-""#),
    ];
    assert_eq!(combined.len(), expect_combined.len(), "{combined:#?}");
    for (line, shape) in combined.iter().zip(&expect_combined) {
        assert_shape(line, shape);
    }
    let (d1, d2, d3, a) = (esc(d1), esc(d2), esc(d3), esc(a.addr));
    let tail = |n: u32| format!(r"rtime={T} n={n} host=test\.local sn=test\.local");
    let expect_up = [
        format!(
            r#"127\.0\.0\.1 "GET /r1 HTTP/1\.1" 200 1 ua="{ua_escaped}" user=alice addr={d1}, {a} st=502, 200 rt={T}, {T} ct=-, {T} ht=-, {T} {}"#,
            tail(1)
        ),
        format!(
            r#"127\.0\.0\.1 "GET /r2\?x=1 HTTP/1\.1" 200 1 ua="-" user=- addr={a} st=200 rt={T} ct={T} ht={T} {}"#,
            tail(2)
        ),
        format!(
            r#"127\.0\.0\.1 "GET /dead/1 HTTP/1\.1" 502 {page_502} ua="-" user=- addr={d2}, {d3} st=502, 502 rt={T}, {T} ct=-, - ht=-, - {}"#,
            tail(3)
        ),
        format!(
            r#"127\.0\.0\.1 "GET /dead/2 HTTP/1\.1" 502 {page_502} ua="-" user=- addr=dead st=502 rt={T} ct=- ht=- {}"#,
            tail(4)
        ),
        format!(
            r#"127\.0\.0\.1 "GET /fixed HTTP/1\.1" 200 2 ua="-" user=- addr=- st=- rt=- ct=- ht=- {}"#,
            tail(5)
        ),
    ];
    assert_eq!(up.len(), expect_up.len(), "{up:#?}");
    for (line, shape) in up.iter().zip(&expect_up) {
        assert_shape(line, shape);
    }
    assert_eq!(json.len(), 1, "{json:?}");
    let (object, rest) = json[0].split_once(' ').expect("fields after the object");
    assert_eq!(object, r#"{"ua":"a\"b","uri":"/json?log=1","st":200,"ref":""}"#);
    let shape = format!(
        r"\d{{10}}\.\d{{3}} \d{{4}}-\d{{2}}-\d{{2}}T\d{{2}}:\d{{2}}:\d{{2}}[+-]\d{{2}}:\d{{2}} {pid} \d+ (\d+) {req_len} HTTP/1\.1 GET /json log=1 {port} \d+",
        pid = std::process::id(),
        req_len = "GET /json?log=1 HTTP/1.1\r\nHost: Test.Local\r\nUser-Agent: a\"b\r\n\r\n".len(),
        port = front.port(),
    );
    assert_shape(rest, &shape);
    let bytes_sent: usize = Regex::new(&shape)
        .ok()
        .and_then(|r| r.captures(rest))
        .and_then(|c| c[1].parse().ok())
        .unwrap_or(0);
    assert!(bytes_sent > 100, "head and body: {rest}");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

fn esc(a: SocketAddr) -> String {
    regex::escape(&a.to_string())
}

#[test]
fn tokio_writes_nginx_lines_for_a_known_sequence() {
    sequence::<Tokio>();
}

#[test]
fn glommio_writes_nginx_lines_for_a_known_sequence() {
    if glommio_usable() {
        sequence::<Glommio>();
    }
}

/// With a long `flush=`, lines wait in the shard until a flush is asked (a fast stop) or the shard stops.
fn flushes_on_request_and_on_stop<R: Runtime>() {
    let dir = log_dir(&format!("stop-{}", std::any::type_name::<R>().len()));
    let front = free_addr();
    let text = format!(
        "events {{}}\nhttp {{ access_log {dir}/held.log combined buffer=1m flush=1h;\n\
         server {{ listen {front}; location / {{ return 200 ok; }} }} }}\n",
        dir = dir.display()
    );
    let proxy = Proxy::start::<R>(config(&text, &dir), 1);
    let path = dir.join("held.log");
    let mut c = Client::connect(front);
    c.send(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().expect("response").status, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read(&path).unwrap_or_default(),
        b"",
        "held in the shard's buffer"
    );
    assert!(proxy.shared.flush_access_logs(Duration::from_secs(5), true));
    let lines = lines_when(&path, 1);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("\"GET /one HTTP/1.1\" 200 2 "), "{lines:?}");
    c.send(b"GET /two HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_response().expect("response").status, 200);
    proxy.shared.drain();
    let lines = lines_when(&path, 2);
    assert_eq!(lines.len(), 2, "the graceful stop writes the rest: {lines:?}");
    assert!(lines[1].contains("\"GET /two HTTP/1.1\" 200 2 "), "{lines:?}");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_flushes_on_request_and_on_stop() {
    flushes_on_request_and_on_stop::<Tokio>();
}

#[test]
fn glommio_flushes_on_request_and_on_stop() {
    if glommio_usable() {
        flushes_on_request_and_on_stop::<Glommio>();
    }
}
