//! What each fuzz target checks on one input: no panic, and invariants that a wrong parser would break (a head
//! parses the same from its own bytes, a chunked body decodes the same however it is split, a rewritten response
//! head frames its body as the upstream's did, every config error names a line of the input).

use corelb_engine::config::model::KeepaliveHeader;
use corelb_engine::config::parse_str;
use corelb_engine::http::chunked::ChunkedDecoder;
use corelb_engine::http::head_buffers::{self, HeaderBuffers};
use corelb_engine::http::keepalive::Connection;
use corelb_engine::http::proxy_protocol::{self, Read, TlvName};
use corelb_engine::http::request::{parse_request, MAX_HEADERS};
use corelb_engine::http::response::{parse_response, write_client_head};
use corelb_engine::http::{BodyFraming, MAX_LENGTH};
use std::path::Path;

/// A config path in a directory that does not exist: an `include` fails with a line instead of reading files.
const CONFIG_PATH: &str = "/nonexistent-corelb-fuzz/corelb.conf";

/// `config::parse_str` on the input as text: a config, or an error that names a line of the input.
pub fn config_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = parse_str(&text, Path::new(CONFIG_PATH)) {
        let line = e.line().unwrap_or_else(|| panic!("no line in {e}"));
        let lines = text.split('\n').count();
        assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
    }
}

/// The request-head parser: a complete head parses the same from its own bytes, has sane framing and a host
/// when HTTP/1.1; an incomplete one stays incomplete when cut shorter. nginx's head buffers never refuse a part
/// of a head they accept whole, and a normalized path has no empty, `.` or `..` segment.
pub fn request_head(data: &[u8]) {
    let small = HeaderBuffers { number: 2, size: 600 };
    for (size, limits) in [(1024, HeaderBuffers::default()), (128, small)] {
        let first = head_buffers::FirstBuffers { size, large: limits };
        if head_buffers::check(data, first, |_| limits).is_ok() {
            let cut = data.len() * 2 / 3;
            assert!(head_buffers::check(&data[..cut], first, |_| limits).is_ok());
        }
    }
    let mut uri = Vec::new();
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match parse_request(data, &mut headers) {
        Ok(Some(head)) => {
            assert!(head.head_len <= data.len());
            assert!(!head.method.is_empty());
            // a path, or the query of an absolute target without one (`http://h?q`, whose path is `/`)
            assert!(head.target.starts_with('/') || head.has_empty_path(), "{}", head.target);
            if let BodyFraming::Length(n) = head.body {
                assert!(n > 0 && n <= MAX_LENGTH);
            }
            assert!(head.body != BodyFraming::UntilClose);
            if let Ok(path) = head.uri(&mut uri) {
                normalized_path(path);
            }
            if head.version_11 {
                assert!(head.header("host").is_some() && head.host.is_some());
            }
            let (len, body, keepalive) = (head.head_len, head.body, head.keepalive);
            let mut again = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let same = parse_request(&data[..len], &mut again).map(|h| h.map(|h| (h.head_len, h.body, h.keepalive)));
            assert_eq!(same, Ok(Some((len, body, keepalive))));
        }
        Ok(None) => {
            let mut again = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let cut = data.len() / 2;
            assert!(matches!(parse_request(&data[..cut], &mut again), Ok(None)));
        }
        Err(r) => assert!(matches!(r.status, 400 | 414 | 501 | 505), "{r}"),
    }
}

/// A normalized path starts with `/`, has no empty, `.` or `..` segment, and normalizes to itself when no `%`,
/// `?` or `#` came out of an escape.
fn normalized_path(path: &[u8]) {
    assert_eq!(path.first(), Some(&b'/'));
    let mut segments = path[1..].split(|&c| c == b'/').peekable();
    while let Some(s) = segments.next() {
        let last = segments.peek().is_none();
        assert!((last || !s.is_empty()) && s != b".." && s != b".", "{path:?}");
    }
    if !path.iter().any(|c| matches!(c, b'%' | b'?' | b'#')) {
        let mut again = Vec::new();
        corelb_engine::http::uri::normalize(path, &mut again).expect("a normalized path normalizes");
        assert_eq!(again, path);
    }
}

/// The chunked decoder: the same data, length and end however the input is split; and any payload, chunked,
/// decodes back to itself.
pub fn chunked(data: &[u8]) {
    let step = usize::from(data.first().copied().unwrap_or(1) % 16) + 1;
    let whole = decode(data, data.len().max(1));
    let pieces = decode(data, step);
    assert_eq!(whole, pieces, "split every {step} bytes");
    if let Ok((_, used, done)) = &whole {
        assert!(*used <= data.len());
        assert!(*done || *used == data.len());
    }
    let size = usize::from(data.get(1).copied().unwrap_or(0) % 9) + 1;
    let mut encoded = Vec::new();
    for piece in data.chunks(size) {
        encoded.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        encoded.extend_from_slice(piece);
        encoded.extend_from_slice(b"\r\n");
    }
    encoded.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(decode(&encoded, step), Ok((data.to_vec(), encoded.len(), true)));
}

type Decoded = Result<(Vec<u8>, usize, bool), corelb_engine::http::chunked::ChunkError>;

fn decode(input: &[u8], step: usize) -> Decoded {
    let mut d = ChunkedDecoder::new();
    let mut out = Vec::new();
    let mut used = 0;
    for piece in input.chunks(step) {
        used += d.feed(piece, |s| out.extend_from_slice(s))?;
        if d.is_done() {
            break;
        }
    }
    Ok((out, used, d.is_done()))
}

/// The response parser and head rewriter: the head corelb writes for the client parses, whole, with the same
/// status and the same body framing as the upstream's head.
pub fn response_head(data: &[u8]) {
    let head_request = data.first().is_some_and(|b| b & 1 == 1);
    let keepalive = if data.first().is_some_and(|b| b & 2 == 2) {
        Connection::kept(KeepaliveHeader::new(75))
    } else {
        Connection::CLOSE
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let Ok(Some(resp)) = parse_response(data, &mut headers, head_request) else {
        return;
    };
    assert!(resp.head_len <= data.len());
    if resp.body == BodyFraming::UntilClose {
        assert!(!resp.reusable);
    }
    let mut out = Vec::new();
    write_client_head(
        &resp,
        b"Thu, 01 Jan 1970 00:00:00 GMT",
        keepalive,
        resp.body == BodyFraming::Chunked,
        &mut out,
    );
    let mut again = [httparse::EMPTY_HEADER; MAX_HEADERS + 4];
    let rewritten = parse_response(&out, &mut again, head_request);
    let Ok(Some(client)) = rewritten else {
        panic!(
            "the rewritten head does not parse: {rewritten:?} {:?}",
            String::from_utf8_lossy(&out)
        );
    };
    assert_eq!((client.status, client.head_len), (resp.status, out.len()));
    assert_eq!(client.body, resp.body, "{:?}", String::from_utf8_lossy(&out));
}

/// The PROXY protocol reader: a whole header lies within the input and its TLVs within the header; every shorter
/// cut of it asks for more (a header read in pieces reads the same), and bytes after it change nothing. TLV
/// lookups over any bytes never panic.
pub fn proxy_header(data: &[u8]) {
    for name in [
        TlvName::Top(1),
        TlvName::Ssl(0x22),
        TlvName::SslVerify,
        TlvName::Unknown,
    ] {
        let _ = proxy_protocol::append_tlv(data, name, &mut Vec::new());
    }
    let Read::Done(h) = proxy_protocol::read(data) else {
        return;
    };
    assert!(
        h.len <= data.len() && h.tlvs.start <= h.tlvs.end && h.tlvs.end <= h.len,
        "{h:?}"
    );
    for cut in 0..h.len {
        assert_eq!(proxy_protocol::read(&data[..cut]), Read::More, "cut at {cut}");
    }
    assert_eq!(proxy_protocol::read(&data[..h.len]), Read::Done(h.clone()));
    let tlvs = &data[h.tlvs.clone()];
    for name in [TlvName::Top(1), TlvName::Ssl(0x22), TlvName::SslVerify] {
        let _ = proxy_protocol::append_tlv(tlvs, name, &mut Vec::new());
    }
}
