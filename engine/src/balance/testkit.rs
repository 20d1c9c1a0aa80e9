//! Test helpers for the balancers: plans built by hand from the config model, and a driver that runs requests.

use super::{Attempt, AttemptState, Outcome, Peer, PeerList, ShardState, UpstreamPlan};
use crate::config::model::{Method, ServerLine, UpstreamConf};
use corelb_shared_state::PeerSlot;
use std::net::SocketAddr;
use std::sync::Arc;

/// A test clock reading, in epoch-like seconds (well past every `fail_timeout`).
pub const NOW: u64 = 1_000_000;

/// A `server` line with nginx's defaults (weight 1, max_fails 1, fail_timeout 10s). The text is also parsed as the
/// address when it is one (127.0.0.1:80 otherwise).
pub fn line(text: &str) -> ServerLine {
    let addr = text.parse().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 80)));
    ServerLine::new(text, vec![addr])
}

/// A line `text` with `weight`.
pub fn weighted(text: &str, weight: u32) -> ServerLine {
    ServerLine { weight, ..line(text) }
}

/// The three test servers of docs/algorithms.md's tables, s1..s3.
pub const S: [&str; 3] = ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"];

/// The tables' name (`s1`..`s3`) of a test server's text.
pub fn short(text: &str) -> &str {
    match text {
        "127.0.0.1:8081" => "s1",
        "127.0.0.1:8082" => "s2",
        "127.0.0.1:8083" => "s3",
        other => other,
    }
}

/// s1..s3 with `weights`, the ones in `down` marked down.
pub fn spec_servers(weights: [u32; 3], down: &[usize]) -> Vec<ServerLine> {
    S.iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (s, w))| ServerLine {
            down: down.contains(&i),
            ..weighted(s, w)
        })
        .collect()
}

/// The plan of an upstream `u` with `method` over `servers`, each peer with a fresh slot.
pub fn plan(method: Method, servers: Vec<ServerLine>) -> UpstreamPlan {
    let conf = UpstreamConf::new("u", method, servers);
    UpstreamPlan::build_with(&conf, || Arc::new(PeerSlot::new())).expect("test upstreams have servers")
}

/// A bare primary list named a, b, c, ... with `weights`.
pub fn peer_list(weights: &[u32]) -> PeerList {
    let peers = weights
        .iter()
        .zip('a'..)
        .map(|(&weight, name)| Peer {
            server: Arc::from(name.to_string().as_str()),
            addr: SocketAddr::from(([127, 0, 0, 1], 80)),
            weight,
            max_fails: 1,
            fail_timeout: 10,
            max_conns: 0,
            slow_start: 0,
            down: false,
            weight_source: super::WeightSource::Config,
            slot: Arc::new(PeerSlot::new()),
        })
        .collect();
    PeerList::new(peers)
}

/// An upstream plan with its shard state, driven request by request.
pub struct Lab {
    pub plan: UpstreamPlan,
    pub shard: ShardState,
}

impl Lab {
    /// A lab over `servers` with `method`, the shard's RNG seeded with 7.
    pub fn new(method: Method, servers: Vec<ServerLine>) -> Lab {
        let plan = plan(method, servers);
        let shard = ShardState::seeded(&plan, 7);
        Lab { plan, shard }
    }

    /// Round robin over peers named a, b, c, ... with `weights`.
    pub fn named(method: Method, weights: &[u32]) -> Lab {
        let servers = weights
            .iter()
            .zip('a'..)
            .map(|(&w, n)| weighted(&n.to_string(), w))
            .collect();
        Lab::new(method, servers)
    }

    /// One request: a pick per entry of `script`, each reported with that outcome, until the script ends, the
    /// tries run out, or a pick finds nothing (recorded as `None`). Returns the picked servers' texts.
    pub fn run(&mut self, key: &[u8], now: u64, script: &[Outcome]) -> Vec<Option<String>> {
        let mut attempt = Attempt::new(&self.plan, 0, key);
        let mut picks = Vec::new();
        for &outcome in script {
            let Some(peer) = attempt.pick(&mut self.shard, key, now) else {
                picks.push(None);
                break;
            };
            picks.push(Some(peer.server.to_string()));
            attempt.report(outcome, &mut self.shard, now);
            if attempt.tries_left() == 0 {
                break;
            }
        }
        picks
    }

    /// One request whose first pick succeeds: the picked server's text, `None` for a 502.
    pub fn serve(&mut self, key: &[u8], now: u64) -> Option<String> {
        self.run(key, now, &[Outcome::Success]).pop().flatten()
    }

    /// One request where every pick fails until the tries run out: the picked servers' short names.
    pub fn fail_all(&mut self, key: &[u8], now: u64) -> Vec<String> {
        let script = vec![Outcome::Failed; 64];
        self.run(key, now, &script)
            .into_iter()
            .map(|p| p.map_or_else(|| "502".to_string(), |s| short(&s).to_string()))
            .collect()
    }

    /// One request where every pick fails until the tries run out (or a pick finds nothing): the picked
    /// servers' short names, and the request's balancer state at the end.
    pub fn fail_walk(&mut self, key: &[u8], now: u64) -> (Vec<String>, AttemptState) {
        let mut attempt = Attempt::new(&self.plan, 0, key);
        let mut picks = Vec::new();
        while attempt.tries_left() > 0 {
            let Some(peer) = attempt.pick(&mut self.shard, key, now) else {
                break;
            };
            picks.push(short(&peer.server).to_string());
            attempt.report(Outcome::Failed, &mut self.shard, now);
        }
        (picks, attempt.state().clone())
    }

    /// The primary list's current weights.
    pub fn cw(&self) -> Vec<i64> {
        self.shard.primary.current.clone()
    }

    /// The primary list's effective weights.
    pub fn ew(&self) -> Vec<i64> {
        self.shard.primary.effective.clone()
    }

    /// Primary peer `i`.
    pub fn peer(&self, i: usize) -> &Peer {
        &self.plan.primary.peers[i]
    }
}

/// Short names of a pick list (`None` as "502").
pub fn names(picks: &[Option<String>]) -> Vec<&str> {
    picks.iter().map(|p| p.as_deref().map_or("502", short)).collect()
}
