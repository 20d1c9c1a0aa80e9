//! nginx's error pages when a request is answered (`ngx_http_special_response_handler`, `ngx_http_send_error_page`,
//! the upstream module's `intercept_errors`): an answer of the kinds nginx sends as special responses (its own
//! errors, `return CODE`, redirects, the upstream's failures, an intercepted upstream error) whose location has a
//! page for its status goes to that page instead: an internal redirect to a URI (the head routed again with `GET`
//! and the page's URI), a named location, or a redirect to a URL. The answer then goes out with the error's status,
//! `=CODE`'s, or (`=`) the page's own.
//!
//! Nothing here runs for a location without `error_page` lines: its plan has none (`None`), checked once.

use super::client::{ClientConn, Routed};
use super::exchange::{ResponseInfo, TryTarget};
use crate::access_log::record::UpstreamTry;
use crate::access_log::upstream_vars::UpstreamVars;
use crate::balance::UpstreamPlan;
use crate::config::error_pages::Overwrite;
use crate::config::key::VarSource;
use crate::http::pages::{append_decimal, reason, sent_status};
use crate::http::response::{parse_response, MAX_HEADERS};
use crate::http::BodyFraming;
use crate::runtime::iobuf::IoBuf;
use crate::runtime::Runtime;
use crate::snapshot::error_pages::{ErrorPagesPlan, PagePlan};
use crate::snapshot::route::{FixedAnswer, LocationPlan, ProxyPlan};
use crate::snapshot::ServerPlan;

/// nginx's `NGX_HTTP_MAX_URI_CHANGES`: the internal redirects a request may take; one more is a 500.
const MAX_REDIRECTS: u8 = 10;

/// A connection's buffers for error pages: the head routed again, and the current request's state.
#[derive(Debug, Default)]
pub struct PageBufs {
    /// The client's head with the request line of the internal redirect (`GET URI HTTP/1.1`), or as it came for a
    /// proxied request whose location has error pages (routed again when the upstream fails).
    pub head: Vec<u8>,
    /// Where a bodiless proxied request's head is in the client buffer (start, length): nothing fills that
    /// buffer until the answer, so [`PageBufs::head`] is copied from there only if an `X-Accel-Redirect` asks.
    head_at: Option<(usize, usize)>,
    pub state: PageState,
    /// The upstream's tries and head, for the `$upstream_*` variables of the route after it answered.
    pub upstream: KeptUpstream,
}

/// What a request routed again after its upstream answered keeps of it (nginx keeps `r->upstream_states` and
/// the upstream's headers across the internal redirect).
#[derive(Debug, Default)]
pub struct KeptUpstream {
    tries: Vec<UpstreamTry>,
    /// The upstream's response head (empty after a failure).
    head: Vec<u8>,
    /// Set for the current request.
    kept: bool,
}

impl KeptUpstream {
    /// Keeps the upstream's response `head` (reusing the buffer).
    pub(super) fn keep_head(&mut self, head: &[u8]) {
        self.kept = true;
        self.head.clear();
        self.head.extend_from_slice(head);
    }

    /// Keeps the request's tries as they are now.
    pub(super) fn keep_tries(&mut self, tries: &[UpstreamTry]) {
        if !self.kept {
            self.head.clear();
        }
        self.kept = true;
        self.tries.clear();
        self.tries.extend_from_slice(tries);
    }

    /// The variables over what is kept (`None` when nothing is: the request's first routing).
    pub(super) fn vars<'a>(&'a self, plans: &'a [UpstreamPlan]) -> Option<UpstreamVars<'a>> {
        self.kept.then_some(UpstreamVars {
            tries: &self.tries,
            head: &self.head,
            plans,
        })
    }
}

/// What the current request's error pages did so far.
#[derive(Debug, Default)]
pub struct PageState {
    /// The status the answer goes out with (nginx's `err_status`); 0: the answer's own.
    status: u16,
    /// Internal redirects to error pages taken.
    redirects: u8,
    /// A page was taken and `recursive_error_pages` is off (nginx's `r->error_page`): no other page.
    done: bool,
    /// Set by the proxy path: the request goes to the page for this status.
    pub pending: Option<Resume>,
    /// After a proxied error, the request's body is gone (read, or the connection is not kept).
    body_gone: bool,
    /// Whether the connection may stay open after the page (the body of the proxied request was read).
    keep: bool,
    /// `WWW-Authenticate` lines of an intercepted 401 (nginx keeps them on the page's answer, ticket #485), or the
    /// upstream lines an `X-Accel-Redirect` keeps.
    kept: Vec<u8>,
    /// The `Content-Type` an `X-Accel-Redirect` keeps (empty: none): it replaces the answer's own.
    kept_type: Vec<u8>,
    /// The page's URI (with its `?args`), or its URL.
    target: Vec<u8>,
    /// The page taken is a URL: [`PageState::target`] is the redirect's `Location`.
    url: bool,
    /// Anything above was set for the current request.
    used: bool,
}

/// A proxied request whose upstream answer (or failure) goes to an error page.
#[derive(Debug, Clone, Copy)]
pub struct Resume {
    pub status: u16,
    /// The connection may stay open (the request's body was read).
    pub keep: bool,
    /// The proxying location's index in its server (whose pages apply).
    pub location: Option<usize>,
    /// An `X-Accel-Redirect` to [`PageState::target`] rather than a page (`status`: the answer when its URI is
    /// unsafe).
    pub accel: bool,
}

/// Which head a routing pass reads, and where it starts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pass<'s> {
    /// The client's head, in the client buffer.
    First,
    /// [`PageBufs::head`], after an internal redirect to a URI: the phases from the server's rewrites.
    Internal,
    /// [`PageBufs::head`], to a named location: the phases from its rewrites.
    Named(&'s LocationPlan),
    /// [`PageBufs::head`] of a proxied request, to the page for the upstream's status.
    Resume(Resume),
    /// [`PageBufs::head`] of a proxied request whose upstream answered `X-Accel-Redirect` (to
    /// [`PageState::target`]).
    Accel,
}

/// Where a page sends the request.
pub(super) enum Go<'s> {
    /// An internal redirect to the URI now in [`PageState::target`].
    Uri,
    Named(&'s LocationPlan),
    /// A redirect to the URL now in [`PageState::target`]: this answer (302, or the `=CODE`).
    Url(&'s FixedAnswer),
    /// nginx's 500: a redirect cycle, or a named location that does not exist.
    Failed,
}

impl PageState {
    /// Clears what the previous request left (nothing to do unless it used error pages).
    pub fn begin(&mut self) {
        if self.used {
            let (kept, target) = (std::mem::take(&mut self.kept), std::mem::take(&mut self.target));
            let kept_type = std::mem::take(&mut self.kept_type);
            *self = PageState {
                kept,
                target,
                kept_type,
                ..PageState::default()
            };
            self.kept.clear();
            self.target.clear();
            self.kept_type.clear();
        }
    }

    /// The page of `pages` for an answer with `status`, unless a page was taken already (`recursive_error_pages
    /// off`) or the redirects are used up.
    pub(super) fn wanted<'p>(&self, pages: &'p ErrorPagesPlan, status: u16) -> Option<&'p PagePlan> {
        if self.done || self.redirects > MAX_REDIRECTS {
            return None;
        }
        pages.page(status)
    }

    /// Takes `page` (`ngx_http_send_error_page`): its value evaluated with `vars` into [`PageState::target`].
    pub(super) fn take<'s>(
        &mut self,
        pages: &ErrorPagesPlan,
        page: &'s PagePlan,
        server: &'s ServerPlan,
        vars: &dyn VarSource,
    ) -> Go<'s> {
        self.used = true;
        self.done |= !pages.recursive;
        self.status = match page.overwrite {
            Overwrite::Keep => page.status,
            Overwrite::Answer => 0,
            Overwrite::Code(c) => c,
        };
        self.target.clear();
        page.value.eval_into(vars, &mut self.target);
        if let Some(args) = &page.args {
            self.target.push(b'?');
            self.target.extend_from_slice(args.as_bytes());
        }
        let named = self.target.first() == Some(&b'@');
        if self.target.first() != Some(&b'/') && !named {
            // the redirect's own status (302 unless `=` named a redirect code)
            self.status = 0;
            self.url = true;
            return Go::Url(&page.redirect);
        }
        self.go(server)
    }

    /// The internal redirect to [`PageState::target`] (a URI or `@name`), counted among the request's redirects.
    pub(super) fn go<'s>(&mut self, server: &'s ServerPlan) -> Go<'s> {
        let named = self.target.first() == Some(&b'@');
        let target = String::from_utf8_lossy(&self.target);
        self.redirects += 1;
        if self.redirects > MAX_REDIRECTS {
            let how = if named {
                "redirect to named location"
            } else {
                "internally redirecting to"
            };
            crate::log_error!("rewrite or internal redirection cycle while {how} \"{target}\"");
            self.status = 0;
            return Go::Failed;
        }
        if !named {
            return Go::Uri;
        }
        let found = server.tree.named(&target).and_then(|i| server.locations.get(i));
        match found {
            Some(loc) => Go::Named(loc),
            None => {
                crate::log_error!("could not find named location \"{target}\"");
                self.status = 0;
                Go::Failed
            }
        }
    }

    /// Whether the routes after a proxied error read no body, and whether the connection may stay open.
    pub(super) fn body_gone(&self) -> Option<bool> {
        self.body_gone.then_some(self.keep)
    }

    /// Notes that the request's body is refused (413): it is not read, and the connection closes after the page.
    pub(super) fn body_refused(&mut self) {
        self.used = true;
        self.body_gone = true;
        self.keep = false;
    }

    /// The status an answer with `own` status goes out with. A special answer (an error page, a redirect) keeps
    /// its own, as nginx's special response handler sets `err_status` to it; any other takes the page's.
    #[inline]
    pub(super) fn status_of(&self, own: u16, special: bool) -> u16 {
        if self.status == 0 || special {
            own
        } else {
            self.status
        }
    }

    /// Writes the status line of `status_of(own, false)` over the one the head in `out` starts with at `start`
    /// (when it differs), and returns that status.
    #[inline]
    pub(super) fn restatus(&self, out: &mut Vec<u8>, start: usize, own: u16) -> u16 {
        let status = self.status_of(own, false);
        if status != own {
            rewrite_status_line(out, start, status);
        }
        status
    }

    /// Whether the current request took an error page (or had its body refused): only then can
    /// [`PageState::restatus`] and [`PageState::kept`] change an answer.
    #[inline]
    pub(super) fn active(&self) -> bool {
        self.used
    }

    /// Adds the header lines an intercepted answer (`WWW-Authenticate` of a 401) or an `X-Accel-Redirect` leaves
    /// on the answer to the head being written in `out` (before its final empty line); a kept `Content-Type`
    /// replaces the answer's unless `own_type` is false (nginx's pages say `text/html`).
    pub(super) fn add_kept(&self, out: &mut Vec<u8>, own_type: bool) {
        if own_type && !self.kept_type.is_empty() {
            set_content_type(out, &self.kept_type);
        }
        out.extend_from_slice(&self.kept);
    }

    /// [`PageState::add_kept`] for a head in `out` written with its final empty line.
    pub(super) fn add_kept_to_head(&self, out: &mut Vec<u8>) {
        if (self.kept.is_empty() && self.kept_type.is_empty()) || !out.ends_with(b"\r\n\r\n") {
            return;
        }
        out.truncate(out.len() - 2);
        self.add_kept(out, true);
        out.extend_from_slice(b"\r\n");
    }

    /// Starts an `X-Accel-Redirect` (nothing of an earlier page's status or lines stays).
    pub(super) fn accel_begin(&mut self) {
        self.used = true;
        self.status = 0;
        self.kept.clear();
        self.kept_type.clear();
        self.target.clear();
    }

    /// Keeps an upstream line for the redirect's answer.
    pub(super) fn keep_line(&mut self, name: &str, value: &[u8]) {
        if name.eq_ignore_ascii_case("content-type") {
            self.kept_type.clear();
            self.kept_type.extend_from_slice(value);
            return;
        }
        self.kept.extend_from_slice(name.as_bytes());
        self.kept.extend_from_slice(b": ");
        self.kept.extend_from_slice(value);
        self.kept.extend_from_slice(b"\r\n");
    }

    /// The `X-Accel-Redirect` value, the URI (with `?args`) or `@name` the request goes to.
    pub(super) fn accel_target(&mut self, value: &[u8]) {
        self.target.clear();
        self.target.extend_from_slice(value);
    }

    /// The target of the current request's internal redirect.
    pub(super) fn target(&self) -> &[u8] {
        &self.target
    }

    /// Moves the URL of a page taken as a redirect into `location` (the redirect answer's `Location`).
    pub(super) fn url_into(&mut self, location: &mut Vec<u8>) {
        if self.url {
            self.url = false;
            location.clear();
            location.extend_from_slice(&self.target);
        }
    }
}

/// Writes the status line of `status` over the one the head in `out` starts with at `start`.
#[cold]
fn rewrite_status_line(out: &mut Vec<u8>, start: usize, status: u16) {
    let end = out
        .get(start..)
        .and_then(|h| h.windows(2).position(|w| w == b"\r\n"))
        .map_or(start, |p| start + p);
    let mut line = Vec::with_capacity(48);
    line.extend_from_slice(b"HTTP/1.1 ");
    append_decimal(&mut line, u64::from(sent_status(status)));
    line.push(b' ');
    line.extend_from_slice(reason(sent_status(status)).as_bytes());
    out.splice(start..end, line);
    if !matches!(status, 200 | 206 | 304) {
        // nginx's header filter sends no `Last-Modified` (and its range filter no `Accept-Ranges`) but with
        // these statuses
        drop_lines(out, start, &["last-modified", "accept-ranges"]);
    }
}

/// Makes the `Content-Type` line of the head in `out` (being written: no final empty line yet) say `value`, in its
/// place, as nginx's header filter writes `r->headers_out.content_type`; adds one when there is none.
fn set_content_type(out: &mut Vec<u8>, value: &[u8]) {
    let mut at = 0;
    for line in out.split_inclusive(|&b| b == b'\n') {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        if line.contains(&b':') && name.eq_ignore_ascii_case(b"content-type") {
            let end = at + line.len() - usize::from(line.ends_with(b"\r\n")) * 2;
            out.splice(
                at + name.len() + 1..end,
                [b' '].into_iter().chain(value.iter().copied()),
            );
            return;
        }
        at += line.len();
    }
    out.extend_from_slice(b"Content-Type: ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Removes the header lines called one of `names` (lower case) from the head in `out` from `start` on.
fn drop_lines(out: &mut Vec<u8>, start: usize, names: &[&str]) {
    let Some(head) = out.get(start..) else {
        return;
    };
    let named = |line: &[u8]| {
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        line.contains(&b':') && names.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    };
    if !head.split_inclusive(|&b| b == b'\n').any(named) {
        return;
    }
    let kept: Vec<u8> = head
        .split_inclusive(|&b| b == b'\n')
        .filter(|line| !named(line))
        .flatten()
        .copied()
        .collect();
    out.truncate(start);
    out.extend_from_slice(&kept);
}

impl PageBufs {
    /// Clears what the previous request left (nothing to do unless it used error pages).
    #[inline]
    pub(super) fn begin(&mut self) {
        if self.state.used {
            self.state.begin();
            self.upstream.kept = false;
        }
    }

    /// Makes [`PageBufs::head`] the head of the internal redirect: `client` (the client's head, on the first
    /// redirect) with the request line `GET TARGET VERSION` (`HEAD` stays `HEAD`).
    pub(super) fn retarget(&mut self, client: Option<&[u8]>, head_request: bool) {
        if let Some(h) = client {
            self.head.clear();
            self.head.extend_from_slice(h);
        }
        let line_end = self.head.iter().position(|&b| b == b'\n').unwrap_or(self.head.len());
        let line = self.head.get(..line_end).unwrap_or_default();
        // the line's own ending (CRLF or a bare LF) stays
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let content_end = line.len();
        let version = match line.rsplit(|&b| b == b' ').next() {
            Some(v) if v.starts_with(b"HTTP/") => v.to_vec(),
            _ => b"HTTP/1.0".to_vec(),
        };
        let mut new = Vec::with_capacity(self.state.target.len() + 24);
        new.extend_from_slice(if head_request { b"HEAD " } else { b"GET " });
        new.extend_from_slice(&self.state.target);
        new.push(b' ');
        new.extend_from_slice(&version);
        self.head.splice(..content_end, new);
        if self.state.body_gone {
            self.drop_body_lines();
        }
    }

    /// The request resumes after its proxied error: its body is gone, so the head routed again says none.
    pub(super) fn resumed(&mut self, resume: Resume) {
        self.state.used = true;
        self.state.body_gone = true;
        self.state.keep = resume.keep;
        self.drop_body_lines();
    }

    /// Drops the `Content-Length` and `Transfer-Encoding` lines of [`PageBufs::head`] (a page that proxies then
    /// sends no body it does not have).
    fn drop_body_lines(&mut self) {
        let framing = |line: &[u8]| {
            let name = line.split(|&b| b == b':').next().unwrap_or_default();
            name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"transfer-encoding")
        };
        let mut kept = Vec::with_capacity(self.head.len());
        for (i, line) in self.head.split_inclusive(|&b| b == b'\n').enumerate() {
            if i == 0 || !framing(line) {
                kept.extend_from_slice(line);
            }
        }
        self.head = kept;
    }

    /// Keeps the client's head (`head_len` bytes unread in `client`) of a request proxied by `plan`, routed again
    /// if the upstream fails or answers with an error page or an `X-Accel-Redirect`. Unless `filled` (the client
    /// buffer is read before the answer: a body, an upstream `queue` watching the client) the head is only located
    /// (copied if a redirect comes), so the plain path copies nothing.
    #[inline]
    pub(super) fn keep_proxied_head(&mut self, plan: &ProxyPlan, client: &IoBuf, head_len: usize, filled: bool) {
        self.head_at = None;
        if plan.error_pages.is_some() || (plan.accel_redirect && filled) {
            self.keep_head(client.readable().get(..head_len));
        } else if plan.accel_redirect {
            self.head_at = Some((client.start(), head_len));
        }
    }

    /// Copies the head [`PageBufs::keep_proxied_head`] located (the client buffer not filled since).
    pub(super) fn take_located_head(&mut self, client: &IoBuf) {
        if let Some((at, len)) = self.head_at.take() {
            self.keep_head(client.bytes_at(at, len));
        }
    }

    /// Keeps the client's head of a proxied request whose location has error pages (routed again if the
    /// upstream fails).
    pub(super) fn keep_head(&mut self, client: Option<&[u8]>) {
        if let Some(h) = client {
            self.head.clear();
            self.head.extend_from_slice(h);
        }
    }
}

impl<R: Runtime> ClientConn<R> {
    /// The proxy path's error `status` (502, 504...) goes to the location's page for it when it has one: true, and
    /// the request is routed again ([`PageState::pending`]); else the caller sends nginx's error page. `consumed`:
    /// the body was read.
    pub(super) fn page_for_error(&mut self, plan: &ProxyPlan, status: u16, req: &Routed, consumed: bool) -> bool {
        if let Some(pages) = plan.error_pages.as_deref() {
            if self.bufs.pages.state.wanted(pages, status).is_some() {
                self.bufs.pages.state.pending = Some(Resume {
                    status,
                    keep: req.keepalive.keeps() && consumed,
                    location: pages.location,
                    accel: false,
                });
                return true;
            }
        }
        false
    }

    /// Whether `proxy_intercept_errors on` takes the upstream's answer: the location has a page for its status
    /// (nginx intercepts then; with a page taken already, `recursive_error_pages off`, the answer is nginx's own
    /// page for it).
    fn intercepts(to: TryTarget<'_, R>, info: &ResponseInfo) -> bool {
        to.plan
            .error_pages
            .as_deref()
            .is_some_and(|p| p.intercept && info.status >= 300 && p.page(info.status).is_some())
    }

    /// `proxy_intercept_errors on`: the upstream's answer (its head at the start of the upstream buffer) goes to
    /// the location's page for its status instead of the client ([`Self::intercepts`]). The body is not read: the
    /// connection is kept only when the answer has none (as nginx sets `u->keepalive` then), else closed. A
    /// 401's `WWW-Authenticate` lines are kept for the page's answer.
    /// Whether the upstream's answer goes elsewhere than to the client: to an error page
    /// (`proxy_intercept_errors`), or (after it) an `X-Accel-Redirect`.
    #[inline(never)]
    pub(super) fn diverts(&self, to: TryTarget<'_, R>, info: &ResponseInfo) -> bool {
        Self::intercepts(to, info) || (info.accel_redirect && to.plan.accel_redirect)
    }

    /// Takes the upstream's answer [`Self::diverts`] sends elsewhere.
    #[inline(never)]
    pub(super) fn divert(&mut self, to: TryTarget<'_, R>, conn: R::Conn, info: &ResponseInfo, req: &Routed) {
        match Self::intercepts(to, info) {
            true => self.intercept(to, conn, info, req),
            false => self.accel_redirect(to, conn, info, req),
        }
    }

    fn intercept(&mut self, to: TryTarget<'_, R>, conn: R::Conn, info: &ResponseInfo, req: &Routed) {
        let location = to.plan.error_pages.as_deref().and_then(|p| p.location);
        let state = &mut self.bufs.pages.state;
        if info.status == 401 {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            if let Ok(Some(resp)) = parse_response(self.bufs.upstream.readable(), &mut headers, req.head_request) {
                for h in resp
                    .headers
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case("www-authenticate"))
                {
                    state.kept.extend_from_slice(b"WWW-Authenticate: ");
                    state.kept.extend_from_slice(h.value);
                    state.kept.extend_from_slice(b"\r\n");
                }
            }
            state.used = true;
        }
        state.pending = Some(Resume {
            status: info.status,
            keep: req.keepalive.keeps(),
            location,
            accel: false,
        });
        let head = self.bufs.upstream.readable().get(..info.head_len).unwrap_or_default();
        self.bufs.pages.upstream.keep_head(head);
        pool_if_done(to, conn, info, self.bufs.upstream.readable().len());
    }
}

/// Gives the upstream connection of an answer not passed on back to its pool when nothing of it is left to read
/// (no body, nothing after the head among the `buffered` bytes: as nginx sets `u->keepalive` then), else drops it.
pub(super) fn pool_if_done<R: Runtime>(to: TryTarget<'_, R>, conn: R::Conn, info: &ResponseInfo, buffered: usize) {
    let bodiless = matches!(info.body, BodyFraming::None | BodyFraming::Length(0));
    if bodiless && buffered == info.head_len && info.reusable && to.plan.upstream_keepalive {
        to.shard
            .pool_put(to.snap, to.plan.upstream, to.addr, conn, info.age.served_one());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs_with(target: &str) -> PageBufs {
        let mut b = PageBufs::default();
        b.state.target = target.as_bytes().to_vec();
        b
    }

    #[test]
    fn the_redirect_head_keeps_the_header_lines() {
        let mut b = bufs_with("/404.html?a=1");
        b.retarget(
            Some(b"POST /x?y HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"),
            false,
        );
        assert_eq!(
            b.head,
            b"GET /404.html?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
        );
        b.state.target = b"/again".to_vec();
        b.retarget(None, true);
        assert_eq!(b.head, b"HEAD /again HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
        let mut b = bufs_with("/p");
        b.retarget(Some(b"GET /x HTTP/1.0\nHost: h\n\n"), false);
        assert_eq!(b.head, b"GET /p HTTP/1.0\nHost: h\n\n");
        // after a proxied error the body is gone: the head says none
        let mut b = bufs_with("/p");
        b.keep_head(Some(
            b"POST /x HTTP/1.1\r\nHost: h\r\ncontent-length: 3\r\nTransfer-Encoding: chunked\r\nX: 1\r\n\r\n",
        ));
        b.resumed(Resume {
            status: 502,
            keep: true,
            location: None,
            accel: false,
        });
        assert_eq!(b.head, b"POST /x HTTP/1.1\r\nHost: h\r\nX: 1\r\n\r\n");
        b.retarget(None, false);
        assert_eq!(b.head, b"GET /p HTTP/1.1\r\nHost: h\r\nX: 1\r\n\r\n");
        assert_eq!(b.state.body_gone(), Some(true));
    }

    #[test]
    fn status_lines_replaced_unless_special() {
        let mut s = PageState::default();
        let mut out = b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody".to_vec();
        assert_eq!(s.restatus(&mut out, 0, 200), 200);
        assert_eq!(out, b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody");
        s.status = 404;
        assert_eq!(s.restatus(&mut out, 0, 200), 404);
        assert_eq!(out, b"HTTP/1.1 404 Not Found\r\nServer: x\r\n\r\nbody");
        // a file's answer under another status: no `Last-Modified`, no `Accept-Ranges`, as nginx
        let mut out =
            b"HTTP/1.1 200 OK\r\nLast-Modified: x\r\nConnection: close\r\nETag: \"e\"\r\nAccept-Ranges: bytes\r\n\r\n"
                .to_vec();
        assert_eq!(s.restatus(&mut out, 0, 200), 404);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nETag: \"e\"\r\n\r\n"
        );
        assert_eq!(s.status_of(302, true), 302);
        assert_eq!(s.status_of(200, false), 404);
        s.used = true;
        s.begin();
        assert_eq!(s.status_of(200, false), 200);
    }

    /// An `X-Accel-Redirect`'s kept lines: its `Content-Type` in the answer's own line's place (not on nginx's
    /// pages), the others after the answer's lines; a head written whole gets them before its empty line.
    #[test]
    fn kept_lines_go_on_the_answer_as_nginx_writes_them() {
        let mut state = PageState::default();
        state.accel_begin();
        state.keep_line("Content-Type", b"text/blah");
        state.keep_line("Set-Cookie", b"a=b");
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n".to_vec();
        state.add_kept(&mut out, true);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/blah\r\nContent-Length: 3\r\nSet-Cookie: a=b\r\n"
        );
        let mut page = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n".to_vec();
        state.add_kept(&mut page, false);
        assert_eq!(
            page,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nSet-Cookie: a=b\r\n"
        );
        let mut file = b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\n\r\n".to_vec();
        state.add_kept_to_head(&mut file);
        assert_eq!(
            file,
            b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Type: text/blah\r\nSet-Cookie: a=b\r\n\r\n"
        );
        state.begin();
        let mut plain = b"HTTP/1.1 200 OK\r\n".to_vec();
        state.add_kept(&mut plain, true);
        assert_eq!(plain, b"HTTP/1.1 200 OK\r\n", "the next request keeps nothing");
    }
}
