//! What one request leaves for its access log line: the request-time values captured (already escaped) when the
//! head was read, the answer's status and sizes, and the upstream tries (peer, status, times). One record lives
//! in each connection's reused buffers: nothing is allocated per request once it has grown.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The peer of one upstream try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryPeer {
    Addr(SocketAddr),
    /// No live peer was left: nginx writes the upstream's name (index into the snapshot's http plans).
    Upstream(usize),
}

/// One upstream try, as nginx's `ngx_http_upstream_state_t` keeps it.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamTry {
    pub peer: TryPeer,
    /// 0 until a status is known (written `-`).
    pub status: u16,
    pub started: Instant,
    pub connect: Option<Duration>,
    pub header: Option<Duration>,
    /// Set when the next try starts, or when the line is written.
    pub response: Option<Duration>,
    /// `$upstream_bytes_sent`: the request bytes written to the peer.
    pub bytes_sent: u64,
    /// `$upstream_bytes_received`: the bytes read from the peer (head and body).
    pub bytes_received: u64,
    /// `$upstream_response_length`: the body bytes read from the peer.
    pub response_length: u64,
}

/// One request's log facts.
#[derive(Debug)]
pub struct RequestRecord {
    /// Index of the snapshot's access log set for this request; 0 = nothing is logged.
    pub set: usize,
    /// The tries, start and length are kept for the answer's head (an `add_header` names them) though nothing is
    /// logged.
    pub(crate) for_head: bool,
    pub started: Instant,
    /// `$connection` and `$connection_requests`.
    pub connection: u64,
    pub requests: u64,
    /// `$request_length`: the head plus a body of known length.
    pub request_length: u64,
    pub status: u16,
    pub header_bytes: u64,
    pub body_bytes: u64,
    /// Request-time values of every format of the set, escaped, one after the other.
    pub values: Vec<u8>,
    /// Where each captured value ends in `values`.
    pub ends: Vec<usize>,
    /// A value before escaping.
    pub raw: Vec<u8>,
    pub tries: Vec<UpstreamTry>,
    /// The header variables the set's lines name (`$sent_http_*`, `$upstream_http_*`, `$upstream_cookie_*`).
    pub header_vars: Option<std::sync::Arc<[crate::config::key::Var]>>,
    /// Their values as the answer's head had them, one after the other.
    pub headers: Vec<u8>,
    /// Where each header value ends in `headers`, and whether it was there.
    pub header_ends: Vec<(usize, bool)>,
    /// The number of the connection's last line to a path with variables (0: none), which the connection waits
    /// to be written before it closes, as nginx writes the line before it closes.
    pub named_ticket: u64,
    /// The number on its connection of the last request routed ([`RequestRecord::begin`]).
    pub routed: u64,
}

impl Default for RequestRecord {
    fn default() -> Self {
        RequestRecord {
            set: 0,
            for_head: false,
            started: Instant::now(),
            connection: 0,
            requests: 0,
            request_length: 0,
            status: 0,
            header_bytes: 0,
            body_bytes: 0,
            values: Vec::with_capacity(512),
            ends: Vec::with_capacity(16),
            raw: Vec::with_capacity(128),
            tries: Vec::with_capacity(4),
            header_vars: None,
            headers: Vec::new(),
            header_ends: Vec::new(),
            named_ticket: 0,
            routed: 0,
        }
    }
}

impl RequestRecord {
    /// A new connection (`$connection`) takes these buffers: nothing of an earlier one is logged.
    pub fn new_connection(&mut self, id: u64) {
        self.connection = id;
        self.set = 0;
        self.named_ticket = 0;
        self.routed = 0;
    }

    /// Starts a request logged to `set` (0: not logged, and nothing more is recorded).
    pub fn begin(&mut self, set: usize, requests: u64, request_length: u64) {
        self.set = set;
        self.routed = requests;
        self.for_head = false;
        self.status = 0;
        self.header_bytes = 0;
        self.body_bytes = 0;
        self.values.clear();
        self.ends.clear();
        self.tries.clear();
        self.header_vars = None;
        self.header_ends.clear();
        if set != 0 {
            self.started = Instant::now();
            self.requests = requests;
            self.request_length = request_length;
        }
    }

    /// Keeps the tries, the start and the length of a request that is not logged (`set` 0), for the answer's head
    /// (`add_header X-IP $upstream_addr`).
    pub fn keep_for_head(&mut self, requests: u64, request_length: u64) {
        if self.set == 0 && !self.for_head {
            self.for_head = true;
            self.started = Instant::now();
            self.requests = requests;
            self.request_length = request_length;
        }
    }

    /// The answer sent to the client: its status, head and body sizes.
    pub fn answered(&mut self, status: u16, header_bytes: usize, body_bytes: u64) {
        self.status = status;
        self.header_bytes = header_bytes as u64;
        self.body_bytes = body_bytes;
    }

    /// A try against `peer` starts (the previous one's response time ends here, as in nginx).
    pub fn try_start(&mut self, peer: TryPeer) {
        if self.set == 0 && !self.for_head {
            return;
        }
        let now = Instant::now();
        if let Some(last) = self.tries.last_mut() {
            last.response.get_or_insert(now.saturating_duration_since(last.started));
        }
        self.tries.push(UpstreamTry {
            peer,
            status: 0,
            started: now,
            connect: None,
            header: None,
            response: None,
            bytes_sent: 0,
            bytes_received: 0,
            response_length: 0,
        });
    }

    /// The current try reached its peer (connected, or took a kept-alive connection).
    pub fn try_connected(&mut self) {
        if let Some(t) = self.tries.last_mut() {
            t.connect = Some(t.started.elapsed());
        }
    }

    /// The current try read a response head with `status`.
    pub fn try_header(&mut self, status: u16) {
        if let Some(t) = self.tries.last_mut() {
            t.header = Some(t.started.elapsed());
            t.status = status;
        }
    }

    /// The current try wrote `n` request bytes to its peer.
    pub fn try_sent(&mut self, n: u64) {
        if let Some(t) = self.tries.last_mut() {
            t.bytes_sent = n;
        }
    }

    /// The current try's answer was passed on: `received` bytes read from the peer, `body` of them the body.
    pub fn try_received(&mut self, received: u64, body: u64) {
        if let Some(t) = self.tries.last_mut() {
            t.bytes_received = received;
            t.response_length = body;
        }
    }

    /// The current try failed; nginx records 504 for a timeout and 502 otherwise.
    pub fn mark_failed(&mut self, timeout: bool) {
        if let Some(t) = self.tries.last_mut() {
            t.status = if timeout { 504 } else { 502 };
        }
    }

    /// No live peer: nginx's try with the upstream's name and a 502.
    pub fn no_live(&mut self, upstream: usize) {
        self.try_start(TryPeer::Upstream(upstream));
        self.mark_failed(false);
    }

    /// Closes the last try's response time at `now` (when the line is written).
    pub fn finish_tries(&mut self, now: Instant) {
        if let Some(last) = self.tries.last_mut() {
            last.response.get_or_insert(now.saturating_duration_since(last.started));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_close_their_response_time_at_the_next_try() {
        let mut r = RequestRecord::default();
        r.begin(1, 1, 40);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        r.try_start(TryPeer::Addr(a));
        r.mark_failed(false);
        assert!(r.tries[0].response.is_none());
        r.try_start(TryPeer::Addr(a));
        r.try_connected();
        r.try_header(200);
        assert!(r.tries[0].response.is_some() && r.tries[0].connect.is_none());
        assert_eq!((r.tries[0].status, r.tries[1].status), (502, 200));
        r.finish_tries(Instant::now());
        assert!(r.tries[1].response.is_some() && r.tries[1].header.is_some());
        r.begin(0, 2, 0);
        r.no_live(3);
        assert!(r.tries.is_empty(), "a request that is not logged records no tries");
        r.begin(1, 2, 0);
        r.no_live(3);
        assert_eq!(r.tries[0].peer, TryPeer::Upstream(3));
        assert_eq!(r.tries[0].status, 502);
        r.begin(0, 3, 0);
        r.keep_for_head(3, 70);
        r.try_start(TryPeer::Addr(a));
        assert_eq!(
            (r.tries.len(), r.request_length),
            (1, 70),
            "kept for the head, though not logged"
        );
        r.begin(0, 4, 0);
        r.try_start(TryPeer::Addr(a));
        assert!(r.tries.is_empty(), "the next request keeps nothing unless asked again");
    }
}
