//! The rewrite module's directives of a server or location (`ngx_http_rewrite_module`): `if (COND) { }` with
//! nginx's condition parser and messages, `break`, and `return` in the order they run.

use super::vars::{Module, Vars};
use super::{arg, block_of, walk, Ctx};
use crate::config::error::ConfigError;
use crate::config::model::Return;
use crate::config::parser::Directive;
use crate::config::regex;
use crate::config::rewrite::{Cond, FileTest, Piece, RewriteFlag, RewriteOp};

/// A level's rewrite directives, as read.
#[derive(Debug, Default)]
pub struct Script {
    pub ops: Vec<RewriteOp>,
}

impl Script {
    /// Whether a `return` of this level is the level's first directive of the module, so it answers every
    /// request: then it is kept as the level's plain `return` (pre-rendered), not in the script.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// `break`.
    pub fn brk(&mut self) {
        self.ops.push(RewriteOp::Break);
    }

    /// `rewrite REGEX REPLACEMENT [FLAG]`.
    pub fn rewrite(&mut self, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
        self.ops.push(rewrite(d, vars)?);
        Ok(())
    }

    /// `set $name VALUE`.
    pub fn set(&mut self, d: &Directive, vars: &mut Vars) -> Result<(), ConfigError> {
        self.ops.push(super::set::set(d, vars)?);
        Ok(())
    }

    /// A `return` that runs after other rewrite directives.
    pub fn ret(&mut self, r: Return) {
        self.ops.push(RewriteOp::Return(r));
    }

    /// `if (COND) { ... }` in a server (`Ctx::HTTP_SIF` inside) or a location (`Ctx::HTTP_LIF`).
    pub fn if_block(&mut self, d: &Directive, inside: Ctx, vars: &mut Vars) -> Result<(), ConfigError> {
        let cond = condition(d, vars)?;
        let mut then = Vec::new();
        walk(block_of(d)?, inside, |id| match id.name.as_str() {
            "return" => {
                let mut slot = None;
                super::http::ret(id, &mut slot, vars)?;
                then.extend(slot.map(RewriteOp::Return));
                Ok(())
            }
            "break" => {
                then.push(RewriteOp::Break);
                Ok(())
            }
            "rewrite" => {
                then.push(rewrite(id, vars)?);
                Ok(())
            }
            "set" => {
                then.push(super::set::set(id, vars)?);
                Ok(())
            }
            "uninitialized_variable_warn" => super::set::warn_flag(id),
            _ => Err(ConfigError::invalid(
                format!("\"{}\" inside \"if\" is not supported by corelb", id.name),
                &id.span,
            )),
        })?;
        self.ops.push(RewriteOp::If { cond, then });
        Ok(())
    }
}

/// nginx's `ngx_http_rewrite`: the regex, the replacement's pieces, the flag.
fn rewrite(d: &Directive, vars: &mut Vars) -> Result<RewriteOp, ConfigError> {
    let regex = regex::compile(arg(d, 0), false).map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
    let raw = arg(d, 1);
    let absolute = ["http://", "https://", "$scheme"].iter().any(|p| raw.starts_with(p));
    let mut flag = if absolute {
        RewriteFlag::Redirect(302)
    } else {
        RewriteFlag::Next
    };
    match d.args.get(2).map(String::as_str) {
        None => {}
        Some("last") if !absolute => flag = RewriteFlag::Last,
        Some("break") if !absolute => flag = RewriteFlag::Break,
        Some("last" | "break") => {}
        Some("redirect") => flag = RewriteFlag::Redirect(302),
        Some("permanent") => flag = RewriteFlag::Redirect(301),
        Some(other) => {
            return Err(ConfigError::invalid(format!("invalid parameter \"{other}\""), &d.span));
        }
    }
    let (text, drop_args) = match raw.strip_suffix('?') {
        Some(t) => (t, true),
        None => (raw, false),
    };
    let internal = !matches!(flag, RewriteFlag::Redirect(_));
    if internal && (drop_args || text.contains('?')) {
        let msg = "\"rewrite\" to a URI with new arguments (\"?\") is not supported by corelb (a redirect is)";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    Ok(RewriteOp::Rewrite {
        replacement: pieces(text, Some(&regex), vars, d)?,
        regex,
        flag,
        drop_args,
    })
}

/// The pieces of a replacement (or a `set` value, without a regex of its own): text, `$1`..`$9`, the regex's
/// named groups, variables.
pub(super) fn pieces(
    raw: &str,
    regex: Option<&regex::Regex>,
    vars: &mut Vars,
    d: &Directive,
) -> Result<Vec<Piece>, ConfigError> {
    let invalid = || ConfigError::invalid("invalid variable name", &d.span);
    let b = raw.as_bytes();
    let mut out = Vec::new();
    let mut text = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c != b'$' {
            text.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let piece = match b.get(i) {
            Some(&n @ b'1'..=b'9') => {
                i += 1;
                Piece::Capture(usize::from(n - b'0'))
            }
            Some(b'{') => {
                let end = b
                    .get(i..)
                    .and_then(|r| r.iter().position(|&c| c == b'}'))
                    .ok_or_else(invalid)?;
                let name = raw.get(i + 1..i + end).ok_or_else(invalid)?;
                i += end + 1;
                named(name, regex, vars, d)?
            }
            _ => {
                let len = b
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
                let name = raw.get(i..i + len).ok_or_else(invalid)?;
                i += len;
                named(name, regex, vars, d)?
            }
        };
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(piece);
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// `$name` in a replacement: a named group of the regex, else a variable (an unknown one is reported when the
/// http block ends, as nginx does).
fn named(name: &str, regex: Option<&regex::Regex>, vars: &mut Vars, d: &Directive) -> Result<Piece, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid("invalid variable name", &d.span));
    }
    if let Some((i, _)) = regex.and_then(|r| r.names().find(|(_, n)| *n == name)) {
        return Ok(Piece::Capture(i));
    }
    match vars.resolve(name, Module::Http, None) {
        Some(v) => Ok(Piece::Var(v)),
        None => {
            vars.note_unknown(name, &d.span);
            Ok(Piece::Text(Vec::new()))
        }
    }
}

/// nginx's `ngx_http_rewrite_if_condition`: the arguments of `if` between `(` and `)`.
fn condition(d: &Directive, vars: &mut Vars) -> Result<Cond, ConfigError> {
    let invalid = |v: &str| ConfigError::invalid(format!("invalid condition \"{v}\""), &d.span);
    let mut args: Vec<&str> = d.args.iter().map(String::as_str).collect();
    let first = args.first().copied().unwrap_or_default();
    let Some(opened) = first.strip_prefix('(') else {
        return Err(invalid(first));
    };
    if opened.is_empty() {
        args.remove(0);
    } else if let Some(a) = args.first_mut() {
        *a = opened;
    }
    let last = args.last().copied().unwrap_or_default();
    let Some(closed) = last.strip_suffix(')') else {
        return Err(invalid(last));
    };
    if closed.is_empty() {
        args.pop();
    } else if let Some(a) = args.last_mut() {
        *a = closed;
    }
    let template = |raw: &str, vars: &mut Vars| vars.compile(raw, Module::Http, &d.span);
    match args.as_slice() {
        [var] if var.len() > 1 && var.starts_with('$') => Ok(Cond::Var(template(var, vars)?)),
        [var, op, value] if var.len() > 1 && var.starts_with('$') => {
            let lhs = template(var, vars)?;
            match *op {
                "=" | "!=" => Ok(Cond::Equals {
                    value: lhs,
                    to: template(value, vars)?,
                    negate: *op == "!=",
                }),
                "~" | "~*" | "!~" | "!~*" => {
                    let regex = regex::compile(value, op.ends_with('*'))
                        .map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
                    Ok(Cond::Matches {
                        value: lhs,
                        regex,
                        negate: op.starts_with('!'),
                    })
                }
                other => Err(ConfigError::invalid(
                    format!("unexpected \"{other}\" in condition"),
                    &d.span,
                )),
            }
        }
        [var, ..] if var.len() > 1 && var.starts_with('$') => Err(invalid(var)),
        [op, path] if op.len() >= 2 && (op.starts_with('-') || op.starts_with("!-")) => {
            let negate = op.starts_with('!');
            let test = match op.trim_start_matches('!') {
                "-f" => FileTest::Plain,
                "-d" => FileTest::Dir,
                "-e" => FileTest::Exists,
                "-x" => FileTest::Exec,
                _ => return Err(invalid(op)),
            };
            Ok(Cond::File {
                path: template(path, vars)?,
                test,
                negate,
            })
        }
        [op, ..] => Err(invalid(op)),
        [] => Err(invalid(")")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;
    use std::path::PathBuf;

    fn cond(args: &[&str]) -> Result<Cond, String> {
        let d = Directive {
            name: "if".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            span: Span {
                file: PathBuf::from("t.conf"),
                line: 1,
            },
            block: None,
        };
        condition(&d, &mut Vars::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn conditions_in_every_spelling() {
        assert!(matches!(cond(&["($arg_c)"]), Ok(Cond::Var(_))));
        assert!(matches!(cond(&["(", "$arg_c", ")"]), Ok(Cond::Var(_))));
        assert!(matches!(
            cond(&["($arg_c", "=", "1)"]),
            Ok(Cond::Equals { negate: false, .. })
        ));
        assert!(matches!(
            cond(&["($arg_c", "!=", "2)"]),
            Ok(Cond::Equals { negate: true, .. })
        ));
        let Ok(Cond::Matches { regex, negate, .. }) = cond(&["($arg_c", "!~*", "foo)"]) else {
            panic!("a regex condition")
        };
        assert!(negate && regex.caseless() && regex.pattern() == "foo");
        assert!(matches!(
            cond(&["(!-x", "/tmp/$arg_c)"]),
            Ok(Cond::File {
                test: FileTest::Exec,
                negate: true,
                ..
            })
        ));
        assert!(matches!(
            cond(&["(-d", "/tmp)"]),
            Ok(Cond::File {
                test: FileTest::Dir,
                negate: false,
                ..
            })
        ));
    }

    /// nginx 1.22's messages (`nginx -t`).
    #[test]
    fn bad_conditions_in_nginx_words() {
        let e = |args: &[&str]| cond(args).unwrap_err();
        assert_eq!(e(&["$a)"]), "[emerg] invalid condition \"$a)\" in t.conf:1");
        assert_eq!(e(&["($a"]), "[emerg] invalid condition \"$a\" in t.conf:1");
        assert_eq!(
            e(&["($a", "==", "1)"]),
            "[emerg] unexpected \"==\" in condition in t.conf:1"
        );
        assert_eq!(
            e(&["($a", "=", "1", "2)"]),
            "[emerg] invalid condition \"$a\" in t.conf:1"
        );
        assert_eq!(e(&["(-q", "/x)"]), "[emerg] invalid condition \"-q\" in t.conf:1");
        assert_eq!(e(&["(a)"]), "[emerg] invalid condition \"a\" in t.conf:1");
        assert_eq!(
            e(&["($a", "~", "x()"]),
            "[emerg] pcre2_compile() failed: missing closing parenthesis in \"x(\" in t.conf:1"
        );
    }
}
