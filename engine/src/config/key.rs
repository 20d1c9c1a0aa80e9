//! Key templates: nginx "complex values" (`"$host$request_uri"`) compiled once at load, evaluated per request.

use std::fmt;

pub use super::var::{Phase, Var};

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(Vec<u8>),
    Var(Var),
}

/// Where a template's variables get their values (a request, a connection, a trace line).
pub trait VarSource {
    /// Appends the value of `var` to `out`; an unset variable appends nothing, as in nginx.
    fn append(&self, var: &Var, out: &mut Vec<u8>);
}

/// Why a template did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("unknown \"{0}\" variable")]
    UnknownVariable(String),
    #[error("invalid variable name in \"{0}\"")]
    InvalidName(String),
}

/// A compiled template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    raw: String,
    parts: Vec<Part>,
}

impl KeyTemplate {
    /// Compiles nginx's `$name` and `${name}` syntax; everything else is literal text.
    pub fn compile(raw: &str) -> Result<KeyTemplate, KeyError> {
        Self::compile_with(raw, &|name| Var::from_name(name))
    }

    /// [`KeyTemplate::compile`] with the names resolved by `resolve` (a block's `map` variables, captures).
    pub fn compile_with(raw: &str, resolve: &dyn Fn(&str) -> Option<Var>) -> Result<KeyTemplate, KeyError> {
        let b = raw.as_bytes();
        let mut parts = Vec::new();
        let mut text = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                text.push(b[i]);
                i += 1;
                continue;
            }
            i += 1;
            let digit = b
                .get(i)
                .filter(|c| (b'1'..=b'9').contains(*c))
                .map(|c| usize::from(c - b'0'));
            let (name, next) = if let Some(n) = digit {
                // `$1`..`$9`: one digit, as nginx reads captures
                let var = resolve(raw.get(i..i + 1).unwrap_or_default())
                    .ok_or_else(|| KeyError::UnknownVariable(n.to_string()))?;
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(Part::Var(var));
                i += 1;
                continue;
            } else if b.get(i) == Some(&b'{') {
                let end = b[i + 1..]
                    .iter()
                    .position(|&c| c == b'}')
                    .ok_or_else(|| KeyError::InvalidName(raw.into()))?;
                (&raw[i + 1..i + 1 + end], i + end + 2)
            } else {
                let len = b[i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
                (&raw[i..i + len], i + len)
            };
            if name.is_empty() {
                return Err(KeyError::InvalidName(raw.into()));
            }
            let var = resolve(name).ok_or_else(|| KeyError::UnknownVariable(name.into()))?;
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Var(var));
            i = next;
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(KeyTemplate { raw: raw.into(), parts })
    }

    /// A template of literal text only (a `$` in it stays text).
    pub fn literal(text: &str) -> KeyTemplate {
        let parts = if text.is_empty() {
            Vec::new()
        } else {
            vec![Part::Text(text.as_bytes().to_vec())]
        };
        KeyTemplate {
            raw: text.into(),
            parts,
        }
    }

    /// The template as written in the config.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Whether the template has no variable (its value is its text).
    pub fn is_constant(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// The compiled pieces.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Whether the template is a single variable equal to `var`.
    pub fn is_only(&self, var: &Var) -> bool {
        matches!(self.parts.as_slice(), [Part::Var(v)] if v == var)
    }

    /// Clears `out` and writes the value into it (a reused buffer: no allocation once it has grown).
    pub fn eval_into(&self, src: &dyn VarSource, out: &mut Vec<u8>) {
        out.clear();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t),
                Part::Var(v) => src.append(v, out),
            }
        }
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Src;
    impl VarSource for Src {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Host => out.extend_from_slice(b"example.com"),
                Var::RequestUri => out.extend_from_slice(b"/a?b=1"),
                Var::Arg(a) if a == "k" => out.extend_from_slice(b"v"),
                _ => {}
            }
        }
    }

    #[test]
    fn compiles_and_evaluates() {
        let t = KeyTemplate::compile("$host$request_uri").unwrap();
        let mut out = Vec::new();
        t.eval_into(&Src, &mut out);
        assert_eq!(out, b"example.com/a?b=1");
        let t = KeyTemplate::compile("k=${arg_k}-x$http_x_real_ip").unwrap();
        t.eval_into(&Src, &mut out);
        assert_eq!(out, b"k=v-x");
        assert_eq!(t.parts()[3], Part::Var(Var::Http("x-real-ip".into())));
        assert!(KeyTemplate::compile("$remote_addr").unwrap().is_only(&Var::RemoteAddr));
        // variable names are case-insensitive, as in nginx (which also matches cookie names without case)
        assert!(KeyTemplate::compile("$Remote_Addr").unwrap().is_only(&Var::RemoteAddr));
        assert!(KeyTemplate::compile("$COOKIE_Sid")
            .unwrap()
            .is_only(&Var::Cookie("sid".into())));
    }

    #[test]
    fn rejects_unknown_and_empty_names() {
        assert_eq!(
            KeyTemplate::compile("$nope"),
            Err(KeyError::UnknownVariable("nope".into()))
        );
        assert!(matches!(KeyTemplate::compile("a$"), Err(KeyError::InvalidName(_))));
        assert!(matches!(KeyTemplate::compile("${host"), Err(KeyError::InvalidName(_))));
        // nginx takes a prefix alone (`$http_`, `$arg_`): an empty value
        assert!(KeyTemplate::compile("$http_").is_ok());
    }
}
