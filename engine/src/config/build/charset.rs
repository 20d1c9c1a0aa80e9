//! Reading `charset`, `source_charset`, `override_charset` and `charset_types` at one level (merged child over
//! parent), the http block's `charset_map FROM TO { ... }` blocks, and nginx's end-of-configuration check that
//! every recoding a location asks for has a map.

use super::vars::{Module, Vars};
use super::{arg, block_of, flag_slot, unset};
use crate::config::charset::{CharsetConf, CharsetSpec, CharsetTypes, Charsets, Recode};
use crate::config::error::ConfigError;
use crate::config::parser::{Block, Directive};

/// The directives of a level read here.
pub const NAMES: &[&str] = &["charset", "source_charset", "override_charset", "charset_types"];

/// What one level sets.
#[derive(Debug, Clone, Default)]
pub struct CharsetLayer {
    charset: Option<CharsetSpec>,
    source: Option<CharsetSpec>,
    override_charset: Option<bool>,
    types: Option<CharsetTypes>,
}

impl CharsetLayer {
    /// Reads `d` (one of [`NAMES`]).
    pub fn directive(&mut self, vars: &mut Vars, d: &Directive) -> Result<(), ConfigError> {
        match d.name.as_str() {
            "charset" | "source_charset" => {
                let slot = if d.name == "charset" {
                    &mut self.charset
                } else {
                    &mut self.source
                };
                unset(slot, d)?;
                let v = arg(d, 0);
                // `ngx_http_set_charset_slot`: only `charset` takes `off`; a `source_charset off` names a charset
                *slot = Some(if d.name == "charset" && v == "off" {
                    CharsetSpec::Off
                } else if v.starts_with('$') {
                    CharsetSpec::Var(vars.compile(v, Module::Http, &d.span)?)
                } else {
                    CharsetSpec::Name(v.to_string())
                });
            }
            "override_charset" => flag_slot(&mut self.override_charset, d)?,
            "charset_types" => self.types(d),
            _ => {}
        }
        Ok(())
    }

    /// `charset_types` (`ngx_http_types_slot`): lines add up, `*` takes every type.
    fn types(&mut self, d: &Directive) {
        for v in &d.args {
            if self.types == Some(CharsetTypes::Any) {
                return;
            }
            if v == "*" {
                self.types = Some(CharsetTypes::Any);
                return;
            }
            let CharsetTypes::List(list) = self.types.get_or_insert_with(|| CharsetTypes::List(Vec::new())) else {
                return;
            };
            let v = v.to_ascii_lowercase();
            if !list.contains(&v) {
                list.push(v);
            }
        }
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &CharsetLayer) -> CharsetLayer {
        CharsetLayer {
            charset: self.charset.clone().or_else(|| parent.charset.clone()),
            source: self.source.clone().or_else(|| parent.source.clone()),
            override_charset: self.override_charset.or(parent.override_charset),
            types: self.types.clone().or_else(|| parent.types.clone()),
        }
    }

    /// The settings with nginx's defaults for what no level set.
    pub fn conf(&self) -> CharsetConf {
        CharsetConf {
            charset: self.charset.clone().unwrap_or_default(),
            source: self.source.clone().unwrap_or_default(),
            override_charset: self.override_charset.unwrap_or(false),
            types: self.types.clone().unwrap_or_default(),
        }
    }
}

/// The charsets an http block names, registered in the order nginx reads them (the first spelling of a name is
/// the one its answers carry): `charset_map`'s two, and every `charset`/`source_charset` name, depth first.
pub fn names(block: &Block) -> Charsets {
    let mut charsets = Charsets::default();
    register(block, &mut charsets);
    charsets
}

fn register(block: &Block, charsets: &mut Charsets) {
    for d in &block.items {
        match d.name.as_str() {
            "charset_map" => {
                for n in d.args.iter().take(2) {
                    charsets.add(n);
                }
                continue;
            }
            "charset" | "source_charset" => {
                let v = arg(d, 0);
                if !(v.starts_with('$') || d.name == "charset" && v == "off") && d.args.len() == 1 {
                    charsets.add(v);
                }
            }
            _ => {}
        }
        // the levels that take these directives (not a `map`'s or `types`' lines that happen to be named so)
        if let (Some(b), "server" | "location" | "if") = (&d.block, d.name.as_str()) {
            register(b, charsets);
        }
    }
}

/// `charset_map FROM TO { HEX HEX; ... }` (`ngx_http_charset_map_block`): both directions' tables into
/// `charsets` (whose names [`names`] registered).
pub fn charset_map(charsets: &mut Charsets, d: &Directive) -> Result<(), ConfigError> {
    let (from_name, to_name) = (arg(d, 0), arg(d, 1));
    let from = charsets.add(from_name);
    let to = charsets.add(to_name);
    if from == to {
        let msg = format!("\"charset_map\" between the same charsets \"{from_name}\" and \"{to_name}\"");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if from_name.eq_ignore_ascii_case("utf-8") {
        let msg = "\"charset_map\" with \"utf-8\" charset should be given in the second column";
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if charsets.table(from, to).is_some() || charsets.table(to, from).is_some() {
        let msg = format!("duplicate \"charset_map\" between \"{from_name}\" and \"{to_name}\"");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    let block = block_of(d)?;
    let (there, back) = if to_name.eq_ignore_ascii_case("utf-8") {
        utf8_tables(block)?
    } else {
        byte_tables(block)?
    };
    block.close.clone()?;
    charsets.tables.push((from, to, there));
    charsets.tables.push((to, from, back));
    Ok(())
}

/// A line's two values, checked as `ngx_http_charset_map` checks their count.
fn line_values(line: &Directive) -> Result<(&str, &str), ConfigError> {
    if line.block.is_some() || line.args.len() != 1 {
        return Err(ConfigError::invalid("invalid parameters number", &line.span));
    }
    Ok((line.name.as_str(), arg(line, 0)))
}

fn invalid(v: &str, line: &Directive) -> ConfigError {
    ConfigError::invalid(format!("invalid value \"{v}\""), &line.span)
}

/// `ngx_hextoi` of a byte value (0..255).
fn hex_byte(v: &str) -> Option<u8> {
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(v, 16).ok().and_then(|n| u8::try_from(n).ok())
}

/// The tables of a map between single-byte charsets: ASCII to itself, the rest `?` unless a line says.
fn byte_tables(block: &Block) -> Result<(Recode, Recode), ConfigError> {
    let mut there = Box::new([b'?'; 256]);
    let mut back = Box::new([b'?'; 256]);
    for i in 0..128u8 {
        there[usize::from(i)] = i;
        back[usize::from(i)] = i;
    }
    for line in &block.items {
        let (a, b) = line_values(line)?;
        let src = hex_byte(a).ok_or_else(|| invalid(a, line))?;
        let dst = hex_byte(b).ok_or_else(|| invalid(b, line))?;
        there[usize::from(src)] = dst;
        back[usize::from(dst)] = src;
    }
    Ok((Recode::Byte(there), Recode::Byte(back)))
}

/// The tables of a map from a single-byte charset to UTF-8 (each line's second value is the character's UTF-8
/// bytes in hex, at most 3 bytes, a code point up to U+FFFF).
fn utf8_tables(block: &Block) -> Result<(Recode, Recode), ConfigError> {
    let mut there = Box::new([[1, b'?', 0, 0]; 256]);
    let mut back: Box<[Option<Box<[u8; 256]>>; 256]> = Box::new(std::array::from_fn(|_| None));
    let mut first = Box::new([0u8; 256]);
    for i in 0..128u8 {
        there[usize::from(i)] = [1, i, 0, 0];
        first[usize::from(i)] = i;
    }
    back[0] = Some(first);
    for line in &block.items {
        let (a, b) = line_values(line)?;
        let src = hex_byte(a).ok_or_else(|| invalid(a, line))?;
        if b.len() / 2 > 3 || b.len() % 2 != 0 || b.is_empty() {
            return Err(invalid(b, line));
        }
        let mut seq = [0u8; 4];
        let n = b.len() / 2;
        seq[0] = u8::try_from(n).unwrap_or(0);
        for (i, pair) in b.as_bytes().chunks(2).enumerate() {
            let s = std::str::from_utf8(pair).ok().and_then(hex_byte);
            seq[i + 1] = s.ok_or_else(|| invalid(b, line))?;
        }
        let code = match crate::config::charset::utf8_decode(seq.get(1..=n).unwrap_or_default()) {
            (c, _) if c <= 0xffff => c,
            _ => return Err(invalid(b, line)),
        };
        there[usize::from(src)] = seq;
        let page = back[(code >> 8) as usize].get_or_insert_with(|| Box::new([0u8; 256]));
        page[(code & 0xff) as usize] = src;
    }
    Ok((Recode::ToUtf8(there), Recode::FromUtf8(back)))
}

/// nginx's postconfiguration check: a location (or server) whose `source_charset` and `charset` are two different
/// names needs a `charset_map` between them.
pub fn check_recode(charsets: &Charsets, conf: &CharsetConf) -> Result<(), ConfigError> {
    let (CharsetSpec::Name(dst), CharsetSpec::Name(src)) = (&conf.charset, &conf.source) else {
        return Ok(());
    };
    let (Some(d), Some(s)) = (charsets.find(dst.as_bytes()), charsets.find(src.as_bytes())) else {
        return Ok(());
    };
    if d == s || charsets.table(s, d).is_some() {
        return Ok(());
    }
    let name = |i: usize| charsets.list.get(i).map_or("", |c| c.name.as_str()).to_string();
    Err(ConfigError::Emerg {
        msg: format!(
            "no \"charset_map\" between the charsets \"{}\" and \"{}\"",
            name(s),
            name(d)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::charset::DEFAULT_TYPES;

    fn parse(text: &str) -> crate::config::parser::Block {
        crate::config::parser::parse_text(text.as_bytes(), std::path::Path::new("t.conf"))
    }

    #[test]
    fn names_in_reading_order_first_spelling_kept() {
        let b = parse(
            "charset_map koi8-r UTF-8 { C0 D18E; } server { charset Koi8-R; location / { source_charset $x; \
             charset windows-1251; } } map $a $b { charset nope; } types { charset x; }",
        );
        let c = names(&b);
        let list: Vec<_> = c.list.iter().map(|c| (c.name.as_str(), c.utf8)).collect();
        assert_eq!(list, [("koi8-r", false), ("UTF-8", true), ("windows-1251", false)]);
    }

    #[test]
    fn maps_build_both_directions() {
        let b = parse("charset_map B A { 58 59; E0 E1; } charset_map win utf-8 { 80 D082; 88 E282AC; }");
        let mut c = names(&b);
        for d in &b.items {
            charset_map(&mut c, d).unwrap();
        }
        let (bi, ai) = (c.find(b"b").unwrap(), c.find(b"A").unwrap());
        let Some(Recode::Byte(t)) = c.table(bi, ai) else {
            panic!()
        };
        assert_eq!((t[0x58], t[0xe0], t[0x41], t[0x80]), (0x59, 0xe1, 0x41, b'?'));
        let Some(Recode::Byte(back)) = c.table(ai, bi) else {
            panic!()
        };
        assert_eq!((back[0x59], back[0x58]), (0x58, 0x58));
        let (w, u) = (c.find(b"win").unwrap(), c.find(b"UTF-8").unwrap());
        let Some(Recode::ToUtf8(t)) = c.table(w, u) else {
            panic!()
        };
        assert_eq!(
            (t[0x80], t[0x88], t[0x41], t[0x81]),
            (
                [2, 0xd0, 0x82, 0],
                [3, 0xe2, 0x82, 0xac],
                [1, 0x41, 0, 0],
                [1, b'?', 0, 0]
            )
        );
        let Some(Recode::FromUtf8(p)) = c.table(u, w) else {
            panic!()
        };
        assert_eq!(p[0x04].as_ref().unwrap()[0x02], 0x80);
        assert_eq!(p[0x20].as_ref().unwrap()[0xac], 0x88);
        assert_eq!(p[0].as_ref().unwrap()[0x41], 0x41);
    }

    #[test]
    fn map_errors_as_nginx_words_them() {
        let err = |text: &str| {
            let b = parse(text);
            let mut c = names(&b);
            b.items
                .iter()
                .try_for_each(|d| charset_map(&mut c, d))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("charset_map A B { 58 5G; }"),
            "[emerg] invalid value \"5G\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map A B { 100 41; }"),
            "[emerg] invalid value \"100\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map A B { 58 59 5A; }"),
            "[emerg] invalid parameters number in t.conf:1"
        );
        assert_eq!(
            err("charset_map A a { }"),
            "[emerg] \"charset_map\" between the same charsets \"A\" and \"a\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map utf-8 B { }"),
            "[emerg] \"charset_map\" with \"utf-8\" charset should be given in the second column in t.conf:1"
        );
        assert_eq!(
            err("charset_map A B { } charset_map b a { }"),
            "[emerg] duplicate \"charset_map\" between \"b\" and \"a\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map A utf-8 { 80 F0908080; }"),
            "[emerg] invalid value \"F0908080\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map A utf-8 { 80 F09080; }"),
            "[emerg] invalid value \"F09080\" in t.conf:1"
        );
        assert_eq!(
            err("charset_map A utf-8 { 80 D0; }"),
            "[emerg] invalid value \"D0\" in t.conf:1"
        );
    }

    #[test]
    fn layers_merge_and_default_types() {
        let mut vars = Vars::default();
        let mut parent = CharsetLayer::default();
        parent
            .directive(&mut vars, &Directive::at_t_conf("charset", &["utf-8"]))
            .unwrap();
        parent
            .directive(&mut vars, &Directive::at_t_conf("charset_types", &["Text/Foo"]))
            .unwrap();
        let mut child = CharsetLayer::default();
        child
            .directive(&mut vars, &Directive::at_t_conf("source_charset", &["off"]))
            .unwrap();
        let conf = child.over(&parent).conf();
        assert_eq!(conf.charset, CharsetSpec::Name("utf-8".into()));
        assert_eq!(conf.source, CharsetSpec::Name("off".into()), "only `charset` takes off");
        assert_eq!(conf.types, CharsetTypes::List(vec!["text/foo".into()]));
        let d = CharsetLayer::default().conf();
        assert_eq!(
            (d.charset, d.source, d.override_charset),
            (CharsetSpec::Off, CharsetSpec::Off, false)
        );
        assert!(DEFAULT_TYPES.iter().all(|t| d.types.matches(t.as_bytes())));
        let e = parent
            .directive(&mut vars, &Directive::at_t_conf("charset", &["koi8-r"]))
            .unwrap_err();
        assert_eq!(e.to_string(), "[emerg] \"charset\" directive is duplicate in t.conf:3");
    }
}
