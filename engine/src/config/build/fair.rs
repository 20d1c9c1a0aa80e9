//! `fair [no_rr] [weight_mode=idle|peak]` in an http `upstream {}` block, read as the upstream-fair module reads it.

use crate::config::error::ConfigError;
use crate::config::model::{FairWeightMode, Method};
use crate::config::parser::Directive;

/// The method of a `fair` directive. As the module: each argument is `no_rr`, `weight_mode=peak` or
/// `weight_mode=idle` (compared exactly), two `weight_mode=` are `weight_mode= options are mutually exclusive`, and
/// anything else is ``Invalid `fair' parameter `X'``.
pub fn directive(d: &Directive) -> Result<Method, ConfigError> {
    let mut no_rr = false;
    let mut weight_mode: Option<FairWeightMode> = None;
    for a in &d.args {
        let mode = match a.as_str() {
            "no_rr" => {
                no_rr = true;
                continue;
            }
            "weight_mode=peak" => FairWeightMode::Peak,
            "weight_mode=idle" => FairWeightMode::Idle,
            other => {
                let msg = format!("Invalid `fair' parameter `{other}'");
                return Err(ConfigError::invalid(msg, &d.span));
            }
        };
        if weight_mode.replace(mode).is_some() {
            return Err(ConfigError::invalid(
                "weight_mode= options are mutually exclusive",
                &d.span,
            ));
        }
    }
    Ok(Method::Fair {
        no_rr,
        weight_mode: weight_mode.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::model::{FairWeightMode, Method};
    use std::path::Path;

    fn parse(module: &str, fair: &str) -> Result<Method, String> {
        let text = format!(
            "events {{}}\n{module} {{\nupstream u {{\n{fair}\nserver 127.0.0.1:1;\nserver 127.0.0.1:2;\n}}\n}}\n"
        );
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let u = c.http.as_ref().and_then(|h| h.upstream("u")).map(|u| u.method.clone());
        u.ok_or_else(|| "no upstream".to_string())
    }

    #[test]
    fn the_module_s_parameters() {
        let fair = |no_rr, weight_mode| Ok(Method::Fair { no_rr, weight_mode });
        assert_eq!(parse("http", "fair;"), fair(false, FairWeightMode::Default));
        assert_eq!(parse("http", "fair no_rr;"), fair(true, FairWeightMode::Default));
        assert_eq!(
            parse("http", "fair weight_mode=idle no_rr;"),
            fair(true, FairWeightMode::Idle)
        );
        assert_eq!(
            parse("http", "fair weight_mode=peak;"),
            fair(false, FairWeightMode::Peak)
        );
    }

    #[test]
    fn the_module_s_messages() {
        for (fair, msg) in [
            (
                "fair weight_mode=idle weight_mode=peak;",
                "weight_mode= options are mutually exclusive",
            ),
            ("fair weight_mode=IDLE;", "Invalid `fair' parameter `weight_mode=IDLE'"),
            ("fair busy;", "Invalid `fair' parameter `busy'"),
        ] {
            assert_eq!(
                parse("http", fair),
                Err(format!("[emerg] {msg} in /t/n.conf:4")),
                "{fair}"
            );
        }
        // an http upstream method: not in stream, and no backup servers
        let e = parse("stream", "fair;").expect_err("stream");
        assert!(e.contains("\"fair\" directive is not allowed here"), "{e}");
        let e = parse("http", "fair;\nserver 127.0.0.1:3 backup;").expect_err("backup");
        assert!(
            e.contains("balancing method does not support parameter \"backup\""),
            "{e}"
        );
    }
}
