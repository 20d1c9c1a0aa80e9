//! PCRE syntax the `regex` crate spells otherwise, rewritten at load: `\Q...\E` quoting, and Unicode properties
//! (`\p{N}`, `\pL`, `\P{..}`) read as PCRE2 reads them without UTF, over the 256 byte values (Latin-1 code
//! points), as byte classes.

use regex_syntax::hir::{Class, HirKind};
use std::fmt::Write;

/// The pattern in the `regex` crate's syntax, if it differs from `pattern` (`None`: use it as written).
pub fn translate(pattern: &str) -> Option<String> {
    if !pattern.contains("\\Q") && !pattern.contains("\\E") && !pattern.contains("\\p") && !pattern.contains("\\P") {
        return None;
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.char_indices().peekable();
    let mut quoting = false;
    while let Some((i, c)) = chars.next() {
        if quoting {
            if c == '\\' && chars.peek().map(|p| p.1) == Some('E') {
                chars.next();
                quoting = false;
            } else {
                out.push_str(&regex_syntax::escape(c.encode_utf8(&mut [0; 4])));
            }
            continue;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((j, next)) = chars.next() else {
            out.push(c);
            break;
        };
        match next {
            'Q' => quoting = true,
            'E' => {}
            'p' | 'P' => {
                let start = j + next.len_utf8();
                let end = match pattern.get(start..).and_then(|r| r.strip_prefix('{')) {
                    Some(r) => r.find('}').map(|e| start + e + 2),
                    None => pattern
                        .get(start..)
                        .and_then(|r| r.chars().next())
                        .map(|c| start + c.len_utf8()),
                };
                let class = end.and_then(|e| pattern.get(i..e).map(|text| (e, byte_class(text))));
                match class {
                    Some((e, Some(bytes))) => {
                        out.push_str(&bytes);
                        while chars.peek().is_some_and(|p| p.0 < e) {
                            chars.next();
                        }
                    }
                    // not a property the `regex` crate knows: left for its parser to refuse
                    _ => {
                        out.push(c);
                        out.push(next);
                    }
                }
            }
            other => {
                out.push(c);
                out.push(other);
            }
        }
    }
    Some(out)
}

/// The byte class of the property escape `text` (`\p{N}`...): the code points up to U+00FF it holds, as bytes.
fn byte_class(text: &str) -> Option<String> {
    let hir = regex_syntax::ParserBuilder::new().build().parse(text).ok()?;
    let HirKind::Class(Class::Unicode(class)) = hir.kind() else {
        return None;
    };
    let mut out = String::from("[");
    for r in class.ranges() {
        let (start, end) = (u32::from(r.start()), u32::from(r.end()).min(0xff));
        if start > 0xff {
            break;
        }
        let _ = write!(out, "\\x{start:02x}");
        if end > start {
            let _ = write!(out, "-\\x{end:02x}");
        }
    }
    if out.len() == 1 {
        // no byte has it: a class nothing matches
        out.push_str("^\\x00-\\xff");
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_becomes_escapes() {
        assert_eq!(translate(r"^a\Q.b*\Ec$").as_deref(), Some(r"^a\.b\*c$"));
        assert_eq!(translate(r"\Q.x").as_deref(), Some(r"\.x"), "quoted to the end");
        assert_eq!(translate(r"a\E\.b").as_deref(), Some(r"a\.b"), "a lone \\E is nothing");
        assert_eq!(translate(r"^a\.b$"), None);
    }

    #[test]
    fn properties_become_latin1_byte_classes() {
        assert_eq!(
            translate(r"^\p{N}+$").as_deref(),
            Some(r"^[\x30-\x39\xb2-\xb3\xb9\xbc-\xbe]+$")
        );
        assert_eq!(translate(r"\pN").as_deref(), Some(r"[\x30-\x39\xb2-\xb3\xb9\xbc-\xbe]"));
        let not = translate(r"\P{N}").unwrap();
        assert!(not.starts_with(r"[\x00-\x2f\x3a-"), "{not}");
        assert_eq!(translate(r"\p{Bogus}").as_deref(), Some(r"\p{Bogus}"));
    }
}
