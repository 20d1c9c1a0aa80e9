//! `$request_body` on the request path: a location that reads it ([`LocationPlan::body_var`], known at load) has
//! its request's body read into the client buffer, behind the head, before its values are evaluated; the body then
//! goes upstream from there as any body already read. A chunked body is held the same way (its framing in the
//! client buffer) and its data copied once, whole, into [`HeldBody::data`] (at most [`MAX_HELD`] bytes, in a buffer
//! of the connection's that only such requests fill). A body that cannot be held (larger than [`MAX_HELD`] or than
//! the buffer, or one the client sends only after `100 Continue`) leaves the variable empty and is streamed, as
//! nginx leaves it empty for a body kept in a temporary file. An error page after a proxied request reads the body
//! that went upstream ([`HeldBody::keep_for_page`]).

use crate::http::chunked::ChunkedDecoder;
use crate::http::request::RequestHead;
use crate::http::BodyFraming;
use crate::snapshot::request_body::MAX_HELD;
use crate::snapshot::route::LocationPlan;

/// The request body `$request_body` reads when it is not a slice of the client buffer: a chunked body's data, or
/// (for an error page) the body sent upstream. Empty, with no heap, on a connection whose requests never need it.
#[derive(Debug, Default)]
pub struct HeldBody {
    /// The body's bytes, when `ready`.
    pub data: Vec<u8>,
    /// `data` is the current request's body.
    pub ready: bool,
    /// Where the body sent upstream whole starts in the upstream request (`Buffers::request`), if it was.
    pub in_request: Option<usize>,
}

impl HeldBody {
    /// Forgets the last request's body (its bytes stay allocated for the next one).
    pub fn clear(&mut self) {
        self.ready = false;
        self.in_request = None;
    }

    /// For an error page after a proxied request: the body that went upstream whole (the tail of `request` from
    /// [`HeldBody::in_request`]), when it is at most [`MAX_HELD`] bytes; else the variable is empty.
    pub fn keep_for_page(&mut self, request: &[u8]) {
        self.data.clear();
        let body = self.in_request.and_then(|at| request.get(at..)).unwrap_or_default();
        self.ready = body.len() as u64 <= MAX_HELD;
        if self.ready {
            self.data.extend_from_slice(body);
        }
    }

    /// The body a routing pass reads: `data` when ready, else empty.
    pub fn text(&self) -> &[u8] {
        if self.ready {
            &self.data
        } else {
            b""
        }
    }

    /// Copies the data of the chunked body whole in `raw` (what follows its head) into `data`.
    fn dechunk(&mut self, raw: &[u8]) {
        self.data.clear();
        let mut decoder = ChunkedDecoder::new();
        let data = &mut self.data;
        self.ready = decoder.feed(raw, |d| data.extend_from_slice(d)).is_ok() && decoder.is_done();
    }
}

/// What routing does about the body before a location's values are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyWait {
    /// Route now.
    No,
    /// Read more of the body first.
    More,
    /// The chunked body is all here: copy its data ([`take_chunked`]), then route again.
    Dechunk,
}

/// The length of a body that can be held in a buffer of `capacity` bytes behind its head.
fn holdable(head: &RequestHead<'_, '_>, capacity: usize) -> Option<usize> {
    match head.body {
        BodyFraming::Length(n) if n > 0 && n <= MAX_HELD && !head.expect_continue => usize::try_from(n)
            .ok()
            .filter(|n| head.head_len.saturating_add(*n) <= capacity),
        _ => None,
    }
}

/// The request's body, when it is whole in `readable` (the client buffer from the head on), else empty.
pub fn held<'a>(head: &RequestHead<'_, '_>, readable: &'a [u8], capacity: usize) -> &'a [u8] {
    holdable(head, capacity)
        .and_then(|n| readable.get(head.head_len..head.head_len + n))
        .unwrap_or_default()
}

/// Whether routing waits for more of the body (or copies a chunked one first): `loc` reads `$request_body` and
/// the body can be held but is not all in `readable` yet. `body` is the connection's [`HeldBody`].
pub fn must_wait(
    loc: Option<&LocationPlan>,
    head: &RequestHead<'_, '_>,
    readable: &[u8],
    capacity: usize,
    body: &HeldBody,
) -> BodyWait {
    if !loc.is_some_and(|l| l.body_var) {
        return BodyWait::No;
    }
    match head.body {
        BodyFraming::Chunked if !head.expect_continue && !body.ready => chunked_wait(readable, head.head_len, capacity),
        BodyFraming::Chunked => BodyWait::No,
        _ => match holdable(head, capacity) {
            Some(n) if readable.len() < head.head_len.saturating_add(n) => BodyWait::More,
            _ => BodyWait::No,
        },
    }
}

/// How far the chunked body after the head in `readable` is: all here, worth waiting for (more room in the buffer,
/// at most [`MAX_HELD`] data bytes so far), or not to be held (malformed, too large: streamed as is).
fn chunked_wait(readable: &[u8], head_len: usize, capacity: usize) -> BodyWait {
    let mut decoder = ChunkedDecoder::new();
    let mut data = 0u64;
    let raw = readable.get(head_len..).unwrap_or_default();
    if decoder.feed(raw, |d| data += d.len() as u64).is_err() || data > MAX_HELD {
        return BodyWait::No;
    }
    match decoder.is_done() {
        true => BodyWait::Dechunk,
        false if readable.len() < capacity => BodyWait::More,
        false => BodyWait::No,
    }
}

/// Copies the data of the chunked body after the head (`head_len` bytes of `readable`) into `body`.
pub fn take_chunked(body: &mut HeldBody, readable: &[u8], head_len: usize) {
    body.dechunk(readable.get(head_len..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{parse_request, MAX_HEADERS};

    fn body_of(raw: &[u8], capacity: usize) -> Vec<u8> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = parse_request(raw, &mut hs).unwrap().unwrap();
        held(&head, raw, capacity).to_vec()
    }

    #[test]
    fn held_only_when_whole_and_small() {
        let raw = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody";
        assert_eq!(body_of(raw, 1024), b"body");
        assert_eq!(body_of(&raw[..raw.len() - 1], 1024), b"", "not all here");
        assert_eq!(body_of(raw, 40), b"", "larger than the buffer");
        let chunked = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n";
        assert_eq!(body_of(chunked, 1024), b"", "a chunked body is copied, not a slice");
        let expect = b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody";
        assert_eq!(body_of(expect, 1024), b"");
    }

    #[test]
    fn a_chunked_body_is_waited_for_then_copied_without_its_framing() {
        let head = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
        let whole = [&head[..], b"4;x=1\r\nbody\r\n2\r\n!!\r\n0\r\nT: v\r\n\r\nGET /next"].concat();
        let n = head.len();
        assert_eq!(chunked_wait(&whole, n, 1024), BodyWait::Dechunk);
        assert_eq!(chunked_wait(&whole[..n + 12], n, 1024), BodyWait::More);
        assert_eq!(
            chunked_wait(&whole[..n + 12], n, n + 12),
            BodyWait::No,
            "the buffer is full"
        );
        assert_eq!(
            chunked_wait(&[&head[..], b"zz\r\n"].concat(), n, 1024),
            BodyWait::No,
            "malformed"
        );
        let mut body = HeldBody::default();
        take_chunked(&mut body, &whole, n);
        assert_eq!(body.text(), b"body!!");
        body.clear();
        assert_eq!(body.text(), b"");
    }

    #[test]
    fn an_error_page_reads_the_body_sent_upstream() {
        let mut body = HeldBody {
            in_request: Some(5),
            ..HeldBody::default()
        };
        body.keep_for_page(b"HEAD\nbody");
        assert_eq!(body.text(), b"body");
        body.clear();
        body.keep_for_page(b"HEAD\nbody");
        assert_eq!(body.text(), b"", "no body went whole");
    }
}
