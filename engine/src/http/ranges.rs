//! A `Range: bytes=...` header read as nginx's range filter reads it (`ngx_http_range_parse`), with `If-Range`
//! and `max_ranges`: which parts of an answer of known length go out, and the multipart boundary nginx writes.

use std::cell::Cell;

/// The ranges of one request (at most [`INLINE`] kept without allocating).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranges {
    /// No ranges (no header, not `bytes=`, `If-Range` did not match, too many, or one starting at 0 that is
    /// empty): the whole answer, with `Accept-Ranges: bytes`.
    Whole,
    /// One range `[start, end)`: a 206 with `Content-Range`.
    Single(u64, u64),
    /// Several ranges in the order asked: a 206 `multipart/byteranges`.
    Multi(Vec<(u64, u64)>),
    /// None of them is in the answer, or the header is malformed: 416.
    Unsatisfiable,
}

/// The ranges kept on the stack while parsing.
const INLINE: usize = 1;

/// nginx's `max_ranges` default: no limit (`NGX_MAX_INT32_VALUE`).
pub const UNLIMITED: u32 = i32::MAX as u32;

/// Parses `value` (the `Range` header) for an answer of `length` bytes, as `ngx_http_range_parse` with at most
/// `max_ranges` ranges (`0`: ranges are off, the caller does not ask).
pub fn parse(value: &[u8], length: u64, max_ranges: u32) -> Ranges {
    if value.len() < 7 || !value.get(..6).is_some_and(|p| p.eq_ignore_ascii_case(b"bytes=")) {
        return Ranges::Whole;
    }
    let mut p = Cursor {
        b: value.get(6..).unwrap_or_default(),
        i: 0,
    };
    let content_length = i64::try_from(length).unwrap_or(i64::MAX);
    let mut left = i64::from(max_ranges);
    let mut first: Option<(u64, u64)> = None;
    let mut more: Vec<(u64, u64)> = Vec::new();
    let mut count = 0usize;
    let mut size: i64 = 0;
    loop {
        let mut start: i64 = 0;
        let mut end: i64;
        let suffix;
        p.spaces();
        if p.peek() != b'-' {
            let Some(s) = p.number() else {
                return Ranges::Unsatisfiable;
            };
            start = s;
            p.spaces();
            if p.next() != b'-' {
                return Ranges::Unsatisfiable;
            }
            p.spaces();
            if matches!(p.peek(), b',' | 0) {
                end = content_length;
                suffix = None;
            } else {
                suffix = Some(false);
                end = 0;
            }
        } else {
            p.next();
            suffix = Some(true);
            end = 0;
        }
        if let Some(is_suffix) = suffix {
            let Some(e) = p.number() else {
                return Ranges::Unsatisfiable;
            };
            end = e;
            p.spaces();
            if !matches!(p.peek(), b',' | 0) {
                return Ranges::Unsatisfiable;
            }
            if is_suffix {
                start = if end < content_length { content_length - end } else { 0 };
                end = content_length - 1;
            }
            end = if end >= content_length { content_length } else { end + 1 };
        }
        if start < end {
            let range = (start as u64, end as u64);
            if size > i64::MAX - (end - start) {
                return Ranges::Unsatisfiable;
            }
            size += end - start;
            match first {
                None => first = Some(range),
                Some(_) => more.push(range),
            }
            count += 1;
            if left == 0 {
                return Ranges::Whole;
            }
            left -= 1;
        } else if start == 0 {
            return Ranges::Whole;
        }
        if p.next() != b',' {
            break;
        }
    }
    let Some(first) = first else {
        return Ranges::Unsatisfiable;
    };
    if count <= INLINE {
        return Ranges::Single(first.0, first.1);
    }
    if size > content_length {
        return Ranges::Whole;
    }
    if max_ranges == UNLIMITED {
        let padded = size.saturating_add(i64::try_from(count).unwrap_or(i64::MAX).saturating_mul(256));
        if padded > content_length.saturating_add(4096) {
            return Ranges::Whole;
        }
    }
    more.insert(0, first);
    Ranges::Multi(more)
}

/// Whether `If-Range` lets the ranges apply: a quoted value is compared with the `ETag` (`etag`, byte for byte),
/// anything else as a date with the answer's `Last-Modified` (`mtime`).
pub fn if_range_matches(if_range: &[u8], etag: Option<&[u8]>, mtime: Option<i64>) -> bool {
    if if_range.len() >= 2 && if_range.last() == Some(&b'"') {
        return etag == Some(if_range);
    }
    match mtime {
        None => false,
        Some(m) => crate::http::not_modified::parse_http_time(if_range) == Some(m),
    }
}

/// A byte cursor over the header value: past its end it reads `0`, as nginx's NUL-terminated string does.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> u8 {
        self.b.get(self.i).copied().unwrap_or(0)
    }

    fn next(&mut self) -> u8 {
        let c = self.peek();
        self.i += 1;
        c
    }

    fn spaces(&mut self) {
        while self.peek() == b' ' {
            self.i += 1;
        }
    }

    /// Digits as nginx reads them (at least one; `None` past `off_t`'s range or without a digit).
    fn number(&mut self) -> Option<i64> {
        if !self.peek().is_ascii_digit() {
            return None;
        }
        let mut n: i64 = 0;
        while self.peek().is_ascii_digit() {
            n = n.checked_mul(10)?.checked_add(i64::from(self.next() - b'0'))?;
        }
        Some(n)
    }
}

thread_local! {
    /// nginx's `ngx_temp_number`: seeded from the time and the process, one more per multipart answer.
    static BOUNDARY: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64 % 1000);
    (ms << 16) + u64::from(std::process::id())
}

/// The next multipart boundary, as nginx prints it (`%0muA`: 20 digits, zero-padded).
pub fn next_boundary() -> [u8; 20] {
    let n = BOUNDARY.with(|b| {
        let n = b.get();
        b.set(n.wrapping_add(1));
        n
    });
    let mut out = [b'0'; 20];
    let mut v = n;
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_as_nginx_parses_them() {
        let p = |v: &str| parse(v.as_bytes(), 1000, UNLIMITED);
        assert_eq!(p("bytes=0-8"), Ranges::Single(0, 9));
        assert_eq!(p("bytes=-10"), Ranges::Single(990, 1000));
        assert_eq!(p("bytes=990-"), Ranges::Single(990, 1000));
        assert_eq!(p("bytes=990-5000"), Ranges::Single(990, 1000));
        assert_eq!(p("BYTES= 1 - 2 "), Ranges::Single(1, 3));
        assert_eq!(p("bytes=-2000"), Ranges::Single(0, 1000));
        assert_eq!(
            p("bytes=0-9, -10, 10-19"),
            Ranges::Multi(vec![(0, 10), (990, 1000), (10, 20)])
        );
        assert_eq!(p("bytes=100000-"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=alpha"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=10-alpha"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=10"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=10-11 12-"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=99999999999999999999-"), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=0-10001"), Ranges::Single(0, 1000));
        assert_eq!(p("bytes=0-10001, 0-0"), Ranges::Whole, "more than the answer");
        assert_eq!(p("bytes=-0"), Ranges::Unsatisfiable);
        assert_eq!(parse(b"bytes=0-", 0, UNLIMITED), Ranges::Whole, "an empty range from 0");
        assert_eq!(p("bytes=5-1"), Ranges::Unsatisfiable);
        assert_eq!(p("items=0-1"), Ranges::Whole);
        assert_eq!(p("bytes="), Ranges::Whole, "shorter than 7 bytes");
        let two = |v: &str| parse(v.as_bytes(), 1000, 2);
        assert_eq!(two("bytes=0-9, -10"), Ranges::Multi(vec![(0, 10), (990, 1000)]));
        assert_eq!(two("bytes=0-9, -10, 10000-"), Ranges::Multi(vec![(0, 10), (990, 1000)]));
        assert_eq!(two("bytes=0-9, -10, 10-19"), Ranges::Whole);
        let many = format!("bytes={}", vec!["0-0"; 20].join(","));
        assert_eq!(
            parse(many.as_bytes(), 1000, UNLIMITED),
            Ranges::Whole,
            "256 bytes a part"
        );
    }

    #[test]
    fn if_range_and_boundaries() {
        assert!(if_range_matches(b"\"a-1\"", Some(b"\"a-1\""), Some(5)));
        assert!(!if_range_matches(b"\"a-2\"", Some(b"\"a-1\""), Some(5)));
        assert!(!if_range_matches(b"\"a-1\"", None, Some(5)));
        assert!(if_range_matches(b"Thu, 01 Jan 1970 00:00:05 GMT", None, Some(5)));
        assert!(!if_range_matches(b"Thu, 01 Jan 1970 00:00:06 GMT", None, Some(5)));
        let (a, b) = (next_boundary(), next_boundary());
        assert!(a.iter().all(u8::is_ascii_digit));
        assert_ne!(a, b);
    }
}
