//! The nginx Plus API end to end: the upstream status schema and counts after known traffic, server changes
//! (weight, down, drain, add, remove) that the next picks follow on both runtimes, zone state that survives them,
//! ids that survive changes and reloads, refusals with nginx Plus's error objects, and stream upstreams.

mod support;

use corelb_engine::config::{model::Config, parse_str};
use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};
use support::backend::{tcp_echo, Backend, Mode};
use support::{dead_addr, free_addr, get, Client, Proxy};

fn config(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/api.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// An http block: upstream `b` (with a zone) of `servers`, a static upstream `s`, and the API location.
fn http_text(listen: SocketAddr, servers: &str, api: &str) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; {servers} }}\n upstream s {{ server 127.0.0.1:9; }}\n \
         server {{ listen {listen}; location / {{ proxy_pass http://b; }} location /s/ {{ proxy_pass http://s; }} \
         location /api/ {{ {api} }} }}\n}}\n"
    )
}

/// Runtime 0 is tokio, 1 glommio (when io_uring is usable here; tokio again otherwise).
fn start(rt: usize, text: &str) -> Proxy {
    if rt == 1 && support::glommio_usable() {
        Proxy::start::<Glommio>(config(text), 1)
    } else {
        Proxy::start::<Tokio>(config(text), 1)
    }
}

/// One API request; the status and the JSON body (`Null` for an empty one).
fn api(listen: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let r = raw(listen, method, path, body);
    let v = if r.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", r.text()))
    };
    (r.status, v)
}

fn raw(listen: SocketAddr, method: &str, path: &str, body: &str) -> support::Response {
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
fn picks(listen: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| get(listen, "/").map_or("none".into(), |r| r.text()))
        .collect()
}

fn peers(listen: SocketAddr) -> Vec<Value> {
    let (status, v) = api(listen, "GET", "/api/9/http/upstreams/b", "");
    assert_eq!(status, 200, "{v}");
    v["peers"].as_array().cloned().unwrap_or_default()
}

fn peer_of(listen: SocketAddr, addr: SocketAddr) -> Value {
    let all = peers(listen);
    all.into_iter()
        .find(|p| p["server"] == addr.to_string())
        .unwrap_or_else(|| panic!("no peer {addr}"))
}

fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn reads_follow_the_nginx_plus_schema_and_count_known_traffic() {
    let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
    let listen = free_addr();
    let servers = format!("server {} max_conns=10; server {} weight=2;", a.addr, b.addr);
    let _p = start(0, &http_text(listen, &servers, "api;"));
    assert_eq!(picks(listen, 6), ["b", "a", "b", "b", "a", "b"]);

    assert_eq!(api(listen, "GET", "/api/", ""), (200, json!([9])));
    assert_eq!(
        api(listen, "GET", "/api/9", ""),
        (200, json!(["nginx", "http", "stream"]))
    );
    assert_eq!(api(listen, "GET", "/api/9/http/", ""), (200, json!(["upstreams"])));
    let (_, nginx) = api(listen, "GET", "/api/9/nginx", "");
    for f in [
        "version",
        "build",
        "generation",
        "load_timestamp",
        "timestamp",
        "pid",
        "ppid",
    ] {
        assert!(nginx.get(f).is_some(), "nginx has {f}: {nginx}");
    }
    assert_eq!(nginx["generation"], 1);
    assert_eq!(nginx["pid"], std::process::id());
    let (_, some) = api(listen, "GET", "/api/9/nginx?fields=pid,generation", "");
    assert_eq!(some, json!({"generation": 1, "pid": std::process::id()}));

    let (status, all) = api(listen, "GET", "/api/9/http/upstreams", "");
    assert_eq!(status, 200);
    let names: Vec<&String> = all.as_object().map(|m| m.keys().collect()).unwrap_or_default();
    assert_eq!(names, ["b"], "an upstream without a zone is not in the API");
    let up = &all["b"];
    assert_eq!((&up["zone"], &up["zombies"]), (&json!("b"), &json!(0)));
    let p0 = &up["peers"][0];
    assert_eq!(p0["id"], 0);
    assert_eq!(p0["server"], a.addr.to_string());
    assert_eq!(p0["name"], a.addr.to_string());
    assert_eq!(
        (&p0["backup"], &p0["weight"], &p0["state"]),
        (&json!(false), &json!(1), &json!("up"))
    );
    assert_eq!(
        (&p0["active"], &p0["max_conns"], &p0["requests"]),
        (&json!(0), &json!(10), &json!(2))
    );
    assert_eq!(
        p0["responses"],
        json!({"1xx": 0, "2xx": 2, "3xx": 0, "4xx": 0, "5xx": 0, "total": 2})
    );
    assert_eq!((&p0["fails"], &p0["unavail"]), (&json!(0), &json!(0)));
    assert_eq!(p0["health_checks"], json!({"checks": 0, "fails": 0, "unhealthy": 0}));
    assert!(p0["selected"].as_str().is_some_and(|s| s.ends_with('Z')), "{p0}");
    let p1 = &up["peers"][1];
    assert_eq!(
        (&p1["id"], &p1["weight"], &p1["requests"]),
        (&json!(1), &json!(2), &json!(4))
    );
    assert!(p1.get("max_conns").is_none(), "no limit, no max_conns: {p1}");

    let (_, only) = api(listen, "GET", "/api/9/http/upstreams?fields=zone", "");
    assert_eq!(only, json!({"b": {"zone": "b"}}));
    let (_, names_only) = api(listen, "GET", "/api/9/http/upstreams?fields=", "");
    assert_eq!(names_only, json!({"b": {}}));
    let (_, conf) = api(listen, "GET", "/api/9/http/upstreams/b/servers/1", "");
    assert_eq!(
        conf,
        json!({"id": 1, "server": b.addr.to_string(), "weight": 2, "max_conns": 0, "max_fails": 1,
               "fail_timeout": "10s", "slow_start": "0s", "route": "", "backup": false, "down": false,
               "drain": false})
    );
    let (_, list) = api(listen, "GET", "/api/9/http/upstreams/b/servers/", "");
    assert_eq!(list.as_array().map(Vec::len), Some(2));

    // HEAD: the same head, no body (the client reads until the proxy closes)
    let mut c = TcpStream::connect(listen).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(b"HEAD /api/9/http/upstreams/b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("send");
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("read until close");
    let text = String::from_utf8_lossy(&all);
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: application/json"), "{head}");
    assert!(!head.contains("Content-Length: 0"), "{head}");
    assert_eq!(body, "");
}

#[test]
fn unknown_names_get_nginx_plus_errors() {
    let a = Backend::start("a", Mode::Ok);
    let listen = free_addr();
    let _p = start(0, &http_text(listen, &format!("server {};", a.addr), "api write=on;"));
    let cases = [
        ("GET", "/api/8/nginx", 404, "UnknownVersion"),
        ("GET", "/api/9/connections", 404, "PathNotFound"),
        ("GET", "/api/9/http/upstreams/nope", 404, "UpstreamNotFound"),
        ("GET", "/api/9/http/upstreams/s", 400, "UpstreamStatic"),
        ("GET", "/api/9/http/upstreams/s/servers", 400, "UpstreamStatic"),
        (
            "GET",
            "/api/9/http/upstreams/b/servers/7",
            404,
            "UpstreamServerNotFound",
        ),
        ("GET", "/api/9/http/upstreams/b/servers/x", 400, "UpstreamBadServerId"),
        ("GET", "/api/9/stream/upstreams/b", 404, "UpstreamNotFound"),
        ("PUT", "/api/9/http/upstreams/b/servers/0", 405, "MethodNotSupported"),
        ("POST", "/api/9/http/upstreams/b", 405, "MethodNotSupported"),
        (
            "DELETE",
            "/api/9/http/upstreams/b/servers/7",
            404,
            "UpstreamServerNotFound",
        ),
        (
            "DELETE",
            "/api/9/http/upstreams/nope/servers/0",
            404,
            "UpstreamNotFound",
        ),
        ("PATCH", "/api/9/http/upstreams/s/servers/0", 400, "UpstreamStatic"),
    ];
    for (method, path, status, code) in cases {
        let body = if method == "PATCH" { "{}" } else { "" };
        let (got, v) = api(listen, method, path, body);
        assert_eq!((got, error_code(&v)), (status, code), "{method} {path}: {v}");
        assert_eq!(v["error"]["status"], status);
        assert!(v["error"]["text"].as_str().is_some_and(|t| !t.is_empty()));
    }
    let r = raw(listen, "PUT", "/api/9/http/upstreams/b/servers/0", "");
    assert_eq!(r.header("allow").as_deref(), Some("GET, HEAD, PATCH, DELETE"));
}

#[test]
fn bad_bodies_are_refused_and_change_nothing() {
    let a = Backend::start("a", Mode::Ok);
    let listen = free_addr();
    let p = start(0, &http_text(listen, &format!("server {};", a.addr), "api write=on;"));
    let servers = "/api/9/http/upstreams/b/servers";
    let cases = [
        ("POST", servers, "{\"server\":", 415, "JsonError"),
        ("POST", servers, "[]", 415, "JsonError"),
        ("POST", servers, "{\"weight\":2}", 400, "UpstreamConfFormatError"),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:1\",\"weigth\":2}",
            400,
            "UpstreamConfFormatError",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:1\",\"weight\":0}",
            400,
            "UpstreamBadWeight",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:1\",\"weight\":\"2\"}",
            400,
            "UpstreamConfFormatError",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:1\",\"max_fails\":-1}",
            400,
            "UpstreamBadMaxFails",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:1\",\"fail_timeout\":\"x\"}",
            400,
            "UpstreamBadFailTimeout",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"backend.example:80\"}",
            400,
            "UpstreamConfNoResolver",
        ),
        (
            "POST",
            servers,
            "{\"server\":\"127.0.0.1:99999\"}",
            400,
            "UpstreamBadAddress",
        ),
        (
            "POST",
            servers,
            &format!("{{\"server\":\"{}\"}}", a.addr),
            409,
            "EntryExists",
        ),
        (
            "PATCH",
            &format!("{servers}/0"),
            "{\"backup\":true}",
            400,
            "UpstreamConfFormatError",
        ),
        (
            "PATCH",
            &format!("{servers}/0"),
            "{\"down\":\"yes\"}",
            400,
            "UpstreamConfFormatError",
        ),
        ("DELETE", &format!("{servers}/0"), "", 400, "UpstreamServerImmutable"),
        (
            "POST",
            "/api/9/http/upstreams/nope/servers",
            "{\"server\":\"127.0.0.1:1\"}",
            404,
            "UpstreamNotFound",
        ),
        (
            "POST",
            "/api/9/http/upstreams/s/servers",
            "{\"server\":\"127.0.0.1:1\"}",
            400,
            "UpstreamStatic",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (got, v) = api(listen, method, path, body);
        assert_eq!((got, error_code(&v)), (status, code), "{method} {path} {body}: {v}");
    }
    let c = p.shared.control_stats();
    assert_eq!((c.generation, c.api_changes), (1, 0), "nothing was applied");
    assert_eq!(picks(listen, 2), ["a", "a"]);
}

#[test]
fn writes_need_write_on() {
    let a = Backend::start("a", Mode::Ok);
    let listen = free_addr();
    let p = start(0, &http_text(listen, &format!("server {};", a.addr), "api;"));
    for (method, path, body) in [
        (
            "POST",
            "/api/9/http/upstreams/b/servers",
            "{\"server\":\"127.0.0.1:1\"}",
        ),
        ("PATCH", "/api/9/http/upstreams/b/servers/0", "{\"down\":true}"),
        ("DELETE", "/api/9/http/upstreams/b/servers/0", ""),
    ] {
        let r = raw(listen, method, path, body);
        let v: Value = serde_json::from_slice(&r.body).expect("json");
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(
            v["error"],
            json!({"status": 405, "text": "method disabled", "code": "MethodDisabled"})
        );
        assert!(r.header("allow").is_some_and(|a| a.starts_with("GET, HEAD")));
    }
    assert_eq!(p.shared.control_stats().generation, 1);
    assert_eq!(api(listen, "GET", "/api/9/http/upstreams/b/servers/0", "").0, 200);
}

#[test]
fn a_weight_change_is_followed_at_once_and_untouched_peers_keep_their_state() {
    for rt in 0..2 {
        let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
        let dead = dead_addr();
        let listen = free_addr();
        let servers = format!("server {}; server {}; server {dead} fail_timeout=60s;", a.addr, b.addr);
        let p = start(rt, &http_text(listen, &servers, "api write=on;"));
        // a, b, then the dead peer fails over to a; it is unavailable for 60 s.
        assert_eq!(picks(listen, 3), ["a", "b", "a"]);
        let before = peer_of(listen, dead);
        assert_eq!(
            (&before["state"], &before["fails"], &before["unavail"]),
            (&json!("unavail"), &json!(1), &json!(1))
        );
        let (status, v) = api(listen, "PATCH", "/api/9/http/upstreams/b/servers/0", "{\"weight\":3}");
        assert_eq!((status, &v["id"], &v["weight"]), (200, &json!(0), &json!(3)), "{v}");
        // SWRR over 3:1 from fresh weights, the dead peer still out: nginx's a a b a.
        assert_eq!(
            picks(listen, 8),
            ["a", "a", "b", "a", "a", "a", "b", "a"],
            "runtime {rt}"
        );
        let after = peer_of(listen, dead);
        assert_eq!(
            (&after["id"], &after["state"], &after["fails"]),
            (&json!(2), &json!("unavail"), &json!(1))
        );
        assert_eq!(
            peer_of(listen, b.addr)["requests"],
            3,
            "b's counters survived the change"
        );
        let c = p.shared.control_stats();
        assert_eq!((c.generation, c.api_changes), (2, 1));
    }
}

#[test]
fn down_add_and_remove_change_the_picks_and_ids_stay_stable() {
    for rt in 0..2 {
        let (a, b, c) = (
            Backend::start("a", Mode::Ok),
            Backend::start("b", Mode::Ok),
            Backend::start("c", Mode::Ok),
        );
        let listen = free_addr();
        let servers = format!("server {}; server {};", a.addr, b.addr);
        let _p = start(rt, &http_text(listen, &servers, "api write=on;"));
        let servers_path = "/api/9/http/upstreams/b/servers";

        let (status, v) = api(listen, "PATCH", &format!("{servers_path}/1"), "{\"down\":true}");
        assert_eq!((status, &v["down"]), (200, &json!(true)));
        assert_eq!(peer_of(listen, b.addr)["state"], "down");
        assert_eq!(picks(listen, 4), ["a", "a", "a", "a"], "runtime {rt}");
        api(listen, "PATCH", &format!("{servers_path}/1"), "{\"down\":false}");
        assert_eq!(picks(listen, 4), ["a", "b", "a", "b"]);

        let body = format!("{{\"server\":\"{}\",\"weight\":2}}", c.addr);
        let (status, added) = api(listen, "POST", servers_path, &body);
        assert_eq!(status, 201, "{added}");
        assert_eq!(
            (&added["id"], &added["server"], &added["weight"]),
            (&json!(2), &json!(c.addr.to_string()), &json!(2))
        );
        assert_eq!(picks(listen, 4), ["c", "a", "b", "c"]);

        let (status, left) = api(listen, "DELETE", &format!("{servers_path}/0"), "");
        assert_eq!(status, 200);
        let ids: Vec<&Value> = left
            .as_array()
            .map(|l| l.iter().map(|s| &s["id"]).collect())
            .unwrap_or_default();
        assert_eq!(ids, [&json!(1), &json!(2)]);
        assert_eq!(picks(listen, 3), ["c", "b", "c"]);
        assert_eq!(api(listen, "GET", &format!("{servers_path}/0"), "").0, 404);

        // the removed address comes back as a new server: a new id
        let (_, again) = api(listen, "POST", servers_path, &format!("{{\"server\":\"{}\"}}", a.addr));
        assert_eq!(again["id"], 3);
        // a new address for server 3 keeps its id
        let (status, moved) = api(
            listen,
            "PATCH",
            &format!("{servers_path}/3"),
            &format!("{{\"server\":\"{}\"}}", dead_addr()),
        );
        assert_eq!((status, &moved["id"]), (200, &json!(3)), "{moved}");
    }
}

#[test]
fn ids_and_zone_state_survive_a_reload_of_unchanged_peers() {
    let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
    let listen = free_addr();
    let text = http_text(
        listen,
        &format!("server {}; server {};", a.addr, b.addr),
        "api write=on;",
    );
    let p = start(0, &text);
    let (_, added) = api(
        listen,
        "POST",
        "/api/9/http/upstreams/b/servers",
        &format!("{{\"server\":\"{}\"}}", dead_addr()),
    );
    assert_eq!(added["id"], 2);
    picks(listen, 4);
    let requests_b = peer_of(listen, b.addr)["requests"].clone();
    // the file again: the API's server leaves, a and b keep ids and counters
    p.shared
        .apply(ChangeKind::Reload, |_| Ok(config(&text)))
        .expect("reload");
    let now: Vec<(Value, Value)> = peers(listen)
        .iter()
        .map(|p| (p["id"].clone(), p["server"].clone()))
        .collect();
    assert_eq!(
        now,
        [
            (json!(0), json!(a.addr.to_string())),
            (json!(1), json!(b.addr.to_string()))
        ]
    );
    assert_eq!(peer_of(listen, b.addr)["requests"], requests_b);
}

#[test]
fn a_drained_peer_takes_no_new_requests_while_its_request_in_flight_completes() {
    for rt in 0..2 {
        let slow = Backend::start("slow", Mode::Slow(Duration::from_millis(700)));
        let fast = Backend::start("fast", Mode::Ok);
        let listen = free_addr();
        let servers = format!("server {}; server {};", slow.addr, fast.addr);
        let _p = start(rt, &http_text(listen, &servers, "api write=on;"));
        let in_flight = thread::spawn(move || get(listen, "/").map(|r| (r.status, r.text())));
        wait_for(Duration::from_secs(3), "the slow request in flight", || {
            peer_of(listen, slow.addr)["active"] == 1
        });
        let (status, v) = api(listen, "PATCH", "/api/9/http/upstreams/b/servers/0", "{\"drain\":true}");
        assert_eq!((status, &v["drain"]), (200, &json!(true)), "{v}");
        let draining = peer_of(listen, slow.addr);
        assert_eq!(
            (&draining["state"], &draining["active"]),
            (&json!("draining"), &json!(1)),
            "runtime {rt}"
        );
        assert_eq!(picks(listen, 5), ["fast"; 5]);
        let done = in_flight.join().expect("the client thread");
        assert_eq!(done, Some((200, "slow".to_string())), "the in-flight request finished");
        let after = peer_of(listen, slow.addr);
        assert_eq!(
            (&after["state"], &after["active"], &after["requests"]),
            (&json!("draining"), &json!(0), &json!(1))
        );
        assert_eq!(slow.requests(), 1);
        api(
            listen,
            "PATCH",
            "/api/9/http/upstreams/b/servers/0",
            "{\"drain\":false}",
        );
        assert_eq!(picks(listen, 2), ["slow", "fast"]);
    }
}

/// A stream round trip of `payload` through the proxy.
fn echo(listen: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(listen).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(payload).expect("write");
    let mut back = vec![0u8; payload.len()];
    s.read_exact(&mut back).expect("echo");
    back
}

#[test]
fn stream_upstreams_are_read_and_changed_too() {
    for rt in 0..2 {
        let ((e1, _), (e2, _)) = (tcp_echo(), tcp_echo());
        let (listen, tcp) = (free_addr(), free_addr());
        let text = format!(
            "events {{}}\nhttp {{ server {{ listen {listen}; location /api/ {{ api write=on; }} }} }}\nstream {{\n \
             upstream t {{ zone t 64k; server {e1}; }}\n server {{ listen {tcp}; proxy_pass t; }}\n}}\n"
        );
        let _p = start(rt, &text);
        assert_eq!(echo(tcp, b"one"), b"one");
        let (status, up) = api(listen, "GET", "/api/9/stream/upstreams/t", "");
        assert_eq!(status, 200);
        let p0 = &up["peers"][0];
        assert_eq!(
            (&p0["id"], &p0["connections"], &p0["state"]),
            (&json!(0), &json!(1), &json!("up")),
            "{up}"
        );
        assert!(p0.get("requests").is_none() && p0.get("responses").is_none());
        let path = "/api/9/stream/upstreams/t/servers";
        let (status, added) = api(listen, "POST", path, &format!("{{\"server\":\"{e2}\"}}"));
        assert_eq!((status, &added["id"]), (201, &json!(1)), "{added}");
        assert!(added.get("drain").is_none() && added.get("route").is_none());
        let (status, v) = api(listen, "POST", path, "{\"server\":\"127.0.0.1\"}");
        assert_eq!(
            (status, error_code(&v)),
            (400, "UpstreamBadAddress"),
            "a stream server needs a port"
        );
        let (status, v) = api(listen, "PATCH", &format!("{path}/0"), "{\"drain\":true}");
        assert_eq!(
            (status, error_code(&v)),
            (400, "UpstreamConfFormatError"),
            "no drain in stream"
        );
        api(listen, "PATCH", &format!("{path}/0"), "{\"down\":true}");
        for i in 0..3u8 {
            assert_eq!(echo(tcp, &[i; 3]), [i; 3]);
        }
        let (_, up) = api(listen, "GET", "/api/9/stream/upstreams", "");
        let counts: Vec<&Value> = up["t"]["peers"]
            .as_array()
            .map(|l| l.iter().map(|p| &p["connections"]).collect())
            .unwrap_or_default();
        assert_eq!(counts, [&json!(1), &json!(3)], "runtime {rt}");
        assert_eq!(up["t"]["peers"][0]["state"], "down");
    }
}
