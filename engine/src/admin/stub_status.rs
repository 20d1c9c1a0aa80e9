//! nginx's `stub_status` page (`ngx_http_stub_status_module`): the connection and request counters of every shard,
//! summed, in nginx's exact text.

use super::{AdminRequest, AdminResponse};
use crate::http::pages::{append_decimal, append_error_page, SERVER_FULL};
use crate::state::Shared;
use corelb_shared_state::ShardStats;

/// The counters the page shows, over all shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StubCounts {
    /// Client connections open now (http and stream, as nginx counts every connection).
    pub active: u64,
    /// Client connections accepted.
    pub accepts: u64,
    /// Client connections handled (corelb handles every connection it accepts).
    pub handled: u64,
    /// HTTP requests begun.
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

impl StubCounts {
    /// The sum of every shard's counters.
    pub fn sum(shards: &[ShardStats]) -> StubCounts {
        shards.iter().fold(StubCounts::default(), |t, s| StubCounts {
            active: t.active + s.active,
            accepts: t.accepts + s.accepted,
            handled: t.handled + s.accepted,
            requests: t.requests + s.http_requests,
            reading: t.reading + s.reading,
            writing: t.writing + s.writing,
            waiting: t.waiting + s.waiting,
        })
    }

    /// The running process's counts.
    pub fn take(shared: &Shared) -> StubCounts {
        StubCounts::sum(&shared.zone.shard_stats())
    }

    /// The page, byte for byte as nginx writes it.
    pub fn page(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"Active connections: ");
        append_decimal(&mut out, self.active);
        out.extend_from_slice(b" \nserver accepts handled requests\n ");
        for n in [self.accepts, self.handled, self.requests] {
            append_decimal(&mut out, n);
            out.push(b' ');
        }
        out.extend_from_slice(b"\nReading: ");
        append_decimal(&mut out, self.reading);
        out.extend_from_slice(b" Writing: ");
        append_decimal(&mut out, self.writing);
        out.extend_from_slice(b" Waiting: ");
        append_decimal(&mut out, self.waiting);
        out.extend_from_slice(b" \n");
        out
    }
}

/// Answers a request to a `stub_status` location: the page for GET and HEAD, nginx's 405 page otherwise.
pub fn handle(shared: &Shared, req: &AdminRequest<'_>) -> AdminResponse {
    if req.method != "GET" && req.method != "HEAD" {
        let mut body = Vec::new();
        append_error_page(405, SERVER_FULL, &mut body);
        return AdminResponse {
            status: 405,
            content_type: "text/html",
            allow: None,
            body,
        };
    }
    AdminResponse {
        status: 200,
        content_type: "text/plain",
        allow: None,
        body: StubCounts::take(shared).page(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_nginx_text_of_the_summed_shards() {
        let a = ShardStats {
            accepted: 7,
            active: 3,
            requests: 9,
            http_requests: 11,
            reading: 1,
            writing: 1,
            waiting: 0,
            ..ShardStats::default()
        };
        let b = ShardStats {
            accepted: 5,
            active: 2,
            http_requests: 4,
            writing: 1,
            waiting: 1,
            ..ShardStats::default()
        };
        let page = StubCounts::sum(&[a, b]).page();
        assert_eq!(
            String::from_utf8(page).unwrap(),
            "Active connections: 5 \nserver accepts handled requests\n 12 12 15 \nReading: 1 Writing: 2 Waiting: 1 \n"
        );
        let zero = StubCounts::sum(&[]).page();
        assert_eq!(
            zero,
            b"Active connections: 0 \nserver accepts handled requests\n 0 0 0 \nReading: 0 Writing: 0 Waiting: 0 \n"
        );
    }
}
