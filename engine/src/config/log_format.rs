//! `log_format` compiled once at load (nginx's `ngx_http_log_compile_format`): literal text and variables, the
//! escaping mode, and nginx's two value escapes (`\xHH` for the default mode, JSON's for `escape=json`).

use crate::config::key::{Phase, Var};

/// How variable values are escaped (`log_format NAME escape=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// `"`, `\`, bytes below 0x20 and from 0x7f as `\xHH`; a missing value is written `-`.
    Default,
    /// JSON string escapes; a missing value is written as nothing.
    Json,
    /// Values as they are; a missing value is written as nothing.
    None,
}

/// One piece of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Text(Vec<u8>),
    Var(Var),
}

impl Op {
    /// Whether this is a variable the log captures when the request head is read (the others are read when the
    /// answer is done).
    pub fn captured_at_request(&self) -> bool {
        matches!(self, Op::Var(v) if v.phase() == Phase::Request)
    }
}

/// Why a format did not compile (nginx's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("unknown log format escaping \"{0}\"")]
    Escaping(String),
    #[error("invalid parameter \"{0}\"")]
    InvalidParameter(String),
    #[error("the closing bracket in \"{0}\" variable is missing")]
    Bracket(String),
    /// nginx reports it when the http block ends.
    #[error("unknown \"{0}\" variable")]
    UnknownVariable(String),
}

/// A compiled `log_format`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFormat {
    pub name: String,
    pub escape: Escape,
    ops: Vec<Op>,
}

/// nginx's predefined format.
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \
                            \"$http_referer\" \"$http_user_agent\"";

impl LogFormat {
    /// The predefined `combined` format.
    pub fn combined() -> LogFormat {
        let ops = compile_ops(COMBINED, &|n| Var::from_name(n)).unwrap_or_default();
        LogFormat {
            name: "combined".into(),
            escape: Escape::Default,
            ops,
        }
    }

    /// `log_format NAME [escape=...] STRING ...`: `args` are the arguments after the name; the strings are joined
    /// without a separator, as nginx does.
    pub fn compile(name: &str, args: &[String]) -> Result<LogFormat, FormatError> {
        Self::compile_with(name, args, &|n| Var::from_name(n))
    }

    /// [`LogFormat::compile`] with variable names resolved by `resolve` (a block's `map` variables).
    pub fn compile_with(
        name: &str,
        args: &[String],
        resolve: &dyn Fn(&str) -> Option<Var>,
    ) -> Result<LogFormat, FormatError> {
        let mut escape = Escape::Default;
        let mut strings = args;
        if let Some(mode) = args.first().and_then(|a| a.strip_prefix("escape=")) {
            escape = match mode {
                "default" => Escape::Default,
                "json" => Escape::Json,
                "none" => Escape::None,
                other => return Err(FormatError::Escaping(other.into())),
            };
            strings = args.get(1..).unwrap_or_default();
        }
        let mut ops = Vec::new();
        for s in strings {
            for op in compile_ops(s, resolve)? {
                match (ops.last_mut(), op) {
                    (Some(Op::Text(t)), Op::Text(more)) => t.extend_from_slice(&more),
                    (_, op) => ops.push(op),
                }
            }
        }
        Ok(LogFormat {
            name: name.into(),
            escape,
            ops,
        })
    }

    /// The compiled pieces.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// This format with each variable replaced by what `f` makes of it.
    pub fn map_vars(&self, f: impl Fn(&Var) -> Var) -> LogFormat {
        let ops = self
            .ops
            .iter()
            .map(|op| match op {
                Op::Var(v) => Op::Var(f(v)),
                Op::Text(t) => Op::Text(t.clone()),
            })
            .collect();
        LogFormat {
            name: self.name.clone(),
            escape: self.escape,
            ops,
        }
    }
}

/// One format string: nginx's `$name` / `${name}` scan.
fn compile_ops(s: &str, resolve: &dyn Fn(&str) -> Option<Var>) -> Result<Vec<Op>, FormatError> {
    let mut ops = Vec::new();
    scan(s, |piece| {
        ops.push(match piece {
            Piece::Text(t) => Op::Text(t.to_vec()),
            Piece::Var(name) => {
                Op::Var(resolve(name).ok_or_else(|| FormatError::UnknownVariable(name.to_ascii_lowercase()))?)
            }
        });
        Ok(())
    })?;
    Ok(ops)
}

/// A piece of a format string: literal text, or the name of a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a [u8]),
    Var(&'a str),
}

/// nginx's scan of a log format string (`ngx_http_log_compile_format`, and the stream module's copy of it): each
/// literal run and each `$name` / `${name}` goes to `piece`, with nginx's messages for a bad name.
pub fn scan(s: &str, mut piece: impl FnMut(Piece<'_>) -> Result<(), FormatError>) -> Result<(), FormatError> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b.get(i) != Some(&b'$') {
            let start = i;
            while i < b.len() && b.get(i) != Some(&b'$') {
                i += 1;
            }
            piece(Piece::Text(b.get(start..i).unwrap_or_default()))?;
            continue;
        }
        let invalid = || FormatError::InvalidParameter(s.get(i..).unwrap_or_default().into());
        let mut j = i + 1;
        let mut bracket = b.get(j) == Some(&b'{');
        if bracket {
            j += 1;
        }
        if j >= b.len() {
            return Err(invalid());
        }
        let start = j;
        let mut end = None;
        while let Some(&c) = b.get(j) {
            if c == b'}' && bracket {
                end = Some(j);
                j += 1;
                bracket = false;
                break;
            }
            if !(c.is_ascii_alphanumeric() || c == b'_') {
                break;
            }
            j += 1;
        }
        let name = s.get(start..end.unwrap_or(j)).unwrap_or_default();
        if bracket {
            return Err(FormatError::Bracket(name.into()));
        }
        if name.is_empty() {
            return Err(invalid());
        }
        piece(Piece::Var(name))?;
        i = j;
    }
    Ok(())
}

/// Whether the default escape rewrites `c` (nginx's table in `ngx_http_log_escape`).
fn needs_default_escape(c: u8) -> bool {
    !(0x20..0x7f).contains(&c) || c == b'"' || c == b'\\'
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `value` escaped as `mode` says.
pub fn append_escaped(out: &mut Vec<u8>, value: &[u8], mode: Escape) {
    match mode {
        Escape::None => out.extend_from_slice(value),
        Escape::Default => {
            for chunk in value.split_inclusive(|&c| needs_default_escape(c)) {
                match chunk.split_last() {
                    Some((&last, head)) if needs_default_escape(last) => {
                        out.extend_from_slice(head);
                        out.extend_from_slice(&[b'\\', b'x', HEX[usize::from(last >> 4)], HEX[usize::from(last & 15)]]);
                    }
                    _ => out.extend_from_slice(chunk),
                }
            }
        }
        Escape::Json => {
            for &c in value {
                match c {
                    b'"' | b'\\' => out.extend_from_slice(&[b'\\', c]),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    0..=0x1f => {
                        out.extend_from_slice(&[b'\\', b'u', b'0', b'0', b'0' + (c >> 4), HEX[usize::from(c & 15)]])
                    }
                    _ => out.push(c),
                }
            }
        }
    }
}

/// Whether `value` has a byte `mode` rewrites (so it must be copied aside before escaping).
pub fn needs_escape(value: &[u8], mode: Escape) -> bool {
    match mode {
        Escape::None => false,
        Escape::Default => value.iter().any(|&c| needs_default_escape(c)),
        Escape::Json => value.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\'),
    }
}

/// What a missing variable is written as.
pub fn missing(mode: Escape) -> &'static [u8] {
    match mode {
        Escape::Default => b"-",
        Escape::Json | Escape::None => b"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn combined_compiles_to_nginx_pieces() {
        let f = LogFormat::combined();
        assert_eq!(f.escape, Escape::Default);
        assert_eq!(f.ops()[0], Op::Var(Var::RemoteAddr));
        assert_eq!(f.ops()[1], Op::Text(b" - ".to_vec()));
        assert_eq!(f.ops()[2], Op::Var(Var::RemoteUser));
        assert_eq!(f.ops()[3], Op::Text(b" [".to_vec()));
        assert_eq!(f.ops()[4], Op::Var(Var::TimeLocal));
        assert_eq!(f.ops().last(), Some(&Op::Text(b"\"".to_vec())));
        let vars = f.ops().iter().filter(|o| matches!(o, Op::Var(_))).count();
        assert_eq!(vars, 8);
    }

    #[test]
    fn strings_join_and_brackets_work() {
        let f = LogFormat::compile(
            "m",
            &args(&["escape=json", "{\"a\":\"${status}x\",", "\"u\":\"$UPSTREAM_ADDR\"}"]),
        )
        .unwrap();
        assert_eq!(f.escape, Escape::Json);
        assert_eq!(
            f.ops(),
            &[
                Op::Text(b"{\"a\":\"".to_vec()),
                Op::Var(Var::Status),
                Op::Text(b"x\",\"u\":\"".to_vec()),
                Op::Var(Var::UpstreamAddr),
                Op::Text(b"\"}".to_vec()),
            ]
        );
        let f = LogFormat::compile("h", &args(&["$http_x_real_ip|$arg_k"])).unwrap();
        assert_eq!(f.ops()[0], Op::Var(Var::Http("x-real-ip".into())));
        assert_eq!(f.ops()[2], Op::Var(Var::Arg("k".into())));
    }

    #[test]
    fn nginx_errors() {
        let err = |a: &[&str]| LogFormat::compile("x", &args(a)).unwrap_err().to_string();
        assert_eq!(err(&["escape=xml", "$status"]), "unknown log format escaping \"xml\"");
        assert_eq!(err(&["a $"]), "invalid parameter \"$\"");
        assert_eq!(err(&["a ${"]), "invalid parameter \"${\"");
        assert_eq!(err(&["a $-b"]), "invalid parameter \"$-b\"");
        assert_eq!(
            err(&["${status"]),
            "the closing bracket in \"status\" variable is missing"
        );
        assert_eq!(err(&["$nope"]), "unknown \"nope\" variable");
    }

    fn esc(v: &[u8], mode: Escape) -> Vec<u8> {
        let mut out = Vec::new();
        append_escaped(&mut out, v, mode);
        assert_eq!(needs_escape(v, mode), out != v, "{v:?}");
        out
    }

    #[test]
    fn default_escape_is_nginx_hex() {
        assert_eq!(esc(b"plain text/1.0", Escape::Default), b"plain text/1.0");
        assert_eq!(esc(b"a\"b\\c", Escape::Default), b"a\\x22b\\x5Cc");
        assert_eq!(
            esc(b"\x01\x1f \x7f\xff\xc3\xa9", Escape::Default),
            b"\\x01\\x1F \\x7F\\xFF\\xC3\\xA9"
        );
        assert_eq!(esc(b"'{}~", Escape::Default), b"'{}~");
    }

    #[test]
    fn json_escape_is_nginx_json() {
        assert_eq!(esc(b"a\"b\\c", Escape::Json), b"a\\\"b\\\\c");
        assert_eq!(esc(b"\n\r\t\x08\x0c", Escape::Json), b"\\n\\r\\t\\b\\f");
        assert_eq!(esc(b"\x01\x1f", Escape::Json), b"\\u0001\\u001F");
        assert_eq!(esc("é\x7f".as_bytes(), Escape::Json), "é\x7f".as_bytes());
        assert_eq!(esc(b"\"\x01", Escape::None), b"\"\x01");
        assert_eq!(missing(Escape::Default), b"-");
        assert_eq!(missing(Escape::Json), b"");
    }
}
