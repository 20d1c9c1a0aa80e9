//! Reading an upstream's `state FILE` (nginx Plus): `server` lines in nginx's syntax, read with the config's lexer
//! and `server` builder, so that an error names the state file's `FILE:LINE`. A missing file is an upstream with
//! no servers yet (it answers 502 until servers are added through the API, which creates the file).

use super::server_line::server_line;
use super::vars::Module;
use super::{walk, Ctx};
use crate::config::error::ConfigError;
use crate::config::model::{ServerLine, Span};
use crate::config::parser;
use std::path::{Path, PathBuf};

/// The path `state FILE` names: as written when absolute, else relative to the directory of the file holding the
/// directive.
pub fn resolve(file: &str, at: &Span) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    at.file
        .parent()
        .map_or_else(|| path.to_path_buf(), |dir| dir.join(path))
}

/// The servers of the state file at `path` (named by the `state` directive at `at`). Only `server` lines are
/// allowed in it; `allow_backup` is the upstream's (its balancing method's) as for `server` lines in the block.
pub fn load(path: &Path, at: &Span, module: Module, allow_backup: bool) -> Result<Vec<ServerLine>, ConfigError> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ConfigError::io("open", path, &e, Some(at.clone()))),
    };
    let tree = parser::parse_text(&text, path);
    let ctx = match module {
        Module::Http => Ctx::HTTP_UPS,
        Module::Stream => Ctx::STREAM_UPS,
    };
    let mut servers = Vec::new();
    walk(&tree, ctx, |d| {
        if d.name != "server" {
            return Err(ConfigError::NotAllowedHere {
                name: d.name.clone(),
                at: d.span.clone(),
            });
        }
        servers.push(server_line(d, module, allow_backup)?);
        Ok(())
    })?;
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::state_file;
    use std::net::SocketAddr;
    use std::time::Duration;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("corelb-state-load-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn at() -> Span {
        Span {
            file: PathBuf::from("/etc/corelb/corelb.conf"),
            line: 7,
        }
    }

    /// A line as read back: the span names the state file.
    fn without_span(lines: Vec<ServerLine>) -> Vec<ServerLine> {
        lines
            .into_iter()
            .map(|l| ServerLine {
                span: Span::default(),
                ..l
            })
            .collect()
    }

    #[test]
    fn a_written_file_reads_back_as_the_same_lines() {
        let dir = temp_dir("round");
        let path = dir.join("b.state");
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let lines = vec![
            ServerLine::new("127.0.0.1:8081", vec![addr("127.0.0.1:8081")]),
            ServerLine {
                weight: 5,
                max_conns: 9,
                max_fails: 0,
                fail_timeout: Duration::from_secs(75),
                slow_start: Duration::from_secs(20),
                down: true,
                drain: true,
                ..ServerLine::new("[::1]:8082", vec![addr("[::1]:8082")])
            },
            ServerLine {
                backup: true,
                ..ServerLine::new("127.0.0.2", vec![addr("127.0.0.2:80")])
            },
        ];
        state_file::write(&path, &lines).unwrap();
        let back = load(&path, &at(), Module::Http, true).unwrap();
        assert_eq!(
            back[1].span,
            Span {
                file: path.clone(),
                line: 2
            }
        );
        assert_eq!(without_span(back), lines);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_no_servers_and_errors_name_the_state_file() {
        let dir = temp_dir("errors");
        let path = dir.join("b.state");
        assert_eq!(load(&path, &at(), Module::Http, true).unwrap(), Vec::new());
        std::fs::write(&path, "server 127.0.0.1:1;\nserver 127.0.0.1:2 weight=0;\n").unwrap();
        let e = load(&path, &at(), Module::Http, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("[emerg] invalid parameter \"weight=0\" in {}:2", path.display())
        );
        std::fs::write(&path, "server 127.0.0.1:1;\n\nserver 127.0.0.1:2\n").unwrap();
        let e = load(&path, &at(), Module::Http, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[emerg] unexpected end of file, expecting \";\" or \"}}\" in {}:4",
                path.display()
            )
        );
        std::fs::write(&path, "zone z 64k;\n").unwrap();
        let e = load(&path, &at(), Module::Http, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("[emerg] \"zone\" directive is not allowed here in {}:1", path.display())
        );
        std::fs::write(&path, "server 127.0.0.1:1 drain;\n").unwrap();
        let e = load(&path, &at(), Module::Stream, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("[emerg] invalid parameter \"drain\" in {}:1", path.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The config `http { upstream b { BODY } server { listen ...; location / { proxy_pass http://b; } } }` in
    /// `dir/corelb.conf`.
    fn parse(dir: &Path, body: &str) -> Result<crate::config::model::Config, ConfigError> {
        let text = format!(
            "events {{}}\nhttp {{\nupstream b {{\n{body}\n}}\nserver {{ listen 127.0.0.1:1; location / {{ proxy_pass \
             http://b; }} }}\n}}\n"
        );
        crate::config::parse_str(&text, &dir.join("corelb.conf"))
    }

    #[test]
    fn state_takes_the_place_of_server_lines_and_needs_a_zone() {
        let dir = temp_dir("directive");
        let conf = dir.join("corelb.conf");
        let e = parse(&dir, "zone b 64k;\nserver 127.0.0.1:1;\nstate b.state;").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[emerg] \"state\" directive is not allowed here in {}:6",
                conf.display()
            )
        );
        let e = parse(&dir, "zone b 64k;\nstate b.state;\nserver 127.0.0.1:1;").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[emerg] \"server\" directive is not allowed here in {}:6",
                conf.display()
            )
        );
        let e = parse(&dir, "state b.state;\nstate c.state;").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("[emerg] \"state\" directive is duplicate in {}:5", conf.display())
        );
        let e = parse(&dir, "state b.state;").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[emerg] \"state\" directive requires \"zone\" in upstream \"b\" in {}:4",
                conf.display()
            )
        );
        // no file yet: an upstream without servers, which the plan accepts
        let config = parse(&dir, "zone b 64k;\nstate b.state;").unwrap();
        let up = &config.http.as_ref().unwrap().upstreams[0];
        assert_eq!((up.servers.len(), up.state.clone()), (0, Some(dir.join("b.state"))));
        std::fs::write(dir.join("b.state"), "server 127.0.0.1:2 weight=4;\n").unwrap();
        let config = parse(&dir, "zone b 64k;\nstate b.state;").unwrap();
        assert_eq!(config.http.as_ref().unwrap().upstreams[0].servers[0].weight, 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_upstream_without_servers_picks_no_peer_with_any_method() {
        use crate::balance::{Attempt, ShardState, UpstreamPlan};
        let dir = temp_dir("empty");
        let methods = [
            "",
            "least_conn;",
            "ip_hash;",
            "hash $uri;",
            "hash $uri consistent;",
            "random;",
            "random two;",
        ];
        for method in methods {
            let config = parse(&dir, &format!("zone b 64k;\nstate b.state;\n{method}")).unwrap();
            let conf = &config.http.as_ref().unwrap().upstreams[0];
            let plan = UpstreamPlan::build(conf, &corelb_shared_state::Zone::new()).unwrap();
            let mut shard = ShardState::seeded(&plan, 1);
            let mut attempt = Attempt::new(&plan, 0, b"key");
            assert!(attempt.pick(&mut shard, b"key", 1).is_none(), "{method}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn drain_is_an_http_server_parameter() {
        let dir = temp_dir("drain");
        let config = parse(&dir, "server 127.0.0.1:1 drain;\nserver 127.0.0.1:2;").unwrap();
        let servers = &config.http.as_ref().unwrap().upstreams[0].servers;
        assert_eq!((servers[0].drain, servers[1].drain), (true, false));
        let text = "events {}\nstream {\nupstream b { server 127.0.0.1:1 drain; }\nserver { listen 127.0.0.1:1; \
                    proxy_pass b; }\n}\n";
        let e = crate::config::parse_str(text, &dir.join("corelb.conf")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "[emerg] invalid parameter \"drain\" in {}:3",
                dir.join("corelb.conf").display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relative_paths_resolve_against_the_directive_s_file() {
        assert_eq!(
            resolve("state/b.conf", &at()),
            PathBuf::from("/etc/corelb/state/b.conf")
        );
        assert_eq!(resolve("/var/lib/b.conf", &at()), PathBuf::from("/var/lib/b.conf"));
    }
}
