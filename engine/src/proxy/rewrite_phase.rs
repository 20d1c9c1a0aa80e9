//! nginx's phases from the server's rewrites to the location's (`ngx_http_core_rewrite_phase`,
//! `find_config`, `post_rewrite`): the server's script, the location search, the location's script, and a new
//! search after a `rewrite ... last` (or one without a flag), at most 10 times, then a 500.

use super::static_file::{complete_location, FileMethod, FileRequest, NoVars};
use crate::config::regex::Captures;
use crate::http::request::RequestHead;
use crate::http::vars::{ConnVars, RequestExt, RequestVars};
use crate::snapshot::rewrite::{Outcome, RunCx, Script};
use crate::snapshot::route::{FixedAnswer, LocationPlan};
use crate::snapshot::{ServerPlan, Snapshot};

/// nginx's `NGX_HTTP_MAX_URI_CHANGES`.
const MAX_URI_CHANGES: usize = 10;

/// An answer the rewrite phases made.
#[derive(Debug, Clone, Copy)]
pub enum Answer<'s> {
    Fixed(&'s FixedAnswer),
    /// A redirecting `rewrite`: its `Location` is in [`PhaseBufs::rewrite`].
    Redirect(&'s FixedAnswer),
}

/// What the phases decided.
pub struct Phases<'s> {
    pub loc: Option<&'s LocationPlan>,
    pub answer: Option<Answer<'s>>,
    /// Set when a `rewrite` replaced the URI (now in [`PhaseBufs::rewrite`]): whether the request reached its
    /// location by a search for the new URI (nginx's `valid_location`), rather than staying after `break`.
    pub changed: Option<bool>,
}

/// The connection's buffers the phases use (`Buffers`' fields of those names).
pub struct PhaseBufs<'a> {
    /// The URI a `rewrite` made, or a redirect's `Location`.
    pub rewrite: &'a mut Vec<u8>,
    pub scratch: &'a mut Vec<u8>,
    pub key: &'a mut Vec<u8>,
    pub captures: &'a mut Captures,
    /// What the scripts' variables read beyond the head (server, connection, maps and the request's cache).
    pub ext: RequestExt<'a>,
}

/// Runs the phases for a request to `server` whose normalized path is `uri`.
pub fn run<'s>(
    snap: &'s Snapshot,
    server: &'s ServerPlan,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    bufs: PhaseBufs<'_>,
) -> Phases<'s> {
    run_from(snap, server, head, uri, conn, bufs, None)
}

/// [`run`], or with `named`, nginx's `ngx_http_named_location`: the phases from that location's rewrites on (no
/// server rewrites, no search unless a `rewrite` asks for one). Inlined: [`run`] is the plain path's copy.
#[inline(always)]
pub fn run_from<'s>(
    snap: &'s Snapshot,
    server: &'s ServerPlan,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    mut bufs: PhaseBufs<'_>,
    mut named: Option<&'s LocationPlan>,
) -> Phases<'s> {
    bufs.captures.clear();
    let args = head.args().unwrap_or("").as_bytes();
    let mut step = Step {
        head,
        uri,
        args,
        conn,
        changed: false,
    };
    let mut changed = None;
    if let (None, Some(r)) = (named, &server.ret) {
        return Phases {
            loc: None,
            answer: Some(Answer::Fixed(r)),
            changed,
        };
    }
    let server_script = server.script.as_ref().filter(|_| named.is_none());
    match step.script(server_script, "", &mut bufs) {
        Outcome::Next => {}
        Outcome::Answer(a) => return answered(None, Answer::Fixed(a), changed),
        Outcome::Redirect(a) => return answered(None, Answer::Redirect(a), changed),
        Outcome::Rewritten { .. } => changed = Some(true),
    }
    for _ in 0..=MAX_URI_CHANGES {
        let subject: &[u8] = if step.changed { bufs.rewrite } else { uri };
        let picked = match named.take() {
            Some(plan) => Ok(Some(plan)),
            None => server.pick(subject, bufs.captures),
        };
        let loc = match picked {
            Ok(loc) => loc,
            Err(to) => {
                // the location's name, escaped at load (nginx's `escaped_name`), and the arguments, made absolute
                // as nginx's header filter makes it under the server's `absolute_redirect`
                let dir = FileRequest {
                    method: FileMethod::Get,
                    args,
                    host: head.host,
                    local: conn.local,
                    head: None,
                    vars: &NoVars,
                    add_uri_to_alias: false,
                    redirect: server.headers.redirect_style(),
                    server_name: bufs.ext.server_name,
                };
                bufs.rewrite.clear();
                bufs.rewrite.extend_from_slice(to);
                if !args.is_empty() {
                    bufs.rewrite.push(b'?');
                    bufs.rewrite.extend_from_slice(args);
                }
                complete_location(&dir, bufs.rewrite);
                return answered(None, Answer::Redirect(&server.moved), changed);
            }
        };
        let Some(plan) = loc else {
            return Phases {
                loc,
                answer: None,
                changed,
            };
        };
        let proxy_host = match plan.script {
            Some(_) => plan
                .proxy
                .as_ref()
                .and_then(|p| snap.http_plans.get(p.upstream))
                .map_or("", |u| u.name.as_str()),
            None => "",
        };
        match step.script(plan.script.as_ref(), proxy_host, &mut bufs) {
            Outcome::Next => {}
            Outcome::Answer(a) => return answered(loc, Answer::Fixed(a), changed),
            Outcome::Redirect(a) => return answered(loc, Answer::Redirect(a), changed),
            Outcome::Rewritten { search: true } => {
                changed = Some(true);
                continue;
            }
            Outcome::Rewritten { search: false } => changed = Some(false),
        }
        return Phases {
            loc,
            answer: None,
            changed,
        };
    }
    answered(None, Answer::Fixed(&server.cycle), changed)
}

fn answered<'s>(loc: Option<&'s LocationPlan>, answer: Answer<'s>, changed: Option<bool>) -> Phases<'s> {
    Phases {
        loc,
        answer: Some(answer),
        changed,
    }
}

/// The request as the scripts see it.
struct Step<'a, 'h, 'b> {
    head: &'a RequestHead<'h, 'b>,
    uri: &'a [u8],
    args: &'a [u8],
    conn: ConnVars,
    /// Whether [`PhaseBufs::rewrite`] holds the URI.
    changed: bool,
}

impl Step<'_, '_, '_> {
    fn script<'s>(&mut self, script: Option<&'s Script>, proxy_host: &str, bufs: &mut PhaseBufs<'_>) -> Outcome<'s> {
        let Some(script) = script else {
            return Outcome::Next;
        };
        // `$uri` stays the request's own path in the scripts (corelb keeps no second copy of a rewritten one)
        let vars = RequestVars {
            req: self.head,
            uri: self.uri,
            conn: self.conn,
            proxy_host,
            ext: bufs.ext,
        };
        let mut cx = RunCx {
            vars: &vars,
            uri: self.uri,
            args: self.args,
            new_uri: bufs.rewrite,
            changed: self.changed,
            rewrote: false,
            scratch: bufs.scratch,
            other: bufs.key,
            caps: bufs.captures,
            users: &bufs.ext.cache.users,
        };
        let outcome = script.run(&mut cx);
        self.changed = cx.changed;
        outcome
    }
}
