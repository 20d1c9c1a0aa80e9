//! The `state FILE` of an upstream (nginx Plus): its servers as `server ...;` lines in nginx's syntax, rendered
//! from the model and written whole (a temporary file in the same directory, then a rename), so that a crash never
//! leaves half a file. Reading the file back is the config builder's (`build/state.rs`), with the same lexer.

use super::model::ServerLine;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The text of a state file holding `lines`, one `server` line per line, with only the parameters that differ
/// from nginx's defaults. Lines that share a text and every parameter (the addresses of one name, as the API
/// keeps them one per peer) are written once, by the name; when the addresses of one name differ in a parameter,
/// each is written by its address, so that reading the file back gives the same peers.
pub fn render(lines: &[ServerLine]) -> String {
    let mut out = String::new();
    let mut rest = lines;
    while let Some(first) = rest.first() {
        let run = rest.iter().take_while(|l| l.text == first.text).count();
        let (group, tail) = rest.split_at(run);
        rest = tail;
        if group.iter().all(|l| same_params(l, first)) {
            push_line(&mut out, &first.text, first);
        } else {
            for line in group {
                for addr in &line.addrs {
                    push_line(&mut out, &addr.to_string(), line);
                }
            }
        }
    }
    out
}

/// Writes `lines` to `path`: a temporary file beside it, synced, then renamed over it (and the directory synced,
/// best effort), so that `path` always holds either the old text or the new one.
pub fn write(path: &Path, lines: &[ServerLine]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = write_synced(&tmp, render(lines).as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename is durable once the directory is; a failure here loses nothing already written.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// `DIR/.NAME.tmp`: in the same directory, so the rename never crosses file systems.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Whether two lines differ only in their addresses (and where they were read).
fn same_params(a: &ServerLine, b: &ServerLine) -> bool {
    (a.weight, a.max_fails, a.fail_timeout, a.max_conns, a.slow_start)
        == (b.weight, b.max_fails, b.fail_timeout, b.max_conns, b.slow_start)
        && (a.backup, a.down, a.drain) == (b.backup, b.down, b.drain)
        && a.agent == b.agent
}

fn push_line(out: &mut String, text: &str, line: &ServerLine) {
    let defaults = ServerLine::new("", Vec::new());
    out.push_str("server ");
    push_word(out, text);
    if line.weight != defaults.weight {
        let _ = write!(out, " weight={}", line.weight);
    }
    if line.max_conns != defaults.max_conns {
        let _ = write!(out, " max_conns={}", line.max_conns);
    }
    if line.max_fails != defaults.max_fails {
        let _ = write!(out, " max_fails={}", line.max_fails);
    }
    if line.fail_timeout != defaults.fail_timeout {
        let _ = write!(out, " fail_timeout={}", seconds(line.fail_timeout));
    }
    if line.slow_start != defaults.slow_start {
        let _ = write!(out, " slow_start={}", seconds(line.slow_start));
    }
    for (on, word) in [(line.backup, " backup"), (line.down, " down"), (line.drain, " drain")] {
        if on {
            out.push_str(word);
        }
    }
    if let Some(agent) = &line.agent {
        let _ = write!(out, " agent_port={}", agent.port);
        if agent.inter != crate::config::agent::DEFAULT_INTER {
            let _ = write!(out, " agent_inter={}ms", agent.inter.as_millis());
        }
        if let Some(send) = &agent.send {
            out.push(' ');
            push_word(out, &format!("agent_send={send}"));
        }
    }
    out.push_str(";\n");
}

/// A time in whole seconds, as the config takes it (`10s`).
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// A word as the lexer reads it back: bare when it has only plain characters, else double-quoted with `"` and
/// `\` escaped.
fn push_word(out: &mut String, word: &str) {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-[]/%@+=,".contains(&b));
    if plain {
        out.push_str(word);
        return;
    }
    out.push('"');
    for c in word.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn line(text: &str) -> ServerLine {
        let addr: SocketAddr = text.parse().unwrap_or(SocketAddr::from(([10, 0, 0, 1], 80)));
        ServerLine::new(text, vec![addr])
    }

    #[test]
    fn only_parameters_off_their_defaults_are_written() {
        let full = ServerLine {
            weight: 3,
            max_conns: 7,
            max_fails: 0,
            fail_timeout: Duration::from_secs(90),
            slow_start: Duration::from_secs(30),
            backup: true,
            down: true,
            drain: true,
            ..line("127.0.0.1:8081")
        };
        assert_eq!(
            render(&[line("127.0.0.1:8080"), full]),
            "server 127.0.0.1:8080;\nserver 127.0.0.1:8081 weight=3 max_conns=7 max_fails=0 fail_timeout=90s \
             slow_start=30s backup down drain;\n"
        );
        assert_eq!(render(&[]), "");
        let agent = |inter: u64, send: Option<&str>| crate::config::agent::AgentConf {
            port: 9,
            inter: Duration::from_millis(inter),
            send: send.map(str::to_string),
        };
        let agents = [
            ServerLine {
                agent: Some(agent(2000, None)),
                ..line("127.0.0.1:1")
            },
            ServerLine {
                agent: Some(agent(500, Some("ping me"))),
                ..line("127.0.0.1:2")
            },
        ];
        assert_eq!(
            render(&agents),
            "server 127.0.0.1:1 agent_port=9;\nserver 127.0.0.1:2 agent_port=9 agent_inter=500ms \"agent_send=ping me\";\n"
        );
    }

    #[test]
    fn words_the_lexer_would_split_are_quoted() {
        let mut out = String::new();
        push_word(&mut out, "a b;\"c\\");
        assert_eq!(out, r#""a b;\"c\\""#);
        out.clear();
        push_word(&mut out, "[::1]:80");
        assert_eq!(out, "[::1]:80");
    }

    #[test]
    fn the_addresses_of_one_name_are_written_once_unless_they_differ() {
        let at = |ip: [u8; 4]| ServerLine::new("backend", vec![SocketAddr::from((ip, 80))]);
        let same = [at([10, 0, 0, 1]), at([10, 0, 0, 2]), line("127.0.0.1:1")];
        assert_eq!(render(&same), "server backend;\nserver 127.0.0.1:1;\n");
        let differ = [
            at([10, 0, 0, 1]),
            ServerLine {
                weight: 2,
                ..at([10, 0, 0, 2])
            },
        ];
        assert_eq!(render(&differ), "server 10.0.0.1:80;\nserver 10.0.0.2:80 weight=2;\n");
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("corelb-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("servers.conf");
        std::fs::write(&path, "old").unwrap();
        write(&path, &[line("127.0.0.1:8080")]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "server 127.0.0.1:8080;\n");
        assert!(!temp_path(&path).exists());
        let missing = dir.join("no-such-dir").join("servers.conf");
        assert!(write(&missing, &[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
