//! Addresses as nginx's `ngx_parse_url` reads them (`host[:port][/uri]`, `[v6]:port`, `*:port`, `port`), with host
//! names resolved once, at load, through the system resolver in its order. Errors are nginx's `u->err` texts
//! (`invalid host`, `invalid port`, `no host`, `host not found`, ...), which callers place in their own message.

use super::value::atoi;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, ToSocketAddrs};

/// How to read an address (nginx's `ngx_url_t` input flags).
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlOpts {
    /// The port when none is written (80 for http upstreams, 0 = none for stream).
    pub default_port: u16,
    /// A `listen` address: a bare number is a port, `*` is the wildcard, `PORT-PORT` is a range.
    pub listen: bool,
    /// A `/uri` part may follow the host (`proxy_pass`).
    pub uri_part: bool,
    /// Do not resolve host names (they are resolved later, or name an upstream).
    pub no_resolve: bool,
}

/// A parsed address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Url {
    /// The host as written (`[::1]` keeps its brackets), lower/upper case kept.
    pub host: String,
    /// The port written, or the default one.
    pub port: u16,
    /// The port as written (empty when none was).
    pub port_text: String,
    /// True when no port was written.
    pub no_port: bool,
    /// The `/uri` (or `?args`) part, when `uri_part` allowed one.
    pub uri: Option<String>,
    /// The addresses: one per resolved address (per port of a `listen` range). Empty for an unresolved name.
    pub addrs: Vec<SocketAddr>,
    /// A unix-domain socket (`unix:/path`): `host` is `unix:/path`, `addrs` its one token
    /// ([`super::unix_addr`]), the port 0.
    pub unix: bool,
}

/// `ngx_parse_url`.
pub fn parse_url(text: &str, opts: UrlOpts) -> Result<Url, &'static str> {
    if text.len() >= 5 && text.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("unix:")) {
        return parse_unix(text, opts);
    }
    if text.starts_with('[') {
        return parse_inet6(text, opts);
    }
    parse_inet(text, opts)
}

/// `ngx_parse_unix_domain_url`: `unix:/path`, and for `proxy_pass` `unix:/path:/uri` (the path ends at the first
/// `:`).
fn parse_unix(text: &str, opts: UrlOpts) -> Result<Url, &'static str> {
    let rest = text.get(5..).unwrap_or_default();
    let (path, uri) = match rest.find(':') {
        Some(at) if opts.uri_part => (
            rest.get(..at).unwrap_or_default(),
            rest.get(at + 1..).map(str::to_string),
        ),
        _ => (rest, None),
    };
    let token = super::unix_addr::intern(path)?;
    Ok(Url {
        host: format!("unix:{path}"),
        uri: uri.filter(|u| !u.is_empty()),
        addrs: vec![token],
        unix: true,
        ..Url::default()
    })
}

/// Splits off a `/uri` or `?args` part (nginx looks for the first `/`, and a `?` before it).
fn split_uri(text: &str, opts: UrlOpts) -> Result<(&str, Option<String>), &'static str> {
    let uri_at = match (text.find('/'), text.find('?')) {
        (Some(s), Some(q)) => Some(s.min(q)),
        (s, q) => s.or(q),
    };
    match uri_at {
        None => Ok((text, None)),
        Some(_) if opts.listen || !opts.uri_part => Err("invalid host"),
        Some(at) => Ok((text.get(..at).unwrap_or_default(), text.get(at..).map(str::to_string))),
    }
}

/// `PORT` or, for `listen`, `PORT-PORT`: the first and last port.
fn parse_port(text: &str, listen: bool) -> Result<(u16, u16), &'static str> {
    let valid = |n: Option<u64>| {
        n.filter(|n| (1..=65535).contains(n))
            .and_then(|n| u16::try_from(n).ok())
    };
    let (first, last) = match text.split_once('-') {
        Some((first, last)) if listen => {
            let last = valid(atoi(last)).ok_or("invalid port")?;
            (first, Some(last))
        }
        _ => (text, None),
    };
    let first = valid(atoi(first)).ok_or("invalid port")?;
    match last {
        Some(last) if first > last => Err("invalid port range"),
        Some(last) => Ok((first, last)),
        None => Ok((first, first)),
    }
}

fn parse_inet(text: &str, opts: UrlOpts) -> Result<Url, &'static str> {
    let (hostport, uri) = split_uri(text, opts)?;
    let mut url = Url { uri, ..Url::default() };
    let (host, ports) = match hostport.split_once(':') {
        Some((host, port)) => {
            url.port_text = port.to_string();
            (host, parse_port(port, opts.listen)?)
        }
        None => {
            if opts.listen && url.uri.is_none() {
                if let Some(ports) = listen_port_only(hostport)? {
                    url.port = ports.0;
                    url.port_text = hostport.to_string();
                    url.addrs = expand(IpAddr::V4(Ipv4Addr::UNSPECIFIED), ports);
                    return Ok(url);
                }
            }
            url.no_port = true;
            (hostport, (opts.default_port, opts.default_port))
        }
    };
    url.port = ports.0;
    if host.is_empty() {
        return Err("no host");
    }
    url.host = host.to_string();
    if opts.listen && host == "*" {
        url.addrs = expand(IpAddr::V4(Ipv4Addr::UNSPECIFIED), ports);
        return Ok(url);
    }
    if let Some(ip) = inet_addr(host) {
        url.addrs = expand(IpAddr::V4(ip), ports);
        return Ok(url);
    }
    if opts.no_resolve {
        return Ok(url);
    }
    let resolved = resolve_host(host, ports.0)?;
    url.addrs = resolved.iter().flat_map(|a| expand(a.ip(), ports)).collect();
    Ok(url)
}

/// A `listen` value that is only a port (or a range): `Some` ports; `None` when it is not a number.
fn listen_port_only(text: &str) -> Result<Option<(u16, u16)>, &'static str> {
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => match atoi(last) {
            None => return Ok(None),
            Some(n) => (first, Some(n)),
        },
        None => (text, None),
    };
    let Some(first) = atoi(first) else {
        return Ok(None);
    };
    let in_range = |n: u64| (1..=65535).contains(&n);
    if last.is_some_and(|l| !in_range(l)) || !in_range(first) {
        return Err("invalid port");
    }
    let first = u16::try_from(first).map_err(|_| "invalid port")?;
    let last = match last {
        Some(l) => u16::try_from(l).map_err(|_| "invalid port")?,
        None => first,
    };
    if first > last {
        return Err("invalid port range");
    }
    Ok(Some((first, last)))
}

fn parse_inet6(text: &str, opts: UrlOpts) -> Result<Url, &'static str> {
    let inner = text.get(1..).unwrap_or_default();
    let close = inner.find(']').ok_or("invalid host")?;
    let addr_text = inner.get(..close).unwrap_or_default();
    let rest = inner.get(close + 1..).unwrap_or_default();
    let (rest, uri) = match rest.find('/') {
        None => (rest, None),
        Some(_) if opts.listen || !opts.uri_part => return Err("invalid host"),
        Some(at) => (rest.get(..at).unwrap_or_default(), rest.get(at..).map(str::to_string)),
    };
    let mut url = Url { uri, ..Url::default() };
    let ports = if rest.is_empty() {
        url.no_port = true;
        (opts.default_port, opts.default_port)
    } else {
        let port = rest.strip_prefix(':').ok_or("invalid host")?;
        url.port_text = port.to_string();
        parse_port(port, opts.listen)?
    };
    url.port = ports.0;
    if addr_text.is_empty() {
        return Err("no host");
    }
    url.host = format!("[{addr_text}]");
    let ip: Ipv6Addr = addr_text.parse().map_err(|_| "invalid IPv6 address")?;
    url.addrs = expand(IpAddr::V6(ip), ports);
    Ok(url)
}

/// One address per port of a range.
fn expand(ip: IpAddr, (first, last): (u16, u16)) -> Vec<SocketAddr> {
    (first..=last).map(|port| SocketAddr::new(ip, port)).collect()
}

/// `ngx_inet_addr`: a dotted quad, leniently (`1..2.3` has an empty octet, read as 0). `None` when it is not
/// one, and for 255.255.255.255, which nginx treats as a host name (`INADDR_NONE`).
pub fn inet_addr(text: &str) -> Option<Ipv4Addr> {
    let (mut addr, mut octet, mut dots) = (0u32, 0u32, 0);
    for c in text.bytes() {
        match c {
            b'0'..=b'9' => {
                octet = octet * 10 + u32::from(c - b'0');
                if octet > 255 {
                    return None;
                }
            }
            b'.' => {
                addr = (addr << 8) + octet;
                octet = 0;
                dots += 1;
                if dots > 3 {
                    return None;
                }
            }
            _ => return None,
        }
    }
    if dots != 3 {
        return None;
    }
    let ip = Ipv4Addr::from((addr << 8) + octet);
    (ip != Ipv4Addr::BROADCAST).then_some(ip)
}

/// Resolves a host name through the system resolver (getaddrinfo), keeping its order.
pub fn resolve_host(host: &str, port: u16) -> Result<Vec<SocketAddr>, &'static str> {
    if let Some(ip) = inet_addr(host) {
        return Ok(vec![SocketAddr::V4(SocketAddrV4::new(ip, port))]);
    }
    if host.contains('\0') {
        return Err("host not found");
    }
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs().map_err(|_| "host not found")?.collect();
    if addrs.is_empty() {
        return Err("host not found");
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http() -> UrlOpts {
        UrlOpts {
            default_port: 80,
            ..UrlOpts::default()
        }
    }

    fn listen() -> UrlOpts {
        UrlOpts {
            default_port: 80,
            listen: true,
            ..UrlOpts::default()
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn upstream_server_addresses() {
        let u = parse_url("127.0.0.1:8081", http()).unwrap();
        assert_eq!((u.host.as_str(), u.port, u.no_port), ("127.0.0.1", 8081, false));
        assert_eq!(u.addrs, [sa("127.0.0.1:8081")]);
        let u = parse_url("127.0.0.1", http()).unwrap();
        assert_eq!((u.port, u.no_port), (80, true));
        let u = parse_url("[::1]:9000", http()).unwrap();
        assert_eq!(u.host, "[::1]");
        assert_eq!(u.addrs, [sa("[::1]:9000")]);
        assert_eq!(parse_url("[::1]", http()).unwrap().addrs, [sa("[::1]:80")]);
        let u = parse_url("localhost:8080", http()).unwrap();
        assert!(u.addrs.contains(&sa("127.0.0.1:8080")), "{:?}", u.addrs);
    }

    #[test]
    fn nginx_address_errors() {
        assert_eq!(parse_url("127.0.0.1:0", http()), Err("invalid port"));
        assert_eq!(parse_url("127.0.0.1:65536", http()), Err("invalid port"));
        assert_eq!(parse_url("127.0.0.1:x", http()), Err("invalid port"));
        assert_eq!(parse_url("127.0.0.1:", http()), Err("invalid port"));
        assert_eq!(parse_url(":80", http()), Err("no host"));
        assert_eq!(parse_url("a/b", http()), Err("invalid host"));
        assert_eq!(parse_url("[::1", http()), Err("invalid host"));
        assert_eq!(parse_url("[::1]x", http()), Err("invalid host"));
        assert_eq!(parse_url("[]:80", http()), Err("no host"));
        assert_eq!(parse_url("[zz]:80", http()), Err("invalid IPv6 address"));
        assert_eq!(parse_url("::1:80", http()), Err("invalid port"));
        assert_eq!(parse_url("no-such-host.invalid", http()), Err("host not found"));
        assert_eq!(parse_url("unix:", http()), Err("no path in the unix domain socket"));
    }

    #[test]
    fn unix_domain_urls() {
        let u = parse_url("unix:/tmp/url-test.sock", listen()).unwrap();
        assert!(u.unix);
        assert_eq!(u.host, "unix:/tmp/url-test.sock");
        assert_eq!(u.addrs.len(), 1);
        assert_eq!(
            super::super::unix_addr::path_of(&u.addrs[0]),
            Some("/tmp/url-test.sock")
        );
        let pass = UrlOpts {
            uri_part: true,
            ..http()
        };
        let u = parse_url("unix:/tmp/url-test.sock:/prefix/", pass).unwrap();
        assert_eq!(
            (u.host.as_str(), u.uri.as_deref()),
            ("unix:/tmp/url-test.sock", Some("/prefix/"))
        );
        let u = parse_url("unix:/tmp/url-test.sock", pass).unwrap();
        assert_eq!(u.uri, None);
        // without a uri part, a colon belongs to the path
        let u = parse_url("unix:/tmp/a:b", http()).unwrap();
        assert_eq!(u.host, "unix:/tmp/a:b");
    }

    #[test]
    fn proxy_pass_urls_keep_their_uri() {
        let opts = UrlOpts {
            default_port: 80,
            uri_part: true,
            no_resolve: true,
            ..UrlOpts::default()
        };
        let u = parse_url("backend/prefix/", opts).unwrap();
        assert_eq!(
            (u.host.as_str(), u.uri.as_deref(), u.no_port),
            ("backend", Some("/prefix/"), true)
        );
        assert!(u.addrs.is_empty());
        let u = parse_url("10.0.0.1:8080?x", opts).unwrap();
        assert_eq!((u.port, u.uri.as_deref()), (8080, Some("?x")));
        assert_eq!(u.addrs, [sa("10.0.0.1:8080")]);
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_url("8080", listen()).unwrap().addrs, [sa("0.0.0.0:8080")]);
        assert_eq!(parse_url("*:8080", listen()).unwrap().addrs, [sa("0.0.0.0:8080")]);
        assert_eq!(parse_url("127.0.0.1", listen()).unwrap().addrs, [sa("127.0.0.1:80")]);
        assert_eq!(parse_url("[::]:443", listen()).unwrap().addrs, [sa("[::]:443")]);
        assert_eq!(
            parse_url("127.0.0.1:8000-8002", listen()).unwrap().addrs,
            [sa("127.0.0.1:8000"), sa("127.0.0.1:8001"), sa("127.0.0.1:8002")]
        );
        assert_eq!(parse_url("8002-8000", listen()), Err("invalid port range"));
        assert_eq!(parse_url("70000", listen()), Err("invalid port"));
        assert_eq!(parse_url("0", listen()), Err("invalid port"));
        assert_eq!(parse_url("/x", listen()), Err("invalid host"));
    }

    #[test]
    fn lenient_dotted_quads() {
        assert_eq!(inet_addr("10.1.2.3"), Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(inet_addr("1..2.3"), Some(Ipv4Addr::new(1, 0, 2, 3)));
        assert_eq!(inet_addr("010.1.2.3"), Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(inet_addr("256.1.2.3"), None);
        assert_eq!(inet_addr("1.2.3"), None);
        assert_eq!(inet_addr("1.2.3.4.5"), None);
        assert_eq!(inet_addr("255.255.255.255"), None);
    }
}
