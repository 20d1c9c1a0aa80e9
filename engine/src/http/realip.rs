//! The real client address behind trusted proxies (nginx's `ngx_http_get_forwarded_addr`): a header's addresses
//! read from the right, each step allowed only while the address it came from is trusted; with
//! `real_ip_recursive on` the walk goes on through trusted addresses. Pure and allocation-free.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Which addresses may name the client for the one that sent them (`set_real_ip_from`).
pub trait Trust {
    fn trusts(&self, ip: IpAddr) -> bool;

    /// `set_real_ip_from unix:`: whether a client over a unix-domain socket is trusted.
    fn trusts_unix(&self) -> bool {
        false
    }

    /// Whether a sender at `addr` is trusted: its IP, or for a unix-domain socket [`Trust::trusts_unix`].
    fn trusts_addr(&self, addr: &SocketAddr) -> bool {
        match crate::config::unix_addr::is_unix(addr) {
            true => self.trusts_unix(),
            false => self.trusts(addr.ip()),
        }
    }
}

impl<F: Fn(IpAddr) -> bool> Trust for F {
    fn trusts(&self, ip: IpAddr) -> bool {
        self(ip)
    }
}

/// How one header value's walk ended (nginx's `NGX_OK`, `NGX_DONE`, `NGX_DECLINED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// Every step was taken (the value's addresses ran out, or one step when not recursive).
    Whole,
    /// Stopped at an untrusted address or one that does not parse, after at least one step.
    Stopped,
    /// No step: the sender was not trusted, or the last address does not parse.
    None,
}

/// The client address that the header `values` (each line of the header, in the order received) give for a
/// connection from `peer`, or `None` to keep `peer`. An address without a port gets port 0 (`$remote_port`
/// is then empty, as nginx's).
pub fn forwarded<'v>(
    peer: SocketAddr,
    values: impl DoubleEndedIterator<Item = &'v [u8]>,
    trust: &impl Trust,
    recursive: bool,
) -> Option<SocketAddr> {
    let mut addr = peer;
    let mut found = false;
    let mut last = Walk::None;
    for value in values.rev() {
        last = walk(&mut addr, value, trust, recursive);
        if !recursive {
            break;
        }
        if last == Walk::None && found {
            last = Walk::Stopped;
            break;
        }
        if last != Walk::Whole {
            break;
        }
        found = true;
    }
    (last != Walk::None).then_some(addr)
}

/// nginx's `ngx_http_get_forwarded_addr_internal` over one value.
fn walk(addr: &mut SocketAddr, xff: &[u8], trust: &impl Trust, recursive: bool) -> Walk {
    let mut found = false;
    let mut len = xff.len();
    let stop = |found: bool| if found { Walk::Stopped } else { Walk::None };
    loop {
        if !trust.trusts_addr(addr) {
            return stop(found);
        }
        if len == 0 {
            return stop(found);
        }
        // trailing separators (the first byte is never one: nginx stops its scan there)
        while len > 1 && matches!(xff.get(len - 1), Some(b' ' | b',')) {
            len -= 1;
        }
        let mut start = len - 1;
        while start > 0 {
            if matches!(xff.get(start), Some(b' ' | b',')) {
                start += 1;
                break;
            }
            start -= 1;
        }
        let Some(parsed) = xff.get(start..len).and_then(parse_addr_port) else {
            return stop(found);
        };
        *addr = parsed;
        found = true;
        if !recursive || start == 0 {
            return Walk::Whole;
        }
        len = start - 1;
    }
}

/// nginx's `ngx_parse_addr_port`: `ADDR`, `ADDR:PORT` or `[ADDR]:PORT` (`[ADDR]` too).
pub fn parse_addr_port(text: &[u8]) -> Option<SocketAddr> {
    if let Some(ip) = parse_addr(text) {
        return Some(SocketAddr::new(ip, 0));
    }
    let (host, port) = if let Some(inner) = text.strip_prefix(b"[") {
        let close = inner.iter().position(|&c| c == b']')?;
        let (host, after) = (inner.get(..close)?, inner.get(close + 1..)?);
        if after.is_empty() {
            return parse_addr(host).map(|ip| SocketAddr::new(ip, 0));
        }
        (host, after.strip_prefix(b":")?)
    } else {
        let colon = text.iter().position(|&c| c == b':')?;
        (text.get(..colon)?, text.get(colon + 1..)?)
    };
    let port = atoi(port).filter(|p| (1..=65535).contains(p))?;
    Some(SocketAddr::new(parse_addr(host)?, u16::try_from(port).ok()?))
}

/// nginx's `ngx_parse_addr`: an IPv4 address as `ngx_inet_addr` reads it (leading zeros allowed), or IPv6.
pub fn parse_addr(text: &[u8]) -> Option<IpAddr> {
    if let Some(v4) = inet_addr(text) {
        return Some(IpAddr::V4(v4));
    }
    let s = std::str::from_utf8(text).ok()?;
    s.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6)
}

/// nginx's `ngx_inet_addr`: four decimal octets.
fn inet_addr(text: &[u8]) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut n = 0;
    let mut octet: u32 = 0;
    let mut digits = 0;
    for &c in text {
        match c {
            b'0'..=b'9' => {
                octet = octet * 10 + u32::from(c - b'0');
                digits += 1;
                if octet > 255 {
                    return None;
                }
            }
            b'.' if digits > 0 && n < 3 => {
                *octets.get_mut(n)? = octet as u8;
                n += 1;
                (octet, digits) = (0, 0);
            }
            _ => return None,
        }
    }
    if n != 3 || digits == 0 {
        return None;
    }
    *octets.get_mut(3)? = octet as u8;
    Some(Ipv4Addr::from(octets))
}

/// nginx's `ngx_atoi`: decimal digits only.
fn atoi(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// realip.t's `set_real_ip_from 127.0.0.1/32; set_real_ip_from 10.0.1.0/24;`
    fn trusted(ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                v4 == Ipv4Addr::LOCALHOST || (o[0], o[1], o[2]) == (10, 0, 1)
            }
            IpAddr::V6(_) => false,
        }
    }

    fn peer() -> SocketAddr {
        "127.0.0.1:5000".parse().unwrap()
    }

    fn real(lines: &[&str], recursive: bool) -> Option<String> {
        forwarded(peer(), lines.iter().map(|l| l.as_bytes()), &trusted, recursive).map(|a| a.to_string())
    }

    #[test]
    fn one_step_when_not_recursive() {
        assert_eq!(real(&["192.0.2.1"], false).as_deref(), Some("192.0.2.1:0"));
        assert_eq!(real(&["10.0.0.1, 192.0.2.1"], false).as_deref(), Some("192.0.2.1:0"));
        assert_eq!(
            real(&["192.0.2.1, 10.0.1.1, 127.0.0.1"], false).as_deref(),
            Some("127.0.0.1:0")
        );
        // several lines: only the last is read
        assert_eq!(
            real(&["192.0.2.1", "127.0.0.1, 10.0.1.1"], false).as_deref(),
            Some("10.0.1.1:0")
        );
    }

    #[test]
    fn recursive_walks_through_trusted() {
        assert_eq!(
            real(&["10.0.1.1, 192.0.2.1, 127.0.0.1"], true).as_deref(),
            Some("192.0.2.1:0")
        );
        assert_eq!(
            real(&["10.0.1.1", "192.0.2.1", "127.0.0.1"], true).as_deref(),
            Some("192.0.2.1:0")
        );
        // every address trusted: the leftmost
        assert_eq!(real(&["10.0.1.7, 127.0.0.1"], true).as_deref(), Some("10.0.1.7:0"));
        assert_eq!(
            real(&["10.0.1.7", "10.0.1.8,127.0.0.1"], true).as_deref(),
            Some("10.0.1.7:0")
        );
        // a bad entry stops the walk where it is
        assert_eq!(
            real(&["junk, 10.0.1.2, 127.0.0.1"], true).as_deref(),
            Some("10.0.1.2:0")
        );
        assert_eq!(real(&["junk", "10.0.1.2"], true).as_deref(), Some("10.0.1.2:0"));
    }

    #[test]
    fn untrusted_sender_or_bad_value_keeps_the_peer() {
        let from = |p: &str, v: &str| forwarded(p.parse().unwrap(), [v.as_bytes()].into_iter(), &trusted, true);
        assert_eq!(from("192.0.2.9:1", "10.0.0.1"), None);
        assert_eq!(from("127.0.0.1:1", "not an address"), None);
        assert_eq!(from("127.0.0.1:1", ""), None);
        assert_eq!(real(&[], true), None);
    }

    #[test]
    fn separators_and_ports() {
        assert_eq!(real(&["192.0.2.1 ,, "], false).as_deref(), Some("192.0.2.1:0"));
        assert_eq!(real(&["192.0.2.1:8080"], false).as_deref(), Some("192.0.2.1:8080"));
        assert_eq!(real(&["[2001:db8::1]:81"], false).as_deref(), Some("[2001:db8::1]:81"));
        assert_eq!(real(&["2001:db8::1"], false).as_deref(), Some("[2001:db8::1]:0"));
        assert_eq!(real(&["192.0.2.1:0"], false), None);
        assert_eq!(real(&["192.0.2.1:99999"], false), None);
    }

    #[test]
    fn nginx_address_forms() {
        assert_eq!(parse_addr(b"010.0.0.1"), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(parse_addr(b"1.2.3"), None);
        assert_eq!(parse_addr(b"1.2.3.256"), None);
        assert_eq!(parse_addr(b"1..2.3"), None);
        assert_eq!(parse_addr_port(b"[::1]"), Some("[::1]:0".parse().unwrap()));
        assert_eq!(parse_addr_port(b"[::1]x"), None);
        assert_eq!(parse_addr_port(b"1.2.3.4:"), None);
    }
}
