//! The charset filter on the proxy's answers: the decision for an upstream's head (its `Content-Type`,
//! `X-Accel-Charset`, `Content-Encoding`), the head edits it makes (the `Content-Type` written again, no
//! `Content-Length` when UTF-8 changes the length), and the body recoder that streams, alone or in front of gzip.

use super::gzip::{Coder, GzipStream};
use crate::config::charset::Recode;
use crate::http::charset::{ContentType, Recoder};
use crate::http::response::{HeadEdits, ResponseHead};
use crate::snapshot::charset::{AnswerCharset, CharsetEdit, CharsetPlan, CharsetScratch};

/// The headers the filter reads off an upstream answer.
pub fn upstream_answer<'a>(resp: &ResponseHead<'_, 'a>, accel_charset: bool) -> AnswerCharset<'a> {
    let mut a = AnswerCharset {
        status: resp.status,
        content_type: ContentType::bare(b""),
        accel_charset: None,
        encoded: false,
    };
    for h in resp.headers {
        let n = h.name;
        if n.eq_ignore_ascii_case("content-type") {
            a.content_type = ContentType::of_upstream(h.value);
        } else if n.eq_ignore_ascii_case("content-encoding") {
            a.encoded |= !h.value.is_empty();
        } else if accel_charset && n.eq_ignore_ascii_case("x-accel-charset") {
            a.accel_charset = Some(h.value);
        }
    }
    a
}

/// The head edits of a proxied answer the charset filter changes, over the location's own edits.
pub struct CharsetEdits<'a> {
    pub inner: &'a dyn HeadEdits,
    pub plan: &'a CharsetPlan,
    pub edit: CharsetEdit<'a>,
    /// The charset name written.
    pub name: &'a [u8],
}

impl CharsetEdits<'_> {
    fn length_changes(&self) -> bool {
        self.edit.recode.is_some_and(|r| !matches!(r, Recode::Byte(_)))
    }
}

impl HeadEdits for CharsetEdits<'_> {
    fn server(&self) -> &str {
        self.inner.server()
    }
    fn passes(&self, name: &str) -> bool {
        self.inner.passes(name)
    }
    fn upstream_line(&self, status: u16, name: &str, value: &[u8], out: &mut Vec<u8>) -> bool {
        if name.eq_ignore_ascii_case("content-type") {
            if self.inner.upstream_line(status, name, value, out) {
                return true;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            let ct = ContentType::of_upstream(value);
            self.plan.write_content_type(&ct, Some(&self.edit), self.name, out);
            out.extend_from_slice(b"\r\n");
            return true;
        }
        // `ngx_http_clear_content_length` when UTF-8 is on either side
        if self.length_changes() && name.eq_ignore_ascii_case("content-length") {
            return true;
        }
        self.inner.upstream_line(status, name, value, out)
    }
    fn append(&self, status: u16, last_modified: Option<&[u8]>, out: &mut Vec<u8>) {
        self.inner.append(status, last_modified, out);
    }
}

/// The charset filter on one of corelb's own answers (a `return`, an error page), whose head `out` holds up to
/// its `Connection` line: the charset appended to its `Content-Type` as nginx's header filter writes it (the
/// body is not recoded: see docs/directives.md); `scratch` lends a buffer.
pub fn own_answer(plan: &CharsetPlan, status: u16, out: &mut Vec<u8>, scratch: &mut CharsetScratch) {
    const NAME: &[u8] = b"\r\nContent-Type: ";
    let Some(start) = out.windows(NAME.len()).position(|w| w == NAME).map(|i| i + NAME.len()) else {
        return;
    };
    let Some(len) = out
        .get(start..)
        .and_then(|rest| rest.windows(2).position(|w| w == b"\r\n"))
    else {
        return;
    };
    let mut tmp = std::mem::take(&mut scratch.out);
    tmp.clear();
    let value = out.get(start..start + len).unwrap_or_default();
    let answer = AnswerCharset {
        status,
        content_type: ContentType::bare(value),
        accel_charset: None,
        encoded: false,
    };
    if let Some(edit) = plan.decide(&answer, scratch) {
        plan.write_content_type(
            &answer.content_type,
            Some(&edit),
            plan.name(&edit, None, scratch),
            &mut tmp,
        );
        out.splice(start..start + len, tmp.iter().copied());
    }
    scratch.out = tmp;
}

/// One answer's body recoder, in front of gzip when the answer is compressed too (nginx's charset filter runs
/// before the gzip filter). Its buffers are the connection's, lent for the answer.
pub struct RecodeStream<'t, 'g> {
    rec: Recoder<'t>,
    gzip: Option<&'g mut GzipStream>,
    /// Recoded bytes (the pending output, or gzip's input).
    out: Vec<u8>,
    /// File bytes read before they are recoded.
    input: Vec<u8>,
}

impl<'t, 'g> RecodeStream<'t, 'g> {
    /// A recoder with `table`, taking the buffers of `scratch` (give them back with [`RecodeStream::give_back`]).
    pub fn new(table: &'t Recode, gzip: Option<&'g mut GzipStream>, scratch: &mut CharsetScratch) -> Self {
        let mut out = std::mem::take(&mut scratch.out);
        out.clear();
        RecodeStream {
            rec: Recoder::new(table),
            gzip,
            out,
            input: std::mem::take(&mut scratch.input),
        }
    }

    /// Puts the buffers back into `scratch`, for the connection's next answer.
    pub fn give_back(self, scratch: &mut CharsetScratch) {
        scratch.out = self.out;
        scratch.input = self.input;
    }
}

impl Coder for RecodeStream<'_, '_> {
    fn write(&mut self, data: &[u8]) {
        match self.gzip.as_deref_mut() {
            Some(g) => {
                self.out.clear();
                self.rec.recode(data, &mut self.out);
                g.write(&self.out);
            }
            None => self.rec.recode(data, &mut self.out),
        }
    }
    fn finish(&mut self) {
        if let Some(g) = self.gzip.as_deref_mut() {
            g.finish();
        }
    }
    fn pending(&mut self) -> &mut Vec<u8> {
        match self.gzip.as_deref_mut() {
            Some(g) => g.pending(),
            None => &mut self.out,
        }
    }
    fn input(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }
    fn write_input(&mut self, n: usize) {
        let input = std::mem::take(&mut self.input);
        self.write(input.get(..n).unwrap_or_default());
        self.input = input;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::{parse_response, write_client_head_with, ClientHead, NoEdits, MAX_HEADERS};
    use std::sync::Arc;

    #[test]
    fn proxied_head_with_recoding_to_utf8() {
        let text = "charset_map koi8-r utf-8 { C1 D0B0; }";
        let block = crate::config::parser::parse_text(text.as_bytes(), std::path::Path::new("t.conf"));
        let charsets = Arc::new(crate::config::load_charsets_for_tests(&block));
        let conf = crate::config::charset::CharsetConf {
            charset: crate::config::charset::CharsetSpec::Name("utf-8".into()),
            override_charset: true,
            ..Default::default()
        };
        let plan = CharsetPlan::of(&conf, &charsets).unwrap();
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=KOI8-R\r\nContent-Length: 3\r\n\r\n";
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let resp = parse_response(raw, &mut hs, false).unwrap().unwrap();
        let a = upstream_answer(&resp, true);
        let mut scratch = CharsetScratch::default();
        let edit = plan.decide(&a, &scratch).unwrap();
        let edits = CharsetEdits {
            inner: &NoEdits,
            plan: &plan,
            edit,
            name: plan.name(&edit, None, &scratch),
        };
        let head = ClientHead {
            date: b"D",
            keepalive: crate::http::keepalive::Connection::KEEP,
            chunked_out: true,
            upgrade: false,
        };
        let mut out = Vec::new();
        write_client_head_with(&resp, head, &edits, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "HTTP/1.1 200 OK\r\nServer: corelb/{}\r\nDate: D\r\nContent-Type: text/html; charset=utf-8\r\n\
                 Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let mut s = RecodeStream::new(edit.recode.unwrap(), None, &mut scratch);
        s.write(b"a\xc1");
        assert_eq!(s.pending(), "aа".as_bytes());
        s.give_back(&mut scratch);
    }
}
