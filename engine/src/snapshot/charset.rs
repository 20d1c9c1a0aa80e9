//! A location's charset plan, `None` where the filter can change nothing (no `charset` and no charset known to
//! the block): nginx's `ngx_http_charset_header_filter` as one decision per answer — which charset the
//! `Content-Type` names, whether the type is cut before its parameters, and which table recodes the body.

use crate::config::charset::{CharsetConf, CharsetSpec, CharsetTypes, Charsets, Recode};
use crate::config::key::{KeyTemplate, VarSource};
use crate::http::charset::ContentType;
use std::sync::Arc;

/// A `charset`/`source_charset` resolved against the block's charsets.
#[derive(Debug, Clone)]
enum Resolved {
    Off,
    Known(usize),
    Var(KeyTemplate),
}

/// The compiled settings.
#[derive(Debug, Clone)]
pub struct CharsetPlan {
    charsets: Arc<Charsets>,
    charset: Resolved,
    source: Resolved,
    override_charset: bool,
    types: CharsetTypes,
}

/// What the answer says, for the decision.
#[derive(Debug, Clone, Copy)]
pub struct AnswerCharset<'a> {
    pub status: u16,
    pub content_type: ContentType<'a>,
    /// An upstream's `X-Accel-Charset` (unless `proxy_ignore_headers` drops it).
    pub accel_charset: Option<&'a [u8]>,
    /// The answer has a `Content-Encoding`: it is never recoded.
    pub encoded: bool,
}

/// Where the charset written after the type comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameFrom {
    /// The name as the block registered it.
    Known(usize),
    /// `X-Accel-Charset` as the upstream sent it.
    Accel,
    /// The value of `charset $var`.
    Var,
    /// None: a 301 or 302 gets no charset (nginx: "NN 4.x use this charset instead of the next page charset").
    Cleared,
}

/// What the filter does to one answer.
#[derive(Debug, Clone, Copy)]
pub struct CharsetEdit<'p> {
    /// The type is cut before its parameters (`content_type.len = content_type_len`).
    pub cut: bool,
    pub name: NameFrom,
    /// The body's recoding table.
    pub recode: Option<&'p Recode>,
}

/// A connection's charset buffers: the request's values of `charset $var` and `source_charset $var`, and the
/// recoder's output and file input (lent to an answer that recodes).
#[derive(Debug, Default)]
pub struct CharsetScratch {
    pub dst: Vec<u8>,
    pub src: Vec<u8>,
    pub out: Vec<u8>,
    pub input: Vec<u8>,
    /// A file's `Content-Type` with its charset.
    pub content_type: String,
}

/// The buffers of a connection that never used the filter.
static NO_SCRATCH: CharsetScratch = CharsetScratch {
    dst: Vec::new(),
    src: Vec::new(),
    out: Vec::new(),
    input: Vec::new(),
    content_type: String::new(),
};

impl CharsetScratch {
    /// The buffers a connection holds (boxed, made on first use: a connection set that never recodes carries a
    /// pointer), to read.
    pub fn of(slot: &Option<Box<CharsetScratch>>) -> &CharsetScratch {
        slot.as_deref().unwrap_or(&NO_SCRATCH)
    }

    /// The buffers a connection holds, made on first use.
    pub fn lent(slot: &mut Option<Box<CharsetScratch>>) -> &mut CharsetScratch {
        slot.get_or_insert_with(Default::default)
    }
}

impl CharsetPlan {
    /// The plan of `conf` in a block with `charsets`, or `None` when nothing can change its answers.
    pub fn of(conf: &CharsetConf, charsets: &Arc<Charsets>) -> Option<Arc<CharsetPlan>> {
        if !conf.on() && !charsets.any() {
            return None;
        }
        let resolve = |s: &CharsetSpec| match s {
            CharsetSpec::Off => Resolved::Off,
            CharsetSpec::Name(n) => charsets.find(n.as_bytes()).map_or(Resolved::Off, Resolved::Known),
            CharsetSpec::Var(t) => Resolved::Var(t.clone()),
        };
        Some(Arc::new(CharsetPlan {
            charsets: charsets.clone(),
            charset: resolve(&conf.charset),
            source: resolve(&conf.source),
            override_charset: conf.override_charset,
            types: conf.types.clone(),
        }))
    }

    /// Evaluates the request's `charset $var` and `source_charset $var` into `scratch` (while the request's
    /// variables are at hand, when it is routed).
    pub fn prepare(&self, vars: &dyn VarSource, scratch: &mut CharsetScratch) {
        if let Resolved::Var(t) = &self.charset {
            t.eval_into(vars, &mut scratch.dst);
        }
        if let Resolved::Var(t) = &self.source {
            t.eval_into(vars, &mut scratch.src);
        }
    }

    /// The decision for answer `a` (`None`: the filter leaves it alone), with the variables [`Self::prepare`]
    /// evaluated; the errors nginx logs are logged.
    pub fn decide(&self, a: &AnswerCharset<'_>, scratch: &CharsetScratch) -> Option<CharsetEdit<'_>> {
        let ct = &a.content_type;
        // ngx_http_destination_charset
        if ct.value.is_empty() {
            return None;
        }
        let (dst, name) = match a.accel_charset.filter(|v| !v.is_empty()) {
            Some(v) => match self.charsets.find(v) {
                Some(i) => (Some(i), NameFrom::Accel),
                None => {
                    crate::log_error!("unknown charset \"{}\" to override", String::from_utf8_lossy(v));
                    return None;
                }
            },
            None => {
                if matches!(self.charset, Resolved::Off) {
                    return None;
                }
                if !ct.charset.is_empty() {
                    if !self.override_charset {
                        return None;
                    }
                } else if !self.types.matches(ct.bare_type()) {
                    return None;
                }
                match &self.charset {
                    Resolved::Known(i) => (Some(*i), NameFrom::Known(*i)),
                    Resolved::Var(_) => {
                        // nginx fails the request on a variable that is not found; corelb leaves the answer alone
                        if scratch.dst.is_empty() {
                            return None;
                        }
                        (self.charsets.find(&scratch.dst), NameFrom::Var)
                    }
                    Resolved::Off => return None,
                }
            }
        };
        let dst_name: &[u8] = match name {
            NameFrom::Known(i) => self.charsets.list.get(i).map_or(b"", |c| c.name.as_bytes()),
            NameFrom::Accel => a.accel_charset.unwrap_or_default(),
            _ => &scratch.dst,
        };
        // ngx_http_source_charset
        let (src, src_name): (Option<usize>, &[u8]) = if !ct.charset.is_empty() {
            (self.charsets.find(ct.charset), ct.charset)
        } else {
            match &self.source {
                Resolved::Off => {
                    return Some(self.set(a.status, false, name, None));
                }
                Resolved::Known(i) => (Some(*i), self.charsets.list.get(*i).map_or(b"", |c| c.name.as_bytes())),
                Resolved::Var(_) => (self.charsets.find(&scratch.src), &scratch.src),
            }
        };
        let no_map = |src_name: &[u8], dst_name: &[u8]| {
            crate::log_error!(
                "no \"charset_map\" between the charsets \"{}\" and \"{}\"",
                String::from_utf8_lossy(src_name),
                String::from_utf8_lossy(dst_name)
            );
        };
        let (Some(src), Some(dst)) = (src, dst) else {
            // `ngx_strncasecmp(dst, src, dst.len)`
            let same = src_name
                .get(..dst_name.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(dst_name));
            if src != dst || !same {
                no_map(src_name, dst_name);
                return None;
            }
            return Some(self.set(a.status, false, name, None));
        };
        if src == dst {
            return Some(self.set(a.status, true, name, None));
        }
        if a.encoded {
            return None;
        }
        let Some(table) = self.charsets.table(src, dst) else {
            no_map(src_name, dst_name);
            return None;
        };
        Some(self.set(a.status, true, name, Some(table)))
    }

    /// `ngx_http_set_charset`: no charset on a 301 or 302.
    fn set<'p>(&'p self, status: u16, cut: bool, name: NameFrom, recode: Option<&'p Recode>) -> CharsetEdit<'p> {
        let name = if matches!(status, 301 | 302) {
            NameFrom::Cleared
        } else {
            name
        };
        CharsetEdit { cut, name, recode }
    }

    /// The charset name an edit writes.
    pub fn name<'a>(
        &'a self,
        edit: &CharsetEdit<'_>,
        accel: Option<&'a [u8]>,
        scratch: &'a CharsetScratch,
    ) -> &'a [u8] {
        match edit.name {
            NameFrom::Known(i) => self.charsets.list.get(i).map_or(b"", |c| c.name.as_bytes()),
            NameFrom::Accel => accel.unwrap_or_default(),
            NameFrom::Var => &scratch.dst,
            NameFrom::Cleared => b"",
        }
    }

    /// The `Content-Type` value the edit makes of `ct` (appended to `out`, without the header's name).
    pub fn write_content_type(
        &self,
        ct: &ContentType<'_>,
        edit: Option<&CharsetEdit<'_>>,
        name: &[u8],
        out: &mut Vec<u8>,
    ) {
        let Some(e) = edit else {
            out.extend_from_slice(ct.value);
            return;
        };
        let value = if e.cut { ct.bare_type() } else { ct.value };
        // nginx's header filter: the charset after a type without parameters (`headers_out.charset` is the
        // new name, or empty when cleared)
        ContentType {
            value,
            base_len: ct.base_len,
            charset: name,
        }
        .write(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::Var;

    struct NoVars;
    impl VarSource for NoVars {
        fn append(&self, _: &Var, _: &mut Vec<u8>) {}
    }

    fn charsets() -> Arc<Charsets> {
        let text = "charset_map B A { 58 59; } charset_map koi8-r utf-8 { C1 D0B0; }";
        let block = crate::config::parser::parse_text(text.as_bytes(), std::path::Path::new("t.conf"));
        Arc::new(crate::config::load_charsets_for_tests(&block))
    }

    fn plan(charset: &str, source: &str, override_charset: bool) -> Arc<CharsetPlan> {
        let spec = |s: &str| match s {
            "off" => CharsetSpec::Off,
            n => CharsetSpec::Name(n.into()),
        };
        let conf = CharsetConf {
            charset: spec(charset),
            source: spec(source),
            override_charset,
            types: CharsetTypes::default(),
        };
        let mut c = (*charsets()).clone();
        for n in [charset, source] {
            if n != "off" {
                c.add(n);
            }
        }
        CharsetPlan::of(&conf, &Arc::new(c)).unwrap()
    }

    /// The `Content-Type` the plan writes for an answer, and whether it recodes.
    fn content_type(p: &CharsetPlan, status: u16, ct: ContentType<'_>, accel: Option<&[u8]>) -> (String, bool) {
        let a = AnswerCharset {
            status,
            content_type: ct,
            accel_charset: accel,
            encoded: false,
        };
        let scratch = CharsetScratch::default();
        p.prepare(&NoVars, &mut CharsetScratch::default());
        let edit = p.decide(&a, &scratch);
        let mut out = Vec::new();
        let name = edit.map_or(b"".as_slice(), |e| p.name(&e, accel, &scratch)).to_vec();
        p.write_content_type(&ct, edit.as_ref(), &name, &mut out);
        (
            String::from_utf8(out).unwrap(),
            edit.is_some_and(|e| e.recode.is_some()),
        )
    }

    #[test]
    fn content_types_as_nginx_writes_them() {
        let utf8 = plan("utf-8", "off", false);
        let html = ContentType::bare(b"text/html");
        assert_eq!(
            content_type(&utf8, 200, html, None),
            ("text/html; charset=utf-8".into(), false)
        );
        assert_eq!(content_type(&utf8, 404, html, None).0, "text/html; charset=utf-8");
        assert_eq!(
            content_type(&utf8, 302, html, None).0,
            "text/html",
            "no charset on a redirect"
        );
        assert_eq!(
            content_type(&utf8, 200, ContentType::bare(b"text/foo"), None).0,
            "text/foo"
        );
        assert_eq!(content_type(&utf8, 200, ContentType::bare(b""), None).0, "");
        let up = ContentType::of_upstream(b"text/html; charset=koi8-r");
        assert_eq!(
            content_type(&utf8, 200, up, None),
            ("text/html; charset=koi8-r".into(), false)
        );
        let over = plan("utf-8", "off", true);
        assert_eq!(
            content_type(&over, 200, up, None),
            ("text/html; charset=utf-8".into(), true)
        );
        let same = ContentType::of_upstream(b"text/html; charset=UTF-8");
        assert_eq!(
            content_type(&over, 200, same, None),
            ("text/html; charset=utf-8".into(), false)
        );
        let ab = plan("A", "B", false);
        assert_eq!(
            content_type(&ab, 200, html, None),
            ("text/html; charset=A".into(), true)
        );
        assert_eq!(content_type(&ab, 302, html, None), ("text/html".into(), true));
        // X-Accel-Charset names the charset whatever the location says
        let off = plan("off", "B", false);
        assert_eq!(
            content_type(&off, 200, html, Some(b"a")),
            ("text/html; charset=a".into(), true)
        );
        assert_eq!(
            content_type(&off, 200, html, Some(b"nope")),
            ("text/html".into(), false)
        );
        assert_eq!(content_type(&off, 200, html, None), ("text/html".into(), false));
        // no map between two charsets: logged, left alone
        let ka = plan("koi8-r", "B", false);
        assert_eq!(content_type(&ka, 200, html, None), ("text/html".into(), false));
    }

    #[test]
    fn encoded_answers_are_named_but_not_recoded() {
        let ab = plan("A", "B", false);
        let a = AnswerCharset {
            status: 200,
            content_type: ContentType::bare(b"text/html"),
            accel_charset: None,
            encoded: true,
        };
        assert!(ab.decide(&a, &CharsetScratch::default()).is_none());
        let utf8 = plan("utf-8", "off", false);
        let e = utf8.decide(&a, &CharsetScratch::default()).unwrap();
        assert!(e.recode.is_none() && !e.cut);
    }

    #[test]
    fn no_plan_without_charsets() {
        assert!(CharsetPlan::of(&CharsetConf::default(), &Arc::new(Charsets::default())).is_none());
        assert!(CharsetPlan::of(&CharsetConf::default(), &charsets()).is_some());
    }
}
