//! The bench target: `http://HOST[:PORT][/PATH]` (HTTP/1.1) or `tcp://HOST:PORT` (raw echo), resolved once.

use super::LoadgenError;
use std::net::{SocketAddr, ToSocketAddrs};

/// What is spoken to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// HTTP/1.1 requests with keepalive.
    Http,
    /// Send a fixed payload, wait for the same number of bytes back.
    Echo,
}

/// A parsed and resolved target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// HTTP or echo.
    pub mode: Mode,
    /// The resolved address (the first the name resolves to).
    pub addr: SocketAddr,
    /// `host[:port]` as written, for the `Host` header.
    pub authority: String,
    /// The request target of the URL (`/` when none), with its query.
    pub path: String,
}

/// Parses and resolves `url`.
pub fn parse_target(url: &str) -> Result<Target, LoadgenError> {
    let bad = |reason| LoadgenError::BadUrl {
        url: url.to_string(),
        reason,
    };
    let (mode, rest) = if let Some(r) = strip_prefix_ci(url, "http://") {
        (Mode::Http, r)
    } else if let Some(r) = strip_prefix_ci(url, "tcp://") {
        (Mode::Echo, r)
    } else if strip_prefix_ci(url, "https://").is_some() {
        return Err(bad("https is not supported: use http:// or tcp://"));
    } else {
        return Err(bad("the scheme must be http:// or tcp://"));
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad("the path has spaces or control characters"));
    }
    if mode == Mode::Echo && path != "/" {
        return Err(bad("a tcp:// target has no path"));
    }
    let (host, port) = split_host_port(authority).map_err(bad)?;
    let port = match (port, mode) {
        (Some(p), _) => p,
        (None, Mode::Http) => 80,
        (None, Mode::Echo) => return Err(bad("a tcp:// target needs a port")),
    };
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|source| LoadgenError::Resolve {
            host: host.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| LoadgenError::Resolve {
            host: host.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
        })?;
    Ok(Target {
        mode,
        addr,
        authority: authority.to_string(),
        path,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

/// Splits `host[:port]` or `[v6][:port]`; the host is returned without brackets.
fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    if authority.is_empty() {
        return Err("no host");
    }
    if authority.contains('@') {
        return Err("user info is not supported");
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
        match after {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or("junk after ]")?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("bad host");
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err("bad port"),
        },
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_and_tcp_targets() {
        let t = parse_target("http://127.0.0.1:8080/a?b=1").unwrap();
        assert_eq!(t.mode, Mode::Http);
        assert_eq!(t.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((t.authority.as_str(), t.path.as_str()), ("127.0.0.1:8080", "/a?b=1"));
        let t = parse_target("HTTP://127.0.0.2").unwrap();
        assert_eq!((t.addr.port(), t.path.as_str()), (80, "/"));
        let t = parse_target("http://127.0.0.1:9?q").unwrap();
        assert_eq!(t.path, "/?q");
        let t = parse_target("tcp://[::1]:7").unwrap();
        assert_eq!((t.mode, t.addr), (Mode::Echo, "[::1]:7".parse().unwrap()));
    }

    #[test]
    fn rejects_bad_urls() {
        for url in [
            "127.0.0.1:80",
            "https://127.0.0.1/",
            "http://",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:x/",
            "http://u@127.0.0.1/",
            "http://[::1/",
            "tcp://127.0.0.1",
            "tcp://127.0.0.1:9/path",
            "http://127.0.0.1/a b",
        ] {
            assert!(matches!(parse_target(url), Err(LoadgenError::BadUrl { .. })), "{url}");
        }
    }
}
