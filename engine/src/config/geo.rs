//! A compiled `geo` table (nginx's `ngx_http_geo_module`, `ngx_stream_geo_module`): client address ranges to
//! value indexes, built at load as disjoint sorted intervals (one binary search per lookup) for IPv4 and IPv6.
//! Networks are laid down shortest prefix first, so the longest prefix wins as in nginx's radix tree; `ranges`
//! are laid down in the order written, a later range over an earlier one.

use super::key::KeyTemplate;
use super::realip::Cidr;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

/// One family's intervals while the block is read: start -> value index (`None`: the default).
#[derive(Debug, Clone)]
struct Paint(BTreeMap<u128, Option<usize>>);

impl Paint {
    fn new() -> Paint {
        Paint(BTreeMap::from([(0, None)]))
    }

    fn at(&self, x: u128) -> Option<usize> {
        self.0.range(..=x).next_back().and_then(|(_, v)| *v)
    }

    /// `[a, b]` takes `value`.
    fn set(&mut self, a: u128, b: u128, value: Option<usize>) {
        let after = b.checked_add(1).map(|n| (n, self.at(n)));
        let inside: Vec<u128> = self.0.range(a..=b).map(|(k, _)| *k).collect();
        for k in inside {
            self.0.remove(&k);
        }
        self.0.insert(a, value);
        if let Some((n, v)) = after {
            self.0.entry(n).or_insert(v);
        }
    }

    fn finish(self) -> Vec<(u128, Option<usize>)> {
        let mut out: Vec<(u128, Option<usize>)> = Vec::with_capacity(self.0.len());
        for (k, v) in self.0 {
            if out.last().is_none_or(|(_, last)| *last != v) {
                out.push((k, v));
            }
        }
        out
    }
}

/// What one `geo` block says, as read.
#[derive(Debug, Clone, Default)]
pub struct GeoDraft {
    /// `ranges`.
    pub ranges: bool,
    /// Networks (CIDR mode), in the order written, `None` for a deleted one.
    nets: Vec<(Cidr, Option<usize>)>,
    /// Ranges (IPv4 only, as nginx's), in the order written, `None` to delete.
    spans: Vec<(u32, u32, Option<usize>)>,
    /// The `default` value (ranges mode; in CIDR mode `default` is the `/0` networks).
    default: Option<usize>,
    pub proxies: Vec<Cidr>,
    pub proxy_recursive: bool,
}

/// Why an entry was refused (nginx's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeoError {
    #[error("invalid network \"{0}\"")]
    Network(String),
    #[error("invalid range \"{0}\"")]
    Range(String),
}

impl GeoDraft {
    /// A range `A-B` of `ranges` mode with its value (`None`: `delete A-B`).
    pub fn range(&mut self, net: &str, value: Option<usize>) -> Result<(), GeoError> {
        let bad = || GeoError::Range(net.to_string());
        let (a, b) = net.split_once('-').ok_or_else(bad)?;
        let a: Ipv4Addr = a.parse().map_err(|_| bad())?;
        let b: Ipv4Addr = b.parse().map_err(|_| bad())?;
        let (a, b) = (u32::from(a), u32::from(b));
        if a > b {
            return Err(bad());
        }
        self.spans.push((a, b, value));
        Ok(())
    }

    /// A network with its value (`None`: `delete NET`, which drops the network's earlier lines).
    pub fn net(&mut self, cidr: Cidr, value: Option<usize>) {
        if value.is_none() {
            self.nets.retain(|(c, _)| *c != cidr);
        }
        self.nets.push((cidr, value));
    }

    /// `default VALUE`.
    pub fn set_default(&mut self, value: usize) {
        if self.ranges {
            self.default = Some(value);
        } else {
            self.nets
                .push((cidr_of(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0), Some(value)));
            self.nets
                .push((cidr_of(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0), Some(value)));
        }
    }

    /// The table; `empty` is the index of the empty value (nginx's value when nothing matches and no default).
    pub fn build(self, empty: usize, xff: KeyTemplate) -> GeoTable {
        let (mut v4, mut v6) = (Paint::new(), Paint::new());
        if self.ranges {
            for (a, b, v) in self.spans {
                v4.set(u128::from(a), u128::from(b), v);
            }
        } else {
            let mut nets: Vec<(Cidr, Option<usize>)> = self.nets.into_iter().filter(|(_, v)| v.is_some()).collect();
            nets.sort_by_key(|(c, _)| c.bits);
            for (c, v) in nets {
                match c.addr {
                    IpAddr::V4(a) => {
                        let span = u32::MAX.checked_shr(u32::from(c.bits)).unwrap_or(0);
                        let a = u32::from(a);
                        v4.set(u128::from(a), u128::from(a | span), v);
                    }
                    IpAddr::V6(a) => {
                        let span = u128::MAX.checked_shr(u32::from(c.bits)).unwrap_or(0);
                        let a = u128::from(a);
                        v6.set(a, a | span, v);
                    }
                }
            }
        }
        let default = self.default.unwrap_or(empty);
        let fill = |p: Paint| p.finish().into_iter().map(|(k, v)| (k, v.unwrap_or(default))).collect();
        GeoTable {
            ranges: self.ranges,
            v4: fill(v4),
            v6: fill(v6),
            default,
            proxies: self.proxies,
            proxy_recursive: self.proxy_recursive,
            xff,
        }
    }
}

fn cidr_of(addr: IpAddr, bits: u8) -> Cidr {
    Cidr { addr, bits }
}

/// A `geo` variable's table.
#[derive(Debug, Clone)]
pub struct GeoTable {
    ranges: bool,
    /// Disjoint intervals: (start, value index), sorted, each up to the next start.
    v4: Vec<(u128, usize)>,
    v6: Vec<(u128, usize)>,
    default: usize,
    /// `proxy`: senders whose `X-Forwarded-For` names the client.
    proxies: Vec<Cidr>,
    proxy_recursive: bool,
    /// `$http_x_forwarded_for`, read only with `proxy` lines.
    xff: KeyTemplate,
}

fn find(table: &[(u128, usize)], x: u128, default: usize) -> usize {
    let i = table.partition_point(|(k, _)| *k <= x);
    i.checked_sub(1).and_then(|i| table.get(i)).map_or(default, |(_, v)| *v)
}

impl GeoTable {
    /// The value index for the source's value `text` (an address; one that does not parse is looked up as
    /// 255.255.255.255, as nginx does). An IPv4-mapped IPv6 address is looked up as IPv4; ranges are IPv4 only.
    pub fn find(&self, text: &[u8]) -> usize {
        let ip = std::str::from_utf8(text).ok().and_then(|t| t.parse::<IpAddr>().ok());
        match ip {
            Some(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
                Some(v4) => find(&self.v4, u128::from(u32::from(v4)), self.default),
                None if self.ranges => self.default,
                None => find(&self.v6, u128::from(a), self.default),
            },
            Some(IpAddr::V4(a)) => find(&self.v4, u128::from(u32::from(a)), self.default),
            None => find(&self.v4, u128::from(u32::MAX), self.default),
        }
    }

    /// `proxy` lines: `X-Forwarded-For` of a trusted sender names the client (nginx's `ngx_http_geo_real_addr`).
    pub fn proxied(&self) -> bool {
        !self.proxies.is_empty()
    }

    /// `proxy_recursive`.
    pub fn recursive(&self) -> bool {
        self.proxy_recursive
    }

    /// `$http_x_forwarded_for`, the header the `proxy` lines read.
    pub fn xff(&self) -> &KeyTemplate {
        &self.xff
    }

    /// Whether a `proxy` line names `ip`.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.proxies.iter().any(|c| match (ip, c.addr) {
            (IpAddr::V4(a), IpAddr::V4(n)) => {
                let m = u32::MAX.checked_shl(32 - u32::from(c.bits)).unwrap_or(0);
                u32::from(a) & m == u32::from(n)
            }
            (IpAddr::V6(a), IpAddr::V6(n)) => {
                let m = u128::MAX.checked_shl(128 - u32::from(c.bits)).unwrap_or(0);
                u128::from(a) & m == u128::from(n)
            }
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ranges: bool, lines: &[(&str, &str)]) -> (GeoTable, Vec<String>) {
        let mut d = GeoDraft {
            ranges,
            ..GeoDraft::default()
        };
        let mut values = vec![String::new()];
        for (net, value) in lines {
            let v = (*net != "delete").then(|| {
                values.push(value.to_string());
                values.len() - 1
            });
            let cidr = |t: &str| {
                let (a, bits) = t.split_once('/').map_or((t, None), |(a, b)| (a, Some(b)));
                let addr: IpAddr = a.parse().unwrap();
                let max = if addr.is_ipv4() { 32 } else { 128 };
                cidr_of(addr, bits.map_or(max, |b| b.parse().unwrap()))
            };
            match (*net, ranges) {
                ("default", _) => d.set_default(values.len() - 1),
                ("delete", true) => d.range(value, None).unwrap(),
                ("delete", false) => d.net(cidr(value), None),
                (_, true) => d.range(net, v).unwrap(),
                (_, false) => d.net(cidr(net), v),
            }
        }
        (d.build(0, KeyTemplate::literal("")), values)
    }

    fn at(t: &(GeoTable, Vec<String>), ip: &str) -> String {
        t.1[t.0.find(ip.as_bytes())].clone()
    }

    #[test]
    fn longest_prefix_wins_whatever_the_order() {
        let t = table(
            false,
            &[
                ("127.0.0.0/8", "loopback"),
                ("192.0.2.0/24", "test"),
                ("0.0.0.0/0", "world"),
                ("127.0.0.1", "one"),
            ],
        );
        assert_eq!(at(&t, "127.0.0.1"), "one");
        assert_eq!(at(&t, "127.0.0.2"), "loopback");
        assert_eq!(at(&t, "192.0.2.255"), "test");
        assert_eq!(at(&t, "10.0.0.1"), "world");
        assert_eq!(at(&t, "::ffff:127.0.0.9"), "loopback");
        assert_eq!(at(&t, "::1"), "", "no IPv6 network, no default");
        assert_eq!(at(&t, "not an address"), "world", "looked up as 255.255.255.255");
        let d = table(
            false,
            &[
                ("127.0.0.0/8", "loopback"),
                ("0.0.0.0/0", "world"),
                ("delete", "127.0.0.0/8"),
            ],
        );
        assert_eq!(at(&d, "127.0.0.1"), "world");
        let six = table(false, &[("default", "def"), ("2001:db8::/32", "doc")]);
        assert_eq!(at(&six, "2001:db8::1"), "doc");
        assert_eq!(at(&six, "2001:db9::1"), "def");
        assert_eq!(at(&six, "10.0.0.1"), "def");
    }

    #[test]
    fn later_ranges_over_earlier_ones() {
        let t = table(
            true,
            &[
                ("default", "default"),
                ("127.0.0.0-127.0.0.255", "test"),
                ("127.0.0.1-127.0.0.2", "test2"),
                ("127.0.0.1-127.0.0.1", "loopback"),
            ],
        );
        assert_eq!(at(&t, "127.0.0.1"), "loopback");
        assert_eq!(at(&t, "127.0.0.2"), "test2");
        assert_eq!(at(&t, "127.0.0.3"), "test");
        assert_eq!(at(&t, "127.0.1.0"), "default");
        assert_eq!(at(&t, "::1"), "default", "ranges are IPv4 only");
        let d = table(
            true,
            &[
                ("default", "default"),
                ("10.10.3.0-10.11.2.255", "foo"),
                ("10.12.3.0-10.13.2.255", "foo2"),
                ("delete", "10.10.3.0-10.11.2.255"),
            ],
        );
        assert_eq!(at(&d, "10.13.2.1"), "foo2");
        assert_eq!(at(&d, "10.11.2.1"), "default");
        assert_eq!(at(&d, "255.255.255.255"), "default");
    }
}
