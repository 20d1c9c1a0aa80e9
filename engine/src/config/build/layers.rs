//! The settings http, server and location share (`proxy_*` timeouts, headers and retries; client keepalive, body
//! size, access log), as unset-or-set layers merged child over parent, then filled with nginx's defaults.

use super::error_pages::ErrorPagesLayer;
use super::gzip::{self, GzipLayer};
use super::headers::HeadersLayer;
use super::logs::{LevelLogs, LogState};
use super::static_files::{self, FilesLayer};
use super::temp_path::{self, TempPaths};
use super::vars::{Module, Vars};
use super::{arg, directive_err, flag_slot, msec_slot, num_slot, unset, value, Build};
use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::model::{
    ClientConf, HeaderBuffers, HttpProxyConf, KeepaliveHeader, Lingering, LingeringClose, NextUpstream,
    KEEPALIVE_DISABLE_MSIE6, KEEPALIVE_DISABLE_SAFARI,
};
use crate::config::parser::Directive;
use std::time::Duration;

/// `proxy_next_upstream` values and their bits (nginx's `ngx_http_proxy_next_upstream_masks`).
const NEXT_UPSTREAM: &[(&str, u32)] = &[
    ("error", 1 << 1),
    ("timeout", 1 << 2),
    ("invalid_header", 1 << 3),
    ("non_idempotent", 1 << 4),
    ("http_500", 1 << 5),
    ("http_502", 1 << 6),
    ("http_503", 1 << 7),
    ("http_504", 1 << 8),
    ("http_403", 1 << 9),
    ("http_404", 1 << 10),
    ("http_429", 1 << 11),
    ("updating", 1 << 12),
    ("off", 1 << 13),
];

/// The proxy settings one level sets.
#[derive(Debug, Clone, Default)]
pub struct ProxyLayer {
    http_version_11: Option<bool>,
    set_headers: Option<Vec<(String, KeyTemplate)>>,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    send_timeout: Option<Duration>,
    /// nginx's bitmask; 0 = not set here.
    next_upstream: u32,
    next_upstream_tries: Option<u64>,
    next_upstream_timeout: Option<Duration>,
    pass_request_headers: Option<bool>,
    pass_request_body: Option<bool>,
    set_body: Option<KeyTemplate>,
    buffering: Option<bool>,
    request_buffering: Option<bool>,
    /// `proxy_buffers N SIZE`.
    buffers: Option<(usize, usize)>,
    buffer_size: Option<usize>,
    busy_buffers_size: Option<usize>,
    max_temp_file_size: Option<usize>,
    temp_file_write_size: Option<usize>,
    resolver: Option<crate::config::resolver::ResolverConf>,
    resolver_timeout: Option<Duration>,
}

/// The client settings one level sets.
#[derive(Debug, Clone, Default)]
pub struct ClientLayer {
    keepalive_timeout: Option<Duration>,
    keepalive_header: Option<u64>,
    keepalive_requests: Option<u64>,
    keepalive_time: Option<Duration>,
    keepalive_disable: Option<u8>,
    header_timeout: Option<Duration>,
    max_body_size: Option<u64>,
    body_timeout: Option<Duration>,
    send_timeout: Option<Duration>,
    limit_rate: Option<u64>,
    limit_rate_after: Option<u64>,
    header_buffers: Option<HeaderBuffers>,
    header_buffer_size: Option<usize>,
    pool_size: Option<usize>,
    /// `client_body_buffer_size`: the most of a body held for `$request_body`.
    body_buffer_size: Option<usize>,
    /// `client_body_in_file_only` and `client_body_in_single_buffer` (checked, without effect: corelb writes no
    /// body to a file, and a body it holds is in one buffer).
    body_in_file_only: Option<bool>,
    body_in_single_buffer: Option<bool>,
    access_log: Option<LevelLogs>,
    /// `error_log` lines of the level (several add up; a level with any replaces the inherited ones).
    error_log: Option<Vec<(String, Option<String>)>>,
    /// `open_log_file_cache` (`Some(None)`: `off`).
    open_log_cache: Option<Option<crate::config::log_path::OpenLogCache>>,
    lingering_close: Option<LingeringClose>,
    lingering_time: Option<Duration>,
    lingering_timeout: Option<Duration>,
}

/// Both, for one http, server or location level.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub proxy: ProxyLayer,
    pub client: ClientLayer,
    /// The `*_temp_path` lines of this level (checked, without effect).
    pub temp_paths: TempPaths,
    /// `root`, `index`, `types` and the other file serving settings.
    pub files: FilesLayer,
    /// `add_header`, `expires`, `server_tokens`, `proxy_hide_header`/`proxy_pass_header`, `proxy_redirect`.
    pub headers: HeadersLayer,
    /// `set_real_ip_from`, `real_ip_header`, `real_ip_recursive`.
    pub realip: super::realip::RealIpLayer,
    /// `allow`, `deny`.
    pub access: super::access::AccessLayer,
    /// `limit_req`, `limit_conn` and their settings.
    pub limits: super::limits::LimitsLayer,
    /// `gzip*` and `gzip_static`.
    pub gzip: GzipLayer,
    /// `charset`, `source_charset`, `override_charset`, `charset_types`.
    pub charset: super::charset::CharsetLayer,
    /// `ssl_*` (http and server levels).
    pub tls: super::tls::TlsLayer,
    /// `proxy_ssl_*`.
    pub proxy_tls: super::proxy_tls::ProxyTlsLayer,
    /// `http2` and `http2_*` (http and server levels).
    pub http2: super::http2::Http2Layer,
    /// `error_page`, `recursive_error_pages`, `proxy_intercept_errors`.
    pub error_pages: ErrorPagesLayer,
}

/// What the layers need from the enclosing http block while reading.
pub struct Cx<'a> {
    pub build: &'a mut Build,
    pub vars: &'a mut Vars,
    /// The first `proxy_set_header` value with a bad variable name: nginx reports it when the http block ends.
    pub header_error: &'a mut Option<String>,
    /// The block's log formats and buffered log files.
    pub logs: &'a mut LogState,
}

impl Layers {
    /// Reads `d` if it is one of the shared settings; `Ok(false)` when it is not.
    pub fn directive(&mut self, cx: &mut Cx<'_>, d: &Directive) -> Result<bool, ConfigError> {
        if self.headers.directive(cx.vars, d)?
            || self.realip.directive(cx.build, d)?
            || self.access.directive(cx.build, d)?
            || self.limits.directive(d)?
            || self.error_pages.directive(cx.vars, d)?
        {
            return Ok(true);
        }
        let (p, c) = (&mut self.proxy, &mut self.client);
        match d.name.as_str() {
            "proxy_http_version" => {
                unset(&p.http_version_11, d)?;
                p.http_version_11 = Some(match arg(d, 0) {
                    "1.0" => false,
                    "1.1" => true,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            "proxy_set_header" => {
                let value = match cx.vars.compile(arg(d, 1), Module::Http, &d.span) {
                    Ok(t) => t,
                    Err(e) => {
                        cx.header_error.get_or_insert_with(|| message_of(&e));
                        KeyTemplate::compile("").map_err(|k| ConfigError::invalid(k.to_string(), &d.span))?
                    }
                };
                p.set_headers
                    .get_or_insert_with(Vec::new)
                    .push((arg(d, 0).to_string(), value));
            }
            "resolver" => {
                unset(&p.resolver, d)?;
                p.resolver = Some(crate::config::resolver::parse(d)?);
            }
            "resolver_timeout" => msec_slot(&mut p.resolver_timeout, d)?,
            "proxy_connect_timeout" => msec_slot(&mut p.connect_timeout, d)?,
            "proxy_read_timeout" => msec_slot(&mut p.read_timeout, d)?,
            "proxy_send_timeout" => msec_slot(&mut p.send_timeout, d)?,
            "proxy_next_upstream" => next_upstream(cx.build, &mut p.next_upstream, d)?,
            "proxy_next_upstream_tries" => num_slot(&mut p.next_upstream_tries, d)?,
            "proxy_next_upstream_timeout" => msec_slot(&mut p.next_upstream_timeout, d)?,
            "proxy_pass_request_headers" => flag_slot(&mut p.pass_request_headers, d)?,
            "proxy_pass_request_body" => flag_slot(&mut p.pass_request_body, d)?,
            "proxy_buffering" => flag_slot(&mut p.buffering, d)?,
            "proxy_request_buffering" => flag_slot(&mut p.request_buffering, d)?,
            "proxy_buffers" => {
                unset(&p.buffers, d)?;
                let invalid = || directive_err(d, "invalid value");
                let n = arg(d, 0).parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(invalid)?;
                let size = value::parse_size(arg(d, 1))
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(invalid)?;
                p.buffers = Some((n, size));
            }
            "proxy_buffer_size" => size_slot(&mut p.buffer_size, d)?,
            "proxy_busy_buffers_size" => size_slot(&mut p.busy_buffers_size, d)?,
            "proxy_max_temp_file_size" => size_slot(&mut p.max_temp_file_size, d)?,
            "proxy_temp_file_write_size" => size_slot(&mut p.temp_file_write_size, d)?,
            "proxy_set_body" => {
                unset(&p.set_body, d)?;
                p.set_body = Some(cx.vars.compile(arg(d, 0), Module::Http, &d.span)?);
            }
            "keepalive_timeout" => {
                unset(&c.keepalive_timeout, d)?;
                let timeout = value::parse_msec(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
                // the second value: the `Keep-Alive: timeout=` line, inherited apart from the first (as nginx)
                if let Some(header) = d.args.get(1) {
                    let secs = value::parse_sec(header).ok_or_else(|| directive_err(d, "invalid value"))?;
                    c.keepalive_header = Some(secs.as_secs());
                }
                c.keepalive_timeout = Some(timeout);
            }
            "keepalive_requests" => num_slot(&mut c.keepalive_requests, d)?,
            "keepalive_time" => msec_slot(&mut c.keepalive_time, d)?,
            "keepalive_disable" => {
                unset(&c.keepalive_disable, d)?;
                c.keepalive_disable = Some(keepalive_disable(cx.build, d)?);
            }
            "client_header_timeout" => msec_slot(&mut c.header_timeout, d)?,
            "lingering_close" => {
                unset(&c.lingering_close, d)?;
                c.lingering_close = Some(match arg(d, 0) {
                    "off" => LingeringClose::Off,
                    "on" => LingeringClose::On,
                    "always" => LingeringClose::Always,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            "lingering_time" => msec_slot(&mut c.lingering_time, d)?,
            "lingering_timeout" => msec_slot(&mut c.lingering_timeout, d)?,
            "client_max_body_size" => {
                unset(&c.max_body_size, d)?;
                let size = value::parse_offset(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
                c.max_body_size = Some(size);
            }
            "client_body_timeout" => msec_slot(&mut c.body_timeout, d)?,
            "send_timeout" => msec_slot(&mut c.send_timeout, d)?,
            "limit_rate" | "limit_rate_after" => {
                let slot = if d.name == "limit_rate" {
                    &mut c.limit_rate
                } else {
                    &mut c.limit_rate_after
                };
                unset(slot, d)?;
                *slot = Some(super::limit_rate::size(d)?);
            }
            "large_client_header_buffers" => {
                unset(&c.header_buffers, d)?;
                c.header_buffers = Some(header_buffers(d)?);
            }
            "client_header_buffer_size" => size_slot(&mut c.header_buffer_size, d)?,
            "connection_pool_size" => size_slot(&mut c.pool_size, d)?,
            "client_body_buffer_size" => size_slot(&mut c.body_buffer_size, d)?,
            "client_body_in_file_only" => {
                unset(&c.body_in_file_only, d)?;
                let v = arg(d, 0);
                if !["off", "on", "clean"].iter().any(|k| k.eq_ignore_ascii_case(v)) {
                    return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span));
                }
                c.body_in_file_only = Some(!v.eq_ignore_ascii_case("off"));
            }
            "client_body_in_single_buffer" => flag_slot(&mut c.body_in_single_buffer, d)?,
            // nginx's file reading buffers: corelb reads files through its own (docs/directives.md)
            "output_buffers" => {
                header_buffers(d)?;
            }
            // nginx's per-request memory pool: nothing to size in corelb (docs/directives.md)
            "request_pool_size" => {
                size_slot(&mut None, d)?;
            }
            "access_log" => cx.logs.access_log(&mut c.access_log, d, cx.vars)?,
            "open_log_file_cache" => {
                unset(&c.open_log_cache, d)?;
                let cache = crate::config::log_path::open_log_file_cache(&d.args);
                c.open_log_cache = Some(cache.map_err(|m| ConfigError::invalid(m, &d.span))?);
            }
            "error_log" => {
                let line = super::main_ctx::error_log_args(d, &cx.build.prefix)?;
                c.error_log.get_or_insert_with(Vec::new).push(line);
            }
            name if temp_path::NAMES.contains(&name) => self.temp_paths.directive(d)?,
            name if static_files::NAMES.contains(&name) => self.files.directive(cx.build, cx.vars, d)?,
            name if gzip::NAMES.contains(&name) => self.gzip.directive(cx.build, d)?,
            name if super::charset::NAMES.contains(&name) => self.charset.directive(cx.vars, d)?,
            name if super::tls::NAMES.contains(&name) => self.tls.directive(cx.build, d, cx.vars, Module::Http)?,
            name if super::proxy_tls::NAMES.contains(&name) => self.proxy_tls.directive(cx.build, d)?,
            name if super::http2::NAMES.contains(&name) => self.http2.directive(d)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether this level has its own `proxy_set_header` lines (then it inherits none).
    pub fn sets_headers(&self) -> bool {
        self.proxy.set_headers.is_some()
    }

    /// These settings over `parent`'s (nginx's merge: a level's own value wins, else the parent's).
    pub fn over(&self, parent: &Layers) -> Layers {
        let (p, pp) = (&self.proxy, &parent.proxy);
        let (c, pc) = (&self.client, &parent.client);
        Layers {
            proxy: ProxyLayer {
                http_version_11: p.http_version_11.or(pp.http_version_11),
                set_headers: p.set_headers.clone().or_else(|| pp.set_headers.clone()),
                connect_timeout: p.connect_timeout.or(pp.connect_timeout),
                read_timeout: p.read_timeout.or(pp.read_timeout),
                send_timeout: p.send_timeout.or(pp.send_timeout),
                next_upstream: if p.next_upstream != 0 {
                    p.next_upstream
                } else {
                    pp.next_upstream
                },
                next_upstream_tries: p.next_upstream_tries.or(pp.next_upstream_tries),
                next_upstream_timeout: p.next_upstream_timeout.or(pp.next_upstream_timeout),
                pass_request_headers: p.pass_request_headers.or(pp.pass_request_headers),
                pass_request_body: p.pass_request_body.or(pp.pass_request_body),
                set_body: p.set_body.clone().or_else(|| pp.set_body.clone()),
                buffering: p.buffering.or(pp.buffering),
                request_buffering: p.request_buffering.or(pp.request_buffering),
                buffers: p.buffers.or(pp.buffers),
                buffer_size: p.buffer_size.or(pp.buffer_size),
                busy_buffers_size: p.busy_buffers_size.or(pp.busy_buffers_size),
                max_temp_file_size: p.max_temp_file_size.or(pp.max_temp_file_size),
                temp_file_write_size: p.temp_file_write_size.or(pp.temp_file_write_size),
                resolver: p.resolver.clone().or_else(|| pp.resolver.clone()),
                resolver_timeout: p.resolver_timeout.or(pp.resolver_timeout),
            },
            client: ClientLayer {
                keepalive_timeout: c.keepalive_timeout.or(pc.keepalive_timeout),
                keepalive_header: c.keepalive_header.or(pc.keepalive_header),
                keepalive_requests: c.keepalive_requests.or(pc.keepalive_requests),
                keepalive_time: c.keepalive_time.or(pc.keepalive_time),
                keepalive_disable: c.keepalive_disable.or(pc.keepalive_disable),
                header_timeout: c.header_timeout.or(pc.header_timeout),
                max_body_size: c.max_body_size.or(pc.max_body_size),
                body_timeout: c.body_timeout.or(pc.body_timeout),
                send_timeout: c.send_timeout.or(pc.send_timeout),
                limit_rate: c.limit_rate.or(pc.limit_rate),
                limit_rate_after: c.limit_rate_after.or(pc.limit_rate_after),
                header_buffers: c.header_buffers.or(pc.header_buffers),
                header_buffer_size: c.header_buffer_size.or(pc.header_buffer_size),
                pool_size: c.pool_size.or(pc.pool_size),
                body_buffer_size: c.body_buffer_size.or(pc.body_buffer_size),
                body_in_file_only: c.body_in_file_only.or(pc.body_in_file_only),
                body_in_single_buffer: c.body_in_single_buffer.or(pc.body_in_single_buffer),
                access_log: c.access_log.clone().or_else(|| pc.access_log.clone()),
                error_log: c.error_log.clone().or_else(|| pc.error_log.clone()),
                lingering_close: c.lingering_close.or(pc.lingering_close),
                lingering_time: c.lingering_time.or(pc.lingering_time),
                lingering_timeout: c.lingering_timeout.or(pc.lingering_timeout),
                open_log_cache: c.open_log_cache.or(pc.open_log_cache),
            },
            temp_paths: TempPaths::default(),
            files: self.files.over(&parent.files),
            headers: self.headers.over(&parent.headers),
            realip: self.realip.over(&parent.realip),
            access: self.access.over(&parent.access),
            limits: self.limits.over(&parent.limits),
            gzip: self.gzip.over(&parent.gzip),
            charset: self.charset.over(&parent.charset),
            tls: self.tls.over(&parent.tls),
            proxy_tls: self.proxy_tls.over(&parent.proxy_tls),
            http2: self.http2.over(&parent.http2),
            error_pages: self.error_pages.over(&parent.error_pages),
        }
    }

    /// The proxy settings with nginx's defaults for what no level set, checked as nginx's merge checks the
    /// buffer sizes (`span`: where an error is reported).
    pub fn proxy_conf(&self, span: &crate::config::model::Span) -> Result<HttpProxyConf, ConfigError> {
        let p = &self.proxy;
        let d = HttpProxyConf::default();
        let read_ahead = check_buffers(p).map_err(|m| ConfigError::invalid(m, span))?;
        Ok(HttpProxyConf {
            http_version_11: p.http_version_11.unwrap_or(d.http_version_11),
            set_headers: p.set_headers.clone().unwrap_or(d.set_headers),
            connect_timeout: p.connect_timeout.unwrap_or(d.connect_timeout),
            read_timeout: p.read_timeout.unwrap_or(d.read_timeout),
            send_timeout: p.send_timeout.unwrap_or(d.send_timeout),
            next_upstream: if p.next_upstream == 0 {
                d.next_upstream
            } else {
                next_upstream_of(p.next_upstream)
            },
            next_upstream_tries: p
                .next_upstream_tries
                .map_or(d.next_upstream_tries, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            next_upstream_timeout: p.next_upstream_timeout.unwrap_or(d.next_upstream_timeout),
            pass_request_headers: p.pass_request_headers.unwrap_or(d.pass_request_headers),
            pass_request_body: p.pass_request_body.unwrap_or(d.pass_request_body),
            set_body: p.set_body.clone().or(d.set_body),
            buffering: p.buffering.unwrap_or(d.buffering),
            request_buffering: p.request_buffering.unwrap_or(d.request_buffering),
            read_ahead,
            resolver: p.resolver.clone().map(|mut r| {
                r.timeout = p.resolver_timeout.unwrap_or(r.timeout);
                std::sync::Arc::new(r)
            }),
        })
    }

    /// This level's `resolver` and `resolver_timeout`, for the upstreams' `resolve` lines (the http level's).
    pub fn level_resolver(&self) -> super::upstream::LevelResolver {
        super::upstream::LevelResolver {
            resolver: self.proxy.resolver.clone(),
            timeout: self.proxy.resolver_timeout,
        }
    }

    /// The client settings with nginx's defaults for what no level set.
    pub fn client_conf(&self) -> ClientConf {
        let c = &self.client;
        let d = ClientConf::default();
        ClientConf {
            keepalive_timeout: c.keepalive_timeout.unwrap_or(d.keepalive_timeout),
            keepalive_header: c.keepalive_header.map_or(d.keepalive_header, KeepaliveHeader::new),
            keepalive_requests: c.keepalive_requests.unwrap_or(d.keepalive_requests),
            keepalive_time: c.keepalive_time.unwrap_or(d.keepalive_time),
            keepalive_disable: c.keepalive_disable.unwrap_or(d.keepalive_disable),
            client_header_timeout: c.header_timeout.unwrap_or(d.client_header_timeout),
            client_max_body_size: c.max_body_size.unwrap_or(d.client_max_body_size),
            client_body_timeout: c.body_timeout.unwrap_or(d.client_body_timeout),
            send_timeout: c.send_timeout.unwrap_or(d.send_timeout),
            limit_rate: c.limit_rate.unwrap_or(d.limit_rate),
            limit_rate_after: c.limit_rate_after.unwrap_or(d.limit_rate_after),
            large_client_header_buffers: c.header_buffers.unwrap_or(d.large_client_header_buffers),
            client_header_buffer_size: c.header_buffer_size.unwrap_or(d.client_header_buffer_size),
            connection_pool_size: c.pool_size.unwrap_or(d.connection_pool_size),
            http2_chunk_size: self.http2.conf().chunk_size,
            error_log: c.error_log.clone().unwrap_or_default(),
            client_body_buffer_size: c.body_buffer_size.map_or(d.client_body_buffer_size, |s| s as u64),
            lingering: Lingering {
                close: c.lingering_close.unwrap_or(d.lingering.close),
                time: c.lingering_time.unwrap_or(d.lingering.time),
                timeout: c.lingering_timeout.unwrap_or(d.lingering.timeout),
            },
            access_log: super::logs::with_open_cache(
                c.access_log.as_ref().map(LevelLogs::effective).unwrap_or_default(),
                c.open_log_cache.flatten(),
            ),
        }
    }
}

/// `large_client_header_buffers NUMBER SIZE` (`ngx_conf_set_bufs_slot`: both above zero).
fn header_buffers(d: &Directive) -> Result<HeaderBuffers, ConfigError> {
    let invalid = || directive_err(d, "invalid value");
    let number = value::atoi(arg(d, 0)).filter(|&n| n > 0).ok_or_else(invalid)?;
    let size = value::parse_size(arg(d, 1)).filter(|&n| n > 0).ok_or_else(invalid)?;
    Ok(HeaderBuffers {
        number: usize::try_from(number).map_err(|_| invalid())?,
        size: usize::try_from(size).map_err(|_| invalid())?,
    })
}

/// nginx's check when a server's settings are merged (reported at the end of the http block, `close`): the
/// large header buffers may not be smaller than a connection's memory pool.
pub fn check_header_buffers(client: &ClientConf, close: &crate::config::model::Span) -> Result<(), ConfigError> {
    if client.large_client_header_buffers.size < client.connection_pool_size {
        let msg = "the \"large_client_header_buffers\" size must be equal to or greater than \"connection_pool_size\"";
        return Err(ConfigError::invalid(msg, close));
    }
    Ok(())
}

/// `ngx_conf_set_size_slot`: a size, once.
fn size_slot(slot: &mut Option<usize>, d: &Directive) -> Result<(), ConfigError> {
    unset(slot, d)?;
    let size = value::parse_size(arg(d, 0))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| directive_err(d, "invalid value"))?;
    *slot = Some(size);
    Ok(())
}

/// nginx's page size: the default of `proxy_buffer_size` and of each of the 8 `proxy_buffers`.
const PAGE: usize = 4096;

/// nginx's checks of the buffer sizes at a merge (`ngx_http_proxy_merge_loc_conf`), in its order; the bytes a
/// response is read ahead of the client (`proxy_buffers` in all).
fn check_buffers(p: &ProxyLayer) -> Result<usize, String> {
    let (n, each) = p.buffers.unwrap_or((8, PAGE));
    if n < 2 {
        return Err("there must be at least 2 \"proxy_buffers\"".into());
    }
    let size = p.buffer_size.unwrap_or(PAGE).max(each);
    let of_both = "the maximum of the value of \"proxy_buffer_size\" and one of the \"proxy_buffers\"";
    let busy = p.busy_buffers_size.unwrap_or(2 * size);
    if busy < size {
        return Err(format!(
            "\"proxy_busy_buffers_size\" must be equal to or greater than {of_both}"
        ));
    }
    if busy > (n - 1).saturating_mul(each) {
        return Err(
            "\"proxy_busy_buffers_size\" must be less than the size of all \"proxy_buffers\" minus one buffer".into(),
        );
    }
    if p.temp_file_write_size.unwrap_or(2 * size) < size {
        return Err(format!(
            "\"proxy_temp_file_write_size\" must be equal to or greater than {of_both}"
        ));
    }
    if p.max_temp_file_size.is_some_and(|m| m != 0 && m < size) {
        return Err(format!(
            "\"proxy_max_temp_file_size\" must be equal to zero to disable temporary files usage or must be equal to or greater than {of_both}"
        ));
    }
    Ok(n.saturating_mul(each))
}

/// The message of an error, without its ` in FILE:LINE`.
fn message_of(e: &ConfigError) -> String {
    match e {
        ConfigError::Invalid { msg, .. } | ConfigError::Syntax { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// `ngx_conf_set_bitmask_slot`: values add up (a repeated one is a warning); an unknown one is an error.
fn next_upstream(b: &mut Build, mask: &mut u32, d: &Directive) -> Result<(), ConfigError> {
    for v in &d.args {
        let Some((_, bit)) = NEXT_UPSTREAM.iter().find(|(name, _)| name.eq_ignore_ascii_case(v)) else {
            return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span));
        };
        if *mask & bit != 0 {
            b.warn(&format!("duplicate value \"{v}\""), &d.span);
        }
        *mask |= bit;
    }
    Ok(())
}

/// `keepalive_disable none|msie6|safari...` (`ngx_conf_set_bitmask_slot`; `none` adds no bit).
fn keepalive_disable(b: &mut Build, d: &Directive) -> Result<u8, ConfigError> {
    let mut mask = 0;
    for v in &d.args {
        let bit = match v.to_ascii_lowercase().as_str() {
            "none" => 0,
            "msie6" => KEEPALIVE_DISABLE_MSIE6,
            "safari" => KEEPALIVE_DISABLE_SAFARI,
            _ => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
        };
        if bit != 0 && mask & bit != 0 {
            b.warn(&format!("duplicate value \"{v}\""), &d.span);
        }
        mask |= bit;
    }
    Ok(mask)
}

/// The model's conditions from nginx's bitmask (`off` clears everything; `updating` is a cache condition).
fn next_upstream_of(mask: u32) -> NextUpstream {
    let has = |name: &str| NEXT_UPSTREAM.iter().any(|(n, bit)| *n == name && mask & bit != 0);
    if has("off") {
        return NextUpstream::OFF;
    }
    NextUpstream {
        error: has("error"),
        timeout: has("timeout"),
        invalid_header: has("invalid_header"),
        http_500: has("http_500"),
        http_502: has("http_502"),
        http_503: has("http_503"),
        http_504: has("http_504"),
        http_403: has("http_403"),
        http_404: has("http_404"),
        http_429: has("http_429"),
        non_idempotent: has("non_idempotent"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_upstream_bits_to_model() {
        let all = NEXT_UPSTREAM
            .iter()
            .filter(|(n, _)| *n != "off")
            .fold(0, |m, (_, b)| m | b);
        let n = next_upstream_of(all);
        assert!(n.error && n.timeout && n.invalid_header && n.non_idempotent);
        assert!(n.on_status(500) && n.on_status(502) && n.on_status(503) && n.on_status(504));
        assert!(n.on_status(403) && n.on_status(404) && n.on_status(429));
        assert_eq!(next_upstream_of(all | (1 << 13)), NextUpstream::OFF);
        let only_502 = next_upstream_of(1 << 6);
        assert!(only_502.http_502 && !only_502.error && !only_502.timeout);
    }

    #[test]
    fn children_override_parents_field_by_field() {
        let mut parent = Layers::default();
        parent.proxy.read_timeout = Some(Duration::from_secs(5));
        parent.proxy.connect_timeout = Some(Duration::from_secs(1));
        parent.client.max_body_size = Some(10);
        let mut child = Layers::default();
        child.proxy.read_timeout = Some(Duration::from_secs(9));
        let merged = child.over(&parent);
        let span = crate::config::model::Span::default();
        let conf = merged.proxy_conf(&span).unwrap();
        assert_eq!(conf.read_timeout, Duration::from_secs(9));
        assert_eq!(conf.connect_timeout, Duration::from_secs(1));
        assert_eq!(conf.send_timeout, Duration::from_secs(60));
        assert_eq!(merged.client_conf().client_max_body_size, 10);
        assert_eq!(Layers::default().client_conf(), ClientConf::default());
        assert_eq!(Layers::default().proxy_conf(&span).unwrap(), HttpProxyConf::default());
    }

    #[test]
    fn buffer_sizes_checked_as_nginx_merges_them() {
        let check =
            |buffers: Option<(usize, usize)>, buffer: Option<usize>, busy: Option<usize>, max: Option<usize>| {
                let p = ProxyLayer {
                    buffers,
                    buffer_size: buffer,
                    busy_buffers_size: busy,
                    max_temp_file_size: max,
                    ..ProxyLayer::default()
                };
                check_buffers(&p)
            };
        assert_eq!(check(None, None, None, None), Ok(32768), "8 4k");
        assert_eq!(check(Some((4, 16384)), None, None, Some(0)), Ok(65536));
        assert!(check(Some((1, 4096)), None, None, None)
            .unwrap_err()
            .contains("at least 2"));
        assert!(check(None, None, Some(1024), None)
            .unwrap_err()
            .contains("equal to or greater"));
        assert!(check(Some((2, 4096)), None, None, None)
            .unwrap_err()
            .contains("minus one buffer"));
        assert!(check(None, Some(65536), None, None)
            .unwrap_err()
            .contains("minus one buffer"));
        assert!(check(None, None, None, Some(1024))
            .unwrap_err()
            .contains("must be equal to zero"));
    }
}
