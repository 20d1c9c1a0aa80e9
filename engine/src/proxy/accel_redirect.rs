//! An upstream's `X-Accel-Redirect` (nginx's `ngx_http_upstream_process_headers`): unless `proxy_ignore_headers
//! X-Accel-Redirect`, an upstream answer with the header is not sent on; the request is redirected internally to
//! its URI (`GET`, a `HEAD` staying `HEAD`) or named location, and the answer there keeps the upstream's
//! `Content-Type`, `Set-Cookie`, `Content-Disposition`, `Cache-Control`, `Expires` and `Accept-Ranges` lines. A
//! URI nginx finds unsafe (`ngx_http_parse_unsafe_uri`: a `..` segment, a NUL, also once unescaped) is a 404.

use super::client::{ClientConn, Routed};
use super::error_page::{pool_if_done, Resume};
use super::exchange::{ResponseInfo, TryTarget};
use crate::access_log::record::{TryPeer, UpstreamTry};
use crate::http::response::{parse_response, MAX_HEADERS};
use crate::runtime::Runtime;

/// The upstream lines the redirect's answer keeps (nginx's `redirect` flag in `ngx_http_upstream_headers_in`).
const KEPT: &[&str] = &[
    "content-type",
    "set-cookie",
    "content-disposition",
    "cache-control",
    "expires",
    "accept-ranges",
];

impl<R: Runtime> ClientConn<R> {
    /// Takes the upstream's answer (its head at the start of the upstream buffer, with an `X-Accel-Redirect`
    /// line) as a redirect: the request is routed again ([`super::error_page::PageState::pending`]); the upstream
    /// connection is kept only when the answer has no body, as after an intercepted one.
    pub(super) fn accel_redirect(&mut self, to: TryTarget<'_, R>, conn: R::Conn, info: &ResponseInfo, req: &Routed) {
        let bufs = &mut self.bufs;
        let head = bufs.upstream.readable().get(..info.head_len).unwrap_or_default();
        let state = &mut bufs.pages.state;
        state.accel_begin();
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        if let Ok(Some(resp)) = parse_response(head, &mut headers, req.head_request) {
            let mut target = None;
            for h in resp.headers {
                if h.name.eq_ignore_ascii_case("x-accel-redirect") {
                    target.get_or_insert(h.value);
                } else if KEPT.iter().any(|k| h.name.eq_ignore_ascii_case(k)) {
                    state.keep_line(h.name, h.value);
                }
            }
            state.accel_target(target.unwrap_or_default());
        }
        bufs.pages.upstream.keep_head(head);
        if bufs.log.tries.is_empty() {
            // nothing logs this location's tries: the redirect's `$upstream_addr`/`$upstream_status` are this one's
            bufs.log.tries.push(UpstreamTry {
                peer: TryPeer::Addr(to.addr),
                status: info.status,
                started: std::time::Instant::now(),
                connect: None,
                header: None,
                response: None,
                bytes_sent: info.sent,
                bytes_received: info.head_len as u64,
                response_length: 0,
            });
        }
        state.pending = Some(Resume {
            status: 404,
            keep: req.keepalive.keeps(),
            location: None,
            accel: true,
        });
        bufs.pages.take_located_head(&bufs.client);
        pool_if_done(to, conn, info, bufs.upstream.readable().len());
    }
}

/// Whether nginx's `ngx_http_parse_unsafe_uri` takes `target` (a URI with optional `?args`): not empty, no `?`
/// first, no `..` segment and no NUL in the path, before or after its `%XX` are decoded.
pub(super) fn safe_uri(target: &[u8]) -> bool {
    if target.first().is_none_or(|&c| c == b'?') {
        return false;
    }
    let path = target.split(|&c| c == b'?').next().unwrap_or_default();
    if !safe_path(path) {
        return false;
    }
    if !path.contains(&b'%') {
        return true;
    }
    safe_path(&unescape(path))
}

/// No `..` segment (at the start or after a `/`) and no NUL.
fn safe_path(path: &[u8]) -> bool {
    let dotdot_at = |i: usize| path.get(i..i + 2) == Some(b"..") && path.get(i + 2).is_none_or(|&c| c == b'/');
    if dotdot_at(0) {
        return false;
    }
    path.iter()
        .enumerate()
        .all(|(i, &c)| c != 0 && !(c == b'/' && dotdot_at(i + 1)))
}

/// `%XX` decoded (a `%` without two hex digits kept as it is).
fn unescape(path: &[u8]) -> Vec<u8> {
    let hex = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while let Some(&c) = path.get(i) {
        let pair = (
            path.get(i + 1).copied().and_then(hex),
            path.get(i + 2).copied().and_then(hex),
        );
        match (c, pair) {
            (b'%', (Some(h), Some(l))) => {
                out.push((h << 4) | l);
                i += 3;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// proxy_xar.t's values, and nginx's other unsafe cases.
    #[test]
    fn unsafe_uris_as_nginx() {
        for ok in ["/index.html", "/foo?bar", "/foo%20bar", "/a/..b", "/a/b..", "/a?x=/../"] {
            assert!(safe_uri(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "?a",
            "..",
            "../foo",
            "/foo/..",
            "/foo/../x",
            "/foo/.%2e",
            "/%2e%2e/x",
            "/a\0b",
            "/a%00",
        ] {
            assert!(!safe_uri(bad.as_bytes()), "{bad:?}");
        }
    }
}
