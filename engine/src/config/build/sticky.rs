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
