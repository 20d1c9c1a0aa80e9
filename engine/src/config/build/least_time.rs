//! `least_time MODE [inflight]` in an `upstream {}` block, read as nginx 1.31's least_time modules read it.

use super::vars::Module;
use crate::config::error::ConfigError;
use crate::config::model::LeastTimeMode;
use crate::config::parser::Directive;

/// The modes each module's enum lists, in nginx's order.
fn modes(module: Module) -> &'static [(&'static str, LeastTimeMode)] {
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
