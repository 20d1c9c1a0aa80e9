//! Key templates: nginx "complex values" (`"$host$request_uri"`) compiled once at load, evaluated per request.

use std::fmt;

/// A variable a template may name. Names follow nginx; `$http_*`, `$arg_*` and `$cookie_*` carry their suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    RemoteAddr,
    /// The client address as 4 (IPv4) or 16 (IPv6) bytes.
    BinaryRemoteAddr,
    RemotePort,
    ServerAddr,
    ServerPort,
    RequestUri,
    Uri,
    Args,
    Host,
    RequestMethod,
    Scheme,
    ProxyHost,
    ProxyAddXForwardedFor,
    /// `$http_NAME`: the request header NAME, with `_` read as `-`, case-insensitive (stored lower-case with `-`).
    Http(String),
    /// `$arg_NAME`: the query argument NAME (case-insensitive, as nginx).
    Arg(String),
    /// `$cookie_NAME`: the cookie NAME (stored lower-case; nginx lower-cases variable names and matches cookie
    /// names without case).
    Cookie(String),
}

impl Var {
    /// The variable of an nginx name (without `$`; case-insensitive, as nginx), or `None` if corelb does not know it.
    pub fn from_name(name: &str) -> Option<Var> {
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_str() {
            "remote_addr" => Var::RemoteAddr,
            "binary_remote_addr" => Var::BinaryRemoteAddr,
            "remote_port" => Var::RemotePort,
            "server_addr" => Var::ServerAddr,
            "server_port" => Var::ServerPort,
            "request_uri" => Var::RequestUri,
            "uri" | "document_uri" => Var::Uri,
            "args" | "query_string" => Var::Args,
            "host" => Var::Host,
            "request_method" => Var::RequestMethod,
            "scheme" => Var::Scheme,
            "proxy_host" => Var::ProxyHost,
            "proxy_add_x_forwarded_for" => Var::ProxyAddXForwardedFor,
            _ => {
                if let Some(h) = lower.strip_prefix("http_").filter(|s| !s.is_empty()) {
                    Var::Http(h.to_ascii_lowercase().replace('_', "-"))
                } else if let Some(a) = lower.strip_prefix("arg_").filter(|s| !s.is_empty()) {
                    Var::Arg(a.to_ascii_lowercase())
                } else if let Some(c) = lower.strip_prefix("cookie_").filter(|s| !s.is_empty()) {
                    Var::Cookie(c.to_string())
                } else {
                    return None;
                }
            }
        })
    }
}

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
            let (name, next) = if b.get(i) == Some(&b'{') {
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
            let var = Var::from_name(name).ok_or_else(|| KeyError::UnknownVariable(name.into()))?;
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
        assert!(matches!(
            KeyTemplate::compile("$http_"),
            Err(KeyError::UnknownVariable(_))
        ));
    }
}
