//! The named groups of an http block's location, `rewrite` and `if` regexes (`location ~ ^/(?<name>.+)$`): each
//! is a variable of the block, as nginx's `ngx_http_regex_compile` adds one per name, read before the block is
//! built so that a value naming one may come before the regex (an access log format at the top, say).

use crate::config::parser::{Block, Directive};
use crate::config::regex;

/// The pattern (and whether caseless) of a regex in `d`, if it is a regex location, `rewrite` or regex `if`.
fn pattern(d: &Directive) -> Option<(&str, bool)> {
    let arg = |i: usize| d.args.get(i).map(String::as_str);
    match d.name.as_str() {
        "location" => match arg(0)? {
            "~" => Some((arg(1)?, false)),
            "~*" => Some((arg(1)?, true)),
            _ => None,
        },
        "rewrite" => Some((arg(0)?, false)),
        "if" => {
            let i = d
                .args
                .iter()
                .position(|a| matches!(a.as_str(), "~" | "~*" | "!~" | "!~*"))?;
            let value = arg(i + 1)?;
            let value = value.strip_suffix(')').unwrap_or(value);
            Some((value, arg(i)?.ends_with('*')))
        }
        _ => None,
    }
}

fn collect(block: &Block, out: &mut Vec<String>) {
    for d in &block.items {
        if let Some(re) = pattern(d).and_then(|(p, caseless)| regex::compile(p, caseless).ok()) {
            for (_, name) in re.names() {
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_string());
                }
            }
        }
        if let Some(inner) = &d.block {
            collect(inner, out);
        }
    }
}

/// The named groups of every location, `rewrite` and `if` regex in `http` (nested ones too), each once, in
/// config order (a bad pattern is reported where its directive is read).
pub fn regex_group_names(http: &Block) -> Vec<String> {
    let mut out = Vec::new();
    collect(http, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_of_locations_rewrites_and_ifs() {
        let text = "http { server { location ~ ^/(?<name>[a-z]+)/(?P<id>\\d+)$ { location ~* (?<ext>\\.png)$ {} }\n\
                    rewrite ^/old/(?<rest>.*)$ /new/$rest; if ($uri ~ ^/(?<name>x)(?<tail>.*)) { return 200; }\n\
                    location /plain {} location ~ ( {} } }";
        let tree = crate::config::parser::parse_text(text.as_bytes(), Path::new("t.conf"));
        let http = tree
            .items
            .iter()
            .find(|d| d.name == "http")
            .and_then(|d| d.block.as_ref())
            .unwrap();
        assert_eq!(regex_group_names(http), ["name", "id", "ext", "rest", "tail"]);
    }
}
