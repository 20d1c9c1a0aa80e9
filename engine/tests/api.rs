//! The nginx Plus API's reads and refusals end to end: the upstream status schema and counts after known traffic,
//! `?fields=`, HEAD, and nginx Plus's error objects for unknown names, bad bodies and writes without `write=on`.

mod support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::api_client::{api, error_code, http_text, picks, raw, start};
use support::backend::{Backend, Mode};
use support::free_addr;

#[test]
fn reads_follow_the_nginx_plus_schema_and_count_known_traffic() {
    let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
    let listen = free_addr();
    let servers = format!("server {} max_conns=10; server {} weight=2;", a.addr, b.addr);
    let _p = start(0, &http_text(listen, &servers, "api;"));
    assert_eq!(picks(listen, 6), ["b", "a", "b", "b", "a", "b"]);

    assert_eq!(
        api(listen, "GET", "/api/", ""),
        (200, json!([1, 2, 3, 4, 5, 6, 7, 8, 9]))
    );
    let root = [
        "nginx",
        "processes",
        "connections",
        "slabs",
        "http",
        "stream",
        "resolvers",
        "ssl",
        "workers",
    ];
    assert_eq!(api(listen, "GET", "/api/9", ""), (200, json!(root)));
    let http = [
        "requests",
        "server_zones",
        "location_zones",
        "caches",
        "limit_conns",
        "limit_reqs",
        "keyvals",
        "upstreams",
    ];
    assert_eq!(api(listen, "GET", "/api/9/http/", ""), (200, json!(http)));
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
    assert!(
        p0["response_time"].is_u64(),
        "an average once responses were timed: {p0}"
    );
    assert!(
        p0["sent"].as_u64() > Some(0) && p0["received"].as_u64() > Some(0),
        "{p0}"
    );
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
        ("GET", "/api/10/nginx", 404, "UnknownVersion"),
        ("GET", "/api/9/license", 404, "PathNotFound"),
        ("GET", "/api/9/stream/zone_sync", 404, "PathNotFound"),
        ("GET", "/api/9/http/caches/one", 404, "CacheNotFound"),
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
