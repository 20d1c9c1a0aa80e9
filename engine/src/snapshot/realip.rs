//! `set_real_ip_from` compiled at load: the trusted networks as sorted, merged address ranges (one binary search
//! per check), and the plan that finds a request's real client address (nginx's `ngx_http_realip_handler`) or a
//! stream session's (`ngx_stream_realip_handler`).

use crate::config::realip::{RealIpConf, RealIpHeader};
use crate::http::proxy_protocol::ProxyAddrs;
use crate::http::realip::{forwarded, Trust};
use crate::http::request::RequestHead;
use crate::http::vars::ConnVars;
use std::net::{IpAddr, SocketAddr};

/// The trusted networks: disjoint inclusive ranges, sorted, per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trusted {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
    /// `set_real_ip_from unix:`.
    unix: bool,
}

/// Sorts `ranges` and merges the ones that overlap or touch.
fn merged<T: Ord + Copy>(mut ranges: Vec<(T, T)>, next: impl Fn(T) -> Option<T>) -> Vec<(T, T)> {
    ranges.sort_unstable();
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if next(last.1).is_none_or(|n| lo <= n) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn contains<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    let i = ranges.partition_point(|&(lo, _)| lo <= x);
    i > 0 && ranges.get(i - 1).is_some_and(|&(_, hi)| x <= hi)
}

impl Trusted {
    /// The table of `conf`'s networks.
    pub fn new(conf: &RealIpConf) -> Trusted {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for c in &conf.from {
            match c.addr {
                IpAddr::V4(a) => {
                    let lo = u32::from(a);
                    let host = u32::MAX.checked_shr(u32::from(c.bits)).unwrap_or(0);
                    v4.push((lo, lo | host));
                }
                IpAddr::V6(a) => {
                    let lo = u128::from(a);
                    let host = u128::MAX.checked_shr(u32::from(c.bits)).unwrap_or(0);
                    v6.push((lo, lo | host));
                }
            }
        }
        Trusted {
            v4: merged(v4, |n: u32| n.checked_add(1)),
            v6: merged(v6, |n: u128| n.checked_add(1)),
            unix: conf.unix,
        }
    }
}

impl Trust for Trusted {
    fn trusts(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => contains(&self.v4, u32::from(a)),
            IpAddr::V6(a) => contains(&self.v6, u128::from(a)),
        }
    }

    fn trusts_unix(&self) -> bool {
        self.unix
    }
}

/// A level's realip settings, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealIpPlan {
    trusted: Trusted,
    header: RealIpHeader,
    recursive: bool,
}

impl RealIpPlan {
    pub fn new(conf: &RealIpConf) -> RealIpPlan {
        RealIpPlan {
            trusted: Trusted::new(conf),
            header: conf.header.clone(),
            recursive: conf.recursive,
        }
    }

    /// The real client address of a request from `peer` (with the connection's PROXY protocol addresses), or
    /// `None` to keep the one it has.
    pub fn http(&self, peer: SocketAddr, req: &RequestHead<'_, '_>, proxy: Option<&ProxyAddrs>) -> Option<SocketAddr> {
        let one = |v: Option<&[u8]>| forwarded(peer, v.into_iter(), &self.trusted, self.recursive);
        match &self.header {
            RealIpHeader::XRealIp => one(req.header("x-real-ip")),
            RealIpHeader::Named(name) => one(req.header(name)),
            RealIpHeader::XForwardedFor => {
                let lines = req
                    .headers
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case("x-forwarded-for"))
                    .map(|h| h.value);
                forwarded(peer, lines, &self.trusted, self.recursive)
            }
            RealIpHeader::ProxyProtocol => {
                let p = proxy?;
                let a = one(Some(p.src.as_bytes()))?;
                Some(SocketAddr::new(a.ip(), p.src_port))
            }
        }
    }

    /// A stream session's client: the PROXY protocol source when `peer` is trusted.
    pub fn stream(&self, peer: SocketAddr, proxy: Option<&ProxyAddrs>) -> Option<SocketAddr> {
        let p = proxy?;
        if !self.trusted.trusts_addr(&peer) {
            return None;
        }
        p.client()
    }
}

/// Applies `plan` (a server's or a location's) to a request on `conn` (with its PROXY protocol addresses):
/// whether it set the real address. Inlined: without a plan it is one test.
#[inline]
pub fn apply(
    plan: Option<&RealIpPlan>,
    req: &RequestHead<'_, '_>,
    conn: &mut ConnVars,
    proxy: Option<&ProxyAddrs>,
) -> bool {
    let Some(real) = plan.and_then(|p| p.http(conn.peer, req, proxy)) else {
        return false;
    };
    conn.remote = real;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::realip::Cidr;

    fn conf(nets: &[&str]) -> RealIpConf {
        let from = nets
            .iter()
            .map(|n| {
                let (a, b) = n
                    .split_once('/')
                    .unwrap_or((n, if n.contains(':') { "128" } else { "32" }));
                Cidr {
                    addr: a.parse().unwrap(),
                    bits: b.parse().unwrap(),
                }
            })
            .collect();
        RealIpConf {
            from,
            ..RealIpConf::default()
        }
    }

    #[test]
    fn ranges_sorted_and_merged() {
        let t = Trusted::new(&conf(&[
            "10.0.1.0/24",
            "10.0.0.0/24",
            "10.0.0.128/25",
            "192.0.2.1",
            "::1",
            "2001:db8::/32",
        ]));
        assert_eq!(t.v4, vec![(0x0a00_0000, 0x0a00_01ff), (0xc000_0201, 0xc000_0201)]);
        for (ip, want) in [
            ("10.0.0.0", true),
            ("10.0.1.255", true),
            ("10.0.2.0", false),
            ("9.255.255.255", false),
            ("192.0.2.1", true),
            ("192.0.2.2", false),
            ("::1", true),
            ("::2", false),
            ("2001:db8:ffff::1", true),
            ("2001:db9::", false),
        ] {
            assert_eq!(t.trusts(ip.parse().unwrap()), want, "{ip}");
        }
        let all = Trusted::new(&conf(&["0.0.0.0/0", "::/0"]));
        assert!(all.trusts("255.255.255.255".parse().unwrap()) && all.trusts("::".parse().unwrap()));
        assert!(!Trusted::default().trusts("127.0.0.1".parse().unwrap()));
    }
}
