//! `sticky cookie|route|learn ...` in an http upstream block, read as `ngx_http_upstream_sticky_module` reads it,
//! with its messages.

use super::directive_err;
use super::vars::{Module, Vars};
use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::parser::Directive;
use crate::config::sticky::{samesite_valid, CookieConf, LearnConf, StickyConf, EXPIRES_MAX};
use crate::config::value;
use std::time::Duration;

/// The smallest learn zone nginx takes: 8 pages of 4 KiB.
const MIN_LEARN_ZONE: u64 = 8 * 4096;

/// `sticky ...` (the caller refuses a second one with "is duplicate").
pub(super) fn directive(d: &Directive, vars: &mut Vars) -> Result<StickyConf, ConfigError> {
    let mode = d.args.first().map_or("", String::as_str);
    let rest = d.args.get(1..).unwrap_or_default();
    match mode {
        "cookie" => cookie(d, vars, rest),
        "route" => {
            let mut lookup = Vec::new();
            for v in rest {
                if !v.starts_with('$') {
                    return Err(ConfigError::invalid(format!("invalid variable name \"{v}\""), &d.span));
                }
                lookup.push(vars.compile(v, Module::Http, &d.span)?);
            }
            Ok(StickyConf {
                lookup,
                cookie: None,
                learn: None,
            })
        }
        "learn" => learn(d, vars, rest),
        other => Err(unknown(other, d)),
    }
}

fn unknown(p: &str, d: &Directive) -> ConfigError {
    ConfigError::invalid(format!("unknown parameter \"{p}\""), &d.span)
}

/// `sticky cookie NAME [expires=] [domain=] [httponly] [samesite=] [secure] [path=]`.
fn cookie(d: &Directive, vars: &mut Vars, rest: &[String]) -> Result<StickyConf, ConfigError> {
    let name = rest.first().map_or("", String::as_str);
    if name.is_empty() {
        return Err(directive_err(d, "empty cookie name"));
    }
    let mut c = CookieConf {
        name: name.to_string(),
        expires: None,
        domain: None,
        path: None,
        samesite: None,
        httponly: false,
        secure: false,
    };
    let dup = |p: &str| directive_err(d, &format!("parameter \"{p}\" is duplicate"));
    let empty = |p: &str| directive_err(d, &format!("no value for \"{p}\""));
    for p in rest.iter().skip(1) {
        if let Some(v) = p.strip_prefix("domain=") {
            if c.domain.is_some() {
                return Err(dup("domain"));
            }
            if v.is_empty() {
                return Err(empty("domain"));
            }
            c.domain = Some(vars.compile(v, Module::Http, &d.span)?);
        } else if let Some(v) = p.strip_prefix("path=") {
            if c.path.is_some() {
                return Err(dup("path"));
            }
            if v.is_empty() {
                return Err(empty("path"));
            }
            c.path = Some(v.to_string());
        } else if let Some(v) = p.strip_prefix("expires=") {
            if c.expires.is_some() {
                return Err(dup("expires"));
            }
            let secs = match v {
                "max" => Some(EXPIRES_MAX),
                _ => value::parse_time(v, true),
            };
            c.expires = Some(secs.ok_or_else(|| directive_err(d, "invalid \"expires\" parameter value"))?);
        } else if p == "httponly" {
            if c.httponly {
                return Err(dup("httponly"));
            }
            c.httponly = true;
        } else if p == "secure" {
            if c.secure {
                return Err(dup("secure"));
            }
            c.secure = true;
        } else if let Some(v) = p.strip_prefix("samesite=") {
            if c.samesite.is_some() {
                return Err(dup("samesite"));
            }
            let t = vars.compile(v, Module::Http, &d.span)?;
            if t.is_constant() && !samesite_valid(v.as_bytes()) {
                return Err(directive_err(d, "invalid \"samesite\" parameter value"));
            }
            c.samesite = Some(t);
        } else {
            return Err(unknown(p, d));
        }
    }
    // `${...}` takes any cookie name, as nginx's `cookie_NAME` variable does
    let lookup = KeyTemplate::compile(&format!("${{cookie_{name}}}"))
        .map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
    Ok(StickyConf {
        lookup: vec![lookup],
        cookie: Some(c),
        learn: None,
    })
}

/// `sticky learn create=$V lookup=$V zone=NAME:SIZE [timeout=T] [header]` (nginx has no `sync`: it is an unknown
/// parameter there and here).
fn learn(d: &Directive, vars: &mut Vars, rest: &[String]) -> Result<StickyConf, ConfigError> {
    let mut zone: Option<(String, u64)> = None;
    let mut timeout: Option<u64> = None;
    let mut create: Vec<KeyTemplate> = Vec::new();
    let mut lookup: Vec<KeyTemplate> = Vec::new();
    let mut header = false;
    let err = |m: &str| directive_err(d, m);
    for p in rest {
        if let Some(v) = p.strip_prefix("zone=") {
            if zone.is_some() {
                return Err(err("duplicate zone"));
            }
            let (name, size) = v.split_once(':').ok_or_else(|| err("zone size is not specified"))?;
            if name.is_empty() {
                return Err(err("zone name is not specified"));
            }
            let size = value::parse_size(size).ok_or_else(|| err("invalid zone size"))?;
            if size < MIN_LEARN_ZONE {
                return Err(err("zone is too small"));
            }
            zone = Some((name.to_string(), size));
        } else if let Some(v) = p.strip_prefix("timeout=") {
            if timeout.is_some() {
                return Err(err("duplicate timeout"));
            }
            let ms = value::parse_time(v, false).filter(|ms| *ms != 0);
            timeout = Some(ms.ok_or_else(|| err("invalid timeout"))?);
        } else if let Some(v) = p.strip_prefix("create=") {
            if !v.starts_with('$') {
                return Err(err("missing variable in the \"create\" parameter"));
            }
            create.push(vars.compile(v, Module::Http, &d.span)?);
        } else if let Some(v) = p.strip_prefix("lookup=") {
            if !v.starts_with('$') {
                return Err(err("missing variable in the \"lookup\" parameter"));
            }
            lookup.push(vars.compile(v, Module::Http, &d.span)?);
        } else if p == "header" {
            header = true;
        } else {
            return Err(unknown(p, d));
        }
    }
    if lookup.is_empty() {
        return Err(err("\"lookup\" parameter is not specified"));
    }
    if create.is_empty() {
        return Err(err("\"create\" parameter is not specified"));
    }
    let Some((zone, size)) = zone else {
        return Err(err("\"zone\" parameter is not specified"));
    };
    Ok(StickyConf {
        lookup,
        cookie: None,
        learn: Some(LearnConf {
            create,
            zone,
            size,
            timeout: Duration::from_millis(timeout.unwrap_or(600_000)),
            header,
        }),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::sticky::StickyConf;
    use std::path::Path;

    /// The `sticky` of upstream `u` with `block`'s lines (and two servers), or the error line.
    fn sticky(block: &str) -> Result<Option<StickyConf>, String> {
        let text = format!(
            "events {{}}\nhttp {{\nupstream u {{\nserver 127.0.0.1:1 route=a;\nserver 127.0.0.1:2;\n{block}\n}}\n\
             upstream v {{ server 127.0.0.1:3; sticky learn zone=z:1m create=$upstream_cookie_s lookup=$cookie_s; }}\n}}\n"
        );
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let u = c.http.as_ref().and_then(|h| h.upstream("u")).ok_or("no upstream")?;
        Ok(u.sticky.as_deref().cloned())
    }

    fn err(block: &str) -> String {
        sticky(block).expect_err("refused")
    }

    #[test]
    fn cookie_parameters() {
        let s = sticky("sticky cookie srv expires=1h domain=$host path=/ httponly secure samesite=Lax;")
            .expect("valid")
            .expect("sticky");
        let c = s.cookie.expect("cookie");
        assert_eq!(
            (c.name.as_str(), c.expires, c.path.as_deref()),
            ("srv", Some(3600), Some("/"))
        );
        assert!(c.httponly && c.secure && c.domain.is_some() && c.samesite.is_some());
        assert_eq!(s.lookup[0].raw(), "${cookie_srv}");
        let max = sticky("sticky cookie srv expires=max;")
            .expect("valid")
            .expect("sticky");
        assert_eq!(
            max.cookie.and_then(|c| c.expires),
            Some(crate::config::sticky::EXPIRES_MAX)
        );
    }

    #[test]
    fn nginx_s_messages() {
        let cases = [
            (
                "sticky cookie \"\";",
                "[emerg] \"sticky\" directive empty cookie name in /t/n.conf:6",
            ),
            (
                "sticky cookie s httponly httponly;",
                "[emerg] \"sticky\" directive parameter \"httponly\" is duplicate in /t/n.conf:6",
            ),
            (
                "sticky cookie s domain=;",
                "[emerg] \"sticky\" directive no value for \"domain\" in /t/n.conf:6",
            ),
            (
                "sticky cookie s expires=1x;",
                "[emerg] \"sticky\" directive invalid \"expires\" parameter value in /t/n.conf:6",
            ),
            (
                "sticky cookie s samesite=bad;",
                "[emerg] \"sticky\" directive invalid \"samesite\" parameter value in /t/n.conf:6",
            ),
            (
                "sticky cookie s foo;",
                "[emerg] unknown parameter \"foo\" in /t/n.conf:6",
            ),
            ("sticky hash x;", "[emerg] unknown parameter \"hash\" in /t/n.conf:6"),
            (
                "sticky route arg;",
                "[emerg] invalid variable name \"arg\" in /t/n.conf:6",
            ),
            (
                "sticky route $arg_a; sticky route $arg_b;",
                "[emerg] \"sticky\" directive is duplicate in /t/n.conf:6",
            ),
            (
                "sticky cookie;",
                "[emerg] invalid number of arguments in \"sticky\" directive in /t/n.conf:6",
            ),
            (
                "sticky learn create=$upstream_cookie_s zone=y:1m;",
                "[emerg] \"sticky\" directive \"lookup\" parameter is not specified in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s zone=y:1m;",
                "[emerg] \"sticky\" directive \"create\" parameter is not specified in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s create=$upstream_cookie_s;",
                "[emerg] \"sticky\" directive \"zone\" parameter is not specified in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=y:1k;",
                "[emerg] \"sticky\" directive zone is too small in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=y;",
                "[emerg] \"sticky\" directive zone size is not specified in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=cookie_s create=$upstream_cookie_s zone=y:1m;",
                "[emerg] \"sticky\" directive missing variable in the \"lookup\" parameter in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=y:1m timeout=0;",
                "[emerg] \"sticky\" directive invalid timeout in /t/n.conf:6",
            ),
            (
                "sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=y:1m sync;",
                "[emerg] unknown parameter \"sync\" in /t/n.conf:6",
            ),
        ];
        for (block, want) in cases {
            assert_eq!(err(block), want, "{block}");
        }
    }

    #[test]
    fn a_learn_zone_serves_one_upstream() {
        // `v` (after `u` in the file) takes zone z
        let e = err("sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=z:1m;");
        assert!(e.contains("sticky zone \"z\" is already used in upstream \"u\""), "{e}");
        let s = sticky("sticky learn lookup=$cookie_s create=$upstream_cookie_s zone=y:64k timeout=2 header;")
            .expect("valid")
            .expect("sticky");
        let l = s.learn.expect("learn");
        assert_eq!(
            (l.zone.as_str(), l.size, l.timeout.as_secs(), l.header),
            ("y", 65536, 2, true)
        );
    }

    #[test]
    fn routes_and_a_method_after_sticky() {
        let e = sticky("sticky route $arg_a;").expect("valid");
        assert!(e.is_some());
        // nginx: a method after `sticky` replaces its init, with the warning
        assert_eq!(sticky("sticky route $arg_a; least_conn;"), Ok(None));
        assert_eq!(
            sticky("least_conn; sticky route $arg_a;").map(|s| s.is_some()),
            Ok(true)
        );
    }
}
