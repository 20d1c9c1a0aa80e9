//! Server changes (`POST`, `PATCH`, `DELETE` on `.../servers[/ID]`): the running config's upstream is edited and
//! made the running snapshot through the control plane, so every shard sees it at once and the zone keeps the
//! state (and ids) of the peers the change does not touch. An upstream with `state FILE` has the file rewritten
//! with its new servers, under the control plane's lock, before the change is published.

use super::body::ServerBody;
use super::json::Json;
use super::route::Block;
use super::views;
use super::ApiError;
use crate::config::model::{Config, Method, ServerLine, UpstreamConf};
use crate::config::state_file;
use crate::config::url::{self, UrlOpts};
use crate::control::{ApplyError, ChangeKind};
use crate::state::Shared;
use corelb_shared_state::PeerKey;
use std::net::SocketAddr;

/// One change to an upstream's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Add(ServerBody),
    Modify(u32, ServerBody),
    Remove(u32),
}

/// What a change did: the peer it added or changed (its identity), for the answer.
enum Done {
    Peer {
        key: PeerKey,
    },
    /// A name added with the upstream's resolver: it has no peers until it resolves.
    Name(ServerLine),
    Removed,
}

/// Applies `change` to upstream `name` of `block` and returns the status and body of the answer.
pub fn apply(shared: &Shared, block: Block, name: &str, change: Change) -> Result<(u16, Json), ApiError> {
    let mut outcome: Result<Done, ApiError> = Err(ApiError::internal());
    let mut written = false;
    let applied = shared.apply(ChangeKind::Api, |old| {
        outcome = edit(shared, old, block, name, &change);
        if let Err(e) = &outcome {
            return Err(ApplyError::Refused(e.text.clone()));
        }
        let config = rebuild(old, block, name, shared, &change)?;
        if let Err(e) = persist(&config, shared, block, name) {
            outcome = Err(e.clone());
            return Err(ApplyError::Refused(e.text));
        }
        written = true;
        Ok(config)
    });
    let done = outcome?;
    if applied.is_err() && written {
        // The file got the change the control plane then refused: put the running servers back in it.
        let _ = persist(&shared.snapshot.load().config, shared, block, name);
    }
    match applied {
        Ok(_) => answer(shared, block, name, done, matches!(change, Change::Add(_))),
        Err(e @ ApplyError::Health(_)) => Err(ApiError::new(500, "InternalError", e.to_string())),
        Err(e) => Err(ApiError::new(400, "UpstreamConfFormatError", e.to_string())),
    }
}

/// Writes the servers of upstream `name` in `config` to its state file, if it has one (nginx Plus keeps the file
/// in step with every change, so that a restart or reload keeps them).
fn persist(config: &Config, shared: &Shared, block: Block, name: &str) -> Result<(), ApiError> {
    let snap = shared.snapshot.load();
    let Some(index) = views::find_upstream(&snap, block, name).map(|u| u.index) else {
        return Ok(());
    };
    let Some(conf) = upstream_conf(config, block, index) else {
        return Ok(());
    };
    let Some(path) = &conf.state else {
        return Ok(());
    };
    state_file::write(path, &conf.servers).map_err(|e| {
        let text = format!("could not write the state file \"{}\" ({e})", path.display());
        ApiError::new(500, "InternalError", text)
    })
}

/// Checks the change against the running snapshot (which `old` is the config of: changes are serialized) and
/// tells what it will touch. The new config itself is made by [`rebuild`].
fn edit(shared: &Shared, old: &Config, block: Block, name: &str, change: &Change) -> Result<Done, ApiError> {
    let snap = shared.snapshot.load();
    let up = views::find_upstream(&snap, block, name).ok_or_else(ApiError::upstream_not_found)?;
    if !up.is_dynamic() {
        return Err(ApiError::upstream_static());
    }
    let conf = upstream_conf(old, block, up.index).ok_or_else(ApiError::upstream_not_found)?;
    match change {
        Change::Add(body) => {
            let line = new_line(body, block, conf)?;
            let key = key_of(conf, &line);
            if exploded(conf).iter().any(|l| key_of(conf, l) == key) {
                return Err(ApiError::new(409, "EntryExists", "entry exists".into()));
            }
            if line.is_template() {
                return Ok(Done::Name(line));
            }
            Ok(Done::Peer { key })
        }
        Change::Modify(id, body) => {
            let line = line_by_id(shared, conf, *id)?;
            let changed = modified(line.clone(), body, block, conf)?;
            let key = key_of(conf, &changed);
            if key != key_of(conf, &line) {
                if exploded(conf).iter().any(|l| key_of(conf, l) == key) {
                    return Err(ApiError::new(409, "EntryExists", "entry exists".into()));
                }
                shared.zone.prefer_id(key.clone(), *id);
            }
            Ok(Done::Peer { key })
        }
        Change::Remove(id) => {
            let line = line_by_id(shared, conf, *id)?;
            let primaries = exploded(conf).iter().filter(|l| !l.backup).count();
            // An upstream kept in a state file may be left empty (it answers 502); others need a primary server.
            if !line.backup && primaries == 1 && conf.state.is_none() {
                let text = format!("server \"{id}\" not removable: the last primary server");
                return Err(ApiError::new(400, "UpstreamServerImmutable", text));
            }
            Ok(Done::Removed)
        }
    }
}

/// The new config: `old` with the upstream's servers one line per peer, changed as `change` says. Called after
/// [`edit`] accepted the change, so lookups here succeed.
fn rebuild(old: &Config, block: Block, name: &str, shared: &Shared, change: &Change) -> Result<Config, ApplyError> {
    let refused = || ApplyError::Refused(format!("upstream \"{name}\" changed during the request"));
    let mut config = old.clone();
    let snap = shared.snapshot.load();
    let index = views::find_upstream(&snap, block, name).ok_or_else(refused)?.index;
    let conf = upstream_conf_mut(&mut config, block, index).ok_or_else(refused)?;
    let mut lines = exploded(conf);
    let by_id = |id: u32, lines: &[ServerLine]| {
        lines
            .iter()
            .position(|l| shared.zone.get(&key_of(conf, l)).is_some_and(|s| s.id() == id))
    };
    match change {
        Change::Add(body) => lines.push(new_line(body, block, conf).map_err(|e| ApplyError::Refused(e.text))?),
        Change::Modify(id, body) => {
            let at = by_id(*id, &lines).ok_or_else(refused)?;
            let line = lines.get(at).cloned().ok_or_else(refused)?;
            let changed = modified(line, body, block, conf).map_err(|e| ApplyError::Refused(e.text))?;
            if let Some(slot) = lines.get_mut(at) {
                *slot = changed;
            }
        }
        Change::Remove(id) => {
            let at = by_id(*id, &lines).ok_or_else(refused)?;
            lines.remove(at);
        }
    }
    conf.servers = lines;
    Ok(config)
}

/// The answer: 201 with the new server, 200 with the changed one, 200 with the remaining servers.
fn answer(shared: &Shared, block: Block, name: &str, done: Done, added: bool) -> Result<(u16, Json), ApiError> {
    let snap = shared.snapshot.load();
    let up = views::find_upstream(&snap, block, name).ok_or_else(ApiError::upstream_not_found)?;
    match done {
        Done::Removed => Ok((200, views::server_confs(up, block))),
        Done::Name(line) => Ok((201, name_conf(&line))),
        Done::Peer { key } => {
            let (peer, backup) = up
                .peers()
                .find(|(p, _)| p.addr == key.addr && *p.server == *key.server)
                .ok_or_else(ApiError::internal)?;
            Ok((if added { 201 } else { 200 }, views::server_conf(peer, backup, block)))
        }
    }
}

fn upstream_conf(config: &Config, block: Block, index: usize) -> Option<&UpstreamConf> {
    match block {
        Block::Http => config.http.as_ref()?.upstreams.get(index),
        Block::Stream => config.stream.as_ref()?.upstreams.get(index),
    }
}

fn upstream_conf_mut(config: &mut Config, block: Block, index: usize) -> Option<&mut UpstreamConf> {
    match block {
        Block::Http => config.http.as_mut()?.upstreams.get_mut(index),
        Block::Stream => config.stream.as_mut()?.upstreams.get_mut(index),
    }
}

/// A name the API added, as its answer shows it (nginx Plus: the server as written, `resolve`).
fn name_conf(line: &ServerLine) -> Json {
    Json::obj([
        ("server", Json::str(line.text.clone())),
        ("resolve", Json::Bool(true)),
        ("weight", Json::Num(u64::from(line.weight))),
        ("max_conns", Json::Num(u64::from(line.max_conns))),
        ("max_fails", Json::Num(u64::from(line.max_fails))),
        ("fail_timeout", Json::str(format!("{}s", line.fail_timeout.as_secs()))),
        ("backup", Json::Bool(line.backup)),
        ("down", Json::Bool(line.down)),
    ])
}

/// The upstream's servers as one line per peer (a name with several addresses gives one line per address, with
/// the same text, so every peer keeps its identity and the plan its order). A `resolve` line stays as it is and
/// the lines of its answer go (the control plane makes them again from the current answer).
fn exploded(conf: &UpstreamConf) -> Vec<ServerLine> {
    let mut out = Vec::with_capacity(conf.servers.len());
    for line in &conf.servers {
        if line.is_template() {
            out.push(line.clone());
        }
        if line.resolve.is_some() {
            continue;
        }
        for addr in &line.addrs {
            out.push(ServerLine {
                addrs: vec![*addr],
                ..line.clone()
            });
        }
    }
    out
}

/// The zone identity of a one-address line (the first of equal lines: the API adds no duplicates).
fn key_of(conf: &UpstreamConf, line: &ServerLine) -> PeerKey {
    PeerKey {
        upstream: conf.name.clone(),
        server: line.text.clone(),
        addr: line
            .addrs
            .first()
            .copied()
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        nth: 0,
    }
}

/// The line of the peer with id `id` (a peer of a resolved name is refused: its name's answers make it).
fn line_by_id(shared: &Shared, conf: &UpstreamConf, id: u32) -> Result<ServerLine, ApiError> {
    let derived = conf.servers.iter().filter(|l| l.is_derived()).flat_map(|l| {
        l.addrs.iter().map(move |a| ServerLine {
            addrs: vec![*a],
            ..l.clone()
        })
    });
    if let Some(line) = derived
        .into_iter()
        .find(|l| shared.zone.get(&key_of(conf, l)).is_some_and(|slot| slot.id() == id))
    {
        let text = format!("server \"{id}\" not modifiable: it is resolved from \"{}\"", line.text);
        return Err(ApiError::new(400, "UpstreamServerImmutable", text));
    }
    exploded(conf)
        .into_iter()
        .find(|l| shared.zone.get(&key_of(conf, l)).is_some_and(|slot| slot.id() == id))
        .ok_or_else(|| ApiError::server_not_found(id))
}

/// A new server line from a `POST` body, with nginx's defaults.
fn new_line(body: &ServerBody, block: Block, conf: &UpstreamConf) -> Result<ServerLine, ApiError> {
    let text = body
        .server
        .as_deref()
        .ok_or_else(|| ApiError::new(400, "UpstreamConfFormatError", "missing \"server\" argument".into()))?;
    let line = ServerLine {
        backup: body.backup.unwrap_or(false),
        ..ServerLine::new(String::new(), Vec::new())
    };
    if line.backup && !allows_backup(&conf.method) {
        let text = format!("upstream \"{}\" has no backup", conf.name);
        return Err(ApiError::new(400, "UpstreamNoBackup", text));
    }
    let body = ServerBody {
        server: Some(text.to_string()),
        backup: None,
        ..body.clone()
    };
    modified(line, &body, block, conf)
}

/// `line` with what `body` sets.
fn modified(
    mut line: ServerLine,
    body: &ServerBody,
    block: Block,
    conf: &UpstreamConf,
) -> Result<ServerLine, ApiError> {
    if body.backup.is_some_and(|b| b != line.backup) {
        let text = "the \"backup\" parameter cannot be changed".to_string();
        return Err(ApiError::new(400, "UpstreamConfFormatError", text));
    }
    if let Some(text) = &body.server {
        match address(text, block) {
            Ok(addr) => {
                line.addrs = vec![addr];
                line.resolve = None;
            }
            // a name, where the upstream has a resolver: resolved from now on, as a `resolve` server
            Err(e) if e.code == "UpstreamConfNoResolver" && takes_names(conf) && !line.is_derived() => {
                line.addrs = Vec::new();
                line.resolve = Some(Box::new(name_spec(text, block)?));
            }
            Err(e) => return Err(e),
        }
        line.text = text.clone();
    }
    line.weight = body.weight.unwrap_or(line.weight);
    line.weight_by_api |= body.weight.is_some();
    line.max_conns = body.max_conns.unwrap_or(line.max_conns);
    line.max_fails = body.max_fails.unwrap_or(line.max_fails);
    line.fail_timeout = body.fail_timeout.unwrap_or(line.fail_timeout);
    line.slow_start = body.slow_start.unwrap_or(line.slow_start);
    line.down = body.down.unwrap_or(line.down);
    line.drain = body.drain.unwrap_or(line.drain);
    if !line.slow_start.is_zero() && !allows_backup(&conf.method) {
        // nginx Plus: the methods that cannot take `backup` cannot take `slow_start` either.
        let text = "balancing method does not support parameter \"slow_start\"".to_string();
        return Err(ApiError::new(400, "UpstreamBadSlowStart", text));
    }
    Ok(line)
}

/// Whether a name may be added to `conf`: it has a resolver, and no state file (whose lines are read at load).
fn takes_names(conf: &UpstreamConf) -> bool {
    conf.resolver.is_some() && conf.state.is_none()
}

/// The run-time name of a `server` parameter that is a name.
fn name_spec(text: &str, block: Block) -> Result<crate::config::model::ResolveSpec, ApiError> {
    let opts = UrlOpts {
        default_port: if block == Block::Http { 80 } else { 0 },
        no_resolve: true,
        ..UrlOpts::default()
    };
    let url = url::parse_url(text, opts).map_err(|e| ApiError::new(400, "UpstreamBadAddress", e.to_string()))?;
    Ok(crate::config::model::ResolveSpec {
        host: url.host.to_ascii_lowercase(),
        port: url.port,
        service: None,
        derived: false,
    })
}

/// Round robin and least_conn take `backup` (and `slow_start`); hash, ip_hash and random do not.
fn allows_backup(method: &Method) -> bool {
    matches!(
        method,
        Method::RoundRobin | Method::LeastConn | Method::LeastTime { .. }
    )
}

/// The address of a `server` parameter: an IP address with a port (http's default port is 80). A name needs the
/// upstream's resolver (nginx Plus's refusal without one; with one, [`modified`] makes it a `resolve` server).
fn address(text: &str, block: Block) -> Result<SocketAddr, ApiError> {
    let opts = UrlOpts {
        default_port: if block == Block::Http { 80 } else { 0 },
        no_resolve: true,
        ..UrlOpts::default()
    };
    let bad = |msg: String| ApiError::new(400, "UpstreamBadAddress", msg);
    let url = url::parse_url(text, opts).map_err(|e| bad(format!("{e} while parsing \"{text}\"")))?;
    if block == Block::Stream && url.no_port {
        return Err(bad(format!("no port in server \"{text}\"")));
    }
    match url.addrs.as_slice() {
        [addr] => Ok(*addr),
        [] => {
            let msg = format!("no resolver defined to resolve {}", url.host);
            Err(ApiError::new(400, "UpstreamConfNoResolver", msg))
        }
        _ => Err(bad(format!("invalid \"server\" argument \"{text}\""))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// A JSON value of the kinds a client might send for a server field, well-formed or not.
    fn field_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            any::<bool>().prop_map(|b| b.to_string()),
            Just("null".to_string()),
            "[0-9a-z:.\\[\\]-]{0,24}".prop_map(|t| format!("{t:?}")),
            Just("\"127.0.0.1:8081\"".to_string()),
            Just("\"10s\"".to_string()),
        ]
    }

    proptest! {
        /// Whatever a client sends for a new server, the answer is a clean refusal or a server line within nginx's
        /// ranges: never a panic, never a zero weight.
        #[test]
        fn any_body_is_refused_or_makes_a_sane_server(
            fields in prop::collection::vec((
                prop::sample::select(vec!["server", "weight", "max_conns", "max_fails", "fail_timeout",
                    "slow_start", "backup", "down", "drain", "route", "bogus"]),
                field_value(),
            ), 0..7),
            stream in any::<bool>(),
        ) {
            let text = format!(
                "{{{}}}",
                fields.iter().map(|(k, v)| format!("{k:?}:{v}")).collect::<Vec<_>>().join(",")
            );
            let block = if stream { Block::Stream } else { Block::Http };
            if let Ok(body) = super::super::body::parse(text.as_bytes(), block) {
                match new_line(&body, block, &conf(Method::RoundRobin)) {
                    Ok(line) => {
                        prop_assert!(line.weight >= 1, "{text}: weight {}", line.weight);
                        prop_assert!(!line.addrs.is_empty(), "{text}");
                    }
                    Err(e) => prop_assert!((400..500).contains(&e.status), "{text}: {e}"),
                }
            }
        }
    }

    fn conf(method: Method) -> UpstreamConf {
        UpstreamConf::new("u", method, Vec::new())
    }

    fn body(server: &str) -> ServerBody {
        ServerBody {
            server: Some(server.into()),
            ..ServerBody::default()
        }
    }

    #[test]
    fn addresses_are_ip_literals_with_a_port() {
        assert_eq!(
            address("127.0.0.1:81", Block::Stream).unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 81))
        );
        assert_eq!(
            address("127.0.0.1", Block::Http).unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 80))
        );
        assert_eq!(address("[::1]:9", Block::Http).unwrap().port(), 9);
        let e = address("127.0.0.1", Block::Stream).unwrap_err();
        assert_eq!(
            (e.code, e.text.as_str()),
            ("UpstreamBadAddress", "no port in server \"127.0.0.1\"")
        );
        assert_eq!(
            address("example.com:80", Block::Http).unwrap_err().code,
            "UpstreamConfNoResolver"
        );
        assert_eq!(
            address("127.0.0.1:99999", Block::Http).unwrap_err().code,
            "UpstreamBadAddress"
        );
    }

    #[test]
    fn new_lines_take_nginx_defaults_and_the_body() {
        let rr = conf(Method::RoundRobin);
        let l = new_line(&body("127.0.0.1:81"), Block::Http, &rr).unwrap();
        assert_eq!(
            (
                l.text.as_str(),
                l.weight,
                l.max_fails,
                l.fail_timeout.as_secs(),
                l.backup,
                l.down
            ),
            ("127.0.0.1:81", 1, 1, 10, false, false)
        );
        let e = new_line(&ServerBody::default(), Block::Http, &rr).unwrap_err();
        assert_eq!((e.status, e.text.as_str()), (400, "missing \"server\" argument"));
        let backup = ServerBody {
            backup: Some(true),
            ..body("127.0.0.1:81")
        };
        assert!(new_line(&backup, Block::Http, &rr).unwrap().backup);
        assert_eq!(
            new_line(&backup, Block::Http, &conf(Method::IpHash)).unwrap_err().code,
            "UpstreamNoBackup"
        );
    }

    #[test]
    fn modifications_keep_what_the_body_leaves_alone() {
        let rr = conf(Method::RoundRobin);
        let l = new_line(&body("127.0.0.1:81"), Block::Http, &rr).unwrap();
        let patch = ServerBody {
            weight: Some(3),
            down: Some(true),
            ..ServerBody::default()
        };
        let m = modified(l.clone(), &patch, Block::Http, &rr).unwrap();
        assert_eq!(
            (m.weight, m.down, m.text.as_str(), m.max_fails),
            (3, true, "127.0.0.1:81", 1)
        );
        let flip = ServerBody {
            backup: Some(true),
            ..ServerBody::default()
        };
        assert_eq!(modified(l.clone(), &flip, Block::Http, &rr).unwrap_err().status, 400);
        let slow = ServerBody {
            slow_start: Some(Duration::from_secs(5)),
            ..ServerBody::default()
        };
        assert!(modified(l.clone(), &slow, Block::Http, &rr).is_ok());
        assert_eq!(
            modified(l, &slow, Block::Http, &conf(Method::IpHash)).unwrap_err().code,
            "UpstreamBadSlowStart"
        );
    }

    #[test]
    fn lines_explode_one_per_address() {
        let mut c = conf(Method::RoundRobin);
        let mut l = new_line(&body("127.0.0.1:81"), Block::Http, &c).unwrap();
        l.text = "both".into();
        l.addrs.push(SocketAddr::from(([127, 0, 0, 2], 81)));
        c.servers = vec![l];
        let e = exploded(&c);
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|l| l.text == "both" && l.addrs.len() == 1));
        assert_eq!(key_of(&c, &e[1]).addr, SocketAddr::from(([127, 0, 0, 2], 81)));
    }
}
