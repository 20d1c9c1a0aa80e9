//! `hash KEY consistent`: nginx's ketama ring (Cache::Memcached::Fast, 160 points per weight unit), built at load.

use super::attempt::AttemptState;
use super::{round_robin, swrr, Balancer, Choice, ListKind, PeerList, PickCx};
use std::collections::HashMap;
use std::sync::Arc;

/// Points per weight unit of a server.
pub const POINTS_PER_WEIGHT: u32 = 160;

/// Splits a `server` text into the host and port parts the ring hashes: `unix:PATH` (any case) gives `PATH` and
/// no port; otherwise the trailing digits after the last `:` are the port (`[::1]:80` → `[::1]`, `80`), and a text
/// without such a suffix is all host.
pub fn split_host_port(server: &str) -> (&[u8], &[u8]) {
    let s = server.as_bytes();
    if let Some(path) = s.get(..5).filter(|p| p.eq_ignore_ascii_case(b"unix:")).and(s.get(5..)) {
        return (path, b"");
    }
    match s.iter().rposition(|c| !c.is_ascii_digit()) {
        Some(colon) if s.get(colon) == Some(&b':') => {
            (s.get(..colon).unwrap_or(b""), s.get(colon + 1..).unwrap_or(b""))
        }
        _ => (s, b""),
    }
}

/// The ring points of one server, in generation order: `crc32(host \0 port le32(prev))`, `prev` starting at 0,
/// `weight × 160` of them.
pub fn server_points(server: &str, weight: u32) -> impl Iterator<Item = u32> {
    let (host, port) = split_host_port(server);
    let mut base = crc32fast::Hasher::new();
    base.update(host);
    base.update(&[0]);
    base.update(port);
    let mut prev = 0u32;
    (0..weight.saturating_mul(POINTS_PER_WEIGHT)).map(move |_| {
        let mut h = base.clone();
        h.update(&prev.to_le_bytes());
        prev = h.finalize();
        prev
    })
}

/// The sorted ring: one point per distinct hash, each naming a server (a distinct `server` text).
#[derive(Debug, Clone, Default)]
pub struct Ring {
    hashes: Vec<u32>,
    /// The server id of each point (an index into `texts`).
    servers: Vec<u32>,
    texts: Vec<Arc<str>>,
}

impl Ring {
    /// Number of points.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether the ring has no point.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Point `i`: its hash and its server's text.
    pub fn point(&self, i: usize) -> Option<(u32, &str)> {
        let hash = *self.hashes.get(i)?;
        let server = self.texts.get(*self.servers.get(i)? as usize)?;
        Some((hash, server))
    }

    /// nginx's `ngx_http_upstream_find_chash_point`: the first point whose hash is `>= hash`; `len()` when every
    /// point is lower (the walk wraps with `% len()`).
    pub fn find(&self, hash: u32) -> usize {
        self.hashes.partition_point(|&h| h < hash)
    }
}

/// The distinct `server` texts of a list (the addresses of one line share one), in config order, each with the
/// largest weight of its peers and its peers' indices, ascending: what the consistent hashes place.
#[derive(Debug, Clone, Default)]
pub struct ServersByText {
    /// The texts.
    pub texts: Vec<Arc<str>>,
    /// The weight of each text.
    pub weights: Vec<u32>,
    /// The peers of each text.
    pub members: Vec<Vec<usize>>,
}

impl ServersByText {
    /// The servers of `list`, down peers included.
    pub fn of(list: &PeerList) -> ServersByText {
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut out = ServersByText::default();
        for (index, peer) in list.peers.iter().enumerate() {
            let id = *ids.entry(&*peer.server).or_insert_with(|| {
                out.texts.push(peer.server.clone());
                out.weights.push(0);
                out.members.push(Vec::new());
                out.texts.len() - 1
            });
            if let (Some(w), Some(m)) = (out.weights.get_mut(id), out.members.get_mut(id)) {
                *w = (*w).max(peer.weight);
                m.push(index);
            }
        }
        out
    }
}

/// `hash KEY consistent`: the ring, and for each of its servers the primary peers with that text.
#[derive(Debug, Clone, Default)]
pub struct ConsistentHash {
    ring: Ring,
    /// `members[s]`: the indices of the primary peers whose text is server `s`, ascending.
    members: Vec<Vec<usize>>,
}

impl ConsistentHash {
    /// Builds the ring of `primary`, down peers included. Every peer adds `weight × 160` points named by its
    /// `server` text; peers sharing a text (the addresses of one line) add the same points, which the
    /// de-duplication collapses, so each text is generated once with its largest weight. Points are sorted by hash
    /// and only the first of equal hashes is kept, the earlier server in config order winning a collision.
    pub fn build(primary: &PeerList) -> ConsistentHash {
        let ServersByText {
            texts,
            weights,
            members,
        } = ServersByText::of(primary);
        let npoints: usize = weights.iter().map(|&w| w as usize * POINTS_PER_WEIGHT as usize).sum();
        let mut packed: Vec<u64> = Vec::with_capacity(npoints);
        for (id, (text, &weight)) in texts.iter().zip(&weights).enumerate() {
            packed.extend(server_points(text, weight).map(|h| (u64::from(h) << 32) | id as u64));
        }
        // Sorting (hash, server id) pairs puts the earlier server first among equal hashes.
        packed.sort_unstable();
        packed.dedup_by_key(|p| *p >> 32);
        let ring = Ring {
            hashes: packed.iter().map(|p| (p >> 32) as u32).collect(),
            servers: packed.iter().map(|&p| p as u32).collect(),
            texts,
        };
        ConsistentHash { ring, members }
    }

    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The primary peers (ascending indices) named by the point at `pos % len`.
    pub(super) fn members_at(&self, pos: u64) -> &[usize] {
        pos.checked_rem(self.ring.len() as u64)
            .and_then(|i| self.ring.servers.get(i as usize))
            .and_then(|&server| self.members.get(server as usize))
            .map_or(&[], |m| m.as_slice())
    }
}

impl Balancer for ConsistentHash {
    /// Locates `crc32(key)` on the ring (nginx's `ngx_http_upstream_init_chash_peer`).
    fn start(&self, attempt: &mut AttemptState, key: &[u8]) {
        attempt.hash = self.ring.find(crc32fast::hash(key)) as u64;
    }

    /// nginx's `ngx_http_upstream_get_chash_peer`: the point at `pos % len` names a server; an SWRR pass among
    /// that server's untried, usable peers picks one. When none is, `pos` moves one point clockwise, which costs a
    /// try. `pos` and the misses persist over retries; an empty key, a lone server or more than 20 misses go to
    /// round robin.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        walk_points(cx, self.ring.is_empty(), |pos| self.members_at(pos))
    }

    fn name(&self) -> &'static str {
        "hash consistent"
    }
}

/// The walk of [`ConsistentHash::choose`] over any table of points (the ring, or Maglev's lookup table):
/// `members_at(pos)` names the peers of the point's server; an SWRR pass among its untried, usable ones picks one,
/// else `pos` moves on by one, a miss. `empty` (no points), an empty key, a lone server, the backup list or more
/// than 20 misses go to round robin.
pub(super) fn walk_points<'m>(
    cx: &mut PickCx<'_>,
    empty: bool,
    members_at: impl Fn(u64) -> &'m [usize],
) -> Option<Choice> {
    if cx.attempt.misses_exhausted()
        || cx.plan.single
        || cx.key.is_empty()
        || cx.attempt.list != ListKind::Primary
        || empty
    {
        return round_robin::choose(cx);
    }
    let list = &cx.plan.primary;
    loop {
        let members = members_at(cx.attempt.hash);
        let found = swrr::pass(
            list,
            &mut cx.shard.primary,
            &cx.attempt.tried,
            cx.now,
            members.iter().copied(),
        );
        if let Some(index) = found {
            return Some(Choice {
                list: ListKind::Primary,
                index,
            });
        }
        cx.attempt.hash = cx.attempt.hash.wrapping_add(1);
        if cx.attempt.miss() {
            return round_robin::choose(cx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::{line, short, spec_servers, weighted, Lab, NOW, S};
    use crate::balance::{Attempt, Outcome};
    use crate::config::key::KeyTemplate;
    use crate::config::model::{Method, ServerLine};
    use proptest::prelude::*;

    fn method() -> Method {
        Method::Hash {
            key: KeyTemplate::compile("$arg_k").expect("a valid template"),
            consistent: true,
        }
    }

    fn ring_of(weights: [u32; 3], down: &[usize]) -> ConsistentHash {
        let lab = Lab::new(method(), spec_servers(weights, down));
        ConsistentHash::build(&lab.plan.primary)
    }

    fn name_at(ch: &ConsistentHash, i: usize) -> &str {
        ch.ring().point(i % ch.ring().len()).map_or("none", |(_, s)| short(s))
    }

    #[test]
    fn host_and_port_split() {
        let cases: [(&str, &str, &str); 8] = [
            ("127.0.0.1:8081", "127.0.0.1", "8081"),
            ("[::1]:80", "[::1]", "80"),
            ("example.com", "example.com", ""),
            ("unix:/tmp/s.sock", "/tmp/s.sock", ""),
            ("UNIX:/tmp/s:80", "/tmp/s:80", ""),
            ("host:", "host", ""),
            ("8080", "8080", ""),
            ("a:b:12", "a:b", "12"),
        ];
        for (text, host, port) in cases {
            assert_eq!(split_host_port(text), (host.as_bytes(), port.as_bytes()), "{text}");
        }
    }

    #[test]
    fn first_points_of_each_server() {
        let first = |s: &str| server_points(s, 1).take(4).collect::<Vec<_>>();
        assert_eq!(first(S[0]), [0x50aabcf7, 0xb8dc900a, 0x2a3355ce, 0x839f657f]);
        assert_eq!(first(S[1]), [0x170ac627, 0xc6f1d61f, 0xe9d47f15, 0x13e21420]);
        assert_eq!(first(S[2]), [0x2a6aef97, 0xeceaebec, 0x1e599b63, 0x63c93b15]);
        assert_eq!(server_points(S[0], 3).count(), 480);
    }

    #[test]
    fn sorted_ring_ends_and_size() {
        let ch = ring_of([1, 1, 1], &[]);
        assert_eq!(ch.ring().len(), 480);
        let lowest: Vec<(u32, &str)> = (0..5)
            .filter_map(|i| ch.ring().point(i))
            .map(|(h, s)| (h, short(s)))
            .collect();
        assert_eq!(
            lowest,
            [
                (0x000d1815, "s1"),
                (0x003ffe29, "s1"),
                (0x00578371, "s3"),
                (0x0085cec4, "s1"),
                (0x009dffb1, "s1")
            ]
        );
        let highest: Vec<(u32, &str)> = (477..480)
            .filter_map(|i| ch.ring().point(i))
            .map(|(h, s)| (h, short(s)))
            .collect();
        assert_eq!(highest, [(0xfd655def, "s2"), (0xffc61257, "s2"), (0xffd03b3d, "s1")]);
        assert_eq!(ring_of([2, 1, 1], &[]).ring().len(), 640);
        // down peers keep their points
        assert_eq!(ring_of([1, 1, 1], &[1]).ring().len(), 480);
    }

    #[test]
    fn ch_table_lookups() {
        // (key, crc32, idx, point hash (0 = not given), server, next points, s2 down →), docs/algorithms.md §8.
        type Row = (
            &'static str,
            u32,
            usize,
            u32,
            &'static str,
            &'static [&'static str],
            &'static str,
        );
        let rows: [Row; 7] = [
            ("a", 0xe8b7be43, 443, 0xe9a2fd39, "s2", &["s3", "s2", "s3"], "s3"),
            ("b", 0x71beeff9, 226, 0x727bd38f, "s3", &["s1", "s1", "s1"], "s3"),
            ("c", 0x06b9df6f, 14, 0x06d634e6, "s3", &["s3", "s1", "s3"], "s3"),
            (
                "/index.html",
                0xea224b42,
                446,
                0xead106d5,
                "s3",
                &["s1", "s1", "s1"],
                "s3",
            ),
            ("x", 0x8cdc1683, 268, 0, "s1", &["s2", "s3"], "s1"),
            ("user42", 0x7c2fbeb6, 245, 0, "s2", &["s3", "s2"], "s3"),
            ("k1025", 0xffff5b47, 480, 0, "s1", &["s1", "s3"], "s1"),
        ];
        let ch = ring_of([1, 1, 1], &[]);
        for (key, crc, idx, point, server, next, down) in rows {
            assert_eq!(crc32fast::hash(key.as_bytes()), crc, "{key}");
            assert_eq!(ch.ring().find(crc), idx, "{key}");
            if point != 0 {
                assert_eq!(ch.ring().point(idx).map(|p| p.0), Some(point), "{key}");
            }
            assert_eq!(name_at(&ch, idx), server, "{key}");
            let got: Vec<&str> = (1..=next.len()).map(|d| name_at(&ch, idx + d)).collect();
            assert_eq!(got, next, "{key} next points");
            let mut lab = Lab::new(method(), spec_servers([1, 1, 1], &[]));
            assert_eq!(
                lab.serve(key.as_bytes(), NOW).as_deref().map(short),
                Some(server),
                "{key}"
            );
            let mut lab = Lab::new(method(), spec_servers([1, 1, 1], &[1]));
            assert_eq!(
                lab.serve(key.as_bytes(), NOW).as_deref().map(short),
                Some(down),
                "{key} s2 down"
            );
        }
    }

    #[test]
    fn wrap_around_keys() {
        // every point is below these keys' hashes: idx = 480, the walk wraps to point 0 (s1)
        let ch = ring_of([1, 1, 1], &[]);
        for (key, crc) in [("k1025", 0xffff5b47), ("k2164", 0xffe36b0c), ("k5363", 0xffd41278)] {
            assert_eq!(crc32fast::hash(key.as_bytes()), crc);
            assert_eq!(ch.ring().find(crc), 480);
            let mut lab = Lab::new(method(), spec_servers([1, 1, 1], &[]));
            assert_eq!(lab.serve(key.as_bytes(), NOW).as_deref(), Some(S[0]), "{key}");
        }
        assert_eq!(ch.ring().find(0), 0);
        assert_eq!(ch.ring().find(0x000d1815), 0, "an exact hit returns that point");
        assert_eq!(ch.ring().find(0x000d1816), 1);
    }

    #[test]
    fn weights_two_one_one() {
        let ch = ring_of([2, 1, 1], &[]);
        for (key, idx, server) in [
            ("a", 592, "s2"),
            ("b", 295, "s3"),
            ("c", 17, "s3"),
            ("/index.html", 595, "s3"),
        ] {
            assert_eq!(ch.ring().find(crc32fast::hash(key.as_bytes())), idx, "{key}");
            let mut lab = Lab::new(method(), spec_servers([2, 1, 1], &[]));
            assert_eq!(
                lab.serve(key.as_bytes(), NOW).as_deref().map(short),
                Some(server),
                "{key}"
            );
        }
    }

    #[test]
    fn retries_walk_clockwise_and_persist() {
        // (key, picks while every attempt fails, final pos, misses), from tools/model/nginx_model.py.
        type Row = (&'static str, &'static [&'static str], u64, u32);
        let equal: [Row; 6] = [
            ("a", &["s2", "s3", "s1"], 447, 4),
            ("b", &["s3", "s1", "s2"], 232, 6),
            ("x", &["s1", "s2", "s3"], 270, 2),
            ("user42", &["s2", "s3", "s1"], 253, 8),
            ("k1025", &["s1", "s3", "s2"], 485, 5),
            ("key-17", &["s2", "s3", "s1"], 426, 5),
        ];
        let w211: [Row; 2] = [
            ("c", &["s3", "s1", "s2"], 27, 10),
            ("key-17", &["s2", "s1", "s3"], 563, 2),
        ];
        let down: [Row; 3] = [
            ("b", &["s3", "s1"], 227, 1),
            ("k1025", &["s1", "s3"], 482, 2),
            ("key-17", &["s3", "s1"], 426, 5),
        ];
        let cases = [
            ([1, 1, 1], &[][..], &equal[..]),
            ([2, 1, 1], &[], &w211),
            ([1, 1, 1], &[1], &down),
        ];
        for (weights, down_set, rows) in cases {
            for &(key, picks, pos, misses) in rows {
                let mut lab = Lab::new(method(), spec_servers(weights, down_set));
                let (got, st) = lab.fail_walk(key.as_bytes(), NOW);
                assert_eq!(got, picks, "{key} {weights:?} {down_set:?}");
                assert_eq!((st.hash, st.misses), (pos, misses), "{key}");
            }
        }
    }

    #[test]
    fn one_line_with_two_addresses_is_one_ring_member() {
        let two = ServerLine {
            addrs: vec!["10.0.0.1:80".parse().unwrap(), "10.0.0.2:80".parse().unwrap()],
            ..weighted("backend:80", 2)
        };
        let mut lab = Lab::new(method(), vec![two, line(S[2])]);
        let ch = ConsistentHash::build(&lab.plan.primary);
        assert_eq!(ch.ring().len(), 480, "2 × 160 for the line, 160 for s3");
        // a key on the line alternates its addresses by SWRR
        let key = (0..)
            .map(|i| format!("key{i}"))
            .find(|k| name_at(&ch, ch.ring().find(crc32fast::hash(k.as_bytes()))) == "backend:80")
            .unwrap_or_default();
        let mut addrs = Vec::new();
        for _ in 0..4 {
            let plan = &lab.plan;
            let mut attempt = Attempt::new(plan, 0, key.as_bytes());
            addrs.extend(
                attempt
                    .pick(&mut lab.shard, key.as_bytes(), NOW)
                    .map(|p| p.addr.to_string()),
            );
            attempt.report(Outcome::Success, &mut lab.shard, NOW);
        }
        assert_eq!(addrs, ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.1:80", "10.0.0.2:80"]);
        assert_eq!(lab.cw(), [0, 0, 0]);
    }

    #[test]
    fn repeated_text_is_generated_once_with_its_largest_weight() {
        let lab = Lab::new(
            method(),
            vec![weighted("a:1", 1), weighted("a:1", 2), weighted("b:1", 1)],
        );
        let ch = ConsistentHash::build(&lab.plan.primary);
        assert_eq!(ch.ring().len(), 480);
        let pos = ch.ring().find(0);
        assert_eq!(
            ch.members_at(pos as u64).len(),
            if name_at(&ch, pos) == "a:1" { 2 } else { 1 }
        );
    }

    #[test]
    fn empty_key_and_single_server_use_round_robin() {
        let mut lab = Lab::new(method(), vec![weighted(S[0], 2), weighted(S[1], 1)]);
        let picks: Vec<String> = (0..3)
            .filter_map(|_| lab.serve(b"", NOW))
            .map(|s| short(&s).to_string())
            .collect();
        assert_eq!(picks, ["s1", "s2", "s1"]);
        let mut lab = Lab::new(method(), vec![line(S[0])]);
        assert_eq!(lab.fail_all(b"a", NOW), ["s1"]);
        assert_eq!(lab.peer(0).slot.fails(), 0);
    }

    /// An independent, straightforward ketama ring to check the picks against (nginx's
    /// `ngx_http_upstream_init_chash`): each `host:port` server, in config order, adds `weight × 160` points, each the
    /// crc32 of `host`, a zero byte, `port` and the previous point as 4 little-endian bytes (0 before the first);
    /// the points sorted by hash, the earlier server kept among equal hashes; a key goes to the first point at or
    /// above crc32(key), past the last point to the first.
    fn model_pick(servers: &[(String, u32)], key: &[u8]) -> Option<String> {
        let mut points: Vec<(u32, usize)> = Vec::new();
        for (i, (text, weight)) in servers.iter().enumerate() {
            let (host, port) = text.rsplit_once(':')?;
            let mut prev = 0u32;
            for _ in 0..weight * 160 {
                let bytes = [host.as_bytes(), &[0], port.as_bytes(), &prev.to_le_bytes()].concat();
                prev = crc32fast::hash(&bytes);
                points.push((prev, i));
            }
        }
        points.sort();
        points.dedup_by_key(|p| p.0);
        let h = crc32fast::hash(key);
        let at = points.iter().find(|p| p.0 >= h).or(points.first())?;
        servers.get(at.1).map(|s| s.0.clone())
    }

    #[test]
    fn the_model_ring_gives_the_spec_table() {
        // spec §6 with three equal servers: a -> s2, b -> s3, c -> s3, x -> s1, user42 -> s2, k1025 wraps to s1.
        let three: Vec<(String, u32)> = S.iter().map(|s| (s.to_string(), 1)).collect();
        for (key, want) in [("a", 1), ("b", 2), ("c", 2), ("x", 0), ("user42", 1), ("k1025", 0)] {
            assert_eq!(model_pick(&three, key.as_bytes()).as_deref(), Some(S[want]), "{key}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn removing_a_server_moves_only_its_keys(
            n in 2usize..8,
            removed in 0usize..8,
            weights in proptest::collection::vec(1u32..4, 8),
            keys in proptest::collection::vec("[a-z0-9/]{1,12}", 40),
        ) {
            let removed = removed % n;
            let servers = |skip: Option<usize>| -> Vec<(String, u32)> {
                (0..n)
                    .filter(|&i| Some(i) != skip)
                    .map(|i| (format!("10.0.{i}.1:80"), weights[i]))
                    .collect()
            };
            let lines = |list: &[(String, u32)]| -> Vec<ServerLine> {
                list.iter().map(|(text, w)| weighted(text, *w)).collect()
            };
            let (all, rest) = (servers(None), servers(Some(removed)));
            let mut full = Lab::new(method(), lines(&all));
            let mut less = Lab::new(method(), lines(&rest));
            let gone = format!("10.0.{removed}.1:80");
            for key in &keys {
                let before = full.serve(key.as_bytes(), NOW);
                let after = less.serve(key.as_bytes(), NOW);
                prop_assert_eq!(&before, &model_pick(&all, key.as_bytes()), "key {} on all servers", key);
                prop_assert_eq!(&after, &model_pick(&rest, key.as_bytes()), "key {} without {}", key, gone);
                if before.as_deref() != Some(gone.as_str()) {
                    prop_assert_eq!(before, after, "key {} moved", key);
                }
            }
        }
    }
}
