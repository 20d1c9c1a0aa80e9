//! Compressing answers as nginx's gzip filter does, streamed: a proxied body is decoded from its framing, each
//! piece deflated and sent as a chunk (HTTP/1.1) or as it comes on a connection that then closes (HTTP/1.0), so
//! no body is held whole. The deflate state comes from a per-shard pool ([`GzipPool`]) and goes back to it when
//! the answer ends: an idle connection holds none. Also the head edits of a compressed proxied answer
//! (`Content-Encoding`, `Vary`, no `Content-Length`/`Accept-Ranges`, a weak `ETag`).

use super::body::{send, BodyError, Limits};
use crate::http::chunked::ChunkedDecoder;
use crate::http::gzip::{append_chunk, weak_etag, Encoder};
use crate::http::response::{HeadEdits, ResponseHead};
use crate::http::BodyFraming;
use crate::runtime::iobuf::IoBuf;
use crate::runtime::Runtime;
use crate::snapshot::gzip::{AnswerFacts, GzipAsk, GzipPlan};
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::time::Duration;

/// Idle compressors a shard keeps for the next answers; more at once are made and dropped when done.
pub const POOL_IDLE: usize = 4;

/// The most file bytes read and deflated at once.
const FILE_PIECE: usize = 32 * 1024;

/// One answer's compressor and the buffer its output goes through before it is framed.
#[derive(Debug)]
pub struct GzipStream {
    enc: Encoder,
    z: Vec<u8>,
    /// File bytes read before they are deflated (kept with the compressor: no allocation per answer).
    input: Vec<u8>,
}

/// What codes a body as it streams: gzip ([`GzipStream`]), a charset recoder, or both
/// (`super::charset::RecodeStream`).
pub trait Coder {
    /// Codes `data` into the pending output.
    fn write(&mut self, data: &[u8]);
    /// Ends the stream (gzip's trailer).
    fn finish(&mut self);
    /// The coded output not sent yet (framed and cleared by the copy).
    fn pending(&mut self) -> &mut Vec<u8>;
    /// The buffer a file's bytes are read into before [`Coder::write_input`] codes them.
    fn input(&mut self) -> &mut Vec<u8>;
    /// Codes the first `n` bytes of [`Coder::input`].
    fn write_input(&mut self, n: usize);
}

impl Coder for GzipStream {
    fn write(&mut self, data: &[u8]) {
        self.enc.write(data, &mut self.z);
    }
    fn finish(&mut self) {
        self.enc.finish(&mut self.z);
    }
    fn pending(&mut self) -> &mut Vec<u8> {
        &mut self.z
    }
    fn input(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }
    fn write_input(&mut self, n: usize) {
        let GzipStream { enc, z, input } = self;
        enc.write(input.get(..n).unwrap_or_default(), z);
    }
}

/// A shard's idle compressors (at most [`POOL_IDLE`]), taken by an answer that compresses and given back when it
/// ends.
#[derive(Debug, Default)]
pub struct GzipPool {
    idle: RefCell<Vec<GzipStream>>,
}

impl GzipPool {
    /// A compressor at `level`, reset: an idle one of that level, else a new one.
    pub fn take(&self, level: u32) -> GzipStream {
        let mut idle = self.idle.borrow_mut();
        match idle.iter().position(|s| s.enc.level() == level) {
            Some(i) => {
                let mut s = idle.swap_remove(i);
                s.enc.reset();
                s.z.clear();
                s
            }
            None => GzipStream {
                enc: Encoder::new(level),
                z: Vec::new(),
                input: Vec::new(),
            },
        }
    }

    /// Gives a compressor back (dropped when the pool is full).
    pub fn give(&self, s: GzipStream) {
        let mut idle = self.idle.borrow_mut();
        if idle.len() < POOL_IDLE {
            idle.push(s);
        }
    }

    /// How many are idle.
    pub fn idle(&self) -> usize {
        self.idle.borrow().len()
    }
}

/// What gzip does to one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GzipAnswer {
    /// `Vary: Accept-Encoding` (`gzip_vary on` and the filter took the answer).
    pub vary: bool,
    /// The body is compressed here.
    pub compress: bool,
}

impl GzipAnswer {
    /// Whether the head changes at all.
    pub fn any(&self) -> bool {
        self.vary || self.compress
    }
}

/// The decision for an upstream answer `resp` to a request that asked `ask`, under `plan`.
pub fn for_upstream(plan: &GzipPlan, ask: GzipAsk, resp: &ResponseHead<'_, '_>, now: u64) -> GzipAnswer {
    let mut content_type: &[u8] = b"";
    let mut encoded = false;
    let mut length = None;
    for h in resp.headers {
        let n = h.name;
        if n.eq_ignore_ascii_case("content-type") {
            content_type = h.value;
        } else if n.eq_ignore_ascii_case("content-encoding") {
            encoded |= !h.value.is_empty();
        } else if n.eq_ignore_ascii_case("content-length") {
            length = crate::http::parse_content_length(h.value);
        }
    }
    if !plan.takes(resp.status, content_type, encoded, length) {
        return GzipAnswer::default();
    }
    let compress = plan.compresses(ask, || plan.by_answer(&upstream_facts(resp, now)));
    GzipAnswer {
        vary: plan.vary,
        compress,
    }
}

/// The headers `gzip_proxied` reads off an upstream answer.
fn upstream_facts<'a>(resp: &ResponseHead<'_, 'a>, now: u64) -> AnswerFacts<'a> {
    let mut f = AnswerFacts {
        now,
        ..AnswerFacts::default()
    };
    for h in resp.headers {
        let n = h.name;
        if n.eq_ignore_ascii_case("expires") {
            f.expires = Some(h.value);
        } else if n.eq_ignore_ascii_case("date") {
            f.date = Some(h.value);
        } else if n.eq_ignore_ascii_case("cache-control") {
            f.cache_control = Some(h.value);
        } else if n.eq_ignore_ascii_case("last-modified") {
            f.last_modified = true;
        } else if n.eq_ignore_ascii_case("etag") {
            f.etag = true;
        }
    }
    f
}

/// The head edits of a proxied answer gzip changes, over the location's own edits.
pub struct GzipEdits<'a> {
    pub inner: &'a dyn HeadEdits,
    pub answer: GzipAnswer,
}

impl HeadEdits for GzipEdits<'_> {
    fn server(&self) -> &str {
        self.inner.server()
    }
    fn passes(&self, name: &str) -> bool {
        self.inner.passes(name)
    }
    fn upstream_line(&self, status: u16, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        if self.answer.compress {
            // `ngx_http_clear_content_length`, `ngx_http_clear_accept_ranges`, `ngx_http_weak_etag`
            if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("accept-ranges") {
                return true;
            }
            if name.eq_ignore_ascii_case("etag") {
                if let Some(weak) = weak_etag(value) {
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(b": ");
                    weak.append(out);
                    out.extend_from_slice(b"\r\n");
                }
                return true;
            }
        }
        self.inner.upstream_line(status, name, value, out)
    }
    fn append(&self, status: u16, last_modified: Option<&[u8]>, out: &mut Vec<u8>) {
        // nginx's header filter writes `Vary` after `Connection`, then the list: the added headers, then the
        // `Content-Encoding` the gzip filter pushed after them
        if self.answer.vary {
            out.extend_from_slice(b"Vary: Accept-Encoding\r\n");
        }
        self.inner.append(status, last_modified, out);
        if self.answer.compress {
            out.extend_from_slice(b"Content-Encoding: gzip\r\n");
        }
    }
}

/// What gzip does to a file's answer (`FileHead::File`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileEncoding {
    /// `Vary: Accept-Encoding`.
    pub vary: bool,
    /// Compressed here: no `Content-Length` or `Accept-Ranges`, a weak `ETag`, `Content-Encoding: gzip`.
    pub compressed: bool,
    /// `Transfer-Encoding: chunked` (a compressed body to an HTTP/1.1 client, not for HEAD).
    pub chunked: bool,
    /// A `gzip_static` file sent as it is: `Content-Encoding: gzip` with its own length and `ETag`.
    pub precompressed: bool,
    /// Recoded from or to UTF-8 by the charset filter: no `Content-Length`, ranges or `Accept-Ranges`.
    pub resized: bool,
}

impl FileEncoding {
    /// Whether the body sent differs in length from the file (no `Content-Length`, no ranges).
    pub fn length_unknown(&self) -> bool {
        self.compressed || self.resized
    }
}

/// The encoding of a file answer of `size` bytes and `content_type` (`precompressed` and `found_gz`: what
/// `gzip_static` did) for a request that asked `ask`, under `plan`.
pub fn for_file(plan: &GzipPlan, ask: GzipAsk, file: FileFacts<'_>) -> FileEncoding {
    if file.precompressed {
        return FileEncoding {
            vary: plan.vary && file.found_gz,
            precompressed: true,
            ..FileEncoding::default()
        };
    }
    let takes = plan.takes(200, file.content_type.as_bytes(), false, Some(file.size));
    let compressed = takes
        && plan.compresses(ask, || {
            plan.by_answer(&AnswerFacts {
                last_modified: true,
                etag: file.etag,
                now: crate::clock::now_secs(),
                ..AnswerFacts::default()
            })
        });
    FileEncoding {
        vary: plan.vary && (takes || file.found_gz),
        compressed,
        chunked: false,
        precompressed: false,
        resized: false,
    }
}

/// What [`for_file`] reads of a file's answer.
#[derive(Debug, Clone, Copy)]
pub struct FileFacts<'a> {
    pub content_type: &'a str,
    pub size: u64,
    pub etag: bool,
    pub precompressed: bool,
    pub found_gz: bool,
}

/// How a compressed body goes out.
#[derive(Debug, Clone, Copy)]
pub struct GzipOut {
    /// Chunked (HTTP/1.1); else the bytes as they come, and the connection closes after them.
    pub chunked: bool,
    pub limits: Limits,
}

/// What a compressed copy moved.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moved {
    /// Body bytes read from the source (framing included, as [`super::body::forward_body`] counts them).
    pub read: u64,
    /// Body bytes written to the client (framing included).
    pub sent: u64,
}

/// Moves `s`'s pending output into `out`, framed.
fn frame(s: &mut dyn Coder, chunked: bool, out: &mut Vec<u8>) {
    let z = s.pending();
    if chunked {
        append_chunk(z, out);
    } else {
        out.extend_from_slice(z);
    }
    z.clear();
}

/// The connections and buffers a compressed copy works with.
pub struct CopyIo<'a, C> {
    /// The upstream.
    pub src: &'a mut C,
    /// Bytes already read from `src`; what follows the body stays in it.
    pub buf: &'a mut IoBuf,
    pub decoder: &'a mut ChunkedDecoder,
    /// The client.
    pub dst: &'a mut C,
    /// The head, sent with the first piece; then each piece framed.
    pub out: &'a mut Vec<u8>,
}

/// Reads a body framed as `framing` from `io.src`, codes its data with `s` (compresses, recodes) and writes it to
/// `io.dst`.
pub async fn compress_body<R: Runtime>(
    io: CopyIo<'_, R::Conn>,
    s: &mut dyn Coder,
    framing: BodyFraming,
    how: GzipOut,
) -> Result<Moved, BodyError> {
    let CopyIo {
        src,
        buf,
        decoder,
        dst,
        out,
    } = io;
    decoder.reset();
    let head = out.len() as u64;
    let mut moved = Moved::default();
    let mut left = match framing {
        BodyFraming::Length(n) => n,
        _ => u64::MAX,
    };
    let mut ended = false;
    loop {
        let avail = buf.readable();
        let used = match framing {
            BodyFraming::None => 0,
            BodyFraming::Length(_) => {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(avail.len());
                s.write(avail.get(..n).unwrap_or_default());
                left -= n as u64;
                n
            }
            BodyFraming::UntilClose => {
                s.write(avail);
                avail.len()
            }
            BodyFraming::Chunked => decoder.feed(avail, |d| s.write(d))?,
        };
        buf.consume(used);
        moved.read += used as u64;
        let done = ended
            || match framing {
                BodyFraming::None => true,
                BodyFraming::Length(_) => left == 0,
                BodyFraming::Chunked => decoder.is_done(),
                BodyFraming::UntilClose => false,
            };
        if done {
            s.finish();
        }
        frame(s, how.chunked, out);
        if done && how.chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        if !out.is_empty() {
            send::<R>(dst, out, how.limits.write).await.map_err(BodyError::Write)?;
            moved.sent += out.len() as u64;
            out.clear();
        }
        if done {
            moved.sent = moved.sent.saturating_sub(head);
            return Ok(moved);
        }
        match buf.fill::<R>(src, how.limits.read).await {
            Ok(0) if framing == BodyFraming::UntilClose => ended = true,
            Ok(0) => return Err(BodyError::Truncated),
            Ok(_) => {}
            Err(e) => return Err(BodyError::Read(e)),
        }
    }
}

/// Reads `size` bytes of `file`, codes them with `s` (compresses, recodes) and writes them to `conn`, `out`
/// (holding the head) first. Returns the body bytes sent; a file that ends early is `UnexpectedEof` after what
/// it had was sent.
pub async fn compress_file<R: Runtime>(
    conn: &mut R::Conn,
    file: &File,
    size: u64,
    out: &mut Vec<u8>,
    s: &mut dyn Coder,
    chunked: bool,
    timeout: Duration,
) -> io::Result<u64> {
    let head = out.len() as u64;
    let mut left = size;
    s.input().resize(FILE_PIECE, 0);
    let mut sent = 0u64;
    loop {
        let want = usize::try_from(left).unwrap_or(FILE_PIECE).min(FILE_PIECE);
        let at = size - left;
        let got = super::static_file::read_full_at(file, s.input().get_mut(..want).unwrap_or_default(), at)?;
        s.write_input(got);
        left -= got as u64;
        let short = got < want;
        let done = left == 0 && !short;
        if done {
            s.finish();
        }
        frame(s, chunked, out);
        if done && chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        if !out.is_empty() {
            send::<R>(conn, out, timeout).await?;
            sent += out.len() as u64;
            out.clear();
        }
        if short {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if done {
            return Ok(sent.saturating_sub(head));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::{parse_response, write_client_head_with, ClientHead, NoEdits, MAX_HEADERS};

    #[test]
    fn pool_keeps_a_few_idle_by_level() {
        let pool = GzipPool::default();
        let taken: Vec<_> = (0..6).map(|_| pool.take(1)).collect();
        for s in taken {
            pool.give(s);
        }
        assert_eq!(pool.idle(), POOL_IDLE);
        let six = pool.take(6);
        assert_eq!(six.enc.level(), 6);
        assert_eq!(pool.idle(), POOL_IDLE, "no level-6 one was idle");
        let one = pool.take(1);
        assert_eq!(one.enc.level(), 1);
        assert_eq!(pool.idle(), POOL_IDLE - 1);
    }

    fn plan(vary: bool) -> GzipPlan {
        let c = crate::config::gzip::GzipConf {
            enable: true,
            vary,
            ..Default::default()
        };
        GzipPlan::of(&c).unwrap()
    }

    #[test]
    fn compressed_proxied_head_as_nginx_writes_it() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\nETag: \"x\"\r\n\
                    Accept-Ranges: bytes\r\n\r\n";
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let resp = parse_response(raw, &mut hs, false).unwrap().unwrap();
        let answer = for_upstream(&plan(true), GzipAsk::Yes, &resp, 0);
        assert_eq!(
            answer,
            GzipAnswer {
                vary: true,
                compress: true
            }
        );
        let edits = GzipEdits {
            inner: &NoEdits,
            answer,
        };
        let head = ClientHead {
            date: b"D",
            keepalive: crate::http::keepalive::Connection::KEEP,
            chunked_out: true,
            upgrade: false,
        };
        let mut out = Vec::new();
        write_client_head_with(&resp, head, &edits, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "HTTP/1.1 200 OK\r\nServer: corelb/{}\r\nDate: D\r\nContent-Type: text/html\r\nETag: W/\"x\"\r\n\
                 Transfer-Encoding: chunked\r\nConnection: keep-alive\r\nVary: Accept-Encoding\r\n\
                 Content-Encoding: gzip\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        assert_eq!(
            for_upstream(&plan(true), GzipAsk::No, &resp, 0),
            GzipAnswer {
                vary: true,
                compress: false
            },
            "Vary whether or not this client takes gzip"
        );
        let encoded = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: br\r\n\r\n";
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let resp = parse_response(encoded, &mut hs, false).unwrap().unwrap();
        assert!(!for_upstream(&plan(true), GzipAsk::Yes, &resp, 0).any());
    }
}
