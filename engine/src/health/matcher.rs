//! A compiled `match` block (nginx Plus): status lists and ranges, header tests, body regex; and the default rule.

use crate::config::model::{HeaderCond, MatchConf, MatchTest};
use regex::bytes::Regex;

/// How much of a response body `body ~` looks at (nginx Plus: the first 256k).
pub const BODY_LIMIT: usize = 256 * 1024;

/// One compiled test.
#[derive(Debug)]
enum Test {
    Status { negate: bool, ranges: Vec<(u16, u16)> },
    Header { name: String, negate: bool, cond: Cond },
    Body { negate: bool, re: Regex },
}

#[derive(Debug)]
enum Cond {
    Present,
    Equals(Vec<u8>),
    Matches(Regex),
}

/// A `match` block ready to judge responses; every test must hold.
#[derive(Debug)]
pub struct Matcher {
    tests: Vec<Test>,
}

/// What a probe read of a response.
#[derive(Debug, Default)]
pub struct Response {
    pub status: u16,
    /// Header names and values, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The first [`BODY_LIMIT`] bytes of the body, when a test needs it.
    pub body: Vec<u8>,
}

impl Matcher {
    /// Compiles `conf` (its patterns were checked at config load).
    pub fn compile(conf: &MatchConf) -> Result<Matcher, regex::Error> {
        let mut tests = Vec::with_capacity(conf.tests.len());
        for t in &conf.tests {
            tests.push(match t {
                MatchTest::Status { negate, ranges } => Test::Status {
                    negate: *negate,
                    ranges: ranges.clone(),
                },
                MatchTest::Header { name, negate, cond } => Test::Header {
                    name: name.clone(),
                    negate: *negate,
                    cond: match cond {
                        HeaderCond::Present => Cond::Present,
                        HeaderCond::Equals(v) => Cond::Equals(v.as_bytes().to_vec()),
                        HeaderCond::Matches(re) => Cond::Matches(Regex::new(re)?),
                    },
                },
                MatchTest::Body { negate, regex } => Test::Body {
                    negate: *negate,
                    re: Regex::new(regex)?,
                },
            });
        }
        Ok(Matcher { tests })
    }

    /// A matcher no response passes (an empty status list).
    pub fn never() -> Matcher {
        Matcher {
            tests: vec![Test::Status {
                negate: false,
                ranges: Vec::new(),
            }],
        }
    }

    /// Whether a probe must read the body.
    pub fn needs_body(&self) -> bool {
        self.tests.iter().any(|t| matches!(t, Test::Body { .. }))
    }

    /// Whether `r` passes every test.
    pub fn passes(&self, r: &Response) -> bool {
        self.tests.iter().all(|t| match t {
            Test::Status { negate, ranges } => ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&r.status)) != *negate,
            Test::Header { name, negate, cond } => {
                let mut values = r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name));
                let hit = match cond {
                    Cond::Present => values.next().is_some(),
                    Cond::Equals(v) => values.any(|(_, got)| got == v),
                    Cond::Matches(re) => values.any(|(_, got)| re.is_match(got)),
                };
                hit != *negate
            }
            Test::Body { negate, re } => re.is_match(&r.body) != *negate,
        })
    }
}

/// nginx Plus's rule without `match`: a 2xx or 3xx status.
pub fn default_passes(status: u16) -> bool {
    (200..=399).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Span;

    fn matcher(tests: Vec<MatchTest>) -> Matcher {
        Matcher::compile(&MatchConf {
            name: "m".into(),
            tests,
            span: Span::default(),
        })
        .expect("valid patterns")
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn status_lists_ranges_and_negation() {
        let m = matcher(vec![MatchTest::Status {
            negate: false,
            ranges: vec![(200, 200), (300, 399)],
        }]);
        assert!(m.passes(&response(200, &[], "")));
        assert!(m.passes(&response(302, &[], "")));
        assert!(!m.passes(&response(204, &[], "")));
        let not = matcher(vec![MatchTest::Status {
            negate: true,
            ranges: vec![(500, 599)],
        }]);
        assert!(not.passes(&response(404, &[], "")));
        assert!(!not.passes(&response(503, &[], "")));
        assert!(default_passes(399) && !default_passes(400) && !default_passes(199));
        assert!(!Matcher::never().passes(&response(200, &[], "")));
    }

    #[test]
    fn headers_and_body() {
        let header = |name: &str, negate, cond| MatchTest::Header {
            name: name.into(),
            negate,
            cond,
        };
        let m = matcher(vec![
            header("content-type", false, HeaderCond::Equals("text/html".into())),
            header("X-Version", false, HeaderCond::Matches("^v[0-9]+$".into())),
            header("X-Broken", true, HeaderCond::Present),
            MatchTest::Body {
                negate: false,
                regex: "Welcome".into(),
            },
        ]);
        assert!(m.needs_body());
        let ok = [("Content-Type", "text/html"), ("x-version", "v12")];
        assert!(m.passes(&response(200, &ok, "<h1>Welcome</h1>")));
        assert!(!m.passes(&response(200, &ok, "<h1>Bye</h1>")));
        assert!(!m.passes(&response(
            200,
            &[("Content-Type", "text/html"), ("x-version", "12")],
            "Welcome"
        )));
        let broken = [("Content-Type", "text/html"), ("x-version", "v1"), ("X-Broken", "1")];
        assert!(!m.passes(&response(200, &broken, "Welcome")));
        // a match without a status test accepts any status
        assert!(m.passes(&response(500, &ok, "Welcome")));
        let not_eq = matcher(vec![header("Server", true, HeaderCond::Equals("bad".into()))]);
        assert!(!not_eq.needs_body());
        assert!(not_eq.passes(&response(200, &[("Server", "good")], "")));
        assert!(!not_eq.passes(&response(200, &[("server", "bad")], "")));
    }
}
