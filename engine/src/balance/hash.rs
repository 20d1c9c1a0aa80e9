//! `hash KEY`: nginx's Cache::Memcached-compatible hash of a per-request key over the configured weights.

use super::ranges::WeightRanges;
use super::{round_robin, Balancer, Choice, ListKind, PeerList, PickCx};

/// The 15-bit value one round adds to the accumulator: `(crc32(decimal(rehash) + key) >> 16) & 0x7fff`, the
/// decimal prefix omitted when `rehash` is 0.
#[inline]
pub fn round_value(key: &[u8], rehash: u32) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    if rehash > 0 {
        let mut digits = [0u8; 10];
        crc.update(decimal(rehash, &mut digits));
    }
    crc.update(key);
    (crc.finalize() >> 16) & 0x7fff
}

/// `n` in decimal, written into `buf` (no allocation).
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        // n % 10 < 10 fits in a u8
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || start == 0 {
            break;
        }
    }
    &buf[start..]
}

/// `hash KEY` (without `consistent`): the primary list's weight ranges, so the weight walk is a binary search.
#[derive(Debug, Clone, Default)]
pub struct Hash {
    ranges: WeightRanges,
}

impl Hash {
    /// `hash KEY` over `primary`.
    pub fn build(primary: &PeerList) -> Hash {
        Hash {
            ranges: WeightRanges::new(primary),
        }
    }
}

impl Balancer for Hash {
    /// nginx's `ngx_http_upstream_get_hash_peer`: each round adds [`round_value`] to a 32-bit accumulator and
    /// walks `acc % total_weight` over the configured weights (down peers included). The accumulator, the re-hash
    /// counter and the misses persist over the request's retries. An empty key, a lone server, or more than 20
    /// misses go to round robin.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let list = &cx.plan.primary;
        if cx.attempt.misses_exhausted()
            || cx.plan.single
            || cx.key.is_empty()
            || cx.attempt.list != ListKind::Primary
            || self.ranges.total() == 0
        {
            return round_robin::choose(cx);
        }
        loop {
            // nginx keeps the accumulator in a uint32_t: it wraps.
            let acc = (cx.attempt.hash as u32).wrapping_add(round_value(cx.key, cx.attempt.rehash));
            cx.attempt.hash = u64::from(acc);
            cx.attempt.rehash = cx.attempt.rehash.wrapping_add(1);
            let index = self.ranges.index_of(u64::from(acc) % self.ranges.total());
            if list.candidate(index, &cx.attempt.tried, cx.now).is_some() {
                return Some(Choice {
                    list: ListKind::Primary,
                    index,
                });
            }
            if cx.attempt.miss() {
                return round_robin::choose(cx);
            }
        }
    }

    fn name(&self) -> &'static str {
        "hash"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::{short, spec_servers, weighted, Lab, NOW, S};
    use crate::balance::Attempt;
    use crate::config::key::KeyTemplate;
    use crate::config::model::{Method, ServerLine};

    fn method() -> Method {
        Method::Hash {
            key: KeyTemplate::compile("$arg_k").expect("a valid template"),
            consistent: false,
        }
    }

    #[test]
    fn decimal_prefix() {
        let mut buf = [0; 10];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(7, &mut buf), b"7");
        assert_eq!(decimal(1234, &mut buf), b"1234");
        assert_eq!(decimal(u32::MAX, &mut buf), b"4294967295");
    }

    #[test]
    fn h_table_rounds() {
        // (key, crc32 of round 1, its 15-bit value, then (data, value, acc, idx) of retries), docs/algorithms.md §7.
        assert_eq!(crc32fast::hash(b"a"), 0xe8b7be43);
        assert_eq!(crc32fast::hash(b"/index.html"), 0xea224b42);
        type Retries = &'static [(u32, u32)];
        let rows: [(&str, u32, Retries); 6] = [
            ("a", 26807, &[(15665, 42472), (5660, 48132)]),
            ("b", 29118, &[(9272, 38390)]),
            ("c", 1721, &[(21311, 23032)]),
            ("/index.html", 27170, &[(30204, 57374)]),
            ("x", 3292, &[(22874, 26166)]),
            ("hello", 13840, &[(3798, 17638), (2114, 19752)]),
        ];
        for (key, first, retries) in rows {
            assert_eq!(round_value(key.as_bytes(), 0), first, "{key}");
            let mut acc = first;
            for (n, &(value, sum)) in (1..).zip(retries) {
                assert_eq!(round_value(key.as_bytes(), n), value, "{key} round {n}");
                acc += value;
                assert_eq!(acc, sum);
            }
        }
    }

    #[test]
    fn h_table_results_with_and_without_s2_down() {
        // (key, equal weights, s2 down), docs/algorithms.md §7 (user42 from the vector config's keys, §15).
        let rows = [
            ("a", "s3", "s3"),
            ("b", "s1", "s1"),
            ("c", "s3", "s3"),
            ("/index.html", "s3", "s3"),
            ("x", "s2", "s1"),
            ("hello", "s2", "s1"),
            ("user42", "s1", "s1"),
        ];
        for (key, equal, down) in rows {
            let mut lab = Lab::new(method(), spec_servers([1, 1, 1], &[]));
            assert_eq!(
                lab.serve(key.as_bytes(), NOW).as_deref().map(short),
                Some(equal),
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
    fn retry_sequences_continue_the_accumulator() {
        // (key, picks while every attempt fails, acc, rehash, misses), equal weights then s2 down; nginx_model.py.
        let equal = [
            ("a", ["s3", "s2", "s1"], 48132, 3, 0),
            ("b", ["s1", "s3", "s2"], 233137, 13, 10),
            ("c", ["s3", "s2", "s1"], 90459, 5, 2),
            ("/index.html", ["s3", "s1", "s2"], 123040, 6, 3),
            ("x", ["s2", "s1", "s3"], 55469, 3, 0),
            ("hello", ["s2", "s1", "s3"], 61025, 5, 2),
            ("user42", ["s1", "s3", "s2"], 103243, 4, 1),
        ];
        let down = [
            ("a", ["s3", "s1"], 48132, 3, 1),
            ("b", ["s1", "s3"], 38390, 2, 0),
            ("c", ["s3", "s1"], 90459, 5, 3),
            ("/index.html", ["s3", "s1"], 57984, 3, 1),
            ("x", ["s1", "s3"], 55469, 3, 1),
            ("hello", ["s1", "s3"], 61025, 5, 3),
            ("user42", ["s1", "s3"], 84545, 3, 1),
        ];
        let check = |down_set: &[usize], key: &str, picks: &[&str], acc: u64, rehash: u32, misses: u32| {
            let mut lab = Lab::new(method(), spec_servers([1, 1, 1], down_set));
            let (got, st) = lab.fail_walk(key.as_bytes(), NOW);
            assert_eq!(got, picks, "{key} down {down_set:?}");
            assert_eq!((st.hash, st.rehash, st.misses), (acc, rehash, misses), "{key}");
        };
        for (key, picks, acc, rehash, misses) in equal {
            check(&[], key, &picks, acc, rehash, misses);
        }
        for (key, picks, acc, rehash, misses) in down {
            check(&[1], key, &picks, acc, rehash, misses);
        }
    }

    #[test]
    fn empty_key_is_round_robin() {
        let mut lab = Lab::new(method(), vec![weighted(S[0], 5), weighted(S[1], 1), weighted(S[2], 1)]);
        let picks: Vec<String> = (0..7)
            .filter_map(|_| lab.serve(b"", NOW))
            .map(|s| short(&s).to_string())
            .collect();
        assert_eq!(picks, ["s1", "s1", "s2", "s1", "s3", "s1", "s1"]);
    }

    #[test]
    fn two_addresses_of_one_line_each_carry_the_full_weight() {
        let two = ServerLine {
            addrs: vec!["10.0.0.1:80".parse().unwrap(), "10.0.0.2:80".parse().unwrap()],
            ..weighted("backend", 1)
        };
        let lab = Lab::new(method(), vec![two, weighted(S[2], 1)]);
        assert_eq!(lab.plan.primary.len(), 3);
        assert_eq!(lab.plan.primary.total_weight, 3);
        // "a" -> acc 26807 % 3 = 2 -> the third peer; "b" -> 29118 % 3 = 0 -> the first address
        let mut lab = lab;
        assert_eq!(lab.serve(b"a", NOW).as_deref(), Some(S[2]));
        let mut shard = lab.shard.clone();
        let mut attempt = Attempt::new(&lab.plan, 0, b"b");
        let addr = attempt.pick(&mut shard, b"b", NOW).map(|p| p.addr.to_string());
        assert_eq!(addr.as_deref(), Some("10.0.0.1:80"));
    }
}
