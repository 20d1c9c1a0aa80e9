//! Balancers: one trait, nginx's split (a plan built at config load, a per-request attempt, the outcome reported
//! back), one file per algorithm.
//!
//! * [`plan`]: the immutable, shared part (peers as plain data, each bound to its zone slot), built once per load.
//! * [`ShardState`]: what nginx keeps per worker (SWRR `current`/`effective` weights, the RNG): private to a shard.
//! * [`Attempt`]: one request's walk over the peers (`tried` set, tries budget, hash state, the `conns` guard).
//! * [`Balancer::choose`]: nginx's `get`, pure: no sockets, no clock (time is passed in), RNG from the shard state.

pub mod attempt;
pub mod bounded_load;
pub mod next;
pub mod plan;
pub mod swrr;

pub mod consistent_hash;
pub mod fair;
pub mod hash;
pub mod ip_hash;
pub mod least_conn;
pub mod least_time;
pub mod maglev;
pub mod peak_ewma;
pub mod random;
pub mod random_least_time;
pub mod ranges;
pub mod round_robin;
pub mod sticky;
#[cfg(test)]
mod testkit;
pub mod two_choice;

pub use attempt::{Attempt, AttemptState, Outcome};
pub use plan::{KeySpec, ListKind, Peer, PeerList, PlanError, UpstreamPlan, WeightSource};

use crate::config::model::{Method, RandomTwo};
use consistent_hash::ConsistentHash;
use hash::Hash;
use ip_hash::IpHash;
use least_conn::LeastConn;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use random::Random;
use round_robin::RoundRobin;
use std::fmt;

/// The peer a balancer chose: which list, which index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The list the peer is on.
    pub list: ListKind,
    /// Its index in that list.
    pub index: usize,
}

/// Everything one `choose` call may read and change.
pub struct PickCx<'a> {
    /// The upstream being picked from.
    pub plan: &'a UpstreamPlan,
    /// The shard's private state for it (SWRR weights, RNG).
    pub shard: &'a mut ShardState,
    /// The request's walk so far (tried peers, tries, hash state).
    pub attempt: &'a mut AttemptState,
    /// The request's key bytes: the evaluated `hash` template, or the address bytes for `ip_hash`; empty otherwise.
    pub key: &'a [u8],
    /// Whole seconds since the epoch, read once for this pick by the caller ([`crate::clock::now_secs`]; nginx
    /// reads its per-loop-turn cache `ngx_time()`).
    pub now: u64,
    /// Milliseconds since the epoch, read with `now` (`least_time`'s in-flight ages; nginx's `ngx_current_msec`).
    pub now_ms: u64,
}

/// A load-balancing method. Implementations hold what they precompute at config load (a hash ring, weight ranges)
/// and are shared read-only by every shard.
pub trait Balancer: Send + Sync + fmt::Debug {
    /// nginx's `get`: chooses a usable, untried peer for this attempt, updating shard-private weights and the
    /// attempt's hash state as nginx does. It must not touch `conns` or `checked`: [`Attempt::pick`] does that
    /// (nginx's on-select step) for the choice returned. `None` is nginx's BUSY ("no live upstreams", 502).
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice>;

    /// Called once when an attempt starts (e.g. the consistent hash locates the key on its ring).
    fn start(&self, _attempt: &mut AttemptState, _key: &[u8]) {}

    /// The method's name as in the config (`round_robin`, `ip_hash`, `hash`, ...), for messages and metrics.
    fn name(&self) -> &'static str;
}

/// Shard-private SWRR weights of one peer list.
#[derive(Debug, Clone, Default)]
pub struct Weights {
    /// `current_weight` per peer.
    pub current: Vec<i64>,
    /// `effective_weight` per peer.
    pub effective: Vec<i64>,
}

impl Weights {
    /// Fresh weights for `list`: current 0, effective = weight.
    pub fn new(list: &PeerList) -> Self {
        Weights {
            current: vec![0; list.peers.len()],
            effective: list.peers.iter().map(|p| i64::from(p.weight)).collect(),
        }
    }

    /// See [`ShardState::reweigh`].
    fn reweigh(&mut self, list: &PeerList) {
        if self.effective.len() != list.peers.len() || self.current.len() != list.peers.len() {
            *self = Weights::new(list);
            return;
        }
        for (ew, p) in self.effective.iter_mut().zip(&list.peers) {
            *ew = (*ew).min(i64::from(p.weight));
        }
    }
}

/// What one shard keeps for one upstream, as nginx keeps it per worker: never shared, never locked.
#[derive(Debug, Clone)]
pub struct ShardState {
    /// SWRR weights of the primary list.
    pub primary: Weights,
    /// SWRR weights of the backup list.
    pub backup: Weights,
    /// The shard's random generator (`random`), seeded per shard.
    pub rng: SmallRng,
    /// Requests of this shard waiting in the upstream's `queue`.
    pub queued: u32,
}

impl ShardState {
    /// Fresh state for `plan`, with an injected random source (seeded in tests, from entropy in shards).
    pub fn new(plan: &UpstreamPlan, rng: SmallRng) -> Self {
        ShardState {
            primary: Weights::new(&plan.primary),
            backup: Weights::new(&plan.backup),
            rng,
            queued: 0,
        }
    }

    /// Fresh state with a fixed seed.
    pub fn seeded(plan: &UpstreamPlan, seed: u64) -> Self {
        Self::new(plan, SmallRng::seed_from_u64(seed))
    }

    /// Carries this state over to `plan`, the same peers with new weights: each peer keeps its `current_weight`,
    /// and its `effective_weight` is kept up to the new weight (a lower weight applies at once, a higher one is
    /// reached by one per pass, as after a failure). A list whose length changed starts afresh.
    pub fn reweigh(&mut self, plan: &UpstreamPlan) {
        self.primary.reweigh(&plan.primary);
        self.backup.reweigh(&plan.backup);
    }

    /// The weights of one list.
    pub fn weights(&mut self, list: ListKind) -> &mut Weights {
        match list {
            ListKind::Primary => &mut self.primary,
            ListKind::Backup => &mut self.backup,
        }
    }
}

/// Builds the balancer for `method` over `primary` (the consistent-hash ring and the random ranges are made here,
/// once per load), and says which key a request must supply.
pub fn build_balancer(method: &Method, primary: &PeerList) -> (Box<dyn Balancer>, KeySpec) {
    match method {
        Method::RoundRobin => (Box::new(RoundRobin), KeySpec::None),
        Method::IpHash => (Box::new(IpHash::build(primary)), KeySpec::ClientAddr),
        Method::Hash { key, consistent: false } => (Box::new(Hash::build(primary)), KeySpec::Template(key.clone())),
        Method::Hash { key, consistent: true } => {
            (Box::new(ConsistentHash::build(primary)), KeySpec::Template(key.clone()))
        }
        Method::Maglev { key } => (Box::new(maglev::Maglev::build(primary)), KeySpec::Template(key.clone())),
        &Method::BoundedHash { ref key, factor } => (
            Box::new(bounded_load::BoundedLoad::build(primary, factor)),
            KeySpec::Template(key.clone()),
        ),
        &Method::Fair { no_rr, weight_mode } => {
            let conf = fair::FairConf { no_rr, weight_mode };
            (Box::new(fair::Fair::build(primary, conf)), KeySpec::None)
        }
        Method::LeastConn => (Box::new(LeastConn), KeySpec::None),
        Method::Random {
            two: Some(RandomTwo::PeakEwma),
        } => (
            Box::new(two_choice::TwoChoice::build(primary, peak_ewma::PeakEwmaLoad)),
            KeySpec::None,
        ),
        &Method::Random {
            two: Some(RandomTwo::LeastTime(mode)),
        } => {
            let conf = least_time::LeastTimeConf { mode, inflight: false };
            let load = random_least_time::LeastTimeLoad(conf);
            (Box::new(two_choice::TwoChoice::build(primary, load)), KeySpec::None)
        }
        Method::Random { two } => (Box::new(Random::build(primary, two.is_some())), KeySpec::None),
        &Method::LeastTime { mode, inflight } => (
            Box::new(least_time::LeastTime(least_time::LeastTimeConf { mode, inflight })),
            KeySpec::None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::KeyTemplate;

    #[test]
    fn a_reweigh_keeps_current_weights_and_caps_effective_ones() {
        use testkit::{plan, weighted};
        let old = plan(
            Method::RoundRobin,
            vec![weighted("127.0.0.1:1", 5), weighted("127.0.0.1:2", 5)],
        );
        let mut st = ShardState::seeded(&old, 1);
        st.primary.current = vec![3, -3];
        st.primary.effective = vec![5, 2];
        let new = plan(
            Method::RoundRobin,
            vec![weighted("127.0.0.1:1", 1), weighted("127.0.0.1:2", 9)],
        );
        st.reweigh(&new);
        // a lower weight applies at once; a higher one is reached by one per pass
        assert_eq!(
            (st.primary.current.clone(), st.primary.effective.clone()),
            (vec![3, -3], vec![1, 2])
        );
        let grown = plan(
            Method::RoundRobin,
            vec![
                weighted("127.0.0.1:1", 1),
                weighted("127.0.0.1:2", 9),
                weighted("127.0.0.1:3", 1),
            ],
        );
        st.reweigh(&grown);
        assert_eq!(
            (st.primary.current.clone(), st.primary.effective.clone()),
            (vec![0; 3], vec![1, 9, 1])
        );
    }

    #[test]
    fn every_method_builds_its_balancer_and_key() {
        let key = KeyTemplate::compile("$request_uri").expect("a valid template");
        let cases = [
            (Method::RoundRobin, "round_robin", KeySpec::None),
            (Method::IpHash, "ip_hash", KeySpec::ClientAddr),
            (
                Method::Hash {
                    key: key.clone(),
                    consistent: false,
                },
                "hash",
                KeySpec::Template(key.clone()),
            ),
            (
                Method::Hash {
                    key: key.clone(),
                    consistent: true,
                },
                "hash consistent",
                KeySpec::Template(key.clone()),
            ),
            (
                Method::Maglev { key: key.clone() },
                "hash maglev",
                KeySpec::Template(key.clone()),
            ),
            (
                Method::BoundedHash {
                    key: key.clone(),
                    factor: 150,
                },
                "hash consistent balance_factor",
                KeySpec::Template(key.clone()),
            ),
            (
                Method::Fair {
                    no_rr: false,
                    weight_mode: crate::config::model::FairWeightMode::Default,
                },
                "fair",
                KeySpec::None,
            ),
            (Method::LeastConn, "least_conn", KeySpec::None),
            (Method::Random { two: None }, "random", KeySpec::None),
            (
                Method::Random {
                    two: Some(RandomTwo::LeastConn),
                },
                "random two least_conn",
                KeySpec::None,
            ),
            (
                Method::Random {
                    two: Some(RandomTwo::PeakEwma),
                },
                "random two ewma",
                KeySpec::None,
            ),
            (
                Method::Random {
                    two: Some(RandomTwo::LeastTime(crate::config::model::LeastTimeMode::Header)),
                },
                "random two least_time",
                KeySpec::None,
            ),
            (
                Method::LeastTime {
                    mode: crate::config::model::LeastTimeMode::Header,
                    inflight: true,
                },
                "least_time",
                KeySpec::None,
            ),
        ];
        for (method, name, spec) in cases {
            let plan = testkit::plan(method, testkit::spec_servers([1, 1, 1], &[]));
            assert_eq!((plan.balancer.name(), &plan.key), (name, &spec));
        }
    }

    #[test]
    fn every_method_skips_unhealthy_and_checking_peers() {
        use corelb_shared_state::PeerFlags;
        let key = KeyTemplate::compile("$request_uri").expect("a valid template");
        let methods = [
            Method::RoundRobin,
            Method::IpHash,
            Method::Hash {
                key: key.clone(),
                consistent: false,
            },
            Method::Hash {
                key: key.clone(),
                consistent: true,
            },
            Method::Maglev { key: key.clone() },
            Method::BoundedHash { key, factor: 125 },
            Method::Fair {
                no_rr: true,
                weight_mode: crate::config::model::FairWeightMode::Idle,
            },
            Method::LeastConn,
            Method::Random { two: None },
            Method::Random {
                two: Some(RandomTwo::LeastConn),
            },
            Method::Random {
                two: Some(RandomTwo::PeakEwma),
            },
            Method::Random {
                two: Some(RandomTwo::LeastTime(crate::config::model::LeastTimeMode::LastByte)),
            },
            Method::LeastTime {
                mode: crate::config::model::LeastTimeMode::LastByte,
                inflight: false,
            },
        ];
        for method in methods {
            let mut lab = testkit::Lab::new(method.clone(), testkit::spec_servers([1, 1, 1], &[]));
            lab.peer(0).slot.set_flags(PeerFlags::UNHEALTHY);
            lab.peer(1).slot.set_flags(PeerFlags::CHECKING);
            // keys of every kind, so the hash walks and their round-robin fallbacks all run
            for k in 0..50u32 {
                let key = format!("/k{k}");
                let got = lab.serve(key.as_bytes(), testkit::NOW);
                assert_eq!(got.as_deref(), Some(testkit::S[2]), "{method:?} {key}");
            }
            lab.peer(2).slot.set_flags(PeerFlags::UNHEALTHY);
            assert_eq!(lab.serve(b"/x", testkit::NOW), None, "{method:?}: all blocked is a 502");
            // the lone-server path
            let mut single = testkit::Lab::new(method.clone(), vec![testkit::line(testkit::S[0])]);
            single.peer(0).slot.set_flags(PeerFlags::UNHEALTHY);
            assert_eq!(single.serve(b"/x", testkit::NOW), None, "{method:?} single");
            single.peer(0).slot.clear_flags(PeerFlags::UNHEALTHY);
            assert!(single.serve(b"/x", testkit::NOW).is_some(), "{method:?} single");
        }
    }
}
