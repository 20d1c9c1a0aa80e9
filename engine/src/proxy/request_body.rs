//! `$request_body` on the request path: a location that reads it ([`LocationPlan::body_var`], known at load) has
//! its request's body read into the client buffer, behind the head, before its values are evaluated; the body then
//! goes upstream from there as any body already read. A body of known length is read there as it is; a chunked
//! one has its framing there and its data copied once, whole, into [`HeldBody::data`] (a buffer of the
//! connection's that only such requests fill). nginx keeps a body in memory when it fits the location's
//! `client_body_buffer_size` (a length under the size and a quarter, chunked data up to the size) and in a
//! temporary file otherwise, where the variable is empty; corelb holds what nginx keeps in memory and fits the
//! client buffer with its head, and leaves the variable empty for the rest (streamed), as for a body the client
//! sends only after `100 Continue`. An error page after a proxied request reads the body that went upstream whole
//! ([`HeldBody::keep_for_page`]).

use crate::http::chunked::ChunkedDecoder;
use crate::http::request::RequestHead;
use crate::http::BodyFraming;
use crate::snapshot::route::LocationPlan;

/// Where the current request's body for `$request_body` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Held {
    /// Not held: the variable is empty.
    #[default]
    No,
    /// This many bytes after the head in the client buffer (a body of known length).
    InClient(usize),
    /// In [`HeldBody::data`] (a chunked body's data, the body an error page reads).
    Copied,
}

/// The request body `$request_body` reads: where it is, and a chunked body's data (or, for an error page, the body
/// sent upstream). `data` has no heap on a connection whose requests never need it.
#[derive(Debug, Default)]
pub struct HeldBody {
    held: Held,
    data: Vec<u8>,
    /// Where the body sent upstream whole starts in the upstream request (`Buffers::request`), when it was kept in
    /// memory as nginx keeps it.
    pub in_request: Option<usize>,
}

impl HeldBody {
    /// Forgets the last request's body (its bytes stay allocated for the next one).
    pub fn clear(&mut self) {
        self.held = Held::No;
        self.in_request = None;
    }

    /// Whether the current request's body is held (routing goes on with it).
    pub fn ready(&self) -> bool {
        self.held != Held::No
    }

    /// Forgets where the body is, keeping what went upstream for an error page.
    pub fn unhold(&mut self) {
        self.held = Held::No;
    }

    /// For an error page after a proxied request: the body that went upstream whole (the tail of `request` from
    /// [`HeldBody::in_request`]); else the variable is empty.
    pub fn keep_for_page(&mut self, request: &[u8]) {
        self.data.clear();
        self.held = match self.in_request.and_then(|at| request.get(at..)) {
            Some(body) => {
                self.data.extend_from_slice(body);
                Held::Copied
            }
            None => Held::No,
        };
    }

    /// The body a routing pass reads; `after_head`: the client buffer from the end of the head on (the first pass
    /// only, `None` after the head was consumed).
    pub fn text<'a>(&'a self, after_head: Option<&'a [u8]>) -> &'a [u8] {
        match (self.held, after_head) {
            (Held::InClient(n), Some(rest)) => rest.get(..n).unwrap_or_default(),
            (Held::Copied, _) => &self.data,
            _ => b"",
        }
    }
}

/// The connection's [`HeldBody`], made on first use: a connection (its recycled buffers) whose requests never read
/// `$request_body` nor meet an error page after a held body has none, and the buffers stay small.
#[derive(Debug, Default)]
pub struct BodySlot(Option<Box<HeldBody>>);

impl BodySlot {
    fn made(&mut self) -> &mut HeldBody {
        self.0.get_or_insert_with(Box::default)
    }

    /// Whether the current request's body is held.
    pub fn ready(&self) -> bool {
        self.0.as_deref().is_some_and(HeldBody::ready)
    }

    /// See [`HeldBody::clear`].
    pub fn clear(&mut self) {
        if let Some(b) = self.0.as_deref_mut() {
            b.clear();
        }
    }

    /// See [`HeldBody::unhold`].
    pub fn unhold(&mut self) {
        if let Some(b) = self.0.as_deref_mut() {
            b.unhold();
        }
    }

    /// See [`HeldBody::text`].
    pub fn text<'a>(&'a self, after_head: Option<&'a [u8]>) -> &'a [u8] {
        self.0.as_deref().map_or(b"", |b| b.text(after_head))
    }

    /// See [`HeldBody::keep_for_page`].
    pub fn keep_for_page(&mut self, request: &[u8]) {
        if let Some(b) = self.0.as_deref_mut() {
            b.keep_for_page(request);
        }
    }

    /// Notes where the body sent upstream whole starts in the upstream request, for an error page (`pages`: the
    /// location has some; else nothing is kept).
    pub fn sent_at(&mut self, at: Option<usize>, pages: bool) {
        match (at, pages) {
            (Some(at), true) => self.made().in_request = Some(at),
            _ => {
                if let Some(b) = self.0.as_deref_mut() {
                    b.in_request = None;
                }
            }
        }
    }
}

/// What routing does about the body before a location's values are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyWait {
    /// Route now.
    No,
    /// Read more of the body first.
    More,
    /// The body is all here: hold it ([`hold`]), then route again.
    Hold,
}

/// The most body bytes nginx keeps in memory under `client_body_buffer_size` `size`, beyond what came with the head:
/// a length under the size and a quarter (its buffer is then the body's size), chunked data up to the size (its
/// buffer is the size).
pub fn in_memory(size: u64, framing: BodyFraming) -> u64 {
    match framing {
        BodyFraming::Chunked => size,
        _ => (size + size / 4).saturating_sub(1),
    }
}

/// The client buffer a body is read into.
#[derive(Clone, Copy)]
pub struct Room<'a> {
    /// Its bytes from the head on.
    pub readable: &'a [u8],
    pub capacity: usize,
    /// The size of the address's first header buffer (`client_header_buffer_size`): nginx reads the start of a
    /// body with the head into it and keeps that part in memory whatever its size.
    pub first_buffer: usize,
}

/// Whether routing waits for more of the body (or holds it first): `loc` reads `$request_body` and the body can be
/// held but is not yet.
pub fn must_wait(loc: Option<&LocationPlan>, head: &RequestHead<'_, '_>, room: Room<'_>, body: &BodySlot) -> BodyWait {
    let Some(loc) = loc.filter(|l| l.body_var) else {
        return BodyWait::No;
    };
    if body.ready() || head.expect_continue {
        return BodyWait::No;
    }
    let preread = room.first_buffer.saturating_sub(head.head_len) as u64;
    let max = in_memory(loc.client.client_body_buffer_size, head.body).saturating_add(preread);
    let (readable, capacity) = (room.readable, room.capacity);
    match head.body {
        BodyFraming::Length(n) if n > 0 && n <= max => {
            match usize::try_from(n).ok().map(|n| head.head_len.saturating_add(n)) {
                Some(end) if end <= capacity && readable.len() < end => BodyWait::More,
                Some(end) if end <= capacity => BodyWait::Hold,
                _ => BodyWait::No,
            }
        }
        BodyFraming::Chunked => chunked_wait(readable, head.head_len, capacity, max),
        _ => BodyWait::No,
    }
}

/// How far the chunked body after the head in `readable` is: all here, worth waiting for (more room in the buffer,
/// at most `max` data bytes so far), or not to be held (malformed, too large: streamed as is).
fn chunked_wait(readable: &[u8], head_len: usize, capacity: usize, max: u64) -> BodyWait {
    let mut decoder = ChunkedDecoder::new();
    let mut data = 0u64;
    let raw = readable.get(head_len..).unwrap_or_default();
    if decoder.feed(raw, |d| data += d.len() as u64).is_err() || data > max {
        return BodyWait::No;
    }
    match decoder.is_done() {
        true => BodyWait::Hold,
        false if readable.len() < capacity => BodyWait::More,
        false => BodyWait::No,
    }
}

/// Holds the body after the head (`head_len` bytes of `readable`), all there as [`must_wait`] found it: a length
/// where it is, a chunked body's data copied into `slot`.
pub fn hold(slot: &mut BodySlot, framing: BodyFraming, readable: &[u8], head_len: usize) {
    hold_in(slot.made(), framing, readable, head_len);
}

fn hold_in(body: &mut HeldBody, framing: BodyFraming, readable: &[u8], head_len: usize) {
    let raw = readable.get(head_len..).unwrap_or_default();
    body.held = match framing {
        BodyFraming::Length(n) => usize::try_from(n).map_or(Held::No, Held::InClient),
        BodyFraming::Chunked => {
            body.data.clear();
            let mut decoder = ChunkedDecoder::new();
            let data = &mut body.data;
            match decoder.feed(raw, |d| data.extend_from_slice(d)) {
                Ok(_) if decoder.is_done() => Held::Copied,
                _ => Held::No,
            }
        }
        _ => Held::No,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

    #[test]
    fn a_chunked_body_is_waited_for_then_copied_without_its_framing() {
        let whole = [HEAD, b"4;x=1\r\nbody\r\n2\r\n!!\r\n0\r\nT: v\r\n\r\nGET /next"].concat();
        let n = HEAD.len();
        assert_eq!(chunked_wait(&whole, n, 1024, 16), BodyWait::Hold);
        assert_eq!(
            chunked_wait(&whole, n, 1024, 5),
            BodyWait::No,
            "more data than nginx keeps in memory"
        );
        assert_eq!(chunked_wait(&whole[..n + 12], n, 1024, 16), BodyWait::More);
        assert_eq!(
            chunked_wait(&whole[..n + 12], n, n + 12, 16),
            BodyWait::No,
            "the buffer is full"
        );
        assert_eq!(
            chunked_wait(&[HEAD, b"zz\r\n"].concat(), n, 1024, 16),
            BodyWait::No,
            "malformed"
        );
        let mut body = HeldBody::default();
        hold_in(&mut body, BodyFraming::Chunked, &whole, n);
        assert_eq!(body.text(None), b"body!!");
        body.clear();
        assert_eq!(body.text(None), b"");
    }

    #[test]
    fn a_body_of_known_length_is_read_where_it_is() {
        let raw = b"HEADbodyNEXT";
        let mut body = HeldBody::default();
        hold_in(&mut body, BodyFraming::Length(4), raw, 4);
        assert_eq!(body.text(Some(&raw[4..])), b"body");
        assert_eq!(body.text(None), b"", "not once the head is consumed");
    }

    #[test]
    fn an_error_page_reads_the_body_sent_upstream() {
        let mut slot = BodySlot::default();
        slot.sent_at(Some(5), false);
        slot.keep_for_page(b"HEAD\nbody");
        assert_eq!(slot.text(None), b"", "no error pages: nothing kept, nothing made");
        assert!(slot.0.is_none());
        slot.sent_at(Some(5), true);
        slot.keep_for_page(b"HEAD\nbody");
        assert_eq!(slot.text(None), b"body");
        slot.clear();
        slot.keep_for_page(b"HEAD\nbody");
        assert_eq!(slot.text(None), b"", "no body went whole");
    }
}
