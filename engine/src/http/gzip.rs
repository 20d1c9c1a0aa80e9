//! gzip (RFC 1952) as nginx's gzip filter writes it: a streaming encoder (nginx's 10-byte header, raw deflate of
//! each piece, CRC-32 and size trailer), the `Accept-Encoding` test of `ngx_http_gzip_ok`, and the weak `ETag`.

use flate2::{Compress, Compression, FlushCompress, Status};

/// The header nginx has zlib write: no name, no mtime, OS 3 (Unix); byte 8 (XFL) as [`header`] sets it.
pub const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];

/// [`HEADER`] for `level`, with zlib's XFL: 4 (fastest) at level 1, 2 (best) at level 9, else 0.
pub fn header(level: u32) -> [u8; 10] {
    let mut h = HEADER;
    h[8] = match level {
        1 => 4,
        9 => 2,
        _ => 0,
    };
    h
}

/// The zlib-rs level that compresses as zlib does at nginx's `level`. zlib-rs's level 1 is zlib-ng's
/// `deflate_quick` (static Huffman codes only), whose output is about a third larger than zlib's level 1
/// (`deflate_fast`) on JSON; zlib-rs's level 2 is that `deflate_fast`: a slightly smaller answer than nginx's at
/// `gzip_comp_level 1`, for 0.83x its instructions (BENCHMARKS.md, "gzip beside nginx"). Levels 2 to 9 already give
/// zlib's sizes.
fn deflate_level(level: u32) -> u32 {
    if level == 1 {
        2
    } else {
        level
    }
}

/// Output room reserved before each deflate call.
const ROOM: usize = 16 * 1024;

/// One gzip stream being written: the deflate state (its window and hash tables, the memory documented in
/// docs/directives.md) and the running CRC and size. Reused for another stream after [`Encoder::reset`].
pub struct Encoder {
    deflate: Compress,
    crc: crc32fast::Hasher,
    size: u32,
    level: u32,
    started: bool,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("level", &self.level).finish()
    }
}

impl Encoder {
    /// An encoder at `level` (1..=9; anything else is clamped).
    pub fn new(level: u32) -> Encoder {
        let level = level.clamp(1, 9);
        Encoder {
            deflate: Compress::new(Compression::new(deflate_level(level)), false),
            crc: crc32fast::Hasher::new(),
            size: 0,
            level,
            started: false,
        }
    }

    /// The compression level.
    pub fn level(&self) -> u32 {
        self.level
    }

    /// Ready for a new stream at the same level, its tables kept.
    pub fn reset(&mut self) {
        self.deflate.reset();
        self.crc = crc32fast::Hasher::new();
        self.size = 0;
        self.started = false;
    }

    /// Compresses `input`, appending what deflate gives out to `out` (the header first, on the first call).
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.start(out);
        self.crc.update(input);
        self.size = self.size.wrapping_add(input.len() as u32);
        let mut rest = input;
        while !rest.is_empty() {
            out.reserve(ROOM);
            let before = self.deflate.total_in();
            let Ok(_) = self.deflate.compress_vec(rest, out, FlushCompress::None) else {
                return;
            };
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(rest.len());
            rest = rest.get(used..).unwrap_or_default();
        }
    }

    /// Ends the stream: the rest of the deflate output and the trailer, appended to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.start(out);
        loop {
            out.reserve(ROOM);
            match self.deflate.compress_vec(&[], out, FlushCompress::Finish) {
                Ok(Status::StreamEnd) | Err(_) => break,
                Ok(_) => {}
            }
        }
        out.extend_from_slice(&self.crc.clone().finalize().to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            out.extend_from_slice(&header(self.level));
        }
    }
}

/// Whether an `Accept-Encoding` value takes gzip, as `ngx_http_gzip_ok` reads it: `gzip,` first, or a `gzip`
/// token (after the start, `,` or a space) followed by the end, `,`, or `;q=` with a quantity above zero.
pub fn accepts(value: &[u8]) -> bool {
    if value.len() < 4 {
        return false;
    }
    if value.starts_with(b"gzip,") {
        return true;
    }
    let mut from = 0;
    let at = loop {
        let Some(i) = find_caseless(value.get(from..).unwrap_or_default(), b"gzip") else {
            return false;
        };
        let at = from + i;
        if at == 0 || matches!(value.get(at - 1), Some(b',' | b' ')) {
            break at;
        }
        from = at + 4;
    };
    let mut rest = value.get(at + 4..).unwrap_or_default().iter();
    loop {
        match rest.next() {
            None | Some(b',') => return true,
            Some(b';') => break,
            Some(b' ') => {}
            Some(_) => return false,
        }
    }
    loop {
        match rest.next() {
            None => return true,
            Some(b'q' | b'Q') => break,
            Some(b' ') => {}
            Some(_) => return false,
        }
    }
    let rest = rest.as_slice();
    if rest.len() < 2 || rest.first() != Some(&b'=') {
        return false;
    }
    quantity(rest.get(1..).unwrap_or_default()) > 0
}

/// `ngx_http_gzip_quantity`: `0`, `1`, or either with up to three decimals, times 100 (0 when malformed).
fn quantity(p: &[u8]) -> u32 {
    let mut it = p.iter();
    let mut q = match it.next() {
        Some(c @ (b'0' | b'1')) => u32::from(c - b'0') * 100,
        _ => return 0,
    };
    match it.next() {
        None | Some(b',' | b' ') => return q,
        Some(b'.') => {}
        Some(_) => return 0,
    }
    let mut n = 0;
    for &c in it {
        match c {
            b',' | b' ' => break,
            b'0'..=b'9' => {
                // nginx adds the digits as they come (its own reading of a quantity)
                q += u32::from(c - b'0');
                n += 1;
            }
            _ => return 0,
        }
    }
    if q > 100 || n > 3 {
        return 0;
    }
    q
}

fn find_caseless(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// What `ngx_http_weak_etag` makes of an `ETag` value: kept when already weak, `W/` before a quoted one, `None`
/// (dropped) otherwise.
pub fn weak_etag(value: &[u8]) -> Option<WeakEtag<'_>> {
    if value.len() > 2 && value.starts_with(b"W/") {
        return Some(WeakEtag { prefix: false, value });
    }
    if value.first() != Some(&b'"') {
        return None;
    }
    Some(WeakEtag { prefix: true, value })
}

/// An `ETag` value as a compressed response sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeakEtag<'a> {
    /// `W/` goes before `value`.
    pub prefix: bool,
    pub value: &'a [u8],
}

impl WeakEtag<'_> {
    /// Appends the value.
    pub fn append(&self, out: &mut Vec<u8>) {
        if self.prefix {
            out.extend_from_slice(b"W/");
        }
        out.extend_from_slice(self.value);
    }
}

/// Appends `data` to `out` as one chunk of a chunked body (nothing for empty data: that would end the body).
pub fn append_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    use std::io::Write;
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(z: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(z).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn streams_decode_to_the_input_and_reset_for_the_next() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_string().into_bytes())
            .collect();
        let mut enc = Encoder::new(6);
        for round in 0..2 {
            let mut out = Vec::new();
            for piece in text.chunks(7000) {
                enc.write(piece, &mut out);
            }
            enc.finish(&mut out);
            assert_eq!(&out[..10], &header(6), "round {round}");
            assert!(out.len() < text.len() / 2);
            assert_eq!(gunzip(&out), text, "round {round}");
            enc.reset();
        }
        let mut empty = Vec::new();
        enc.finish(&mut empty);
        assert_eq!(gunzip(&empty), b"");
        assert_eq!(&empty[empty.len() - 8..], &[0; 8], "CRC and size of nothing");
    }

    /// JSON-like text: records of a few words and numbers, as an API answers.
    fn records() -> Vec<u8> {
        let words = [
            "alpha", "beta", "gamma", "delta", "upstream", "server", "location", "proxy",
        ];
        (0..3000u32)
            .flat_map(|i| {
                let w = |k: u32| words[((i * 7 + k * 13) % 8) as usize];
                format!(
                    "{{\"id\": {i}, \"name\": \"{} {} {}\", \"weight\": {}, \"addr\": \"10.{}.{}.{}:{}\"}},\n",
                    w(1),
                    w(2),
                    w(3),
                    (i * 37) % 100,
                    (i * 11) % 256,
                    (i * 29) % 256,
                    (i * 53) % 254 + 1,
                    1024 + (i * 7919) % 60000
                )
                .into_bytes()
            })
            .collect()
    }

    fn raw_deflate_size(level: u32, text: &[u8]) -> usize {
        let mut c = Compress::new(Compression::new(level), false);
        let mut out = Vec::with_capacity(text.len());
        let status = c.compress_vec(text, &mut out, FlushCompress::Finish).unwrap();
        assert_eq!(status, Status::StreamEnd);
        out.len()
    }

    #[test]
    fn level_one_is_zlibs_deflate_fast_not_static_codes() {
        let text = records();
        let mut enc = Encoder::new(1);
        let mut out = Vec::new();
        enc.write(&text, &mut out);
        enc.finish(&mut out);
        let quick = raw_deflate_size(1, &text);
        let fast = raw_deflate_size(2, &text);
        // nginx's level 1 answer: header, zlib-rs's deflate_fast stream, trailer
        assert_eq!(out.len(), 10 + fast + 8, "quick {quick}, fast {fast}");
        assert!(
            fast * 10 < quick * 9,
            "deflate_fast {fast} B is not clearly smaller than deflate_quick {quick} B"
        );
        assert_eq!(out[8], 4, "XFL still says level 1 (fastest), as zlib writes it");
    }

    #[test]
    fn accept_encoding_as_nginx_reads_it() {
        for yes in [
            "gzip",
            "gzip, deflate",
            "gzip,deflate",
            "deflate, gzip",
            "deflate,gzip",
            "GZIP",
            "gzip;q=0.5",
            "gzip; q=1",
            "gzip;q=1.000",
            "br, gzip ;q=0.001",
            "xgzip, gzip",
            "gzip;",
        ] {
            assert!(accepts(yes.as_bytes()), "{yes}");
        }
        for no in [
            "",
            "gzi",
            "deflate",
            "xgzip",
            "gzipx",
            "gzip;q=0",
            "gzip;q=0.000",
            "gzip;q=2",
            "gzip;q=1.5",
            "gzip;q=0.0001",
            "gzip;x=1",
            "gzip;q=",
            "x-gzip",
        ] {
            assert!(!accepts(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn weak_etags_as_nginx_makes_them() {
        let mut out = Vec::new();
        weak_etag(b"\"abc\"").unwrap().append(&mut out);
        assert_eq!(out, b"W/\"abc\"");
        out.clear();
        weak_etag(b"W/\"abc\"").unwrap().append(&mut out);
        assert_eq!(out, b"W/\"abc\"");
        assert_eq!(weak_etag(b"abc"), None);
        assert_eq!(weak_etag(b""), None);
        assert_eq!(weak_etag(b"W/"), None, "too short to be weak");
    }

    #[test]
    fn chunks_frame_data() {
        let mut out = Vec::new();
        append_chunk(&[7; 26], &mut out);
        append_chunk(b"", &mut out);
        assert_eq!(&out[..4], b"1a\r\n");
        assert_eq!(out.len(), 4 + 26 + 2);
    }
}
