//! `$sent_http_NAME`, `$upstream_http_NAME` and `$upstream_cookie_NAME` in access logs: the headers a log set
//! names are listed at load; when an answer's head is written, their values are copied (as they are) into the
//! request's record, since the head's buffer is reused for the body; the line escapes them as its format says.

use super::record::RequestRecord;
use crate::config::key::Var;

/// Whether `v` is read from an answer's headers.
pub fn is_header_var(v: &Var) -> bool {
    v.is_answer_header()
}

/// The header lines of a raw head (its status line skipped), as (name, value).
fn lines(head: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.split(|&c| c == b'\n').skip(1).filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&c| c == b':')?;
        let (name, value) = line.split_at(colon);
        Some((name, value.get(1..).unwrap_or_default().trim_ascii()))
    })
}

/// Whether header `name` is the variable's `wanted` (lower-case, `-` for `_`).
fn same_name(name: &[u8], wanted: &str) -> bool {
    name.len() == wanted.len()
        && name.iter().zip(wanted.bytes()).all(|(&c, w)| {
            let c = c.to_ascii_lowercase();
            c == w || (c == b'_' && w == b'-')
        })
}

/// Appends every `name` header of `head`, joined by `, ` as nginx joins them; false when there is none.
pub(super) fn header(head: &[u8], name: &str, out: &mut Vec<u8>) -> bool {
    let mut found = false;
    for (_, value) in lines(head).filter(|(n, _)| same_name(n, name)) {
        if found {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(value);
        found = true;
    }
    found
}

/// Appends the value of cookie `name` of the first `Set-Cookie` line that sets it, as
/// `ngx_http_parse_set_cookie_lines` reads it (the name first, without case; spaces around `=`; up to `;`); false
/// when none does.
pub(super) fn set_cookie(head: &[u8], name: &str, out: &mut Vec<u8>) -> bool {
    let skip_spaces = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b' ').count() };
    for (_, value) in lines(head).filter(|(n, _)| n.eq_ignore_ascii_case(b"set-cookie")) {
        if value.len() <= name.len() || !value[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            continue;
        }
        let rest = &value[name.len()..];
        let rest = &rest[skip_spaces(rest)..];
        let Some(rest) = rest.strip_prefix(b"=") else {
            continue;
        };
        let rest = &rest[skip_spaces(rest)..];
        let end = rest.iter().position(|&c| c == b';').unwrap_or(rest.len());
        out.extend_from_slice(&rest[..end]);
        return true;
    }
    false
}

impl RequestRecord {
    /// The answer's head is written (`sent`, the head only) after the upstream's (`upstream`, empty when corelb
    /// answered itself): copies the values the set's lines name.
    pub fn capture_headers(&mut self, sent: &[u8], upstream: &[u8]) {
        let Some(vars) = self.header_vars.clone() else {
            return;
        };
        self.headers.clear();
        self.header_ends.clear();
        for v in vars.iter() {
            let found = match v {
                Var::SentHttp(n) => header(sent, n, &mut self.headers),
                Var::UpstreamHttp(n) => header(upstream, n, &mut self.headers),
                Var::UpstreamCookie(n) => set_cookie(upstream, n, &mut self.headers),
                _ => false,
            };
            self.header_ends.push((self.headers.len(), found));
        }
    }

    /// Captured header value `i` (None: missing, as nginx's not-found value).
    pub fn header_value(&self, i: usize) -> Option<&[u8]> {
        let start = match i.checked_sub(1) {
            Some(p) => self.header_ends.get(p)?.0,
            None => 0,
        };
        let &(end, found) = self.header_ends.get(i)?;
        found.then(|| self.headers.get(start..end).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UPSTREAM: &[u8] = b"HTTP/1.1 200 OK\r\nX-Len: 42\r\nSet-Cookie: a=1; Path=/\r\nset-cookie: SID = x\r\n\
        Set-Cookie: sid=abc; HttpOnly\r\nCache-Control: private\r\ncache-control:  no-store \r\n\r\n";

    #[test]
    fn headers_join_and_cookies_parse_as_nginx() {
        let mut out = Vec::new();
        assert!(header(UPSTREAM, "cache-control", &mut out));
        assert_eq!(out, b"private, no-store");
        out.clear();
        assert!(header(UPSTREAM, "x-len", &mut out));
        assert_eq!(out, b"42");
        assert!(!header(UPSTREAM, "x-none", &mut out));
        out.clear();
        assert!(set_cookie(UPSTREAM, "sid", &mut out));
        assert_eq!(out, b"x", "the first line naming it, spaces around `=` skipped");
        out.clear();
        assert!(set_cookie(UPSTREAM, "a", &mut out));
        assert_eq!(out, b"1");
        assert!(!set_cookie(UPSTREAM, "path", &mut out));
        assert!(!set_cookie(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: ab=1\r\n\r\n",
            "a",
            &mut out
        ));
    }

    #[test]
    fn record_keeps_values_in_order() {
        let mut rec = RequestRecord {
            header_vars: Some(
                vec![
                    Var::UpstreamHttp("x-len".into()),
                    Var::SentHttp("x-none".into()),
                    Var::SentHttp("server".into()),
                    Var::UpstreamCookie("a".into()),
                ]
                .into(),
            ),
            ..RequestRecord::default()
        };
        rec.capture_headers(b"HTTP/1.1 200 OK\r\nServer: corelb\r\n\r\n", UPSTREAM);
        assert_eq!(rec.header_value(0), Some(&b"42"[..]));
        assert_eq!(rec.header_value(1), None);
        assert_eq!(rec.header_value(2), Some(&b"corelb"[..]));
        assert_eq!(rec.header_value(3), Some(&b"1"[..]));
        assert_eq!(rec.header_value(4), None);
    }
}
