//! `least_time MODE [inflight]` in an `upstream {}` block, read as nginx 1.31's least_time modules read it.

use super::vars::Module;
use crate::config::error::ConfigError;
use crate::config::model::LeastTimeMode;
use crate::config::parser::Directive;

/// The modes each module's enum lists, in nginx's order.
pub fn modes(module: Module) -> &'static [(&'static str, LeastTimeMode)] {
    match module {
        Module::Http => &[
            ("header", LeastTimeMode::Header),
            ("last_byte", LeastTimeMode::LastByte),
        ],
        Module::Stream => &[
            ("connect", LeastTimeMode::Connect),
            ("first_byte", LeastTimeMode::FirstByte),
            ("last_byte", LeastTimeMode::LastByte),
        ],
    }
}

/// The mode and `inflight` of a `least_time` directive (one or two arguments, checked by the spec table). As in
/// nginx: a second argument other than `inflight` is `invalid parameter`, checked first; then the enum slot says
/// `is duplicate` for a second `least_time` in the block, and `invalid value` for an unknown mode (compared
/// without case).
pub fn directive(d: &Directive, module: Module, already: bool) -> Result<(LeastTimeMode, bool), ConfigError> {
    let inflight = match d.args.get(1) {
        None => false,
        Some(p) if p == "inflight" => true,
        Some(p) => return Err(ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span)),
    };
    if already {
        return Err(super::directive_err(d, "is duplicate"));
    }
    let value = d.args.first().map_or("", String::as_str);
    let mode = modes(module)
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|&(_, mode)| mode);
    match mode {
        Some(mode) => Ok((mode, inflight)),
        None => Err(ConfigError::invalid(format!("invalid value \"{value}\""), &d.span)),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::model::{LeastTimeMode, Method};
    use std::path::Path;

    fn http(block: &str) -> Result<Method, String> {
        let text = format!("events {{}}\nhttp {{\nupstream u {{\n{block}\n}}\n}}\n");
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let u = c.http.as_ref().and_then(|h| h.upstream("u")).map(|u| u.method.clone());
        u.ok_or_else(|| "no upstream".to_string())
    }

    fn stream(block: &str) -> Result<Method, String> {
        let text = format!("events {{}}\nstream {{\nupstream u {{\n{block}\n}}\n}}\n");
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let u = c
            .stream
            .as_ref()
            .and_then(|s| s.upstream("u"))
            .map(|u| u.method.clone());
        u.ok_or_else(|| "no upstream".to_string())
    }

    const fn lt(mode: LeastTimeMode, inflight: bool) -> Method {
        Method::LeastTime { mode, inflight }
    }

    #[test]
    fn modes_and_inflight_per_module() {
        let s = "server 127.0.0.1:1; server 127.0.0.1:2 backup;";
        assert_eq!(
            http(&format!("least_time header; {s}")),
            Ok(lt(LeastTimeMode::Header, false))
        );
        assert_eq!(
            http(&format!("least_time LAST_BYTE inflight; {s}")),
            Ok(lt(LeastTimeMode::LastByte, true))
        );
        assert_eq!(
            stream(&format!("least_time connect; {s}")),
            Ok(lt(LeastTimeMode::Connect, false))
        );
        assert_eq!(
            stream(&format!("least_time first_byte inflight; {s}")),
            Ok(lt(LeastTimeMode::FirstByte, true))
        );
        assert_eq!(
            stream(&format!("least_time last_byte; {s}")),
            Ok(lt(LeastTimeMode::LastByte, false))
        );
    }

    #[test]
    fn nginx_s_messages_on_nginx_s_lines() {
        let s = "server 127.0.0.1:1;";
        let err = |r: Result<Method, String>| r.expect_err("refused");
        assert_eq!(
            err(http(&format!("{s}\nleast_time connect;"))),
            "[emerg] invalid value \"connect\" in /t/n.conf:5"
        );
        assert_eq!(
            err(stream(&format!("{s}\nleast_time header;"))),
            "[emerg] invalid value \"header\" in /t/n.conf:5"
        );
        assert_eq!(
            err(http(&format!("least_time header now;\n{s}"))),
            "[emerg] invalid parameter \"now\" in /t/n.conf:4"
        );
        assert_eq!(
            err(http(&format!("least_time header;\nleast_time last_byte;\n{s}"))),
            "[emerg] \"least_time\" directive is duplicate in /t/n.conf:5"
        );
        assert!(err(http(&format!("least_time;\n{s}"))).contains("invalid number of arguments"));
    }
}
