//! The load `random two` compares: nginx's `least_conn` (the default), nginx Plus's `least_time=MODE` and corelb's
//! `ewma` (peak-EWMA latency).

use super::least_time::modes;
use super::vars::Module;
use crate::config::error::ConfigError;
use crate::config::model::RandomTwo;
use crate::config::parser::Directive;

/// The second argument of `random two [LOAD]` (the spec table allows two at most). Anything else is nginx's
/// `invalid parameter "X"`, as is a `least_time=` mode the module does not measure (`header`/`last_byte` in http,
/// `connect`/`first_byte`/`last_byte` in stream).
pub fn load(d: &Directive, module: Module) -> Result<RandomTwo, ConfigError> {
    let Some(p) = d.args.get(1) else {
        return Ok(RandomTwo::LeastConn);
    };
    let invalid = || ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
    match p.as_str() {
        "least_conn" => Ok(RandomTwo::LeastConn),
        "ewma" => Ok(RandomTwo::PeakEwma),
        _ => {
            let mode = p.strip_prefix("least_time=").ok_or_else(invalid)?;
            modes(module)
                .iter()
                .find(|(name, _)| *name == mode)
                .map(|&(_, m)| RandomTwo::LeastTime(m))
                .ok_or_else(invalid)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::model::{LeastTimeMode, Method, RandomTwo};
    use std::path::Path;

    /// The `two` of upstream `u` whose block holds `random` and two servers, in `module`.
    fn two(module: &str, random: &str) -> Result<Option<RandomTwo>, String> {
        let text = format!(
            "events {{}}\n{module} {{\nupstream u {{\n{random}\nserver 127.0.0.1:8081;\nserver 127.0.0.1:8082;\n}}\n}}\n"
        );
        let c = crate::config::parse_str(&text, Path::new("/t/n.conf")).map_err(|e| e.to_string())?;
        let method = match module {
            "http" => c.http.as_ref().and_then(|h| h.upstream("u")).map(|u| u.method.clone()),
            _ => c
                .stream
                .as_ref()
                .and_then(|s| s.upstream("u"))
                .map(|u| u.method.clone()),
        };
        match method {
            Some(Method::Random { two }) => Ok(two),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn each_load_is_read_in_its_module() {
        assert_eq!(two("http", "random two;"), Ok(Some(RandomTwo::LeastConn)));
        assert_eq!(two("http", "random two least_conn;"), Ok(Some(RandomTwo::LeastConn)));
        assert_eq!(two("http", "random two ewma;"), Ok(Some(RandomTwo::PeakEwma)));
        assert_eq!(two("stream", "random two ewma;"), Ok(Some(RandomTwo::PeakEwma)));
        assert_eq!(
            two("http", "random two least_time=header;"),
            Ok(Some(RandomTwo::LeastTime(LeastTimeMode::Header)))
        );
        assert_eq!(
            two("stream", "random two least_time=first_byte;"),
            Ok(Some(RandomTwo::LeastTime(LeastTimeMode::FirstByte)))
        );
        assert_eq!(two("http", "random;"), Ok(None));
        assert_eq!(
            two("http", "random two ewma;\nrandom;"),
            Ok(Some(RandomTwo::PeakEwma)),
            "a later random keeps two"
        );
    }

    #[test]
    fn an_unknown_load_or_mode_is_an_invalid_parameter() {
        for (module, random, param) in [
            ("http", "random two peak;", "peak"),
            ("http", "random two least_time=connect;", "least_time=connect"),
            ("stream", "random two least_time=header;", "least_time=header"),
            ("http", "random two least_time=;", "least_time="),
        ] {
            let e = two(module, random).expect_err(random);
            assert_eq!(
                e,
                format!("[emerg] invalid parameter \"{param}\" in /t/n.conf:4"),
                "{random}"
            );
        }
    }
}
