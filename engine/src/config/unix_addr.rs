//! Unix-domain socket addresses (`unix:/path`) inside corelb's `SocketAddr`-keyed tables.
//!
//! Listen tables, upstream peers, keepalive pools, zone slots and the access-log records all key on a
//! `SocketAddr`. A unix path gets one *token* there: an IPv6 socket address in the discard-only prefix `100::/64`
//! (RFC 6666, never routed) with port 0 and a flow label no kernel hands out, [`FLOW_MARK`]; its low 32 bits
//! number the path in a process-wide table that only grows (a path keeps its token across reloads, so a kept
//! peer keeps its zone slot and pool). Token 0 is the unnamed address an accepted unix client has (nginx prints
//! it `unix:`). Everything that prints or connects to an address asks [`path_of`] first; an inet address is
//! answered by one compare of the flow label, so the inet paths stay as they were.
//!
//! Why a token and not an enum through every table: the same address type serves both families with no change
//! to the hot path's keys, and a unix peer is a peer like any other to the balancers, the zone and the pools.

use std::collections::HashMap;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::{Mutex, OnceLock};

/// The flow label of a token (20 bits as IPv6 has them; "c0b1" reads "corelb", more or less).
pub const FLOW_MARK: u32 = 0x0c_0b1b;

/// How many distinct paths a process can name (each interned path costs one slot for the process's life).
pub const MAX_PATHS: usize = 4096;

/// The longest path a `sockaddr_un` holds (108 bytes with its terminating NUL on Linux).
pub const MAX_PATH_LEN: usize = 107;

/// The paths by token number; slot 0 is the unnamed address (empty path). Written once each, read without a lock.
static SLOTS: [OnceLock<&'static str>; MAX_PATHS] = [const { OnceLock::new() }; MAX_PATHS];

/// The numbers given so far, by path (taken only while a config is read).
fn numbers() -> &'static Mutex<HashMap<&'static str, u32>> {
    static NUMBERS: OnceLock<Mutex<HashMap<&'static str, u32>>> = OnceLock::new();
    NUMBERS.get_or_init(|| {
        let _ = SLOTS[0].set("");
        Mutex::new(HashMap::from([("", 0)]))
    })
}

fn token(n: u32) -> SocketAddr {
    let ip = Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, (n >> 16) as u16, n as u16);
    SocketAddr::V6(SocketAddrV6::new(ip, 0, FLOW_MARK, 0))
}

/// The address an accepted unix-domain client has (nginx's `$remote_addr` `unix:`).
pub fn unnamed() -> SocketAddr {
    token(0)
}

/// The token of `path` (the part after `unix:`), given it on first sight. Errors are nginx's `u->err` texts.
pub fn intern(path: &str) -> Result<SocketAddr, &'static str> {
    if path.is_empty() {
        return Err("no path in the unix domain socket");
    }
    if path.len() > MAX_PATH_LEN {
        return Err("too long path in the unix domain socket");
    }
    let mut numbers = numbers().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&n) = numbers.get(path) {
        return Ok(token(n));
    }
    let n = numbers.len();
    let slot = SLOTS.get(n).ok_or("too many unix domain socket paths")?;
    let leaked: &'static str = Box::leak(path.to_string().into_boxed_str());
    let _ = slot.set(leaked);
    let n = u32::try_from(n).map_err(|_| "too many unix domain socket paths")?;
    numbers.insert(leaked, n);
    Ok(token(n))
}

/// Whether `addr` is a unix-domain token (one compare for an IPv4 address, three for IPv6).
#[inline]
pub fn is_unix(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(_) => false,
        SocketAddr::V6(a) => a.flowinfo() == FLOW_MARK && a.port() == 0 && a.ip().segments()[0] == 0x100,
    }
}

/// The path of a unix-domain token (`""` for an unnamed client), or `None` for an inet address.
#[inline]
pub fn path_of(addr: &SocketAddr) -> Option<&'static str> {
    if !is_unix(addr) {
        return None;
    }
    let SocketAddr::V6(a) = addr else { return None };
    let s = a.ip().segments();
    let n = (usize::from(s[6]) << 16) | usize::from(s[7]);
    SLOTS.get(n)?.get().copied()
}

/// The IP of a client address, `None` for a unix-domain client (whose `ip_hash` key is nginx's pseudo address).
#[inline]
pub fn client_ip(addr: &SocketAddr) -> Option<std::net::IpAddr> {
    (!is_unix(addr)).then(|| addr.ip())
}

/// `addr` as nginx prints a socket address with its port (`ngx_sock_ntop(.., 1)`): `127.0.0.1:80`, `[::1]:80`,
/// `unix:/path`.
pub struct Display<'a>(pub &'a SocketAddr);

impl std::fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match path_of(self.0) {
            Some(p) => write!(f, "unix:{p}"),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The address part of `addr` as nginx prints a client (`$remote_addr`, `client: ...` in the error log): the IP,
/// or `unix:PATH` (`unix:` for an accepted client).
pub struct Ip<'a>(pub &'a SocketAddr);

impl std::fmt::Display for Ip<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match path_of(self.0) {
            Some(p) => write!(f, "unix:{p}"),
            None => write!(f, "{}", self.0.ip()),
        }
    }
}

/// `addr` as nginx prints it with its port, as a string.
pub fn to_text(addr: &SocketAddr) -> String {
    Display(addr).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_keeps_its_token_and_prints_as_nginx_does() {
        let a = intern("/tmp/corelb-unix-addr-test.sock").unwrap();
        assert_eq!(intern("/tmp/corelb-unix-addr-test.sock").unwrap(), a);
        assert_ne!(intern("/tmp/corelb-unix-addr-test-2.sock").unwrap(), a);
        assert!(is_unix(&a));
        assert_eq!(path_of(&a), Some("/tmp/corelb-unix-addr-test.sock"));
        assert_eq!(to_text(&a), "unix:/tmp/corelb-unix-addr-test.sock");
        assert_eq!(to_text(&unnamed()), "unix:");
        assert_eq!(path_of(&unnamed()), Some(""));
        assert_eq!(Ip(&unnamed()).to_string(), "unix:");
        assert_eq!(Ip(&"[::1]:80".parse().unwrap()).to_string(), "::1");
    }

    #[test]
    fn inet_addresses_are_not_tokens() {
        for text in ["127.0.0.1:80", "[::1]:80", "[100::]:0", "[100::1]:0"] {
            let a: SocketAddr = text.parse().unwrap();
            assert!(!is_unix(&a), "{text}");
            assert_eq!(path_of(&a), None);
            assert_eq!(to_text(&a), text);
        }
    }

    #[test]
    fn bad_paths_are_refused_with_nginx_texts() {
        assert_eq!(intern(""), Err("no path in the unix domain socket"));
        assert_eq!(
            intern(&"a".repeat(MAX_PATH_LEN + 1)),
            Err("too long path in the unix domain socket")
        );
    }
}
