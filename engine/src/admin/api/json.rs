//! A small ordered JSON value for the API's answers (nginx Plus's field order), `?fields=` filtering, and
//! nginx Plus's timestamps.

use crate::http::pages::civil_from_days;
use std::borrow::Cow;
use std::fmt::Write;

/// A JSON value whose objects keep their fields in the order they were added.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Bool(bool),
    Num(u64),
    Str(Cow<'static, str>),
    Arr(Vec<Json>),
    Obj(Vec<(Cow<'static, str>, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(s: impl Into<Cow<'static, str>>) -> Json {
        Json::Str(s.into())
    }

    /// An object from `(name, value)` pairs.
    pub fn obj(fields: impl IntoIterator<Item = (&'static str, Json)>) -> Json {
        Json::Obj(fields.into_iter().map(|(k, v)| (Cow::Borrowed(k), v)).collect())
    }

    /// An array of strings.
    pub fn strings(items: &[&'static str]) -> Json {
        Json::Arr(items.iter().map(|s| Json::str(*s)).collect())
    }

    /// The serialized text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => write_str(s, out),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    /// Keeps only the fields named in `fields` of this object (nginx Plus's `?fields=`); other values are kept.
    pub fn keep_fields(&mut self, fields: &[&str]) {
        if let Json::Obj(items) = self {
            items.retain(|(k, _)| fields.contains(&k.as_ref()));
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    // serde_json escapes exactly as JSON requires (quotes, backslashes, control bytes).
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// The names in a query's `fields=a,b` argument: `None` when there is no such argument, an empty list for
/// `fields=` (nginx Plus then outputs names only).
pub fn requested_fields(args: Option<&str>) -> Option<Vec<&str>> {
    let value = args?.split('&').find_map(|a| a.strip_prefix("fields="))?;
    Some(value.split(',').filter(|f| !f.is_empty()).collect())
}

/// nginx Plus's timestamp form, `2024-05-01T12:00:00.123Z`, of milliseconds since the Unix epoch.
pub fn timestamp_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = civil_from_days(days);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_keep_their_order_and_strings_are_escaped() {
        let v = Json::obj([
            ("z", Json::Num(1)),
            ("a", Json::str("q\"\\\n")),
            ("l", Json::Arr(vec![Json::Bool(true), Json::Obj(Vec::new())])),
        ]);
        assert_eq!(v.render(), r#"{"z":1,"a":"q\"\\\n","l":[true,{}]}"#);
    }

    #[test]
    fn fields_filter_keeps_the_named_ones() {
        let mut v = Json::obj([("a", Json::Num(1)), ("b", Json::Num(2)), ("c", Json::Num(3))]);
        v.keep_fields(&["c", "a", "x"]);
        assert_eq!(v.render(), r#"{"a":1,"c":3}"#);
        assert_eq!(requested_fields(Some("x=1&fields=a,b")), Some(vec!["a", "b"]));
        assert_eq!(requested_fields(Some("fields=")), Some(vec![]));
        assert_eq!(requested_fields(Some("x=1")), None);
        assert_eq!(requested_fields(None), None);
    }

    #[test]
    fn timestamps_are_iso_8601_with_milliseconds() {
        assert_eq!(timestamp_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
