//! `ip_hash`: the client's /24 (IPv4) or whole IPv6 address hashed onto the configured weights, as nginx does.

use super::ranges::WeightRanges;
use super::{round_robin, Balancer, Choice, ListKind, PeerList, PickCx};
use std::net::IpAddr;

/// The hash seed of every request.
pub const SEED: u32 = 89;

/// The key of a client that has no IP address (a unix socket): three zero bytes, as nginx's pseudo address.
pub const NON_IP_KEY: [u8; 3] = [0; 3];

/// Writes the `ip_hash` key of `ip` into `buf` and returns it: the first 3 octets of an IPv4 address, all 16
/// bytes of an IPv6 one (an IPv4-mapped IPv6 address stays 16 bytes, as nginx sees an `AF_INET6` socket).
pub fn client_key(ip: IpAddr, buf: &mut [u8; 16]) -> &[u8] {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            buf[..3].copy_from_slice(&[a, b, c]);
            &buf[..3]
        }
        IpAddr::V6(v6) => {
            *buf = v6.octets();
            &buf[..]
        }
    }
}

/// Writes the `ip_hash` key of `ip` (see [`client_key`]) into a reused buffer.
pub fn key_into(ip: IpAddr, out: &mut Vec<u8>) {
    let mut buf = [0; 16];
    out.clear();
    out.extend_from_slice(client_key(ip, &mut buf));
}

/// One hash round over the key bytes: `h = (h * 113 + byte) % 6271` for each byte.
#[inline]
pub fn step(h: u32, key: &[u8]) -> u32 {
    let mut h = u64::from(h);
    for &b in key {
        h = (h * 113 + u64::from(b)) % 6271;
    }
    // < 6271 after a round, and `h` came in as a u32 when the key is empty.
    h as u32
}

/// `ip_hash`: the primary list's weight ranges, so the weight walk is a binary search.
#[derive(Debug, Clone, Default)]
pub struct IpHash {
    ranges: WeightRanges,
}

impl IpHash {
    /// `ip_hash` over `primary`.
    pub fn build(primary: &PeerList) -> IpHash {
        IpHash {
            ranges: WeightRanges::new(primary),
        }
    }
}

impl Balancer for IpHash {
    /// nginx's `ngx_http_upstream_get_ip_hash_peer`: the running hash (seeded with 89) is re-hashed once more per
    /// candidate, walked over the configured weights (down peers included), and kept only when a peer is chosen,
    /// so a retry continues from it. More than 20 misses in the request, or a lone server, go to round robin.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let list = &cx.plan.primary;
        // Only the round-robin fallback leaves the primary list, and it is entered for good.
        if cx.attempt.misses_exhausted()
            || cx.plan.single
            || cx.attempt.list != ListKind::Primary
            || self.ranges.total() == 0
        {
            return round_robin::choose(cx);
        }
        let key = if cx.key.is_empty() { &NON_IP_KEY[..] } else { cx.key };
        let mut h = cx.attempt.iphash;
        loop {
            h = step(h, key);
            let index = self.ranges.index_of(u64::from(h) % self.ranges.total());
            if list.candidate(index, &cx.attempt.tried, cx.now).is_some() {
                cx.attempt.iphash = h;
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
        "ip_hash"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::{short, spec_servers, weighted, Lab, NOW, S};
    use crate::balance::{Attempt, Outcome};
    use crate::config::model::{Method, ServerLine};

    /// (client, hash, equal →, first 5 candidates, weights 2,1,1 →, s2 down →), docs/algorithms.md §6.
    type IphRow = (&'static str, u32, &'static str, [usize; 5], &'static str, &'static str);
    const IPH: [IphRow; 10] = [
        ("127.0.0.1", 4040, "s3", [2, 2, 1, 0, 0], "s1", "s3"),
        ("127.0.1.1", 4041, "s1", [0, 0, 1, 0, 0], "s1", "s1"),
        ("127.1.0.1", 4153, "s2", [1, 2, 1, 1, 0], "s1", "s3"),
        ("10.0.0.1", 2565, "s1", [0, 1, 0, 0, 1], "s1", "s1"),
        ("192.168.1.10", 154, "s2", [1, 2, 2, 0, 1], "s2", "s3"),
        ("172.16.5.4", 3526, "s2", [1, 2, 0, 0, 2], "s2", "s3"),
        ("8.8.8.8", 3023, "s3", [2, 1, 0, 2, 1], "s3", "s3"),
        ("1.2.3.4", 751, "s2", [1, 2, 2, 0, 0], "s3", "s3"),
        ("::1", 5945, "s3", [2, 0, 2, 0, 0], "s1", "s3"),
        ("2001:db8::1", 2600, "s3", [2, 2, 2, 2, 2], "s1", "s3"),
    ];

    fn key_of(ip: &str) -> Vec<u8> {
        let mut buf = [0; 16];
        client_key(ip.parse().expect("test address"), &mut buf).to_vec()
    }

    fn pick(weights: [u32; 3], down: &[usize], ip: &str) -> (String, u32) {
        let lab = Lab::new(Method::IpHash, spec_servers(weights, down));
        let mut shard = lab.shard.clone();
        let key = key_of(ip);
        let mut attempt = Attempt::new(&lab.plan, 0, &key);
        let name = attempt
            .pick(&mut shard, &key, NOW)
            .map_or("502".to_string(), |p| short(&p.server).to_string());
        (name, attempt.state().iphash)
    }

    #[test]
    fn key_bytes() {
        let mut buf = [0xff; 16];
        assert_eq!(client_key("192.168.1.10".parse().unwrap(), &mut buf), [192, 168, 1]);
        assert_eq!(
            client_key("::1".parse().unwrap(), &mut buf),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        // 127.0.0.77 shares 127.0.0.1's /24
        assert_eq!(key_of("127.0.0.77"), key_of("127.0.0.1"));
    }

    #[test]
    fn worked_examples_step_by_step() {
        assert_eq!(step(SEED, &[127]), 3913);
        assert_eq!(step(3913, &[0]), 3199);
        assert_eq!(step(3199, &[0]), 4040);
        assert_eq!(step(SEED, &[192, 168, 1]), 154);
    }

    #[test]
    fn iph_table_every_column() {
        for (ip, h, equal, cand, w211, s2_down) in IPH {
            assert_eq!(step(SEED, &key_of(ip)), h, "{ip}");
            assert_eq!(pick([1, 1, 1], &[], ip), (equal.to_string(), h), "{ip} equal");
            assert_eq!(pick([2, 1, 1], &[], ip).0, w211, "{ip} weights 2,1,1");
            assert_eq!(pick([1, 1, 1], &[1], ip).0, s2_down, "{ip} s2 down");
            let list = Lab::new(Method::IpHash, spec_servers([1, 1, 1], &[])).plan.primary;
            let mut hh = SEED;
            let got: Vec<usize> = (0..5)
                .map(|_| {
                    hh = step(hh, &key_of(ip));
                    list.weight_walk(u64::from(hh) % list.total_weight)
                })
                .collect();
            assert_eq!(got, cand, "{ip} candidates");
        }
        assert_eq!(pick([1, 1, 1], &[], "127.0.0.77"), ("s3".to_string(), 4040));
    }

    #[test]
    fn unix_clients_hash_three_zero_bytes() {
        // The empty key (no address) is treated as nginx's pseudo address, worked by hand: 89 * 113 % 6271 = 3786,
        // 3786 * 113 % 6271 = 1390, 1390 * 113 % 6271 = 295; 295 % 3 = 1 over three equal weights: s2.
        let lab = Lab::new(Method::IpHash, spec_servers([1, 1, 1], &[]));
        let mut shard = lab.shard.clone();
        let mut attempt = Attempt::new(&lab.plan, 0, b"");
        let got = attempt.pick(&mut shard, b"", NOW).map(|p| p.server.to_string());
        assert_eq!(got.as_deref(), Some(S[1]));
        assert_eq!(attempt.state().iphash, 295);
    }

    #[test]
    fn retries_rehash_from_the_stored_hash() {
        // (client, picks while every attempt fails, misses, stored hash at the end): tools/model/nginx_model.py.
        let cases = [
            ("127.0.0.1", ["s3", "s2", "s1"], 1, 4956),
            ("127.0.1.1", ["s1", "s2", "s3"], 4, 65),
            ("127.1.0.1", ["s2", "s3", "s1"], 2, 990),
            ("10.0.0.1", ["s1", "s2", "s3"], 3, 4070),
            ("192.168.1.10", ["s2", "s3", "s1"], 1, 723),
            ("172.16.5.4", ["s2", "s3", "s1"], 0, 3246),
            ("8.8.8.8", ["s3", "s2", "s1"], 0, 1047),
            ("1.2.3.4", ["s2", "s3", "s1"], 1, 468),
            ("::1", ["s3", "s1", "s2"], 3, 1036),
            ("2001:db8::1", ["s3", "s1", "s2"], 5, 3550),
        ];
        for (ip, picks, misses, h) in cases {
            let mut lab = Lab::new(Method::IpHash, spec_servers([1, 1, 1], &[]));
            let (got, state) = lab.fail_walk(&key_of(ip), NOW);
            assert_eq!(got, picks, "{ip}");
            assert_eq!((state.misses, state.iphash), (misses, h), "{ip}");
            assert_eq!(lab.cw(), [0, 0, 0], "{ip}: ip_hash never touches current weights");
        }
    }

    #[test]
    fn more_than_twenty_misses_fall_back_to_round_robin() {
        // s2 carries 100 of 102 weight units but is down: 127.0.0.1 misses 21 times, round robin picks s1, then s3.
        let servers = vec![
            weighted(S[0], 1),
            ServerLine {
                down: true,
                ..weighted(S[1], 100)
            },
            weighted(S[2], 1),
        ];
        let lab = Lab::new(Method::IpHash, servers);
        let mut shard = lab.shard.clone();
        let key = key_of("127.0.0.1");
        let mut attempt = Attempt::new(&lab.plan, 0, &key);
        let first = attempt
            .pick(&mut shard, &key, NOW)
            .map(|p| short(&p.server).to_string());
        assert_eq!(first.as_deref(), Some("s1"));
        assert_eq!((attempt.state().misses, attempt.state().iphash), (21, SEED));
        attempt.report(Outcome::Failed, &mut shard, NOW);
        let second = attempt
            .pick(&mut shard, &key, NOW)
            .map(|p| short(&p.server).to_string());
        assert_eq!(second.as_deref(), Some("s3"));
        assert_eq!(shard.primary.current, [-1, 0, 1], "round robin ran SWRR passes");
    }

    #[test]
    fn single_server_goes_to_round_robin() {
        let mut lab = Lab::new(Method::IpHash, vec![weighted(S[0], 1)]);
        let key = key_of("10.0.0.1");
        for _ in 0..3 {
            assert_eq!(lab.fail_all(&key, NOW), ["s1"]);
        }
        assert_eq!(lab.peer(0).slot.fails(), 0, "a single server keeps no fail count");
    }
}
