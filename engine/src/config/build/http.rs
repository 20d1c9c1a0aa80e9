//! The `http` block: upstreams, servers (`listen`, `server_name`, `return`), locations of every kind and nesting
//! ([`super::locations`]; `proxy_pass`, `return`), the settings inherited http -> server -> location (-> nested
//! location), and nginx's end-of-block checks.

use super::health::{self, CheckDraft, ProbeTimeouts};
use super::layers::{Cx, Layers};
use super::listen::HttpListens;
use super::locations::{self, Nested};
use super::logs::LogState;
use super::map::{self, Maps};
use super::rewrite::Script;
use super::upstream::Upstreams;
use super::vars::{Module, Vars};
use super::{arg, block_of, unset, value, walk, Build, Ctx};
use crate::config::error::ConfigError;
use crate::config::model::{
    AdminEndpoint, HealthCheck, HealthConf, HttpConf, HttpServer, Listen, Location, LocationMatch, MatchConf,
    ProxyPass, Return, Span, UpstreamConf,
};
use crate::config::parser::Directive;
use crate::config::url::{self, UrlOpts};

/// A server block as read, before the http-level settings (which may come later in the file) are merged in.
#[derive(Debug)]
struct ServerDraft {
    span: Span,
    listens: Vec<Listen>,
    names: Vec<String>,
    ret: Option<Return>,
    script: Script,
    layers: Layers,
    locations: Vec<LocationDraft>,
}

/// A location as read.
#[derive(Debug)]
struct LocationDraft {
    matcher: LocationMatch,
    span: Span,
    proxy_pass: Option<ProxyPass>,
    ret: Option<Return>,
    script: Script,
    admin: Option<AdminEndpoint>,
    layers: Layers,
    health: Vec<CheckDraft>,
    /// The locations nested in this one, until the server's list is flattened.
    nested: Vec<LocationDraft>,
    /// Index of the location this one is nested in, once flattened.
    parent: Option<usize>,
}

impl Nested for LocationDraft {
    fn take_nested(&mut self) -> Vec<Self> {
        std::mem::take(&mut self.nested)
    }

    fn set_parent(&mut self, parent: Option<usize>) {
        self.parent = parent;
    }
}

/// Everything one http block collects.
#[derive(Debug)]
struct HttpState {
    upstreams: Upstreams,
    servers: Vec<ServerDraft>,
    layers: Layers,
    vars: Vars,
    /// The first bad `proxy_set_header` value of a server or location.
    header_error: Option<String>,
    /// The first bad `proxy_set_header` value at the http level (nginx checks it only if a server inherits it).
    http_header_error: Option<String>,
    listens: HttpListens,
    matches: Vec<MatchConf>,
    logs: LogState,
    maps: Maps,
    /// `limit_req_zone`, `limit_conn_zone`.
    zones: crate::config::limit::Zones,
    /// Every charset the block names, and the `charset_map` tables.
    charsets: crate::config::charset::Charsets,
}

/// Builds the http block `d`.
pub fn build(b: &mut Build, d: &Directive) -> Result<HttpConf, ConfigError> {
    let mut h = HttpState {
        upstreams: Upstreams::new(Module::Http),
        servers: Vec::new(),
        layers: Layers::default(),
        vars: Vars::with_maps(map::names(block_of(d)?))
            .with_server_captures(super::server_names::capture_names(block_of(d)?))
            .with_regex_captures(super::regex_names::regex_group_names(block_of(d)?))
            .with_users(super::set::names(block_of(d)?)),
        header_error: None,
        http_header_error: None,
        listens: HttpListens::default(),
        matches: Vec::new(),
        logs: LogState::with_prefix(b.prefix.clone()),
        maps: Maps::default(),
        zones: crate::config::limit::Zones::default(),
        charsets: super::charset::names(block_of(d)?),
    };
    let close = walk(block_of(d)?, Ctx::HTTP, |hd| match hd.name.as_str() {
        "upstream" => h.upstreams.block(b, &mut h.vars, hd),
        "server" => h.server(b, hd),
        "match" => {
            let m = health::match_block(hd, &h.matches)?;
            h.matches.push(m);
            Ok(())
        }
        "log_format" => h.logs.log_format(hd, &mut h.vars),
        "charset_map" => super::charset::charset_map(&mut h.charsets, hd),
        // the sizes of nginx's server-name hash: corelb matches names without one (checked, docs/directives.md)
        "server_names_hash_max_size" | "server_names_hash_bucket_size" => super::value::atoi(super::arg(hd, 0))
            .map(|_| ())
            .ok_or_else(|| super::directive_err(hd, "invalid number")),
        "uninitialized_variable_warn" => super::set::warn_flag(hd),
        "geo" => {
            let m = super::geo::build(b, hd, Module::Http, &mut h.vars)?;
            h.maps.maps.push(m);
            Ok(())
        }
        _ if h.maps.directive(hd, Module::Http, &mut h.vars)? => Ok(()),
        _ if super::limits::zone(&mut h.zones, &mut h.vars, Module::Http, hd)? => Ok(()),
        _ => shared(&mut h.layers, b, &mut h.vars, &mut h.http_header_error, &mut h.logs, hd),
    })?;
    // nginx's checks when the block ends, in its order: upstreams, header values, locations, variables.
    let upstreams = h.upstreams.finish(&h.layers.level_resolver())?;
    for s in &h.servers {
        super::layers::check_header_buffers(&s.layers.over(&h.layers).client_conf(), &close)?;
    }
    let http_headers_used = h.servers.iter().any(|s| !s.layers.sets_headers());
    let header_error = h.http_header_error.filter(|_| http_headers_used).or(h.header_error);
    if let Some(msg) = header_error {
        return Err(ConfigError::invalid(msg, &close));
    }
    for s in &h.servers {
        let all: Vec<_> = s.locations.iter().map(|l| (&l.matcher, &l.span, l.parent)).collect();
        locations::check_duplicates(&all)?;
    }
    let user_vars = h.vars.users().to_vec();
    let ssl_ciphers = h.vars.uses_ssl_ciphers();
    h.vars.finish()?;
    b.warnings.extend(
        h.listens
            .name_conflicts(|i| h.servers.get(i).map(|s| s.names.clone()).unwrap_or_default()),
    );
    let drafts: Vec<_> = h.servers.iter_mut().map(ServerDraft::take_checks).collect();
    let tls: Vec<_> = h.servers.iter().map(|s| s.layers.tls.over(&h.layers.tls)).collect();
    let conf_dir = d.span.file.parent().unwrap_or(std::path::Path::new(""));
    let mut servers: Vec<HttpServer> = h
        .servers
        .into_iter()
        .map(|s| s.merge(&h.layers, &b.prefix, conf_dir, &h.zones))
        .collect::<Result<_, _>>()?;
    super::tls::load_servers(&mut servers, &tls, conf_dir)?;
    crate::config::map::mark_answer_time(&mut h.maps.maps);
    for s in &mut servers {
        h.logs.settle(&mut s.client.access_log, &s.files.root);
        map::answer_time_logs(&mut s.client.access_log, &h.maps.maps)?;
        for l in &mut s.locations {
            h.logs.settle(&mut l.client.access_log, &l.files.root);
            map::answer_time_logs(&mut l.client.access_log, &h.maps.maps)?;
        }
    }
    for s in &servers {
        super::charset::check_recode(&h.charsets, &s.charset)?;
        for l in &s.locations {
            super::charset::check_recode(&h.charsets, &l.charset)?;
        }
    }
    let checks = finish_checks(&servers, drafts, &upstreams, &h.matches)?;
    let health = HealthConf {
        checks,
        matches: h.matches,
    };
    Ok(HttpConf {
        upstreams,
        servers,
        health,
        maps: h.maps.maps,
        limit_zones: h.zones,
        user_vars,
        charsets: std::sync::Arc::new(h.charsets),
        ssl_ciphers,
    })
}

/// The `health_check` lines of each server's locations (`drafts`, by location index), tied to the upstream of the
/// location's `proxy_pass` and given its timeouts.
fn finish_checks(
    servers: &[HttpServer],
    drafts: Vec<Vec<(usize, CheckDraft)>>,
    upstreams: &[UpstreamConf],
    matches: &[MatchConf],
) -> Result<Vec<HealthCheck>, ConfigError> {
    let mut checks = Vec::new();
    for (server, drafts) in servers.iter().zip(drafts) {
        for (li, c) in drafts {
            let Some(loc) = server.locations.get(li) else { continue };
            let Some(pass) = &loc.proxy_pass else {
                let msg = "\"health_check\" requires \"proxy_pass\" in its location";
                return Err(ConfigError::invalid(msg, c.span()));
            };
            if pass.url.is_some() {
                let msg = "\"health_check\" with a \"proxy_pass\" with variables is not supported by corelb";
                return Err(ConfigError::invalid(msg, c.span()));
            }
            let timeouts = ProbeTimeouts {
                connect: loc.proxy.connect_timeout,
                read: loc.proxy.read_timeout,
            };
            checks.push(c.finish(pass.upstream, upstreams, matches, timeouts)?);
        }
    }
    Ok(checks)
}

/// A directive every level reads into its [`Layers`]; anything else reaching here is not allowed.
fn shared(
    layers: &mut Layers,
    b: &mut Build,
    vars: &mut Vars,
    header_error: &mut Option<String>,
    logs: &mut LogState,
    d: &Directive,
) -> Result<(), ConfigError> {
    let mut cx = Cx {
        build: b,
        vars,
        header_error,
        logs,
    };
    if layers.directive(&mut cx, d)? {
        return Ok(());
    }
    Err(ConfigError::NotAllowedHere {
        name: d.name.clone(),
        at: d.span.clone(),
    })
}

impl HttpState {
    fn server(&mut self, b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
        let index = self.servers.len();
        let mut s = ServerDraft {
            span: d.span.clone(),
            listens: Vec::new(),
            names: Vec::new(),
            ret: None,
            script: Script::default(),
            layers: Layers::default(),
            locations: Vec::new(),
        };
        let mut listen_seen = false;
        walk(block_of(d)?, Ctx::HTTP_SRV, |sd| match sd.name.as_str() {
            "listen" => {
                listen_seen = true;
                let listens = self.listens.listen(sd, index)?;
                if listens.first().is_some_and(|l| l.http2) {
                    let msg = "the \"listen ... http2\" directive is deprecated, use the \"http2\" directive instead";
                    b.warn(msg, &sd.span);
                }
                s.listens.extend(listens);
                Ok(())
            }
            "server_name" => super::server_names::directive(b, sd, &mut s.names),
            "location" => {
                let loc = self.location(b, sd, None)?;
                s.locations.push(loc);
                Ok(())
            }
            "return" => rewrite_return(sd, &mut s.ret, &mut s.script, &mut self.vars),
            "break" => {
                s.script.brk();
                Ok(())
            }
            "if" => s.script.if_block(sd, Ctx::HTTP_SIF, &mut self.vars),
            "set" => s.script.set(sd, &mut self.vars),
            "uninitialized_variable_warn" => super::set::warn_flag(sd),
            "rewrite" => s.script.rewrite(sd, &mut self.vars),
            _ => shared(
                &mut s.layers,
                b,
                &mut self.vars,
                &mut self.header_error,
                &mut self.logs,
                sd,
            ),
        })?;
        if !listen_seen {
            s.listens.push(self.listens.default_listen(index, &d.span)?);
        }
        if s.names.is_empty() {
            s.names.push(String::new());
        }
        let tree = std::mem::take(&mut s.locations);
        locations::flatten(tree, None, &mut s.locations);
        self.servers.push(s);
        Ok(())
    }

    /// The location `d`, nested in the location `parent` matches (`None` at the server level).
    fn location(
        &mut self,
        b: &mut Build,
        d: &Directive,
        parent: Option<&LocationMatch>,
    ) -> Result<LocationDraft, ConfigError> {
        let matcher = locations::matcher(d, parent)?;
        let mut loc = LocationDraft {
            matcher: matcher.clone(),
            span: d.span.clone(),
            proxy_pass: None,
            ret: None,
            script: Script::default(),
            admin: None,
            layers: Layers::default(),
            health: Vec::new(),
            nested: Vec::new(),
            parent: None,
        };
        walk(block_of(d)?, Ctx::HTTP_LOC, |ld| match ld.name.as_str() {
            "location" => {
                let nested = self.location(b, ld, Some(&matcher))?;
                loc.nested.push(nested);
                Ok(())
            }
            "proxy_pass" => {
                unset(&loc.proxy_pass, ld)?;
                let pass = self.proxy_pass(ld)?;
                let no_uri = matches!(matcher, LocationMatch::Regex(_) | LocationMatch::Named(_));
                if no_uri && pass.uri.is_some() {
                    let msg = "\"proxy_pass\" cannot have URI part in location given by regular expression, or \
                               inside named location, or inside \"if\" statement, or inside \"limit_except\" block";
                    return Err(ConfigError::invalid(msg, &ld.span));
                }
                // nginx sets no `proxy_redirect default` for a URL with variables
                if pass.url.is_none() {
                    let name = d.args.last().map_or("", |n| n.trim_start_matches(['=', '^', '~']));
                    loc.layers.headers.proxy_pass_seen(arg(ld, 0), name);
                }
                loc.proxy_pass = Some(pass);
                Ok(())
            }
            "return" => rewrite_return(ld, &mut loc.ret, &mut loc.script, &mut self.vars),
            "break" => {
                loc.script.brk();
                Ok(())
            }
            "if" => loc.script.if_block(ld, Ctx::HTTP_LIF, &mut self.vars),
            "set" => loc.script.set(ld, &mut self.vars),
            "uninitialized_variable_warn" => super::set::warn_flag(ld),
            "rewrite" => loc.script.rewrite(ld, &mut self.vars),
            "api" | "metrics" | "stub_status" => {
                let endpoint = admin_endpoint(ld)?;
                // nginx takes a second `stub_status` (it sets the location's handler again).
                if !(endpoint == AdminEndpoint::StubStatus && loc.admin == Some(endpoint)) {
                    unset(&loc.admin, ld)?;
                }
                loc.admin = Some(endpoint);
                Ok(())
            }
            "alias" => loc.layers.files.alias(b, &mut self.vars, ld, &matcher),
            "health_check" => {
                loc.health.push(health::health_check(ld, Module::Http)?);
                Ok(())
            }
            _ => shared(
                &mut loc.layers,
                b,
                &mut self.vars,
                &mut self.header_error,
                &mut self.logs,
                ld,
            ),
        })?;
        if loc.layers.files.has_try_files() && (loc.proxy_pass.is_some() || loc.admin.is_some()) {
            // nginx tries the files, then proxies with the path found: corelb serves files only where no handler is
            let msg =
                "\"try_files\" in a location with a handler (\"proxy_pass\", \"api\"...) is not supported by corelb";
            return Err(ConfigError::invalid(msg, &d.span));
        }
        Ok(loc)
    }

    /// `proxy_pass http://NAME[:PORT][/uri]`: an upstream of this block, or an implicit one.
    fn proxy_pass(&mut self, d: &Directive) -> Result<ProxyPass, ConfigError> {
        let url = arg(d, 0);
        if url.contains('$') {
            // nginx's `ngx_http_proxy_pass` with variables: the URL is compiled and checked per request
            return Ok(ProxyPass {
                scheme: "http".into(),
                upstream: 0,
                uri: None,
                url: Some(self.vars.compile(url, Module::Http, &d.span)?),
            });
        }
        let has_prefix = |p: &str| url.get(..p.len()).is_some_and(|s| s.eq_ignore_ascii_case(p));
        let (rest, scheme, default_port) = if has_prefix("http://") {
            (url.get(7..).unwrap_or_default(), "http", 80)
        } else if has_prefix("https://") {
            (url.get(8..).unwrap_or_default(), "https", 443)
        } else {
            return Err(ConfigError::invalid("invalid URL prefix", &d.span));
        };
        let opts = UrlOpts {
            default_port,
            uri_part: true,
            no_resolve: true,
            listen: false,
        };
        let u = url::parse_url(rest, opts)
            .map_err(|e| ConfigError::invalid(format!("{e} in upstream \"{rest}\""), &d.span))?;
        // nginx's `$proxy_host`: `localhost` for a unix-domain socket, the port only when it is not the scheme's.
        let proxy_host = if u.unix {
            "localhost".to_string()
        } else if u.no_port || u.port == default_port {
            u.host.clone()
        } else {
            format!("{}:{}", u.host, u.port_text)
        };
        let text = match &u.uri {
            Some(uri) => rest.strip_suffix(uri.as_str()).unwrap_or(rest),
            None => rest,
        };
        let upstream = self.upstreams.reference(&u, text, &proxy_host, &d.span)?;
        Ok(ProxyPass {
            scheme: scheme.into(),
            upstream,
            uri: u.uri,
            url: None,
        })
    }
}

impl ServerDraft {
    /// The `health_check` lines of its locations, with each location's index.
    fn take_checks(&mut self) -> Vec<(usize, CheckDraft)> {
        let mut out = Vec::new();
        for (i, l) in self.locations.iter_mut().enumerate() {
            out.extend(std::mem::take(&mut l.health).into_iter().map(|c| (i, c)));
        }
        out
    }

    /// The server with the http-level settings merged in, and each location with the server's (relative default
    /// paths resolve against `prefix`).
    fn merge(
        self,
        http: &Layers,
        prefix: &std::path::Path,
        conf_dir: &std::path::Path,
        zones: &crate::config::limit::Zones,
    ) -> Result<HttpServer, ConfigError> {
        let layers = self.layers.over(http);
        // each location over the one it is nested in (listed before it), or over the server
        let mut merged: Vec<Layers> = Vec::with_capacity(self.locations.len());
        let mut locations = Vec::with_capacity(self.locations.len());
        for l in self.locations {
            let parent = l.parent.and_then(|p| merged.get(p)).unwrap_or(&layers);
            let own = l.layers.over(parent);
            let https = l.proxy_pass.as_ref().is_some_and(|p| p.scheme == "https");
            let proxy_tls = match https {
                true => Some(own.proxy_tls.conf(conf_dir, &l.span)?),
                false => None,
            };
            locations.push(Location {
                matcher: l.matcher,
                parent: l.parent,
                proxy_pass: l.proxy_pass,
                ret: l.ret,
                script: l.script.ops,
                admin: l.admin,
                proxy: own.proxy_conf(&l.span)?,
                client: own.client_conf(),
                files: own.files.conf(prefix),
                headers: own.headers.conf(),
                realip: own.realip.conf(),
                access: own.access.conf(),
                limits: own.limits.conf(zones)?,
                gzip: own.gzip.conf(),
                charset: own.charset.conf(),
                error_pages: own.error_pages.conf(),
                proxy_tls,
                span: l.span,
            });
            merged.push(own);
        }
        Ok(HttpServer {
            listens: self.listens,
            server_names: self.names,
            locations,
            ret: self.ret,
            script: self.script.ops,
            client: layers.client_conf(),
            files: layers.files.conf(prefix),
            headers: layers.headers.conf(),
            realip: layers.realip.conf(),
            access: layers.access.conf(),
            limits: layers.limits.conf(zones)?,
            gzip: layers.gzip.conf(),
            charset: layers.charset.conf(),
            tls: None,
            http2: layers.http2.conf(),
            error_pages: layers.error_pages.conf(),
            span: self.span,
        })
    }
}

/// `api [write=on|off]` (nginx Plus) or `metrics`.
fn admin_endpoint(d: &Directive) -> Result<AdminEndpoint, ConfigError> {
    match d.name.as_str() {
        "metrics" => return Ok(AdminEndpoint::Metrics),
        // nginx ignores the argument since 1.7.5 (it was `on`).
        "stub_status" => return Ok(AdminEndpoint::StubStatus),
        _ => {}
    }
    let write = match d.args.first().map(String::as_str) {
        None | Some("write=off") => false,
        Some("write=on") => true,
        Some(other) => return Err(ConfigError::invalid(format!("invalid parameter \"{other}\""), &d.span)),
    };
    Ok(AdminEndpoint::Api { write })
}

/// `return` in a server or location: the level's plain `return` when it is the first rewrite directive (and
/// then nothing after it runs), else a step of its script.
fn rewrite_return(
    d: &Directive,
    slot: &mut Option<Return>,
    script: &mut Script,
    vars: &mut Vars,
) -> Result<(), ConfigError> {
    if script.is_empty() {
        return ret(d, slot, vars);
    }
    let mut later = None;
    ret(d, &mut later, vars)?;
    if let (None, Some(r)) = (&slot, later) {
        script.ret(r);
    }
    Ok(())
}

/// `return CODE [TEXT]` or `return URL` (302); only the first `return` of a level can run, so later ones are
/// checked and dropped.
pub(super) fn ret(d: &Directive, slot: &mut Option<Return>, vars: &mut Vars) -> Result<(), ConfigError> {
    let first = arg(d, 0);
    let invalid = || ConfigError::invalid(format!("invalid return code \"{first}\""), &d.span);
    let (code, text) = match value::atoi(first) {
        None => {
            let url = ["http://", "https://", "$scheme"].iter().any(|p| first.starts_with(p));
            if d.args.len() != 1 || !url {
                return Err(invalid());
            }
            (302, Some(first.to_string()))
        }
        Some(code) => {
            let code = u16::try_from(code).ok().filter(|c| *c <= 999).ok_or_else(invalid)?;
            (code, d.args.get(1).cloned())
        }
    };
    if let Some(t) = &text {
        vars.check(t, Module::Http, &d.span)?;
    }
    if slot.is_none() {
        *slot = Some(Return { code, text });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn directive(args: &[&str]) -> Directive {
        Directive {
            name: "location".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 1,
            },
            block: None,
        }
    }

    #[test]
    fn return_codes() {
        let mut vars = Vars::default();
        let mut slot = None;
        let mut d = directive(&["301", "/x"]);
        d.name = "return".into();
        ret(&d, &mut slot, &mut vars).unwrap();
        assert_eq!(
            slot,
            Some(Return {
                code: 301,
                text: Some("/x".into())
            })
        );
        d.args = vec!["1000".into()];
        let e = ret(&d, &mut slot, &mut vars).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] invalid return code \"1000\" in t.conf:1");
        d.args = vec!["$scheme://x".into()];
        let mut redirect = None;
        ret(&d, &mut redirect, &mut vars).unwrap();
        assert_eq!(redirect.map(|r| r.code), Some(302));
        assert!(vars.finish().is_ok());
    }
}
