//! The `stream` block: upstreams, servers (`listen`, `proxy_pass NAME|host:port|VALUE-WITH-VARIABLES`) and the proxy settings inherited
//! stream -> server (`proxy_connect_timeout`, `proxy_timeout`, `proxy_next_upstream on|off`, `..._tries`); the
//! access logs and `return` are read by [`super::stream_logs`].

use super::health::{self, CheckDraft, ProbeTimeouts};
use super::listen::StreamListens;
use super::map::{self, Maps};
use super::proxy_tls::ProxyTlsLayer;
use super::stream_logs::{self, StreamLevelLogs, StreamLogState};
use super::tls::TlsLayer;
use super::upstream::Upstreams;
use super::vars::{Module, Vars};
use super::{arg, block_of, directive_err, flag_slot, msec_slot, num_slot, unset, walk, Build, Ctx};
use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::model::{HealthConf, Listen, Span, StreamConf, StreamServer, StreamSize};
use crate::config::parser::Directive;
use crate::config::realip::{RealIpConf, RealIpHeader, TrustedList};
use crate::config::stream_format::StreamFormat;
use crate::config::tls::StreamSsl;
use crate::config::url::{self, UrlOpts};
use std::sync::Arc;
use std::time::Duration;

/// The proxy settings one level sets.
#[derive(Debug, Default, Clone)]
struct StreamLayer {
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
    next_upstream: Option<bool>,
    next_upstream_tries: Option<u64>,
    half_close: Option<bool>,
    /// `set_real_ip_from` (a level with its own lines replaces the inherited list).
    realip: Option<TrustedList>,
    /// `allow`/`deny`.
    access: super::access::AccessLayer,
    /// `limit_conn` and its settings.
    limits: super::limits::LimitsLayer,
    proxy_protocol: Option<bool>,
    proxy_protocol_timeout: Option<Duration>,
    upload_rate: Option<StreamSize>,
    download_rate: Option<StreamSize>,
    requests: Option<u64>,
    responses: Option<u64>,
    /// `ssl_*` (the http block's reader), `ssl_handshake_timeout`, `ssl_alpn`.
    tls: TlsLayer,
    handshake_timeout: Option<Duration>,
    alpn: Option<Vec<Vec<u8>>>,
    /// `ssl_preread`, `preread_buffer_size`, `preread_timeout`.
    preread: Option<bool>,
    preread_buffer_size: Option<u64>,
    preread_timeout: Option<Duration>,
    /// `proxy_ssl` and `proxy_ssl_*` (the http block's reader).
    proxy_ssl: Option<bool>,
    proxy_tls: ProxyTlsLayer,
}

/// A stream server as read.
#[derive(Debug)]
struct ServerDraft {
    span: Span,
    listens: Vec<Listen>,
    names: Vec<String>,
    upstream: Option<usize>,
    /// `proxy_pass` with variables.
    pass: Option<KeyTemplate>,
    /// `return VALUE`, and whether it came after `proxy_pass` (the later one is the handler, as in nginx).
    ret: Option<Arc<StreamFormat>>,
    ret_last: bool,
    logs: Option<StreamLevelLogs>,
    /// `error_log` lines of the server.
    errors: Option<Vec<(String, Option<String>)>>,
    layer: StreamLayer,
    health: Vec<CheckDraft>,
    /// `listen ... xdp=` lines: the server is a VIP of the XDP path (see [`super::xdp`]).
    xdp: Vec<super::xdp::XdpListen>,
}

/// Everything one stream block collects.
#[derive(Debug)]
struct StreamState {
    upstreams: Upstreams,
    servers: Vec<ServerDraft>,
    layer: StreamLayer,
    vars: Vars,
    listens: StreamListens,
    logs: StreamLogState,
    block_logs: Option<StreamLevelLogs>,
    /// `error_log` lines of the stream block.
    block_errors: Option<Vec<(String, Option<String>)>>,
    maps: Maps,
    /// `limit_conn_zone`.
    zones: crate::config::limit::Zones,
    /// The stream level's `resolver` and `resolver_timeout` (for the upstreams' `resolve` lines).
    resolver: super::upstream::LevelResolver,
}

/// Builds the stream block `d`.
pub fn build(b: &mut Build, d: &Directive) -> Result<StreamConf, ConfigError> {
    let mut st = StreamState {
        upstreams: Upstreams::new(Module::Stream),
        servers: Vec::new(),
        layer: StreamLayer::default(),
        vars: Vars::with_maps(map::names(block_of(d)?)),
        listens: StreamListens::default(),
        logs: StreamLogState::with_prefix(b.prefix.clone()),
        block_logs: None,
        block_errors: None,
        maps: Maps::default(),
        zones: crate::config::limit::Zones::default(),
        resolver: super::upstream::LevelResolver::default(),
    };
    walk(block_of(d)?, Ctx::STREAM, |sd| match sd.name.as_str() {
        "upstream" => st.upstreams.block(b, &mut st.vars, sd),
        "server" => st.server(b, sd),
        "log_format" => st.logs.log_format(sd, &mut st.vars),
        "access_log" => st.logs.access_log(&mut st.block_logs, sd, &mut st.vars),
        "error_log" => error_log(&mut st.block_errors, b, sd),
        // the sizes of nginx's server-name hash: corelb matches names without one (checked)
        "server_names_hash_max_size" | "server_names_hash_bucket_size" => super::value::atoi(arg(sd, 0))
            .map(|_| ())
            .ok_or_else(|| super::directive_err(sd, "invalid number")),
        "geo" => {
            let m = super::geo::build(b, sd, Module::Stream, &mut st.vars)?;
            st.maps.maps.push(m);
            Ok(())
        }
        _ if st.maps.directive(sd, Module::Stream, &mut st.vars)? => Ok(()),
        _ if super::limits::zone(&mut st.zones, &mut st.vars, Module::Stream, sd)? => Ok(()),
        _ if st.resolver.directive(sd)? => Ok(()),
        _ => st.layer.directive(b, sd, &mut st.vars),
    })?;
    b.warnings.extend(
        st.listens
            .name_conflicts(|i| st.servers.get(i).map(|s| s.names.clone()).unwrap_or_default()),
    );
    // nginx's checks when the block ends, in its order: servers (merge), upstreams, variables.
    let conf_dir = d.span.file.parent().unwrap_or(std::path::Path::new(""));
    let mut servers = Vec::with_capacity(st.servers.len());
    let mut drafts = Vec::new();
    let mut xdp_drafts = Vec::new();
    for s in st.servers {
        if !s.xdp.is_empty() {
            let (Some(up), None, None) = (s.upstream, &s.pass, &s.ret) else {
                let msg = "a server with \"listen ... xdp=\" needs \"proxy_pass\" to an upstream";
                return Err(ConfigError::invalid(msg, &s.span));
            };
            let timeouts = ProbeTimeouts {
                connect: Duration::from_secs(60),
                read: Duration::from_secs(600),
            };
            drafts.extend(s.health.into_iter().map(|c| (up, timeouts, c)));
            let timeout = s.layer.timeout.or(st.layer.timeout).unwrap_or(Duration::from_secs(600));
            xdp_drafts.extend(s.xdp.into_iter().map(|l| (l, up, timeout)));
            continue;
        }
        let ret = s
            .ret
            .filter(|_| s.ret_last || (s.upstream.is_none() && s.pass.is_none()));
        let upstream = s.upstream.filter(|_| ret.is_none());
        let pass = s.pass.filter(|_| ret.is_none());
        if ret.is_none() && upstream.is_none() && pass.is_none() {
            return Err(ConfigError::invalid("no handler for server", &s.span));
        }
        let layer = s.layer.over(&st.layer);
        let ssl = stream_ssl(&layer, conf_dir, (&s.listens, &s.span), pass.is_some())?;
        let timeouts = ProbeTimeouts {
            connect: layer.connect_timeout.unwrap_or(Duration::from_secs(60)),
            read: layer.timeout.unwrap_or(Duration::from_secs(600)),
        };
        match (upstream, s.health.first()) {
            (Some(up), _) => drafts.extend(s.health.into_iter().map(|c| (up, timeouts, c))),
            (None, Some(_)) if pass.is_some() => {
                let msg = "\"health_check\" with \"proxy_pass\" with variables is not supported by corelb";
                return Err(ConfigError::invalid(msg, &s.span));
            }
            (None, Some(_)) => {
                let msg = "\"health_check\" in a server answering with \"return\" is not supported by corelb";
                return Err(ConfigError::invalid(msg, &s.span));
            }
            (None, None) => {}
        }
        let mut access_log = StreamLevelLogs::effective(s.logs.as_ref(), st.block_logs.as_ref());
        st.logs.settle(&mut access_log);
        servers.push(StreamServer {
            listens: s.listens,
            server_names: s.names,
            upstream,
            pass,
            ret,
            access_log,
            error_log: s.errors.or_else(|| st.block_errors.clone()).unwrap_or_default(),
            connect_timeout: layer.connect_timeout.unwrap_or(Duration::from_secs(60)),
            timeout: layer.timeout.unwrap_or(Duration::from_secs(600)),
            next_upstream: layer.next_upstream.unwrap_or(true),
            upload_rate: layer.upload_rate,
            download_rate: layer.download_rate,
            udp_requests: layer.requests.unwrap_or(0),
            udp_responses: layer.responses,
            next_upstream_tries: layer
                .next_upstream_tries
                .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            half_close: layer.half_close.unwrap_or(false),
            realip: layer.realip.map(|t| {
                Arc::new(RealIpConf {
                    from: t.from,
                    unix: t.unix,
                    header: RealIpHeader::ProxyProtocol,
                    recursive: false,
                })
            }),
            access: layer.access.conf(),
            limits: layer.limits.conf(&st.zones)?,
            proxy_protocol: layer.proxy_protocol.unwrap_or(false),
            proxy_protocol_timeout: layer.proxy_protocol_timeout.unwrap_or(Duration::from_secs(30)),
            ssl,
            span: s.span,
        });
    }
    let upstreams = st.upstreams.finish(&st.resolver)?;
    st.vars.finish()?;
    let mut xdp = Vec::with_capacity(xdp_drafts.len());
    for (l, up, timeout) in xdp_drafts {
        let Some(conf) = upstreams.get(up) else { continue };
        xdp.push(super::xdp::vip(l, (up, conf), timeout)?);
    }
    let checks = drafts
        .into_iter()
        .map(|(upstream, timeouts, c)| c.finish(upstream, &upstreams, &[], timeouts))
        .collect::<Result<_, _>>()?;
    let health = HealthConf {
        checks,
        matches: Vec::new(),
    };
    let mut block_logs = StreamLevelLogs::effective(None, st.block_logs.as_ref());
    st.logs.settle(&mut block_logs);
    Ok(StreamConf {
        upstreams,
        servers,
        health,
        maps: st.maps.maps,
        limit_zones: st.zones,
        block_logs,
        xdp,
    })
}

/// The TLS settings of a stream server (its listens and block's place), merged (`layer`) and loaded relative to
/// `conf_dir`.
fn stream_ssl(
    layer: &StreamLayer,
    conf_dir: &std::path::Path,
    (listens, span): (&[Listen], &Span),
    var_pass: bool,
) -> Result<StreamSsl, ConfigError> {
    let listen_ssl = listens.iter().any(|l| l.ssl);
    let d = StreamSsl::default();
    // a server on an `ssl` address without `ssl` in its own `listen` may still have certificates (or reject)
    let server = layer.tls.stream_conf(conf_dir, span, listen_ssl)?;
    let proxy = match layer.proxy_ssl {
        Some(true) => {
            let conf = layer.proxy_tls.conf(conf_dir, span)?;
            if var_pass && conf.name.is_none() {
                let msg = "\"proxy_ssl\" with \"proxy_pass\" with variables and no \"proxy_ssl_name\" is not \
                           supported by corelb";
                return Err(ConfigError::invalid(msg, span));
            }
            Some(conf)
        }
        _ => None,
    };
    Ok(StreamSsl {
        server,
        handshake_timeout: layer.handshake_timeout.unwrap_or(d.handshake_timeout),
        alpn: layer.alpn.clone().unwrap_or_default(),
        preread: layer.preread.unwrap_or(false),
        preread_buffer_size: layer
            .preread_buffer_size
            .map_or(d.preread_buffer_size, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        preread_timeout: layer.preread_timeout.unwrap_or(d.preread_timeout),
        proxy,
    })
}

/// `ssl_alpn PROTOCOL ...` (nginx: each at most 255 bytes).
fn alpn(d: &Directive) -> Result<Vec<Vec<u8>>, ConfigError> {
    d.args
        .iter()
        .map(|p| match p.len() {
            1..=255 => Ok(p.as_bytes().to_vec()),
            _ => Err(ConfigError::invalid("protocol too long", &d.span)),
        })
        .collect()
}

/// `error_log FILE [LEVEL]` in stream or a stream server (checked as in main; several add up).
fn error_log(slot: &mut Option<Vec<(String, Option<String>)>>, b: &Build, d: &Directive) -> Result<(), ConfigError> {
    let line = super::main_ctx::error_log_args(d, &b.prefix)?;
    slot.get_or_insert_with(Vec::new).push(line);
    Ok(())
}

impl StreamState {
    fn server(&mut self, b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
        let index = self.servers.len();
        let mut s = ServerDraft {
            span: d.span.clone(),
            listens: Vec::new(),
            names: Vec::new(),
            upstream: None,
            pass: None,
            ret: None,
            ret_last: false,
            logs: None,
            errors: None,
            layer: StreamLayer::default(),
            health: Vec::new(),
            xdp: Vec::new(),
        };
        let xdp = super::xdp::check_server(block_of(d)?)?;
        walk(block_of(d)?, Ctx::STREAM_SRV, |sd| match sd.name.as_str() {
            "listen" if xdp => {
                s.xdp.push(super::xdp::listen(sd)?);
                Ok(())
            }
            "listen" => {
                s.listens.extend(self.listens.listen(sd, index)?);
                Ok(())
            }
            "server_name" => super::server_names::directive(b, sd, &mut s.names),
            "proxy_pass" => {
                unset(&s.upstream, sd)?;
                unset(&s.pass, sd)?;
                if arg(sd, 0).contains('$') {
                    // nginx's "complex value": evaluated per session, naming an upstream or an address
                    s.pass = Some(self.vars.compile(arg(sd, 0), Module::Stream, &sd.span)?);
                } else {
                    s.upstream = Some(self.proxy_pass(sd)?);
                }
                s.ret_last = false;
                Ok(())
            }
            "return" => {
                stream_logs::stream_return(&mut s.ret, sd, &mut self.vars)?;
                s.ret_last = true;
                Ok(())
            }
            "access_log" => self.logs.access_log(&mut s.logs, sd, &mut self.vars),
            "error_log" => error_log(&mut s.errors, b, sd),
            "health_check" => {
                s.health.push(health::health_check(sd, Module::Stream)?);
                Ok(())
            }
            _ => s.layer.directive(b, sd, &mut self.vars),
        })?;
        if s.listens.is_empty() && s.xdp.is_empty() {
            return Err(ConfigError::invalid("no \"listen\" is defined for server", &d.span));
        }
        self.servers.push(s);
        Ok(())
    }

    /// `proxy_pass NAME` (an upstream of this block) or `proxy_pass host:port` (an implicit one).
    fn proxy_pass(&mut self, d: &Directive) -> Result<usize, ConfigError> {
        let text = arg(d, 0);
        let opts = UrlOpts {
            no_resolve: true,
            ..UrlOpts::default()
        };
        let u = url::parse_url(text, opts)
            .map_err(|e| ConfigError::invalid(format!("{e} in upstream \"{text}\""), &d.span))?;
        self.upstreams.reference(&u, text, text, &d.span)
    }
}

impl StreamLayer {
    fn directive(&mut self, b: &mut Build, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
        if self.access.directive(b, d)? || self.limits.directive(d)? {
            return Ok(());
        }
        let name = d.name.as_str();
        if super::tls::NAMES.contains(&name) {
            return self.tls.directive(b, d, vars, Module::Stream);
        }
        if super::proxy_tls::NAMES.contains(&name) {
            return self.proxy_tls.directive(b, d);
        }
        match name {
            "ssl_handshake_timeout" => msec_slot(&mut self.handshake_timeout, d),
            "ssl_alpn" => {
                unset(&self.alpn, d)?;
                self.alpn = Some(alpn(d)?);
                Ok(())
            }
            "ssl_preread" => flag_slot(&mut self.preread, d),
            "preread_timeout" => msec_slot(&mut self.preread_timeout, d),
            "preread_buffer_size" => {
                unset(&self.preread_buffer_size, d)?;
                let n = super::value::parse_size(arg(d, 0)).ok_or_else(|| super::directive_err(d, "invalid value"))?;
                self.preread_buffer_size = Some(n);
                Ok(())
            }
            "proxy_ssl" => flag_slot(&mut self.proxy_ssl, d),
            "set_real_ip_from" => {
                super::realip::set_real_ip_from(self.realip.get_or_insert_with(TrustedList::default), b, d)
            }
            "proxy_protocol" => {
                unset(&self.proxy_protocol, d)?;
                self.proxy_protocol = Some(match arg(d, 0) {
                    "on" => true,
                    "off" => false,
                    "v2" => {
                        let msg = "\"proxy_protocol v2\" towards upstreams is not supported by corelb";
                        return Err(ConfigError::invalid(msg, &d.span));
                    }
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
                Ok(())
            }
            "proxy_protocol_timeout" => msec_slot(&mut self.proxy_protocol_timeout, d),
            "proxy_connect_timeout" => msec_slot(&mut self.connect_timeout, d),
            "proxy_timeout" => msec_slot(&mut self.timeout, d),
            "proxy_next_upstream" => flag_slot(&mut self.next_upstream, d),
            "proxy_next_upstream_tries" => num_slot(&mut self.next_upstream_tries, d),
            "proxy_half_close" => flag_slot(&mut self.half_close, d),
            "proxy_upload_rate" => size_value(&mut self.upload_rate, d, vars),
            "proxy_download_rate" => size_value(&mut self.download_rate, d, vars),
            "proxy_requests" => num_slot(&mut self.requests, d),
            "proxy_responses" => num_slot(&mut self.responses, d),
            _ => Err(ConfigError::NotAllowedHere {
                name: d.name.clone(),
                at: d.span.clone(),
            }),
        }
    }

    /// These settings over `parent`'s.
    fn over(&self, parent: &StreamLayer) -> StreamLayer {
        StreamLayer {
            connect_timeout: self.connect_timeout.or(parent.connect_timeout),
            timeout: self.timeout.or(parent.timeout),
            next_upstream: self.next_upstream.or(parent.next_upstream),
            next_upstream_tries: self.next_upstream_tries.or(parent.next_upstream_tries),
            half_close: self.half_close.or(parent.half_close),
            realip: self.realip.clone().or_else(|| parent.realip.clone()),
            access: self.access.over(&parent.access),
            limits: self.limits.over(&parent.limits),
            proxy_protocol: self.proxy_protocol.or(parent.proxy_protocol),
            proxy_protocol_timeout: self.proxy_protocol_timeout.or(parent.proxy_protocol_timeout),
            upload_rate: self.upload_rate.clone().or_else(|| parent.upload_rate.clone()),
            download_rate: self.download_rate.clone().or_else(|| parent.download_rate.clone()),
            requests: self.requests.or(parent.requests),
            responses: self.responses.or(parent.responses),
            tls: self.tls.over(&parent.tls),
            handshake_timeout: self.handshake_timeout.or(parent.handshake_timeout),
            alpn: self.alpn.clone().or_else(|| parent.alpn.clone()),
            preread: self.preread.or(parent.preread),
            preread_buffer_size: self.preread_buffer_size.or(parent.preread_buffer_size),
            preread_timeout: self.preread_timeout.or(parent.preread_timeout),
            proxy_ssl: self.proxy_ssl.or(parent.proxy_ssl),
            proxy_tls: self.proxy_tls.over(&parent.proxy_tls),
        }
    }
}

/// A size that may take variables (`proxy_upload_rate`, `proxy_download_rate`): nginx's `is duplicate`, and
/// `invalid value` for a constant that is not a size.
fn size_value(slot: &mut Option<StreamSize>, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
    unset(slot, d)?;
    let text = arg(d, 0);
    *slot = Some(if text.contains('$') {
        let maps = |n: &str| vars.map_index(n);
        let compiled = StreamFormat::value_with(&d.name, text, &maps);
        StreamSize::Value(Arc::new(stream_logs::noted(compiled, vars, &d.span)?))
    } else {
        StreamSize::Fixed(crate::config::value::parse_size(text).ok_or_else(|| directive_err(d, "invalid value"))?)
    });
    Ok(())
}
