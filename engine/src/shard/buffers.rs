//! A connection's buffers (client and upstream reads, the answer, the upstream request, keys, the normalized
//! path, the access log record), recycled by its shard so a request allocates nothing once they have grown, and
//! the husk (no heap) that carries the connection's few facts when it closes after a keepalive wait.

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
    /// `$http2` of the HTTP/2 stream these buffers serve (`h2`, `h2c`); none on an HTTP/1 connection.
    pub http2: Option<&'static str>,
    /// Where the HTTP/2 stream's flow says its location's `http2_chunk_size` (read by the stream's relay).
    pub http2_chunk: Option<std::rc::Rc<std::cell::Cell<u32>>>,
    /// The head an error page routes again, and what the current request's error pages did.
    pub pages: crate::proxy::error_page::PageBufs,
    /// The current request's `limit_conn` units (given back when it ends).
    pub limits: Vec<corelb_shared_state::ConnUnit>,
    /// The current request went through a level with limits: [`Buffers::end_limits`] has something to undo.
    pub limited: bool,
    /// The charset filter's variable values and recoding buffers (empty unless a location recodes).
    pub charset: Option<Box<crate::snapshot::charset::CharsetScratch>>,
    /// The current request's body for `$request_body` when it is not a slice of the client buffer (a chunked
    /// body's data, the body an error page reads); no heap unless a location reads the variable.
    pub body: crate::proxy::request_body::BodySlot,
    /// Set when the connection closes after its last answer: how it lingers (the lingering close of the request's
    /// location, or of the default server for a refused head), and whether the request had a body. Read once by the
    /// close, which takes it.
    pub linger: Option<(crate::config::model::Lingering, bool)>,
}

impl Buffers {
    /// The end of a request that went through limits: its `limit_conn` units back (nginx's request pool
    /// cleanup), its `$limit_*_status` unset for the next.
    pub fn end_limits(&mut self) {
        self.limits.clear();
        self.vars.limits.begin();
        self.limited = false;
    }

    /// Buffers with no heap of their own (every buffer empty, a client buffer of 0 bytes), to carry a closing
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
            http2: None,
            http2_chunk: None,
            pages: Default::default(),
            limits: Vec::new(),
            limited: false,
            charset: None,
            body: Default::default(),
            linger: None,
        }
    }

    pub(crate) fn new(client_size: usize) -> Self {
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
            rewrite: Vec::with_capacity(256),
            ..Self::husk()
        }
    }
}
