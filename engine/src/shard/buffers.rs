//! A connection's buffers (client and upstream reads, the answer, the upstream request, keys, the normalized
//! path, the access log record), recycled by its shard so a request allocates nothing once they have grown, and
//! the few facts of the connection they carry, kept apart while the connection waits idle without them.

use crate::access_log::record::RequestRecord;
use crate::config::regex::Captures;
use crate::http::var_cache::VarCache;
use crate::runtime::iobuf::IoBuf;
use crate::snapshot::headers::Prepared;

/// Per-connection buffers, recycled by the shard.
#[derive(Debug)]
pub struct Buffers {
    pub client: IoBuf,
    pub upstream: IoBuf,
    pub out: Vec<u8>,
    pub request: Vec<u8>,
    pub key: Vec<u8>,
    pub scratch: Vec<u8>,
    /// The normalized request path, when it differs from the path sent.
    pub uri: Vec<u8>,
    /// A static file's path on disk; then, for a redirect to a directory's slash, the `Location` value.
    pub path: Vec<u8>,
    /// The path after an internal redirect to an index file.
    pub redirect: Vec<u8>,
    /// What the current request leaves for the access log.
    pub log: RequestRecord,
    /// The groups of the last regex the current request matched (`$1`..`$9`, named captures).
    pub captures: Captures,
    /// The groups of the regex `server_name` the current request's host matched (its named-capture variables).
    pub server_captures: Captures,
    /// The URI a `rewrite` made (or a redirecting one's `Location`).
    pub rewrite: Vec<u8>,
    /// The current request's computed variables (`$request_id`, times, `map` values).
    pub vars: VarCache,
    /// A `return` text with variables, evaluated for the current request.
    pub answer: Vec<u8>,
    /// A `proxy_pass` URL with variables, evaluated for the current request.
    pub proxy_url: Vec<u8>,
    /// The response headers the current request's location adds, evaluated when it was routed.
    pub headers: Prepared,
    /// The connection's PROXY protocol header: its addresses and v2 TLVs (none, empty without one).
    pub proxy: Option<crate::http::proxy_protocol::ProxyAddrs>,
    pub tlvs: Vec<u8>,
    /// The current request's `sticky` values (used only by upstreams with `sticky`).
    pub sticky: crate::balance::sticky::StickyBufs,
    /// The connection's TLS handshake, on a TLS address.
    pub tls: Option<crate::tls::TlsFacts>,
    /// The head an error page routes again, and what the current request's error pages did.
    pub pages: crate::proxy::error_page::PageBufs,
}

/// What a connection keeps of its buffers while it waits for its next request holding none: the facts of the
/// connection (its `$connection` number, PROXY protocol addresses, TLS handshake, last access-log ticket), not of
/// one request.
#[derive(Debug, Default)]
pub struct ConnFacts {
    connection: u64,
    named_ticket: u64,
    routed: u64,
    proxy: Option<crate::http::proxy_protocol::ProxyAddrs>,
    tlvs: Vec<u8>,
    tls: Option<crate::tls::TlsFacts>,
}

impl ConnFacts {
    /// The ticket of the connection's last line to a log path with variables (0: none).
    pub fn named_ticket(&self) -> u64 {
        self.named_ticket
    }
}

impl Buffers {
    /// Takes the connection's facts out, leaving the buffers fit for any connection.
    pub fn take_facts(&mut self) -> ConnFacts {
        ConnFacts {
            connection: self.log.connection,
            named_ticket: self.log.named_ticket,
            routed: self.log.routed,
            proxy: self.proxy.take(),
            tlvs: std::mem::take(&mut self.tlvs),
            tls: self.tls.take(),
        }
    }

    /// Puts a connection's facts into these buffers (a husk, or a set taken from the shard for its next request).
    pub fn put_facts(&mut self, f: ConnFacts) {
        self.log.new_connection(f.connection);
        self.log.named_ticket = f.named_ticket;
        self.log.routed = f.routed;
        self.proxy = f.proxy;
        // the spare buffers' own (empty) TLV vector is dropped; an empty one owns no memory
        self.tlvs = f.tlvs;
        self.tls = f.tls;
    }

    /// Buffers with no heap of their own (every buffer empty, a client buffer of 0 bytes), to carry an idle
    /// connection's facts.
    pub(super) fn husk() -> Self {
        Buffers {
            client: IoBuf::new(0),
            upstream: IoBuf::new(0),
            out: Vec::new(),
            request: Vec::new(),
            key: Vec::new(),
            scratch: Vec::new(),
            uri: Vec::new(),
            path: Vec::new(),
            redirect: Vec::new(),
            log: RequestRecord::default(),
            captures: Captures::default(),
            server_captures: Captures::default(),
            rewrite: Vec::new(),
            vars: VarCache::default(),
            answer: Vec::new(),
            proxy_url: Vec::new(),
            headers: Prepared::default(),
            proxy: None,
            tlvs: Vec::new(),
            sticky: Default::default(),
            tls: None,
            pages: Default::default(),
        }
    }

    pub(super) fn new(client_size: usize) -> Self {
        Buffers {
            client: IoBuf::new(client_size),
            upstream: IoBuf::new(32 * 1024),
            out: Vec::with_capacity(16 * 1024),
            request: Vec::with_capacity(4096),
            key: Vec::with_capacity(256),
            scratch: Vec::with_capacity(256),
            uri: Vec::with_capacity(256),
            path: Vec::with_capacity(256),
            redirect: Vec::with_capacity(256),
            log: RequestRecord::default(),
            captures: Captures::default(),
            server_captures: Captures::default(),
            rewrite: Vec::with_capacity(256),
            vars: VarCache::default(),
            answer: Vec::new(),
            proxy_url: Vec::new(),
            headers: Prepared::default(),
            proxy: None,
            tlvs: Vec::new(),
            sticky: Default::default(),
            tls: None,
            pages: Default::default(),
        }
    }
}
