//! The gzip settings of one location, as nginx's gzip filter, gzip_static module and core module (`gzip_vary`,
//! `gzip_proxied`, `gzip_http_version`, `gzip_disable`) merge them.

use super::regex::Regex;

/// `gzip_proxied` values and their bits (nginx's `ngx_http_gzip_proxied_mask`).
pub const PROXIED: &[(&str, u16)] = &[
    ("off", PROXIED_OFF),
    ("expired", PROXIED_EXPIRED),
    ("no-cache", PROXIED_NO_CACHE),
    ("no-store", PROXIED_NO_STORE),
    ("private", PROXIED_PRIVATE),
    ("no_last_modified", PROXIED_NO_LM),
    ("no_etag", PROXIED_NO_ETAG),
    ("auth", PROXIED_AUTH),
    ("any", PROXIED_ANY),
];
pub const PROXIED_OFF: u16 = 1 << 1;
pub const PROXIED_EXPIRED: u16 = 1 << 2;
pub const PROXIED_NO_CACHE: u16 = 1 << 3;
pub const PROXIED_NO_STORE: u16 = 1 << 4;
pub const PROXIED_PRIVATE: u16 = 1 << 5;
pub const PROXIED_NO_LM: u16 = 1 << 6;
pub const PROXIED_NO_ETAG: u16 = 1 << 7;
pub const PROXIED_AUTH: u16 = 1 << 8;
pub const PROXIED_ANY: u16 = 1 << 9;

/// `gzip_types`: the MIME types compressed (lower case, `text/html` always among them), or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GzipTypes {
    Any,
    List(Vec<String>),
}

impl Default for GzipTypes {
    fn default() -> Self {
        GzipTypes::List(vec!["text/html".into()])
    }
}

/// `gzip_static off|on|always`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GzipStatic {
    #[default]
    Off,
    /// `FILE.gz` is sent to a client that takes gzip (as `gzip on` decides it for the request).
    On,
    /// `FILE.gz` is sent to every client.
    Always,
}

/// `gzip_buffers NUMBER SIZE` (nginx's default `32 4k`): read and kept; corelb's encoder sizes its output as
/// docs/directives.md says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GzipBuffers {
    pub number: usize,
    pub size: usize,
}

impl Default for GzipBuffers {
    fn default() -> Self {
        GzipBuffers { number: 32, size: 4096 }
    }
}

/// The merged gzip settings with nginx's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GzipConf {
    /// `gzip on`.
    pub enable: bool,
    pub types: GzipTypes,
    /// `gzip_min_length` (20): a response with a smaller `Content-Length` is sent as it is.
    pub min_length: u64,
    /// `gzip_comp_level` (1).
    pub comp_level: u32,
    /// `gzip_vary` (off).
    pub vary: bool,
    /// `gzip_proxied` bits (`off`).
    pub proxied: u16,
    /// `gzip_http_version 1.1` (the default): HTTP/1.0 requests get no gzip.
    pub http_11: bool,
    /// `gzip_disable` regexes (caseless) over `User-Agent`.
    pub disable: Vec<Regex>,
    /// `gzip_disable msie6`.
    pub disable_msie6: bool,
    pub buffers: GzipBuffers,
    pub static_files: GzipStatic,
}

impl Default for GzipConf {
    fn default() -> Self {
        GzipConf {
            enable: false,
            types: GzipTypes::default(),
            min_length: 20,
            comp_level: 1,
            vary: false,
            proxied: PROXIED_OFF,
            http_11: true,
            disable: Vec::new(),
            disable_msie6: false,
            buffers: GzipBuffers::default(),
            static_files: GzipStatic::Off,
        }
    }
}

impl GzipConf {
    /// Whether any part of gzip is on (`gzip` or `gzip_static`): otherwise the location pays nothing for it.
    pub fn used(&self) -> bool {
        self.enable || self.static_files != GzipStatic::Off
    }
}
