//! The `*_temp_path PATH [LEVEL1 [LEVEL2 [LEVEL3]]]` directives (`client_body_temp_path`, `proxy_temp_path`,
//! `fastcgi_temp_path`, `uwsgi_temp_path`, `scgi_temp_path`), checked as nginx's `ngx_conf_set_path_slot` checks
//! them and otherwise without effect: corelb buffers no body to disk, so it has no temporary files.

use super::directive_err;
use crate::config::error::ConfigError;
use crate::config::parser::Directive;

/// The temp path directives, by name.
pub const NAMES: [&str; 5] = [
    "client_body_temp_path",
    "proxy_temp_path",
    "fastcgi_temp_path",
    "uwsgi_temp_path",
    "scgi_temp_path",
];

/// The temp path directives one http, server or location level has set (for nginx's `is duplicate`).
#[derive(Debug, Clone, Default)]
pub struct TempPaths {
    set: Vec<String>,
}

impl TempPaths {
    /// Reads `d`, one of [`NAMES`]: a second one at the same level is `is duplicate`; each level is a number
    /// above 0 and together they make at most 10 characters of directory names.
    pub fn directive(&mut self, d: &Directive) -> Result<(), ConfigError> {
        if self.set.contains(&d.name) {
            return Err(directive_err(d, "is duplicate"));
        }
        let mut total = 0u64;
        for level in d.args.iter().skip(1) {
            let n = super::value::atoi(level).filter(|&n| n > 0);
            total = total.saturating_add(n.ok_or_else(|| directive_err(d, "invalid value"))?);
        }
        if total > 10 {
            return Err(directive_err(d, "invalid value"));
        }
        self.set.push(d.name.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;
    use std::path::PathBuf;

    fn directive(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 4,
            },
            block: None,
        }
    }

    #[test]
    fn nginx_checks_and_messages() {
        let mut level = TempPaths::default();
        level
            .directive(&directive("proxy_temp_path", &["/t/proxy_temp", "1", "2"]))
            .unwrap();
        level.directive(&directive("client_body_temp_path", &["body"])).unwrap();
        let again = level.directive(&directive("proxy_temp_path", &["/t/other"]));
        assert_eq!(
            again.unwrap_err().to_string(),
            "[emerg] \"proxy_temp_path\" directive is duplicate in t.conf:4"
        );
        for levels in [&["0"][..], &["x"], &["-1"], &["5", "5", "1"], &["11"]] {
            let mut args = vec!["/t/scgi"];
            args.extend_from_slice(levels);
            let e = TempPaths::default().directive(&directive("scgi_temp_path", &args));
            assert_eq!(
                e.unwrap_err().to_string(),
                "[emerg] \"scgi_temp_path\" directive invalid value in t.conf:4",
                "{levels:?}"
            );
        }
        TempPaths::default()
            .directive(&directive("uwsgi_temp_path", &["/t/u", "2", "4", "4"]))
            .unwrap();
    }
}
