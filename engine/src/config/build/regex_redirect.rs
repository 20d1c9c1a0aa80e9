//! `proxy_redirect ~REGEX REPLACEMENT` and `~*REGEX` (`ngx_http_proxy_rewrite_regex`): the regex compiled as
//! `location ~` regexes are, the replacement's `$1`..`$9` and named groups taken from its match. A replacement
//! with variables is refused by name (corelb evaluates variables when the request is routed, before the answer).

use super::rewrite::pieces;
use super::vars::Vars;
use crate::config::error::ConfigError;
use crate::config::headers::{Redirect, RegexRedirect};
use crate::config::key::KeyTemplate;
use crate::config::parser::Directive;
use crate::config::regex;
use crate::config::rewrite::Piece;

/// The rule of `proxy_redirect ~PATTERN TO` (`pattern` without its `~`).
pub fn rule(pattern: &str, to: &str, vars: &mut Vars, d: &Directive) -> Result<Redirect, ConfigError> {
    let (caseless, pattern) = match pattern.strip_prefix('*') {
        Some(p) => (true, p),
        None => (false, pattern),
    };
    let regex = regex::compile(pattern, caseless).map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
    let to = pieces(to, Some(&regex), vars, d)?;
    if to.iter().any(|p| matches!(p, Piece::Var(_))) {
        let msg = "\"proxy_redirect\" with a regular expression and variables in the replacement is not supported \
                   by corelb";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    Ok(Redirect {
        from: KeyTemplate::literal(""),
        to: KeyTemplate::literal(""),
        regex: Some(Box::new(RegexRedirect { regex, to })),
    })
}
