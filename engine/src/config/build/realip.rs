//! `set_real_ip_from`, `real_ip_header` and `real_ip_recursive` (nginx's `ngx_http_realip_module` and, for
//! `set_real_ip_from`, `ngx_stream_realip_module`): the trusted addresses as read, layered http -> server ->
//! location with nginx's merge (a level with its own `set_real_ip_from` lines replaces the list it would inherit).

use super::{arg, directive_err, flag_slot, Build};
use crate::config::error::ConfigError;
use crate::config::parser::Directive;
pub use crate::config::realip::{Cidr, RealIpConf, RealIpHeader, TrustedList};
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;

/// What one http, server or location level sets.
#[derive(Debug, Clone, Default)]
pub struct RealIpLayer {
    from: Option<TrustedList>,
    header: Option<RealIpHeader>,
    recursive: Option<bool>,
}

impl RealIpLayer {
    /// Reads `d` if it is a realip directive; `Ok(false)` when it is not.
    pub fn directive(&mut self, b: &mut Build, d: &Directive) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "set_real_ip_from" => set_real_ip_from(self.from.get_or_insert_with(TrustedList::default), b, d)?,
            "real_ip_header" => {
                if self.header.is_some() {
                    return Err(directive_err(d, "is duplicate"));
                }
                self.header = Some(match arg(d, 0) {
                    "X-Real-IP" => RealIpHeader::XRealIp,
                    "X-Forwarded-For" => RealIpHeader::XForwardedFor,
                    "proxy_protocol" => RealIpHeader::ProxyProtocol,
                    name => RealIpHeader::Named(name.to_ascii_lowercase()),
                });
            }
            "real_ip_recursive" => flag_slot(&mut self.recursive, d)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &RealIpLayer) -> RealIpLayer {
        RealIpLayer {
            from: self.from.clone().or_else(|| parent.from.clone()),
            header: self.header.clone().or_else(|| parent.header.clone()),
            recursive: self.recursive.or(parent.recursive),
        }
    }

    /// The effective settings, `None` where no level trusts any address (nothing to do per request).
    pub fn conf(&self) -> Option<Arc<RealIpConf>> {
        let from = self.from.as_ref()?;
        Some(Arc::new(RealIpConf {
            from: from.from.clone(),
            unix: from.unix,
            header: self.header.clone().unwrap_or_default(),
            recursive: self.recursive.unwrap_or(false),
        }))
    }
}

/// `set_real_ip_from ADDR|CIDR|unix:|NAME` into `list` (nginx's `ngx_http_realip_from`): a name is resolved now,
/// each of its addresses trusted alone.
pub fn set_real_ip_from(list: &mut TrustedList, b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
    let text = arg(d, 0);
    if text == "unix:" {
        list.unix = true;
        return Ok(());
    }
    match cidr(text) {
        Some((c, exact)) => {
            if !exact {
                b.warn(&format!("low address bits of {text} are meaningless"), &d.span);
            }
            list.from.push(c);
        }
        None => {
            let addrs = (text, 0)
                .to_socket_addrs()
                .map_err(|_| ConfigError::invalid(format!("host not found in set_real_ip_from \"{text}\""), &d.span))?;
            for a in addrs {
                let bits = if a.is_ipv4() { 32 } else { 128 };
                list.from.push(Cidr { addr: a.ip(), bits });
            }
        }
    }
    Ok(())
}

/// nginx's `ngx_ptocidr`: `ADDR` or `ADDR/BITS`; whether the address had no bits beyond the prefix.
pub fn cidr(text: &str) -> Option<(Cidr, bool)> {
    let (addr, bits) = match text.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits = match bits {
        None => max,
        Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => {
            b.parse::<u8>().ok().filter(|&n| n <= max)?
        }
        Some(_) => return None,
    };
    let masked = mask(ip, bits);
    Some((Cidr { addr: masked, bits }, masked == ip))
}

/// `ip` with its bits beyond `bits` cleared.
pub fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_as_nginx_reads_them() {
        let c = |t: &str| cidr(t).map(|(c, exact)| (c.addr.to_string(), c.bits, exact));
        assert_eq!(c("127.0.0.1"), Some(("127.0.0.1".into(), 32, true)));
        assert_eq!(c("10.0.1.0/24"), Some(("10.0.1.0".into(), 24, true)));
        assert_eq!(c("10.0.1.7/24"), Some(("10.0.1.0".into(), 24, false)));
        assert_eq!(c("0.0.0.0/0"), Some(("0.0.0.0".into(), 0, true)));
        assert_eq!(c("2001:db8::1/32"), Some(("2001:db8::".into(), 32, false)));
        assert_eq!(c("::1"), Some(("::1".into(), 128, true)));
        assert_eq!(c("10.0.0.0/33"), None);
        assert_eq!(c("::/129"), None);
        assert_eq!(c("10.0.0.0/"), None);
        assert_eq!(c("10.0.0.0/x"), None);
        assert_eq!(c("example"), None);
    }

    #[test]
    fn a_level_with_its_own_list_replaces_the_inherited_one() {
        let parent = RealIpLayer {
            from: Some(TrustedList {
                from: vec![cidr("10.0.0.0/8").unwrap().0],
                unix: false,
            }),
            recursive: Some(true),
            ..RealIpLayer::default()
        };
        let mut child = RealIpLayer {
            header: Some(RealIpHeader::XForwardedFor),
            ..RealIpLayer::default()
        };
        let merged = child.over(&parent).conf().unwrap();
        assert_eq!(merged.from.len(), 1);
        assert!(merged.recursive);
        assert_eq!(merged.header, RealIpHeader::XForwardedFor);
        child.from = Some(TrustedList::default());
        assert!(child.over(&parent).conf().unwrap().from.is_empty());
        assert_eq!(RealIpLayer::default().conf(), None);
    }
}
