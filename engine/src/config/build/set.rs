//! `set $name VALUE` (`ngx_http_rewrite_set`): the block's user variables, declared before the block is built (a
//! value anywhere in the block may name one `set` only somewhere else, as nginx resolves names when the block
//! ends), nginx's checks on the name, and the value's pieces.

use super::arg;
use super::rewrite::pieces;
use super::vars::{Module, Vars};
use crate::config::error::ConfigError;
use crate::config::key::Var;
use crate::config::parser::{Block, Directive};
use crate::config::rewrite::{RewriteOp, SetTarget};

/// Prefixes of nginx's prefix variables: a `set` of such a name makes a user variable that hides the prefix one
/// (nginx keeps prefix variables out of its table of names).
const PREFIXES: &[&str] = &[
    "http_",
    "arg_",
    "cookie_",
    "sent_http_",
    "upstream_http_",
    "upstream_cookie_",
];

/// What the name of a `set` is.
enum Name {
    /// A user variable (lower-case).
    User(String),
    /// A built-in that `set` changes.
    Builtin(SetTarget),
    /// A built-in nginx does not let `set` change: its message.
    Refused(String),
}

fn classify(raw: &str, vars: &Vars) -> Name {
    let lower = raw.to_ascii_lowercase();
    if vars.is_map(&lower) {
        return Name::Refused(format!(
            "\"set\" of the map variable \"${raw}\" is not supported by corelb"
        ));
    }
    let prefixed = PREFIXES.iter().any(|p| lower.starts_with(p));
    match Var::from_name(&lower) {
        _ if prefixed => Name::User(lower),
        None => Name::User(lower),
        Some(Var::LimitRate) => Name::Builtin(SetTarget::LimitRate),
        Some(Var::Args) => Name::Refused(format!(
            "\"set ${raw}\" is not supported by corelb (the request's arguments are not changed)"
        )),
        Some(_) => Name::Refused(format!("the duplicate \"{raw}\" variable")),
    }
}

/// The user variables the `set` lines of an http block (in its servers, locations and `if`s) declare, lower-case,
/// each once, in config order.
pub fn names(block: &Block) -> Vec<String> {
    let mut out = Vec::new();
    collect(block, &mut out, 0);
    out
}

fn collect(block: &Block, out: &mut Vec<String>, depth: usize) {
    for d in &block.items {
        match d.name.as_str() {
            "set" => {
                let name = d.args.first().and_then(|a| a.strip_prefix('$')).unwrap_or_default();
                if let Name::User(lower) = classify(name, &Vars::default()) {
                    if !lower.is_empty() && !out.contains(&lower) {
                        out.push(lower);
                    }
                }
            }
            "server" | "location" | "if" if depth < 64 => {
                if let Some(b) = &d.block {
                    collect(b, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// `uninitialized_variable_warn on|off`: checked as nginx does; corelb writes no per-request warning for an unset
/// variable (it reads as empty either way; docs/directives.md).
pub fn warn_flag(d: &Directive) -> Result<(), ConfigError> {
    super::flag_slot(&mut None, d)
}

/// `set $name VALUE` in a server, location or `if`.
pub fn set(d: &Directive, vars: &mut Vars) -> Result<RewriteOp, ConfigError> {
    let raw = arg(d, 0);
    let Some(name) = raw.strip_prefix('$') else {
        return Err(ConfigError::invalid(
            format!("invalid variable name \"{raw}\""),
            &d.span,
        ));
    };
    if name.is_empty() {
        return Err(ConfigError::invalid("invalid variable name \"$\"", &d.span));
    }
    let target = match classify(name, vars) {
        Name::Refused(msg) => return Err(ConfigError::invalid(msg, &d.span)),
        Name::Builtin(t) => t,
        Name::User(lower) => match vars.resolve(&lower, Module::Http, None) {
            Some(Var::User(i)) => SetTarget::User(i),
            _ => {
                let msg = format!("\"set ${name}\" was not declared (corelb's error, please report it)");
                return Err(ConfigError::invalid(msg, &d.span));
            }
        },
    };
    let value = pieces(arg(d, 1), None, vars, d)?;
    Ok(RewriteOp::Set { target, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;
    use crate::config::rewrite::Piece;
    use std::path::PathBuf;

    fn directive(name: &str, args: &[&str], block: Option<Block>) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 3,
            },
            block,
        }
    }

    fn block(items: Vec<Directive>) -> Block {
        Block {
            items,
            close: Ok(Span::default()),
        }
    }

    #[test]
    fn names_are_declared_from_every_level_once() {
        let http = block(vec![
            directive(
                "map",
                &["$a", "$m"],
                Some(block(vec![directive("set", &["$no"], None)])),
            ),
            directive(
                "server",
                &[],
                Some(block(vec![
                    directive("set", &["$First", "1"], None),
                    directive(
                        "location",
                        &["/"],
                        Some(block(vec![
                            directive(
                                "if",
                                &["($a)"],
                                Some(block(vec![directive("set", &["$deep", "x"], None)])),
                            ),
                            directive("set", &["$first", "2"], None),
                            directive("set", &["$limit_rate", "2"], None),
                            directive("set", &["$http_x", "2"], None),
                            directive("set", &["$uri", "2"], None),
                        ])),
                    ),
                ])),
            ),
        ]);
        assert_eq!(names(&http), ["first", "deep", "http_x"]);
    }

    fn set_line(args: &[&str], users: &[&str]) -> Result<RewriteOp, String> {
        let mut vars = Vars::with_maps(vec!["m".into()]).with_users(users.iter().map(|u| u.to_string()).collect());
        set(&directive("set", args, None), &mut vars).map_err(|e| e.to_string())
    }

    #[test]
    fn targets_and_values() {
        let op = set_line(&["$Var", "a${b}c$1$uri"], &["b", "var"]).unwrap();
        assert_eq!(
            op,
            RewriteOp::Set {
                target: SetTarget::User(1),
                value: vec![
                    Piece::Text(b"a".to_vec()),
                    Piece::Var(Var::User(0)),
                    Piece::Text(b"c".to_vec()),
                    Piece::Capture(1),
                    Piece::Var(Var::Uri),
                ],
            }
        );
        let op = set_line(&["$limit_rate", "$arg_l"], &[]).unwrap();
        assert_eq!(
            op,
            RewriteOp::Set {
                target: SetTarget::LimitRate,
                value: vec![Piece::Var(Var::Arg("l".into()))],
            }
        );
    }

    /// nginx 1.22's messages (`nginx -t`).
    #[test]
    fn refused_names_in_nginx_words() {
        let e = |args: &[&str]| set_line(args, &[]).unwrap_err();
        assert_eq!(e(&["x", "1"]), "[emerg] invalid variable name \"x\" in t.conf:3");
        assert_eq!(e(&["$", "1"]), "[emerg] invalid variable name \"$\" in t.conf:3");
        assert_eq!(e(&["$Uri", "1"]), "[emerg] the duplicate \"Uri\" variable in t.conf:3");
        assert_eq!(
            e(&["$remote_addr", "1"]),
            "[emerg] the duplicate \"remote_addr\" variable in t.conf:3"
        );
        assert_eq!(
            e(&["$m", "1"]),
            "[emerg] \"set\" of the map variable \"$m\" is not supported by corelb in t.conf:3"
        );
    }
}
