//! `error_page`, `recursive_error_pages`, `proxy_intercept_errors` and `proxy_ignore_headers` at one http, server
//! or location level, read as `ngx_http_core_error_page` and the flag and bitmask slots read them, and merged child
//! over parent as nginx merges them (a level with its own `error_page` lines inherits none).

use super::vars::{Module, Vars};
use super::{arg, flag_slot};
use crate::config::error::ConfigError;
use crate::config::error_pages::{ErrorPage, ErrorPagesConf, Overwrite};
use crate::config::parser::Directive;
use crate::config::value;

/// The error page settings one level sets.
#[derive(Debug, Clone, Default)]
pub struct ErrorPagesLayer {
    pages: Option<Vec<ErrorPage>>,
    recursive: Option<bool>,
    intercept: Option<bool>,
    /// `proxy_ignore_headers`: whether it names `X-Accel-Redirect`, `X-Accel-Charset`, `X-Accel-Buffering`.
    ignore_accel: Option<(bool, bool, bool)>,
}

/// The values `proxy_ignore_headers` takes (nginx's `ngx_http_upstream_ignore_headers_masks`). Only
/// `X-Accel-Redirect`, `X-Accel-Charset` and `X-Accel-Buffering` change what corelb does: it caches nothing and does
/// not act on the others.
const IGNORABLE: &[&str] = &[
    "X-Accel-Redirect",
    "X-Accel-Expires",
    "X-Accel-Limit-Rate",
    "X-Accel-Buffering",
    "X-Accel-Charset",
    "Expires",
    "Cache-Control",
    "Set-Cookie",
    "Vary",
];

impl ErrorPagesLayer {
    /// Reads `d` if it is one of these directives; `Ok(false)` when it is not.
    pub fn directive(&mut self, vars: &mut Vars, d: &Directive) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "error_page" => {
                let lines = error_page(vars, d)?;
                self.pages.get_or_insert_with(Vec::new).extend(lines);
            }
            "recursive_error_pages" => flag_slot(&mut self.recursive, d)?,
            "proxy_intercept_errors" => flag_slot(&mut self.intercept, d)?,
            "proxy_ignore_headers" => self.ignore_accel = Some(ignore_headers(self.ignore_accel, d)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &ErrorPagesLayer) -> ErrorPagesLayer {
        ErrorPagesLayer {
            pages: self.pages.clone().or_else(|| parent.pages.clone()),
            recursive: self.recursive.or(parent.recursive),
            intercept: self.intercept.or(parent.intercept),
            ignore_accel: self.ignore_accel.or(parent.ignore_accel),
        }
    }

    /// The settings with nginx's defaults for what no level set.
    pub fn conf(&self) -> ErrorPagesConf {
        ErrorPagesConf {
            pages: self.pages.clone().unwrap_or_default(),
            recursive: self.recursive.unwrap_or(false),
            intercept: self.intercept.unwrap_or(false),
            accel_redirect: !self.ignore_accel.is_some_and(|i| i.0),
            accel_charset: !self.ignore_accel.is_some_and(|i| i.1),
            accel_buffering: !self.ignore_accel.is_some_and(|i| i.2),
        }
    }
}

/// `proxy_ignore_headers FIELD ...` (nginx's bitmask slot: each value one of [`IGNORABLE`], without case; the
/// lines of a level add up): whether this line or the level's earlier ones name `X-Accel-Redirect`, and
/// `X-Accel-Charset`.
fn ignore_headers(set: Option<(bool, bool, bool)>, d: &Directive) -> Result<(bool, bool, bool), ConfigError> {
    let (mut redirect, mut charset, mut buffering) = set.unwrap_or((false, false, false));
    for v in &d.args {
        if !IGNORABLE.iter().any(|n| n.eq_ignore_ascii_case(v)) {
            return Err(invalid(v, d));
        }
        redirect |= v.eq_ignore_ascii_case("X-Accel-Redirect");
        charset |= v.eq_ignore_ascii_case("X-Accel-Charset");
        buffering |= v.eq_ignore_ascii_case("X-Accel-Buffering");
    }
    Ok((redirect, charset, buffering))
}

fn invalid(v: &str, d: &Directive) -> ConfigError {
    ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)
}

/// `error_page CODE ... [=[RESPONSE]] URI`: one page per status, in nginx's order of checks.
fn error_page(vars: &mut Vars, d: &Directive) -> Result<Vec<ErrorPage>, ConfigError> {
    let n = d.args.len();
    let last = arg(d, n.saturating_sub(1));
    let before = arg(d, n.saturating_sub(2));
    let (overwrite, codes) = match before.strip_prefix('=') {
        Some(_) if n == 2 => return Err(invalid(before, d)),
        Some("") => (Overwrite::Answer, n - 2),
        Some(code) => {
            let c = value::atoi(code).ok_or_else(|| invalid(before, d))?;
            let c = match u16::try_from(c) {
                Ok(0) => Overwrite::Answer,
                Ok(c) if c <= 999 => Overwrite::Code(c),
                _ => {
                    let msg = format!("\"error_page\" status \"{before}\" above 999 is not supported by corelb");
                    return Err(ConfigError::invalid(msg, &d.span));
                }
            };
            (c, n - 2)
        }
        None => (Overwrite::Keep, n - 1),
    };
    let template = vars.compile(last, Module::Http, &d.span)?;
    let literal = !last.contains('$');
    let (value, args) = match last.split_once('?') {
        Some((path, args)) if literal && path.starts_with('/') => {
            (vars.compile(path, Module::Http, &d.span)?, Some(args.to_string()))
        }
        _ => (template, None),
    };
    let mut pages = Vec::with_capacity(codes);
    for code in d.args.iter().take(codes) {
        let status = value::atoi(code)
            .filter(|&s| s != 499)
            .ok_or_else(|| invalid(code, d))?;
        if !(300..=599).contains(&status) {
            let msg = format!("value \"{code}\" must be between 300 and 599");
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let status = u16::try_from(status).unwrap_or(500);
        let overwrite = match (overwrite, status) {
            // nginx's 494 (header too large) and the TLS ones answer as 400
            (Overwrite::Keep, 494..=497) => Overwrite::Code(400),
            (o, _) => o,
        };
        pages.push(ErrorPage {
            status,
            overwrite,
            value: value.clone(),
            args: args.clone(),
        });
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str, args: &[&str]) -> Directive {
        Directive::at_t_conf(name, args)
    }

    fn read(lines: &[(&str, &[&str])]) -> Result<ErrorPagesLayer, String> {
        let mut l = ErrorPagesLayer::default();
        let mut vars = Vars::default();
        for (name, args) in lines {
            match l.directive(&mut vars, &d(name, args)) {
                Ok(true) => {}
                Ok(false) => return Err(format!("{name} not read")),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(l)
    }

    fn pages(c: &ErrorPagesConf) -> Vec<String> {
        c.pages
            .iter()
            .map(|p| format!("{} {:?} {} {:?}", p.status, p.overwrite, p.value.raw(), p.args))
            .collect()
    }

    #[test]
    fn lines_as_nginx_reads_them() {
        let l = read(&[
            ("error_page", &["404", "500", "/x?a=1"]),
            ("error_page", &["502", "=", "@fallback"]),
            ("error_page", &["403", "=200", "http://e.com/$uri"]),
            ("error_page", &["497", "https://e.com/"]),
            ("error_page", &["400", "=0", "/$uri?b"]),
        ])
        .unwrap();
        assert_eq!(
            pages(&l.conf()),
            [
                "404 Keep /x Some(\"a=1\")",
                "500 Keep /x Some(\"a=1\")",
                "502 Answer @fallback None",
                "403 Code(200) http://e.com/$uri None",
                "497 Code(400) https://e.com/ None",
                "400 Answer /$uri?b None",
            ]
        );
        assert_eq!(l.conf().page(500).map(|p| p.value.raw()), Some("/x"));
        assert!(l.conf().page(501).is_none());
    }

    /// nginx 1.22's messages (`nginx -t`), for the same lines.
    #[test]
    fn refusals_as_nginx() {
        let at = " in t.conf:3";
        for (args, msg) in [
            (&["404", "=abc", "/x"][..], "invalid value \"=abc\""),
            (&["=", "/x"], "invalid value \"=\""),
            (&["abc", "/x"], "invalid value \"abc\""),
            (&["299", "/x"], "value \"299\" must be between 300 and 599"),
            (&["600", "/x"], "value \"600\" must be between 300 and 599"),
            (&["499", "/x"], "invalid value \"499\""),
            (&["404", "=-1", "/x"], "invalid value \"=-1\""),
            (&["-5", "/x"], "invalid value \"-5\""),
        ] {
            assert_eq!(
                read(&[("error_page", args)]).unwrap_err(),
                format!("[emerg] {msg}{at}"),
                "{args:?}"
            );
        }
        assert_eq!(
            read(&[("recursive_error_pages", &["yes"])]).unwrap_err(),
            format!("[emerg] invalid value \"yes\" in \"recursive_error_pages\" directive, it must be \"on\" or \"off\"{at}")
        );
        assert_eq!(
            read(&[("proxy_intercept_errors", &["on"]), ("proxy_intercept_errors", &["on"])]).unwrap_err(),
            format!("[emerg] \"proxy_intercept_errors\" directive is duplicate{at}")
        );
    }

    /// `proxy_ignore_headers`: nginx's values without case, lines adding up, a level's own replacing the parent's.
    #[test]
    fn ignore_headers_as_nginx() {
        assert!(read(&[]).unwrap().conf().accel_redirect, "followed by default");
        let l = read(&[("proxy_ignore_headers", &["Expires", "x-accel-redirect"])]).unwrap();
        assert!(!l.conf().accel_redirect);
        let l = read(&[
            ("proxy_ignore_headers", &["Vary"]),
            ("proxy_ignore_headers", &["X-Accel-Redirect"]),
        ])
        .unwrap();
        assert!(!l.conf().accel_redirect);
        let own = read(&[("proxy_ignore_headers", &["Set-Cookie"])]).unwrap();
        assert!(
            own.over(&l).conf().accel_redirect,
            "a level's own line replaces the inherited ones"
        );
        assert!(!read(&[]).unwrap().over(&l).conf().accel_redirect);
        assert_eq!(
            read(&[("proxy_ignore_headers", &["X-Accel-Redirect", "Location"])]).unwrap_err(),
            "[emerg] invalid value \"Location\" in t.conf:3"
        );
    }

    /// A level with its own `error_page` lines inherits none; the flags inherit one by one.
    #[test]
    fn inheritance_replaces_the_lines() {
        let http = read(&[("error_page", &["404", "/h"]), ("recursive_error_pages", &["on"])]).unwrap();
        let server = read(&[("proxy_intercept_errors", &["on"])]).unwrap();
        let own = read(&[("error_page", &["500", "/l"])]).unwrap();
        let at_server = server.over(&http);
        let c = at_server.conf();
        assert_eq!(pages(&c), ["404 Keep /h None"]);
        assert!(c.recursive && c.intercept);
        let c = own.over(&at_server).conf();
        assert_eq!(pages(&c), ["500 Keep /l None"]);
        assert!(c.recursive && c.intercept);
        assert_eq!(ErrorPagesLayer::default().conf(), ErrorPagesConf::default());
    }
}
