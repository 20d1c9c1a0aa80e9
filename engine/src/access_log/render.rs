//! Formatting a log line in two steps: the request-time values are captured (escaped) into the connection's
//! record when the head is read, since the head's buffer is reused; the line is put together when the answer is
//! done, with the status, sizes, times and upstream tries.

use super::clock::LogClock;
use super::record::{RequestRecord, TryPeer, UpstreamTry};
use crate::config::key::{Var, VarSource};
use crate::config::log_format::{append_escaped, missing, needs_escape, Escape, LogFormat, LogVar, Op};
use crate::http::pages::append_decimal;
use crate::http::vars::RequestVars;
use crate::snapshot::logs::LogTarget;
use crate::snapshot::Snapshot;
use std::io::Write;
use std::time::{Duration, Instant};

/// The request a line is about, while its head is readable.
pub struct RequestView<'a, 'r, 'h, 'b> {
    pub vars: &'a RequestVars<'r, 'h, 'b>,
    /// `$server_name`: the server's first name.
    pub server_name: &'a str,
}

/// Captures the request-time values of every format of `targets` into `rec` (escaped as each format says).
pub fn capture(targets: &[LogTarget], view: &RequestView<'_, '_, '_, '_>, rec: &mut RequestRecord) {
    for t in targets {
        for f in t.cond.iter().chain(std::iter::once(&t.format)) {
            for op in f.ops() {
                if let Op::Var(v) = op {
                    if v.from_request() {
                        capture_one(v, f.escape, view, rec);
                    }
                }
            }
        }
    }
}

fn capture_one(v: &LogVar, escape: Escape, view: &RequestView<'_, '_, '_, '_>, rec: &mut RequestRecord) {
    rec.raw.clear();
    let found = request_value(v, view, rec.connection, rec.requests, &mut rec.raw);
    if !found {
        rec.values.extend_from_slice(missing(escape));
    } else {
        append_escaped(&mut rec.values, &rec.raw, escape);
    }
    rec.ends.push(rec.values.len());
}

/// Appends a request-time value; false when nginx would find the variable missing (written `-`).
fn request_value(v: &LogVar, view: &RequestView<'_, '_, '_, '_>, conn: u64, requests: u64, out: &mut Vec<u8>) -> bool {
    let req = view.vars.req;
    match v {
        LogVar::Key(Var::RemoteAddr) => {
            match view.vars.conn.remote {
                std::net::SocketAddr::V4(v4) => append_ipv4(out, *v4.ip()),
                _ => view.vars.append(&Var::RemoteAddr, out),
            }
            true
        }
        LogVar::Key(var) => {
            let present = match var {
                Var::Http(name) => req.header(name).is_some(),
                Var::Args => req.args().is_some(),
                _ => true,
            };
            if present {
                view.vars.append(var, out);
            }
            present && !(matches!(var, Var::Arg(_) | Var::Cookie(_)) && out.is_empty())
        }
        LogVar::RemoteUser => basic_user(req.header("authorization").unwrap_or_default(), out),
        LogVar::Request => {
            out.extend_from_slice(req.method.as_bytes());
            out.push(b' ');
            out.extend_from_slice(req.target.as_bytes());
            out.push(b' ');
            out.extend_from_slice(protocol(req.version_11));
            true
        }
        LogVar::ServerProtocol => {
            out.extend_from_slice(protocol(req.version_11));
            true
        }
        LogVar::ServerName => {
            out.extend_from_slice(view.server_name.as_bytes());
            true
        }
        LogVar::Connection => number(out, conn),
        LogVar::ConnectionRequests => number(out, requests),
        LogVar::Pid => number(out, u64::from(std::process::id())),
        _ => false,
    }
}

fn protocol(version_11: bool) -> &'static [u8] {
    if version_11 {
        b"HTTP/1.1"
    } else {
        b"HTTP/1.0"
    }
}

fn number(out: &mut Vec<u8>, n: u64) -> bool {
    append_decimal(out, n);
    true
}

/// `$remote_user`: the user of `Authorization: Basic`, as nginx's `ngx_http_auth_basic_user` decodes it (missing
/// when the scheme is not Basic, the base64 is bad, or there is no `:` or no user).
fn basic_user(header: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(scheme) = header.get(..6) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(b"Basic ") {
        return false;
    }
    let encoded = header.get(6..).unwrap_or_default().trim_ascii_start();
    let start = out.len();
    if !decode_base64(encoded, out) {
        out.truncate(start);
        return false;
    }
    match out.get(start..).and_then(|d| d.iter().position(|&c| c == b':')) {
        Some(0) | None => {
            out.truncate(start);
            false
        }
        Some(colon) => {
            out.truncate(start + colon);
            true
        }
    }
}

/// Standard base64 with optional padding, as `ngx_decode_base64` accepts it.
fn decode_base64(src: &[u8], out: &mut Vec<u8>) -> bool {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let data = src
        .strip_suffix(b"==")
        .or_else(|| src.strip_suffix(b"="))
        .unwrap_or(src);
    if data.len() % 4 == 1 {
        return false;
    }
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in data {
        let Some(v) = value(c) else {
            return false;
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    true
}

/// What a line needs beyond the record.
pub struct LineContext<'a> {
    pub snap: &'a Snapshot,
    pub clock: &'a LogClock,
    pub now: Instant,
}

/// Appends the line of `format` for `rec`; `next` walks the captured values (shared over a set's formats).
pub fn render(format: &LogFormat, rec: &RequestRecord, cx: &LineContext<'_>, next: &mut usize, out: &mut Vec<u8>) {
    for op in format.ops() {
        match op {
            Op::Text(t) => out.extend_from_slice(t),
            Op::Var(v) if v.from_request() => {
                let start = if *next == 0 {
                    0
                } else {
                    rec.ends.get(*next - 1).copied().unwrap_or(0)
                };
                let end = rec.ends.get(*next).copied().unwrap_or(start);
                out.extend_from_slice(rec.values.get(start..end).unwrap_or_default());
                *next += 1;
            }
            Op::Var(v) => response_value(v, format.escape, rec, cx, out),
        }
    }
}

fn response_value(v: &LogVar, escape: Escape, rec: &RequestRecord, cx: &LineContext<'_>, out: &mut Vec<u8>) {
    match v {
        LogVar::Status => three_digits(out, u32::from(rec.status)),
        LogVar::BodyBytesSent => append_decimal(out, rec.body_bytes),
        LogVar::BytesSent => append_decimal(out, rec.header_bytes + rec.body_bytes),
        LogVar::RequestLength => append_decimal(out, rec.request_length),
        LogVar::RequestTime => seconds(out, cx.now.saturating_duration_since(rec.started)),
        LogVar::Msec => cx.clock.append_msec(out),
        LogVar::TimeLocal => out.extend_from_slice(&cx.clock.local),
        LogVar::TimeIso8601 => out.extend_from_slice(&cx.clock.iso8601),
        LogVar::UpstreamAddr => tries(rec, escape, out, |t, o| match t.peer {
            TryPeer::Addr(a) => append_addr(o, a),
            TryPeer::Upstream(i) => {
                let name = cx.snap.http_plans.get(i).map_or("", |p| p.name.as_str());
                if needs_escape(name.as_bytes(), escape) {
                    append_escaped(o, name.as_bytes(), escape);
                } else {
                    o.extend_from_slice(name.as_bytes());
                }
            }
        }),
        LogVar::UpstreamStatus => tries(rec, escape, out, |t, o| match t.status {
            0 => o.push(b'-'),
            s => append_decimal(o, u64::from(s)),
        }),
        LogVar::UpstreamResponseTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.response)),
        LogVar::UpstreamConnectTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.connect)),
        LogVar::UpstreamHeaderTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.header)),
        _ => out.extend_from_slice(missing(escape)),
    }
}

/// nginx's upstream lists: one value per try, `, ` between them; missing when there was no try.
fn tries(rec: &RequestRecord, escape: Escape, out: &mut Vec<u8>, each: impl Fn(&UpstreamTry, &mut Vec<u8>)) {
    if rec.tries.is_empty() {
        out.extend_from_slice(missing(escape));
        return;
    }
    for (i, t) in rec.tries.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        each(t, out);
    }
}

/// Seconds with millisecond resolution (`0.012`), nginx's `%T.%03M`.
pub(super) fn seconds(out: &mut Vec<u8>, d: Duration) {
    append_decimal(out, d.as_secs());
    out.push(b'.');
    three_digits(out, d.subsec_millis());
}

/// `n` (below 1000) on three digits, zero-padded (nginx's `%03ui` of a status, the `%03M` of a time).
pub(super) fn three_digits(out: &mut Vec<u8>, n: u32) {
    if n >= 1000 {
        append_decimal(out, u64::from(n));
        return;
    }
    out.extend_from_slice(&[
        b'0' + (n / 100) as u8,
        b'0' + (n / 10 % 10) as u8,
        b'0' + (n % 10) as u8,
    ]);
}

pub(super) fn append_ipv4(out: &mut Vec<u8>, ip: std::net::Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        append_decimal(out, u64::from(octet));
    }
}

/// A peer address as nginx writes it (`127.0.0.1:8080`, `[::1]:8080`), IPv4 without the formatting machinery.
pub(super) fn append_addr(out: &mut Vec<u8>, addr: std::net::SocketAddr) {
    match addr {
        std::net::SocketAddr::V4(v4) => {
            append_ipv4(out, *v4.ip());
            out.push(b':');
            append_decimal(out, u64::from(v4.port()));
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
}

pub(super) fn optional_seconds(out: &mut Vec<u8>, d: Option<Duration>) {
    match d {
        Some(d) => seconds(out, d),
        None => out.push(b'-'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(h: &str) -> Option<String> {
        let mut out = b"x".to_vec();
        basic_user(h.as_bytes(), &mut out).then(|| String::from_utf8(out[1..].to_vec()).unwrap())
    }

    #[test]
    fn remote_user_from_basic_auth() {
        assert_eq!(user("Basic YWxpY2U6c2VjcmV0").as_deref(), Some("alice")); // alice:secret
        assert_eq!(user("basic   Ym9iOg==").as_deref(), Some("bob")); // bob:
        assert_eq!(user("Basic OnB3"), None); // :pw, no user
        assert_eq!(user("Basic YWxpY2U="), None); // alice, no colon
        assert_eq!(user("Basic !!!"), None);
        assert_eq!(user("Bearer YWxpY2U6c2VjcmV0"), None);
        assert_eq!(user(""), None);
    }

    #[test]
    fn addresses_and_statuses() {
        let mut out = Vec::new();
        append_addr(&mut out, "10.0.255.7:8080".parse().unwrap());
        out.push(b' ');
        append_addr(&mut out, "[::1]:81".parse().unwrap());
        out.push(b' ');
        three_digits(&mut out, 0);
        out.push(b' ');
        three_digits(&mut out, 404);
        assert_eq!(out, b"10.0.255.7:8080 [::1]:81 000 404");
    }

    #[test]
    fn seconds_have_millisecond_resolution() {
        let mut out = Vec::new();
        seconds(&mut out, Duration::from_micros(12_600));
        out.push(b' ');
        seconds(&mut out, Duration::from_millis(61_005));
        out.push(b' ');
        optional_seconds(&mut out, None);
        assert_eq!(out, b"0.012 61.005 -");
    }
}
