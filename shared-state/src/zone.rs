//! `Zone`: the registry of peer slots by identity, consulted at config load so a reload keeps unchanged peers' state.

use crate::shard_slot::{ShardSlot, ShardStats};
use crate::slot::PeerSlot;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A peer's identity: the upstream it belongs to, the text of its `server` line, and the resolved address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerKey {
    pub upstream: String,
    pub server: String,
    pub addr: SocketAddr,
}

/// The shared zone. Only config loads (the control plane) take its lock; shards hold `Arc<PeerSlot>`s through the
/// config snapshot and never touch the map.
#[derive(Debug, Default)]
pub struct Zone {
    generation: AtomicU64,
    slots: Mutex<HashMap<PeerKey, Arc<PeerSlot>>>,
    /// One counter record per shard, by shard index; they live as long as the zone (a reload keeps them).
    shards: Mutex<Vec<Arc<ShardSlot>>>,
}

impl Zone {
    /// An empty zone at generation 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds a config's peers to slots, in the order given: a peer whose identity is already in the zone keeps its
    /// slot (and so its `conns`, `fails` and flags); a new one gets a fresh slot; slots of peers not in `keys` leave
    /// the zone (in-flight holders keep theirs alive until they finish). Bumps the generation.
    pub fn attach(&self, keys: &[PeerKey]) -> Vec<Arc<PeerSlot>> {
        let mut map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = HashMap::with_capacity(keys.len());
        let out = keys
            .iter()
            .map(|k| {
                let slot = next
                    .get(k)
                    .or_else(|| map.get(k))
                    .cloned()
                    .unwrap_or_else(|| Arc::new(PeerSlot::new()));
                next.insert(k.clone(), slot.clone());
                slot
            })
            .collect();
        *map = next;
        self.generation.fetch_add(1, Ordering::Release);
        out
    }

    /// The slot of a peer, if the current config has it.
    pub fn get(&self, key: &PeerKey) -> Option<Arc<PeerSlot>> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// How many peers the zone holds.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the zone holds no peer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counter slot of shard `index`, created on first use. Shards ask once, at start-up.
    pub fn shard_slot(&self, index: usize) -> Arc<ShardSlot> {
        let mut shards = self.shards.lock().unwrap_or_else(PoisonError::into_inner);
        while shards.len() <= index {
            shards.push(Arc::new(ShardSlot::new()));
        }
        Arc::clone(&shards[index])
    }

    /// Every shard's counters, by shard index.
    pub fn shard_stats(&self) -> Vec<ShardStats> {
        self.shards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|s| s.stats())
            .collect()
    }

    /// How many times a config has been attached.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(up: &str, server: &str, port: u16) -> PeerKey {
        PeerKey {
            upstream: up.into(),
            server: server.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    #[test]
    fn reload_keeps_unchanged_peers() {
        let z = Zone::new();
        let a = key("u", "127.0.0.1:1", 1);
        let b = key("u", "127.0.0.1:2", 2);
        let first = z.attach(&[a.clone(), b.clone()]);
        first[0].record_failure(5);
        let g = first[1].try_acquire(0).unwrap();
        let c = key("u", "127.0.0.1:3", 3);
        let second = z.attach(&[b.clone(), c.clone()]);
        assert!(Arc::ptr_eq(&first[1], &second[0]));
        assert_eq!(second[0].conns(), 1);
        assert_eq!(second[1].conns(), 0);
        assert!(z.get(&a).is_none(), "a removed peer leaves the zone");
        assert_eq!(z.len(), 2);
        assert_eq!(z.generation(), 2);
        drop(g);
        assert_eq!(second[0].conns(), 0);
        // the same peer in another upstream is another identity
        let other = z.attach(&[key("v", "127.0.0.1:2", 2)]);
        assert!(!Arc::ptr_eq(&other[0], &second[0]));
    }

    #[test]
    fn each_shard_has_its_own_slot_for_the_zone_lifetime() {
        let z = Zone::new();
        let s2 = z.shard_slot(2);
        let s0 = z.shard_slot(0);
        assert!(!Arc::ptr_eq(&s0, &s2));
        assert!(Arc::ptr_eq(&s2, &z.shard_slot(2)));
        s2.count_request();
        z.attach(&[key("u", "x", 1)]);
        let stats = z.shard_stats();
        assert_eq!(stats.len(), 3);
        assert_eq!(stats.iter().map(|s| s.requests).collect::<Vec<_>>(), [0, 0, 1]);
    }

    #[test]
    fn duplicate_keys_share_a_slot() {
        let z = Zone::new();
        let a = key("u", "x", 1);
        let s = z.attach(&[a.clone(), a]);
        assert!(Arc::ptr_eq(&s[0], &s[1]));
    }
}
