//! Serving files as nginx's static and index modules do for the plain case: the request's normalized path under
//! the location's root; a directory's index file found by an internal redirect (the new path is routed again);
//! a directory without its slash redirected (301) to it; 403, 404, 405 and 500 where nginx answers them; and the
//! file itself streamed through the connection's reused output buffer.
//!
//! The file system calls (`open`, `stat`, `read`) block the shard's thread, as nginx's do without `aio` (nginx
//! has no asynchronous `open` or `stat` at all): a slow disk stalls the shard's other connections meanwhile.

use super::body::{discard_body, send, BodyError};
use super::charset::RecodeStream;
use super::client::{ClientConn, Routed};
use super::gzip::{self as gz, FileEncoding, FileFacts};
use super::limit_rate::{send_paced, Pacer};
use super::open_file_cache::{self, FileFd};
use super::sendfile::{self, FileSpan};
use crate::access_log::head_vars::HeadVars;
use crate::access_log::record::RequestRecord;
use crate::config::charset::Recode;
use crate::config::error::errno_text;
use crate::config::files::{Alias, TryFiles, TryLast};
use crate::config::gzip::GzipStatic;
use crate::config::headers::RedirectStyle;
use crate::config::key::VarSource;
use crate::http::charset::{recode_bytes, ContentType};
use crate::http::keepalive::Connection;
use crate::http::not_modified::{self, Precondition, Validators};
use crate::http::pages::{append_decimal, append_error_page, format_http_date, server_name, SERVER_FULL};
use crate::http::ranges::{self, Ranges};
use crate::http::request::RequestHead;
use crate::http::uri::append_escaped;
use crate::http::var_cache::VarCache;
use crate::http::vars::{ConnVars, RequestExt, RequestVars};
use crate::log::ErrorLogs;
use crate::log::Level;
use crate::runtime::{Conn, Runtime};
use crate::snapshot::captures::WithCaptures;
use crate::snapshot::charset::{AnswerCharset, CharsetPlan, CharsetScratch};
use crate::snapshot::files::{FilesPlan, IndexName};
use crate::snapshot::gzip::{AnswerFacts, GzipAsk, GzipPlan};
use crate::snapshot::headers::{HeadersPlan, Prepared, ResponseFacts};
use crate::snapshot::route::LocationPlan;
use crate::snapshot::ServerPlan;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::sync::LazyLock;

/// How many internal redirects a request may take (nginx's `NGX_HTTP_MAX_URI_CHANGES`); one more is a 500.
const MAX_URI_CHANGES: usize = 10;

/// The most file bytes read at once (nginx's default `output_buffers 2 32k` reads 32k at a time).
const CHUNK: usize = 32 * 1024;

/// The body of the 301 to a directory's slash: nginx's page for 301.
static MOVED_BODY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut body = Vec::new();
    append_error_page(301, crate::http::pages::SERVER_FULL, &mut body);
    body
});

/// What a request served from files gets, decided while routing.
#[derive(Debug)]
pub(super) enum FileAnswer<'s> {
    /// The file, open.
    File(OpenFile<'s>),
    /// A directory asked for without its trailing slash: 301 to it (the `Location` value is in `Buffers::path`).
    ToSlash,
    /// nginx's error page for this status.
    Error(u16),
}

/// A regular file about to be sent.
#[derive(Debug)]
pub(super) struct OpenFile<'s> {
    /// Read at offsets: a cached descriptor is shared by the shard's requests.
    file: FileFd,
    size: u64,
    /// Seconds since the epoch.
    mtime: i64,
    content_type: &'s str,
    etag: bool,
    /// A `gzip_static` file (`FILE.gz`) sent as it is with `Content-Encoding: gzip`.
    precompressed: bool,
    /// The location's `sendfile on` with its `sendfile_max_chunk` (`None`: off).
    sendfile: Option<u64>,
    /// `gzip_static on` found `FILE.gz`: `Vary` under `gzip_vary on`, whatever is sent.
    vary: bool,
    /// The preconditions made it a 304.
    not_modified: bool,
    /// What the `Range` header asks (applied unless the file is compressed on the way).
    ranges: Ranges,
}

/// The request method as the static and index modules tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileMethod {
    Get,
    Head,
    Post,
    /// Any other: 405.
    Other,
}

impl FileMethod {
    pub(super) fn of(method: &str) -> FileMethod {
        match method {
            "GET" => FileMethod::Get,
            "HEAD" => FileMethod::Head,
            "POST" => FileMethod::Post,
            _ => FileMethod::Other,
        }
    }
}

/// What file serving needs of the request head.
#[derive(Clone, Copy)]
pub(super) struct FileRequest<'a> {
    pub(super) method: FileMethod,
    /// `$args` (kept on a redirect to the directory's slash).
    pub(super) args: &'a [u8],
    /// The `Host` header or the absolute target's host, port stripped.
    pub(super) host: Option<&'a [u8]>,
    /// The address the client connected to (the redirect's host without a `Host`, and its port).
    pub(super) local: SocketAddr,
    /// The head, for `gzip_static on` (`ngx_http_gzip_ok`).
    pub(super) head: Option<&'a RequestHead<'a, 'a>>,
    /// The request's variables, for a `root` or `alias` with them (the location's captures are added).
    pub(super) vars: &'a dyn VarSource,
    /// try_files found the path in a regex location: the alias is followed by the path.
    pub(super) add_uri_to_alias: bool,
    /// How the redirect to a directory's slash is completed: the serving location's `absolute_redirect`,
    /// `server_name_in_redirect`, `port_in_redirect`.
    pub(super) redirect: RedirectStyle,
    /// The server's first name (`server_name_in_redirect on`).
    pub(super) server_name: &'a str,
}

/// No variables: for a [`FileRequest`] that names no file (the redirect to a location's slash).
pub(super) struct NoVars;

impl VarSource for NoVars {
    fn append(&self, _: &crate::config::key::Var, _: &mut Vec<u8>) {}
}

/// The connection's buffers file serving writes into.
pub(super) struct FileBufs<'b> {
    /// The file's path; then the `Location` of a [`FileAnswer::ToSlash`].
    pub(super) path: &'b mut Vec<u8>,
    /// The request's path after an internal redirect.
    pub(super) redirect: &'b mut Vec<u8>,
    /// The regex captures of the location search an internal redirect makes.
    pub(super) captures: &'b mut crate::config::regex::Captures,
}

/// Where routing a request through file serving ended.
#[derive(Debug)]
pub(super) struct Resolved<'s> {
    /// The location that answers (another one after an internal redirect; `None`: the server outside them).
    pub(super) loc: Option<&'s LocationPlan>,
    /// The answer, or `None` when `loc` answers otherwise (it returns, proxies or is an endpoint: reached by an
    /// internal redirect).
    pub(super) answer: Option<FileAnswer<'s>>,
    /// Whether the request's path is now [`FileBufs::redirect`].
    pub(super) redirected: bool,
}

/// What one location's file serving makes of a path.
enum Step<'s> {
    Answer(FileAnswer<'s>),
    /// An internal redirect to the path now in [`FileBufs::path`].
    Redirect,
}

/// Serves `uri` (the normalized path) from files when `loc` (or, with none, `server`) does, following index
/// redirects through `server`'s locations as nginx's internal redirects do.
pub(super) fn resolve<'s>(
    server: &'s ServerPlan,
    loc: Option<&'s LocationPlan>,
    uri: &[u8],
    req: &FileRequest<'_>,
    bufs: FileBufs<'_>,
) -> Resolved<'s> {
    let mut loc = loc;
    let mut redirected = false;
    let mut changes = 0;
    // try_files runs once a location (nginx's precontent phase); a name it found in a regex location's alias
    let (mut tried, mut add_uri) = (false, false);
    loop {
        let plan = match loc {
            Some(l) if !l.serves_files() => break,
            Some(l) => &l.files,
            None => &server.files,
        };
        let path: &[u8] = if redirected { bufs.redirect } else { uri };
        let with_caps = WithCaptures {
            vars: req.vars,
            caps: bufs.captures,
        };
        let vars = CurrentUri {
            vars: &with_caps,
            uri: path,
        };
        let try_files = plan.try_files.as_deref().filter(|_| !tried);
        if let Some(tf) = try_files {
            tried = true;
            let mut name = Vec::new();
            let outcome = try_files_step(server, plan, tf, path, &vars, &mut name, bufs.path);
            let redirect = match outcome {
                Tried::Found { uri_changed, whole } => {
                    add_uri = whole;
                    if uri_changed {
                        *bufs.redirect = name;
                        redirected = true;
                    }
                    continue;
                }
                Tried::Code(status) => {
                    return Resolved {
                        loc,
                        answer: Some(FileAnswer::Error(status)),
                        redirected,
                    }
                }
                Tried::Named(_) | Tried::Redirect if changes == MAX_URI_CHANGES => Err(name),
                Tried::Named(named) => {
                    changes += 1;
                    loc = Some(named);
                    (tried, add_uri) = (false, false);
                    continue;
                }
                Tried::Redirect => Ok(name),
            };
            let name = match redirect {
                Ok(name) => name,
                Err(name) => {
                    crate::log_error!(
                        "rewrite or internal redirection cycle while internally redirecting to \"{}\"",
                        String::from_utf8_lossy(&name)
                    );
                    return Resolved {
                        loc,
                        answer: Some(FileAnswer::Error(500)),
                        redirected,
                    };
                }
            };
            changes += 1;
            *bufs.redirect = name;
            redirected = true;
            loc = server.location(&bufs.redirect[..], bufs.captures);
            (tried, add_uri) = (false, false);
            continue;
        }
        let file_req = FileRequest {
            add_uri_to_alias: add_uri,
            redirect: loc.map_or(&server.headers, |l| &l.headers).redirect_style(),
            ..*req
        };
        let gzip = loc.map_or(&server.gzip, |l| &l.gzip).as_ref();
        match step(plan, gzip, path, &file_req, &vars, bufs.path) {
            Step::Answer(a) => {
                return Resolved {
                    loc,
                    answer: Some(a),
                    redirected,
                }
            }
            Step::Redirect if changes == MAX_URI_CHANGES => {
                crate::log_error!(
                    "rewrite or internal redirection cycle while internally redirecting to \"{}\"",
                    String::from_utf8_lossy(bufs.path)
                );
                return Resolved {
                    loc,
                    answer: Some(FileAnswer::Error(500)),
                    redirected,
                };
            }
            Step::Redirect => {
                changes += 1;
                std::mem::swap(bufs.path, bufs.redirect);
                redirected = true;
                loc = server.location(&bufs.redirect[..], bufs.captures);
                (tried, add_uri) = (false, false);
            }
        }
    }
    Resolved {
        loc,
        answer: None,
        redirected,
    }
}

/// The request's variables with `$uri` as the path now being served (after internal redirects and try_files).
struct CurrentUri<'a> {
    vars: &'a dyn VarSource,
    uri: &'a [u8],
}

impl VarSource for CurrentUri<'_> {
    fn append(&self, var: &crate::config::key::Var, out: &mut Vec<u8>) {
        match var {
            crate::config::key::Var::Uri => out.extend_from_slice(self.uri),
            v => self.vars.append(v, out),
        }
    }
}

/// What `try_files` made of a request.
enum Tried<'s> {
    /// A name exists: served from here, with the path in the name buffer when `uri_changed`; `whole`: the regex
    /// location's alias is followed by that path (nginx's `add_uri_to_alias`).
    Found { uri_changed: bool, whole: bool },
    /// None: an internal redirect to the URI in the name buffer.
    Redirect,
    /// None: the named location.
    Named(&'s LocationPlan),
    /// None: this status.
    Code(u16),
}

/// `ngx_http_try_files_handler`: the first name (evaluated into `name`) whose file exists (a directory for a
/// name written with a trailing `/`, a non-directory otherwise), else the last argument.
fn try_files_step<'s>(
    server: &'s ServerPlan,
    plan: &FilesPlan,
    tf: &TryFiles,
    uri: &[u8],
    vars: &dyn VarSource,
    name: &mut Vec<u8>,
    path: &mut Vec<u8>,
) -> Tried<'s> {
    for (template, dir) in &tf.tries {
        name.clear();
        template.eval_into(vars, name);
        plan.try_path_of(name, template.is_constant(), uri, vars, path);
        let found = match open_file_cache::stat(plan.open_file_cache.as_ref(), path) {
            Ok(m) => m.is_dir == *dir,
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                if !matches!(errno, libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) {
                    log_failed(plan.errors(), Level::Crit, "stat()", path, errno);
                }
                false
            }
        };
        if !found {
            continue;
        }
        return match plan.alias() {
            Alias::Root => Tried::Found {
                uri_changed: true,
                whole: false,
            },
            Alias::Whole => Tried::Found {
                uri_changed: !*dir,
                whole: !*dir,
            },
            Alias::Cut(n) => {
                // the location's part of the path, then the name as it followed the alias
                let prefix = uri.get(..n).unwrap_or_default();
                let cut = !template.is_constant() && name.starts_with(prefix);
                let rest = if cut {
                    name.get(n..).unwrap_or_default()
                } else {
                    &name[..]
                };
                let mut new = Vec::with_capacity(n + rest.len());
                new.extend_from_slice(prefix);
                new.extend_from_slice(rest);
                *name = new;
                Tried::Found {
                    uri_changed: true,
                    whole: false,
                }
            }
        };
    }
    match &tf.last {
        TryLast::Code(status) => Tried::Code(*status),
        TryLast::Uri(t) => {
            name.clear();
            t.eval_into(vars, name);
            if name.first() == Some(&b'@') {
                let named = std::str::from_utf8(name)
                    .ok()
                    .and_then(|n| server.tree.named(n))
                    .and_then(|i| server.locations.get(i));
                return match named {
                    Some(l) => Tried::Named(l),
                    None => {
                        crate::log_error!("could not find named location \"{}\"", String::from_utf8_lossy(name));
                        Tried::Code(500)
                    }
                };
            }
            Tried::Redirect
        }
    }
}

/// [`resolve`] for the request `head` on the connection `conn`.
#[inline(always)]
pub(super) fn resolve_head<'s>(
    server: &'s ServerPlan,
    loc: Option<&'s LocationPlan>,
    uri: &[u8],
    head: &RequestHead<'_, '_>,
    conn: ConnVars,
    ext: RequestExt<'_>,
    bufs: FileBufs<'_>,
) -> Resolved<'s> {
    if loc.is_some_and(|l| !l.serves_files()) {
        // the common case (a proxy, a `return`): nothing of the head is looked at
        return Resolved {
            loc,
            answer: None,
            redirected: false,
        };
    }
    let vars = RequestVars {
        req: head,
        conn,
        uri,
        proxy_host: "",
        ext,
    };
    let req = FileRequest {
        method: FileMethod::of(head.method),
        args: head.query().as_bytes(),
        host: head.host,
        local: conn.local,
        head: Some(head),
        vars: &vars,
        add_uri_to_alias: false,
        redirect: loc.map_or(&server.headers, |l| &l.headers).redirect_style(),
        server_name: ext.server_name,
    };
    resolve(server, loc, uri, &req, bufs)
}

/// nginx's content phase for a location without a handler: the index module for a path ending in `/`, else the
/// static module.
fn step<'s>(
    plan: &'s FilesPlan,
    gzip: Option<&GzipPlan>,
    uri: &[u8],
    req: &FileRequest<'_>,
    vars: &dyn VarSource,
    path: &mut Vec<u8>,
) -> Step<'s> {
    if req.method == FileMethod::Other {
        return Step::Answer(FileAnswer::Error(405));
    }
    if uri.first() != Some(&b'/') {
        // `OPTIONS *`: no file can be named by it (nginx refuses such a request line)
        return Step::Answer(FileAnswer::Error(400));
    }
    if plan.escapes(uri) {
        crate::log_in!(
            plan.errors(),
            Level::Error,
            "\"{}\" leaves the location's alias",
            String::from_utf8_lossy(uri)
        );
        return Step::Answer(FileAnswer::Error(404));
    }
    if uri.ends_with(b"/") {
        return index(plan, uri, vars, path);
    }
    // the gzip_static handler runs before the static one
    let mut vary = false;
    if let Some(gz) = gzip.filter(|g| g.static_files != GzipStatic::Off) {
        match open_gz(plan, gz, uri, req, vars, path) {
            GzStatic::Sent(answer) => return Step::Answer(conditions(plan, req, answer)),
            GzStatic::Declined { vary: v } => vary = v,
        }
    }
    let mut answer = open(plan, uri, req, vars, path);
    if let FileAnswer::File(f) = &mut answer {
        f.vary = vary;
    }
    Step::Answer(conditions(plan, req, answer))
}

/// nginx's not_modified filter (412 here, so that `error_page 412` applies; 304 kept for the head) and what the
/// range filter will read (`Range`, `If-Range`, `max_ranges`), for a file about to be sent with status 200.
fn conditions<'s>(plan: &FilesPlan, req: &FileRequest<'_>, answer: FileAnswer<'s>) -> FileAnswer<'s> {
    let head = match (&answer, req.head) {
        (FileAnswer::File(_), Some(h)) if h.has_conditions() => h,
        _ => return answer,
    };
    let FileAnswer::File(mut f) = answer else {
        return answer;
    };
    let mut tag = [0u8; ETAG_MAX];
    let etag = f.etag.then(|| etag_value(f.mtime, f.size, &mut tag));
    let validators = Validators {
        mtime: Some(f.mtime),
        etag,
    };
    match not_modified::check(head, validators, plan.if_modified_since) {
        Precondition::Failed => return FileAnswer::Error(412),
        Precondition::NotModified => f.not_modified = true,
        Precondition::Send => {}
    }
    if plan.max_ranges > 0 && !f.not_modified {
        if let Some(range) = head.header("range") {
            let applies = head
                .header("if-range")
                .is_none_or(|ir| ranges::if_range_matches(ir, etag, Some(f.mtime)));
            if applies {
                f.ranges = ranges::parse(range, f.size, plan.max_ranges);
            }
        }
    }
    FileAnswer::File(f)
}

/// The longest `ETag` value a file has: `"` 16 hex digits `-` 16 hex digits `"`.
const ETAG_MAX: usize = 36;

/// A file's `ETag` value as nginx makes it (`"%xT-%xO"`: the modification time and the size in lower-case hex).
fn etag_value(mtime: i64, size: u64, buf: &mut [u8; ETAG_MAX]) -> &[u8] {
    // by hand, not `write!`: formatting machinery cost a tenth of a small file's user-space instructions
    let mut n = 0;
    for part in [Hex::Quote, Hex::Of(mtime as u64), Hex::Dash, Hex::Of(size), Hex::Quote] {
        n += part.write(&mut buf[n..]);
    }
    &buf[..n]
}

thread_local! {
    /// The last `Last-Modified` text formatted on this thread, with its time: a file served again and again is
    /// formatted once.
    static LAST_MODIFIED: std::cell::Cell<(i64, [u8; 29])> = const { std::cell::Cell::new((i64::MIN, [0; 29])) };
}

/// `mtime` as an HTTP date.
fn last_modified(mtime: i64) -> [u8; 29] {
    LAST_MODIFIED.with(|last| {
        let (at, text) = last.get();
        if at == mtime {
            return text;
        }
        let text = format_http_date(u64::try_from(mtime).unwrap_or(0));
        last.set((mtime, text));
        text
    })
}

/// A piece of an ETag: a character, or a number in lower-case hexadecimal (an `i64` as its two's complement bits,
/// as `{:x}` prints it).
enum Hex {
    Quote,
    Dash,
    Of(u64),
}

impl Hex {
    /// Writes itself at the start of `out` (room for 16 digits); its length.
    fn write(self, out: &mut [u8]) -> usize {
        let v = match self {
            Hex::Quote => b'"',
            Hex::Dash => b'-',
            Hex::Of(v) => {
                let digits = (64 - v.leading_zeros()).div_ceil(4).max(1) as usize;
                for (i, slot) in out.iter_mut().take(digits).enumerate() {
                    let nibble = (v >> (4 * (digits - 1 - i))) & 0xf;
                    *slot = b"0123456789abcdef"[nibble as usize];
                }
                return digits.min(out.len());
            }
        };
        match out.first_mut() {
            Some(slot) => {
                *slot = v;
                1
            }
            None => 0,
        }
    }
}

/// What `ngx_http_gzip_static_handler` did.
enum GzStatic<'s> {
    /// It answers (with `FILE.gz`, or an error).
    Sent(FileAnswer<'s>),
    /// The static handler goes on; `vary`: `FILE.gz` exists under `gzip_static on`.
    Declined { vary: bool },
}

/// `gzip_static`: `FILE.gz` for a GET or HEAD when the request takes gzip (`on`) or always (`always`).
fn open_gz<'s>(
    plan: &'s FilesPlan,
    gz: &GzipPlan,
    uri: &[u8],
    req: &FileRequest<'_>,
    vars: &dyn VarSource,
    path: &mut Vec<u8>,
) -> GzStatic<'s> {
    let declined = GzStatic::Declined { vary: false };
    if !matches!(req.method, FileMethod::Get | FileMethod::Head) {
        return declined;
    }
    let ok = match gz.static_files {
        GzipStatic::Always => true,
        _ => match req.head.map_or(GzipAsk::No, |h| gz.ask(h)) {
            GzipAsk::No => false,
            GzipAsk::Yes => true,
            // a file's answer has `Last-Modified`, and `ETag` unless `etag off`
            GzipAsk::ByAnswer => gz.by_answer(&AnswerFacts {
                last_modified: true,
                etag: plan.etag,
                now: crate::clock::now_secs(),
                ..AnswerFacts::default()
            }),
        },
    };
    if !gz.vary && !ok {
        return declined;
    }
    plan.path_of(uri, vars, req.add_uri_to_alias, path);
    path.extend_from_slice(b".gz");
    let (file, meta) = match open_file_cache::open(plan.open_file_cache.as_ref(), path) {
        Ok(fm) => fm,
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            match errno {
                libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG => {}
                libc::EACCES | libc::EMLINK | libc::ELOOP => {
                    log_failed(plan.errors(), Level::Error, "open()", path, errno)
                }
                _ => log_failed(plan.errors(), Level::Crit, "open()", path, errno),
            }
            return declined;
        }
    };
    let vary = gz.static_files == GzipStatic::On;
    let file = match file {
        Some(file) if ok => file,
        // a directory, or not asked for
        _ => return GzStatic::Declined { vary },
    };
    if !meta.is_file {
        crate::log_in!(
            plan.errors(),
            Level::Crit,
            "\"{}\" is not a regular file",
            String::from_utf8_lossy(path)
        );
        return GzStatic::Sent(FileAnswer::Error(404));
    }
    GzStatic::Sent(FileAnswer::File(OpenFile {
        file,
        size: meta.size,
        mtime: meta.mtime,
        content_type: plan.content_type(uri),
        etag: plan.etag,
        precompressed: true,
        sendfile: plan.sendfile,
        vary,
        not_modified: false,
        ranges: Ranges::Whole,
    }))
}

/// `ngx_http_index_handler`: the first index name that exists is an internal redirect to it; none is a 403 when the
/// directory exists (nginx's "directory index of ... is forbidden"), else a 404.
fn index<'s>(plan: &FilesPlan, uri: &[u8], vars: &dyn VarSource, path: &mut Vec<u8>) -> Step<'s> {
    let mut dir_tested = false;
    // a name with variables is evaluated here (a location whose names have none allocates nothing)
    let mut evaluated = Vec::new();
    for name in plan.index.iter() {
        let file: &[u8] = match name {
            IndexName::Uri(u) => {
                path.clear();
                path.extend_from_slice(u);
                return Step::Redirect;
            }
            IndexName::File(f) => f,
            IndexName::Vars(t) => {
                evaluated.clear();
                t.eval_into(vars, &mut evaluated);
                if evaluated.first() == Some(&b'/') {
                    std::mem::swap(path, &mut evaluated);
                    return Step::Redirect;
                }
                &evaluated
            }
        };
        plan.path_of(uri, vars, false, path);
        path.extend_from_slice(file);
        let err = match open_file_cache::stat(plan.open_file_cache.as_ref(), path) {
            Ok(_) => {
                path.clear();
                path.extend_from_slice(uri);
                path.extend_from_slice(file);
                return Step::Redirect;
            }
            Err(e) => e.raw_os_error().unwrap_or(0),
        };
        let status = match err {
            libc::ELOOP | libc::EMLINK => 403,
            libc::EACCES => {
                log_file(plan.errors(), Level::Error, path, "is forbidden", err);
                403
            }
            libc::ENOTDIR | libc::ENAMETOOLONG => {
                if plan.log_not_found {
                    log_file(plan.errors(), Level::Error, path, "is not found", err);
                }
                404
            }
            libc::ENOENT => 0,
            _ => {
                log_failed(plan.errors(), Level::Crit, "stat()", path, err);
                500
            }
        };
        if status != 0 {
            return Step::Answer(FileAnswer::Error(status));
        }
        if !dir_tested {
            if let Some(status) = test_dir(plan, uri, vars, path) {
                if status == 404 && plan.log_not_found {
                    // nginx names the index file it looked for
                    plan.path_of(uri, vars, false, path);
                    path.extend_from_slice(file);
                    log_file(plan.errors(), Level::Error, path, "is not found", libc::ENOENT);
                }
                return Step::Answer(FileAnswer::Error(status));
            }
            dir_tested = true;
        }
    }
    if crate::log::enabled_in(plan.errors(), Level::Error) {
        plan.path_of(uri, vars, false, path);
        crate::log_in!(
            plan.errors(),
            Level::Error,
            "directory index of \"{}\" is forbidden",
            String::from_utf8_lossy(path)
        );
    }
    Step::Answer(FileAnswer::Error(403))
}

/// nginx's line for a failed call on `path`: `open() "PATH" failed (2: No such file or directory)`.
fn log_failed(logs: Option<&ErrorLogs>, level: Level, call: &str, path: &[u8], errno: i32) {
    if crate::log::enabled_in(logs, level) {
        let err = errno_text(&io::Error::from_raw_os_error(errno));
        crate::log_in!(
            logs,
            level,
            "{call} \"{}\" failed ({err})",
            String::from_utf8_lossy(path)
        );
    }
}

/// nginx's line for an index file: `"PATH" is forbidden (13: Permission denied)`.
fn log_file(logs: Option<&ErrorLogs>, level: Level, path: &[u8], what: &str, errno: i32) {
    if crate::log::enabled_in(logs, level) {
        let err = errno_text(&io::Error::from_raw_os_error(errno));
        crate::log_in!(logs, level, "\"{}\" {what} ({err})", String::from_utf8_lossy(path));
    }
}

/// `ngx_http_index_test_dir`, after an index name was not found: the status to answer when the directory itself
/// is missing (404), a loop (403), not a directory or unreadable otherwise (500); `None` to go on.
fn test_dir(plan: &FilesPlan, uri: &[u8], vars: &dyn VarSource, path: &mut Vec<u8>) -> Option<u16> {
    plan.path_of(uri, vars, false, path);
    path.pop();
    if path.is_empty() {
        path.push(b'/');
    }
    match open_file_cache::stat(plan.open_file_cache.as_ref(), path) {
        Ok(m) if m.is_dir => None,
        Ok(_) => {
            crate::log_alert!("\"{}\" is not a directory", String::from_utf8_lossy(path));
            Some(500)
        }
        Err(e) => match e.raw_os_error().unwrap_or(0) {
            libc::ENOENT => Some(404),
            // searching the directory is allowed: the index test failed otherwise
            libc::EACCES => None,
            libc::ELOOP | libc::EMLINK => Some(403),
            errno => {
                log_failed(plan.errors(), Level::Crit, "stat()", path, errno);
                Some(500)
            }
        },
    }
}

/// `ngx_http_static_handler` for a path not ending in `/`: the open file, a 301 for a directory, or the error.
fn open<'s>(
    plan: &'s FilesPlan,
    uri: &[u8],
    req: &FileRequest<'_>,
    vars: &dyn VarSource,
    path: &mut Vec<u8>,
) -> FileAnswer<'s> {
    plan.path_of(uri, vars, req.add_uri_to_alias, path);
    let (file, meta) = match open_file_cache::open(plan.open_file_cache.as_ref(), path) {
        Ok(fm) => fm,
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            let (level, status) = match errno {
                libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG => (Level::Error, 404),
                libc::EACCES | libc::EMLINK | libc::ELOOP => (Level::Error, 403),
                _ => (Level::Crit, 500),
            };
            if status != 404 || plan.log_not_found {
                log_failed(plan.errors(), level, "open()", path, errno);
            }
            return FileAnswer::Error(status);
        }
    };
    let file = match file {
        Some(file) if !meta.is_dir => file,
        _ => {
            moved_to_slash(uri, req, path);
            return FileAnswer::ToSlash;
        }
    };
    if !meta.is_file {
        crate::log_in!(
            plan.errors(),
            Level::Crit,
            "\"{}\" is not a regular file",
            String::from_utf8_lossy(path)
        );
        return FileAnswer::Error(404);
    }
    if req.method == FileMethod::Post {
        return FileAnswer::Error(405);
    }
    FileAnswer::File(OpenFile {
        file,
        size: meta.size,
        mtime: meta.mtime,
        content_type: plan.content_type(uri),
        etag: plan.etag,
        precompressed: false,
        sendfile: plan.sendfile,
        vary: false,
        not_modified: false,
        ranges: Ranges::Whole,
    })
}

/// Writes the `Location` of the redirect to `uri`'s slash into `out` (cleared first), as nginx's static module
/// makes it: the path escaped, `/`, and `?ARGS` if any, completed by [`complete_location`].
pub(super) fn moved_to_slash(uri: &[u8], req: &FileRequest<'_>, out: &mut Vec<u8>) {
    out.clear();
    append_escaped(uri, out);
    out.push(b'/');
    if !req.args.is_empty() {
        out.push(b'?');
        out.extend_from_slice(req.args);
    }
    complete_location(req, out);
}

/// Puts `http://HOST[:PORT]` in front of the `Location` in `out` as nginx's header filter does under the
/// request's [`RedirectStyle`] (nothing under `absolute_redirect off`): HOST is the server's first name under
/// `server_name_in_redirect on`, else the request's host (lower case, a trailing dot dropped), else the address the
/// client connected to; `:PORT` under `port_in_redirect on` unless it is 80.
pub(super) fn complete_location(req: &FileRequest<'_>, out: &mut Vec<u8>) {
    if !req.redirect.absolute {
        return;
    }
    let value_len = out.len();
    out.extend_from_slice(b"http://");
    match req.host.filter(|h| !h.is_empty()) {
        _ if req.redirect.server_name => out.extend_from_slice(req.server_name.as_bytes()),
        Some(host) => {
            let host = host.strip_suffix(b".").unwrap_or(host);
            out.extend(host.iter().map(u8::to_ascii_lowercase));
        }
        None => crate::http::vars::append_addr_ip(out, &req.local),
    }
    // a unix-domain listener has no port (nginx's `ngx_inet_get_port` is 0 there)
    let port = req.local.port();
    if req.redirect.port && port != 80 && port != 0 {
        out.push(b':');
        append_decimal(out, u64::from(port));
    }
    // [value | prefix] -> [prefix | value]
    out.rotate_left(value_len);
}

/// The head of an answer from files: nginx's header filter order (status line, `Server`, `Date`,
/// `Content-Type`, `Content-Length`, `Last-Modified`, `Location`, `Connection`), then the header list (`ETag`,
/// headers other modules add, `Accept-Ranges` last, from the range filter that runs after them).
#[derive(Debug, Clone, Copy)]
pub enum FileHead<'a> {
    /// 200 with the file's facts.
    File {
        content_type: &'a str,
        size: u64,
        /// Seconds since the epoch.
        mtime: i64,
        etag: bool,
        /// What gzip does to it.
        encoding: FileEncoding,
        /// The whole file, a 304, or a 206.
        part: Part<'a>,
    },
    /// 301 to a directory's slash (an HTML body of `body_len` bytes follows).
    Moved { location: &'a [u8], body_len: usize },
}

/// What of a file's answer goes out, as the not_modified and range filters make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// 200: the whole file, `Accept-Ranges: bytes` (unless compressed).
    Whole,
    /// 304: no `Content-Type`, `Content-Length`, `Content-Encoding` or `Accept-Ranges`, no body.
    NotModified,
    /// 206 of the bytes `[start, end)`, with `Content-Range`.
    Single { start: u64, end: u64 },
    /// 206 `multipart/byteranges` with this boundary, `length` bytes of body.
    Multi { boundary: &'a [u8], length: u64 },
}

impl Part<'_> {
    fn status(&self) -> u16 {
        match self {
            Part::Whole => 200,
            Part::NotModified => 304,
            Part::Single { .. } | Part::Multi { .. } => 206,
        }
    }
}

/// How the bytes of a file go out: the status and head length logged, and a single-byte charset table that
/// recodes them as they are read.
#[derive(Debug, Clone, Copy)]
struct Sending<'t> {
    status: u16,
    head_len: usize,
    recode: Option<&'t [u8; 256]>,
}

/// The answer filters of the location serving a file: gzip and the charset filter (`None`: off).
#[derive(Debug, Clone, Copy, Default)]
pub struct Filters<'s> {
    pub gzip: Option<&'s GzipPlan>,
    pub charset: Option<&'s CharsetPlan>,
}

/// The status of a redirect to a directory's slash.
const MOVED: u16 = 301;

/// The answer's variables of a file's head (no upstream).
fn file_vars<'a>(status: u16, rec: &'a RequestRecord, cache: &'a VarCache) -> HeadVars<'a> {
    HeadVars {
        status,
        rec,
        upstream_head: b"",
        upstream_name: b"",
        cache,
    }
}

/// The location's `add_header`/`expires`/`server_tokens` for a file's head: its plan and what was evaluated for
/// the request.
#[derive(Clone, Copy)]
pub struct FileEdits<'a> {
    pub plan: &'a HeadersPlan,
    pub prepared: &'a Prepared,
    /// The answer's variables (`$status`...) for lines that need them.
    pub response: &'a dyn VarSource,
    /// Seconds since the epoch.
    pub now: u64,
}

/// Writes the head `head` into `out` (appended) with the cached `date`. The one writer of these heads: the
/// location's added headers (`edits`) go after `ETag`, where nginx's headers filter puts them.
pub fn write_file_head(
    head: &FileHead<'_>,
    date: &[u8],
    keepalive: Connection,
    edits: Option<FileEdits<'_>>,
    out: &mut Vec<u8>,
) {
    let part = match head {
        FileHead::File { part, .. } => *part,
        FileHead::Moved { .. } => Part::Whole,
    };
    out.extend_from_slice(match (head, part) {
        (FileHead::Moved { .. }, _) => b"HTTP/1.1 301 Moved Permanently\r\nServer: ".as_slice(),
        (_, Part::Whole) => b"HTTP/1.1 200 OK\r\nServer: ",
        (_, Part::NotModified) => b"HTTP/1.1 304 Not Modified\r\nServer: ",
        (_, Part::Single { .. } | Part::Multi { .. }) => b"HTTP/1.1 206 Partial Content\r\nServer: ",
    });
    let server = edits.map_or(SERVER_FULL, |e| server_name(e.prepared.tokens()));
    out.extend_from_slice(server.as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    let (length, content_type) = match head {
        FileHead::File { content_type, size, .. } => (*size, content_type.as_bytes()),
        FileHead::Moved { body_len, .. } => (*body_len as u64, b"text/html".as_slice()),
    };
    let encoding = match head {
        FileHead::File { encoding, .. } => *encoding,
        FileHead::Moved { .. } => FileEncoding::default(),
    };
    let length = match part {
        Part::Whole => Some(length).filter(|_| !encoding.length_unknown()),
        Part::NotModified => None,
        Part::Single { start, end } => Some(end - start),
        Part::Multi { length, .. } => Some(length),
    };
    match part {
        Part::NotModified => {}
        Part::Multi { boundary, .. } => {
            out.extend_from_slice(b"Content-Type: multipart/byteranges; boundary=");
            out.extend_from_slice(boundary);
            out.extend_from_slice(b"\r\n");
        }
        _ => {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(content_type);
            out.extend_from_slice(b"\r\n");
        }
    }
    if let Some(n) = length {
        out.extend_from_slice(b"Content-Length: ");
        append_decimal(out, n);
        out.extend_from_slice(b"\r\n");
    }
    // an `add_header` of `ETag` or `Last-Modified` replaces the file's own (nginx's `ngx_http_set_response_header`)
    let status = part.status();
    let replaced = |name| edits.is_some_and(|e| e.prepared.replaces(status, name));
    match head {
        FileHead::File { .. } if replaced("last-modified") => {}
        FileHead::File { mtime, .. } => {
            out.extend_from_slice(b"Last-Modified: ");
            out.extend_from_slice(&last_modified(*mtime));
            out.extend_from_slice(b"\r\n");
        }
        FileHead::Moved { location, .. } => {
            out.extend_from_slice(b"Location: ");
            out.extend_from_slice(location);
            out.extend_from_slice(b"\r\n");
        }
    }
    if encoding.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    keepalive.write(out);
    if encoding.vary {
        out.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
    if let (
        FileHead::File {
            size,
            mtime,
            etag: true,
            ..
        },
        false,
    ) = (head, replaced("etag"))
    {
        let mut tag = [0u8; ETAG_MAX];
        if encoding.compressed {
            out.extend_from_slice(b"ETag: W/");
        } else {
            out.extend_from_slice(b"ETag: ");
        }
        out.extend_from_slice(etag_value(*mtime, *size, &mut tag));
        out.extend_from_slice(b"\r\n");
    }
    // nginx's headers filter runs before the range filter
    if let Some(e) = edits {
        let (status, last_modified) = match head {
            FileHead::File { mtime, .. } => (status, Some(*mtime)),
            FileHead::Moved { .. } => (301, None),
        };
        let facts = ResponseFacts {
            now: e.now,
            last_modified,
        };
        e.plan.append(status, e.prepared, e.response, facts, out);
    }
    if (encoding.compressed || encoding.precompressed) && part != Part::NotModified {
        out.extend_from_slice(b"Content-Encoding: gzip\r\n");
    }
    if let FileHead::File { size, .. } = head {
        match part {
            Part::Whole if !encoding.length_unknown() => out.extend_from_slice(b"Accept-Ranges: bytes\r\n"),
            Part::Single { start, end } => {
                out.extend_from_slice(b"Content-Range: bytes ");
                append_range(out, start, end, *size);
                out.extend_from_slice(b"\r\n");
            }
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// `S-E/TOTAL` of the bytes `[start, end)` of `total`.
fn append_range(out: &mut Vec<u8>, start: u64, end: u64, total: u64) {
    append_decimal(out, start);
    out.push(b'-');
    append_decimal(out, end.saturating_sub(1));
    out.push(b'/');
    append_decimal(out, total);
}

/// The part header nginx writes before each range of a multipart answer: `CRLF --BOUNDARY CRLF Content-Type: T
/// CRLF Content-Range: bytes S-E/TOTAL CRLF CRLF` (no `Content-Type` line for an empty type).
fn append_part_header(out: &mut Vec<u8>, boundary: &[u8], content_type: &str, range: (u64, u64), total: u64) {
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary);
    if !content_type.is_empty() {
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(content_type.as_bytes());
    }
    out.extend_from_slice(b"\r\nContent-Range: bytes ");
    append_range(out, range.0, range.1, total);
    out.extend_from_slice(b"\r\n\r\n");
}

/// The last line of a multipart answer: `CRLF --BOUNDARY-- CRLF`.
fn append_last_boundary(out: &mut Vec<u8>, boundary: &[u8]) {
    out.extend_from_slice(b"\r\n--");
    out.extend_from_slice(boundary);
    out.extend_from_slice(b"--\r\n");
}

/// The body length of a multipart answer of `ranges` of a file of `total` bytes.
fn multipart_length(ranges: &[(u64, u64)], boundary: &[u8], content_type: &str, total: u64) -> u64 {
    let mut scratch = Vec::with_capacity(128);
    let mut n = 0u64;
    for &r in ranges {
        scratch.clear();
        append_part_header(&mut scratch, boundary, content_type, r, total);
        n += scratch.len() as u64 + (r.1 - r.0);
    }
    scratch.clear();
    append_last_boundary(&mut scratch, boundary);
    n + scratch.len() as u64
}

impl<R: Runtime> ClientConn<R> {
    /// Answers a request served from files, after reading and dropping its body; returns whether the connection
    /// stays open.
    pub(super) async fn serve_file(
        &mut self,
        answer: FileAnswer<'_>,
        headers: &HeadersPlan,
        filters: Filters<'_>,
        req: &Routed,
    ) -> bool {
        let drained = discard_body::<R>(
            &mut self.sock,
            &mut self.bufs.client,
            req.body,
            &mut self.decoder,
            req.timeouts.body,
        )
        .await;
        match &drained {
            Err(BodyError::Chunk(_)) => self.shard.counters.count_bad_request(),
            Err(BodyError::Read(_) | BodyError::Truncated) => self.shard.counters.count_client_abort(),
            _ => {}
        }
        let keep = req.keepalive.and(drained.is_ok());
        match answer {
            // nginx closes the connection after a 400 or a 500 (`ngx_http_special_response_handler`)
            FileAnswer::Error(status) => {
                self.error_page(status, headers, req, keep.keeps() && status != 400 && status != 500)
                    .await
            }
            FileAnswer::ToSlash => self.send_moved(keep, headers, req).await,
            FileAnswer::File(f) => self.send_file(f, keep, headers, filters, req).await.unwrap_or(false),
        }
    }

    async fn send_moved(&mut self, keep: Connection, headers: &HeadersPlan, req: &Routed) -> bool {
        let body: &[u8] = &MOVED_BODY;
        let head = FileHead::Moved {
            location: &self.bufs.path,
            body_len: body.len(),
        };
        let (out, prepared) = (&mut self.bufs.out, &self.bufs.headers);
        out.clear();
        let now = crate::clock::now_secs();
        let response = file_vars(MOVED, &self.bufs.log, &self.bufs.vars);
        let edits = Some(FileEdits {
            plan: headers,
            prepared,
            response: &response,
            now,
        });
        self.shard.date(now, |d| write_file_head(&head, d, keep, edits, out));
        let head_len = out.len();
        let sent = if req.head_request { 0 } else { body.len() };
        out.extend_from_slice(body.get(..sent).unwrap_or_default());
        self.bufs.log.answered(301, head_len, sent as u64);
        send::<R>(&mut self.sock, &self.bufs.out, req.timeouts.send)
            .await
            .is_ok()
            && keep.keeps()
    }

    /// Sends `f`: the head with as much of the file as fits a chunk, then chunk after chunk through the same
    /// buffer; or its 304, its 206 (one range, or `multipart/byteranges`), its 416. A file that shrank while being
    /// sent closes the connection (nginx: "file was truncated").
    async fn send_file(
        &mut self,
        f: OpenFile<'_>,
        keep: Connection,
        headers: &HeadersPlan,
        filters: Filters<'_>,
        req: &Routed,
    ) -> io::Result<bool> {
        // the charset filter's `Content-Type` is written into the connection's buffer, lent for the answer
        if filters.charset.is_none() {
            return self
                .send_file_typed(f, keep, headers, filters, req, &mut String::new())
                .await;
        }
        let mut ct = std::mem::take(&mut CharsetScratch::lent(&mut self.bufs.charset).content_type);
        let sent = self.send_file_typed(f, keep, headers, filters, req, &mut ct).await;
        CharsetScratch::lent(&mut self.bufs.charset).content_type = ct;
        sent
    }

    /// [`Self::send_file`], with `ct` to hold a `Content-Type` the charset filter changes.
    async fn send_file_typed(
        &mut self,
        mut f: OpenFile<'_>,
        keep: Connection,
        headers: &HeadersPlan,
        filters: Filters<'_>,
        req: &Routed,
        ct: &mut String,
    ) -> io::Result<bool> {
        let gzip = filters.gzip;
        // an error page's file goes out with the error's status: the not_modified and range filters pass it by
        let as_error_page = self.bufs.pages.state.active();
        let not_modified = f.not_modified && !as_error_page;
        let mut encoding = match gzip {
            // the gzip filter passes a 304 by; `gzip_static on`'s `Vary` stays
            Some(g) if not_modified => FileEncoding {
                vary: g.vary && f.vary,
                ..FileEncoding::default()
            },
            Some(g) => {
                let facts = FileFacts {
                    content_type: f.content_type,
                    size: f.size,
                    etag: f.etag,
                    precompressed: f.precompressed,
                    found_gz: f.vary,
                };
                gz::for_file(g, req.gzip, facts)
            }
            None => FileEncoding::default(),
        };
        // the charset filter (before gzip's and the range filter's): the type's charset and the recoding table
        let mut content_type = f.content_type;
        let mut recode = None;
        if let Some(plan) = filters.charset {
            let answer = AnswerCharset {
                status: 200,
                content_type: ContentType::bare(f.content_type.as_bytes()),
                accel_charset: None,
                encoded: f.precompressed,
            };
            if let Some(edit) = plan.decide(&answer, CharsetScratch::of(&self.bufs.charset)) {
                let name = plan.name(&edit, None, CharsetScratch::of(&self.bufs.charset));
                let mut bytes = std::mem::take(ct).into_bytes();
                bytes.clear();
                plan.write_content_type(&answer.content_type, Some(&edit), name, &mut bytes);
                *ct = String::from_utf8(bytes).unwrap_or_else(|_| f.content_type.to_string());
                content_type = ct.as_str();
                recode = edit.recode.filter(|_| !not_modified);
                encoding.resized = recode.is_some_and(|r| !matches!(r, Recode::Byte(_)));
            }
        }
        let ranges = match std::mem::replace(&mut f.ranges, Ranges::Whole) {
            // a compressed or resized answer has no length to take ranges of
            _ if as_error_page || encoding.length_unknown() || not_modified => Ranges::Whole,
            r => r,
        };
        if ranges == Ranges::Unsatisfiable {
            return self.send_unsatisfiable(f.size, keep, headers, req).await;
        }
        let body = !req.head_request && !not_modified;
        encoding.chunked = encoding.length_unknown() && body && req.client_11;
        // a compressed body of unknown length to an HTTP/1.0 client ends with the connection
        let keep = keep.and(!(encoding.length_unknown() && body && !req.client_11));
        let boundary = match ranges {
            Ranges::Multi(_) => ranges::next_boundary(),
            _ => [0; 20],
        };
        let part = match &ranges {
            _ if not_modified => Part::NotModified,
            Ranges::Single(start, end) => Part::Single {
                start: *start,
                end: *end,
            },
            Ranges::Multi(list) => Part::Multi {
                boundary: &boundary,
                length: multipart_length(list, &boundary, content_type, f.size),
            },
            Ranges::Whole | Ranges::Unsatisfiable => Part::Whole,
        };
        let head = FileHead::File {
            content_type,
            size: f.size,
            mtime: f.mtime,
            etag: f.etag,
            encoding,
            part,
        };
        let (out, prepared) = (&mut self.bufs.out, &self.bufs.headers);
        out.clear();
        let now = crate::clock::now_secs();
        let response = file_vars(part.status(), &self.bufs.log, &self.bufs.vars);
        let edits = Some(FileEdits {
            plan: headers,
            prepared,
            response: &response,
            now,
        });
        self.shard.date(now, |d| write_file_head(&head, d, keep, edits, out));
        let status = self.bufs.pages.state.restatus(out, 0, part.status());
        if self.bufs.pages.state.active() {
            self.bufs.pages.state.add_kept_to_head(out);
        }
        let head_len = out.len();
        self.bufs.log.answered(status, head_len, 0);
        let mut pacer = req.rate.map(|r| Pacer::new(r, std::time::Instant::now()));
        let coded = encoding.compressed || encoding.resized;
        if body && coded {
            let mut stream = gzip
                .filter(|_| encoding.compressed)
                .map(|g| self.shard.gzip.take(g.level));
            let timeout = req.timeouts.send;
            let (sock, file, out) = (&mut self.sock, &*f.file, &mut self.bufs.out);
            let sent = match (recode, stream.as_mut()) {
                (Some(table), g) => {
                    let mut rs = RecodeStream::new(table, g, CharsetScratch::lent(&mut self.bufs.charset));
                    let sent =
                        gz::compress_file::<R>(sock, file, f.size, out, &mut rs, encoding.chunked, timeout).await;
                    rs.give_back(CharsetScratch::lent(&mut self.bufs.charset));
                    sent
                }
                (None, Some(g)) => gz::compress_file::<R>(sock, file, f.size, out, g, encoding.chunked, timeout).await,
                (None, None) => Ok(0),
            };
            if let Some(s) = stream {
                self.shard.gzip.give(s);
            }
            self.bufs.log.answered(status, head_len, *sent.as_ref().unwrap_or(&0));
            return sent.map(|_| keep.keeps());
        }
        // a single-byte table recodes the bytes in place as they are read (ranges included)
        let table = match recode {
            Some(Recode::Byte(t)) => Some(&**t),
            _ => None,
        };
        if !body || f.size == 0 {
            send_paced::<R>(&mut self.sock, out, req.timeouts.send, pacer.as_mut()).await?;
            return Ok(keep.keeps());
        }
        let log = Sending {
            status,
            head_len,
            recode: table,
        };
        let complete = match &ranges {
            Ranges::Single(start, end) => {
                let mut sent = 0;
                self.send_span(&f, (*start, *end), req, pacer.as_mut(), log, &mut sent)
                    .await?
            }
            Ranges::Multi(list) => {
                let mut sent = 0u64;
                for &range in list {
                    let before = self.bufs.out.len();
                    append_part_header(&mut self.bufs.out, &boundary, content_type, range, f.size);
                    sent += (self.bufs.out.len() - before) as u64;
                    if !self.send_span(&f, range, req, pacer.as_mut(), log, &mut sent).await? {
                        return Ok(false);
                    }
                }
                let before = self.bufs.out.len();
                append_last_boundary(&mut self.bufs.out, &boundary);
                sent += (self.bufs.out.len() - before) as u64;
                send_paced::<R>(&mut self.sock, &self.bufs.out, req.timeouts.send, pacer.as_mut()).await?;
                self.bufs.out.clear();
                self.bufs.log.answered(status, head_len, sent);
                true
            }
            Ranges::Whole | Ranges::Unsatisfiable => self.send_whole(&mut f, req, pacer.as_mut(), log).await?,
        };
        Ok(complete && keep.keeps())
    }

    /// The `sendfile_max_chunk` to send a file's bytes with sendfile(2) (nginx's `sendfile on`), or `None` for
    /// the buffer: sendfile off, a connection that cannot (TLS, glommio, HTTP/2: [`crate::runtime::Conn::can_send_file`]),
    /// bytes recoded by the charset filter, or `limit_rate` (whose pauses are measured per buffer).
    fn sendfile_for(&self, sendfile: Option<u64>, pacer: Option<&Pacer>, log: Sending<'_>) -> Option<u64> {
        sendfile.filter(|_| pacer.is_none() && log.recode.is_none() && self.sock.can_send_file())
    }

    /// The whole file after the head already in the output buffer, 32k at a time through it, or by sendfile(2);
    /// whether it was all sent (a file that shrank was not).
    async fn send_whole(
        &mut self,
        f: &mut OpenFile<'_>,
        req: &Routed,
        mut pacer: Option<&mut Pacer>,
        log: Sending<'_>,
    ) -> io::Result<bool> {
        if let Some(max_chunk) = self.sendfile_for(f.sendfile, pacer.as_deref(), log) {
            let span = FileSpan {
                file: &f.file,
                start: 0,
                end: f.size,
                max_chunk,
                timeout: req.timeouts.send,
            };
            let (sock, bufs) = (&mut self.sock, &mut self.bufs);
            let whole = sendfile::send_span::<R>(sock, &bufs.out, span, |n| {
                bufs.log.answered(log.status, log.head_len, n)
            });
            return whole.await;
        }
        let mut left = f.size;
        let mut start = log.head_len;
        let mut sent = 0u64;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(CHUNK).min(CHUNK);
            let out = &mut self.bufs.out;
            if out.len() < start + want {
                out.resize(start + want, 0);
            } else {
                out.truncate(start + want);
            }
            let got = read_full_at(&f.file, out.get_mut(start..).unwrap_or_default(), f.size - left)?;
            out.truncate(start + got);
            if let Some(t) = log.recode {
                recode_bytes(t, out.get_mut(start..).unwrap_or_default());
            }
            send_paced::<R>(&mut self.sock, out, req.timeouts.send, pacer.as_deref_mut()).await?;
            sent += got as u64;
            self.bufs.log.answered(log.status, log.head_len, sent);
            if got < want {
                return Ok(false);
            }
            left -= got as u64;
            start = 0;
        }
        Ok(true)
    }

    /// The bytes `[start, end)` of `file` after what the output buffer holds (a head, a part header), read at
    /// their offset 32k at a time; `sent` counts the body bytes. The buffer is left empty. Whether all were sent.
    async fn send_span(
        &mut self,
        file: &OpenFile<'_>,
        (mut pos, end): (u64, u64),
        req: &Routed,
        mut pacer: Option<&mut Pacer>,
        log: Sending<'_>,
        sent: &mut u64,
    ) -> io::Result<bool> {
        if let Some(max_chunk) = self.sendfile_for(file.sendfile, pacer.as_deref(), log) {
            let span = FileSpan {
                file: &file.file,
                start: pos,
                end,
                max_chunk,
                timeout: req.timeouts.send,
            };
            let before = *sent;
            let (sock, bufs) = (&mut self.sock, &mut self.bufs);
            let done = sendfile::send_span::<R>(sock, &bufs.out, span, |n| {
                *sent = before + n;
                bufs.log.answered(log.status, log.head_len, before + n)
            })
            .await;
            self.bufs.out.clear();
            return done;
        }
        let file = &file.file;
        while pos < end {
            let start = self.bufs.out.len();
            let want = usize::try_from(end - pos).unwrap_or(CHUNK).min(CHUNK);
            let out = &mut self.bufs.out;
            out.resize(start + want, 0);
            let got = read_full_at(file, out.get_mut(start..).unwrap_or_default(), pos)?;
            out.truncate(start + got);
            if let Some(t) = log.recode {
                recode_bytes(t, out.get_mut(start..).unwrap_or_default());
            }
            send_paced::<R>(&mut self.sock, out, req.timeouts.send, pacer.as_deref_mut()).await?;
            out.clear();
            *sent += got as u64;
            self.bufs.log.answered(log.status, log.head_len, *sent);
            if got < want {
                return Ok(false);
            }
            pos += got as u64;
        }
        Ok(true)
    }

    /// nginx's 416 for ranges none of which is in the file: its error page with `Content-Range: bytes */SIZE`.
    async fn send_unsatisfiable(
        &mut self,
        size: u64,
        keep: Connection,
        headers: &HeadersPlan,
        req: &Routed,
    ) -> io::Result<bool> {
        const STATUS: u16 = 416;
        self.shard.counters.count_answer(STATUS);
        let tokens = self.bufs.headers.tokens();
        let server = server_name(tokens);
        let mut body = Vec::new();
        append_error_page(STATUS, server, &mut body);
        let out = &mut self.bufs.out;
        out.clear();
        let now = crate::clock::now_secs();
        self.shard.date(now, |d| {
            out.extend_from_slice(b"HTTP/1.1 416 Requested Range Not Satisfiable\r\nServer: ");
            out.extend_from_slice(server.as_bytes());
            out.extend_from_slice(b"\r\nDate: ");
            out.extend_from_slice(d);
            out.extend_from_slice(b"\r\nContent-Type: text/html\r\nContent-Length: ");
            append_decimal(out, body.len() as u64);
            out.extend_from_slice(b"\r\n");
        });
        keep.write(out);
        out.extend_from_slice(b"Content-Range: bytes */");
        append_decimal(out, size);
        out.extend_from_slice(b"\r\n");
        let response = file_vars(STATUS, &self.bufs.log, &self.bufs.vars);
        let facts = ResponseFacts {
            now,
            last_modified: None,
        };
        headers.append(STATUS, &self.bufs.headers, &response, facts, out);
        out.extend_from_slice(b"\r\n");
        let head_len = out.len();
        let sent = if req.head_request { 0 } else { body.len() };
        out.extend_from_slice(body.get(..sent).unwrap_or_default());
        self.bufs.log.answered(STATUS, head_len, sent as u64);
        send::<R>(&mut self.sock, &self.bufs.out, req.timeouts.send).await?;
        Ok(keep.keeps())
    }
}

/// Reads into all of `buf` from `offset` of `file` unless the file ends first; the bytes read. Never by the file's
/// position: a cached descriptor is shared.
pub(super) fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(buf.get_mut(n..).unwrap_or_default(), offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::files::FilesConf;
    use crate::config::key::KeyTemplate;

    #[test]
    fn last_modified_is_formatted_for_each_time() {
        for t in [784_111_777, 784_111_777, 0, 784_111_777, -5] {
            assert_eq!(last_modified(t), format_http_date(u64::try_from(t).unwrap_or(0)), "{t}");
        }
    }

    #[test]
    fn etags_are_what_nginx_prints() {
        let mut buf = [0u8; ETAG_MAX];
        for (mtime, size) in [(0, 0), (0x6b15_dfca, 0x401), (-1, u64::MAX), (i64::MAX, 15), (1, 16)] {
            let want = format!("\"{mtime:x}-{size:x}\"");
            assert_eq!(etag_value(mtime, size, &mut buf), want.as_bytes(), "{want}");
        }
    }

    /// A root with `index.html`, `sub/` (no index), `file` and `dir/index.html`.
    fn root(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("corelb-static-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("dir")).unwrap();
        std::fs::write(d.join("index.html"), "i").unwrap();
        std::fs::write(d.join("file"), "f").unwrap();
        std::fs::write(d.join("dir/index.html"), "d").unwrap();
        d
    }

    fn outcome(plan: &FilesPlan, uri: &[u8], method: FileMethod, path: &mut Vec<u8>) -> Result<u16, Vec<u8>> {
        let req = request(method, Some(b"h"), b"");
        let caps = crate::config::regex::Captures::default();
        let vars = WithCaptures {
            vars: &NoVars,
            caps: &caps,
        };
        match step(plan, None, uri, &req, &vars, path) {
            Step::Redirect => Err(path.clone()),
            Step::Answer(FileAnswer::File(f)) => Ok(200 + u16::from(f.size != 1)),
            Step::Answer(FileAnswer::ToSlash) => Ok(301),
            Step::Answer(FileAnswer::Error(s)) => Ok(s),
        }
    }

    #[test]
    fn index_and_static_steps_as_nginx() {
        let dir = root("steps");
        let conf = FilesConf {
            root: dir.clone(),
            index: vec![KeyTemplate::literal("none.html"), KeyTemplate::literal("index.html")],
            ..FilesConf::default()
        };
        let plan = FilesPlan::new(&conf);
        let mut path = Vec::new();
        let get = FileMethod::Get;
        assert_eq!(outcome(&plan, b"/", get, &mut path), Err(b"/index.html".to_vec()));
        assert_eq!(
            outcome(&plan, b"/dir/", get, &mut path),
            Err(b"/dir/index.html".to_vec())
        );
        assert_eq!(
            outcome(&plan, b"/sub/", get, &mut path),
            Ok(403),
            "the directory exists"
        );
        assert_eq!(outcome(&plan, b"/gone/", get, &mut path), Ok(404), "it does not");
        assert_eq!(
            outcome(&plan, b"/file/", get, &mut path),
            Ok(404),
            "a file is no directory"
        );
        assert_eq!(outcome(&plan, b"/file", get, &mut path), Ok(200));
        assert_eq!(outcome(&plan, b"/file", FileMethod::Post, &mut path), Ok(405));
        assert_eq!(outcome(&plan, b"/gone", FileMethod::Post, &mut path), Ok(404));
        assert_eq!(outcome(&plan, b"/sub", FileMethod::Post, &mut path), Ok(301));
        assert_eq!(outcome(&plan, b"/file", FileMethod::Other, &mut path), Ok(405));
        assert_eq!(outcome(&plan, b"/sub/", FileMethod::Other, &mut path), Ok(405));
        assert_eq!(outcome(&plan, b"*", get, &mut path), Ok(400));
        let absolute = FilesPlan::new(&FilesConf {
            root: dir.clone(),
            index: vec![KeyTemplate::literal("/first"), KeyTemplate::literal("index.html")],
            ..FilesConf::default()
        });
        assert_eq!(
            outcome(&absolute, b"/gone/", get, &mut path),
            Err(b"/first".to_vec()),
            "not checked"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn request<'a>(method: FileMethod, host: Option<&'a [u8]>, args: &'a [u8]) -> FileRequest<'a> {
        FileRequest {
            method,
            args,
            host,
            local: "127.0.0.1:8080".parse().unwrap(),
            head: None,
            vars: &NoVars,
            add_uri_to_alias: false,
            redirect: RedirectStyle::NGINX,
            server_name: "srv",
        }
    }

    #[test]
    fn redirect_to_the_slash_as_nginx_writes_it() {
        let mut out = Vec::new();
        let get = FileMethod::Get;
        moved_to_slash(b"/dir", &request(get, Some(b"LocalHost."), b""), &mut out);
        assert_eq!(out, b"http://localhost:8080/dir/");
        moved_to_slash(b"/sp ace", &request(get, None, b"a=b"), &mut out);
        assert_eq!(out, b"http://127.0.0.1:8080/sp%20ace/?a=b");
        let mut on_80 = request(get, Some(b"x"), b"");
        on_80.local = "[::1]:80".parse().unwrap();
        moved_to_slash(b"/d", &on_80, &mut out);
        assert_eq!(out, b"http://x/d/");
        on_80.host = None;
        moved_to_slash(b"/d", &on_80, &mut out);
        assert_eq!(out, b"http://::1/d/");
        let mut off = request(get, Some(b"x"), b"a=b");
        off.redirect.absolute = false;
        moved_to_slash(b"/sp ace", &off, &mut out);
        assert_eq!(out, b"/sp%20ace/?a=b", "absolute_redirect off");
        let named = FileRequest {
            redirect: RedirectStyle {
                server_name: true,
                port: false,
                ..RedirectStyle::NGINX
            },
            ..request(get, Some(b"x"), b"")
        };
        moved_to_slash(b"/d", &named, &mut out);
        assert_eq!(
            out, b"http://srv/d/",
            "server_name_in_redirect on, port_in_redirect off"
        );
    }

    #[test]
    fn heads_in_nginx_order() {
        let mut out = Vec::new();
        let file = FileHead::File {
            content_type: "text/css",
            size: 0x267,
            mtime: 1_800_000_000,
            etag: true,
            encoding: FileEncoding::default(),
            part: Part::Whole,
        };
        write_file_head(&file, b"D", Connection::KEEP, None, &mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/css\r\nContent-Length: 615\r\n\
             Last-Modified: Fri, 15 Jan 2027 08:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6b49d200-267\"\r\n\
             Accept-Ranges: bytes\r\n\r\n"
        );
        out.clear();
        let moved = FileHead::Moved {
            location: b"http://x/d/",
            body_len: 7,
        };
        write_file_head(&moved, b"D", Connection::CLOSE, None, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 301 Moved Permanently\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/html\r\n\
             Content-Length: 7\r\nLocation: http://x/d/\r\nConnection: close\r\n\r\n"
        );
    }
}
