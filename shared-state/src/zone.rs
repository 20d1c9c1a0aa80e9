//! `Zone`: the registry of peer slots by identity, consulted at config load so a reload keeps unchanged peers' state.

use crate::limit::{ConnTable, ReqTable};
use crate::resolver::ResolverStats;
use crate::shard_slot::{ShardSlot, ShardStats};
use crate::slot::PeerSlot;
use crate::sticky::LearnTable;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A peer's identity: the upstream it belongs to, the text of its `server` line, and the resolved address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerKey {
    /// The upstream's name.
    pub upstream: String,
    /// The `server` line's argument as written.
    pub server: String,
    /// The address it resolved to.
    pub addr: SocketAddr,
    /// Which of the upstream's peers with this server text and address it is (0: the first): nginx counts each
    /// line as a peer of its own, with its own connections (so two `server A max_conns=1;` lines take two).
    pub nth: u32,
}

/// The shared zone. Only config loads (the control plane) take its lock; shards hold `Arc<PeerSlot>`s through the
/// config snapshot and never touch the map.
#[derive(Debug, Default)]
pub struct Zone {
    generation: AtomicU64,
    registry: Mutex<Registry>,
    /// One counter record per shard, by shard index; they live as long as the zone (a reload keeps them).
    shards: Mutex<Vec<Arc<ShardSlot>>>,
    /// `sticky learn` session tables by zone name; a reload keeps a table of the same size and upstream.
    sticky: Mutex<HashMap<String, Arc<LearnTable>>>,
    /// `limit_req_zone` tables by zone name; a reload keeps a table of the same key and size.
    limit_req: Mutex<HashMap<String, Arc<ReqTable>>>,
    /// `limit_conn_zone` tables by block (`http`, `stream`) and zone name, kept as `limit_req`'s.
    limit_conn: Mutex<HashMap<(bool, String), Arc<ConnTable>>>,
    /// The resolvers' `status_zone=` counters by zone name; a reload keeps those of a name it still uses.
    resolvers: Mutex<HashMap<String, Arc<ResolverStats>>>,
}

/// The slots by identity, and what gives each new peer its id.
#[derive(Debug, Default)]
struct Registry {
    slots: HashMap<PeerKey, Arc<PeerSlot>>,
    /// Per upstream name: the id the next new peer gets (ids are never reused within an upstream).
    next_id: HashMap<String, u32>,
    /// Ids asked for new identities by [`Zone::prefer_id`], taken by the next attach of their upstream.
    wished: HashMap<PeerKey, u32>,
    /// Slots that left the zone with connections still active (nginx Plus's "zombies"), by upstream name.
    retired: Vec<(String, Weak<PeerSlot>)>,
}

impl Registry {
    fn new_slot(&mut self, key: &PeerKey) -> Arc<PeerSlot> {
        let id = match self.wished.remove(key) {
            Some(id) => id,
            None => {
                let next = self.next_id.entry(key.upstream.clone()).or_insert(0);
                let id = *next;
                *next = next.saturating_add(1);
                id
            }
        };
        Arc::new(PeerSlot::with_id(id))
    }
}

impl Zone {
    /// An empty zone at generation 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds the peers of the upstreams named in `keys` to slots, in the order given: a peer whose identity is
    /// already in the zone keeps its slot (and so its `conns`, `fails`, flags and id); a new one gets a fresh slot
    /// with the next id of its upstream. Slots of those upstreams' peers not in `keys` leave the zone (in-flight
    /// holders keep theirs alive until they finish); other upstreams' slots stay. Bumps the generation.
    pub fn attach(&self, keys: &[PeerKey]) -> Vec<Arc<PeerSlot>> {
        let mut reg = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let upstreams: HashSet<&str> = keys.iter().map(|k| k.upstream.as_str()).collect();
        let mut next: HashMap<PeerKey, Arc<PeerSlot>> = HashMap::with_capacity(keys.len());
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let slot = match next.get(k).or_else(|| reg.slots.get(k)) {
                Some(s) => Arc::clone(s),
                None => reg.new_slot(k),
            };
            next.insert(k.clone(), Arc::clone(&slot));
            out.push(slot);
        }
        let mut leaving = Vec::new();
        reg.slots.retain(|k, s| {
            let stays = !upstreams.contains(k.upstream.as_str());
            if !stays && !next.contains_key(k) && s.conns() > 0 {
                leaving.push((k.upstream.clone(), Arc::downgrade(s)));
            }
            stays
        });
        reg.retired.extend(leaving);
        reg.slots.extend(next);
        reg.wished.retain(|k, _| !upstreams.contains(k.upstream.as_str()));
        self.generation.fetch_add(1, Ordering::Release);
        out
    }

    /// Drops the slots (and id counters) of upstreams not in `names`: a config without an upstream forgets it, so
    /// an upstream of that name added later starts fresh. Slots with active connections become zombies.
    pub fn retain_upstreams(&self, names: &[&str]) {
        let mut reg = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut leaving = Vec::new();
        reg.slots.retain(|k, s| {
            let stays = names.contains(&k.upstream.as_str());
            if !stays && s.conns() > 0 {
                leaving.push((k.upstream.clone(), Arc::downgrade(s)));
            }
            stays
        });
        reg.retired.extend(leaving);
        reg.next_id.retain(|name, _| names.contains(&name.as_str()));
        reg.wished.retain(|k, _| names.contains(&k.upstream.as_str()));
    }

    /// Asks that `key`, when the next attach of its upstream makes a fresh slot for it, take `id` (an API change
    /// of a server's address keeps its id, as nginx Plus does).
    pub fn prefer_id(&self, key: PeerKey, id: u32) {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wished
            .insert(key, id);
    }

    /// Peers of `upstream` that left the zone but still have active connections (nginx Plus's `zombies`).
    pub fn zombies(&self, upstream: &str) -> usize {
        let mut reg = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        reg.retired.retain(|(_, w)| w.upgrade().is_some_and(|s| s.conns() > 0));
        reg.retired.iter().filter(|(name, _)| name == upstream).count()
    }

    /// The slot of a peer, if the current config has it.
    pub fn get(&self, key: &PeerKey) -> Option<Arc<PeerSlot>> {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .slots
            .get(key)
            .cloned()
    }

    /// How many peers the zone holds.
    pub fn len(&self) -> usize {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner).slots.len()
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

    /// The `sticky learn` table of zone `name` for `upstream`: the one kept from the last load when its size is
    /// the same, else a fresh one (nginx makes a new zone when its size changes). `Err` names the upstream that
    /// used the zone before (nginx refuses the move).
    pub fn sticky_table(&self, name: &str, upstream: &str, size: u64) -> Result<Arc<LearnTable>, String> {
        let mut tables = self.sticky.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = tables.get(name) {
            if t.upstream() != upstream {
                return Err(t.upstream().to_string());
            }
            if t.size() == size {
                return Ok(Arc::clone(t));
            }
        }
        let t = Arc::new(LearnTable::new(upstream, size));
        tables.insert(name.to_string(), Arc::clone(&t));
        Ok(t)
    }

    /// Forgets the `sticky learn` tables whose zone names are not in `names` (a config that drops a zone).
    pub fn retain_sticky(&self, names: &[&str]) {
        let mut tables = self.sticky.lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|name, _| names.contains(&name.as_str()));
    }

    /// The `limit_req_zone` table `name`: the one kept from the last load when its key and size are the same,
    /// else a fresh one (nginx makes a new zone when its size changes). `Err` gives the key the zone used before
    /// (nginx refuses a reload that changes it).
    pub fn limit_req_table(&self, name: &str, key: &str, size: u64) -> Result<Arc<ReqTable>, String> {
        let mut tables = self.limit_req.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = tables.get(name) {
            if t.key() != key {
                return Err(t.key().to_string());
            }
            if t.size() == size {
                return Ok(Arc::clone(t));
            }
        }
        let t = Arc::new(ReqTable::new(key, size));
        tables.insert(name.to_string(), Arc::clone(&t));
        Ok(t)
    }

    /// The `limit_conn_zone` table `name` of the stream (`stream`) or http block, kept as
    /// [`Zone::limit_req_table`]'s.
    pub fn limit_conn_table(&self, stream: bool, name: &str, key: &str, size: u64) -> Result<Arc<ConnTable>, String> {
        let mut tables = self.limit_conn.lock().unwrap_or_else(PoisonError::into_inner);
        let id = (stream, name.to_string());
        if let Some(t) = tables.get(&id) {
            if t.key() != key {
                return Err(t.key().to_string());
            }
            if t.size() == size {
                return Ok(Arc::clone(t));
            }
        }
        let t = Arc::new(ConnTable::new(key, size));
        tables.insert(id, Arc::clone(&t));
        Ok(t)
    }

    /// Forgets the limit tables a config no longer names (`req`: `limit_req_zone` names; `conn`: block and name).
    pub fn retain_limits(&self, req: &[&str], conn: &[(bool, &str)]) {
        let mut tables = self.limit_req.lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|name, _| req.contains(&name.as_str()));
        drop(tables);
        let mut tables = self.limit_conn.lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|(stream, name), _| conn.contains(&(*stream, name.as_str())));
    }

    /// The counters of resolver status zone `name` (kept from the last load, else new).
    pub fn resolver_stats(&self, name: &str) -> Arc<ResolverStats> {
        let mut zones = self.resolvers.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(zones.entry(name.to_string()).or_default())
    }

    /// Forgets the resolver status zones a config no longer names.
    pub fn retain_resolvers(&self, names: &[&str]) {
        let mut zones = self.resolvers.lock().unwrap_or_else(PoisonError::into_inner);
        zones.retain(|name, _| names.contains(&name.as_str()));
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
            nth: 0,
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
        assert_eq!(z.zombies("u"), 0, "a had no connection");
        drop(g);
        assert_eq!(second[0].conns(), 0);
        // the same peer in another upstream is another identity, and attaching it leaves "u" alone
        let other = z.attach(&[key("v", "127.0.0.1:2", 2)]);
        assert!(!Arc::ptr_eq(&other[0], &second[0]));
        assert!(Arc::ptr_eq(&z.get(&b).unwrap(), &second[0]));
        assert_eq!(z.len(), 3);
    }

    #[test]
    fn ids_are_per_upstream_kept_with_the_slot_and_never_reused() {
        let z = Zone::new();
        let (a, b, c) = (key("u", "a", 1), key("u", "b", 2), key("u", "c", 3));
        let first = z.attach(&[a.clone(), b.clone()]);
        assert_eq!((first[0].id(), first[1].id()), (0, 1));
        assert_eq!(z.attach(&[key("v", "a", 1)])[0].id(), 0);
        let second = z.attach(&[b.clone(), c.clone()]);
        assert_eq!((second[0].id(), second[1].id()), (1, 2));
        let third = z.attach(&[a.clone(), b.clone(), c.clone()]);
        assert_eq!(third.iter().map(|s| s.id()).collect::<Vec<_>>(), [3, 1, 2]);
        // a wished id goes to the fresh slot of that identity only
        let d = key("u", "d", 4);
        z.prefer_id(d.clone(), 0);
        let fourth = z.attach(&[d, b]);
        assert_eq!((fourth[0].id(), fourth[1].id()), (0, 1));
    }

    #[test]
    fn a_removed_upstream_is_forgotten() {
        let z = Zone::new();
        let first = z.attach(&[key("u", "a", 1)]);
        first[0].record_failure(1);
        z.attach(&[key("v", "a", 1)]);
        z.retain_upstreams(&["v"]);
        assert_eq!(z.len(), 1);
        let again = z.attach(&[key("u", "a", 1)]);
        assert_eq!((again[0].fails(), again[0].id()), (0, 0), "fresh state, ids from 0");
    }

    #[test]
    fn removed_peers_with_connections_are_zombies_until_they_finish() {
        let z = Zone::new();
        let (a, b) = (key("u", "a", 1), key("u", "b", 2));
        let first = z.attach(&[a, b.clone()]);
        let held = first[0].try_acquire(0).unwrap();
        z.attach(&[b]);
        assert_eq!((z.zombies("u"), z.zombies("v")), (1, 0));
        drop(held);
        assert_eq!(z.zombies("u"), 0);
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

    #[test]
    fn resolver_zones_are_kept_by_name() {
        let zone = Zone::new();
        let a = zone.resolver_stats("dns");
        a.asked(crate::Asked::Name);
        assert!(Arc::ptr_eq(&a, &zone.resolver_stats("dns")), "kept");
        assert!(!Arc::ptr_eq(&a, &zone.resolver_stats("other")));
        zone.retain_resolvers(&["other"]);
        assert_eq!(zone.resolver_stats("dns").requests(), [0; 3], "forgotten, then new");
    }

    #[test]
    fn limit_tables_are_kept_by_name_key_and_size() {
        let zone = Zone::new();
        let t = zone
            .limit_req_table("one", "$binary_remote_addr", 1 << 20)
            .expect("new");
        assert!(Arc::ptr_eq(
            &t,
            &zone
                .limit_req_table("one", "$binary_remote_addr", 1 << 20)
                .expect("kept")
        ));
        assert!(!Arc::ptr_eq(
            &t,
            &zone
                .limit_req_table("one", "$binary_remote_addr", 1 << 21)
                .expect("resized")
        ));
        assert_eq!(
            zone.limit_req_table("one", "$uri", 1 << 21).err().as_deref(),
            Some("$binary_remote_addr")
        );
        let c = zone.limit_conn_table(false, "c", "$uri", 1 << 15).expect("new");
        let s = zone
            .limit_conn_table(true, "c", "$remote_addr", 1 << 15)
            .expect("stream's own");
        assert!(!Arc::ptr_eq(&c, &s));
        assert!(Arc::ptr_eq(
            &c,
            &zone.limit_conn_table(false, "c", "$uri", 1 << 15).expect("kept")
        ));
        zone.retain_limits(&[], &[(true, "c")]);
        assert!(zone.limit_req_table("one", "$uri", 1 << 21).is_ok());
        assert!(!Arc::ptr_eq(
            &c,
            &zone.limit_conn_table(false, "c", "$uri", 1 << 15).expect("forgotten")
        ));
        assert!(Arc::ptr_eq(
            &s,
            &zone.limit_conn_table(true, "c", "$remote_addr", 1 << 15).expect("kept")
        ));
    }

    #[test]
    fn sticky_tables_are_kept_by_name_size_and_upstream() {
        let zone = Zone::new();
        let t = zone.sticky_table("z", "u", 1 << 20).expect("new");
        let again = zone.sticky_table("z", "u", 1 << 20).expect("kept");
        assert!(Arc::ptr_eq(&t, &again));
        let resized = zone.sticky_table("z", "u", 1 << 21).expect("resized");
        assert!(!Arc::ptr_eq(&t, &resized));
        assert_eq!(zone.sticky_table("z", "v", 1 << 21).err().as_deref(), Some("u"));
        zone.retain_sticky(&[]);
        let fresh = zone.sticky_table("z", "v", 1 << 21).expect("forgotten, then new");
        assert!(!Arc::ptr_eq(&resized, &fresh));
    }
}
