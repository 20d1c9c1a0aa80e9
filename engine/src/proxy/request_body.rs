//! `$request_body` on the request path: a location that reads it ([`LocationPlan::body_var`], known at load) has
//! its request's body read into the client buffer, behind the head, before its values are evaluated; the body then
//! goes upstream from there as any body already read. A body that cannot be held (no length, chunked, larger than
//! [`MAX_HELD`] or than the buffer, or one the client sends only after `100 Continue`) leaves the variable empty
//! and is streamed, as nginx leaves it empty for a body kept in a temporary file.

use crate::http::request::RequestHead;
use crate::http::BodyFraming;
use crate::snapshot::request_body::MAX_HELD;
use crate::snapshot::route::LocationPlan;

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

/// Whether routing waits for more of the body: `loc` reads `$request_body` and the body can be held but is not
/// all in `readable` yet.
pub fn must_wait(loc: Option<&LocationPlan>, head: &RequestHead<'_, '_>, readable: &[u8], capacity: usize) -> bool {
    loc.is_some_and(|l| l.body_var)
        && holdable(head, capacity).is_some_and(|n| readable.len() < head.head_len.saturating_add(n))
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
        assert_eq!(body_of(chunked, 1024), b"");
        let expect = b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody";
        assert_eq!(body_of(expect, 1024), b"");
    }
}
