//! `listen` in http and stream servers: addresses (`ADDR:PORT`, `PORT`, `*:PORT`, `[::1]:PORT`, a name, a port
//! range), the parameters corelb accepts (`default_server`, `reuseport`, `backlog=N`, `rcvbuf=`, `sndbuf=`, `bind`), and nginx's
//! duplicate checks across servers.

use super::arg;
use crate::config::error::ConfigError;
use crate::config::model::{Listen, SocketOptions, Span};
use crate::config::parser::Directive;
use crate::config::url::{self, UrlOpts};
use crate::config::value;
use std::net::{Ipv4Addr, SocketAddr};

/// nginx `listen` parameters corelb does not implement (refused by name rather than called invalid).
const UNSUPPORTED_HTTP: &[&str] = &["deferred", "quic"];
const UNSUPPORTED_STREAM: &[&str] = &[];
/// `name=value` parameters corelb does not implement.
const UNSUPPORTED_VALUED: &[&str] = &["fastopen=", "so_keepalive=", "ipv6only=", "setfib=", "accept_filter="];

/// One address:port bound by http servers, as nginx's `ngx_http_conf_addr_t` tracks it.
#[derive(Debug)]
struct HttpAddr {
    addr: SocketAddr,
    /// The servers listening here, by index.
    servers: Vec<usize>,
    default_server: bool,
    /// Socket options were set here (`backlog=`, `reuseport`, `bind`): only one `listen` may set them.
    options: bool,
}

/// Every address the http servers listen on.
#[derive(Debug, Default)]
pub struct HttpListens {
    addrs: Vec<HttpAddr>,
}

/// The parameters of one `listen` line.
#[derive(Debug, Default)]
struct Params {
    default_server: bool,
    options: bool,
    /// `proxy_protocol`: connections start with a PROXY protocol header.
    proxy_protocol: bool,
    /// `ssl` (http only).
    ssl: bool,
    /// `http2` (http only).
    http2: bool,
    /// `rcvbuf=`, `sndbuf=`.
    socket: SocketOptions,
}

fn not_supported(p: &str, d: &Directive) -> ConfigError {
    ConfigError::invalid(
        format!("parameter \"{p}\" of \"listen\" is not supported by corelb"),
        &d.span,
    )
}

/// Parameters common to http and stream: `bind`, `reuseport`, `backlog=N`, and the refused ones.
fn common_param(p: &str, d: &Directive, out: &mut Params, refused: &[&str]) -> Result<bool, ConfigError> {
    if p == "proxy_protocol" {
        out.proxy_protocol = true;
    } else if p == "bind" {
        out.options = true;
    } else if p == "reuseport" {
        out.socket.reuseport = true;
        out.options = true;
    } else if let Some((name, size)) = p.split_once('=').filter(|(n, _)| matches!(*n, "rcvbuf" | "sndbuf")) {
        // `ngx_parse_size`, kept as nginx's `int`
        let Some(bytes) = value::parse_size(size).and_then(|b| i32::try_from(b).ok()) else {
            return Err(ConfigError::invalid(format!("invalid {name} \"{p}\""), &d.span));
        };
        match name {
            "rcvbuf" => out.socket.rcvbuf = Some(bytes),
            _ => out.socket.sndbuf = Some(bytes),
        }
        out.options = true;
    } else if let Some(n) = p.strip_prefix("backlog=") {
        let Some(n) = value::atoi(n).filter(|&n| n != 0) else {
            return Err(ConfigError::invalid(format!("invalid backlog \"{p}\""), &d.span));
        };
        // listen(2) takes an int, and the kernel caps it at net.core.somaxconn
        out.socket.backlog = Some(i32::try_from(n).unwrap_or(i32::MAX));
        out.options = true;
    } else if refused.contains(&p) || UNSUPPORTED_VALUED.iter().any(|v| p.starts_with(v)) {
        return Err(not_supported(p, d));
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// The addresses of a `listen` argument, or nginx's `... in "X" of the "listen" directive`.
fn addresses(d: &Directive, default_port: u16) -> Result<Vec<SocketAddr>, ConfigError> {
    let text = arg(d, 0);
    let opts = UrlOpts {
        default_port,
        listen: true,
        ..UrlOpts::default()
    };
    url::parse_url(text, opts)
        .map(|u| u.addrs)
        .map_err(|e| ConfigError::invalid(format!("{e} in \"{text}\" of the \"listen\" directive"), &d.span))
}

impl HttpListens {
    /// `listen` in the http server `server`.
    pub fn listen(&mut self, d: &Directive, server: usize) -> Result<Vec<Listen>, ConfigError> {
        let addrs = addresses(d, 80)?;
        let mut params = Params::default();
        for p in d.args.iter().skip(1) {
            if p == "default_server" || p == "default" {
                params.default_server = true;
            } else if p == "ssl" {
                params.ssl = true;
            } else if p == "http2" {
                params.http2 = true;
            } else if !common_param(p, d, &mut params, UNSUPPORTED_HTTP)? {
                return Err(ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span));
            }
        }
        if params.ssl && params.proxy_protocol {
            // the PROXY header would come before the handshake; corelb reads it only on plain connections
            return Err(not_supported("proxy_protocol\" with \"ssl", d));
        }
        let mut out = Vec::with_capacity(addrs.len());
        for addr in addrs {
            self.add(addr, server, &params, &d.span)?;
            out.push(Listen {
                addr,
                default_server: params.default_server,
                proxy_protocol: params.proxy_protocol,
                ssl: params.ssl,
                udp: false,
                http2: params.http2,
                socket: params.socket,
                span: d.span.clone(),
            });
        }
        Ok(out)
    }

    /// nginx's listen of a server without one: `*:80` when run as root, else `*:8000`.
    pub fn default_listen(&mut self, server: usize, at: &Span) -> Result<Listen, ConfigError> {
        let port = if real_uid_is_root() { 80 } else { 8000 };
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        self.add(addr, server, &Params::default(), at)?;
        Ok(Listen {
            addr,
            default_server: false,
            proxy_protocol: false,
            ssl: false,
            udp: false,
            http2: false,
            socket: SocketOptions::default(),
            span: at.clone(),
        })
    }

    /// `ngx_http_add_addresses`: one server per address once, one default server, one set of socket options.
    fn add(&mut self, addr: SocketAddr, server: usize, params: &Params, at: &Span) -> Result<(), ConfigError> {
        let Some(entry) = self.addrs.iter_mut().find(|a| a.addr == addr) else {
            self.addrs.push(HttpAddr {
                addr,
                servers: vec![server],
                default_server: params.default_server,
                options: params.options,
            });
            return Ok(());
        };
        if entry.servers.contains(&server) {
            return Err(ConfigError::invalid(
                format!("a duplicate listen {}", crate::config::unix_addr::Display(&addr)),
                at,
            ));
        }
        entry.servers.push(server);
        if params.options {
            if entry.options {
                return Err(ConfigError::invalid(
                    format!(
                        "duplicate listen options for {}",
                        crate::config::unix_addr::Display(&addr)
                    ),
                    at,
                ));
            }
            entry.options = true;
        }
        if params.default_server {
            if entry.default_server {
                return Err(ConfigError::invalid(
                    format!(
                        "a duplicate default server for {}",
                        crate::config::unix_addr::Display(&addr)
                    ),
                    at,
                ));
            }
            entry.default_server = true;
        }
        Ok(())
    }

    /// nginx's warnings for a name two servers on one address both claim (the first one keeps it).
    pub fn name_conflicts(&self, names_of: impl Fn(usize) -> Vec<String>) -> Vec<String> {
        let mut warnings = Vec::new();
        for a in &self.addrs {
            let mut seen: Vec<String> = Vec::new();
            for &s in &a.servers {
                for name in names_of(s) {
                    if seen.contains(&name) {
                        warnings.push(format!(
                            "[warn] conflicting server name \"{name}\" on {}, ignored",
                            a.addr
                        ));
                    } else {
                        seen.push(name);
                    }
                }
            }
        }
        warnings
    }
}

/// Every address the stream servers listen on: as http's (nginx 1.25.5+ has stream virtual servers), one default
/// server and one set of socket options per address; the `udp` ones apart (a TCP and a UDP socket may share an
/// address and port).
#[derive(Debug, Default)]
pub struct StreamListens {
    addrs: HttpListens,
    udp: HttpListens,
}

impl StreamListens {
    /// `listen` in stream server number `server` (no port means port 0, as nginx 1.22 reads it).
    pub fn listen(&mut self, d: &Directive, server: usize) -> Result<Vec<Listen>, ConfigError> {
        let addrs = addresses(d, 0)?;
        let mut params = Params::default();
        let mut udp = false;
        for p in d.args.iter().skip(1) {
            if p == "default_server" {
                params.default_server = true;
            } else if p == "ssl" {
                params.ssl = true;
            } else if p == "udp" {
                udp = true;
            } else if !common_param(p, d, &mut params, UNSUPPORTED_STREAM)? {
                return Err(ConfigError::invalid(format!("the invalid \"{p}\" parameter"), &d.span));
            }
        }
        if udp && addrs.iter().any(crate::config::unix_addr::is_unix) {
            // a unix-domain datagram socket: corelb's UDP sessions key on an inet client address and port
            return Err(not_supported("udp\" on \"unix:", d));
        }
        if udp {
            // nginx's checks, in its order
            let backlog = d.args.iter().any(|a| a.starts_with("backlog="));
            let checks = [
                (backlog, "backlog"),
                (params.ssl, "ssl"),
                (params.proxy_protocol, "proxy_protocol"),
            ];
            for (set, name) in checks {
                if set {
                    let msg = format!("\"{name}\" parameter is incompatible with \"udp\"");
                    return Err(super::directive_err(d, &msg));
                }
            }
        }
        if params.ssl && params.proxy_protocol {
            // the PROXY protocol header comes before the handshake: corelb's stream reads it into a buffer the
            // TLS session would have to start from
            let msg = "\"listen ... ssl proxy_protocol\" in stream is not supported by corelb";
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let table = if udp { &mut self.udp } else { &mut self.addrs };
        let mut out = Vec::with_capacity(addrs.len());
        for addr in addrs {
            table.add(addr, server, &params, &d.span)?;
            out.push(Listen {
                addr,
                default_server: params.default_server,
                proxy_protocol: params.proxy_protocol,
                ssl: params.ssl,
                udp,
                http2: false,
                socket: params.socket,
                span: d.span.clone(),
            });
        }
        Ok(out)
    }

    /// nginx's warnings for a name two stream servers on one address both claim.
    pub fn name_conflicts(&self, names_of: impl Fn(usize) -> Vec<String>) -> Vec<String> {
        let mut all = self.addrs.name_conflicts(&names_of);
        all.extend(self.udp.name_conflicts(&names_of));
        all
    }
}

/// Whether the process's real user is root (nginx's `getuid() == 0`), read from `/proc/self/status`.
fn real_uid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next().map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parser::parse_text;
    use std::path::Path;

    fn listen_directive(text: &str) -> Directive {
        let b = parse_text(text.as_bytes(), Path::new("t.conf"));
        b.items.into_iter().next().expect("a directive")
    }

    fn err(r: Result<Vec<Listen>, ConfigError>) -> String {
        r.expect_err("an error").to_string()
    }

    #[test]
    fn http_duplicates_as_nginx() {
        let mut t = HttpListens::default();
        let d = listen_directive("listen 127.0.0.1:80 default_server;");
        assert_eq!(t.listen(&d, 0).unwrap()[0].addr, "127.0.0.1:80".parse().unwrap());
        assert_eq!(
            err(t.listen(&d, 0)),
            "[emerg] a duplicate listen 127.0.0.1:80 in t.conf:1"
        );
        assert_eq!(
            err(t.listen(&d, 1)),
            "[emerg] a duplicate default server for 127.0.0.1:80 in t.conf:1"
        );
        let opts = listen_directive("\nlisten 127.0.0.1:80 backlog=10;");
        assert!(t.listen(&opts, 2).is_ok());
        assert_eq!(
            err(t.listen(&listen_directive("listen 127.0.0.1:80 reuseport;"), 3)),
            "[emerg] duplicate listen options for 127.0.0.1:80 in t.conf:1"
        );
        // Another address on the same port is another socket.
        assert!(t.listen(&d, 4).is_err());
        assert!(t
            .listen(&listen_directive("listen 127.0.0.2:80 default_server;"), 4)
            .is_ok());
    }

    #[test]
    fn http_parameters() {
        let mut t = HttpListens::default();
        assert_eq!(
            err(t.listen(&listen_directive("listen 80 foo;"), 0)),
            "[emerg] invalid parameter \"foo\" in t.conf:1"
        );
        assert_eq!(
            err(t.listen(&listen_directive("listen 80 backlog=0;"), 0)),
            "[emerg] invalid backlog \"backlog=0\" in t.conf:1"
        );
        assert!(t
            .listen(&listen_directive("listen 8443 http2;"), 0)
            .is_ok_and(|l| l.iter().all(|l| l.http2)));
        assert_eq!(
            err(t.listen(&listen_directive("listen 443 ssl proxy_protocol;"), 0)),
            "[emerg] parameter \"proxy_protocol\" with \"ssl\" of \"listen\" is not supported by corelb in t.conf:1"
        );
        assert!(t
            .listen(&listen_directive("listen 443 ssl;"), 0)
            .is_ok_and(|l| l.iter().all(|l| l.ssl)));
        assert_eq!(
            err(t.listen(&listen_directive("listen a/b;"), 0)),
            "[emerg] invalid host in \"a/b\" of the \"listen\" directive in t.conf:1"
        );
        let l = t.listen(&listen_directive("listen [::]:8080 default;"), 0).unwrap();
        assert!(l[0].default_server && !l[0].proxy_protocol);
        let l = t.listen(&listen_directive("listen 8081 proxy_protocol;"), 0).unwrap();
        assert!(l[0].proxy_protocol && !l[0].socket.reuseport);
        let l = t
            .listen(&listen_directive("listen 8082 sndbuf=64k rcvbuf=1m;"), 0)
            .unwrap();
        assert_eq!((l[0].socket.sndbuf, l[0].socket.rcvbuf), (Some(65536), Some(1 << 20)));
        for bad in ["sndbuf=x", "rcvbuf=", "sndbuf=1g", "rcvbuf=4096m"] {
            let name = &bad[..6];
            assert_eq!(
                err(t.listen(&listen_directive(&format!("listen 8083 {bad};")), 0)),
                format!("[emerg] invalid {name} \"{bad}\" in t.conf:1")
            );
        }
    }

    #[test]
    fn stream_duplicates_and_parameters() {
        let mut t = StreamListens::default();
        let d = listen_directive("listen 127.0.0.1:5000 reuseport;");
        assert!(t.listen(&d, 0).is_ok_and(|l| l[0].socket.reuseport));
        assert_eq!(
            err(t.listen(&d, 0)),
            "[emerg] a duplicate listen 127.0.0.1:5000 in t.conf:1"
        );
        // another server on the address (nginx 1.25.5+), once with the socket options
        assert_eq!(
            err(t.listen(&d, 1)),
            "[emerg] duplicate listen options for 127.0.0.1:5000 in t.conf:1"
        );
        assert!(
            t.listen(&listen_directive("listen 127.0.0.1:5000 default_server;"), 2)
                .unwrap()[0]
                .default_server
        );
        assert_eq!(
            err(t.listen(&listen_directive("listen 127.0.0.1:5000 default_server;"), 3)),
            "[emerg] a duplicate default server for 127.0.0.1:5000 in t.conf:1"
        );
        assert_eq!(
            err(t.listen(&listen_directive("listen 5001 http2;"), 0)),
            "[emerg] the invalid \"http2\" parameter in t.conf:1"
        );
        assert!(t.listen(&listen_directive("listen 5002 proxy_protocol;"), 0).unwrap()[0].proxy_protocol);
        let no_port = t.listen(&listen_directive("listen 127.0.0.2;"), 0).unwrap();
        assert_eq!(no_port[0].addr.port(), 0);
    }

    #[test]
    fn stream_udp_beside_tcp_and_nginx_s_incompatible_parameters() {
        let mut t = StreamListens::default();
        assert!(!t.listen(&listen_directive("listen 127.0.0.1:53;"), 0).unwrap()[0].udp);
        // the same address and port over UDP is another socket
        let udp = t
            .listen(&listen_directive("listen 127.0.0.1:53 udp reuseport;"), 0)
            .unwrap();
        assert!(udp[0].udp);
        assert_eq!(
            err(t.listen(&listen_directive("listen 127.0.0.1:53 udp;"), 0)),
            "[emerg] a duplicate listen 127.0.0.1:53 in t.conf:1"
        );
        for (line, name) in [
            ("listen 54 udp proxy_protocol;", "proxy_protocol"),
            ("listen 55 udp backlog=10;", "backlog"),
            ("listen 56 udp ssl;", "ssl"),
        ] {
            assert_eq!(
                err(t.listen(&listen_directive(line), 1)),
                format!("[emerg] \"listen\" directive \"{name}\" parameter is incompatible with \"udp\" in t.conf:1")
            );
        }
    }

    #[test]
    fn name_conflicts_warn_once_per_extra_claim() {
        let mut t = HttpListens::default();
        let d = listen_directive("listen 127.0.0.1:80;");
        t.listen(&d, 0).unwrap();
        t.listen(&d, 1).unwrap();
        let names = |i: usize| {
            if i == 0 {
                vec!["a".to_string(), "b".to_string()]
            } else {
                vec!["b".to_string()]
            }
        };
        assert_eq!(
            t.name_conflicts(names),
            ["[warn] conflicting server name \"b\" on 127.0.0.1:80, ignored"]
        );
    }
}
