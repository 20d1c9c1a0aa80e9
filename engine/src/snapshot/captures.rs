//! The request's regex captures while a rewrite script runs: `$1`..`$9` and named groups in `set`, `if` and
//! `return` values read the script's captures (the last `rewrite`/`if` match, else the location's), which the
//! request's variables cannot borrow while the script updates them.

use crate::config::key::{Var, VarSource};
use crate::config::regex::Captures;

/// `vars`, with the captures read from `caps` (the request's variables read the server name's otherwise).
pub struct WithCaptures<'a> {
    pub vars: &'a dyn VarSource,
    pub caps: &'a Captures,
}

impl VarSource for WithCaptures<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Capture(n) if !self.caps.is_empty() => out.extend_from_slice(self.caps.group(*n)),
            Var::RegexCapture(name) => {
                if let Some(text) = self.caps.named(name) {
                    out.extend_from_slice(text);
                }
            }
            v => self.vars.append(v, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain;
    impl VarSource for Plain {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            if let Var::Capture(n) = var {
                out.extend_from_slice(format!("server{n}").as_bytes());
            }
        }
    }

    #[test]
    fn the_script_captures_first_then_the_request_variables() {
        let mut caps = Captures::default();
        let eval = |caps: &Captures, v: Var| {
            let mut out = Vec::new();
            WithCaptures { vars: &Plain, caps }.append(&v, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            eval(&caps, Var::Capture(1)),
            "server1",
            "no match yet: the server name's"
        );
        let re = crate::config::regex::compile("^/(?<name>[a-z]+)/(\\d+)$", false).unwrap();
        assert!(re.captures_into(b"/abc/42", &mut caps));
        assert_eq!(eval(&caps, Var::Capture(2)), "42");
        assert_eq!(eval(&caps, Var::RegexCapture("name".into())), "abc");
        assert_eq!(eval(&caps, Var::RegexCapture("other".into())), "");
    }
}
