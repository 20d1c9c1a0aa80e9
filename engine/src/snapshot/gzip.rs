//! A location's gzip plan, `None` when neither `gzip` nor `gzip_static` is on (such a location pays nothing): the
//! request side of nginx's `ngx_http_gzip_ok` (decided once per request while routing), and the response side
//! of `ngx_http_gzip_header_filter` (status, type, encoding, length) and of `gzip_proxied` (the answer's
//! `Expires`, `Cache-Control`, `Last-Modified`, `ETag` for a request that came through a proxy).

use crate::config::gzip::{
    GzipConf, GzipStatic, GzipTypes, PROXIED_ANY, PROXIED_AUTH, PROXIED_EXPIRED, PROXIED_NO_CACHE, PROXIED_NO_ETAG,
    PROXIED_NO_LM, PROXIED_NO_STORE, PROXIED_OFF, PROXIED_PRIVATE,
};
use crate::config::regex::Regex;
use crate::http::keepalive::Browser;
use crate::http::request::RequestHead;

/// The compiled settings.
#[derive(Debug, Clone)]
pub struct GzipPlan {
    /// `gzip on`.
    pub enable: bool,
    types: GzipTypes,
    min_length: u64,
    /// `gzip_comp_level`.
    pub level: u32,
    /// `gzip_vary`.
    pub vary: bool,
    proxied: u16,
    http_11: bool,
    disable: Vec<Regex>,
    disable_msie6: bool,
    /// `gzip_static`.
    pub static_files: GzipStatic,
}

/// What the request says about compressing its answer (`ngx_http_gzip_ok` before the answer is known).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GzipAsk {
    /// Not for this request (no gzip in `Accept-Encoding`, an old HTTP version, a disabled browser, or no plan).
    #[default]
    No,
    Yes,
    /// It came through a proxy (`Via`) and `gzip_proxied` leaves it to the answer's headers.
    ByAnswer,
}

/// What `gzip_proxied` looks at in an answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnswerFacts<'a> {
    pub expires: Option<&'a [u8]>,
    pub date: Option<&'a [u8]>,
    pub cache_control: Option<&'a [u8]>,
    pub last_modified: bool,
    pub etag: bool,
    /// Seconds since the epoch (the date when the answer has no `Date`).
    pub now: u64,
}

impl GzipPlan {
    /// The plan of `conf`, or `None` when it turns nothing on.
    pub fn of(conf: &GzipConf) -> Option<GzipPlan> {
        conf.used().then(|| GzipPlan {
            enable: conf.enable,
            types: conf.types.clone(),
            min_length: conf.min_length,
            level: conf.comp_level,
            vary: conf.vary,
            proxied: conf.proxied,
            http_11: conf.http_11,
            disable: conf.disable.clone(),
            disable_msie6: conf.disable_msie6,
            static_files: conf.static_files,
        })
    }

    /// The request side of `ngx_http_gzip_ok`: `Accept-Encoding`, `gzip_disable msie6`, `gzip_http_version`,
    /// `Via` with `gzip_proxied off|any|auth`, and the `gzip_disable` regexes over `User-Agent`.
    pub fn ask(&self, head: &RequestHead<'_, '_>) -> GzipAsk {
        let Some(ae) = head.header("accept-encoding") else {
            return GzipAsk::No;
        };
        if !crate::http::gzip::accepts(ae) {
            return GzipAsk::No;
        }
        let ua = head.header("user-agent");
        if self.disable_msie6 && ua.is_some_and(|ua| Browser::of(ua).msie6) {
            return GzipAsk::No;
        }
        if self.http_11 && !head.version_11 {
            return GzipAsk::No;
        }
        let ask = match head.header("via") {
            None => GzipAsk::Yes,
            Some(_) if self.proxied & PROXIED_OFF != 0 => return GzipAsk::No,
            Some(_) if self.proxied & PROXIED_ANY != 0 => GzipAsk::Yes,
            Some(_) if self.proxied & PROXIED_AUTH != 0 && head.header("authorization").is_some() => GzipAsk::Yes,
            Some(_) => GzipAsk::ByAnswer,
        };
        if let Some(ua) = ua {
            if self.disable.iter().any(|re| re.is_match(ua)) {
                return GzipAsk::No;
            }
        }
        ask
    }

    /// Whether `ngx_http_gzip_header_filter` takes an answer (then `Vary` is sent with `gzip_vary on`, whether or
    /// not the request asked for gzip): status 200, 403 or 404, no `Content-Encoding`, not shorter than
    /// `gzip_min_length` when its length is known, and a type of `gzip_types` (`content_type` as sent, parameters
    /// after `;` ignored).
    pub fn takes(&self, status: u16, content_type: &[u8], encoded: bool, length: Option<u64>) -> bool {
        self.enable
            && matches!(status, 200 | 403 | 404)
            && !encoded
            && length.is_none_or(|n| n >= self.min_length)
            && self.type_matches(content_type)
    }

    fn type_matches(&self, content_type: &[u8]) -> bool {
        let list = match &self.types {
            GzipTypes::Any => return true,
            GzipTypes::List(l) => l,
        };
        let bare = content_type
            .iter()
            .position(|&c| c == b';')
            .map_or(content_type, |i| content_type.get(..i).unwrap_or_default());
        // nginx compares the type as the header has it up to `;` (`content_type_len`), case folded
        !bare.is_empty()
            && list
                .iter()
                .any(|t| t.as_bytes().eq_ignore_ascii_case(bare.trim_ascii_end()))
    }

    /// `ngx_http_gzip_ok` for a proxied request that `gzip_proxied` leaves to the answer's headers.
    pub fn by_answer(&self, a: &AnswerFacts<'_>) -> bool {
        let p = self.proxied;
        use crate::snapshot::headers::parse_http_date;
        if let Some(expires) = a.expires {
            if p & PROXIED_EXPIRED == 0 {
                return false;
            }
            let Some(expires) = parse_http_date(expires) else {
                return false;
            };
            let date = match a.date {
                Some(d) => match parse_http_date(d) {
                    Some(d) => d,
                    None => return false,
                },
                None => i64::try_from(a.now).unwrap_or(i64::MAX),
            };
            return expires < date;
        }
        if let Some(cc) = a.cache_control {
            return (p & PROXIED_NO_CACHE != 0 && cache_token(cc, b"no-cache"))
                || (p & PROXIED_NO_STORE != 0 && cache_token(cc, b"no-store"))
                || (p & PROXIED_PRIVATE != 0 && cache_token(cc, b"private"));
        }
        if p & PROXIED_NO_LM != 0 && a.last_modified {
            return false;
        }
        !(p & PROXIED_NO_ETAG != 0 && a.etag)
    }

    /// Whether an answer that [`GzipPlan::takes`] is compressed for a request that asked `ask`.
    pub fn compresses(&self, ask: GzipAsk, facts: impl FnOnce() -> bool) -> bool {
        match ask {
            GzipAsk::No => false,
            GzipAsk::Yes => true,
            GzipAsk::ByAnswer => facts(),
        }
    }
}

/// Whether a `Cache-Control` value lists `token` (a directive name, any case, with or without `=value`).
fn cache_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&c| c == b',').any(|t| {
        let name = t.split(|&c| c == b'=').next().unwrap_or_default();
        name.trim_ascii().eq_ignore_ascii_case(token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{parse_request, MAX_HEADERS};

    fn plan(f: impl FnOnce(&mut GzipConf)) -> GzipPlan {
        let mut c = GzipConf {
            enable: true,
            ..GzipConf::default()
        };
        f(&mut c);
        GzipPlan::of(&c).unwrap()
    }

    fn ask(p: &GzipPlan, head: &str) -> GzipAsk {
        let raw = format!("{head}\r\n\r\n");
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let h = parse_request(raw.as_bytes(), &mut hs).unwrap().unwrap();
        p.ask(&h)
    }

    #[test]
    fn off_is_no_plan() {
        assert!(GzipPlan::of(&GzipConf::default()).is_none());
        let st = GzipConf {
            static_files: GzipStatic::On,
            ..GzipConf::default()
        };
        assert!(!GzipPlan::of(&st).unwrap().enable);
    }

    #[test]
    fn request_side_as_nginx() {
        let p = plan(|_| {});
        let get = "GET / HTTP/1.1\r\nHost: h";
        assert_eq!(ask(&p, get), GzipAsk::No);
        assert_eq!(ask(&p, &format!("{get}\r\nAccept-Encoding: gzip")), GzipAsk::Yes);
        assert_eq!(
            ask(&p, "GET / HTTP/1.0\r\nAccept-Encoding: gzip"),
            GzipAsk::No,
            "gzip_http_version 1.1"
        );
        let v10 = plan(|c| c.http_11 = false);
        assert_eq!(ask(&v10, "GET / HTTP/1.0\r\nAccept-Encoding: gzip"), GzipAsk::Yes);
        let via = format!("{get}\r\nAccept-Encoding: gzip\r\nVia: 1.1 proxy");
        assert_eq!(ask(&p, &via), GzipAsk::No, "gzip_proxied off");
        assert_eq!(ask(&plan(|c| c.proxied = PROXIED_ANY), &via), GzipAsk::Yes);
        let auth = plan(|c| c.proxied = PROXIED_AUTH);
        assert_eq!(ask(&auth, &via), GzipAsk::ByAnswer);
        assert_eq!(ask(&auth, &format!("{via}\r\nAuthorization: Basic eA==")), GzipAsk::Yes);
        let msie = plan(|c| {
            c.disable_msie6 = true;
            c.disable = vec![crate::config::regex::compile("^curl", true).unwrap()];
        });
        let ae = format!("{get}\r\nAccept-Encoding: gzip");
        assert_eq!(
            ask(
                &msie,
                &format!("{ae}\r\nUser-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)")
            ),
            GzipAsk::No
        );
        assert_eq!(ask(&msie, &format!("{ae}\r\nUser-Agent: CURL/8")), GzipAsk::No);
        assert_eq!(ask(&msie, &format!("{ae}\r\nUser-Agent: Mozilla/5.0")), GzipAsk::Yes);
    }

    #[test]
    fn answer_side_as_nginx() {
        let p = plan(|c| c.types = GzipTypes::List(vec!["text/html".into(), "application/json".into()]));
        assert!(p.takes(200, b"text/html", false, None));
        assert!(p.takes(404, b"Application/JSON; charset=utf-8", false, Some(20)));
        assert!(!p.takes(200, b"text/html", false, Some(19)), "gzip_min_length 20");
        assert!(!p.takes(200, b"text/html", true, None), "already encoded");
        assert!(!p.takes(206, b"text/html", false, None));
        assert!(!p.takes(500, b"text/html", false, None));
        assert!(!p.takes(200, b"text/css", false, None));
        assert!(!p.takes(200, b"", false, None));
        assert!(plan(|c| c.types = GzipTypes::Any).takes(200, b"", false, None));
    }

    #[test]
    fn proxied_rules_read_the_answer() {
        let facts = AnswerFacts {
            now: 1_000_000_000,
            ..AnswerFacts::default()
        };
        let with = |bits: u16| plan(|c| c.proxied = bits);
        assert!(with(PROXIED_AUTH).by_answer(&facts), "nothing forbids it");
        let past = AnswerFacts {
            expires: Some(b"Thu, 01 Jan 1970 00:00:01 GMT"),
            ..facts
        };
        assert!(with(PROXIED_EXPIRED).by_answer(&past));
        assert!(!with(PROXIED_NO_CACHE).by_answer(&past), "Expires without `expired`");
        let future = AnswerFacts {
            expires: Some(b"Thu, 01 Jan 2037 00:00:00 GMT"),
            ..facts
        };
        assert!(!with(PROXIED_EXPIRED).by_answer(&future));
        let bad = AnswerFacts {
            expires: Some(b"0"),
            ..facts
        };
        assert!(!with(PROXIED_EXPIRED).by_answer(&bad));
        let cc = AnswerFacts {
            cache_control: Some(b"max-age=0, Private=\"x\""),
            ..facts
        };
        assert!(with(PROXIED_PRIVATE).by_answer(&cc));
        assert!(!with(PROXIED_NO_STORE).by_answer(&cc));
        let lm = AnswerFacts {
            last_modified: true,
            etag: true,
            ..facts
        };
        assert!(!with(PROXIED_NO_LM).by_answer(&lm));
        assert!(!with(PROXIED_NO_ETAG).by_answer(&lm));
        assert!(with(PROXIED_NO_ETAG).by_answer(&facts));
    }
}
