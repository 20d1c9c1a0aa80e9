//! One HTTP/2 stream: its request written as an HTTP/1.1 head (the pseudo-headers as the request line and
//! `Host`, the body framed by its `content-length` or as chunks) into a pipe that the HTTP/1.1 flow serves, and
//! the answer it writes relayed back as HTTP/2 frames ([`super::answer`]).

use super::answer::{self, Relayed};
use super::ConnFacts;
use crate::http::chunked::ChunkedDecoder;
use crate::http::vars::ConnVars;
use crate::proxy::client::ClientConn;
use crate::proxy::conn_snapshot::ConnSnapshot;
use crate::proxy::phase::ConnPhase;
use crate::runtime::pipe::{pipe, PipeEnd};
use crate::runtime::{Conn, Runtime};
use crate::shard::Shard;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use std::cell::Cell;
use std::rc::Rc;

/// Bytes the pipe holds each way: what a stream buffers between the HTTP/1.1 flow and its frames.
const PIPE: usize = 16 * 1024;

/// How a stream ended, for its connection's rapid-reset bound.
pub(super) enum End {
    Answered,
    ResetByPeer,
    Failed,
}

/// How the request's body is framed in its HTTP/1.1 head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// A request HTTP/2 refuses as malformed (RFC 9113 8.2, 8.3): the stream is reset with `PROTOCOL_ERROR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Malformed;

/// Serves one stream: the request through the HTTP/1.1 flow, its answer back to the client.
pub(super) async fn serve<R: Runtime>(
    shard: &Rc<Shard<R>>,
    facts: &ConnFacts,
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) -> End {
    // a stream the client reset before it was taken (rapid reset) costs nothing more
    if futures_lite::future::poll_once(std::future::poll_fn(|cx| respond.poll_reset(cx)))
        .await
        .is_some()
    {
        return End::ResetByPeer;
    }
    let Some(at) = ConnSnapshot::take(shard, facts.listen) else {
        respond.send_reset(Reason::REFUSED_STREAM);
        return End::Failed;
    };
    let (parts, mut body) = request.into_parts();
    // a body without `content-length` that fits the preread window is read first and sent with its length
    // (nginx's default, request buffering); a longer one goes on as chunks
    let mut preread = Vec::new();
    let mut ended = body.is_end_stream();
    if !ended && !parts.headers.contains_key(http::header::CONTENT_LENGTH) {
        let wait = body_timeout(&at);
        match preread_body::<R>(&mut body, &mut preread, facts.preread, wait).await {
            Ok(e) => ended = e,
            Err(Preread::Reset) => return End::ResetByPeer,
            // as nginx's stream whose body read timed out: reset with PROTOCOL_ERROR
            Err(Preread::TimedOut) => {
                respond.send_reset(Reason::PROTOCOL_ERROR);
                return End::Failed;
            }
        }
    }
    let mut head = Vec::with_capacity(256 + parts.headers.len() * 32 + preread.len());
    let framing = match request_head(&parts, ended, preread.len(), &mut head) {
        Ok(f) => f,
        Err(Malformed) => {
            respond.send_reset(Reason::PROTOCOL_ERROR);
            return End::Failed;
        }
    };
    let (ours, theirs) = pipe(PIPE, facts.local);
    let mut bufs = shard.take_buffers(at.snap.client_buffer);
    bufs.tls.clone_from(&facts.tls);
    bufs.proxy = facts.proxy;
    bufs.tlvs.clear();
    bufs.tlvs.extend_from_slice(&facts.tlvs);
    bufs.http2 = Some(facts.kind);
    let chunk = Rc::new(Cell::new(u32::try_from(facts.chunk_size).unwrap_or(u32::MAX)));
    bufs.http2_chunk = Some(Rc::clone(&chunk));
    bufs.log.new_connection(facts.connection);
    let conn = ClientConn {
        shard: Rc::clone(shard),
        sock: R::Conn::bridge(theirs),
        bufs,
        decoder: ChunkedDecoder::new(),
        vars: ConnVars::new(facts.remote, facts.local),
        phase: ConnPhase::waiting(&shard.counters),
    };
    let send_timeout = at.defaults().send_timeout;
    let flow = crate::proxy::http::serve_requests(conn, at, false);
    let relay = async move {
        let to = answer::Relay {
            pipe: &ours,
            head_request: parts.method == http::Method::HEAD,
            chunk: &chunk,
            send_timeout,
            unsent: &facts.unsent,
        };
        let sending = async {
            let first = Read { bytes: &preread, ended };
            if send_body(&ours, &head, framing, first, body).await.is_err() {
                // the client reset the stream, or the flow stopped reading: the flow sees the end of its body
                ours.shutdown();
            }
            std::future::pending::<()>().await;
            Relayed::Failed
        };
        let relayed = futures_lite::future::or(to.run::<R>(respond), sending).await;
        // the flow reads the end of the stream: no second request comes on this pipe
        drop(ours);
        relayed
    };
    let ((), relayed) = futures_lite::future::zip(flow, relay).await;
    match relayed {
        Relayed::Done => End::Answered,
        Relayed::ResetByPeer => End::ResetByPeer,
        Relayed::Failed => End::Failed,
    }
}

/// `client_body_timeout` of the address's default server: the wait for each DATA frame read before the request
/// is routed (nginx's is the location's; the stream's is not known yet).
fn body_timeout(at: &ConnSnapshot) -> std::time::Duration {
    let server = at
        .snap
        .http_ports
        .get(at.port())
        .and_then(|p| at.snap.servers.get(p.default_server));
    server.map_or(std::time::Duration::from_secs(60), |s| s.client.client_body_timeout)
}

/// Why reading the body ahead stopped.
enum Preread {
    /// The client reset the stream (or the connection ended).
    Reset,
    /// No DATA came within `client_body_timeout`.
    TimedOut,
}

/// Reads DATA frames into `out` while they fit in `limit` bytes, each within `wait`; whether the body ended there.
async fn preread_body<R: Runtime>(
    body: &mut RecvStream,
    out: &mut Vec<u8>,
    limit: usize,
    wait: std::time::Duration,
) -> Result<bool, Preread> {
    while out.len() < limit {
        match crate::runtime::timeout::<R, _>(wait, body.data()).await {
            Err(_) => return Err(Preread::TimedOut),
            Ok(None) => return Ok(true),
            Ok(Some(Ok(data))) => {
                out.extend_from_slice(&data);
                let _ = body.flow_control().release_capacity(data.len());
            }
            Ok(Some(Err(_))) => return Err(Preread::Reset),
        }
    }
    Ok(body.is_end_stream())
}

/// The body bytes read before the head was written.
struct Read<'a> {
    bytes: &'a [u8],
    /// They were the whole body.
    ended: bool,
}

/// Writes the head, then the DATA frames' bytes (as chunks when the request had no `content-length`), giving the
/// flow-control window back as the flow takes them.
async fn send_body(
    pipe: &PipeEnd,
    head: &[u8],
    framing: Framing,
    first: Read<'_>,
    mut body: RecvStream,
) -> Result<(), ()> {
    pipe.write_all(head).await.map_err(drop)?;
    if framing == Framing::None {
        return Ok(());
    }
    let mut size = [0u8; 20];
    if !first.bytes.is_empty() {
        if framing == Framing::Chunked {
            let n = chunk_size_line(first.bytes.len(), &mut size);
            pipe.write_all(&size[..n]).await.map_err(drop)?;
        }
        pipe.write_all(first.bytes).await.map_err(drop)?;
        if framing == Framing::Chunked {
            pipe.write_all(b"\r\n").await.map_err(drop)?;
        }
    }
    if first.ended {
        return Ok(());
    }
    while let Some(data) = body.data().await {
        let data = data.map_err(drop)?;
        if data.is_empty() {
            continue;
        }
        if framing == Framing::Chunked {
            let n = chunk_size_line(data.len(), &mut size);
            pipe.write_all(&size[..n]).await.map_err(drop)?;
        }
        pipe.write_all(&data).await.map_err(drop)?;
        if framing == Framing::Chunked {
            pipe.write_all(b"\r\n").await.map_err(drop)?;
        }
        let _ = body.flow_control().release_capacity(data.len());
    }
    if framing == Framing::Chunked {
        pipe.write_all(b"0\r\n\r\n").await.map_err(drop)?;
    }
    Ok(())
}

/// `n` in decimal into `out`; its length.
fn decimal(n: u64, out: &mut [u8; 20]) -> usize {
    let text = n.to_string();
    out[..text.len()].copy_from_slice(text.as_bytes());
    text.len()
}

/// `SIZE-IN-HEX\r\n` into `out`; its length.
fn chunk_size_line(n: usize, out: &mut [u8; 20]) -> usize {
    let hex = format!("{n:x}\r\n");
    let len = hex.len().min(out.len());
    out[..len].copy_from_slice(&hex.as_bytes()[..len]);
    len
}

/// Headers HTTP/2 forbids (RFC 9113 8.2.2; h2 refuses them too) and those the head gets elsewhere.
fn connection_specific(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// The HTTP/1.1 head of the request: `METHOD :path HTTP/1.1`, `Host` from the `host` header or `:authority`,
/// the header fields (the `cookie` fields joined with `; `, as nginx), and the body's framing.
/// `preread`: the bytes of a body without `content-length` read so far (all of it when `ended`).
fn request_head(
    parts: &http::request::Parts,
    ended: bool,
    preread: usize,
    out: &mut Vec<u8>,
) -> Result<Framing, Malformed> {
    let target = match (&parts.method, parts.uri.path_and_query()) {
        (&http::Method::CONNECT, _) => parts.uri.authority().map(|a| a.as_str()).unwrap_or(""),
        (_, Some(p)) => p.as_str(),
        (_, None) => "",
    };
    if target.is_empty() {
        return Err(Malformed);
    }
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // every `host` line goes on (two are a 400 there, as nginx answers them); `:authority` only without one
    let mut hosts = parts.headers.get_all(http::header::HOST).iter().peekable();
    match (hosts.peek().is_some(), parts.uri.authority()) {
        (true, _) => {
            for h in hosts {
                line(out, "host", h.as_bytes())?;
            }
        }
        (false, Some(a)) => line(out, "host", a.as_str().as_bytes())?,
        (false, None) => {}
    }
    let mut length = None;
    let mut cookies = 0;
    for (name, value) in &parts.headers {
        let n = name.as_str();
        if connection_specific(n) || (n == "te" && value.as_bytes() != b"trailers") {
            return Err(Malformed);
        }
        match n {
            "host" | "te" | "expect" | "cookie" => {}
            "content-length" => {
                let v = std::str::from_utf8(value.as_bytes()).map_err(|_| Malformed)?;
                let len: u64 = v.trim().parse().map_err(|_| Malformed)?;
                if length.is_some_and(|l| l != len) {
                    return Err(Malformed);
                }
                if length.is_none() {
                    line(out, n, value.as_bytes())?;
                }
                length = Some(len);
            }
            _ => line(out, n, value.as_bytes())?,
        }
        cookies += usize::from(n == "cookie");
    }
    if cookies > 0 {
        out.extend_from_slice(b"cookie: ");
        for (i, v) in parts.headers.get_all(http::header::COOKIE).iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b"; ");
            }
            check_value(v.as_bytes())?;
            out.extend_from_slice(v.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    let framing = match (length, ended) {
        (Some(0), _) => Framing::None,
        (None, true) if preread == 0 => Framing::None,
        (None, true) => {
            let mut n = [0u8; 20];
            let len = decimal(preread as u64, &mut n);
            line(out, "content-length", &n[..len])?;
            Framing::Length(preread as u64)
        }
        (Some(n), _) => Framing::Length(n),
        (None, false) => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            Framing::Chunked
        }
    };
    out.extend_from_slice(b"\r\n");
    Ok(framing)
}

/// A value that cannot end its line early (h2's `HeaderValue` refuses these already; checked again here, where
/// a line break would frame a second request).
fn check_value(v: &[u8]) -> Result<(), Malformed> {
    match v.iter().any(|&c| c == b'\r' || c == b'\n' || c == 0) {
        true => Err(Malformed),
        false => Ok(()),
    }
}

fn line(out: &mut Vec<u8>, name: &str, value: &[u8]) -> Result<(), Malformed> {
    check_value(value)?;
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(req: http::Request<()>, ended: bool) -> (Result<Framing, Malformed>, String) {
        let (parts, ()) = req.into_parts();
        let mut out = Vec::new();
        let r = request_head(&parts, ended, 0, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    #[test]
    fn pseudo_headers_become_the_request_line_and_host() {
        let req = http::Request::get("https://example.org/a?b=1")
            .header("accept", "*/*")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .body(())
            .unwrap();
        let (r, text) = head(req, true);
        assert_eq!(r, Ok(Framing::None));
        assert_eq!(
            text,
            "GET /a?b=1 HTTP/1.1\r\nhost: example.org\r\naccept: */*\r\ncookie: a=1; b=2\r\n\r\n"
        );
    }

    #[test]
    fn a_body_without_length_is_chunked() {
        let req = http::Request::post("http://h/up").body(()).unwrap();
        let (r, text) = head(req, false);
        assert_eq!(r, Ok(Framing::Chunked));
        assert!(text.ends_with("transfer-encoding: chunked\r\n\r\n"));
        let req = http::Request::post("http://h/up")
            .header("content-length", "5")
            .body(())
            .unwrap();
        assert_eq!(head(req, false).0, Ok(Framing::Length(5)));
    }

    #[test]
    fn connection_specific_headers_are_malformed() {
        for (n, v) in [
            ("connection", "close"),
            ("transfer-encoding", "chunked"),
            ("te", "gzip"),
            ("upgrade", "x"),
        ] {
            let req = http::Request::get("http://h/").header(n, v).body(()).unwrap();
            assert_eq!(head(req, true).0, Err(Malformed), "{n}");
        }
        let req = http::Request::get("http://h/")
            .header("te", "trailers")
            .body(())
            .unwrap();
        assert_eq!(head(req, true).0, Ok(Framing::None));
        let req = http::Request::post("http://h/")
            .header("content-length", "1")
            .header("content-length", "2")
            .body(())
            .unwrap();
        assert_eq!(head(req, false).0, Err(Malformed));
    }

    #[test]
    fn chunk_lines_are_hex() {
        let mut b = [0u8; 20];
        let n = chunk_size_line(255, &mut b);
        assert_eq!(&b[..n], b"ff\r\n");
    }
}
