//! `sticky cookie`'s `Set-Cookie`: `NAME=SID` and its attributes in nginx's order and spelling.

use crate::config::key::VarSource;
use crate::config::sticky::{CookieConf, EXPIRES_MAX};
use crate::http::pages::{append_decimal, format_http_date};

/// nginx's fixed attributes for `expires=max`.
const EXPIRES_MAX_TEXT: &[u8] = b"; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000";

/// Writes the attributes after the value into `out` (cleared): `; expires=...; max-age=N`, `; domain=D` (unless
/// it evaluates empty), `; httponly`, `; secure`, `; samesite=S` (a variable value that is not strict, lax or none
/// is `strict`; an empty one writes nothing), `; path=P`. `now`: seconds since the epoch.
pub fn attributes(c: &CookieConf, vars: &dyn VarSource, now: u64, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    out.clear();
    match c.expires {
        None => {}
        Some(EXPIRES_MAX) => out.extend_from_slice(EXPIRES_MAX_TEXT),
        Some(secs) => {
            out.extend_from_slice(b"; expires=");
            cookie_time(now.saturating_add(secs), out);
            out.extend_from_slice(b"; max-age=");
            append_decimal(out, secs);
        }
    }
    if let Some(d) = &c.domain {
        d.eval_into(vars, scratch);
        if !scratch.is_empty() {
            out.extend_from_slice(b"; domain=");
            out.extend_from_slice(scratch);
        }
    }
    if c.httponly {
        out.extend_from_slice(b"; httponly");
    }
    if c.secure {
        out.extend_from_slice(b"; secure");
    }
    if let Some(s) = &c.samesite {
        s.eval_into(vars, scratch);
        if !s.is_constant() && !scratch.is_empty() && !crate::config::sticky::samesite_valid(scratch) {
            scratch.clear();
            scratch.extend_from_slice(b"strict");
        }
        if !scratch.is_empty() {
            out.extend_from_slice(b"; samesite=");
            out.extend_from_slice(scratch);
        }
    }
    if let Some(p) = &c.path {
        out.extend_from_slice(b"; path=");
        out.extend_from_slice(p.as_bytes());
    }
}

/// `Set-Cookie: NAME=SID<suffix>\r\n` into `out` (cleared).
pub fn line(name: &str, sid: &[u8], suffix: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"Set-Cookie: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    out.extend_from_slice(sid);
    out.extend_from_slice(suffix);
    out.extend_from_slice(b"\r\n");
}

/// nginx's `ngx_http_cookie_time`: `Thu, 01-Jan-70 00:00:00 GMT`, the year in two digits up to 2037.
pub fn cookie_time(secs: u64, out: &mut Vec<u8>) {
    // "Thu, 01 Jan 1970 00:00:00 GMT"
    let d = format_http_date(secs);
    out.extend_from_slice(&d[..7]);
    out.push(b'-');
    out.extend_from_slice(&d[8..11]);
    out.push(b'-');
    let year = &d[12..16];
    let full = year > &b"2037"[..];
    out.extend_from_slice(if full { year } else { &year[2..] });
    out.extend_from_slice(&d[16..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::{KeyTemplate, Var};

    struct Args;
    impl VarSource for Args {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Arg(a) if a == "v" => out.extend_from_slice(b"foo"),
                Var::Arg(a) if a == "s" => out.extend_from_slice(b"Bogus"),
                _ => {}
            }
        }
    }

    fn conf() -> CookieConf {
        CookieConf {
            name: "sticky".into(),
            expires: None,
            domain: None,
            path: None,
            samesite: None,
            httponly: false,
            secure: false,
        }
    }

    fn attrs(c: &CookieConf, now: u64) -> String {
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        attributes(c, &Args, now, &mut scratch, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_attribute_in_nginx_order() {
        let c = CookieConf {
            expires: Some(3780),
            domain: Some(KeyTemplate::literal("example.com")),
            path: Some("/".into()),
            samesite: Some(KeyTemplate::literal("lax")),
            httponly: true,
            secure: true,
            ..conf()
        };
        assert_eq!(
            attrs(&c, 0),
            "; expires=Thu, 01-Jan-70 01:03:00 GMT; max-age=3780; domain=example.com; httponly; secure; \
             samesite=lax; path=/"
        );
        assert_eq!(attrs(&conf(), 0), "");
        let max = CookieConf {
            expires: Some(EXPIRES_MAX),
            ..conf()
        };
        assert_eq!(
            attrs(&max, 5),
            "; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000"
        );
    }

    #[test]
    fn variable_domain_and_samesite() {
        let c = CookieConf {
            domain: Some(KeyTemplate::compile("$arg_v$arg_none").unwrap()),
            samesite: Some(KeyTemplate::compile("$arg_s").unwrap()),
            ..conf()
        };
        assert_eq!(attrs(&c, 0), "; domain=foo; samesite=strict");
        let empty = CookieConf {
            domain: Some(KeyTemplate::compile("$arg_none").unwrap()),
            samesite: Some(KeyTemplate::compile("$arg_none").unwrap()),
            ..conf()
        };
        assert_eq!(attrs(&empty, 0), "");
    }

    #[test]
    fn years_after_2037_have_four_digits() {
        let mut out = Vec::new();
        cookie_time(2_145_916_555, &mut out);
        assert_eq!(out, b"Thu, 31-Dec-37 23:55:55 GMT");
        out.clear();
        cookie_time(2_145_916_555 + 86_400, &mut out);
        assert_eq!(out, b"Fri, 01-Jan-2038 23:55:55 GMT");
        let mut l = Vec::new();
        line("s", b"abc", b"; path=/", &mut l);
        assert_eq!(l, b"Set-Cookie: s=abc; path=/\r\n");
    }
}
