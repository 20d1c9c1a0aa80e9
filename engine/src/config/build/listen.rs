//! `listen` in http and stream servers: addresses (`ADDR:PORT`, `PORT`, `*:PORT`, `[::1]:PORT`, a name, a port
//! range), the parameters corelb accepts (`default_server`, `reuseport`, `backlog=N`, `bind`), and nginx's
//! duplicate checks across servers.

use super::arg;
use crate::config::error::ConfigError;
use crate::config::model::{Listen, Span};
use crate::config::parser::Directive;
use crate::config::url::{self, UrlOpts};
use crate::config::value;
use std::net::{Ipv4Addr, SocketAddr};

/// nginx `listen` parameters corelb does not implement (refused by name rather than called invalid).
const UNSUPPORTED_HTTP: &[&str] = &["ssl", "http2", "proxy_protocol", "deferred", "quic"];
const UNSUPPORTED_STREAM: &[&str] = &["udp", "ssl", "proxy_protocol"];
/// `name=value` parameters corelb does not implement.
const UNSUPPORTED_VALUED: &[&str] = &[
    "fastopen=",
    "rcvbuf=",
    "sndbuf=",
    "so_keepalive=",
    "ipv6only=",
    "setfib=",
    "accept_filter=",
];

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
}

fn not_supported(p: &str, d: &Directive) -> ConfigError {
    ConfigError::invalid(
        format!("parameter \"{p}\" of \"listen\" is not supported by corelb"),
        &d.span,
    )
}

/// Parameters common to http and stream: `bind`, `reuseport`, `backlog=N`, and the refused ones.
fn common_param(p: &str, d: &Directive, out: &mut Params, refused: &[&str]) -> Result<bool, ConfigError> {
    if p == "bind" || p == "reuseport" {
        out.options = true;
    } else if let Some(n) = p.strip_prefix("backlog=") {
        if !matches!(value::atoi(n), Some(n) if n != 0) {
            return Err(ConfigError::invalid(format!("invalid backlog \"{p}\""), &d.span));
        }
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
            } else if !common_param(p, d, &mut params, UNSUPPORTED_HTTP)? {
                return Err(ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span));
            }
        }
        let mut out = Vec::with_capacity(addrs.len());
        for addr in addrs {
            self.add(addr, server, &params, &d.span)?;
            out.push(Listen {
                addr,
                default_server: params.default_server,
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
            return Err(ConfigError::invalid(format!("a duplicate listen {addr}"), at));
        }
        entry.servers.push(server);
        if params.options {
            if entry.options {
                return Err(ConfigError::invalid(format!("duplicate listen options for {addr}"), at));
            }
            entry.options = true;
        }
        if params.default_server {
            if entry.default_server {
                return Err(ConfigError::invalid(
                    format!("a duplicate default server for {addr}"),
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

/// Every address the stream servers listen on.
#[derive(Debug, Default)]
pub struct StreamListens {
    addrs: Vec<SocketAddr>,
}

impl StreamListens {
    /// `listen` in a stream server (no port means port 0, as nginx 1.22 reads it).
    pub fn listen(&mut self, d: &Directive) -> Result<Vec<Listen>, ConfigError> {
        let addrs = addresses(d, 0)?;
        let mut params = Params::default();
        for p in d.args.iter().skip(1) {
            if !common_param(p, d, &mut params, UNSUPPORTED_STREAM)? {
                return Err(ConfigError::invalid(format!("the invalid \"{p}\" parameter"), &d.span));
            }
        }
        let mut out = Vec::with_capacity(addrs.len());
        for addr in addrs {
            if self.addrs.contains(&addr) {
                let msg = format!("duplicate \"{addr}\" address and port pair");
                return Err(ConfigError::invalid(msg, &d.span));
            }
            self.addrs.push(addr);
            out.push(Listen {
                addr,
                default_server: false,
                span: d.span.clone(),
            });
        }
        Ok(out)
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
