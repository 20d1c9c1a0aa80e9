//! Conditional requests as nginx's not_modified filter answers them: `If-Unmodified-Since` and `If-Match` (412),
//! then `If-Modified-Since` (under `if_modified_since off|exact|before`) and `If-None-Match` (304), and nginx's
//! `ngx_parse_http_time` for the dates.

use super::request::RequestHead;
pub use crate::config::files::IfModifiedSince;

/// What the preconditions make of a 200 answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// The answer as it is.
    Send,
    /// 304: no body, no `Content-Type`, `Content-Length`, `Accept-Ranges` or `Content-Encoding`.
    NotModified,
    /// 412 (nginx's error page).
    Failed,
}

/// The answer's validators: its `Last-Modified` time and its `ETag` value (quotes included).
#[derive(Debug, Clone, Copy)]
pub struct Validators<'a> {
    pub mtime: Option<i64>,
    pub etag: Option<&'a [u8]>,
}

/// `ngx_http_not_modified_header_filter` for a 200 answer with `v` to the request `head`.
pub fn check(head: &RequestHead<'_, '_>, v: Validators<'_>, ims: IfModifiedSince) -> Precondition {
    if let Some(value) = head.header("if-unmodified-since") {
        let unmodified = v.mtime.is_some_and(|m| parse_http_time(value).is_some_and(|t| t >= m));
        if !unmodified {
            return Precondition::Failed;
        }
    }
    if let Some(list) = head.header("if-match") {
        if !etag_listed(list, v.etag, false) {
            return Precondition::Failed;
        }
    }
    let since = head.header("if-modified-since");
    let none_match = head.header("if-none-match");
    if since.is_none() && none_match.is_none() {
        return Precondition::Send;
    }
    if let Some(value) = since {
        if modified(value, v.mtime, ims) {
            return Precondition::Send;
        }
    }
    if let Some(list) = none_match {
        if !etag_listed(list, v.etag, true) {
            return Precondition::Send;
        }
    }
    Precondition::NotModified
}

/// `ngx_http_test_if_modified`: whether the answer counts as modified since `value`.
fn modified(value: &[u8], mtime: Option<i64>, ims: IfModifiedSince) -> bool {
    let Some(m) = mtime else { return true };
    if ims == IfModifiedSince::Off {
        return true;
    }
    // an unparsable date is nginx's -1
    let t = parse_http_time(value).unwrap_or(-1);
    if t == m {
        return false;
    }
    ims == IfModifiedSince::Exact || t < m
}

/// `ngx_http_test_if_match`: whether `list` (`*` or entity tags separated by `,`) names `etag`; `weak`
/// (If-None-Match) compares without the `W/` of either side.
fn etag_listed(list: &[u8], etag: Option<&[u8]>, weak: bool) -> bool {
    if list == b"*" {
        return true;
    }
    let Some(mut etag) = etag else { return false };
    if weak && etag.len() > 2 && etag.starts_with(b"W/") {
        etag = etag.get(2..).unwrap_or_default();
    }
    let mut s = list;
    while !s.is_empty() {
        if weak && s.len() > 2 && s.starts_with(b"W/") {
            s = s.get(2..).unwrap_or_default();
        }
        if etag.len() > s.len() {
            return false;
        }
        if s.starts_with(etag) {
            let rest = s.get(etag.len()..).unwrap_or_default();
            let rest = trim_start(rest, b" \t");
            if rest.is_empty() || rest.first() == Some(&b',') {
                return true;
            }
        }
        let next = s.iter().position(|&c| c == b',').unwrap_or(s.len());
        s = trim_start(s.get(next..).unwrap_or_default(), b" \t,");
    }
    false
}

fn trim_start<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let n = s.iter().take_while(|c| set.contains(c)).count();
    s.get(n..).unwrap_or_default()
}

/// nginx's `ngx_parse_http_time`: RFC 822/1123 (`Tue, 10 Nov 2002 23:50:13`), RFC 850 (`Tuesday, 10-Dec-02
/// 23:50:13`) and asctime (`Tue Dec 10 23:50:13 2002`) dates as seconds since the epoch; what follows the time
/// (the zone) is not read. `None` where nginx returns `NGX_ERROR`.
pub fn parse_http_time(value: &[u8]) -> Option<i64> {
    #[derive(PartialEq)]
    enum Fmt {
        None,
        Rfc822,
        Rfc850,
        Isoc,
    }
    let at = |i: usize| value.get(i).copied().unwrap_or(0);
    let digit = |i: usize| at(i).is_ascii_digit().then(|| i64::from(at(i) - b'0'));
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let end = value.len();
    let mut fmt = Fmt::None;
    let mut p = 0;
    while p < end {
        match at(p) {
            b',' => break,
            b' ' => {
                fmt = Fmt::Isoc;
                break;
            }
            _ => p += 1,
        }
    }
    p += 1;
    while p < end && at(p) == b' ' {
        p += 1;
    }
    if end.saturating_sub(p) < 18 {
        return None;
    }
    let mut day = 0;
    if fmt != Fmt::Isoc {
        day = two(p)?;
        p += 2;
        fmt = match at(p) {
            b' ' if end.saturating_sub(p) >= 18 => Fmt::Rfc822,
            b'-' => Fmt::Rfc850,
            _ => return None,
        };
        p += 1;
    }
    let month: i64 = match at(p) {
        b'J' if at(p + 1) == b'a' => 0,
        b'J' if at(p + 2) == b'n' => 5,
        b'J' => 6,
        b'F' => 1,
        b'M' if at(p + 2) == b'r' => 2,
        b'M' => 4,
        b'A' if at(p + 1) == b'p' => 3,
        b'A' => 7,
        b'S' => 8,
        b'O' => 9,
        b'N' => 10,
        b'D' => 11,
        _ => return None,
    };
    p += 3;
    if (fmt == Fmt::Rfc822 && at(p) != b' ') || (fmt == Fmt::Rfc850 && at(p) != b'-') {
        return None;
    }
    p += 1;
    let mut year = 0;
    if fmt == Fmt::Rfc822 {
        year = two(p)? * 100 + two(p + 2)?;
        p += 4;
    } else if fmt == Fmt::Rfc850 {
        year = two(p)?;
        year += if year < 70 { 2000 } else { 1900 };
        p += 2;
    }
    if fmt == Fmt::Isoc {
        if at(p) == b' ' {
            p += 1;
        }
        day = digit(p)?;
        p += 1;
        if at(p) != b' ' {
            day = day * 10 + digit(p)?;
            p += 1;
        }
        if end.saturating_sub(p) < 14 {
            return None;
        }
    }
    if at(p) != b' ' {
        return None;
    }
    p += 1;
    let hour = two(p)?;
    p += 2;
    if at(p) != b':' {
        return None;
    }
    let min = two(p + 1)?;
    p += 3;
    if at(p) != b':' {
        return None;
    }
    let sec = two(p + 1)?;
    p += 3;
    if fmt == Fmt::Isoc {
        if at(p) != b' ' {
            return None;
        }
        year = two(p + 1)? * 100 + two(p + 3)?;
    }
    if hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    const MDAY: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day == 29 && month == 1 {
        if (year & 3) != 0 || (year % 100 == 0 && year % 400 != 0) {
            return None;
        }
    } else if day > MDAY.get(month as usize).copied().unwrap_or(0) {
        return None;
    }
    // Gauss' formula, months from March, as nginx
    let (mut month, mut year) = (month, year);
    month -= 1;
    if month <= 0 {
        month += 12;
        year -= 1;
    }
    let days = 365 * year + year / 4 - year / 100 + year / 400 + 367 * month / 12 - 30 + day - 1 - 719_527 + 31 + 28;
    Some(days * 86_400 + hour * 3600 + min * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_the_three_forms() {
        let t = |s: &str| parse_http_time(s.as_bytes());
        assert_eq!(t("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(t("Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(t("Sun Nov  6 08:49:37 1994"), Some(784_111_777));
        assert_eq!(t("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(t("Tue, 19 Jan 2038 03:14:07 GMT"), Some(0x7FFF_FFFF));
        assert_eq!(t("Fri, 25 Feb 2174 09:42:23 GMT"), Some(0x1_7FFF_FFFF));
        assert_eq!(t("Tue, 29 Feb 2001 00:00:00 GMT"), None);
        assert_eq!(t("Tue, 10 Nov 2002 24:00:00 GMT"), None);
        assert_eq!(t("yesterday"), None);
        assert_eq!(t(""), None);
    }

    #[test]
    fn etag_lists_as_nginx_reads_them() {
        let e = Some(&b"\"5-0\""[..]);
        assert!(etag_listed(b"\"5-0\"", e, false));
        assert!(etag_listed(b"*", None, false));
        assert!(!etag_listed(b"\"foo\"", e, false));
        assert!(etag_listed(b"\"foo\", \"bar\", \t\"5-0\" , \"baz\"", e, false));
        assert!(etag_listed(b"W/\"5-0\"", e, true));
        assert!(!etag_listed(b"W/\"5-0\"", e, false));
        assert!(etag_listed(b"\"5-0\"", Some(b"W/\"5-0\""), true));
        assert!(!etag_listed(b"\"5-0\"", None, true));
    }

    #[test]
    fn modified_under_each_setting() {
        let m = Some(100);
        let d = |s: i64| {
            std::str::from_utf8(&super::super::pages::format_http_date(s as u64))
                .unwrap()
                .to_string()
        };
        assert!(!modified(d(100).as_bytes(), m, IfModifiedSince::Exact));
        assert!(modified(d(200).as_bytes(), m, IfModifiedSince::Exact));
        assert!(!modified(d(200).as_bytes(), m, IfModifiedSince::Before));
        assert!(modified(d(50).as_bytes(), m, IfModifiedSince::Before));
        assert!(modified(d(100).as_bytes(), m, IfModifiedSince::Off));
        assert!(modified(b"junk", m, IfModifiedSince::Before));
        assert!(modified(d(100).as_bytes(), None, IfModifiedSince::Exact));
    }
}
