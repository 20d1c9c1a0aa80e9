//! nginx Plus API changes end to end on both runtimes: weight, down, drain, add and remove followed by the next
//! picks, zone state and ids kept over changes and reloads, and stream upstreams.

mod support;

use corelb_engine::control::ChangeKind;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;
use support::api_client::{api, config, error_code, http_text, peer_of, peers, picks, start, wait_for};
use support::backend::{tcp_echo, Backend, Mode};
use support::{dead_addr, free_addr, get};

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
    let dead = dead_addr();
    let (_, added) = api(
        listen,
        "POST",
        "/api/9/http/upstreams/b/servers",
        &format!("{{\"server\":\"{dead}\"}}"),
    );
    assert_eq!(added["id"], 2);
    // SWRR over a, b and the added dead peer, worked as nginx does: a, b, then the dead peer, which fails over to
    // a (the one try left by weight) and is then out for fail_timeout, so b; b has served 2.
    assert_eq!(picks(listen, 4), ["a", "b", "a", "b"]);
    let requests_b = peer_of(listen, b.addr)["requests"].clone();
    assert_eq!(requests_b, json!(2));
    assert_eq!(
        (&peer_of(listen, dead)["state"], &peer_of(listen, dead)["fails"]),
        (&json!("unavail"), &json!(1))
    );
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
