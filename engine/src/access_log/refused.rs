//! The access-log line of a request refused before it was routed (a bad request line, URI or header, 414, 494):
//! nginx finalizes such a request in the default server and logs it there, with `$request` as far as it was read
//! (`ngx_http_variable_request_line`: from the request's start to the first CR or LF) and the connection's
//! variables; what the refused head never set is missing (`-`).

use super::record::RequestRecord;
use crate::config::key::{Var, VarSource};
use crate::config::log_format::{append_escaped, missing, Escape, Op};
use crate::http::vars::ConnVars;
use crate::snapshot::logs::LogTarget;

/// What is known of a request refused before routing.
pub struct Refused<'a> {
    pub conn: ConnVars,
    /// The bytes read of the head.
    pub read: &'a [u8],
    /// `$server_name`: the default server's.
    pub server_name: &'a str,
    pub connection: u64,
    pub requests: u64,
}

/// How far nginx got with a refused head, which decides the variables it set.
enum Stage<'a> {
    /// The request line did not parse (`version`: it failed on the version, which nginx leaves empty).
    Line { version: bool },
    /// The line parsed, its URI did not (nginx's `$uri` is then empty, `$request_uri` and `$args` unset).
    Uri { method: &'a [u8], protocol: &'a [u8] },
    /// The line and its URI parsed; a header was refused (the headers are known only when the head parsed whole:
    /// corelb keeps none of those read before a header it could not parse).
    Headers {
        method: &'a [u8],
        target: &'a [u8],
        protocol: &'a [u8],
        uri: Vec<u8>,
    },
}

impl<'a> Refused<'a> {
    /// How far the head got.
    fn stage(&self) -> Stage<'a> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let parsed = req.parse(self.read);
        let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
            return Stage::Line {
                version: matches!(parsed, Err(httparse::Error::Version)),
            };
        };
        let protocol: &'static [u8] = if version == 1 { b"HTTP/1.1" } else { b"HTTP/1.0" };
        let mut uri = Vec::new();
        let path = target.split('?').next().unwrap_or_default().as_bytes();
        if !crate::http::uri::needs_normalizing(target.as_bytes()) {
            uri.extend_from_slice(path);
        } else if crate::http::uri::normalize(target.as_bytes(), &mut uri).is_err() {
            return Stage::Uri {
                method: method.as_bytes(),
                protocol,
            };
        }
        Stage::Headers {
            method: method.as_bytes(),
            target: target.as_bytes(),
            protocol,
            uri,
        }
    }

    /// `$request`: from the first byte that is not CR/LF to the next CR or LF.
    fn request_line(&self) -> &'a [u8] {
        let start = self
            .read
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(self.read.len());
        let rest = self.read.get(start..).unwrap_or_default();
        let end = rest
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .unwrap_or(rest.len());
        rest.get(..end).unwrap_or_default()
    }

    /// Appends the value of `var` at `stage`; false when the refused request has none (written as missing).
    fn value(&self, stage: &Stage<'_>, var: &Var, out: &mut Vec<u8>) -> bool {
        let mut put = |v: &[u8]| {
            out.extend_from_slice(v);
            true
        };
        match (var, stage) {
            (Var::Request, _) => {
                let line = self.request_line();
                put(line) && !line.is_empty()
            }
            (Var::RequestMethod, Stage::Uri { method, .. } | Stage::Headers { method, .. }) => put(method),
            (Var::ServerProtocol, Stage::Uri { protocol, .. } | Stage::Headers { protocol, .. }) => put(protocol),
            (Var::ServerProtocol, Stage::Line { version }) => *version,
            // nginx's `r->uri` of a URI it refused: allocated, empty
            (Var::Uri, Stage::Uri { .. }) => true,
            (Var::Uri, Stage::Headers { uri, .. }) => put(uri),
            (Var::RequestUri, Stage::Headers { target, .. }) => put(target),
            (Var::Args, Stage::Headers { target, .. }) => match target.iter().position(|&b| b == b'?') {
                Some(q) => put(target.get(q + 1..).unwrap_or_default()),
                None => false,
            },
            (Var::IsArgs, Stage::Headers { target, .. }) => put(if target.contains(&b'?') { b"?" } else { b"" }),
            (Var::Http(name), Stage::Headers { .. }) => {
                // a head that parsed whole (a header value refused later, as a bad `Host`): its headers
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut req = httparse::Request::new(&mut headers);
                let found = match req.parse(self.read) {
                    Ok(httparse::Status::Complete(_)) => req.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)),
                    _ => None,
                };
                found.is_some_and(|h| put(h.value))
            }
            (Var::ServerName, _) => put(self.server_name.as_bytes()),
            (Var::Scheme, _) => put(b"http"),
            (Var::Connection, _) => {
                crate::http::pages::append_decimal(out, self.connection);
                true
            }
            (Var::ConnectionRequests, _) => {
                crate::http::pages::append_decimal(out, self.requests);
                true
            }
            (
                Var::Hostname
                | Var::NginxVersion
                | Var::Pid
                | Var::RemoteAddr
                | Var::BinaryRemoteAddr
                | Var::RemotePort
                | Var::RealipRemoteAddr
                | Var::RealipRemotePort
                | Var::ServerAddr
                | Var::ServerPort,
                _,
            ) => {
                self.conn.append(var, out);
                true
            }
            _ => false,
        }
    }
}

/// Captures the request-time values of every format of `targets` for a refused request, in the order
/// [`super::render::capture`] keeps them.
pub fn capture(targets: &[LogTarget], refused: &Refused<'_>, rec: &mut RequestRecord) {
    let stage = refused.stage();
    for t in targets {
        for f in t.formats() {
            for op in f.ops() {
                if let (true, Op::Var(v)) = (op.captured_at_request(), op) {
                    capture_one(v, f.escape, refused, &stage, rec);
                }
            }
        }
    }
}

fn capture_one(v: &Var, escape: Escape, refused: &Refused<'_>, stage: &Stage<'_>, rec: &mut RequestRecord) {
    rec.raw.clear();
    if refused.value(stage, v, &mut rec.raw) {
        append_escaped(&mut rec.values, &rec.raw, escape);
    } else {
        rec.values.extend_from_slice(missing(escape));
    }
    rec.ends.push(rec.values.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(read: &[u8]) -> Refused<'_> {
        Refused {
            conn: ConnVars::new("127.0.0.1:5000".parse().unwrap(), "127.0.0.1:8080".parse().unwrap()),
            read,
            server_name: "localhost",
            connection: 7,
            requests: 1,
        }
    }

    fn value(r: &Refused<'_>, v: Var) -> Option<String> {
        let mut out = Vec::new();
        r.value(&r.stage(), &v, &mut out)
            .then(|| String::from_utf8(out).unwrap())
    }

    /// The values nginx 1.22 logged for each of these heads (checked on loopback).
    #[test]
    fn what_nginx_set_before_it_refused_the_head() {
        let bad_uri = refused(b"\r\nGET /../bad?x=1 HTTP/1.0\r\nHost: h\r\n\r\n");
        assert_eq!(
            value(&bad_uri, Var::Request).as_deref(),
            Some("GET /../bad?x=1 HTTP/1.0")
        );
        assert_eq!(value(&bad_uri, Var::RequestMethod).as_deref(), Some("GET"));
        assert_eq!(value(&bad_uri, Var::Uri).as_deref(), Some(""), "empty, not missing");
        assert_eq!(value(&bad_uri, Var::RequestUri), None);
        assert_eq!(value(&bad_uri, Var::Args), None);
        assert_eq!(value(&bad_uri, Var::ServerProtocol).as_deref(), Some("HTTP/1.0"));
        assert_eq!(value(&bad_uri, Var::Http("host".into())), None);
        assert_eq!(value(&bad_uri, Var::ServerName).as_deref(), Some("localhost"));
        assert_eq!(value(&bad_uri, Var::RemoteAddr).as_deref(), Some("127.0.0.1"));
        assert_eq!(value(&bad_uri, Var::Connection).as_deref(), Some("7"));
        let bad_line = refused(b"FOO\x16bar baz\r\n\r\n");
        assert_eq!(value(&bad_line, Var::Request).as_deref(), Some("FOO\u{16}bar baz"));
        for v in [Var::RequestMethod, Var::Uri, Var::RequestUri, Var::ServerProtocol] {
            assert_eq!(value(&bad_line, v.clone()), None, "{v:?}");
        }
        let bad_header = refused(b"GET /ok?a=1 HTTP/1.0\r\nBad Header\r\n\r\n");
        assert_eq!(value(&bad_header, Var::Uri).as_deref(), Some("/ok"));
        assert_eq!(value(&bad_header, Var::RequestUri).as_deref(), Some("/ok?a=1"));
        assert_eq!(value(&bad_header, Var::Args).as_deref(), Some("a=1"));
        let bad_host = refused(b"GET / HTTP/1.0\r\nHost: a/b\r\n\r\n");
        assert_eq!(value(&bad_host, Var::Http("host".into())).as_deref(), Some("a/b"));
        assert_eq!(value(&bad_host, Var::Http("user-agent".into())), None);
        let version = refused(b"GET / HTTP/2.5\r\n\r\n");
        assert_eq!(value(&version, Var::ServerProtocol).as_deref(), Some(""));
        assert_eq!(value(&version, Var::RequestMethod), None);
        let cut = refused(b"GET /very/long");
        assert_eq!(value(&cut, Var::Request).as_deref(), Some("GET /very/long"));
        assert_eq!(value(&cut, Var::RequestMethod), None);
        assert_eq!(value(&refused(b"\r\n"), Var::Request), None);
    }
}
