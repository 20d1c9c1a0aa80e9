//! The config snapshot: a loaded config with everything the request path needs built once (upstream plans, listen
//! tables, location tables, pre-rendered headers and fixed answers), shared by every shard behind one `ArcSwap`.

use crate::balance::{PlanError, UpstreamPlan};
use crate::config::model::{ClientConf, Config, HeaderBuffers, HttpServer, Listen, Location, LocationMatch, ProxyPass};
use crate::config::regex::Captures;
use crate::http::request::host_without_port;
use corelb_shared_state::Zone;
use files::FilesPlan;
use headers::HeadersPlan;
use limits::LimitZones;
use locations::{LocationTree, Pick};
use logs::AccessLogPlan;
use route::{FixedAnswer, LocationPlan, ProxyPlan};
use server_names::{NameRegex, ServerNames};
use std::net::SocketAddr;
use stream_logs::StreamServerPlan;
pub use stream_ports::StreamPort;

pub mod absolute_location;
pub mod access;
pub mod captures;
pub mod charset;
pub mod error_pages;
pub mod files;
pub mod gzip;
pub mod headers;
pub mod limits;
pub mod locations;
pub mod logs;
pub mod proxied;
pub mod realip;
pub mod request_body;
pub mod resolvers;
pub mod return_text;
pub mod rewrite;
pub mod route;
pub mod server_names;
pub mod stream_logs;
pub mod stream_ports;
pub mod user_vars;
pub mod var_pass;

/// What a listening socket serves. Its place in a snapshot (the http port, the stream server) is looked up by its
/// address in the snapshot a connection runs on, so a reload that reorders the config moves no connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Http,
    Stream,
    /// stream over UDP.
    Udp,
}

/// Why a config could not become a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("proxy_pass names upstream #{0}, which does not exist")]
    NoSuchUpstream(usize),
    #[error("a duplicate listen {}", crate::config::unix_addr::Display(.0))]
    DuplicateListen(SocketAddr),
    /// An access log file could not be opened (nginx's `open() "PATH" failed (...)`).
    #[error("{0}")]
    AccessLog(String),
    /// An `error_log` file of a server or location could not be opened (nginx's `open() "PATH" failed (...)`).
    #[error("{0}")]
    ErrorLog(String),
    /// A regex server name that does not compile (the config build refuses it first).
    #[error("{0}")]
    ServerName(String),
    #[error("{0}")]
    Tls(#[from] crate::tls::server_config::TlsError),
    /// A reload that changes a limit zone's key (nginx's words).
    #[error("{0}")]
    LimitKey(String),
}

/// One http listen address and the servers on it.
#[derive(Debug, Clone)]
pub struct HttpPort {
    pub addr: SocketAddr,
    /// Indices into [`Snapshot::servers`], in config order.
    pub servers: Vec<usize>,
    /// The server for requests whose `Host` names none of them.
    pub default_server: usize,
    /// Connections start with a PROXY protocol header (a `listen ... proxy_protocol` of any server here).
    pub proxy_protocol: bool,
    /// Their names, as nginx looks a `Host` up.
    pub names: ServerNames,
    /// A `listen ... ssl` address: its TLS config (SNI picks among its servers' certificates).
    pub tls: Option<std::sync::Arc<crate::tls::PortTls>>,
    /// The address speaks HTTP/2 (`http2 on` in its default server, or a `listen ... http2` here): the default
    /// server's settings. ALPN offers `h2` on a TLS address; a plain one takes HTTP/2's connection preface.
    pub http2: Option<crate::config::model::Http2Conf>,
    /// `listen ... rcvbuf= sndbuf=` of the address.
    pub socket: crate::config::model::SocketOptions,
}

/// An http server's routing table.
#[derive(Debug)]
pub struct ServerPlan {
    /// `$server_name`: the first name, as nginx gives it.
    pub server_name: String,
    /// `return` in the server block itself.
    pub ret: Option<FixedAnswer>,
    /// The server block's `if`/`break`/`return` when a `return` is not first: run before the location search.
    pub script: Option<rewrite::Script>,
    /// `location = /x` of every level: (path, index into `locations`).
    pub exact: Vec<(String, usize)>,
    /// `location /x` and `^~ /x` of every level: (prefix, index), longest first.
    pub prefixes: Vec<(String, usize)>,
    /// Every location, as nginx searches them.
    pub tree: LocationTree,
    pub locations: Vec<LocationPlan>,
    /// How requests no location matches are served: from the server's root, as nginx.
    pub files: FilesPlan,
    /// nginx's 301 to a `proxy_pass` location's name for the path one `/` short of it (`Location` per request).
    pub moved: FixedAnswer,
    /// The answer after more than 10 URI changes (nginx's "rewrite or internal redirection cycle").
    pub cycle: FixedAnswer,
    /// Client settings of the server block (for answers outside any location).
    pub client: ClientConf,
    /// The access log set of answers outside any location (index into [`Snapshot::access_logs`]; 0 = none).
    pub log_set: usize,
    /// `add_header`, `expires`, `server_tokens` of answers outside any location.
    pub headers: HeadersPlan,
    /// `set_real_ip_from` and the rest of the server block (nginx's post-read phase).
    pub realip: Option<realip::RealIpPlan>,
    /// `allow`/`deny` of answers outside any location (`None`: no rules).
    pub access: Option<Box<access::AccessPlan>>,
    /// `limit_req`/`limit_conn` of requests outside any location (`None`: none, nothing to check).
    pub limits: Option<Box<limits::LimitPlan>>,
    /// `gzip`/`gzip_static` of answers outside any location (`None`: off).
    pub gzip: Option<gzip::GzipPlan>,
    /// The charset filter of answers outside any location (`None`: nothing to change).
    pub charset: Option<std::sync::Arc<charset::CharsetPlan>>,
    /// `error_page` of answers outside any location.
    pub error_pages: Option<std::sync::Arc<error_pages::ErrorPagesPlan>>,
    /// `ssl_verify_client` other than `off`: a TLS connection's client certificate is checked per request.
    pub verify_client: Option<crate::config::tls::VerifyClient>,
    /// With `verify_client`: nginx's 421, 495 and 496 answers (sent as 421, 400 and 400), with the server's
    /// `add_header`.
    pub cert_pages: Vec<FixedAnswer>,
}

impl ServerPlan {
    /// The location for `uri` (the normalized path, [`crate::http::request::RequestHead::uri`]) as nginx picks it
    /// ([`LocationTree::find`]); a regex location's groups are left in `caps`.
    pub fn location(&self, uri: &[u8], caps: &mut Captures) -> Option<&LocationPlan> {
        self.locations.get(self.tree.find(uri, caps)?)
    }

    /// [`ServerPlan::location`], or nginx's 301 to a `proxy_pass` location `/x/` for `/x` (its `Location`).
    pub fn pick(&self, uri: &[u8], caps: &mut Captures) -> Result<Option<&LocationPlan>, &[u8]> {
        match self.tree.pick(uri, caps) {
            Pick::Location(i) => Ok(i.and_then(|i| self.locations.get(i))),
            Pick::SlashRedirect(to) => Err(to),
        }
    }
}

/// Everything one config generation needs at request time.
#[derive(Debug)]
pub struct Snapshot {
    pub generation: u64,
    pub config: Config,
    pub http_plans: Vec<UpstreamPlan>,
    pub stream_plans: Vec<UpstreamPlan>,
    pub http_ports: Vec<HttpPort>,
    pub servers: Vec<ServerPlan>,
    pub stream_ports: Vec<StreamPort>,
    /// One per stream server, in config order.
    pub stream_servers: Vec<StreamServerPlan>,
    /// The size of each connection's client read buffer: the largest request head any server's
    /// `large_client_header_buffers` admits, and no less than [`MIN_CLIENT_BUFFER`].
    pub client_buffer: usize,
    /// The access log files and the sets locations log to.
    pub access_logs: AccessLogPlan,
    /// The generation whose config (and so whose peers) this snapshot has: its own for a start, a reload or an API
    /// change; the reweighed snapshot's for an agents' reweigh ([`crate::control::Control::reweigh`]). Shards
    /// carry their balancer weights and keepalive pools over between snapshots of one config generation.
    pub config_generation: u64,
    /// The http and stream blocks' `limit_*_zone`s with their tables (the API reads their counters).
    pub http_limits: LimitZones,
    pub stream_limits: LimitZones,
    /// The resolvers' `status_zone=` counters (the API's `/resolvers/`).
    pub resolvers: resolvers::ResolverZones,
}

/// The least client read buffer (request bodies stream through it too).
pub const MIN_CLIENT_BUFFER: usize = 16 * 1024;

impl Snapshot {
    /// Builds the snapshot of `config`, binding peers to their slots in `zone`.
    pub fn build(mut config: Config, zone: &Zone, generation: u64) -> Result<Snapshot, SnapshotError> {
        let resolvers = resolvers::ResolverZones::bind(&mut config, zone);
        let mut http_plans = Vec::new();
        let mut http_ports: Vec<HttpPort> = Vec::new();
        let mut servers = Vec::new();
        let mut access_logs = AccessLogPlan::default();
        let no_zones = crate::config::limit::Zones::default();
        let http_limits = LimitZones::build(config.http.as_ref().map_or(&no_zones, |h| &h.limit_zones), false, zone)?;
        let stream_limits =
            LimitZones::build(config.stream.as_ref().map_or(&no_zones, |s| &s.limit_zones), true, zone)?;
        if let Some(http) = &config.http {
            for u in &http.upstreams {
                http_plans.push(UpstreamPlan::build(u, zone)?);
            }
            let all_names = http
                .servers
                .iter()
                .flat_map(|s| s.server_names.iter().map(String::as_str));
            let groups = crate::config::server_names::group_names(all_names);
            for (si, srv) in http.servers.iter().enumerate() {
                let names = user_vars::Names {
                    maps: &http.maps,
                    users: &http.user_vars,
                    upstreams: &http.upstreams,
                    server_groups: &groups,
                    charsets: Some(&http.charsets),
                };
                let at = PlanAt {
                    plans: &http_plans,
                    names,
                    limits: &http_limits,
                };
                servers.push(server_plan(srv, at, &mut access_logs)?);
                add_http_listens(&mut http_ports, &srv.listens, si);
            }
            for p in &mut http_ports {
                let of_port = p
                    .servers
                    .iter()
                    .filter_map(|&i| Some((i, http.servers.get(i)?.server_names.as_slice())));
                p.names = ServerNames::build(of_port, &groups).map_err(SnapshotError::ServerName)?;
                p.http2 = http2_of_port(p, &http.servers);
                p.tls = tls_of_port(p, http)?;
            }
        }
        let mut stream_plans = Vec::new();
        let mut stream_ports = Vec::new();
        let mut stream_servers = Vec::new();
        if let Some(stream) = &config.stream {
            for u in &stream.upstreams {
                stream_plans.push(UpstreamPlan::build(u, zone)?);
            }
            for l in stream.block_logs.iter().filter(|l| l.dynamic.is_none()) {
                access_logs.file_of(l).map_err(SnapshotError::AccessLog)?;
            }
            for srv in &stream.servers {
                if let Some(up) = srv.upstream.filter(|&u| u >= stream_plans.len()) {
                    return Err(SnapshotError::NoSuchUpstream(up));
                }
                let upstream = srv.upstream.and_then(|u| stream_plans.get(u)).map(|p| p.name.as_str());
                let plan = StreamServerPlan::build(srv, &mut access_logs, &stream_limits)?;
                stream_servers.push(plan.with_tls(srv, upstream)?);
            }
            stream_ports = stream_ports::build(&stream.servers, &stream.maps, |a| {
                http_ports.iter().any(|p| p.addr == a)
            })?;
        }
        let client_buffer = servers
            .iter()
            .map(|s| {
                let c = &s.client;
                c.large_client_header_buffers.capacity(c.client_header_buffer_size)
            })
            .fold(MIN_CLIENT_BUFFER, usize::max);
        let names: Vec<&str> = http_plans
            .iter()
            .chain(&stream_plans)
            .map(|p| p.name.as_str())
            .collect();
        zone.retain_upstreams(&names);
        let learn_zones: Vec<&str> = http_plans
            .iter()
            .filter_map(|p| p.sticky.as_deref()?.conf.learn.as_ref())
            .map(|l| l.zone.as_str())
            .collect();
        zone.retain_sticky(&learn_zones);
        let (req_zones, conn_zones) = limits::zone_names(&http_limits, &stream_limits);
        zone.retain_limits(&req_zones, &conn_zones);
        Ok(Snapshot {
            client_buffer,
            generation,
            config,
            http_plans,
            stream_plans,
            http_ports,
            servers,
            stream_ports,
            stream_servers,
            access_logs,
            config_generation: generation,
            http_limits,
            stream_limits,
            resolvers,
        })
    }

    /// The `large_client_header_buffers` of the server of `port` a request names with `host` (a `Host` value or
    /// an absolute-form authority, port included), or of the port's default server.
    pub fn header_buffers(&self, port: usize, host: Option<&[u8]>) -> HeaderBuffers {
        let host = host.and_then(host_without_port);
        self.server_for(port, host)
            .map(|s| s.client.large_client_header_buffers)
            .unwrap_or_default()
    }

    /// The `client_header_buffer_size` of the default server of `port`: the first buffer of every head there.
    pub fn first_header_buffer(&self, port: usize) -> usize {
        self.server_for(port, None)
            .map_or(crate::config::model::CLIENT_HEADER_BUFFER, |s| {
                s.client.client_header_buffer_size
            })
    }

    /// The index into [`Snapshot::http_ports`] of the http listen address `addr`, if this config listens there.
    pub fn http_port_of(&self, addr: SocketAddr) -> Option<usize> {
        self.http_ports.iter().position(|p| p.addr == addr)
    }

    /// The stream server listening on `addr`, if this config has one there.
    pub fn stream_server_of(&self, addr: SocketAddr) -> Option<usize> {
        self.stream_port(addr).map(|p| p.server)
    }

    /// The stream server listening on UDP `addr`.
    pub fn udp_server_of(&self, addr: SocketAddr) -> Option<usize> {
        self.stream_ports
            .iter()
            .find(|p| p.addr == addr && p.udp)
            .map(|p| p.server)
    }

    /// The stream (TCP) listen address `addr`.
    pub fn stream_port(&self, addr: SocketAddr) -> Option<&StreamPort> {
        self.stream_ports.iter().find(|p| p.addr == addr && !p.udp)
    }

    /// Every listen address, http first, with what it serves.
    pub fn listen_addrs(&self) -> impl Iterator<Item = (SocketAddr, Role)> + '_ {
        let http = self.http_ports.iter().map(|p| (p.addr, Role::Http));
        let role = |p: &StreamPort| if p.udp { Role::Udp } else { Role::Stream };
        http.chain(self.stream_ports.iter().map(move |p| (p.addr, role(p))))
    }

    /// The socket buffer sizes (`listen ... rcvbuf= sndbuf=`) of the listen address `addr` in `role`.
    pub fn listen_options(&self, addr: SocketAddr, role: Role) -> crate::config::model::SocketOptions {
        let found = match role {
            Role::Http => self.http_ports.iter().find(|p| p.addr == addr).map(|p| p.socket),
            Role::Stream | Role::Udp => {
                let udp = role == Role::Udp;
                self.stream_ports
                    .iter()
                    .find(|p| p.addr == addr && p.udp == udp)
                    .map(|p| p.socket)
            }
        };
        found.unwrap_or_default()
    }

    /// The server of `port` for a request naming `host`.
    pub fn server_for(&self, port: usize, host: Option<&[u8]>) -> Option<&ServerPlan> {
        self.server_named(port, host, None).map(|(s, _)| s)
    }

    /// The server of `port` for a request naming `host` (none: `""`), as nginx picks it, and the regex name that
    /// matched, whose groups are left in `caps`.
    pub fn server_named(
        &self,
        port: usize,
        host: Option<&[u8]>,
        caps: Option<&mut Captures>,
    ) -> Option<(&ServerPlan, Option<&NameRegex>)> {
        let p = self.http_ports.get(port)?;
        let found = if p.names.is_trivial(p.servers.len()) {
            None
        } else {
            p.names.find(host.unwrap_or_default(), caps)
        };
        let server = found.map_or(p.default_server, |f| f.server);
        Some((self.servers.get(server)?, found.and_then(|f| f.regex)))
    }
}

/// The HTTP/2 settings of `port`: its default server's, when that server says `http2 on` or any `listen` of the
/// address has `http2` (nginx reads the protocol per address before it knows the server; see README's
/// differences for ALPN, which nginx decides per SNI server).
fn http2_of_port(port: &HttpPort, servers: &[HttpServer]) -> Option<crate::config::model::Http2Conf> {
    let flag = port
        .servers
        .iter()
        .filter_map(|&i| servers.get(i))
        .any(|s| s.listens.iter().any(|l| l.addr == port.addr && l.http2));
    let mut conf = servers.get(port.default_server)?.http2;
    let of_servers = port.servers.iter().filter_map(|&i| servers.get(i));
    let chunks = of_servers.flat_map(|s| {
        std::iter::once(s.client.http2_chunk_size).chain(s.locations.iter().map(|l| l.client.http2_chunk_size))
    });
    conf.largest_chunk_size = chunks.fold(conf.chunk_size, u32::max);
    (flag || conf.on).then_some(conf)
}

/// The TLS config of `port`, if any server's `listen` there has `ssl`.
fn tls_of_port(
    port: &HttpPort,
    http: &crate::config::model::HttpConf,
) -> Result<Option<std::sync::Arc<crate::tls::PortTls>>, SnapshotError> {
    let servers = http.servers.as_slice();
    let ssl = port
        .servers
        .iter()
        .filter_map(|&i| servers.get(i))
        .any(|s| s.listens.iter().any(|l| l.addr == port.addr && l.ssl));
    if !ssl {
        return Ok(None);
    }
    let on_port = |i: usize| port.servers.contains(&i);
    let confs: Vec<Option<&crate::config::tls::TlsConf>> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| s.tls.as_ref().filter(|_| on_port(i)))
        .collect();
    let (names, default) = (port.names.clone(), port.default_server);
    let pick = Box::new(move |sni: &str| names.find(sni.as_bytes(), None).map_or(default, |f| f.server));
    let h2 = port.http2.is_some();
    let vars = crate::http::handshake_vars::HandshakeNames::of(&confs, &http.maps);
    let port_servers = crate::tls::PortServers {
        confs,
        default,
        pick,
        h2,
        vars,
    };
    let mut tls = crate::tls::server_config(port_servers)?;
    tls.ciphers = http.ssl_ciphers;
    Ok(Some(std::sync::Arc::new(tls)))
}

fn add_http_listens(ports: &mut Vec<HttpPort>, listens: &[Listen], server: usize) {
    for l in listens {
        match ports.iter_mut().find(|p| p.addr == l.addr) {
            Some(p) => {
                p.servers.push(server);
                p.proxy_protocol |= l.proxy_protocol;
                p.socket = p.socket.or(l.socket);
                if l.default_server {
                    p.default_server = server;
                }
            }
            None => ports.push(HttpPort {
                addr: l.addr,
                servers: vec![server],
                default_server: server,
                proxy_protocol: l.proxy_protocol,
                names: ServerNames::default(),
                tls: None,
                http2: None,
                socket: l.socket,
            }),
        }
    }
}

/// What a server's and its locations' plans are built over: the block's upstreams, names and limit zones.
#[derive(Clone, Copy)]
struct PlanAt<'a> {
    plans: &'a [UpstreamPlan],
    names: user_vars::Names<'a>,
    limits: &'a LimitZones,
}

fn server_plan(srv: &HttpServer, at: PlanAt<'_>, logs: &mut AccessLogPlan) -> Result<ServerPlan, SnapshotError> {
    let names = at.names;
    let mut exact = Vec::new();
    let mut prefixes = Vec::new();
    let mut locations = Vec::new();
    for (i, loc) in srv.locations.iter().enumerate() {
        match &loc.matcher {
            LocationMatch::Exact(p) => exact.push((p.clone(), i)),
            LocationMatch::Prefix(p) | LocationMatch::PrefixNoRegex(p) => prefixes.push((p.clone(), i)),
            LocationMatch::Regex(_) | LocationMatch::Named(_) => {}
        }
        locations.push(location_plan(loc, i, at, logs)?);
    }
    prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    let tokens = srv.headers.server_tokens;
    let charset = names.charsets.and_then(|c| charset::CharsetPlan::of(&srv.charset, c));
    let headers = HeadersPlan::new(&srv.headers).with_charset(charset.clone());
    let access = srv
        .access
        .as_ref()
        .map(|r| access::AccessPlan::new(r, tokens, &headers));
    let errors = errors_of(&srv.client)?;
    let limits = limits::LimitPlan::new(&srv.limits, at.limits, tokens, &headers, &errors);
    Ok(ServerPlan {
        server_name: crate::config::server_names::first_name(&srv.server_names).to_string(),
        ret: srv
            .ret
            .as_ref()
            .map(|r| return_text::answer(r, names, tokens).with_headers(headers.clone())),
        script: rewrite::Script::compile(&srv.script, names, tokens, &headers).filter(|_| srv.ret.is_none()),
        exact,
        prefixes,
        tree: LocationTree::build(&srv.locations),
        locations,
        files: FilesPlan::new(&srv.files).with_errors(errors),
        cycle: FixedAnswer::error(500, tokens).with_headers(headers.clone()),
        error_pages: error_pages::ErrorPagesPlan::new(&srv.error_pages, None, tokens, &headers),
        verify_client: srv.tls.as_ref().and_then(|t| t.client.as_ref()).map(|c| c.mode),
        cert_pages: match srv.tls.as_ref().is_some_and(|t| t.client.is_some()) {
            true => [421, 495, 496]
                .into_iter()
                .map(|c| FixedAnswer::error(c, tokens).with_headers(headers.clone()))
                .collect(),
            false => Vec::new(),
        },
        moved: FixedAnswer::error(301, tokens).with_headers(headers.clone()),
        headers,
        gzip: gzip::GzipPlan::of(&srv.gzip),
        charset,
        client: srv.client.clone(),
        log_set: logs.set_of(&srv.client.access_log).map_err(SnapshotError::AccessLog)?,
        realip: srv.realip.as_deref().map(realip::RealIpPlan::new),
        access,
        limits,
    })
}

/// The `error_log` lines of a server or location, opened (`None`: the main log).
fn errors_of(
    client: &crate::config::model::ClientConf,
) -> Result<Option<std::sync::Arc<crate::log::ErrorLogs>>, SnapshotError> {
    crate::log::ErrorLogs::open(&client.error_log).map_err(SnapshotError::ErrorLog)
}

fn location_plan(
    loc: &Location,
    index: usize,
    at: PlanAt<'_>,
    logs: &mut AccessLogPlan,
) -> Result<LocationPlan, SnapshotError> {
    let PlanAt { plans, names, .. } = at;
    let admin = loc.admin.filter(|_| loc.ret.is_none());
    let tokens = loc.headers.server_tokens;
    let charset = names.charsets.and_then(|c| charset::CharsetPlan::of(&loc.charset, c));
    let headers = HeadersPlan::new(&loc.headers).with_charset(charset.clone());
    let pages = error_pages::ErrorPagesPlan::new(&loc.error_pages, Some(index), tokens, &headers);
    let errors = errors_of(&loc.client)?;
    let var_proxy = match (&loc.ret, &loc.proxy_pass) {
        (None, Some(ProxyPass { url: Some(url), .. })) if admin.is_none() => Some(Box::new(
            var_pass::VarPass::new(loc, url.clone(), names.upstreams, plans, tokens, &headers)
                .with_error_pages(&pages)
                .with_charset(&charset)
                .with_errors(&errors),
        )),
        _ => None,
    };
    let proxy = match (&loc.ret, &loc.proxy_pass) {
        (Some(_), _) => None,
        (None, _) if admin.is_some() => None,
        (None, Some(ProxyPass { url: Some(_), .. })) => None,
        (None, Some(ProxyPass { upstream, uri, .. })) => {
            let plan = plans.get(*upstream).ok_or(SnapshotError::NoSuchUpstream(*upstream))?;
            let tls = match &loc.proxy_tls {
                Some(conf) => Some(std::sync::Arc::new(crate::tls::client_config::upstream_tls(
                    conf, &plan.name,
                )?)),
                None => None,
            };
            Some(
                ProxyPlan::new(loc, *upstream, &plan.name, uri.as_deref())
                    .with_error_pages(pages.clone())
                    .with_charset(charset.clone())
                    .with_errors(errors.clone())
                    .with_tls(tls),
            )
        }
        (None, None) => None,
    };
    // a location without a handler serves files (`files`)
    let fixed = loc
        .ret
        .as_ref()
        .map(|r| return_text::answer(r, names, tokens).with_headers(headers.clone()));
    let access = loc
        .access
        .as_ref()
        .map(|r| access::AccessPlan::new(r, tokens, &headers));
    let limits = limits::LimitPlan::new(&loc.limits, at.limits, tokens, &headers, &errors);
    Ok(LocationPlan {
        fixed,
        admin,
        proxy,
        var_proxy,
        body_var: request_body::uses(loc),
        script: rewrite::Script::compile(&loc.script, names, tokens, &headers).filter(|_| loc.ret.is_none()),
        files: FilesPlan::new(&loc.files).with_errors(errors),
        client: loc.client.clone(),
        log_set: logs.set_of(&loc.client.access_log).map_err(SnapshotError::AccessLog)?,
        headers,
        realip: loc.realip.as_deref().map(realip::RealIpPlan::new),
        access,
        limits,
        gzip: gzip::GzipPlan::of(&loc.gzip),
        charset,
        error_pages: pages,
    })
}
