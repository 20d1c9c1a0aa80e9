//! `hash KEY [consistent [balance_factor=N] | maglev]`: nginx's `hash` and `hash consistent`, and corelb's Maglev
//! table and bounded-load consistent hashing.

use crate::config::error::ConfigError;
use crate::config::key::KeyTemplate;
use crate::config::model::Method;
use crate::config::parser::Directive;
use crate::config::value;

/// The method a `hash` directive (one to three arguments) names. A second argument other than `consistent` or
/// `maglev` is nginx's `invalid parameter "X"`; a third is corelb's `balance_factor=N` after `consistent` (N a
/// percentage, at least 100, as HAProxy and Envoy take it), `invalid parameter` when malformed, and nginx's
/// `invalid number of arguments` anywhere else.
pub fn method(d: &Directive, key: KeyTemplate) -> Result<Method, ConfigError> {
    let invalid = |p: &str| ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
    let second = d.args.get(1).map(String::as_str);
    let third = d.args.get(2).map(String::as_str);
    match (second, third) {
        (None, _) => Ok(Method::Hash { key, consistent: false }),
        (Some("consistent"), None) => Ok(Method::Hash { key, consistent: true }),
        (Some("maglev"), None) => Ok(Method::Maglev { key }),
        (Some("consistent"), Some(p)) if p.starts_with("balance_factor=") => {
            let n = p.strip_prefix("balance_factor=").and_then(value::atoi);
            match n.and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 100) {
                Some(factor) => Ok(Method::BoundedHash { key, factor }),
                None => Err(invalid(p)),
            }
        }
        (Some("consistent" | "maglev"), Some(_)) => Err(ConfigError::invalid(
            "invalid number of arguments in \"hash\" directive",
            &d.span,
        )),
        (Some(other), _) => Err(invalid(other)),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::model::Method;
    use std::path::Path;

    fn http(hash: &str) -> Result<Method, String> {
        let text = format!("events {{}}\nhttp {{\nupstream u {{\n{hash}\nserver 127.0.0.1:1;\n}}\n}}\n");
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let u = c.http.as_ref().and_then(|h| h.upstream("u")).map(|u| u.method.clone());
        u.ok_or_else(|| "no upstream".to_string())
    }

    #[test]
    fn each_form_names_its_method() {
        let m = |h: &str| http(h).map(|m| format!("{m:?}")).unwrap_or_else(|e| e);
        assert!(m("hash $uri;").contains("consistent: false"));
        assert!(m("hash $uri consistent;").contains("consistent: true"));
        assert!(m("hash $uri maglev;").starts_with("Maglev"));
        let bounded = m("hash $uri consistent balance_factor=150;");
        assert!(
            bounded.starts_with("BoundedHash") && bounded.ends_with("factor: 150 }"),
            "{bounded}"
        );
        assert!(m("hash $uri consistent balance_factor=100;").ends_with("factor: 100 }"));
    }

    #[test]
    fn bad_forms_give_nginx_s_messages() {
        for (hash, msg) in [
            ("hash $uri ring;", "invalid parameter \"ring\""),
            (
                "hash $uri consistent balance_factor=99;",
                "invalid parameter \"balance_factor=99\"",
            ),
            (
                "hash $uri consistent balance_factor=x;",
                "invalid parameter \"balance_factor=x\"",
            ),
            (
                "hash $uri maglev balance_factor=150;",
                "invalid number of arguments in \"hash\" directive",
            ),
            (
                "hash $uri consistent 150;",
                "invalid number of arguments in \"hash\" directive",
            ),
            ("hash $uri ring 1;", "invalid parameter \"ring\""),
            (
                "hash $uri consistent balance_factor=150 x;",
                "invalid number of arguments in \"hash\" directive",
            ),
        ] {
            assert_eq!(http(hash), Err(format!("[emerg] {msg} in /t/n.conf:4")), "{hash}");
        }
    }
}
