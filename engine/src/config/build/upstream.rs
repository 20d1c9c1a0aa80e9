//! `upstream NAME { ... }` blocks (http and stream) and the upstream list, kept as nginx's `ngx_*_upstream_add`
//! keeps it: `proxy_pass` names an upstream declared anywhere in the block (before or after), or makes an implicit
//! one from `host[:port]`; names match case-insensitively; at the end of the block each upstream is initialised
//! (implicit names resolved, `no servers in upstream` checked) in the order they were first named.

use super::server_line::unsupported_by_method;
use super::state;
use super::vars::{Module, Vars};
use super::{arg, block_of, msec_slot, num_slot, unset, walk, Build, Ctx};
use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::model::{LeastTimeMode, Method, RandomTwo, ServerLine, Span, UpstreamConf, ZoneConf};
use crate::config::parser::Directive;
use crate::config::resolver::ResolverConf;
use crate::config::url::{self, Url};
use crate::config::value;
use std::path::PathBuf;
use std::time::Duration;

/// The smallest zone nginx accepts: 8 pages of 4 KiB.
const MIN_ZONE_SIZE: u64 = 8 * 4096;

/// The upstreams of one `http` or `stream` block.
#[derive(Debug)]
pub struct Upstreams {
    module: Module,
    entries: Vec<Entry>,
}

/// One upstream as nginx's list holds it.
#[derive(Debug)]
struct Entry {
    /// The name (or host) it was first named by.
    host: String,
    /// 0 once an `upstream {}` block defines it (http), or when no port was given (stream).
    port: u16,
    no_port: bool,
    /// An `upstream {}` block defines it (nginx's `NGX_HTTP_UPSTREAM_CREATE` flag).
    created: bool,
    /// Where it was first named: nginx's `file_name:line` for its init messages.
    span: Span,
    /// The model's name.
    name: String,
    /// The `upstream {}` block, once read.
    block: Option<(BlockConf, Span)>,
    /// An implicit upstream's address (`proxy_pass IP:PORT`), when nginx already knows it.
    implicit: Vec<ServerLine>,
}

/// How an upstream block balances: the method directive last read.
#[derive(Debug, Clone)]
enum MethodKind {
    RoundRobin,
    IpHash,
    Hash {
        key: KeyTemplate,
        consistent: bool,
    },
    /// `hash KEY maglev` and `hash KEY consistent balance_factor=N` (corelb's).
    Corelb(Method),
    LeastConn,
    Random,
    LeastTime {
        mode: LeastTimeMode,
        inflight: bool,
    },
}

/// The contents of an `upstream {}` block as read so far.
#[derive(Debug)]
struct BlockConf {
    servers: Vec<ServerLine>,
    method: MethodKind,
    /// `random two [LOAD]`: stays set when a later `random` has no `two`, as in nginx.
    random_two: Option<RandomTwo>,
    /// A `least_time` was read (nginx's enum slot: a second one "is duplicate").
    least_time_set: bool,
    /// A method (or `keepalive`) has been set: nginx's `peer.init_upstream`, for `load balancing method redefined`.
    method_set: bool,
    /// Whether `server ... backup` is allowed at this point (a method without backup support clears it).
    allow_backup: bool,
    keepalive: Option<usize>,
    /// False when a method directive came after `keepalive`, which in nginx replaces keepalive's wrapper.
    keepalive_active: bool,
    keepalive_requests: Option<u64>,
    keepalive_timeout: Option<Duration>,
    keepalive_time: Option<Duration>,
    zone: Option<ZoneConf>,
    /// `state FILE`: the file (resolved) and the directive's place.
    state: Option<(PathBuf, Span)>,
    /// `sticky ...`; a method directive after it drops it, as nginx's replaces its `init_upstream`.
    sticky: Option<(crate::config::sticky::StickyConf, Span)>,
    /// A `sticky` was read (a second one "is duplicate" even after a method dropped the first).
    sticky_set: bool,
    /// `queue N [timeout=T]`; a method directive after it drops it (nginx Plus: it must follow the method).
    queue: Option<crate::config::queue::QueueConf>,
    /// `load_weight ...` (corelb's).
    load_weight: Option<crate::config::agent::LoadFormula>,
    /// `endpoint_load_metrics` was read, and its setting.
    load_metrics: Option<Option<crate::config::agent::LoadMetricsConf>>,
    /// `resolver` and `resolver_timeout` of the block (nginx 1.27.3).
    resolver: LevelResolver,
}

/// A level's `resolver` and `resolver_timeout` (the block's, or the http or stream level's its `resolve` lines
/// fall back to).
#[derive(Debug, Clone, Default)]
pub struct LevelResolver {
    pub resolver: Option<ResolverConf>,
    pub timeout: Option<Duration>,
}

impl LevelResolver {
    /// Reads `resolver` (once per level: a second "is duplicate") or `resolver_timeout`; false for other directives.
    pub fn directive(&mut self, d: &Directive) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "resolver" => {
                unset(&self.resolver, d)?;
                self.resolver = Some(crate::config::resolver::parse(d)?);
            }
            "resolver_timeout" => msec_slot(&mut self.timeout, d)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// nginx's merge in `ngx_*_upstream_init_round_robin`: the block's resolver, else the level's; the block's
    /// timeout, else the level's, else 30s.
    fn merged(&self, level: &LevelResolver) -> Option<ResolverConf> {
        let mut r = self.resolver.clone().or_else(|| level.resolver.clone())?;
        r.timeout = self
            .timeout
            .or(level.timeout)
            .unwrap_or(crate::config::resolver::DEFAULT_TIMEOUT);
        Some(r)
    }
}

impl Upstreams {
    pub fn new(module: Module) -> Self {
        Upstreams {
            module,
            entries: Vec::new(),
        }
    }

    /// nginx's `ngx_*_upstream_add`: the index of the upstream `host` (with `port`) names, created if new.
    fn add(&mut self, host: &str, port: u16, no_port: bool, create: bool, at: &Span) -> Result<usize, ConfigError> {
        for (i, e) in self.entries.iter_mut().enumerate() {
            if !e.host.eq_ignore_ascii_case(host) {
                continue;
            }
            if create && e.created {
                return Err(ConfigError::invalid(format!("duplicate upstream \"{host}\""), at));
            }
            if e.created && !no_port {
                let msg = format!("upstream \"{host}\" may not have port {port}");
                return Err(ConfigError::invalid(msg, at));
            }
            if create && !e.no_port {
                let msg = format!("upstream \"{host}\" may not have port {}", e.port);
                return Err(ConfigError::invalid(msg, &e.span));
            }
            let other_port = match self.module {
                Module::Http => e.port != 0 && port != 0 && e.port != port,
                Module::Stream => e.port != port,
            };
            if other_port {
                continue;
            }
            if create {
                e.created = true;
                if self.module == Module::Http {
                    e.port = 0;
                }
            }
            return Ok(i);
        }
        self.entries.push(Entry {
            host: host.to_string(),
            port,
            no_port,
            created: create,
            span: at.clone(),
            name: host.to_string(),
            block: None,
            implicit: Vec::new(),
        });
        Ok(self.entries.len() - 1)
    }

    /// `proxy_pass` to `url` (parsed without resolving): the upstream it names, or a new implicit one called `name`.
    pub fn reference(&mut self, url: &Url, text: &str, name: &str, at: &Span) -> Result<usize, ConfigError> {
        let known = self.entries.len();
        let i = self.add(&url.host, url.port, url.no_port, false, at)?;
        if i == known {
            if let Some(e) = self.entries.get_mut(i) {
                e.name = name.to_string();
                if url.addrs.len() == 1 && (url.port != 0 || url.unix) {
                    e.implicit.push(implicit_line(text, url.addrs.clone(), at));
                }
            }
        }
        Ok(i)
    }

    /// `upstream NAME { ... }`.
    pub fn block(&mut self, b: &mut Build, vars: &mut Vars, d: &Directive) -> Result<(), ConfigError> {
        let name = arg(d, 0);
        let i = self.add(name, 0, true, true, &d.span)?;
        let ctx = match self.module {
            Module::Http => Ctx::HTTP_UPS,
            Module::Stream => Ctx::STREAM_UPS,
        };
        let mut conf = BlockConf::new();
        let module = self.module;
        let close = walk(block_of(d)?, ctx, |sd| conf.directive(b, vars, module, sd))?;
        if let Some((path, at)) = &conf.state {
            if conf.zone.is_none() {
                let msg = format!("\"state\" directive requires \"zone\" in upstream \"{name}\"");
                return Err(ConfigError::invalid(msg, at));
            }
            conf.servers = state::load(path, at, module, conf.allow_backup)?;
        } else if conf.servers.is_empty() {
            return Err(ConfigError::invalid("no servers are inside upstream", &close));
        }
        if let Some((s, at)) = &conf.sticky {
            if let Some(used) = s.learn.as_ref().and_then(|l| self.learn_zone_user(&l.zone)) {
                let zone = s.learn.as_ref().map_or("", |l| l.zone.as_str());
                let msg = format!("sticky zone \"{zone}\" is already used in upstream \"{used}\"");
                return Err(ConfigError::invalid(msg, at));
            }
        }
        if let Some(e) = self.entries.get_mut(i) {
            e.name = name.to_string();
            e.block = Some((conf, d.span.clone()));
        }
        Ok(())
    }

    /// The upstream whose `sticky learn` already took zone `name`.
    fn learn_zone_user(&self, name: &str) -> Option<&str> {
        self.entries.iter().find_map(|e| {
            let (conf, _) = e.block.as_ref()?;
            let learn = conf.sticky.as_ref()?.0.learn.as_ref()?;
            (learn.zone == name).then_some(e.name.as_str())
        })
    }

    /// nginx's init of every upstream when the block ends: the model's list, in the order names first appeared.
    pub fn finish(self, level: &LevelResolver) -> Result<Vec<UpstreamConf>, ConfigError> {
        self.entries.into_iter().map(|e| e.init(level)).collect()
    }
}

/// The one server of an implicit upstream: weight 1, max_fails 1, fail_timeout 10s.
fn implicit_line(text: &str, addrs: Vec<std::net::SocketAddr>, at: &Span) -> ServerLine {
    ServerLine {
        span: at.clone(),
        ..ServerLine::new(text, addrs)
    }
}

impl Entry {
    fn init(self, level: &LevelResolver) -> Result<UpstreamConf, ConfigError> {
        let Some((conf, block_span)) = self.block else {
            return self.init_implicit();
        };
        let resolves = conf.servers.iter().any(ServerLine::is_template);
        let resolver = conf.resolver.merged(level);
        let zoned = conf.zone.is_some();
        if resolves && conf.zone.is_none() {
            let msg = format!(
                "resolving names at run time requires upstream \"{}\" in {} to be in shared memory",
                self.host, self.span
            );
            return Err(ConfigError::Emerg { msg });
        }
        if resolves && resolver.is_none() {
            let msg = format!(
                "no resolver defined to resolve names at run time in upstream \"{}\" in {}",
                self.host, self.span
            );
            return Err(ConfigError::Emerg { msg });
        }
        if resolves && conf.state.is_some() {
            let msg = format!(
                "\"resolve\" servers in upstream \"{}\" with \"state\" are not supported by corelb",
                self.host
            );
            return Err(ConfigError::invalid(msg, &self.span));
        }
        let primary: usize = conf
            .servers
            .iter()
            .filter(|s| !s.backup)
            .map(|s| s.addrs.len() + usize::from(s.is_template()))
            .sum();
        if primary == 0 && conf.state.is_none() {
            let msg = format!("no servers in upstream \"{}\"", self.host);
            return Err(ConfigError::invalid(msg, &self.span));
        }
        let hashing = matches!(
            conf.method,
            MethodKind::IpHash | MethodKind::Hash { .. } | MethodKind::Corelb(_) | MethodKind::Random
        );
        if let Some(s) = conf.servers.iter().find(|s| hashing && !s.slow_start.is_zero()) {
            let param = format!("slow_start={}s", s.slow_start.as_secs());
            return Err(unsupported_by_method(&param, &s.span));
        }
        let method = match conf.method {
            MethodKind::RoundRobin => Method::RoundRobin,
            MethodKind::IpHash => Method::IpHash,
            MethodKind::Hash { key, consistent } => Method::Hash { key, consistent },
            MethodKind::Corelb(method) => method,
            MethodKind::LeastConn => Method::LeastConn,
            MethodKind::LeastTime { mode, inflight } => Method::LeastTime { mode, inflight },
            MethodKind::Random => Method::Random { two: conf.random_two },
        };
        Ok(UpstreamConf {
            name: self.name,
            method,
            servers: conf.servers,
            keepalive: conf.keepalive.filter(|_| conf.keepalive_active),
            keepalive_requests: conf.keepalive_requests.unwrap_or(1000),
            keepalive_timeout: conf.keepalive_timeout.unwrap_or(Duration::from_secs(60)),
            keepalive_time: conf.keepalive_time.unwrap_or(Duration::from_secs(3600)),
            zone: conf.zone,
            state: conf.state.map(|(path, _)| path),
            implicit: false,
            sticky: conf.sticky.map(|(s, _)| Box::new(s)),
            queue: conf.queue,
            load_weight: conf.load_weight.unwrap_or_default(),
            load_metrics: conf.load_metrics.flatten(),
            // kept for any upstream in a zone, so that the API may add names to it
            resolver: resolver.filter(|_| zoned).map(std::sync::Arc::new),
            span: block_span,
        })
    }

    /// An upstream made by `proxy_pass host[:port]`: resolved now, all addresses, nginx's implicit defaults.
    fn init_implicit(mut self) -> Result<UpstreamConf, ConfigError> {
        if self.implicit.is_empty() {
            if self.port == 0 {
                let msg = format!("no port in upstream \"{}\"", self.host);
                return Err(ConfigError::invalid(msg, &self.span));
            }
            let addrs = url::resolve_host(&self.host, self.port)
                .map_err(|e| ConfigError::invalid(format!("{e} in upstream \"{}\"", self.host), &self.span))?;
            let text = format!("{}:{}", self.host, self.port);
            self.implicit.push(implicit_line(&text, addrs, &self.span));
        }
        Ok(UpstreamConf {
            implicit: true,
            span: self.span,
            ..UpstreamConf::new(self.name, Method::RoundRobin, self.implicit)
        })
    }
}

impl BlockConf {
    fn new() -> Self {
        BlockConf {
            servers: Vec::new(),
            method: MethodKind::RoundRobin,
            random_two: None,
            least_time_set: false,
            method_set: false,
            allow_backup: true,
            keepalive: None,
            keepalive_active: false,
            keepalive_requests: None,
            keepalive_timeout: None,
            keepalive_time: None,
            zone: None,
            state: None,
            sticky: None,
            sticky_set: false,
            queue: None,
            load_weight: None,
            load_metrics: None,
            resolver: LevelResolver::default(),
        }
    }

    fn directive(&mut self, b: &mut Build, vars: &mut Vars, module: Module, d: &Directive) -> Result<(), ConfigError> {
        match d.name.as_str() {
            "server" if self.state.is_some() => Err(ConfigError::NotAllowedHere {
                name: d.name.clone(),
                at: d.span.clone(),
            }),
            "state" => self.state(d),
            "server" => {
                let line = super::server_line::server_line(d, module, self.allow_backup)?;
                self.servers.push(line);
                Ok(())
            }
            "least_conn" => {
                self.set_method(b, d, MethodKind::LeastConn, true);
                Ok(())
            }
            "ip_hash" => {
                self.set_method(b, d, MethodKind::IpHash, false);
                Ok(())
            }
            "hash" => {
                let key = vars.compile(arg(d, 0), module, &d.span)?;
                let kind = match super::hash_method::method(d, key)? {
                    Method::Hash { key, consistent } => MethodKind::Hash { key, consistent },
                    other => MethodKind::Corelb(other),
                };
                self.set_method(b, d, kind, false);
                Ok(())
            }
            "random" => self.random(b, d, module),
            "fair" => {
                let method = super::fair::directive(d)?;
                self.set_method(b, d, MethodKind::Corelb(method), false);
                Ok(())
            }
            "least_time" => {
                // nginx warns of a redefined method before it reads the arguments
                self.set_method(b, d, MethodKind::RoundRobin, true);
                let (mode, inflight) = super::least_time::directive(d, module, self.least_time_set)?;
                self.least_time_set = true;
                self.method = MethodKind::LeastTime { mode, inflight };
                Ok(())
            }
            "keepalive" => self.keepalive(d),
            "keepalive_requests" => num_slot(&mut self.keepalive_requests, d),
            "keepalive_timeout" => msec_slot(&mut self.keepalive_timeout, d),
            "keepalive_time" => msec_slot(&mut self.keepalive_time, d),
            "zone" => self.zone(b, d, module),
            _ if self.resolver.directive(d)? => Ok(()),
            "queue" => {
                unset(&self.queue, d)?;
                self.queue = Some(super::queue::directive(d)?);
                Ok(())
            }
            "load_weight" => {
                unset(&self.load_weight, d)?;
                self.load_weight = Some(super::agent::load_weight(d)?);
                Ok(())
            }
            "endpoint_load_metrics" => {
                unset(&self.load_metrics, d)?;
                self.load_metrics = Some(super::agent::load_metrics(d)?);
                Ok(())
            }
            "sticky" => {
                if self.sticky_set {
                    return Err(super::directive_err(d, "is duplicate"));
                }
                self.sticky = Some((super::sticky::directive(d, vars)?, d.span.clone()));
                self.sticky_set = true;
                self.method_set = true;
                Ok(())
            }
            _ => Err(ConfigError::NotAllowedHere {
                name: d.name.clone(),
                at: d.span.clone(),
            }),
        }
    }

    /// `random [two [least_conn|ewma|least_time=MODE]]` (`ewma` is corelb's, `least_time=` nginx Plus's; see
    /// [`super::random_two`]).
    fn random(&mut self, b: &mut Build, d: &Directive, module: Module) -> Result<(), ConfigError> {
        self.set_method(b, d, MethodKind::Random, false);
        if let Some(two) = d.args.first() {
            if two != "two" {
                return Err(ConfigError::invalid(format!("invalid parameter \"{two}\""), &d.span));
            }
            self.random_two = Some(super::random_two::load(d, module)?);
        }
        Ok(())
    }

    /// `keepalive N`: wraps the method set so far (nginx's `init_upstream` becomes keepalive's).
    fn keepalive(&mut self, d: &Directive) -> Result<(), ConfigError> {
        unset(&self.keepalive, d)?;
        let v = arg(d, 0);
        let n = value::atoi(v).filter(|n| *n != 0).and_then(|n| usize::try_from(n).ok());
        let Some(n) = n else {
            let msg = format!("invalid value \"{v}\" in \"keepalive\" directive");
            return Err(ConfigError::invalid(msg, &d.span));
        };
        self.keepalive = Some(n);
        self.keepalive_active = true;
        self.method_set = true;
        Ok(())
    }

    /// A method directive: nginx warns when one was already set (a `keepalive` before it counts, and loses its
    /// effect), and sets the flags later `server` lines are checked against.
    fn set_method(&mut self, b: &mut Build, d: &Directive, m: MethodKind, backup: bool) {
        if self.method_set {
            b.warn("load balancing method redefined", &d.span);
        }
        self.method_set = true;
        self.keepalive_active = false;
        self.sticky = None;
        self.queue = None;
        self.allow_backup = backup;
        self.method = m;
    }

    /// `state FILE`: the servers come from FILE (read when the block ends), so no `server` line may be in the block.
    fn state(&mut self, d: &Directive) -> Result<(), ConfigError> {
        if self.state.is_some() {
            return Err(super::directive_err(d, "is duplicate"));
        }
        if !self.servers.is_empty() {
            return Err(ConfigError::NotAllowedHere {
                name: d.name.clone(),
                at: d.span.clone(),
            });
        }
        self.state = Some((state::resolve(arg(d, 0), &d.span), d.span.clone()));
        Ok(())
    }

    /// `zone NAME [SIZE]`.
    fn zone(&mut self, b: &mut Build, d: &Directive, module: Module) -> Result<(), ConfigError> {
        let name = arg(d, 0);
        if name.is_empty() {
            return Err(ConfigError::invalid(format!("invalid zone name \"{name}\""), &d.span));
        }
        let size = match d.args.get(1) {
            None => None,
            Some(s) => {
                let size = value::parse_size(s)
                    .ok_or_else(|| ConfigError::invalid(format!("invalid zone size \"{s}\""), &d.span))?;
                if size < MIN_ZONE_SIZE {
                    return Err(ConfigError::invalid(format!("zone \"{name}\" is too small"), &d.span));
                }
                Some(size)
            }
        };
        b.add_zone(name, size.unwrap_or(0), module == Module::Stream, &d.span)?;
        self.zone = Some(ZoneConf {
            name: name.to_string(),
            size,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::url::UrlOpts;

    fn load(text: &str) -> Result<crate::config::model::Config, String> {
        let text = format!("events {{}}\n{text}");
        crate::config::parse_str(&text, std::path::Path::new("/t/n.conf")).map_err(|e| e.to_string())
    }

    #[test]
    fn resolve_needs_a_zone_and_a_resolver_and_takes_the_levels() {
        let pass = "server { listen 127.0.0.1:1; location / { proxy_pass http://u; } }";
        let e = load(&format!("http {{ upstream u {{ server a.test resolve; }} {pass} }}")).unwrap_err();
        assert_eq!(
            e,
            "[emerg] resolving names at run time requires upstream \"u\" in /t/n.conf:2 to be in shared memory"
        );
        let e = load(&format!(
            "http {{ upstream u {{ zone z 1m; server a.test resolve; }} {pass} }}"
        ))
        .unwrap_err();
        assert_eq!(
            e,
            "[emerg] no resolver defined to resolve names at run time in upstream \"u\" in /t/n.conf:2"
        );
        let c = load(&format!(
            "http {{ resolver 127.0.0.1 valid=5s; resolver_timeout 3s; \
             upstream u {{ zone z 1m; server a.test resolve; }} \
             upstream v {{ zone v 1m; resolver 127.0.0.2; server b.test resolve; }} {pass} }}"
        ))
        .unwrap();
        let ups = &c.http.as_ref().unwrap().upstreams;
        let r = |i: usize| ups[i].resolver.as_deref().unwrap();
        assert_eq!(
            (r(0).servers[0].port(), r(0).valid, r(0).timeout),
            (53, Some(Duration::from_secs(5)), Duration::from_secs(3))
        );
        assert_eq!(
            (r(1).servers[0].to_string().as_str(), r(1).timeout),
            ("127.0.0.2:53", Duration::from_secs(3))
        );
        let e =
            load("http { upstream u { zone z 1m; resolver 127.0.0.1; resolver 127.0.0.1; server a.test resolve; } }");
        assert!(e.unwrap_err().contains("\"resolver\" directive is duplicate"));
    }

    fn at(line: usize) -> Span {
        Span {
            file: PathBuf::from("t.conf"),
            line,
        }
    }

    fn url(text: &str, default_port: u16) -> Url {
        let opts = UrlOpts {
            default_port,
            uri_part: true,
            no_resolve: true,
            ..UrlOpts::default()
        };
        url::parse_url(text, opts).expect("url")
    }

    #[test]
    fn http_names_match_case_insensitively_and_by_port() {
        let mut u = Upstreams::new(Module::Http);
        let a = u.reference(&url("Backend", 80), "Backend", "Backend", &at(1)).unwrap();
        // The block comes later and takes the entry over.
        assert_eq!(u.add("backend", 0, true, true, &at(2)).unwrap(), a);
        assert_eq!(
            u.reference(&url("BACKEND", 80), "BACKEND", "BACKEND", &at(3)).unwrap(),
            a
        );
        let e = u
            .reference(&url("backend:81", 80), "backend:81", "backend:81", &at(4))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] upstream \"backend\" may not have port 81 in t.conf:4"
        );
        let e = u.add("backend", 0, true, true, &at(5)).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] duplicate upstream \"backend\" in t.conf:5");
        // Implicit upstreams differ by port.
        let x = u
            .reference(&url("10.0.0.1:1", 80), "10.0.0.1:1", "10.0.0.1:1", &at(6))
            .unwrap();
        let y = u
            .reference(&url("10.0.0.1:2", 80), "10.0.0.1:2", "10.0.0.1:2", &at(7))
            .unwrap();
        assert_ne!(x, y);
    }

    #[test]
    fn a_block_after_a_proxy_pass_with_a_port_is_refused_at_the_proxy_pass() {
        let mut u = Upstreams::new(Module::Http);
        u.reference(&url("b:8080", 80), "b:8080", "b:8080", &at(3)).unwrap();
        let e = u.add("b", 0, true, true, &at(9)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] upstream \"b\" may not have port 8080 in t.conf:3"
        );
    }

    #[test]
    fn implicit_upstreams_resolve_at_the_end() {
        let mut u = Upstreams::new(Module::Stream);
        u.reference(&url("backend", 0), "backend", "backend", &at(2)).unwrap();
        let e = u.finish(&LevelResolver::default()).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] no port in upstream \"backend\" in t.conf:2");
        let mut u = Upstreams::new(Module::Http);
        u.reference(&url("no-such-host.invalid", 80), "x", "x", &at(4)).unwrap();
        let e = u.finish(&LevelResolver::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] host not found in upstream \"no-such-host.invalid\" in t.conf:4"
        );
    }
}
