//! Property tests: any input text is either a config or an error with a line (never a panic), token soups from the
//! grammar's alphabet included; and generated upstream blocks come back in the model exactly as written.

use corelb_engine::config::model::Config;
use corelb_engine::config::{parse_str, ConfigError};
use proptest::prelude::*;
use std::path::Path;
use std::time::Duration;

/// A path in a directory that does not exist: any `include` fails to open (with a line) instead of reading files.
const PATH: &str = "/nonexistent-corelb-dir/corelb.conf";

/// Parses and checks the one property every input must have.
fn parse_checked(text: &str) -> Result<Config, ConfigError> {
    let result = parse_str(text, Path::new(PATH));
    if let Err(e) = &result {
        let line = e.line().unwrap_or_else(|| panic!("no line in {e:?} for {text:?}"));
        let lines = text.split('\n').count();
        assert!(
            (1..=lines).contains(&line),
            "line {line} of {lines} in {e} for {text:?}"
        );
        assert_eq!(e.file(), Some(Path::new(PATH)), "{e}");
        assert!(e.to_string().starts_with("[emerg] "), "{e}");
    }
    result
}

/// Pieces of nginx syntax: the special characters, directive names corelb knows, values, and whitespace.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "{", "}", ";", "\"", "'", "\\", "#", "$", "${", "}", ")", "(", " ", " ", "\n", "\t", "\r\n",
        ])
        .prop_map(str::to_string),
        3 => prop::sample::select(vec![
            "events", "http", "stream", "upstream", "server", "location", "listen", "proxy_pass", "return",
            "hash", "ip_hash", "least_conn", "random", "two", "keepalive", "zone", "include", "worker_processes",
            "proxy_set_header", "proxy_next_upstream", "server_name", "access_log", "error_log", "gzip", "=", "~",
            "backup", "down", "weight=2", "weight=0", "max_fails=3", "fail_timeout=5s", "consistent", "off",
            "127.0.0.1:8080", "[::1]:81", "http://u", "http://127.0.0.1:9", "$remote_addr", "$nope", "u", "/",
            "8080", "10s", "1m", "auto",
        ])
        .prop_map(str::to_string),
        1 => "[a-z_]{1,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn config_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_checked(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn config_arbitrary_strings_never_panic(text in "\\PC{0,300}") {
        let _ = parse_checked(&text);
    }

    #[test]
    fn config_token_soups_never_panic(tokens in prop::collection::vec(token(), 0..120)) {
        let _ = parse_checked(&tokens.join(""));
    }

    #[test]
    fn config_token_soups_inside_a_valid_frame_never_panic(tokens in prop::collection::vec(token(), 0..80)) {
        let body = tokens.join(" ");
        let _ = parse_checked(&format!("events {{}}\nhttp {{\n upstream u {{ server 127.0.0.1:1; {body} }}\n}}\n"));
        let _ = parse_checked(&format!("events {{}}\nhttp {{ server {{ location / {{ {body} }} }} }}\n"));
        let _ = parse_checked(&format!("events {{}}\nstream {{ server {{ listen 1; {body} }} }}\n"));
    }
}

/// One generated `server` line and what the model should hold for it.
#[derive(Debug, Clone)]
struct Line {
    port: u16,
    weight: Option<u32>,
    max_fails: Option<u32>,
    fail_timeout: Option<u32>,
    max_conns: Option<u32>,
    backup: bool,
    down: bool,
}

fn line() -> impl Strategy<Value = Line> {
    (
        1u16..,
        prop::option::of(1u32..1000),
        prop::option::of(0u32..10),
        prop::option::of(0u32..100_000),
        prop::option::of(0u32..5000),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(port, weight, max_fails, fail_timeout, max_conns, backup, down)| Line {
                port,
                weight,
                max_fails,
                fail_timeout,
                max_conns,
                backup,
                down,
            },
        )
}

fn render(l: &Line) -> String {
    let mut s = format!("server 127.0.0.1:{}", l.port);
    if let Some(w) = l.weight {
        s += &format!(" weight={w}");
    }
    if let Some(m) = l.max_fails {
        s += &format!(" max_fails={m}");
    }
    if let Some(t) = l.fail_timeout {
        s += &format!(" fail_timeout={t}s");
    }
    if let Some(c) = l.max_conns {
        s += &format!(" max_conns={c}");
    }
    if l.backup {
        s += " backup";
    }
    if l.down {
        s += " down";
    }
    s + ";"
}

proptest! {
    #[test]
    fn config_upstream_lines_round_trip(lines in prop::collection::vec(line(), 1..12)) {
        let body: Vec<String> = lines.iter().map(render).collect();
        let text = format!("events {{}}\nhttp {{\nupstream u {{\n{}\n}}\n}}\n", body.join("\n"));
        let result = parse_checked(&text);
        if lines.iter().all(|l| l.backup) {
            let e = result.unwrap_err();
            prop_assert_eq!(e.to_string(), format!("[emerg] no servers in upstream \"u\" in {PATH}:3"));
            return Ok(());
        }
        let c = result.unwrap_or_else(|e| panic!("{e}\n{text}"));
        let servers = &c.http.as_ref().unwrap().upstream("u").unwrap().servers;
        prop_assert_eq!(servers.len(), lines.len());
        for (i, (s, l)) in servers.iter().zip(&lines).enumerate() {
            prop_assert_eq!(s.addrs[0].port(), l.port);
            prop_assert_eq!(s.weight, l.weight.unwrap_or(1));
            prop_assert_eq!(s.max_fails, l.max_fails.unwrap_or(1));
            prop_assert_eq!(s.fail_timeout, Duration::from_secs(u64::from(l.fail_timeout.unwrap_or(10))));
            prop_assert_eq!(s.max_conns, l.max_conns.unwrap_or(0));
            prop_assert_eq!((s.backup, s.down), (l.backup, l.down));
            prop_assert_eq!(s.span.line, 4 + i);
        }
    }
}
