//! The charset filter's byte work, without sockets: an answer's `Content-Type` as nginx's `headers_out` holds it
//! (the type, where its parameters start, the `charset=` value) and writes it back, and the streaming recoders of
//! `ngx_http_charset_filter_module` (a byte table, single-byte to UTF-8, UTF-8 to single-byte with `&#N;` for a
//! character the charset lacks and a sequence cut between two pieces carried over).

use crate::config::charset::{utf8_decode, Recode, UTF8_INCOMPLETE};

/// A `Content-Type` as nginx keeps it: the value, the length of the type before a `charset=` parameter
/// (`content_type_len`), and that parameter's value (`headers_out.charset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentType<'a> {
    pub value: &'a [u8],
    pub base_len: usize,
    pub charset: &'a [u8],
}

impl<'a> ContentType<'a> {
    /// A type corelb set itself (a file's, an error page's): no parameters.
    pub fn bare(value: &'a [u8]) -> ContentType<'a> {
        ContentType {
            value,
            base_len: value.len(),
            charset: b"",
        }
    }

    /// An upstream's `Content-Type`, read as `ngx_http_upstream_copy_content_type` reads it: the first
    /// `; charset=` parameter (after spaces, without case) cuts the type and gives the charset, a quote on
    /// either side of it dropped.
    pub fn of_upstream(value: &'a [u8]) -> ContentType<'a> {
        let mut ct = ContentType::bare(value);
        let mut p = 0;
        while p < value.len() {
            if value.get(p) != Some(&b';') {
                p += 1;
                continue;
            }
            let last = p;
            p += 1;
            while value.get(p) == Some(&b' ') {
                p += 1;
            }
            if p >= value.len() {
                return ct;
            }
            let is_charset = value.get(p..p + 8).is_some_and(|s| s.eq_ignore_ascii_case(b"charset="));
            if !is_charset {
                continue;
            }
            p += 8;
            ct.base_len = last;
            if value.get(p) == Some(&b'"') {
                p += 1;
            }
            let mut end = value.len();
            if end > p && value.get(end - 1) == Some(&b'"') {
                end -= 1;
            }
            ct.charset = value.get(p..end).unwrap_or_default();
            return ct;
        }
        ct
    }

    /// The type without parameters, as nginx tests it against `charset_types`.
    pub fn bare_type(&self) -> &'a [u8] {
        self.value.get(..self.base_len).unwrap_or(self.value)
    }

    /// Writes the value as nginx's header filter does: `; charset=` and the charset after a type without
    /// parameters.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.value);
        if self.value.len() == self.base_len && !self.charset.is_empty() {
            out.extend_from_slice(b"; charset=");
            out.extend_from_slice(self.charset);
        }
    }
}

/// The longest UTF-8 sequence nginx carries from one piece to the next.
const UTF_LEN: usize = 4;

/// One answer's recoding state: its table, and the start of a UTF-8 sequence the last piece ended in.
#[derive(Debug)]
pub struct Recoder<'t> {
    table: &'t Recode,
    saved: [u8; UTF_LEN],
    saved_len: usize,
}

impl<'t> Recoder<'t> {
    pub fn new(table: &'t Recode) -> Recoder<'t> {
        Recoder {
            table,
            saved: [0; UTF_LEN],
            saved_len: 0,
        }
    }

    /// Whether the recoded body can differ in length from the original (UTF-8 on either side).
    pub fn changes_length(&self) -> bool {
        !matches!(self.table, Recode::Byte(_))
    }

    /// Recodes one piece of the body, appending to `out`. The bytes of a UTF-8 sequence the piece ends in are
    /// kept for the next piece (and dropped if none comes, as nginx drops them).
    pub fn recode(&mut self, src: &[u8], out: &mut Vec<u8>) {
        match self.table {
            Recode::Byte(t) => out.extend(src.iter().map(|&b| t[usize::from(b)])),
            Recode::ToUtf8(t) => {
                for &b in src {
                    let e = &t[usize::from(b)];
                    let n = usize::from(e[0]).min(3);
                    out.extend_from_slice(e.get(1..=n).unwrap_or_default());
                }
            }
            Recode::FromUtf8(pages) => self.recode_from_utf8(pages, src, out),
        }
    }

    /// `ngx_http_charset_recode_from_utf8`.
    fn recode_from_utf8(&mut self, pages: &[Option<Box<[u8; 256]>>; 256], mut src: &[u8], out: &mut Vec<u8>) {
        if self.saved_len > 0 {
            let old = self.saved_len;
            let take = (UTF_LEN - old).min(src.len());
            self.saved[old..old + take].copy_from_slice(src.get(..take).unwrap_or_default());
            let len = old + take;
            let (n, mut used) = utf8_decode(self.saved.get(..len).unwrap_or_default());
            if n == UTF8_INCOMPLETE && len < UTF_LEN {
                self.saved_len = len;
                return;
            }
            let c = lookup(pages, n);
            if c != 0 {
                out.push(c);
            } else if n == UTF8_INCOMPLETE {
                out.push(b'?');
                used = UTF_LEN;
            } else if n > 0x10ffff {
                out.push(b'?');
                used = used.max(old);
            } else {
                entity(n, out);
            }
            src = src.get(used.saturating_sub(old)..).unwrap_or_default();
            self.saved_len = 0;
        }
        let mut i = 0;
        while i < src.len() {
            let b = src.get(i).copied().unwrap_or(0);
            if b < 0x80 {
                out.push(b);
                i += 1;
                continue;
            }
            let rest = src.get(i..).unwrap_or_default();
            let (n, used) = utf8_decode(rest);
            if n == UTF8_INCOMPLETE {
                self.saved[..rest.len()].copy_from_slice(rest);
                self.saved_len = rest.len();
                return;
            }
            i += used;
            let c = lookup(pages, n);
            if c != 0 {
                out.push(c);
            } else if n > 0x10ffff {
                out.push(b'?');
            } else {
                entity(n, out);
            }
        }
    }
}

/// The byte of code point `n` in the pages (0: none).
fn lookup(pages: &[Option<Box<[u8; 256]>>; 256], n: u32) -> u8 {
    if n >= 0x10000 {
        return 0;
    }
    pages
        .get((n >> 8) as usize)
        .and_then(|p| p.as_ref())
        .map_or(0, |p| p[(n & 0xff) as usize])
}

/// `&#N;`.
fn entity(n: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(b"&#");
    crate::http::pages::append_decimal(out, u64::from(n));
    out.push(b';');
}

/// Recodes `buf` in place with a byte table (a file's bytes as they are read).
pub fn recode_bytes(table: &[u8; 256], buf: &mut [u8]) {
    for b in buf {
        *b = table[usize::from(*b)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_content_type_as_nginx_reads_it() {
        let ct = ContentType::of_upstream(b"text/html; charset=B");
        assert_eq!((ct.base_len, ct.charset), (9, b"B".as_slice()));
        let ct = ContentType::of_upstream(b"text/html;  CHARSET=\"koi8-r\"");
        assert_eq!(
            (ct.bare_type(), ct.charset),
            (b"text/html".as_slice(), b"koi8-r".as_slice())
        );
        let ct = ContentType::of_upstream(b"text/html; q=1; charset=x; y");
        assert_eq!((ct.base_len, ct.charset), (14, b"x; y".as_slice()));
        let ct = ContentType::of_upstream(b"text/html; foo=bar");
        assert_eq!((ct.base_len, ct.charset), (18, b"".as_slice()));
        assert_eq!(ContentType::of_upstream(b"text/html;  ").base_len, 12);
        let mut out = Vec::new();
        ContentType::of_upstream(b"text/html; charset=B").write(&mut out);
        assert_eq!(
            out, b"text/html; charset=B",
            "a type with parameters is written as it came"
        );
        out.clear();
        ContentType {
            charset: b"utf-8",
            ..ContentType::bare(b"text/plain")
        }
        .write(&mut out);
        assert_eq!(out, b"text/plain; charset=utf-8");
    }

    fn maps() -> crate::config::charset::Charsets {
        let text = "charset_map B A { 58 59; } charset_map win utf-8 { C0 D090; 88 E282AC; }";
        let block = crate::config::parser::parse_text(text.as_bytes(), std::path::Path::new("t.conf"));
        crate::config::load_charsets_for_tests(&block)
    }

    #[test]
    fn byte_and_to_utf8_tables() {
        let c = maps();
        let (b, a) = (c.find(b"B").unwrap(), c.find(b"A").unwrap());
        let mut r = Recoder::new(c.table(b, a).unwrap());
        let mut out = Vec::new();
        r.recode(b"aXXz\x80", &mut out);
        assert_eq!(out, b"aYYz?");
        assert!(!r.changes_length());
        let mut buf = *b"XyX";
        let Some(Recode::Byte(t)) = c.table(b, a) else { panic!() };
        recode_bytes(t, &mut buf);
        assert_eq!(&buf, b"YyY");
        let (w, u) = (c.find(b"win").unwrap(), c.find(b"utf-8").unwrap());
        let mut r = Recoder::new(c.table(w, u).unwrap());
        out.clear();
        r.recode(b"a\xc0\x88\x81", &mut out);
        assert_eq!(out, "aА€?".as_bytes());
        assert!(r.changes_length());
    }

    #[test]
    fn from_utf8_with_entities_and_split_sequences() {
        let c = maps();
        let (w, u) = (c.find(b"win").unwrap(), c.find(b"utf-8").unwrap());
        let table = c.table(u, w).unwrap();
        let mut r = Recoder::new(table);
        let mut out = Vec::new();
        r.recode("aА€ж😀".as_bytes(), &mut out);
        assert_eq!(out, b"a\xc0\x88&#1078;&#128512;");
        // a sequence cut anywhere comes out the same
        let text = "xА€yжz".as_bytes();
        for cut in 0..text.len() {
            for cut2 in cut..text.len() {
                let mut r = Recoder::new(table);
                let mut out = Vec::new();
                r.recode(&text[..cut], &mut out);
                r.recode(&text[cut..cut2], &mut out);
                r.recode(&text[cut2..], &mut out);
                assert_eq!(out, b"x\xc0\x88y&#1078;z", "cut at {cut}, {cut2}");
            }
        }
        // invalid bytes are `?`, as nginx writes them
        let mut r = Recoder::new(table);
        out.clear();
        r.recode(b"a\xff\xc3(b", &mut out);
        assert_eq!(out, b"a??b");
        let mut r = Recoder::new(table);
        out.clear();
        r.recode(b"\xe2\x82", &mut out);
        r.recode(b"(z", &mut out);
        assert_eq!(out, b"?z", "a bad continuation after a cut");
    }
}
