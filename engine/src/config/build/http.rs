//! The `http` block: upstreams, servers (`listen`, `server_name`, `return`), prefix and `=` locations
//! (`proxy_pass`, `return`), the settings inherited http -> server -> location, and nginx's end-of-block checks.

use super::health::{self, CheckDraft, ProbeTimeouts};
use super::layers::{Cx, Layers};
use super::listen::HttpListens;
use super::logs::LogState;
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
    admin: Option<AdminEndpoint>,
    layers: Layers,
    health: Vec<CheckDraft>,
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
}

/// Builds the http block `d`.
pub fn build(b: &mut Build, d: &Directive) -> Result<HttpConf, ConfigError> {
    let mut h = HttpState {
        upstreams: Upstreams::new(Module::Http),
        servers: Vec::new(),
        layers: Layers::default(),
        vars: Vars::default(),
        header_error: None,
        http_header_error: None,
        listens: HttpListens::default(),
        matches: Vec::new(),
        logs: LogState::with_prefix(b.prefix.clone()),
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
        _ => shared(&mut h.layers, b, &mut h.vars, &mut h.http_header_error, &mut h.logs, hd),
    })?;
    // nginx's checks when the block ends, in its order: upstreams, header values, locations, variables.
    let upstreams = h.upstreams.finish()?;
    for s in &h.servers {
        super::layers::check_header_buffers(&s.layers.over(&h.layers).client_conf(), &close)?;
    }
    let http_headers_used = h.servers.iter().any(|s| !s.layers.sets_headers());
    let header_error = h.http_header_error.filter(|_| http_headers_used).or(h.header_error);
    if let Some(msg) = header_error {
        return Err(ConfigError::invalid(msg, &close));
    }
    for s in &h.servers {
        check_duplicate_locations(&s.locations)?;
    }
    h.vars.finish()?;
    b.warnings.extend(
        h.listens
            .name_conflicts(|i| h.servers.get(i).map(|s| s.names.clone()).unwrap_or_default()),
    );
    let drafts: Vec<_> = h.servers.iter_mut().map(ServerDraft::take_checks).collect();
    let mut servers: Vec<HttpServer> = h.servers.into_iter().map(|s| s.merge(&h.layers, &b.prefix)).collect();
    for s in &mut servers {
        h.logs.settle(&mut s.client.access_log);
        for l in &mut s.locations {
            h.logs.settle(&mut l.client.access_log);
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
            layers: Layers::default(),
            locations: Vec::new(),
        };
        let mut listen_seen = false;
        walk(block_of(d)?, Ctx::HTTP_SRV, |sd| match sd.name.as_str() {
            "listen" => {
                listen_seen = true;
                s.listens.extend(self.listens.listen(sd, index)?);
                Ok(())
            }
            "server_name" => server_names(b, sd, &mut s.names),
            "location" => {
                let loc = self.location(b, sd)?;
                s.locations.push(loc);
                Ok(())
            }
            "return" => ret(sd, &mut s.ret, &mut self.vars),
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
        self.servers.push(s);
        Ok(())
    }

    fn location(&mut self, b: &mut Build, d: &Directive) -> Result<LocationDraft, ConfigError> {
        let mut loc = LocationDraft {
            matcher: location_matcher(d)?,
            span: d.span.clone(),
            proxy_pass: None,
            ret: None,
            admin: None,
            layers: Layers::default(),
            health: Vec::new(),
        };
        walk(block_of(d)?, Ctx::HTTP_LOC, |ld| match ld.name.as_str() {
            "location" => Err(ConfigError::invalid(
                "nested locations are not supported by corelb",
                &ld.span,
            )),
            "proxy_pass" => {
                unset(&loc.proxy_pass, ld)?;
                loc.proxy_pass = Some(self.proxy_pass(ld)?);
                Ok(())
            }
            "return" => ret(ld, &mut loc.ret, &mut self.vars),
            "api" | "metrics" | "stub_status" => {
                let endpoint = admin_endpoint(ld)?;
                // nginx takes a second `stub_status` (it sets the location's handler again).
                if !(endpoint == AdminEndpoint::StubStatus && loc.admin == Some(endpoint)) {
                    unset(&loc.admin, ld)?;
                }
                loc.admin = Some(endpoint);
                Ok(())
            }
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
        Ok(loc)
    }

    /// `proxy_pass http://NAME[:PORT][/uri]`: an upstream of this block, or an implicit one.
    fn proxy_pass(&mut self, d: &Directive) -> Result<ProxyPass, ConfigError> {
        let url = arg(d, 0);
        if url.contains('$') {
            return Err(ConfigError::invalid(
                "\"proxy_pass\" with variables is not supported by corelb",
                &d.span,
            ));
        }
        let has_prefix = |p: &str| url.get(..p.len()).is_some_and(|s| s.eq_ignore_ascii_case(p));
        let rest = if has_prefix("http://") {
            url.get(7..).unwrap_or_default()
        } else if has_prefix("https://") {
            let msg = "https upstreams are not supported by corelb (\"proxy_pass https://...\")";
            return Err(ConfigError::invalid(msg, &d.span));
        } else {
            return Err(ConfigError::invalid("invalid URL prefix", &d.span));
        };
        let opts = UrlOpts {
            default_port: 80,
            uri_part: true,
            no_resolve: true,
            listen: false,
        };
        let u = url::parse_url(rest, opts)
            .map_err(|e| ConfigError::invalid(format!("{e} in upstream \"{rest}\""), &d.span))?;
        // nginx's `$proxy_host`: the port only when it is not the scheme's.
        let proxy_host = if u.no_port || u.port == 80 {
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
            scheme: "http".into(),
            upstream,
            uri: u.uri,
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
    fn merge(self, http: &Layers, prefix: &std::path::Path) -> HttpServer {
        let layers = self.layers.over(http);
        let locations = self
            .locations
            .into_iter()
            .map(|l| {
                let own = l.layers.over(&layers);
                Location {
                    matcher: l.matcher,
                    proxy_pass: l.proxy_pass,
                    ret: l.ret,
                    admin: l.admin,
                    proxy: own.proxy_conf(),
                    client: own.client_conf(),
                    files: own.files.conf(prefix),
                    span: l.span,
                }
            })
            .collect();
        HttpServer {
            listens: self.listens,
            server_names: self.names,
            locations,
            ret: self.ret,
            client: layers.client_conf(),
            files: layers.files.conf(prefix),
            span: self.span,
        }
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

/// `location [=] URI`; the regex (`~`, `~*`), `^~` and named (`@`) kinds are refused by name.
fn location_matcher(d: &Directive) -> Result<LocationMatch, ConfigError> {
    let refuse = |m: &str| {
        let msg = format!("location modifier \"{m}\" is not supported by corelb (only prefix and \"=\" locations)");
        Err(ConfigError::invalid(msg, &d.span))
    };
    if let [modifier, name] = d.args.as_slice() {
        return match modifier.as_str() {
            "=" => Ok(LocationMatch::Exact(name.clone())),
            "~" | "~*" | "^~" => refuse(modifier),
            _ => Err(ConfigError::invalid(
                format!("invalid location modifier \"{modifier}\""),
                &d.span,
            )),
        };
    }
    let name = arg(d, 0);
    if let Some(exact) = name.strip_prefix('=') {
        Ok(LocationMatch::Exact(exact.to_string()))
    } else if name.starts_with("^~") {
        refuse("^~")
    } else if name.starts_with("~*") {
        refuse("~*")
    } else if name.starts_with('~') {
        refuse("~")
    } else if name.starts_with('@') {
        let msg = format!("named location \"{name}\" is not supported by corelb");
        Err(ConfigError::invalid(msg, &d.span))
    } else {
        Ok(LocationMatch::Prefix(name.to_string()))
    }
}

/// nginx's `duplicate location "X"`: two prefix (or two exact) locations with the same URI in one server.
fn check_duplicate_locations(locations: &[LocationDraft]) -> Result<(), ConfigError> {
    for (i, later) in locations.iter().enumerate() {
        if locations.iter().take(i).any(|earlier| earlier.matcher == later.matcher) {
            let (LocationMatch::Prefix(uri) | LocationMatch::Exact(uri)) = &later.matcher;
            return Err(ConfigError::invalid(
                format!("duplicate location \"{uri}\""),
                &later.span,
            ));
        }
    }
    Ok(())
}

/// `return CODE [TEXT]` or `return URL` (302); only the first `return` of a level can run, so later ones are
/// checked and dropped.
fn ret(d: &Directive, slot: &mut Option<Return>, vars: &mut Vars) -> Result<(), ConfigError> {
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

/// `server_name NAME...`: nginx's checks, lower-cased, `$hostname` replaced; regex names are refused.
fn server_names(b: &mut Build, d: &Directive, names: &mut Vec<String>) -> Result<(), ConfigError> {
    for v in &d.args {
        let bytes = v.as_bytes();
        let bad_wildcard = bytes.first() == Some(&b'*') && (v.len() < 3 || bytes.get(1) != Some(&b'.'));
        if bad_wildcard || (bytes.first() == Some(&b'.') && v.len() < 2) {
            return Err(ConfigError::invalid(format!("server name \"{v}\" is invalid"), &d.span));
        }
        if v.contains('/') {
            b.warn(&format!("server name \"{v}\" has suspicious symbols"), &d.span);
        }
        if v.eq_ignore_ascii_case("$hostname") {
            names.push(hostname());
        } else if v == "~" {
            return Err(ConfigError::invalid(
                format!("empty regex in server name \"{v}\""),
                &d.span,
            ));
        } else if v.starts_with('~') {
            let msg = format!("regular expression server name \"{v}\" is not supported by corelb");
            return Err(ConfigError::invalid(msg, &d.span));
        } else {
            names.push(v.to_ascii_lowercase());
        }
    }
    Ok(())
}

/// The machine's host name (nginx's `gethostname()`), lower-cased.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_ascii_lowercase())
        .unwrap_or_else(|_| "localhost".into())
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
    fn location_kinds() {
        let m = |args: &[&str]| location_matcher(&directive(args)).map_err(|e| e.to_string());
        assert_eq!(m(&["/a"]), Ok(LocationMatch::Prefix("/a".into())));
        assert_eq!(m(&["=", "/a"]), Ok(LocationMatch::Exact("/a".into())));
        assert_eq!(m(&["=/a"]), Ok(LocationMatch::Exact("/a".into())));
        assert_eq!(
            m(&["!", "/a"]),
            Err("[emerg] invalid location modifier \"!\" in t.conf:1".into())
        );
        for refused in [&["~", "x"][..], &["~*", "x"], &["^~", "x"], &["~x"], &["~*x"], &["^~x"]] {
            let e = m(refused).unwrap_err();
            assert!(e.contains("is not supported by corelb"), "{e}");
        }
        assert_eq!(
            m(&["@named"]),
            Err("[emerg] named location \"@named\" is not supported by corelb in t.conf:1".into())
        );
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
