//! `sticky` (nginx 1.29.6+'s `ngx_http_upstream_sticky_module`) as read from an upstream block: which variables
//! name the server (or the session), and the cookie or the learn zone.

use super::key::KeyTemplate;
use std::time::Duration;

/// nginx's `expires=max`: the cookie gets nginx's fixed far-future date.
pub const EXPIRES_MAX: u64 = 2_145_916_555;

/// `sticky cookie|route|learn ...` of one upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct StickyConf {
    /// The variables read when a request starts, first non-empty wins: `$cookie_NAME` for `cookie`, the listed
    /// ones for `route`, `lookup=` for `learn`.
    pub lookup: Vec<KeyTemplate>,
    /// `sticky cookie NAME ...`: the cookie written with each answer.
    pub cookie: Option<CookieConf>,
    /// `sticky learn ...`: the sessions zone.
    pub learn: Option<LearnConf>,
}

/// `sticky cookie NAME [expires=] [domain=] [httponly] [samesite=] [secure] [path=]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CookieConf {
    pub name: String,
    /// Seconds; [`EXPIRES_MAX`] for `max`; `None`: a session cookie.
    pub expires: Option<u64>,
    /// A complex value; an empty result writes no `domain`.
    pub domain: Option<KeyTemplate>,
    /// The path as written (`; path=` is added when the cookie is written).
    pub path: Option<String>,
    /// A complex value: `strict`, `lax` or `none` (any case); with variables, another value is `strict`, an
    /// empty one writes nothing.
    pub samesite: Option<KeyTemplate>,
    pub httponly: bool,
    pub secure: bool,
}

/// `sticky learn create=$V... lookup=$V... zone=NAME:SIZE [timeout=T] [header]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnConf {
    /// Read when the answer is in (`$upstream_cookie_*` most often), first non-empty wins.
    pub create: Vec<KeyTemplate>,
    pub zone: String,
    pub size: u64,
    /// Default 10 minutes.
    pub timeout: Duration,
    /// `header`: learn once the answer's head is read, not when the request ends.
    pub header: bool,
}

/// nginx's `samesite` values, in any case.
pub fn samesite_valid(v: &[u8]) -> bool {
    [&b"strict"[..], b"lax", b"none"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(v))
}
