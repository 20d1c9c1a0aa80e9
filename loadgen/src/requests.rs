//! The requests a bench sends, rendered to bytes once before the run: one request line from the URL and options,
//! or a replayed list (`[SRC_IP] METHOD URI` per line) with an optional source address per request.

use super::LoadgenError;
use std::net::IpAddr;
use std::path::Path;

/// One request, ready to write in a single call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The client socket is bound to this address before connecting, when given.
    pub src: Option<IpAddr>,
    /// The whole request: head and body.
    pub bytes: Vec<u8>,
    /// A `HEAD` request: the response has no body whatever its head says.
    pub head: bool,
}

/// One line of a request list file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// The source address the line gives, if any.
    pub src: Option<IpAddr>,
    /// The request method.
    pub method: String,
    /// The request target, with its query.
    pub uri: String,
}

/// What every HTTP request shares: extra headers and a body.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// The `Host` header's value.
    pub authority: String,
    /// Extra headers, name and value.
    pub headers: Vec<(String, String)>,
    /// The body, empty for none.
    pub body: Vec<u8>,
}

/// Whether `s` is an HTTP token (method or header name).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks a method given on the command line or in a list.
pub fn check_method(m: &str) -> Result<(), LoadgenError> {
    if is_token(m) {
        Ok(())
    } else {
        Err(LoadgenError::BadMethod(m.to_string()))
    }
}

/// Parses `Name: value`; the framing headers are refused (`--body` sets `Content-Length`).
pub fn parse_header(h: &str) -> Result<(String, String), LoadgenError> {
    let bad = |reason| LoadgenError::BadHeader {
        header: h.to_string(),
        reason,
    };
    let (name, value) = h.split_once(':').ok_or(bad("expected \"Name: value\""))?;
    if !is_token(name) {
        return Err(bad("the name is not an HTTP token"));
    }
    let value = value.trim_matches([' ', '\t']);
    if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
        return Err(bad("the value has control characters"));
    }
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding") {
        return Err(bad("the body framing is set from --body"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Renders one HTTP/1.1 request: request line, `Host` (unless given), the extra headers, `Content-Length` when
/// there is a body, the body.
pub fn render(method: &str, uri: &str, common: &Common) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + common.body.len());
    for part in [method, " ", uri, " HTTP/1.1\r\n"] {
        out.extend_from_slice(part.as_bytes());
    }
    if !common.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        out.extend_from_slice(format!("Host: {}\r\n", common.authority).as_bytes());
    }
    for (n, v) in &common.headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    if !common.body.is_empty() {
        out.extend_from_slice(format!("Content-Length: {}\r\n", common.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&common.body);
    out
}

/// Prepares `entries` with the shared headers and body.
pub fn prepare(entries: &[ListEntry], common: &Common) -> Vec<Prepared> {
    entries
        .iter()
        .map(|e| Prepared {
            src: e.src,
            bytes: render(&e.method, &e.uri, common),
            head: e.method.eq_ignore_ascii_case("HEAD"),
        })
        .collect()
}

/// Parses a request list: one `[SRC_IP] METHOD URI` per line; blank lines and `#` comments are skipped.
pub fn parse_list(text: &str, path: &Path) -> Result<Vec<ListEntry>, LoadgenError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |reason| LoadgenError::BadRequestLine {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        let (src, method, uri) = match words.as_slice() {
            [m, u] => (None, *m, *u),
            [s, m, u] => (
                Some(s.parse::<IpAddr>().map_err(|_| bad("bad source address"))?),
                *m,
                *u,
            ),
            _ => return Err(bad("expected [SRC_IP] METHOD URI")),
        };
        if !is_token(method) {
            return Err(bad("bad method"));
        }
        if !uri.starts_with('/') || uri.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err(bad("the URI must start with / and have no control characters"));
        }
        out.push(ListEntry {
            src,
            method: method.to_string(),
            uri: uri.to_string(),
        });
    }
    if out.is_empty() {
        return Err(LoadgenError::EmptyRequestList(path.to_path_buf()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_requests() {
        let mut common = Common {
            authority: "h:81".into(),
            ..Common::default()
        };
        assert_eq!(render("GET", "/x", &common), b"GET /x HTTP/1.1\r\nHost: h:81\r\n\r\n");
        common.headers = vec![("host".into(), "other".into()), ("X-A".into(), "1".into())];
        common.body = b"hey".to_vec();
        assert_eq!(
            String::from_utf8(render("POST", "/", &common)).unwrap(),
            "POST / HTTP/1.1\r\nhost: other\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nhey"
        );
    }

    #[test]
    fn parses_headers() {
        assert_eq!(parse_header("X-A:  b c ").unwrap(), ("X-A".into(), "b c".into()));
        for bad in ["nocolon", ": v", "X A: v", "X: a\r\nY: b", "Content-Length: 3"] {
            assert!(
                matches!(parse_header(bad), Err(LoadgenError::BadHeader { .. })),
                "{bad}"
            );
        }
        assert!(check_method("PURGE").is_ok());
        assert!(check_method("GE T").is_err());
    }

    #[test]
    fn parses_request_lists() {
        let p = Path::new("l.txt");
        let list = parse_list("# c\n\nGET /a\n127.0.0.2  POST /b?x=1\n", p).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].src, None);
        assert_eq!(list[1].src, Some("127.0.0.2".parse().unwrap()));
        assert_eq!((list[1].method.as_str(), list[1].uri.as_str()), ("POST", "/b?x=1"));
        let err = parse_list("GET /a\n1.2.3 GET /b\n", p).unwrap_err();
        assert!(matches!(err, LoadgenError::BadRequestLine { line: 2, .. }), "{err}");
        assert!(parse_list("GET a\n", p).is_err());
        assert!(parse_list("GET\n", p).is_err());
        assert!(parse_list("a b c d\n", p).is_err());
        assert!(matches!(
            parse_list("# only\n", p),
            Err(LoadgenError::EmptyRequestList(_))
        ));
        let prepared = prepare(&parse_list("HEAD /h\n", p).unwrap(), &Common::default());
        assert!(prepared[0].head);
    }
}
