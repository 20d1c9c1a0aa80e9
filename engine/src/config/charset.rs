//! The charset module's settings as nginx's `ngx_http_charset_filter_module` keeps them: each location's
//! `charset`, `source_charset`, `override_charset` and `charset_types`, and the http block's charsets (every name
//! the block mentions, in the order nginx registers them) with the recoding tables of its `charset_map` blocks.

use super::key::KeyTemplate;

/// nginx's default `charset_types`.
pub const DEFAULT_TYPES: &[&str] = &[
    "text/html",
    "text/xml",
    "text/plain",
    "text/vnd.wap.wml",
    "application/javascript",
    "application/rss+xml",
];

/// A `charset` or `source_charset` value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CharsetSpec {
    /// `off` (the default of both).
    #[default]
    Off,
    /// A name, as written.
    Name(String),
    /// `$variable`: the name is the variable's value per request.
    Var(KeyTemplate),
}

/// `charset_types`: the MIME types (lower case) that get a charset, or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CharsetTypes {
    Any,
    List(Vec<String>),
}

impl Default for CharsetTypes {
    fn default() -> Self {
        CharsetTypes::List(DEFAULT_TYPES.iter().map(|t| t.to_string()).collect())
    }
}

impl CharsetTypes {
    /// Whether `bare` (a type without parameters, as nginx's `content_type_len` cuts it) is in the list; nginx
    /// compares it case folded.
    pub fn matches(&self, bare: &[u8]) -> bool {
        match self {
            CharsetTypes::Any => true,
            CharsetTypes::List(l) => l.iter().any(|t| t.as_bytes().eq_ignore_ascii_case(bare)),
        }
    }
}

/// The merged settings of one location (or server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CharsetConf {
    pub charset: CharsetSpec,
    pub source: CharsetSpec,
    /// `override_charset on`: an answer that names its charset is recoded too.
    pub override_charset: bool,
    pub types: CharsetTypes,
}

impl CharsetConf {
    /// Whether the filter can change anything in this location's answers by itself (`charset` not `off`); an
    /// upstream's `X-Accel-Charset` can, whatever the location says, when the block knows any charset.
    pub fn on(&self) -> bool {
        self.charset != CharsetSpec::Off
    }
}

/// One recoding table, from one charset to another (nginx's `src2dst` or `dst2src`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recode {
    /// Single-byte to single-byte: each byte's replacement.
    Byte(Box<[u8; 256]>),
    /// Single-byte to UTF-8: each byte's sequence (length 1 to 3, then the bytes).
    ToUtf8(Box<[[u8; 4]; 256]>),
    /// UTF-8 to single-byte: pages of 256 code points (`code >> 8`), each code point's byte (0: none; it is
    /// written as an HTML entity `&#N;`).
    FromUtf8(Box<[Option<Box<[u8; 256]>>; 256]>),
}

/// One charset of the http block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charset {
    /// The spelling nginx registered first (names compare without case).
    pub name: String,
    pub utf8: bool,
}

/// The http block's charsets and recoding tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Charsets {
    pub list: Vec<Charset>,
    /// `(from, to, table)`: both directions of each `charset_map`.
    pub tables: Vec<(usize, usize, Recode)>,
}

impl Charsets {
    /// `ngx_http_get_charset`: the index of the charset called `name` (without case).
    pub fn find(&self, name: &[u8]) -> Option<usize> {
        self.list
            .iter()
            .position(|c| c.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// `ngx_http_add_charset`: the index of `name`, registered when new.
    pub fn add(&mut self, name: &str) -> usize {
        if let Some(i) = self.find(name.as_bytes()) {
            return i;
        }
        self.list.push(Charset {
            name: name.to_string(),
            utf8: name.eq_ignore_ascii_case("utf-8"),
        });
        self.list.len() - 1
    }

    /// The table from `from` to `to`, if a `charset_map` joins them.
    pub fn table(&self, from: usize, to: usize) -> Option<&Recode> {
        self.tables.iter().find(|t| t.0 == from && t.1 == to).map(|t| &t.2)
    }

    /// Whether the block knows any charset (else an `X-Accel-Charset` names none, and no plan is needed).
    pub fn any(&self) -> bool {
        !self.list.is_empty()
    }
}

/// nginx's "incomplete sequence" answer of [`utf8_decode`].
pub const UTF8_INCOMPLETE: u32 = 0xffff_fffe;
/// nginx's "invalid sequence" answer of [`utf8_decode`].
pub const UTF8_INVALID: u32 = 0xffff_ffff;

/// `ngx_utf8_decode` of the sequence at the start of `p` (not empty, its first byte 0x80 or more): the code point
/// (which may be above U+10FFFF) and the bytes taken, or [`UTF8_INCOMPLETE`] with none taken when `p` ends inside
/// the sequence, or [`UTF8_INVALID`] with the bytes nginx steps over (the first alone for a bad first byte, up
/// to a bad continuation byte included, all of an overlong form).
pub fn utf8_decode(p: &[u8]) -> (u32, usize) {
    let Some(&first) = p.first() else {
        return (UTF8_INCOMPLETE, 0);
    };
    let u = u32::from(first);
    let (mut u, valid, len) = match u {
        0xf8.. => return (UTF8_INVALID, 1),
        0xf0.. => (u & 0x07, 0xffff, 3),
        0xe0.. => (u & 0x0f, 0x7ff, 2),
        0xc2.. => (u & 0x1f, 0x7f, 1),
        _ => return (UTF8_INVALID, 1),
    };
    if p.len() - 1 < len {
        return (UTF8_INCOMPLETE, 0);
    }
    for (k, &c) in p.iter().skip(1).take(len).enumerate() {
        if c < 0x80 {
            return (UTF8_INVALID, k + 2);
        }
        u = (u << 6) | (u32::from(c) & 0x3f);
    }
    if u > valid {
        (u, len + 1)
    } else {
        (UTF8_INVALID, len + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_decode_as_nginx() {
        assert_eq!(utf8_decode("é".as_bytes()), (0xe9, 2));
        assert_eq!(utf8_decode("€x".as_bytes()), (0x20ac, 3));
        assert_eq!(utf8_decode("😀".as_bytes()), (0x1f600, 4));
        assert_eq!(utf8_decode(&[0xe2, 0x82]), (UTF8_INCOMPLETE, 0));
        assert_eq!(utf8_decode(&[0xc0, 0x80]), (UTF8_INVALID, 1));
        assert_eq!(utf8_decode(&[0xe2, 0x41, 0x41]), (UTF8_INVALID, 2));
        assert_eq!(utf8_decode(&[0xe0, 0x80, 0x80]), (UTF8_INVALID, 3), "overlong");
        assert_eq!(
            utf8_decode(&[0xf4, 0x90, 0x80, 0x80]),
            (0x110000, 4),
            "above U+10FFFF is returned"
        );
        assert_eq!(utf8_decode(&[0xff]), (UTF8_INVALID, 1));
    }

    #[test]
    fn charsets_register_once_without_case() {
        let mut c = Charsets::default();
        assert_eq!((c.add("KOI8-R"), c.add("koi8-r"), c.add("utf-8")), (0, 0, 1));
        assert_eq!(c.list[0].name, "KOI8-R");
        assert!(c.list[1].utf8 && !c.list[0].utf8);
        assert_eq!(c.find(b"Utf-8"), Some(1));
        assert!(!CharsetTypes::default().matches(b"text/foo"));
        assert!(CharsetTypes::Any.matches(b""));
    }
}
