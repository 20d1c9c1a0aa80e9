//! Which locations read `$request_body` (known at load): their requests' bodies are read into the client buffer
//! before the location's values are evaluated; every other location streams bodies as before.

use crate::config::key::{KeyTemplate, Part, Var};
use crate::config::model::Location;
use crate::config::rewrite::{Cond, Piece, RewriteOp};

fn in_template(t: &KeyTemplate) -> bool {
    t.parts().iter().any(|p| matches!(p, Part::Var(Var::RequestBody)))
}

fn in_pieces(pieces: &[Piece]) -> bool {
    pieces.iter().any(|p| matches!(p, Piece::Var(Var::RequestBody)))
}

fn in_script(ops: &[RewriteOp]) -> bool {
    ops.iter().any(|op| match op {
        RewriteOp::Set { value, .. } => in_pieces(value),
        RewriteOp::Rewrite { replacement, .. } => in_pieces(replacement),
        RewriteOp::Return(r) => r.text.as_deref().is_some_and(in_text),
        RewriteOp::Break => false,
        RewriteOp::If { cond, then } => {
            let c = match cond {
                Cond::Var(t) => in_template(t),
                Cond::Equals { value, to, .. } => in_template(value) || in_template(to),
                Cond::Matches { value, .. } => in_template(value),
                Cond::File { path, .. } => in_template(path),
            };
            c || in_script(then)
        }
    })
}

/// A raw text (a `return`'s, compiled later) naming the variable.
fn in_text(raw: &str) -> bool {
    let lower = raw.to_ascii_lowercase();
    lower.contains("$request_body") || lower.contains("${request_body}")
}

/// Whether a value of `loc` reads `$request_body`: its `add_header`, `proxy_set_header`, `proxy_set_body`,
/// `return` and rewrite script (`set` values among them).
pub fn uses(loc: &Location) -> bool {
    loc.headers.add.iter().any(|h| in_template(&h.value))
        || loc.proxy.set_headers.iter().any(|(_, t)| in_template(t))
        || loc.proxy.set_body.as_ref().is_some_and(in_template)
        || loc.ret.as_ref().and_then(|r| r.text.as_deref()).is_some_and(in_text)
        || in_script(&loc.script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_in_texts_and_scripts() {
        assert!(in_text("x=${Request_Body}") && in_text("$request_body") && !in_text("$request_bod"));
        let set = RewriteOp::Set {
            target: crate::config::rewrite::SetTarget::User(0),
            value: vec![Piece::Var(Var::RequestBody)],
        };
        let nested = RewriteOp::If {
            cond: Cond::Var(KeyTemplate::literal("1")),
            then: vec![set],
        };
        assert!(in_script(&[RewriteOp::Break, nested]));
        assert!(!in_script(&[RewriteOp::Break]));
        let text = "events {}\nhttp {\n server {\n  listen 127.0.0.1:1;\n  location /a { return 200 a; }\n  \
                    location /b { add_header X-B $request_body; }\n  location /c { return 200 $request_body; }\n  \
                    location /d { set $x $request_body; }\n }\n}\n";
        let config = crate::config::parse_str(text, std::path::Path::new("t.conf")).unwrap();
        let locs = &config.http.as_ref().unwrap().servers[0].locations;
        let used: Vec<bool> = locs.iter().map(uses).collect();
        assert_eq!(used, [false, true, true, true]);
    }
}
