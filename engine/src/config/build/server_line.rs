//! One `server` line of an upstream block or of a state file: its address (resolved at load) and its parameters,
//! with nginx's checks and messages.

use super::arg;
use super::vars::Module;
use crate::config::error::ConfigError;
use crate::config::model::{ServerLine, Span};
use crate::config::parser::Directive;
use crate::config::url::{self, UrlOpts};
use crate::config::value;

/// nginx's message for a `server` parameter the upstream's balancing method does not support.
pub(super) fn unsupported_by_method(param: &str, at: &Span) -> ConfigError {
    ConfigError::invalid(format!("balancing method does not support parameter \"{param}\""), at)
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [max_conns=N] [slow_start=T] [backup] [down] [drain]
/// [route=ID] [resolve] [service=NAME] [agent_port=N [agent_inter=T] [agent_send=S]]` in an upstream block or a
/// state file (`drain` and `route`, http only; the agent parameters are corelb's). A name with `resolve` is not
/// resolved here: the line keeps it for the run-time resolver (nginx's checks of `service=` in its order).
pub(super) fn server_line(d: &Directive, module: Module, allow_backup: bool) -> Result<ServerLine, ConfigError> {
    let text = arg(d, 0);
    let mut line = ServerLine {
        span: d.span.clone(),
        ..ServerLine::new(text, Vec::new())
    };
    let invalid = |p: &str| ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
    let mut agent = super::agent::AgentParams::default();
    let mut resolve = false;
    let mut service: Option<String> = None;
    for p in d.args.iter().skip(1) {
        if p == "resolve" {
            resolve = true;
            continue;
        }
        if let Some(v) = p.strip_prefix("service=") {
            if v.is_empty() {
                return Err(ConfigError::invalid("service is empty", &d.span));
            }
            service = Some(v.to_string());
            continue;
        }
        if let Some(read) = agent.read(p, &d.span) {
            read?;
            continue;
        }
        let number = |v: &str| {
            value::atoi(v)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid(p))
        };
        if let Some(v) = p.strip_prefix("weight=") {
            line.weight = number(v).and_then(|w| if w == 0 { Err(invalid(p)) } else { Ok(w) })?;
        } else if let Some(v) = p.strip_prefix("max_conns=") {
            line.max_conns = number(v)?;
        } else if let Some(v) = p.strip_prefix("max_fails=") {
            line.max_fails = number(v)?;
        } else if let Some(v) = p.strip_prefix("fail_timeout=") {
            line.fail_timeout = value::parse_sec(v).ok_or_else(|| invalid(p))?;
        } else if let Some(v) = p.strip_prefix("slow_start=") {
            // nginx Plus: the methods that cannot take `backup` (hash, ip_hash, random) cannot take it either.
            if !allow_backup {
                return Err(unsupported_by_method(p, &d.span));
            }
            line.slow_start = value::parse_sec(v).ok_or_else(|| invalid(p))?;
        } else if p == "backup" {
            if !allow_backup {
                let msg = format!("balancing method does not support parameter \"{p}\"");
                return Err(ConfigError::invalid(msg, &d.span));
            }
            line.backup = true;
        } else if p == "down" {
            line.down = true;
        } else if p == "drain" && module == Module::Http {
            line.drain = true;
        } else if let Some(v) = p.strip_prefix("route=").filter(|_| module == Module::Http) {
            // nginx's messages for a `sticky` server id
            if v.is_empty() {
                return Err(ConfigError::invalid("route is empty", &d.span));
            }
            if v.len() > 32 {
                return Err(ConfigError::invalid("route is longer than 32", &d.span));
            }
            line.route = Some(v.to_string());
        } else {
            return Err(invalid(p));
        }
    }
    if service.is_some() && !resolve {
        let msg = format!("service upstream \"{text}\" requires \"resolve\" parameter");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let opts = UrlOpts {
        default_port: if module == Module::Http { 80 } else { 0 },
        no_resolve: resolve,
        ..UrlOpts::default()
    };
    let url =
        url::parse_url(text, opts).map_err(|e| ConfigError::invalid(format!("{e} in upstream \"{text}\""), &d.span))?;
    if module == Module::Stream && url.no_port && service.is_none() {
        return Err(ConfigError::invalid(format!("no port in upstream \"{text}\""), &d.span));
    }
    if service.is_some() && !url.no_port {
        let msg = format!("service upstream \"{text}\" may not have port");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if service.is_some() && !url.addrs.is_empty() {
        let msg = format!("service upstream \"{text}\" requires domain name");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if resolve && url.addrs.is_empty() {
        line.resolve = Some(Box::new(crate::config::model::ResolveSpec {
            host: url.host.to_ascii_lowercase(),
            port: url.port,
            service,
            derived: false,
        }));
    }
    line.addrs = url.addrs;
    line.agent = agent.finish(&d.span)?;
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn read(module: Module, args: &[&str]) -> Result<ServerLine, String> {
        let d = Directive {
            name: "server".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: at(3),
            block: None,
        };
        server_line(&d, module, true).map_err(|e| e.to_string())
    }

    #[test]
    fn resolve_and_service_as_nginx_checks_them() {
        let l = read(Module::Http, &["Example.NET:8080", "resolve", "weight=2"]).unwrap();
        let r = l.resolve.as_deref().unwrap();
        assert_eq!((r.host.as_str(), r.port, r.derived), ("example.net", 8080, false));
        assert!(l.addrs.is_empty() && l.is_template());
        let l = read(Module::Stream, &["example.net", "service=http", "resolve"]).unwrap();
        assert_eq!(l.resolve.unwrap().service.as_deref(), Some("http"));
        // an address with `resolve` is an address
        let l = read(Module::Http, &["127.0.0.1:81", "resolve"]).unwrap();
        assert!(l.resolve.is_none() && l.addrs.len() == 1);
        let msg = |m, a: &[&str]| read(m, a).unwrap_err();
        assert_eq!(
            msg(Module::Http, &["x", "service="]),
            "[emerg] service is empty in t.conf:3"
        );
        assert_eq!(
            msg(Module::Http, &["x", "service=http"]),
            "[emerg] service upstream \"x\" requires \"resolve\" parameter in t.conf:3"
        );
        assert_eq!(
            msg(Module::Http, &["x:80", "service=http", "resolve"]),
            "[emerg] service upstream \"x:80\" may not have port in t.conf:3"
        );
        assert_eq!(
            msg(Module::Http, &["127.0.0.1", "service=http", "resolve"]),
            "[emerg] service upstream \"127.0.0.1\" requires domain name in t.conf:3"
        );
        assert_eq!(
            msg(Module::Stream, &["x", "resolve"]),
            "[emerg] no port in upstream \"x\" in t.conf:3"
        );
    }

    fn at(line: usize) -> Span {
        Span {
            file: PathBuf::from("t.conf"),
            line,
        }
    }

    #[test]
    fn server_line_parameters() {
        let d = Directive {
            name: "server".into(),
            args: vec!["127.0.0.1:1".into(), "weight=3".into(), "down".into()],
            span: at(1),
            block: None,
        };
        let l = server_line(&d, Module::Http, true).unwrap();
        assert_eq!((l.weight, l.down, l.addrs.len()), (3, true, 1));
        let mut d = d;
        d.args[2] = "backup".into();
        let e = server_line(&d, Module::Http, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] balancing method does not support parameter \"backup\" in t.conf:1"
        );
        d.args = vec!["127.0.0.1".into()];
        assert_eq!(server_line(&d, Module::Http, true).unwrap().addrs[0].port(), 80);
        let e = server_line(&d, Module::Stream, true).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] no port in upstream \"127.0.0.1\" in t.conf:1");
    }

    #[test]
    fn slow_start_takes_a_time_and_not_a_hash_method() {
        let mut d = Directive {
            name: "server".into(),
            args: vec!["127.0.0.1:1".into(), "slow_start=1m30s".into()],
            span: at(4),
            block: None,
        };
        assert_eq!(
            server_line(&d, Module::Stream, true).unwrap().slow_start,
            Duration::from_secs(90)
        );
        let e = server_line(&d, Module::Http, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] balancing method does not support parameter \"slow_start=1m30s\" in t.conf:4"
        );
        d.args[1] = "slow_start=10ms".into();
        let e = server_line(&d, Module::Http, true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] invalid parameter \"slow_start=10ms\" in t.conf:4"
        );
    }

    #[test]
    fn route_is_a_sticky_server_id_of_at_most_32_bytes() {
        let mut d = Directive {
            name: "server".into(),
            args: vec!["127.0.0.1:1".into(), "route=a1".into()],
            span: at(2),
            block: None,
        };
        assert_eq!(
            server_line(&d, Module::Http, true).unwrap().route.as_deref(),
            Some("a1")
        );
        let e = server_line(&d, Module::Stream, true).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] invalid parameter \"route=a1\" in t.conf:2");
        d.args[1] = "route=".into();
        let e = server_line(&d, Module::Http, true).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] route is empty in t.conf:2");
        d.args[1] = format!("route={}", "x".repeat(33));
        let e = server_line(&d, Module::Http, true).unwrap_err();
        assert_eq!(e.to_string(), "[emerg] route is longer than 32 in t.conf:2");
    }
}
