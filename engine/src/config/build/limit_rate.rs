//! `limit_rate SIZE` and `limit_rate_after SIZE` (http, server, location): nginx 1.22's size slots. Values with
//! variables (nginx 1.27) are refused by name; `set $limit_rate` changes a request's rate.

use super::{arg, directive_err};
use crate::config::error::ConfigError;
use crate::config::parser::Directive;
use crate::config::value;

/// The size of a `limit_rate` or `limit_rate_after` line.
pub fn size(d: &Directive) -> Result<u64, ConfigError> {
    let v = arg(d, 0);
    if v.contains('$') {
        let msg = format!(
            "\"{}\" with variables is not supported by corelb (\"set $limit_rate\" is)",
            d.name
        );
        return Err(ConfigError::invalid(msg, &d.span));
    }
    value::parse_size(v).ok_or_else(|| directive_err(d, "invalid value"))
}
