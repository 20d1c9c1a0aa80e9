//! Helpers for the API tests: a config with an `api` location, the proxy on either runtime, API requests with
//! JSON answers, and the picks of plain requests.

use super::{get, Client, Proxy, Response};
use corelb_engine::config::{model::Config, parse_str};
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

pub fn config(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/api.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// An http block: upstream `b` (with a zone) of `servers`, a static upstream `s`, and the API location.
pub fn http_text(listen: SocketAddr, servers: &str, api: &str) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; {servers} }}\n upstream s {{ server 127.0.0.1:9; }}\n \
         server {{ listen {listen}; location / {{ proxy_pass http://b; }} location /s/ {{ proxy_pass http://s; }} \
         location /api/ {{ {api} }} }}\n}}\n"
    )
}

/// Runtime 0 is tokio, 1 glommio (when io_uring is usable here; tokio again otherwise).
pub fn start(rt: usize, text: &str) -> Proxy {
    if rt == 1 && super::glommio_usable() {
        Proxy::start::<Glommio>(config(text), 1)
    } else {
        Proxy::start::<Tokio>(config(text), 1)
    }
}

/// One API request; the status and the JSON body (`Null` for an empty one).
pub fn api(listen: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let r = raw(listen, method, path, body);
    let v = if r.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", r.text()))
    };
    (r.status, v)
}

pub fn raw(listen: SocketAddr, method: &str, path: &str, body: &str) -> Response {
    let mut c = Client::connect(listen);
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.send(req.as_bytes());
    c.read_response()
        .unwrap_or_else(|| panic!("{method} {path}: no answer"))
}

/// The bodies of `n` requests through the proxy, one connection each.
pub fn picks(listen: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| get(listen, "/").map_or("none".into(), |r| r.text()))
        .collect()
}

pub fn peers(listen: SocketAddr) -> Vec<Value> {
    let (status, v) = api(listen, "GET", "/api/9/http/upstreams/b", "");
    assert_eq!(status, 200, "{v}");
    v["peers"].as_array().cloned().unwrap_or_default()
}

pub fn peer_of(listen: SocketAddr, addr: SocketAddr) -> Value {
    let all = peers(listen);
    all.into_iter()
        .find(|p| p["server"] == addr.to_string())
        .unwrap_or_else(|| panic!("no peer {addr}"))
}

pub fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

pub fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(10));
    }
}
