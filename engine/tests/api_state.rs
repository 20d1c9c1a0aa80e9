//! `state FILE` and `server ... drain` end to end on both runtimes: API changes land in the state file and survive
//! a restart and a reload, an upstream whose file has no server answers 502, a state file's syntax error names
//! the file and line, and a peer drained in the config takes no requests.

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::control::ChangeKind;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use support::api_client::{api, config, peer_of, peers, picks, start};
use support::backend::{Backend, Mode};
use support::{free_addr, get};

/// A fresh directory for one test's state file.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-api-state-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// An http block: upstream `b` kept in `state`, proxied at `/`, and the API with `write=on`.
fn state_text(listen: SocketAddr, state: &Path) -> String {
    format!(
        "events {{}}\nhttp {{\n upstream b {{ zone b 64k; state {}; }}\n server {{ listen {listen}; location / {{ \
         proxy_pass http://b; }} location /api/ {{ api write=on; }} }}\n}}\n",
        state.display()
    )
}

/// The peers of upstream `b` as (server, weight, backup) from the servers endpoint.
fn settings(listen: SocketAddr) -> Vec<(String, u64, bool)> {
    let (status, v) = api(listen, "GET", "/api/9/http/upstreams/b/servers", "");
    assert_eq!(status, 200, "{v}");
    v.as_array()
        .map(|all| {
            all.iter()
                .map(|s| {
                    let server = s["server"].as_str().unwrap_or_default().to_string();
                    (server, s["weight"].as_u64().unwrap_or(0), s["backup"] == json!(true))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn servers_added_through_the_api_survive_a_restart_and_a_reload() {
    for rt in 0..2 {
        let (a, b, c) = (
            Backend::start("a", Mode::Ok),
            Backend::start("b", Mode::Ok),
            Backend::start("c", Mode::Ok),
        );
        let dir = temp_dir(&format!("restart{rt}"));
        let state = dir.join("b.state");
        std::fs::write(&state, format!("server {} weight=2;\nserver {};\n", a.addr, b.addr)).expect("state");
        let listen = free_addr();
        let text = state_text(listen, &state);
        let p = start(rt, &text);
        assert_eq!(picks(listen, 3), ["a", "b", "a"], "runtime {rt}");
        let body = format!("{{\"server\":\"{}\",\"weight\":3}}", c.addr);
        let (status, added) = api(listen, "POST", "/api/9/http/upstreams/b/servers", &body);
        assert_eq!(
            (status, &added["id"], &added["weight"]),
            (201, &json!(2), &json!(3)),
            "{added}"
        );
        let written = std::fs::read_to_string(&state).expect("the state file");
        assert_eq!(
            written,
            format!(
                "server {} weight=2;\nserver {};\nserver {} weight=3;\n",
                a.addr, b.addr, c.addr
            )
        );
        let expected = vec![
            (a.addr.to_string(), 2, false),
            (b.addr.to_string(), 1, false),
            (c.addr.to_string(), 3, false),
        ];
        assert_eq!(settings(listen), expected);

        // Stop and start again on the same config: the file brings the three servers back.
        drop(p);
        support::wait_released(listen);
        let p = start(rt, &text);
        assert_eq!(settings(listen), expected, "after the restart, runtime {rt}");
        let mut got = picks(listen, 6);
        got.sort();
        assert_eq!(got, ["a", "a", "b", "c", "c", "c"], "2:1:3 over six picks");

        // A reload reads the file again too, and an API removal is written before it.
        let (status, _) = api(listen, "DELETE", "/api/9/http/upstreams/b/servers/1", "");
        assert_eq!(status, 200);
        p.shared
            .apply(ChangeKind::Reload, |_| Ok(config(&text)))
            .expect("reload");
        assert_eq!(settings(listen), [expected[0].clone(), expected[2].clone()]);
        drop(p);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

#[test]
fn an_upstream_whose_state_file_has_no_server_answers_502_until_one_is_added() {
    for rt in 0..2 {
        let a = Backend::start("a", Mode::Ok);
        let dir = temp_dir(&format!("empty{rt}"));
        let state = dir.join("b.state");
        let listen = free_addr();
        let _p = start(rt, &state_text(listen, &state));
        assert!(
            !state.exists(),
            "a missing file is read as empty and not written at load"
        );
        assert_eq!(peers(listen), Vec::<Value>::new());
        assert_eq!(get(listen, "/").map(|r| r.status), Some(502), "runtime {rt}");

        let body = format!("{{\"server\":\"{}\"}}", a.addr);
        let (status, added) = api(listen, "POST", "/api/9/http/upstreams/b/servers", &body);
        assert_eq!(status, 201, "{added}");
        assert_eq!(picks(listen, 2), ["a", "a"]);
        assert_eq!(
            std::fs::read_to_string(&state).expect("created by the change"),
            format!("server {};\n", a.addr)
        );

        // The last server can go: the file and the upstream are empty again.
        let (status, left) = api(listen, "DELETE", "/api/9/http/upstreams/b/servers/0", "");
        assert_eq!((status, left), (200, json!([])));
        assert_eq!(get(listen, "/").map(|r| r.status), Some(502));
        assert_eq!(std::fs::read_to_string(&state).expect("the state file"), "");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

#[test]
fn a_state_file_error_names_the_file_and_line_at_load() {
    let dir = temp_dir("syntax");
    let state = dir.join("b.state");
    std::fs::write(&state, "server 127.0.0.1:8081;\nserver 127.0.0.1:8082 weight=2\n").expect("state");
    let text = state_text(free_addr(), &state);
    let e = parse_str(&text, &dir.join("corelb.conf")).expect_err("a state file without its last ';'");
    assert_eq!(e.file(), Some(state.as_path()));
    assert_eq!(e.line(), Some(3), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "[emerg] unexpected end of file, expecting \";\" or \"}}\" in {}:3",
            state.display()
        )
    );
    std::fs::write(&state, "server 127.0.0.1:8081;\nserver 127.0.0.1:8082 wieght=2;\n").expect("state");
    let e = parse_str(&text, &dir.join("corelb.conf")).expect_err("an unknown parameter");
    assert_eq!(
        e.to_string(),
        format!("[emerg] invalid parameter \"wieght=2\" in {}:2", state.display())
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_peer_drained_in_the_config_takes_no_requests_and_shows_draining() {
    for rt in 0..2 {
        let (a, b) = (Backend::start("a", Mode::Ok), Backend::start("b", Mode::Ok));
        let listen = free_addr();
        let text = format!(
            "events {{}}\nhttp {{\n upstream b {{ zone b 64k; server {} drain; server {}; }}\n server {{ listen \
             {listen}; location / {{ proxy_pass http://b; }} location /api/ {{ api write=on; }} }}\n}}\n",
            a.addr, b.addr
        );
        let p = start(rt, &text);
        assert_eq!(picks(listen, 4), ["b", "b", "b", "b"], "runtime {rt}");
        assert_eq!(a.requests(), 0);
        let drained = peer_of(listen, a.addr);
        assert_eq!(
            (&drained["state"], &drained["requests"]),
            (&json!("draining"), &json!(0))
        );
        let (status, v) = api(listen, "GET", "/api/9/http/upstreams/b/servers/0", "");
        assert_eq!((status, &v["drain"]), (200, &json!(true)), "{v}");

        // The API clears it; a reload of the same file sets it again (the config is the truth at each apply).
        let (status, v) = api(
            listen,
            "PATCH",
            "/api/9/http/upstreams/b/servers/0",
            "{\"drain\":false}",
        );
        assert_eq!((status, &v["drain"]), (200, &json!(false)), "{v}");
        assert_eq!(picks(listen, 2), ["a", "b"]);
        p.shared
            .apply(ChangeKind::Reload, |_| Ok(config(&text)))
            .expect("reload");
        assert_eq!(peer_of(listen, a.addr)["state"], "draining");
        assert_eq!(picks(listen, 2), ["b", "b"]);
    }
}

#[test]
fn a_stream_upstream_keeps_its_servers_in_its_state_file_too() {
    for rt in 0..2 {
        let ((e1, _), (e2, _)) = (support::backend::tcp_echo(), support::backend::tcp_echo());
        let dir = temp_dir(&format!("stream{rt}"));
        let state = dir.join("t.state");
        std::fs::write(&state, format!("server {e1} max_fails=3;\n")).expect("state");
        let (listen, tcp) = (free_addr(), free_addr());
        let text = format!(
            "events {{}}\nhttp {{ server {{ listen {listen}; location /api/ {{ api write=on; }} }} }}\nstream {{\n \
             upstream t {{ zone t 64k; state {}; }}\n server {{ listen {tcp}; proxy_pass t; }}\n}}\n",
            state.display()
        );
        let p = start(rt, &text);
        let path = "/api/9/stream/upstreams/t/servers";
        let (status, added) = api(listen, "POST", path, &format!("{{\"server\":\"{e2}\",\"down\":true}}"));
        assert_eq!(status, 201, "{added}");
        assert_eq!(
            std::fs::read_to_string(&state).expect("the state file"),
            format!("server {e1} max_fails=3;\nserver {e2} down;\n"),
            "runtime {rt}"
        );
        drop(p);
        support::wait_released(listen);
        support::wait_released(tcp);
        let _p = start(rt, &text);
        let (_, v) = api(listen, "GET", path, "");
        let kept: Vec<(Value, Value, Value)> = v
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|s| (s["server"].clone(), s["max_fails"].clone(), s["down"].clone()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            kept,
            [
                (json!(e1.to_string()), json!(3), json!(false)),
                (json!(e2.to_string()), json!(1), json!(true))
            ]
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}

#[test]
fn a_change_whose_state_file_cannot_be_written_is_refused_and_changes_nothing() {
    let a = Backend::start("a", Mode::Ok);
    let dir = temp_dir("unwritable");
    let state = dir.join("b.state");
    std::fs::write(&state, format!("server {};\n", a.addr)).expect("state");
    let listen = free_addr();
    let _p = start(0, &state_text(listen, &state));
    std::fs::remove_dir_all(&dir).expect("the state file's directory goes away");
    let (status, v) = api(listen, "PATCH", "/api/9/http/upstreams/b/servers/0", "{\"weight\":5}");
    assert_eq!((status, &v["error"]["code"]), (500, &json!("InternalError")), "{v}");
    assert_eq!(settings(listen), [(a.addr.to_string(), 1, false)]);
    assert_eq!(picks(listen, 1), ["a"]);
}
