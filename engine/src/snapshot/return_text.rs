//! A `return` whose text has variables (`return 200 "id=$request_id"`, `return 301 https://$host$request_uri`):
//! compiled at load with the block's maps, evaluated per request into the connection's buffer, and written as
//! the body (`text/plain`) or the `Location` of a redirect.

use super::route::FixedAnswer;
use super::user_vars::Names;
use crate::config::headers::ServerTokens;
use crate::config::key::{KeyTemplate, Part, VarSource};
use crate::config::model::Return;
use crate::http::pages::append_decimal;

/// The compiled text of a `return` with variables.
#[derive(Debug, Clone)]
pub struct ReturnText {
    pub template: KeyTemplate,
    /// 301, 302, 303, 307, 308: the text is the `Location`.
    pub redirect: bool,
}

impl ReturnText {
    /// Writes what the text adds to the head: `Location`, or the body's `Content-Type` and `Content-Length`.
    pub fn write_head(&self, status: u16, text: &[u8], out: &mut Vec<u8>) {
        if self.redirect {
            out.extend_from_slice(b"Location: ");
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
            return;
        }
        // nginx types it whatever its length (`ngx_http_send_response`), but a 204 (its header filter)
        if !text.is_empty() || status != 204 {
            out.extend_from_slice(b"Content-Type: text/plain\r\n");
        }
        if status != 204 && status != 304 {
            out.extend_from_slice(b"Content-Length: ");
            append_decimal(out, text.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The answer of `r`: fixed when its text has no variables, else one evaluated per request (names resolved as
/// the config builder resolved them).
pub fn answer(r: &Return, names: Names<'_>, tokens: ServerTokens) -> FixedAnswer {
    let template = r
        .text
        .as_deref()
        .and_then(|t| KeyTemplate::compile_with(t, &|n| names.resolve(n)).ok())
        .filter(|t| t.parts().iter().any(|p| matches!(p, Part::Var(_))));
    match template {
        Some(t) => FixedAnswer::of_return_text(r, t, tokens),
        None => FixedAnswer::of_return(r, tokens),
    }
}

impl FixedAnswer {
    /// Evaluates the text of an answer with variables into `out` (cleared first; nothing for a fixed answer).
    pub fn eval_text(&self, vars: &dyn VarSource, out: &mut Vec<u8>) {
        out.clear();
        if let Some(t) = &self.text {
            t.template.eval_into(vars, out);
            if t.redirect {
                super::absolute_location::complete(self.headers.redirect_style(), vars, out);
            }
        }
    }

    /// The body's length with `text` evaluated (what `write_text` adds after the head, unless a HEAD request).
    pub fn body_len_with(&self, text: &[u8]) -> usize {
        match &self.text {
            Some(t) if !t.redirect => text.len(),
            _ => self.body_len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;

    struct Src;
    impl VarSource for Src {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::Host => out.extend_from_slice(b"a.example"),
                Var::RequestUri => out.extend_from_slice(b"/x?y"),
                _ => {}
            }
        }
    }

    fn written(r: Return) -> String {
        let a = answer(&r, Names::default(), ServerTokens::On);
        let mut text = Vec::new();
        a.eval_text(&Src, &mut text);
        let mut out = Vec::new();
        a.write_text(&text, b"D", crate::http::keepalive::Connection::KEEP, false, &mut out);
        assert_eq!(
            out.len() - a.body_len_with(&text),
            out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_and_redirects_with_variables() {
        let body = written(Return {
            code: 200,
            text: Some("host=$host".into()),
        });
        assert_eq!(
            body,
            "HTTP/1.1 200 OK\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\
             Connection: keep-alive\r\n\r\nhost=a.example"
        );
        let redirect = written(Return {
            code: 301,
            text: Some("https://$host$request_uri".into()),
        });
        assert!(
            redirect.starts_with(
                "HTTP/1.1 301 Moved Permanently\r\nServer: corelb/0.1.0\r\nDate: D\r\nContent-Type: text/html\r\n"
            ),
            "{redirect}"
        );
        assert!(redirect.contains("\r\nLocation: https://a.example/x?y\r\nConnection: keep-alive\r\n\r\n<html>"));
        let empty = written(Return {
            code: 200,
            text: Some("$http_none".into()),
        });
        assert!(
            empty.ends_with("Content-Length: 0\r\nConnection: keep-alive\r\n\r\n"),
            "{empty}"
        );
        let fixed = answer(
            &Return {
                code: 200,
                text: Some("plain".into()),
            },
            Names::default(),
            ServerTokens::On,
        );
        assert!(fixed.text.is_none());
    }
}
