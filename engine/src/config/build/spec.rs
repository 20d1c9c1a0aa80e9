//! The directive table: where nginx allows each directive corelb knows, how many arguments it takes, whether it
//! opens a block, and where corelb implements it; plus the well-known nginx directives corelb refuses by name.
//! [`check`] applies nginx's `ngx_conf_handler` checks in its order.

use super::Ctx;
use crate::config::error::ConfigError;
use crate::config::parser::Directive;

/// How many arguments a directive takes (nginx's `NGX_CONF_NOARGS`, `TAKE1`, `TAKE12`, `1MORE`, `FLAG`...).
#[derive(Debug, Clone, Copy)]
pub struct Args {
    pub min: usize,
    pub max: usize,
}

const NOARGS: Args = Args { min: 0, max: 0 };
const TAKE1: Args = Args { min: 1, max: 1 };
const TAKE2: Args = Args { min: 2, max: 2 };
const TAKE12: Args = Args { min: 1, max: 2 };
const TAKE123: Args = Args { min: 1, max: 3 };
const TAKE23: Args = Args { min: 2, max: 3 };
const TAKE34: Args = Args { min: 3, max: 4 };
const NOARGS_TAKE1: Args = Args { min: 0, max: 1 };
const NOARGS_TAKE12: Args = Args { min: 0, max: 2 };
const TAKE1234: Args = Args { min: 1, max: 4 };
const ANY: Args = Args {
    min: 0,
    max: usize::MAX,
};
const MORE1: Args = Args {
    min: 1,
    max: usize::MAX,
};
const MORE2: Args = Args {
    min: 2,
    max: usize::MAX,
};

/// One directive of one nginx module.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    /// Where nginx allows it.
    pub nginx: Ctx,
    /// Where corelb implements it (a subset of `nginx`).
    pub corelb: Ctx,
    pub args: Args,
    pub block: bool,
}

const fn spec(name: &'static str, nginx: Ctx, corelb: Ctx, args: Args, block: bool) -> Spec {
    Spec {
        name,
        nginx,
        corelb,
        args,
        block,
    }
}

const fn both(name: &'static str, ctx: Ctx, args: Args) -> Spec {
    spec(name, ctx, ctx, args, false)
}

const HTTP_MS: Ctx = Ctx::HTTP.or(Ctx::HTTP_SRV);
const HTTP_MSL: Ctx = Ctx::HTTP.or(Ctx::HTTP_SRV).or(Ctx::HTTP_LOC);
const STREAM_MS: Ctx = Ctx::STREAM.or(Ctx::STREAM_SRV);
const UPS: Ctx = Ctx::HTTP_UPS.or(Ctx::STREAM_UPS);
/// Where nginx allows the rewrite module's `return`, `break`, `rewrite` and `set`.
const REWRITE: Ctx = Ctx::HTTP_SRV.or(Ctx::HTTP_SIF).or(Ctx::HTTP_LOC).or(Ctx::HTTP_LIF);

/// Every directive corelb reads, with nginx's contexts. Names may repeat (one entry per nginx module).
pub const SPECS: &[Spec] = &[
    both("worker_processes", Ctx::MAIN, TAKE1),
    spec(
        "error_log",
        Ctx::MAIN.or(HTTP_MSL).or(STREAM_MS),
        Ctx::MAIN.or(HTTP_MSL).or(STREAM_MS),
        MORE1,
        false,
    ),
    both("pid", Ctx::MAIN, TAKE1),
    both("daemon", Ctx::MAIN, TAKE1),
    both("load_module", Ctx::MAIN, TAKE1),
    both("worker_runtime", Ctx::MAIN, TAKE1),
    spec("events", Ctx::MAIN, Ctx::MAIN, NOARGS, true),
    spec("http", Ctx::MAIN, Ctx::MAIN, NOARGS, true),
    spec("stream", Ctx::MAIN, Ctx::MAIN, NOARGS, true),
    both("worker_connections", Ctx::EVENTS, TAKE1),
    both("use", Ctx::EVENTS, TAKE1),
    both("multi_accept", Ctx::EVENTS, TAKE1),
    both("accept_mutex", Ctx::EVENTS, TAKE1),
    both("accept_mutex_delay", Ctx::EVENTS, TAKE1),
    both("user", Ctx::MAIN, TAKE12),
    both("worker_rlimit_nofile", Ctx::MAIN, TAKE1),
    both("pcre_jit", Ctx::MAIN, TAKE1),
    both("worker_cpu_affinity", Ctx::MAIN, MORE1),
    spec(
        "upstream",
        Ctx::HTTP.or(Ctx::STREAM),
        Ctx::HTTP.or(Ctx::STREAM),
        TAKE1,
        true,
    ),
    spec(
        "server",
        Ctx::HTTP.or(Ctx::STREAM),
        Ctx::HTTP.or(Ctx::STREAM),
        NOARGS,
        true,
    ),
    both("server", UPS, MORE1),
    both("listen", Ctx::HTTP_SRV.or(Ctx::STREAM_SRV), MORE1),
    // stream virtual servers: nginx 1.25.5+
    both("server_name", Ctx::HTTP_SRV.or(Ctx::STREAM_SRV), MORE1),
    spec(
        "location",
        Ctx::HTTP_SRV.or(Ctx::HTTP_LOC),
        Ctx::HTTP_SRV.or(Ctx::HTTP_LOC),
        TAKE12,
        true,
    ),
    spec(
        "proxy_pass",
        Ctx::HTTP_LOC.or(Ctx::HTTP_LIF).or(Ctx::STREAM_SRV),
        Ctx::HTTP_LOC.or(Ctx::STREAM_SRV),
        TAKE1,
        false,
    ),
    both("proxy_http_version", HTTP_MSL, TAKE1),
    // nginx 1.27.3+ has them in `upstream` too (re-resolved servers); a stream server's (for `proxy_pass` with
    // variables) is refused by name
    spec(
        "resolver",
        HTTP_MSL.or(STREAM_MS).or(UPS),
        HTTP_MSL.or(Ctx::STREAM).or(UPS),
        MORE1,
        false,
    ),
    spec(
        "resolver_timeout",
        HTTP_MSL.or(STREAM_MS).or(UPS),
        HTTP_MSL.or(Ctx::STREAM).or(UPS),
        TAKE1,
        false,
    ),
    both("proxy_set_header", HTTP_MSL, TAKE2),
    both("proxy_connect_timeout", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("proxy_read_timeout", HTTP_MSL, TAKE1),
    both("proxy_send_timeout", HTTP_MSL, TAKE1),
    both("proxy_next_upstream", HTTP_MSL, MORE1),
    both("proxy_next_upstream", STREAM_MS, TAKE1),
    both("proxy_next_upstream_tries", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("proxy_next_upstream_timeout", HTTP_MSL, TAKE1),
    spec("proxy_next_upstream_timeout", STREAM_MS, Ctx::NONE, TAKE1, false),
    both("proxy_timeout", STREAM_MS, TAKE1),
    both("proxy_half_close", STREAM_MS, TAKE1),
    both("proxy_upload_rate", STREAM_MS, TAKE1),
    both("proxy_requests", STREAM_MS, TAKE1),
    both("proxy_responses", STREAM_MS, TAKE1),
    both("proxy_download_rate", STREAM_MS, TAKE1),
    both("proxy_pass_request_headers", HTTP_MSL, TAKE1),
    both("proxy_pass_request_body", HTTP_MSL, TAKE1),
    both("proxy_set_body", HTTP_MSL, TAKE1),
    both("proxy_buffering", HTTP_MSL, TAKE1),
    both("proxy_request_buffering", HTTP_MSL, TAKE1),
    both("proxy_buffers", HTTP_MSL, TAKE2),
    both("proxy_buffer_size", HTTP_MSL, TAKE1),
    both("proxy_busy_buffers_size", HTTP_MSL, TAKE1),
    both("proxy_max_temp_file_size", HTTP_MSL, TAKE1),
    both("proxy_temp_file_write_size", HTTP_MSL, TAKE1),
    both("client_body_buffer_size", HTTP_MSL, TAKE1),
    both("client_body_in_file_only", HTTP_MSL, TAKE1),
    both("client_body_in_single_buffer", HTTP_MSL, TAKE1),
    both("return", REWRITE, TAKE12),
    both("break", REWRITE, NOARGS),
    both("rewrite", REWRITE, Args { min: 2, max: 3 }),
    both("set", REWRITE, TAKE2),
    // ngx_stream_set_module
    spec("set", Ctx::STREAM_SRV, Ctx::NONE, TAKE2, false),
    spec("limit_rate", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    spec("limit_rate_after", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    both("uninitialized_variable_warn", HTTP_MSL.or(REWRITE), TAKE1),
    spec(
        "if",
        Ctx::HTTP_SRV.or(Ctx::HTTP_LOC),
        Ctx::HTTP_SRV.or(Ctx::HTTP_LOC),
        MORE1,
        true,
    ),
    spec("map", Ctx::HTTP.or(Ctx::STREAM), Ctx::HTTP.or(Ctx::STREAM), TAKE2, true),
    spec(
        "geo",
        Ctx::HTTP.or(Ctx::STREAM),
        Ctx::HTTP.or(Ctx::STREAM),
        TAKE12,
        true,
    ),
    both("map_hash_max_size", Ctx::HTTP.or(Ctx::STREAM), TAKE1),
    both("map_hash_bucket_size", Ctx::HTTP.or(Ctx::STREAM), TAKE1),
    // nginx Plus's ngx_http_api_module; `metrics` is corelb's own (Prometheus).
    both("api", Ctx::HTTP_LOC, NOARGS_TAKE1),
    both("metrics", Ctx::HTTP_LOC, NOARGS),
    // ngx_http_stub_status_module; nginx also takes it in a server (for requests no location matches).
    spec(
        "stub_status",
        Ctx::HTTP_SRV.or(Ctx::HTTP_LOC),
        Ctx::HTTP_LOC,
        NOARGS_TAKE1,
        false,
    ),
    both("return", Ctx::STREAM_SRV, TAKE1),
    both("keepalive_timeout", HTTP_MSL, TAKE12),
    both("keepalive_timeout", Ctx::HTTP_UPS, TAKE1),
    both("keepalive_requests", HTTP_MSL.or(Ctx::HTTP_UPS), TAKE1),
    both("keepalive_time", HTTP_MSL.or(Ctx::HTTP_UPS), TAKE1),
    both("keepalive_disable", HTTP_MSL, TAKE12),
    both("client_header_timeout", Ctx::HTTP.or(Ctx::HTTP_SRV), TAKE1),
    both("client_max_body_size", HTTP_MSL, TAKE1),
    both("client_body_timeout", HTTP_MSL, TAKE1),
    both("send_timeout", HTTP_MSL, TAKE1),
    both("large_client_header_buffers", Ctx::HTTP.or(Ctx::HTTP_SRV), TAKE2),
    both("client_header_buffer_size", Ctx::HTTP.or(Ctx::HTTP_SRV), TAKE1),
    both("connection_pool_size", Ctx::HTTP.or(Ctx::HTTP_SRV), TAKE1),
    both("request_pool_size", Ctx::HTTP.or(Ctx::HTTP_SRV), TAKE1),
    spec("access_log", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, MORE1, false),
    both("log_format", Ctx::HTTP, MORE2),
    both("open_log_file_cache", HTTP_MSL, TAKE1234),
    // headers filter, and the proxy module's response headers
    both("add_header", HTTP_MSL, TAKE23),
    both("expires", HTTP_MSL, TAKE12),
    both("server_tokens", HTTP_MSL, TAKE1),
    both("proxy_hide_header", HTTP_MSL, TAKE1),
    both("proxy_pass_header", HTTP_MSL, TAKE1),
    both("proxy_redirect", HTTP_MSL, TAKE12),
    both("proxy_cookie_domain", HTTP_MSL, TAKE12),
    both("proxy_cookie_path", HTTP_MSL, TAKE12),
    both("absolute_redirect", HTTP_MSL, TAKE1),
    both("server_name_in_redirect", HTTP_MSL, TAKE1),
    both("port_in_redirect", HTTP_MSL, TAKE1),
    both("msie_padding", HTTP_MSL, TAKE1),
    both("msie_refresh", HTTP_MSL, TAKE1),
    // error pages (config/build/error_pages.rs); nginx's `if` in a location takes `error_page` too
    spec("error_page", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, MORE2, false),
    both("recursive_error_pages", HTTP_MSL, TAKE1),
    both("proxy_intercept_errors", HTTP_MSL, TAKE1),
    both("proxy_ignore_headers", HTTP_MSL, MORE1),
    // Checked, without effect: corelb writes no temporary files.
    both("client_body_temp_path", HTTP_MSL, TAKE1234),
    both("proxy_temp_path", HTTP_MSL, TAKE1234),
    both("fastcgi_temp_path", HTTP_MSL, TAKE1234),
    both("uwsgi_temp_path", HTTP_MSL, TAKE1234),
    both("scgi_temp_path", HTTP_MSL, TAKE1234),
    // Files: the core, static and index modules (config/build/static_files.rs).
    // ssl (http and server; `listen ... ssl` in listen.rs)
    spec(
        "proxy_ssl_verify",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_verify_depth",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_trusted_certificate",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_name",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_server_name",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_certificate",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_certificate_key",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_protocols",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        MORE1,
        false,
    ),
    spec(
        "proxy_ssl_ciphers",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "proxy_ssl_session_reuse",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "ssl_verify_client",
        HTTP_MS.or(STREAM_MS),
        HTTP_MS.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "ssl_client_certificate",
        HTTP_MS.or(STREAM_MS),
        HTTP_MS.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "ssl_trusted_certificate",
        HTTP_MS.or(STREAM_MS),
        HTTP_MS.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec(
        "ssl_verify_depth",
        HTTP_MS.or(STREAM_MS),
        HTTP_MS.or(STREAM_MS),
        TAKE1,
        false,
    ),
    spec("ssl_crl", HTTP_MS.or(STREAM_MS), HTTP_MS.or(STREAM_MS), TAKE1, false),
    spec(
        "proxy_ssl_crl",
        HTTP_MSL.or(STREAM_MS),
        HTTP_MSL.or(STREAM_MS),
        TAKE1,
        false,
    ),
    both("ssl_certificate", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_certificate_key", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_protocols", HTTP_MS.or(STREAM_MS), MORE1),
    both("ssl_ciphers", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_prefer_server_ciphers", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_ecdh_curve", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_session_cache", HTTP_MS.or(STREAM_MS), TAKE12),
    both("ssl_session_timeout", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_session_tickets", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_dhparam", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_reject_handshake", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_password_file", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_stapling", HTTP_MS.or(STREAM_MS), TAKE1),
    both("ssl_stapling_verify", HTTP_MS.or(STREAM_MS), TAKE1),
    // stream ssl and ssl_preread (config/build/stream.rs)
    both("ssl_handshake_timeout", STREAM_MS, TAKE1),
    both("ssl_alpn", STREAM_MS, MORE1),
    both("proxy_ssl", STREAM_MS, TAKE1),
    both("proxy_ssl_password_file", HTTP_MSL.or(STREAM_MS), TAKE1),
    spec(
        "proxy_ssl_conf_command",
        HTTP_MSL.or(STREAM_MS),
        Ctx::NONE,
        TAKE2,
        false,
    ),
    both("ssl_preread", STREAM_MS, TAKE1),
    both("preread_buffer_size", STREAM_MS, TAKE1),
    both("preread_timeout", STREAM_MS, TAKE1),
    // checked, without effect: corelb reads files through its own buffer (docs/directives.md)
    both("output_buffers", HTTP_MSL, TAKE2),
    both("lingering_close", HTTP_MSL, TAKE1),
    both("lingering_time", HTTP_MSL, TAKE1),
    both("lingering_timeout", HTTP_MSL, TAKE1),
    // http2 (nginx's ngx_http_v2_module)
    both("http2", HTTP_MS, TAKE1),
    both("http2_max_concurrent_streams", HTTP_MS, TAKE1),
    both("http2_chunk_size", HTTP_MSL, TAKE1),
    both("http2_recv_buffer_size", Ctx::HTTP, TAKE1),
    both("http2_body_preread_size", HTTP_MS, TAKE1),
    both("http2_pool_size", HTTP_MS, TAKE1),
    both("http2_streams_index_size", HTTP_MS, TAKE1),
    // gzip filter and gzip_static (in `if`, nginx takes `gzip` too: corelb does not)
    spec("gzip", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    both("gzip_types", HTTP_MSL, MORE1),
    both("gzip_min_length", HTTP_MSL, TAKE1),
    both("gzip_comp_level", HTTP_MSL, TAKE1),
    both("gzip_buffers", HTTP_MSL, TAKE2),
    both("gzip_vary", HTTP_MSL, TAKE1),
    both("gzip_proxied", HTTP_MSL, MORE1),
    both("gzip_http_version", HTTP_MSL, TAKE1),
    both("gzip_disable", HTTP_MSL, MORE1),
    both("gzip_static", HTTP_MSL, TAKE1),
    // charset filter (in `if`, nginx takes `charset`, `source_charset`, `override_charset`: corelb does not)
    spec("charset", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    spec("source_charset", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    spec("override_charset", HTTP_MSL.or(Ctx::HTTP_LIF), HTTP_MSL, TAKE1, false),
    both("charset_types", HTTP_MSL, MORE1),
    spec("charset_map", Ctx::HTTP, Ctx::HTTP, TAKE2, true),
    both("root", HTTP_MSL, TAKE1),
    both("alias", Ctx::HTTP_LOC, TAKE1),
    both("try_files", Ctx::HTTP_SRV.or(Ctx::HTTP_LOC), MORE2),
    both("if_modified_since", HTTP_MSL, TAKE1),
    both("max_ranges", HTTP_MSL, TAKE1),
    both("index", HTTP_MSL, MORE1),
    spec("types", HTTP_MSL, HTTP_MSL, NOARGS, true),
    both("default_type", HTTP_MSL, TAKE1),
    both("etag", HTTP_MSL, TAKE1),
    both("log_not_found", HTTP_MSL, TAKE1),
    both("sendfile", HTTP_MSL, TAKE1),
    both("sendfile_max_chunk", HTTP_MSL, TAKE1),
    both("tcp_nopush", HTTP_MSL, TAKE1),
    both("tcp_nodelay", HTTP_MSL, TAKE1),
    both("open_file_cache", HTTP_MSL, TAKE12),
    both("open_file_cache_valid", HTTP_MSL, TAKE1),
    both("open_file_cache_min_uses", HTTP_MSL, TAKE1),
    both("open_file_cache_errors", HTTP_MSL, TAKE1),
    both("types_hash_max_size", HTTP_MSL, TAKE1),
    both("server_names_hash_max_size", Ctx::HTTP.or(Ctx::STREAM), TAKE1),
    both("server_names_hash_bucket_size", Ctx::HTTP.or(Ctx::STREAM), TAKE1),
    both("types_hash_bucket_size", HTTP_MSL, TAKE1),
    both("access_log", STREAM_MS, MORE1),
    both("log_format", Ctx::STREAM, MORE2),
    // realip (http and stream) and the PROXY protocol (config/build/realip.rs)
    both("set_real_ip_from", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("real_ip_header", HTTP_MSL, TAKE1),
    both("real_ip_recursive", HTTP_MSL, TAKE1),
    both("proxy_protocol", STREAM_MS, TAKE1),
    // access (http and stream: config/build/access.rs)
    both("allow", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("deny", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("proxy_protocol_timeout", STREAM_MS, TAKE1),
    // limits (http and stream: config/build/limits.rs); `sync` (nginx Plus) is refused by name
    both("limit_req_zone", Ctx::HTTP, TAKE34),
    both("limit_req", HTTP_MSL, TAKE123),
    both("limit_req_status", HTTP_MSL, TAKE1),
    both("limit_req_log_level", HTTP_MSL, TAKE1),
    both("limit_req_dry_run", HTTP_MSL, TAKE1),
    both("limit_conn_zone", Ctx::HTTP.or(Ctx::STREAM), TAKE2),
    both("limit_conn", HTTP_MSL.or(STREAM_MS), TAKE2),
    both("limit_conn_status", HTTP_MSL, TAKE1),
    both("limit_conn_log_level", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("limit_conn_dry_run", HTTP_MSL.or(STREAM_MS), TAKE1),
    both("least_conn", UPS, NOARGS),
    both("ip_hash", Ctx::HTTP_UPS, NOARGS),
    both("fair", Ctx::HTTP_UPS, ANY),
    both("hash", UPS, TAKE123),
    both("random", UPS, NOARGS_TAKE12),
    both("least_time", UPS, TAKE12),
    both("keepalive", Ctx::HTTP_UPS, TAKE1),
    both("zone", UPS, TAKE12),
    both("sticky", Ctx::HTTP_UPS, MORE2),
    both("queue", Ctx::HTTP_UPS, TAKE12),
    both("state", UPS, TAKE1),
    // corelb's agent weights (config/build/agent.rs)
    both("load_weight", UPS, MORE1),
    both("endpoint_load_metrics", Ctx::HTTP_UPS, TAKE12),
    // nginx Plus active health checks
    both("health_check", Ctx::HTTP_LOC.or(Ctx::STREAM_SRV), ANY),
    spec("match", Ctx::HTTP, Ctx::HTTP, TAKE1, true),
    spec("match", Ctx::STREAM, Ctx::NONE, TAKE1, true),
    both("status", Ctx::HTTP_MATCH, MORE1),
    both("header", Ctx::HTTP_MATCH, MORE1),
    both("body", Ctx::HTTP_MATCH, TAKE2),
    spec("require", Ctx::HTTP_MATCH, Ctx::NONE, MORE1, false),
];

/// Well-known nginx directives corelb does not implement: refused by name, never ignored.
pub const UNSUPPORTED: &[&str] = &[
    // core, events
    "worker_rlimit_core",
    "worker_priority",
    "worker_shutdown_timeout",
    "working_directory",
    "env",
    "lock_file",
    "master_process",
    "timer_resolution",
    "thread_pool",
    "ssl_engine",
    "debug_points",
    "debug_connection",
    "worker_aio_requests",
    "mail",
    // http core
    "autoindex",
    "internal",
    "limit_except",
    "reset_timedout_connection",
    "variables_hash_max_size",
    "variables_hash_bucket_size",
    "underscores_in_headers",
    "ignore_invalid_headers",
    "merge_slashes",
    "aio",
    "directio",
    "postpone_output",
    "chunked_transfer_encoding",
    "log_subrequest",
    "satisfy",
    "add_trailer",
    "auth_basic",
    "auth_basic_user_file",
    "auth_request",
    "sub_filter",
    "ssi",
    // rewrite, map, geo, limits, realip
    "rewrite_log",
    "split_clients",
    // gzip
    "gzip_window",
    "gzip_hash",
    "gzip_no_buffer",
    "postpone_gzipping",
    "gunzip",
    "gunzip_buffers",
    // ssl
    "ssl",
    "ssl_session_ticket_key",
    "ssl_buffer_size",
    "ssl_early_data",
    "ssl_conf_command",
    "ssl_ocsp",
    "ssl_ocsp_cache",
    "ssl_ocsp_responder",
    "ssl_stapling_file",
    "ssl_stapling_responder",
    "ssl_certificate_cache",
    "ssl_key_log",
    "ssl_certificate_compression",
    "ssl_ech_file",
    // proxy
    "proxy_cache",
    "proxy_cache_path",
    "proxy_cache_key",
    "proxy_cache_valid",
    "proxy_cache_bypass",
    "proxy_no_cache",
    "proxy_cache_use_stale",
    "proxy_cache_lock",
    "proxy_cache_methods",
    "proxy_method",
    "proxy_bind",
    "proxy_cookie_flags",
    "proxy_headers_hash_max_size",
    "proxy_headers_hash_bucket_size",
    "proxy_ignore_client_abort",
    "proxy_socket_keepalive",
    "proxy_limit_rate",
    "proxy_ssl_certificate_cache",
    "proxy_ssl_alpn",
    "proxy_buffer",
    // other upstream protocols
    "fastcgi_pass",
    "fastcgi_param",
    "fastcgi_index",
    "uwsgi_pass",
    "uwsgi_param",
    "scgi_pass",
    "scgi_param",
    "grpc_pass",
    "memcached_pass",
    // upstream extras (newer or commercial nginx)
    "ntlm",
];

/// nginx's `ngx_conf_handler` checks for `d` in `ctx`: known name, allowed here, `;` vs `{`, argument count. A
/// directive nginx allows here but corelb does not implement, or one from [`UNSUPPORTED`], is refused by name.
pub fn check(d: &Directive, ctx: Ctx) -> Result<(), ConfigError> {
    let at = || d.span.clone();
    let mut known = false;
    for s in SPECS.iter().filter(|s| s.name == d.name) {
        known = true;
        if !s.nginx.has(ctx) {
            continue;
        }
        if !s.corelb.has(ctx) {
            return Err(ConfigError::Unsupported {
                name: d.name.clone(),
                at: at(),
            });
        }
        if !s.block && d.block.is_some() {
            let msg = format!("directive \"{}\" is not terminated by \";\"", d.name);
            return Err(ConfigError::invalid(msg, &d.span));
        }
        if s.block && d.block.is_none() {
            let msg = format!("directive \"{}\" has no opening \"{{\"", d.name);
            return Err(ConfigError::invalid(msg, &d.span));
        }
        if !(s.args.min..=s.args.max).contains(&d.args.len()) {
            let msg = format!("invalid number of arguments in \"{}\" directive", d.name);
            return Err(ConfigError::invalid(msg, &d.span));
        }
        return Ok(());
    }
    if known {
        return Err(ConfigError::NotAllowedHere {
            name: d.name.clone(),
            at: at(),
        });
    }
    if UNSUPPORTED.contains(&d.name.as_str()) {
        return Err(ConfigError::Unsupported {
            name: d.name.clone(),
            at: at(),
        });
    }
    Err(ConfigError::UnknownDirective {
        name: d.name.clone(),
        at: at(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corelb_contexts_are_within_nginx_ones() {
        for s in SPECS {
            assert_eq!(s.corelb.or(s.nginx), s.nginx, "{}", s.name);
        }
    }

    #[test]
    fn refused_names_are_not_implemented_ones() {
        for name in UNSUPPORTED {
            assert!(!SPECS.iter().any(|s| s.name == *name), "{name}");
        }
    }
}
