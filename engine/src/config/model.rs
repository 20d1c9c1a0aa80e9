//! The typed config model: what an nginx-syntax file means once parsed and checked, with nginx's defaults filled in.

pub use super::headers::HeadersConf;
use super::key::KeyTemplate;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// nginx's `client_header_buffer_size` default: the first buffer a request head is read into.
pub const CLIENT_HEADER_BUFFER: usize = 1024;

/// `large_client_header_buffers NUMBER SIZE` (default `4 8k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderBuffers {
    pub number: usize,
    pub size: usize,
}

impl Default for HeaderBuffers {
    fn default() -> Self {
        HeaderBuffers {
            number: 4,
            size: 8 * 1024,
        }
    }
}

impl HeaderBuffers {
    /// The most head bytes nginx can hold with these buffers after a first buffer of `first` bytes
    /// (`client_header_buffer_size`), every large one full.
    pub fn capacity(&self, first: usize) -> usize {
        self.number.saturating_mul(self.size).saturating_add(first)
    }
}

/// Where a directive came from, for messages in nginx's `in FILE:LINE` form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Span {
    pub file: PathBuf,
    pub line: usize,
}

/// The stand-in file name of [`Span::command_line`].
const COMMAND_LINE: &str = "\0command line";

impl Span {
    /// The place of a directive given with `-g`: nginx says `in command line`. (A file name cannot hold a NUL
    /// byte, so no file is mistaken for it.)
    pub fn command_line() -> Span {
        Span {
            file: PathBuf::from(COMMAND_LINE),
            line: 0,
        }
    }

    /// Whether this is [`Span::command_line`].
    pub fn is_command_line(&self) -> bool {
        self.file.as_os_str() == COMMAND_LINE
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_command_line() {
            return f.write_str("command line");
        }
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A whole config file (with its includes).
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub main: MainConf,
    pub http: Option<HttpConf>,
    pub stream: Option<StreamConf>,
    /// nginx's `[warn]` lines for this config (e.g. `load balancing method redefined`), each ending in
    /// ` in FILE:LINE` when nginx names a place.
    pub warnings: Vec<String>,
}

/// `worker_processes N|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    Auto,
    Count(usize),
}

/// Which shard runtime runs the data plane (`worker_runtime`, a corelb directive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeKind {
    #[default]
    Tokio,
    Glommio,
}

/// The main context.
#[derive(Debug, Clone)]
pub struct MainConf {
    /// Default 1, as nginx.
    pub worker_processes: Workers,
    /// `events { worker_connections N; }`, default 512.
    pub worker_connections: usize,
    /// `events { accept_mutex_delay T; }`, default 500ms: how long a shard stops accepting when it is out of
    /// descriptors (nginx's pause then, accept mutex or not).
    pub accept_mutex_delay: std::time::Duration,
    /// `error_log FILE [LEVEL]`; `None` means stderr.
    pub error_log: Option<(String, Option<String>)>,
    /// `pid FILE`.
    pub pid: Option<PathBuf>,
    /// `daemon on|off`; corelb never forks, the value is kept for `-t`.
    pub daemon: bool,
    /// `worker_runtime tokio|glommio`.
    pub runtime: Option<RuntimeKind>,
    /// `user USER [GROUP]`, looked up at load (only when running as root).
    pub user: Option<ProcessUser>,
    /// `worker_rlimit_nofile N`: the open-files limit set at start.
    pub rlimit_nofile: Option<u64>,
    /// `worker_cpu_affinity`: which CPU each shard is pinned to.
    pub cpu_affinity: Option<CpuAffinity>,
}

/// `worker_cpu_affinity auto [MASK]` or `worker_cpu_affinity MASK...` (CPU numbers, lowest bit = CPU 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuAffinity {
    /// One CPU each, in turn, from MASK's CPUs (`None`: every CPU the process may run on).
    Auto(Option<Vec<usize>>),
    /// Worker N gets mask N (the last mask for the workers beyond them).
    Masks(Vec<Vec<usize>>),
}

/// The account `user` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl Default for MainConf {
    fn default() -> Self {
        MainConf {
            worker_processes: Workers::Count(1),
            worker_connections: 512,
            accept_mutex_delay: std::time::Duration::from_millis(500),
            error_log: None,
            pid: None,
            daemon: true,
            runtime: None,
            user: None,
            rlimit_nofile: None,
            cpu_affinity: None,
        }
    }
}

/// How an upstream picks its peers.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    RoundRobin,
    IpHash,
    Hash {
        key: KeyTemplate,
        consistent: bool,
    },
    LeastConn,
    Random {
        two: Option<RandomTwo>,
    },
    /// `hash KEY maglev` (corelb): see [`crate::balance::maglev`].
    Maglev {
        key: KeyTemplate,
    },
    /// `hash KEY consistent balance_factor=N` (corelb): see [`crate::balance::bounded_load`].
    BoundedHash {
        key: KeyTemplate,
        /// The load bound in percent of the average (HAProxy's `hash-balance-factor`), above 100.
        factor: u32,
    },
    /// `fair [no_rr] [weight_mode=idle|peak]` (the third-party upstream-fair module): see [`crate::balance::fair`].
    Fair {
        no_rr: bool,
        weight_mode: FairWeightMode,
    },
    /// `least_time MODE [inflight]` (nginx 1.31): see [`crate::balance::least_time`].
    LeastTime {
        mode: LeastTimeMode,
        inflight: bool,
    },
}

/// The time `least_time` averages: http takes `header` and `last_byte`, stream `connect`, `first_byte` and
/// `last_byte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeastTimeMode {
    Header,
    LastByte,
    Connect,
    FirstByte,
}

/// `fair`'s `weight_mode=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FairWeightMode {
    /// No `weight_mode`: idle means no request in flight; weights divide the busy score.
    #[default]
    Default,
    /// `weight_mode=idle`: a peer is idle below `weight` requests in flight.
    Idle,
    /// `weight_mode=peak`: a peer at `weight` requests in flight is never chosen.
    Peak,
}

/// The comparison `random two` makes between its two candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandomTwo {
    /// `random two` and `random two least_conn` (the default of `two`).
    LeastConn,
    /// `random two ewma` (corelb): peak-EWMA latency, see [`crate::balance::peak_ewma`].
    PeakEwma,
    /// `random two least_time=MODE` (nginx Plus; corelb's definition, see [`crate::balance::random_least_time`]).
    LeastTime(LeastTimeMode),
}

/// One `server` line of an upstream. A name that resolves to several addresses gives several `addrs`, each a peer
/// with the line's full weight.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLine {
    /// The argument as written (`127.0.0.1:8081`, `localhost`), used by consistent hashing.
    pub text: String,
    pub addrs: Vec<SocketAddr>,
    /// Default 1.
    pub weight: u32,
    /// Default 1; 0 disables failure accounting.
    pub max_fails: u32,
    /// Default 10s.
    pub fail_timeout: Duration,
    /// Default 0 (unlimited).
    pub max_conns: u32,
    /// `slow_start=TIME` (nginx Plus): after the peer comes back, its weight ramps from 1 to `weight` over this
    /// time. Zero (the default) = off. Refused with `hash`, `ip_hash` and `random`.
    pub slow_start: Duration,
    pub backup: bool,
    pub down: bool,
    /// `drain` (nginx Plus, http only): the peer takes no new requests; its zone flag follows this at every apply.
    pub drain: bool,
    /// `route=ID` (http): the server id `sticky` reads (else the MD5 of the address).
    pub route: Option<String>,
    /// `agent_port=N [agent_inter=T] [agent_send=S]` (corelb's): the server's agent check.
    pub agent: Option<super::agent::AgentConf>,
    /// The API set `weight` (for the API's and metrics' weight source; the config's weight otherwise).
    pub weight_by_api: bool,
    /// `resolve` (nginx 1.27.3): the name this line re-resolves at run time. A line written with `resolve` has no
    /// `addrs` itself; each answer's addresses become lines of their own that carry the same spec with
    /// [`ResolveSpec::derived`] set (see `resolve::names::fill`).
    pub resolve: Option<Box<ResolveSpec>>,
    pub span: Span,
}

/// What a `server NAME [service=SRV] resolve` line asks the upstream's resolver.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolveSpec {
    /// The name as written (lower case, no port).
    pub host: String,
    /// The line's port (80 when none was written in http); unused with `service=`, whose records carry theirs.
    pub port: u16,
    /// `service=NAME`: the SRV records of `_NAME._tcp.HOST` (or of `HOST` when NAME starts with `_`).
    pub service: Option<String>,
    /// False for the line as written (no peers of its own), true for a line made from an answer.
    pub derived: bool,
}

impl ServerLine {
    /// A line for `text` (the argument as written) with its resolved `addrs` and nginx's defaults: weight 1,
    /// max_fails 1, fail_timeout 10s, no max_conns, no slow_start, not backup, down or draining.
    pub fn new(text: impl Into<String>, addrs: Vec<SocketAddr>) -> Self {
        ServerLine {
            text: text.into(),
            addrs,
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            max_conns: 0,
            slow_start: Duration::ZERO,
            backup: false,
            down: false,
            drain: false,
            route: None,
            agent: None,
            weight_by_api: false,
            resolve: None,
            span: Span::default(),
        }
    }

    /// A line written with `resolve` (it stands for the peers its name resolves to, and is none itself).
    pub fn is_template(&self) -> bool {
        self.resolve.as_ref().is_some_and(|r| !r.derived)
    }

    /// A line made from a `resolve` line's answer.
    pub fn is_derived(&self) -> bool {
        self.resolve.as_ref().is_some_and(|r| r.derived)
    }
}

/// `zone NAME [SIZE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConf {
    pub name: String,
    pub size: Option<u64>,
}

/// An `upstream NAME { ... }` block (http or stream).
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConf {
    /// The block's name. For an implicit http upstream it is nginx's `$proxy_host` of the `proxy_pass` that made
    /// it (`host`, or `host:port` when the port is not 80); for an implicit stream upstream, the address as written.
    pub name: String,
    pub method: Method,
    pub servers: Vec<ServerLine>,
    /// `keepalive N`: idle connections kept per shard; `None` = no keepalive to upstreams.
    pub keepalive: Option<usize>,
    /// Default 1000 (nginx ≥1.15.3).
    pub keepalive_requests: u64,
    /// Default 60s.
    pub keepalive_timeout: Duration,
    /// `keepalive_time` (nginx 1.19.10; default 1h): a connection open longer is not kept after a request.
    pub keepalive_time: Duration,
    pub zone: Option<ZoneConf>,
    /// `state FILE` (nginx Plus): the servers live in FILE (resolved against the directory of the file that names
    /// it), which every API change rewrites; `None` = servers from the config.
    pub state: Option<PathBuf>,
    /// True when this upstream was made implicitly by `proxy_pass host:port`.
    pub implicit: bool,
    /// `sticky ...` (http).
    pub sticky: Option<Box<super::sticky::StickyConf>>,
    /// `queue N [timeout=T]` (http, nginx Plus).
    pub queue: Option<super::queue::QueueConf>,
    /// `load_weight ...` (corelb's): how a load report becomes a weight.
    pub load_weight: super::agent::LoadFormula,
    /// `endpoint_load_metrics on` (corelb's, http): responses' load reports set the weights.
    pub load_metrics: Option<super::agent::LoadMetricsConf>,
    /// The resolver of its `resolve` lines (and of names the API adds): the block's `resolver` (with its
    /// `resolver_timeout`), else the http or stream level's; `None` without a zone or a resolver.
    pub resolver: Option<std::sync::Arc<super::resolver::ResolverConf>>,
    pub span: Span,
}

impl UpstreamConf {
    /// An explicit upstream `name` balancing `servers` with `method`, every other setting at nginx's default.
    pub fn new(name: impl Into<String>, method: Method, servers: Vec<ServerLine>) -> Self {
        UpstreamConf {
            name: name.into(),
            method,
            servers,
            keepalive: None,
            keepalive_requests: 1000,
            keepalive_timeout: Duration::from_secs(60),
            keepalive_time: Duration::from_secs(3600),
            zone: None,
            state: None,
            implicit: false,
            sticky: None,
            queue: None,
            load_weight: super::agent::LoadFormula::default(),
            load_metrics: None,
            resolver: None,
            span: Span::default(),
        }
    }
}

/// The conditions under which a request passes to the next upstream server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextUpstream {
    pub error: bool,
    pub timeout: bool,
    pub invalid_header: bool,
    pub http_500: bool,
    pub http_502: bool,
    pub http_503: bool,
    pub http_504: bool,
    pub http_403: bool,
    pub http_404: bool,
    pub http_429: bool,
    pub non_idempotent: bool,
}

impl NextUpstream {
    /// `proxy_next_upstream off`.
    pub const OFF: NextUpstream = NextUpstream {
        error: false,
        timeout: false,
        invalid_header: false,
        http_500: false,
        http_502: false,
        http_503: false,
        http_504: false,
        http_403: false,
        http_404: false,
        http_429: false,
        non_idempotent: false,
    };

    /// Whether an upstream answer with `status` may pass to the next server under these conditions.
    pub fn on_status(&self, status: u16) -> bool {
        match status {
            500 => self.http_500,
            502 => self.http_502,
            503 => self.http_503,
            504 => self.http_504,
            403 => self.http_403,
            404 => self.http_404,
            429 => self.http_429,
            _ => false,
        }
    }
}

impl Default for NextUpstream {
    /// nginx's default: `error timeout`.
    fn default() -> Self {
        NextUpstream {
            error: true,
            timeout: true,
            ..NextUpstream::OFF
        }
    }
}

/// Where a proxied request goes: a named upstream, or an implicit one made from `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPass {
    /// `http` or `https` (empty for stream).
    pub scheme: String,
    /// Index into the context's `upstreams`.
    pub upstream: usize,
    /// A URI part after the host (`proxy_pass http://u/prefix/`), replacing the matched location prefix.
    pub uri: Option<String>,
    /// `proxy_pass` with variables: the URL, evaluated per request (`upstream` and `uri` are then unused).
    pub url: Option<KeyTemplate>,
}

/// A fixed answer: `return CODE [TEXT]` or `return CODE URL` for redirects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Return {
    pub code: u16,
    pub text: Option<String>,
}

/// The proxy settings that inherit from `http` to `server` to `location`.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpProxyConf {
    /// `proxy_http_version 1.0|1.1`, default 1.0.
    pub http_version_11: bool,
    /// `proxy_set_header FIELD VALUE`, in order. nginx's defaults (`Host $proxy_host`, `Connection close`) apply
    /// unless a line names the same field.
    pub set_headers: Vec<(String, KeyTemplate)>,
    /// Default 60s.
    pub connect_timeout: Duration,
    /// Default 60s.
    pub read_timeout: Duration,
    /// Default 60s.
    pub send_timeout: Duration,
    pub next_upstream: NextUpstream,
    /// 0 = unlimited.
    pub next_upstream_tries: usize,
    /// Zero = off.
    pub next_upstream_timeout: Duration,
    /// `proxy_pass_request_headers`, default on: the client's header lines go upstream.
    pub pass_request_headers: bool,
    /// `proxy_pass_request_body`, default on: the client's body goes upstream (off: read and dropped, while the
    /// `Content-Length` line still goes, as nginx).
    pub pass_request_body: bool,
    /// `proxy_set_body VALUE`: sent as the body instead of the client's.
    pub set_body: Option<KeyTemplate>,
    /// `proxy_buffering`, default on: a response is read ahead of a slow client into at most `read_ahead` bytes
    /// (off: relayed as it arrives).
    pub buffering: bool,
    /// `proxy_buffers N SIZE` in all (default 8 × 4k): how far a buffered response is read ahead of the client.
    pub read_ahead: usize,
    /// `proxy_request_buffering`, default on. corelb sends a body upstream as it arrives either way (`off`'s
    /// behaviour; a body already whole in the client buffer can go to the next peer, docs/directives.md).
    pub request_buffering: bool,
    /// `resolver` (with the level's `resolver_timeout`): names in a `proxy_pass` with variables that are no
    /// upstream are looked up through it.
    pub resolver: Option<std::sync::Arc<super::resolver::ResolverConf>>,
}

impl Default for HttpProxyConf {
    fn default() -> Self {
        HttpProxyConf {
            http_version_11: false,
            set_headers: Vec::new(),
            connect_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            next_upstream: NextUpstream::default(),
            next_upstream_tries: 0,
            next_upstream_timeout: Duration::ZERO,
            pass_request_headers: true,
            pass_request_body: true,
            set_body: None,
            buffering: true,
            request_buffering: true,
            read_ahead: 8 * 4096,
            resolver: None,
        }
    }
}

/// `keepalive_disable msie6`: no keepalive after a POST from MSIE 6 and older.
pub const KEEPALIVE_DISABLE_MSIE6: u8 = 1;
/// `keepalive_disable safari`: no keepalive for Safari on macOS.
pub const KEEPALIVE_DISABLE_SAFARI: u8 = 2;

/// nginx's `Keep-Alive: timeout=N` response line (N: `keepalive_timeout`'s second value, seconds): a small
/// `Copy` value, so that a routed request carries it cheaply (the line is written only where it is configured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeepaliveHeader {
    /// 0: no line. Four bytes, so that a [`crate::http::keepalive::Connection`] is eight.
    secs: u32,
}

impl KeepaliveHeader {
    /// No line (`keepalive_timeout` without a second value).
    pub const NONE: KeepaliveHeader = KeepaliveHeader { secs: 0 };

    /// The line for `secs` (none for 0, as nginx sends none; above `u32::MAX`, 136 years, it says `u32::MAX`).
    pub fn new(secs: u64) -> KeepaliveHeader {
        KeepaliveHeader {
            secs: u32::try_from(secs).unwrap_or(u32::MAX),
        }
    }

    /// The seconds of the line; 0 when none is sent.
    pub fn secs(self) -> u32 {
        self.secs
    }
}

/// Client-side settings that inherit from `http` to `server` to `location`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConf {
    /// `keepalive_timeout`, default 75s; zero disables client keepalive.
    pub keepalive_timeout: Duration,
    /// `keepalive_timeout`'s second value (nginx merges it apart from the first): the `Keep-Alive: timeout=N` line
    /// of kept connections' answers, rendered at load; empty when unset or 0.
    pub keepalive_header: KeepaliveHeader,
    /// Default 1000.
    pub keepalive_requests: u64,
    /// `keepalive_time`, default 1h: no request is kept alive after a connection has been open this long.
    pub keepalive_time: Duration,
    /// `keepalive_disable`: [`KEEPALIVE_DISABLE_MSIE6`] (the default) and [`KEEPALIVE_DISABLE_SAFARI`] bits.
    pub keepalive_disable: u8,
    /// Default 60s.
    pub client_header_timeout: Duration,
    /// Default 1m (1 MiB); 0 = unlimited.
    pub client_max_body_size: u64,
    /// Default 60s: the longest wait for the next read of a request body (between two reads, not for the whole
    /// body); then 408 and close.
    pub client_body_timeout: Duration,
    /// Default 60s: the longest wait for the next write to the client; then the connection is closed.
    pub send_timeout: Duration,
    /// `limit_rate`: bytes per second of an answer (0, the default: no limit); `limit_rate_after`: the bytes
    /// sent before it applies (default 0).
    pub limit_rate: u64,
    pub limit_rate_after: u64,
    /// `large_client_header_buffers NUMBER SIZE` (http, server; default `4 8k`).
    pub large_client_header_buffers: HeaderBuffers,
    /// `client_header_buffer_size` (http, server; default 1k): the first buffer of a head, the default server's
    /// of the address (nginx reads into it before it knows the server).
    pub client_header_buffer_size: usize,
    /// `connection_pool_size` (http, server; default 512 on 64-bit hosts): checked against the large header
    /// buffers as nginx does; corelb has no memory pools.
    pub connection_pool_size: usize,
    /// `http2_chunk_size` (http, server, location; default 8k): the largest DATA frame of an HTTP/2 answer.
    pub http2_chunk_size: u32,
    /// The `access_log` lines in effect (those of the nearest level that has any); empty when the level says
    /// `access_log off` or no level has one.
    pub access_log: Vec<AccessLogConf>,
    /// `error_log FILE [LEVEL]` lines of the level answering (empty: the main log); FILE resolved against the
    /// prefix, or `stderr`.
    pub error_log: Vec<(String, Option<String>)>,
    /// `lingering_close`, `lingering_time`, `lingering_timeout`.
    pub lingering: Lingering,
    /// `client_body_buffer_size`, default 16k: how much of a request body nginx keeps in memory (more goes to a
    /// temporary file); corelb holds no more than this for `$request_body`.
    pub client_body_buffer_size: u64,
}

/// `lingering_close`: when a connection that closes after an answer reads (and drops) what the client still
/// sends before it closes, so that the client gets the whole answer rather than a reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LingeringClose {
    Off,
    /// nginx's default: when the request had a body or more bytes came than were read.
    On,
    Always,
}

/// nginx's lingering close of an http connection (`ngx_http_set_lingering_close`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lingering {
    pub close: LingeringClose,
    /// `lingering_time`, default 30s: the most time spent reading before the close.
    pub time: Duration,
    /// `lingering_timeout`, default 5s: the longest wait for more bytes.
    pub timeout: Duration,
}

impl Default for Lingering {
    fn default() -> Self {
        Lingering {
            close: LingeringClose::On,
            time: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
        }
    }
}

/// One `access_log PATH [FORMAT] [buffer=SIZE] [flush=TIME] [if=COND]` line (`F`: an http or a stream format).
#[derive(Debug, Clone, PartialEq)]
pub struct AccessLogConf<F = crate::config::log_format::LogFormat> {
    pub path: PathBuf,
    pub format: std::sync::Arc<F>,
    /// `buffer=`; corelb buffers 64k when it is not given.
    pub buffer: Option<usize>,
    /// `flush=`; 1 s when it is not given.
    pub flush: Option<Duration>,
    /// `gzip[=LEVEL]`: each buffer written is one gzip member at this level.
    pub gzip: Option<u32>,
    /// `if=`: the line is skipped when this evaluates to empty or `0`.
    pub cond: Option<std::sync::Arc<F>>,
    /// A path with variables (http only): opened per line by the log writer.
    pub dynamic: Option<crate::config::log_path::LogPath<F>>,
    pub span: Span,
}

impl Default for ClientConf {
    fn default() -> Self {
        ClientConf {
            keepalive_timeout: Duration::from_secs(75),
            keepalive_header: KeepaliveHeader::default(),
            keepalive_requests: 1000,
            keepalive_time: Duration::from_secs(3600),
            keepalive_disable: KEEPALIVE_DISABLE_MSIE6,
            client_header_timeout: Duration::from_secs(60),
            client_max_body_size: 1024 * 1024,
            client_body_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            limit_rate: 0,
            limit_rate_after: 0,
            large_client_header_buffers: HeaderBuffers::default(),
            client_header_buffer_size: CLIENT_HEADER_BUFFER,
            connection_pool_size: 512,
            http2_chunk_size: 8 * 1024,
            access_log: Vec::new(),
            error_log: Vec::new(),
            lingering: Lingering::default(),
            client_body_buffer_size: 16 * 1024,
        }
    }
}

/// How a `location` matches the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationMatch {
    /// `location /prefix`
    Prefix(String),
    /// `location = /exact`
    Exact(String),
    /// `location ^~ /prefix`: when it is the longest prefix, the regex locations are not tried.
    PrefixNoRegex(String),
    /// `location ~ REGEX`, `location ~* REGEX` (caseless).
    Regex(super::regex::Regex),
    /// `location @name`: reached only by name (internal redirects), never by the request path.
    Named(String),
}

impl LocationMatch {
    /// nginx's name of the location: the URI, the pattern, or `@name`.
    pub fn name(&self) -> &str {
        match self {
            LocationMatch::Prefix(n)
            | LocationMatch::Exact(n)
            | LocationMatch::PrefixNoRegex(n)
            | LocationMatch::Named(n) => n,
            LocationMatch::Regex(re) => re.pattern(),
        }
    }
}

/// A `location` block, with inherited settings already merged in.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    pub matcher: LocationMatch,
    /// The rewrite directives (`if`, `break`, `return`) after the first one, in order; empty when there are
    /// none, or when the first is a `return` (then it is `ret`, and nothing after it runs).
    pub script: Vec<super::rewrite::RewriteOp>,
    /// The location this one is nested in (an index into the server's `locations`, which lists every level,
    /// each location before those nested in it); `None` at the server level.
    pub parent: Option<usize>,
    pub proxy_pass: Option<ProxyPass>,
    pub ret: Option<Return>,
    /// `api` or `metrics`: corelb answers the location itself.
    pub admin: Option<AdminEndpoint>,
    pub proxy: HttpProxyConf,
    pub client: ClientConf,
    /// What the location serves from files when it neither proxies, returns nor is an endpoint.
    pub files: super::files::FilesConf,
    /// `add_header`, `expires`, `server_tokens`, `proxy_hide_header`/`proxy_pass_header`, `proxy_redirect`.
    pub headers: HeadersConf,
    /// `set_real_ip_from` and the rest, where some level trusts an address.
    pub realip: Option<std::sync::Arc<super::realip::RealIpConf>>,
    /// `allow`/`deny`, where some level has rules (nginx's access phase).
    pub access: Option<std::sync::Arc<super::access::AccessRules>>,
    /// `limit_req` and `limit_conn` (nginx's preaccess phase).
    pub limits: super::limit::LimitsConf,
    /// `gzip*` and `gzip_static`.
    pub gzip: super::gzip::GzipConf,
    /// `charset`, `source_charset`, `override_charset`, `charset_types`.
    pub charset: super::charset::CharsetConf,
    /// `error_page`, `recursive_error_pages`, `proxy_intercept_errors`.
    pub error_pages: super::error_pages::ErrorPagesConf,
    /// `proxy_ssl_*`, for a location that proxies to `https`.
    pub proxy_tls: Option<super::proxy_tls::ProxyTlsConf>,
    pub span: Span,
}

/// An endpoint corelb serves itself in a location: nginx Plus's `api [write=on]`, or `metrics` (Prometheus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminEndpoint {
    /// The nginx Plus API (versions 1 to 9); changes only with `write=on`.
    Api { write: bool },
    /// The Prometheus text exposition.
    Metrics,
    /// nginx's `stub_status` page.
    StubStatus,
}

/// `listen ADDR:PORT` (http or stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub addr: SocketAddr,
    pub default_server: bool,
    /// `proxy_protocol`: each connection starts with a PROXY protocol header.
    pub proxy_protocol: bool,
    /// `ssl`: connections on this address are TLS (any server's `listen ... ssl` makes the address TLS).
    pub ssl: bool,
    /// stream `listen ... udp`: a UDP socket (sessions keyed by the client's address and port).
    pub udp: bool,
    /// `http2` (deprecated by nginx for the `http2` directive): the address speaks HTTP/2.
    pub http2: bool,
    /// `backlog=`, `rcvbuf=` and `sndbuf=`: the listening socket's options.
    pub socket: SocketOptions,
    pub span: Span,
}

/// `listen ... backlog=N rcvbuf=SIZE sndbuf=SIZE reuseport`: the `listen(2)` backlog of a listening socket (default
/// 511, as nginx's), its `SO_RCVBUF` and `SO_SNDBUF` (its accepted connections inherit them; by default the
/// system's), and whether each shard has a socket of its own (`SO_REUSEPORT`) instead of sharing the address's one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketOptions {
    pub backlog: Option<i32>,
    pub rcvbuf: Option<i32>,
    pub sndbuf: Option<i32>,
    /// `reuseport`: a socket per shard, the kernel spreading new connections over them by a hash of the
    /// addresses; without it the shards accept on one socket, each taking a connection when it is free (nginx's
    /// workers and their shared listening socket).
    pub reuseport: bool,
}

impl SocketOptions {
    /// Each size set here, else `other`'s (only one `listen` of an address may set options).
    pub fn or(self, other: SocketOptions) -> SocketOptions {
        SocketOptions {
            backlog: self.backlog.or(other.backlog),
            rcvbuf: self.rcvbuf.or(other.rcvbuf),
            sndbuf: self.sndbuf.or(other.sndbuf),
            reuseport: self.reuseport || other.reuseport,
        }
    }
}

/// `http2 on` and its settings (http, server; nginx's `ngx_http_v2_srv_conf_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Conf {
    /// `http2` (default off): HTTP/2 by ALPN on a TLS address, by its connection preface on a plain one.
    pub on: bool,
    /// `http2_max_concurrent_streams` (default 128).
    pub max_concurrent_streams: u32,
    /// `http2_chunk_size` (default 8k): the largest DATA frame of an answer.
    pub chunk_size: u32,
    /// The largest `http2_chunk_size` of the address's servers and their locations (set with the address's
    /// settings; h2's send buffer per stream holds two of it).
    pub largest_chunk_size: u32,
    /// `http2_recv_buffer_size` (http; default 256k): accepted; corelb reads through the connection's buffer.
    pub recv_buffer_size: u32,
    /// `http2_body_preread_size` (default 64k): each stream's initial receive window.
    pub body_preread_size: u32,
}

impl Default for Http2Conf {
    fn default() -> Self {
        Http2Conf {
            on: false,
            max_concurrent_streams: 128,
            chunk_size: 8 * 1024,
            largest_chunk_size: 8 * 1024,
            recv_buffer_size: 256 * 1024,
            body_preread_size: 64 * 1024,
        }
    }
}

/// An http `server` block.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpServer {
    pub listens: Vec<Listen>,
    pub server_names: Vec<String>,
    pub locations: Vec<Location>,
    /// `return` directly in the server block: answers before any location.
    pub ret: Option<Return>,
    /// The server block's rewrite directives, as [`Location::script`]: run before the location is searched.
    pub script: Vec<super::rewrite::RewriteOp>,
    pub client: ClientConf,
    /// The server level's file serving settings (for requests no location matches).
    pub files: super::files::FilesConf,
    /// The header settings of answers outside any location.
    pub headers: HeadersConf,
    /// `set_real_ip_from` and the rest of the server block (nginx's post-read phase reads these).
    pub realip: Option<std::sync::Arc<super::realip::RealIpConf>>,
    /// `allow`/`deny` of requests no location matches.
    pub access: Option<std::sync::Arc<super::access::AccessRules>>,
    /// `limit_req`/`limit_conn` of requests no location matches.
    pub limits: super::limit::LimitsConf,
    /// `gzip*` and `gzip_static`.
    pub gzip: super::gzip::GzipConf,
    /// `charset` and the rest of the server level.
    pub charset: super::charset::CharsetConf,
    /// `ssl_*`: for a server that listens with `ssl` or has a certificate.
    pub tls: Option<super::tls::TlsConf>,
    /// `http2` and the `http2_*` settings.
    pub http2: Http2Conf,
    /// The error pages of answers outside any location.
    pub error_pages: super::error_pages::ErrorPagesConf,
    pub span: Span,
}

/// The `http` block.
#[derive(Debug, Clone, Default)]
pub struct HttpConf {
    pub upstreams: Vec<UpstreamConf>,
    pub servers: Vec<HttpServer>,
    /// `health_check` lines of its locations and its `match` blocks (nginx Plus).
    pub health: HealthConf,
    /// `map` blocks; [`crate::config::key::Var::Map`] indexes them.
    pub maps: Vec<super::map::Map>,
    /// `limit_req_zone` and `limit_conn_zone` lines.
    pub limit_zones: super::limit::Zones,
    /// The names `set` declares (lower-case); [`crate::config::key::Var::User`] indexes them.
    pub user_vars: Vec<String>,
    /// The charsets the block names and its `charset_map` tables.
    pub charsets: std::sync::Arc<super::charset::Charsets>,
    /// A value names `$ssl_ciphers`: TLS handshakes keep the client's list of suites.
    pub ssl_ciphers: bool,
}

/// The active health checks of an `http` or `stream` block (nginx Plus), gathered from its locations or servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthConf {
    pub checks: Vec<HealthCheck>,
    /// `match NAME { ... }` blocks (http only); [`HealthCheck::matcher`] indexes them.
    pub matches: Vec<MatchConf>,
}

/// One `health_check` line: an http location's (HTTP probes) or a stream server's (TCP connect probes).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthCheck {
    /// Index into the block's `upstreams`: the one the location or server proxies to.
    pub upstream: usize,
    /// `interval=`, default 5s.
    pub interval: Duration,
    /// `jitter=`, default 0: each round starts up to this much later, at random.
    pub jitter: Duration,
    /// `fails=`, default 1: consecutive failed probes that make a peer unhealthy.
    pub fails: u32,
    /// `passes=`, default 1: consecutive passed probes that make an unhealthy peer healthy.
    pub passes: u32,
    /// `uri=`, default `/` (http).
    pub uri: String,
    /// `port=`: probe this port instead of the peer's.
    pub port: Option<u16>,
    /// `match=NAME`, as an index into [`HealthConf::matches`] (http).
    pub matcher: Option<usize>,
    /// `mandatory`: peers start in the "checking" state and take no traffic before their first probe.
    pub mandatory: bool,
    /// `persistent` (with `mandatory`): after a reload, a peer that was healthy before is not put back in the
    /// "checking" state.
    pub persistent: bool,
    /// The location's `proxy_connect_timeout` (the stream server's for stream).
    pub connect_timeout: Duration,
    /// The location's `proxy_read_timeout` (the stream server's `proxy_timeout` for stream, unused there).
    pub read_timeout: Duration,
    /// The `Host` header of http probes: the upstream's name, as `$proxy_host`.
    pub host: String,
    pub span: Span,
}

/// `match NAME { ... }`: every test must hold for a probe to pass (and the default 2xx/3xx rule no longer applies).
#[derive(Debug, Clone, PartialEq)]
pub struct MatchConf {
    pub name: String,
    pub tests: Vec<MatchTest>,
    pub span: Span,
}

/// One line of a `match` block.
#[derive(Debug, Clone, PartialEq)]
pub enum MatchTest {
    /// `status [!] CODE|LOW-HIGH ...`: the status is (not) one of the codes or inside one of the ranges.
    Status { negate: bool, ranges: Vec<(u16, u16)> },
    /// `header [!] NAME`, `header NAME [!]= VALUE`, `header NAME [!]~ REGEX`.
    Header {
        name: String,
        negate: bool,
        cond: HeaderCond,
    },
    /// `body [!]~ REGEX`: the first 256 KiB of the body (do not) match.
    Body { negate: bool, regex: String },
}

/// What a `header` line asks of a response header.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderCond {
    Present,
    Equals(String),
    Matches(String),
}

/// A size of a stream directive that may take variables (nginx's `ngx_stream_set_complex_value_size_slot`).
#[derive(Debug, Clone, PartialEq)]
pub enum StreamSize {
    Fixed(u64),
    /// Evaluated per session; a value that is not a size is nginx's `invalid size "..."` and the default.
    Value(std::sync::Arc<crate::config::stream_format::StreamFormat>),
}

/// A stream `server` block.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamServer {
    pub listens: Vec<Listen>,
    /// `server_name` (nginx 1.25.5+): the names a handshake's or a preread hello's SNI picks this server by.
    pub server_names: Vec<String>,
    /// `proxy_pass`: index into `StreamConf::upstreams`; `None` when the server answers with `return`.
    pub upstream: Option<usize>,
    /// `proxy_pass` with variables: per session, the value names an upstream of the block or an `IP:PORT`.
    pub pass: Option<crate::config::key::KeyTemplate>,
    /// `return VALUE`: sent to the client, then the session ends.
    pub ret: Option<std::sync::Arc<crate::config::stream_format::StreamFormat>>,
    /// The `access_log` lines in effect (the server's, else the stream block's); empty for `off` or none.
    pub access_log: Vec<AccessLogConf<crate::config::stream_format::StreamFormat>>,
    /// `error_log` lines in effect (the server's, else the stream block's; empty: the main log).
    pub error_log: Vec<(String, Option<String>)>,
    /// Default 60s.
    pub connect_timeout: Duration,
    /// Idle timeout between two successive reads or writes, default 10m.
    pub timeout: Duration,
    /// `proxy_next_upstream on|off`, default on.
    pub next_upstream: bool,
    /// `proxy_upload_rate` (client to upstream) and `proxy_download_rate` (upstream to client), bytes per
    /// second; unset or 0: no limit.
    pub upload_rate: Option<StreamSize>,
    pub download_rate: Option<StreamSize>,
    /// UDP: `proxy_requests` (client datagrams after which the client's next datagram starts a new session; 0:
    /// never) and `proxy_responses` (responses expected per client datagram; `None`: any number, the session
    /// ends at `proxy_timeout`).
    pub udp_requests: u64,
    pub udp_responses: Option<u64>,
    /// 0 = unlimited.
    pub next_upstream_tries: usize,
    /// `proxy_half_close` (nginx 1.21.4), default off: the session ends when either side ends its stream; on: an
    /// end of stream is passed on as a half-close and the session ends when both sides have ended.
    pub half_close: bool,
    /// `set_real_ip_from`: whose PROXY protocol header names the client.
    pub realip: Option<std::sync::Arc<super::realip::RealIpConf>>,
    /// `allow`/`deny`: a forbidden client's connection is closed.
    pub access: Option<std::sync::Arc<super::access::AccessRules>>,
    /// `limit_conn` (its `req` is `None`): a limited client's connection is closed.
    pub limits: super::limit::LimitsConf,
    /// `proxy_protocol on`: send nginx's v1 header to the upstream first.
    pub proxy_protocol: bool,
    /// `proxy_protocol_timeout`: how long a `listen ... proxy_protocol` waits for the client's header.
    pub proxy_protocol_timeout: Duration,
    /// `listen ... ssl` with `ssl_*`, `ssl_preread`, `proxy_ssl*`.
    pub ssl: super::tls::StreamSsl,
    pub span: Span,
}

/// The `stream` block.
#[derive(Debug, Clone, Default)]
pub struct StreamConf {
    pub upstreams: Vec<UpstreamConf>,
    pub servers: Vec<StreamServer>,
    /// `health_check` lines of its servers (nginx Plus; TCP connect probes).
    pub health: HealthConf,
    /// `map` blocks; [`crate::config::key::Var::Map`] indexes them.
    pub maps: Vec<super::map::Map>,
    /// `limit_conn_zone` lines.
    pub limit_zones: super::limit::Zones,
    /// The stream block's own `access_log` lines: their files are opened at load even when no server inherits
    /// them, as nginx opens every log file it reads.
    pub block_logs: Vec<AccessLogConf<crate::config::stream_format::StreamFormat>>,
    /// Servers whose `listen` is `xdp=DEVICE` (corelb's): VIPs the XDP data path serves (`crate::l4`), with no
    /// socket of their own.
    pub xdp: Vec<XdpVip>,
}

/// `listen ADDR:PORT xdp=DEVICE [mode=dr|nat] [udp]` in a stream server with `proxy_pass UPSTREAM` (corelb's): a
/// VIP the XDP program on DEVICE balances over the upstream's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpVip {
    pub addr: std::net::SocketAddrV4,
    pub device: String,
    pub mode: XdpMode,
    pub udp: bool,
    /// Index into `StreamConf::upstreams`.
    pub upstream: usize,
    pub scheduler: XdpScheduler,
    /// The server's `proxy_timeout` (default 10m): a flow idle longer is scheduled again.
    pub timeout: Duration,
    pub span: Span,
}

/// How the XDP path sends a packet to its real server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// `mode=dr` (LVS's direct routing, the default): the destination MAC is rewritten; real servers hold the VIP
    /// and answer the client directly.
    Dr,
    /// `mode=nat`: destination address and port rewritten, and the replies' source back to the VIP.
    Nat,
}

/// The upstream's method as the XDP path runs it on new flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpScheduler {
    /// Round robin, weighted (LVS's `rr`, `wrr`): the SWRR sequence of the live servers, walked in turn.
    RoundRobin,
    /// `ip_hash`, `hash $remote_addr` (LVS's `sh`): the client address's hash into that sequence.
    SourceHash,
    /// `hash $remote_addr maglev` (the client's address) or `hash $remote_addr$remote_port maglev` (the flow):
    /// Maglev's table of the live servers, so that balancers with the same config agree.
    Maglev { source_only: bool },
    /// `least_conn` (LVS's `wlc`; `lc` with equal weights): the live server with the fewest active flows for its
    /// weight, counted in the kernel (a TCP flow ends at the client's FIN or RST, any flow at its idle timeout).
    LeastConn,
}

impl Config {
    /// Whether any `error_log stderr` line is in the config, at any level (nginx's `log_use_stderr`: then the
    /// process's stderr stays where it was instead of following the main log's file).
    pub fn logs_to_stderr(&self) -> bool {
        let stderr = |lines: &[(String, Option<String>)]| lines.iter().any(|(path, _)| path == "stderr");
        let main = self.main.error_log.as_ref().is_some_and(|(path, _)| path == "stderr");
        let http = self.http.as_ref().is_some_and(|h| {
            h.servers
                .iter()
                .any(|s| stderr(&s.client.error_log) || s.locations.iter().any(|l| stderr(&l.client.error_log)))
        });
        let stream = self
            .stream
            .as_ref()
            .is_some_and(|st| st.servers.iter().any(|s| stderr(&s.error_log)));
        main || http || stream
    }
}

impl HttpConf {
    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConf> {
        self.upstreams.iter().find(|u| u.name == name)
    }
}

impl StreamConf {
    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConf> {
        self.upstreams.iter().find(|u| u.name == name)
    }
}
