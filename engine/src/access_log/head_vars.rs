//! The answer's variables while its head is written, as nginx's header filter reads them for `add_header`:
//! `$status`, the upstream tries so far (`$upstream_addr`, `$upstream_status`, their times), the upstream's
//! headers (`$upstream_http_*`, `$upstream_cookie_*`), from the request's record and the upstream head as read.

use super::answer_headers::{header, set_cookie};
use super::record::RequestRecord;
use super::render::{seconds, three_digits, upstream_list};
use crate::config::key::{Var, VarSource};
use crate::http::pages::append_decimal;
use crate::http::var_cache::VarCache;

/// What an answer's head knows (a few references, built where the head is written).
pub struct HeadVars<'a> {
    /// The status sent.
    pub status: u16,
    /// The request's record: its tries, start and length ([`RequestRecord::keep_for_head`]).
    pub rec: &'a RequestRecord,
    /// The upstream's head (empty when corelb answers itself).
    pub upstream_head: &'a [u8],
    /// The upstream's name, written for a try that found no live peer.
    pub upstream_name: &'a [u8],
    /// The request's cache: the times it read.
    pub cache: &'a VarCache,
}

impl VarSource for HeadVars<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        let rec = self.rec;
        match var {
            Var::Status => three_digits(out, u32::from(self.status)),
            v if v.is_upstream_try() => {
                let name = |_: usize, o: &mut Vec<u8>| o.extend_from_slice(self.upstream_name);
                upstream_list(v, &rec.tries, &name, out);
            }
            Var::UpstreamHttp(name) => {
                header(self.upstream_head, name, out);
            }
            Var::UpstreamCookie(name) => {
                set_cookie(self.upstream_head, name, out);
            }
            Var::Msec | Var::TimeLocal | Var::TimeIso8601 => self.cache.append_time(var, out),
            Var::RequestTime => seconds(out, rec.started.elapsed()),
            Var::RequestLength => append_decimal(out, rec.request_length),
            // nothing of the body is sent yet (nginx's `$bytes_sent` and `$body_bytes_sent` before the body)
            Var::BytesSent | Var::BodyBytesSent => out.push(b'0'),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_log::record::TryPeer;

    const UPSTREAM: &[u8] = b"HTTP/1.1 404 Not Found\r\nX-Len: 42\r\nSet-Cookie: sid=abc; Path=/\r\n\r\n";

    fn eval(vars: &HeadVars<'_>, v: Var) -> String {
        let mut out = Vec::new();
        vars.append(&v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn tries_status_and_upstream_headers_as_the_header_filter_sees_them() {
        let mut rec = RequestRecord::default();
        rec.begin(0, 1, 0);
        rec.keep_for_head(1, 73);
        let (a, b) = ("127.0.0.1:8081".parse().unwrap(), "[::1]:8082".parse().unwrap());
        rec.try_start(TryPeer::Addr(a));
        rec.mark_failed(false);
        rec.try_start(TryPeer::Addr(b));
        rec.try_connected();
        rec.try_header(404);
        rec.try_start(TryPeer::Upstream(0));
        let cache = VarCache::default();
        let vars = HeadVars {
            status: 404,
            rec: &rec,
            upstream_head: UPSTREAM,
            upstream_name: b"u2",
            cache: &cache,
        };
        assert_eq!(eval(&vars, Var::UpstreamAddr), "127.0.0.1:8081, [::1]:8082, u2");
        assert_eq!(eval(&vars, Var::UpstreamStatus), "502, 404, -");
        let times = eval(&vars, Var::UpstreamResponseTime);
        let times: Vec<&str> = times.split(", ").collect();
        assert_eq!(times.len(), 3);
        assert_eq!(times[2], "-", "the try under way has no response time yet");
        assert!(
            times[..2].iter().all(|t| t.len() == 5 && t.as_bytes()[1] == b'.'),
            "{times:?}"
        );
        assert_eq!(eval(&vars, Var::UpstreamConnectTime).matches('-').count(), 2);
        assert_eq!(eval(&vars, Var::Status), "404");
        assert_eq!(eval(&vars, Var::UpstreamHttp("x-len".into())), "42");
        assert_eq!(eval(&vars, Var::UpstreamHttp("x-none".into())), "");
        assert_eq!(eval(&vars, Var::UpstreamCookie("sid".into())), "abc");
        assert_eq!(eval(&vars, Var::RequestLength), "73");
        assert_eq!(eval(&vars, Var::BodyBytesSent), "0");
        assert_eq!(
            eval(&vars, Var::Uri),
            "",
            "request values are kept at routing, not read here"
        );
    }

    #[test]
    fn no_try_is_empty() {
        let mut rec = RequestRecord::default();
        rec.begin(0, 1, 0);
        let cache = VarCache::default();
        let vars = HeadVars {
            status: 204,
            rec: &rec,
            upstream_head: b"",
            upstream_name: b"",
            cache: &cache,
        };
        assert_eq!(eval(&vars, Var::UpstreamAddr), "");
        assert_eq!(eval(&vars, Var::UpstreamStatus), "");
        assert_eq!(eval(&vars, Var::Status), "204");
    }
}
