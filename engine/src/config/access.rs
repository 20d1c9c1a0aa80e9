//! `allow`/`deny` (nginx's `ngx_http_access_module` and `ngx_stream_access_module`): one level's rules, compiled
//! at load into per-family lists walked in the order written; the first rule that matches decides.

use super::realip::Cidr;
use std::net::{IpAddr, SocketAddr};

/// A level's `allow`/`deny` lines as nginx keeps them: one list per address family, each in the order written
/// (`all` is a rule in every list, `unix:` only in the unix one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRules {
    /// IPv4: (network, mask, deny).
    v4: Vec<(u32, u32, bool)>,
    /// IPv6: (network, mask, deny).
    v6: Vec<(u128, u128, bool)>,
    /// Unix-domain clients: the deny flag of each rule.
    unix: Vec<bool>,
}

/// What one `allow`/`deny` argument names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessTarget {
    All,
    Unix,
    Net(Cidr),
}

impl AccessRules {
    /// Appends one rule (`deny` for `deny`, else `allow`).
    pub fn push(&mut self, target: AccessTarget, deny: bool) {
        match target {
            AccessTarget::All => {
                self.v4.push((0, 0, deny));
                self.v6.push((0, 0, deny));
                self.unix.push(deny);
            }
            AccessTarget::Unix => self.unix.push(deny),
            AccessTarget::Net(Cidr { addr, bits }) => match addr {
                IpAddr::V4(a) => {
                    let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
                    self.v4.push((u32::from(a) & mask, mask, deny));
                }
                IpAddr::V6(a) => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                    self.v6.push((u128::from(a) & mask, mask, deny));
                }
            },
        }
    }

    /// Whether the rules forbid a client at `client` (nginx's `ngx_http_access_handler`): the first rule of the
    /// client's family that matches decides; none matching allows. An IPv4-mapped IPv6 client is checked against
    /// the IPv4 rules when there are any, as nginx does.
    pub fn denies(&self, client: SocketAddr) -> bool {
        if super::unix_addr::is_unix(&client) {
            return self.denies_unix();
        }
        match client.ip() {
            IpAddr::V4(a) => Self::first_v4(&self.v4, u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) if !self.v4.is_empty() => Self::first_v4(&self.v4, u32::from(v4)),
                _ => {
                    let a = u128::from(a);
                    self.v6
                        .iter()
                        .find(|(net, mask, _)| a & mask == *net)
                        .is_some_and(|r| r.2)
                }
            },
        }
    }

    /// Whether the rules forbid a client over a unix-domain socket.
    pub fn denies_unix(&self) -> bool {
        self.unix.first().copied().unwrap_or(false)
    }

    fn first_v4(rules: &[(u32, u32, bool)], a: u32) -> bool {
        rules
            .iter()
            .find(|(net, mask, _)| a & mask == *net)
            .is_some_and(|r| r.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str, bits: u8) -> AccessTarget {
        AccessTarget::Net(Cidr {
            addr: s.parse().unwrap(),
            bits,
        })
    }

    fn at(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 1)
    }

    #[test]
    fn first_matching_rule_decides() {
        let mut r = AccessRules::default();
        r.push(net("10.1.2.3", 32), true);
        r.push(net("10.0.0.0", 8), false);
        r.push(net("2001:db8::", 32), false);
        r.push(AccessTarget::All, true);
        assert!(r.denies(at("10.1.2.3")));
        assert!(!r.denies(at("10.1.2.4")));
        assert!(r.denies(at("11.0.0.1")));
        assert!(!r.denies(at("2001:db8::1")));
        assert!(r.denies(at("2001:db9::1")));
        assert!(r.denies(at("::ffff:10.1.2.3")));
        assert!(!r.denies(at("::ffff:10.9.9.9")));
        assert!(r.denies_unix());
    }

    #[test]
    fn no_rule_of_the_family_allows() {
        let mut r = AccessRules::default();
        r.push(net("127.0.0.1", 32), true);
        r.push(AccessTarget::Unix, true);
        assert!(!r.denies(at("::1")));
        assert!(!r.denies(at("127.0.0.2")));
        assert!(r.denies(at("127.0.0.1")));
        assert!(r.denies_unix());
        // a mapped address with no IPv4 rules walks the IPv6 ones
        let mut six = AccessRules::default();
        six.push(net("::ffff:0:0", 96), true);
        assert!(six.denies(at("::ffff:1.2.3.4")));
        assert!(!AccessRules::default().denies_unix());
    }
}
