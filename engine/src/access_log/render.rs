//! Formatting a log line in two steps: the request-time values are captured (escaped) into the connection's
//! record when the head is read, since the head's buffer is reused; the line is put together when the answer is
//! done, with the status, sizes, times and upstream tries.

use super::answer_headers::is_header_var;
use super::clock::LogClock;
use super::record::{RequestRecord, TryPeer, UpstreamTry};
use crate::config::key::{Var, VarSource};
use crate::config::log_format::{append_escaped, missing, needs_escape, Escape, LogFormat, Op};
use crate::http::pages::append_decimal;
use crate::http::vars::RequestVars;
use crate::snapshot::logs::LogTarget;
use crate::snapshot::Snapshot;
use std::io::Write;
use std::time::{Duration, Instant};

/// The request a line is about, while its head is readable.
pub struct RequestView<'a, 'r, 'h, 'b> {
    pub vars: &'a RequestVars<'r, 'h, 'b>,
}

/// Captures the request-time values of every format of `targets` into `rec` (escaped as each format says).
pub fn capture(targets: &[LogTarget], view: &RequestView<'_, '_, '_, '_>, rec: &mut RequestRecord) {
    for t in targets {
        for f in t.formats() {
            for op in f.ops() {
                if let (true, Op::Var(v)) = (op.captured_at_request(), op) {
                    capture_one(v, f.escape, view, rec);
                }
            }
        }
    }
}

fn capture_one(v: &Var, escape: Escape, view: &RequestView<'_, '_, '_, '_>, rec: &mut RequestRecord) {
    rec.raw.clear();
    let found = request_value(v, view, &mut rec.raw);
    if !found {
        rec.values.extend_from_slice(missing(escape));
    } else {
        append_escaped(&mut rec.values, &rec.raw, escape);
    }
    rec.ends.push(rec.values.len());
}

/// Appends a request-time value; false when nginx would find the variable missing (written `-`).
fn request_value(v: &Var, view: &RequestView<'_, '_, '_, '_>, out: &mut Vec<u8>) -> bool {
    let vars = view.vars;
    match v {
        Var::RemoteAddr => {
            match vars.conn.remote {
                std::net::SocketAddr::V4(v4) => append_ipv4(out, *v4.ip()),
                _ => vars.append(&Var::RemoteAddr, out),
            }
            true
        }
        var => {
            let present = vars.is_set(var);
            if present {
                vars.append(var, out);
            }
            present
                && !(matches!(
                    var,
                    Var::Arg(_) | Var::Cookie(_) | Var::RemoteUser | Var::LimitReqStatus | Var::LimitConnStatus
                ) && out.is_empty())
        }
    }
}

/// What a line needs beyond the record.
pub struct LineContext<'a> {
    pub snap: &'a Snapshot,
    pub clock: &'a LogClock,
    pub now: Instant,
    /// The http block's maps, and the line's cache of those it evaluates.
    pub maps: &'a [crate::config::map::Map],
    pub answer_vars: &'a crate::http::var_cache::VarCache,
}

/// What a map evaluated when the line is written reads: the answer's values of the record.
struct AnswerVars<'a, 'c> {
    rec: &'a RequestRecord,
    cx: &'a LineContext<'c>,
}

impl VarSource for AnswerVars<'_, '_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Map(i) | Var::AnswerMap(i) => self.cx.answer_vars.append_map(self.cx.maps, *i, self, out),
            v => response_value(v, Escape::None, self.rec, self.cx, out),
        }
    }
}

/// Where a set's lines are in the record's captured values: those of the request head, and the answer's headers.
#[derive(Debug, Default)]
pub struct Cursor {
    request: usize,
    headers: usize,
}

impl Cursor {
    /// Steps over the values of `format` (a line its `if=` skipped).
    pub fn skip(&mut self, format: &LogFormat) {
        for op in format.ops() {
            match op {
                Op::Var(_) if op.captured_at_request() => self.request += 1,
                Op::Var(v) if is_header_var(v) => self.headers += 1,
                _ => {}
            }
        }
    }
}

/// Appends the line of `format` for `rec`; `next` walks the captured values (shared over a set's formats).
pub fn render(format: &LogFormat, rec: &RequestRecord, cx: &LineContext<'_>, next: &mut Cursor, out: &mut Vec<u8>) {
    for op in format.ops() {
        match op {
            Op::Text(t) => out.extend_from_slice(t),
            Op::Var(_) if op.captured_at_request() => {
                let i = next.request;
                let start = if i == 0 {
                    0
                } else {
                    rec.ends.get(i - 1).copied().unwrap_or(0)
                };
                let end = rec.ends.get(i).copied().unwrap_or(start);
                out.extend_from_slice(rec.values.get(start..end).unwrap_or_default());
                next.request += 1;
            }
            Op::Var(v) if is_header_var(v) => {
                match rec.header_value(next.headers) {
                    Some(value) => append_escaped(out, value, format.escape),
                    None => out.extend_from_slice(missing(format.escape)),
                }
                next.headers += 1;
            }
            Op::Var(v) => response_value(v, format.escape, rec, cx, out),
        }
    }
}

fn response_value(v: &Var, escape: Escape, rec: &RequestRecord, cx: &LineContext<'_>, out: &mut Vec<u8>) {
    match v {
        Var::Status => three_digits(out, u32::from(rec.status)),
        Var::BodyBytesSent => append_decimal(out, rec.body_bytes),
        Var::BytesSent => append_decimal(out, rec.header_bytes + rec.body_bytes),
        Var::RequestLength => append_decimal(out, rec.request_length),
        Var::RequestTime => seconds(out, cx.now.saturating_duration_since(rec.started)),
        Var::Msec => cx.clock.append_msec(out),
        Var::TimeLocal => out.extend_from_slice(&cx.clock.local),
        Var::TimeIso8601 => out.extend_from_slice(&cx.clock.iso8601),
        v if v.is_upstream_try() => {
            let name = |i: usize, o: &mut Vec<u8>| {
                let name = cx.snap.http_plans.get(i).map_or("", |p| p.name.as_str());
                if needs_escape(name.as_bytes(), escape) {
                    append_escaped(o, name.as_bytes(), escape);
                } else {
                    o.extend_from_slice(name.as_bytes());
                }
            };
            if rec.tries.is_empty() {
                out.extend_from_slice(missing(escape));
            } else {
                upstream_list(v, &rec.tries, &name, out);
            }
        }
        Var::AnswerMap(i) => {
            let start = out.len();
            let src = AnswerVars { rec, cx };
            cx.answer_vars.append_map(cx.maps, *i, &src, out);
            if needs_escape(out.get(start..).unwrap_or_default(), escape) {
                // escaped from a copy (the line's buffer holds it): rare, values of answer maps are short words
                let raw = out.split_off(start);
                append_escaped(out, &raw, escape);
            }
        }
        _ => out.extend_from_slice(missing(escape)),
    }
}

/// An upstream list variable ([`Var::is_upstream_try`]) as nginx writes it: one value per try, `, ` between
/// them; `name` writes the upstream's name (a try that found no live peer). Nothing for another variable.
pub(super) fn upstream_list(v: &Var, tries: &[UpstreamTry], name: &dyn Fn(usize, &mut Vec<u8>), out: &mut Vec<u8>) {
    let each = |t: &UpstreamTry, o: &mut Vec<u8>| match v {
        Var::UpstreamAddr => match t.peer {
            TryPeer::Addr(a) => append_addr(o, a),
            TryPeer::Upstream(i) => name(i, o),
        },
        Var::UpstreamStatus => match t.status {
            0 => o.push(b'-'),
            s => append_decimal(o, u64::from(s)),
        },
        Var::UpstreamResponseTime => optional_seconds(o, t.response),
        Var::UpstreamConnectTime => optional_seconds(o, t.connect),
        Var::UpstreamHeaderTime => optional_seconds(o, t.header),
        Var::UpstreamResponseLength => append_decimal(o, t.response_length),
        Var::UpstreamBytesReceived => append_decimal(o, t.bytes_received),
        Var::UpstreamBytesSent => append_decimal(o, t.bytes_sent),
        _ => {}
    };
    if !v.is_upstream_try() {
        return;
    }
    for (i, t) in tries.iter().enumerate() {
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
            let _ = write!(out, "{}", crate::config::unix_addr::Display(&v6));
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
