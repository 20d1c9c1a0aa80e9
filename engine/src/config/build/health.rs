//! nginx Plus active health checks in the config: `health_check` lines (http locations, stream servers), `match`
//! blocks (http), and the end-of-block checks that tie a check to its upstream (which needs a `zone`) and match.

use super::vars::Module;
use super::{arg, block_of, walk, Ctx};
use crate::config::error::ConfigError;
use crate::config::model::{HeaderCond, HealthCheck, MatchConf, MatchTest, Span, UpstreamConf};
use crate::config::parser::Directive;
use crate::config::value;
use std::time::Duration;

/// A `health_check` line as read, before the end of the block resolves its upstream, match and timeouts.
#[derive(Debug, Clone)]
pub struct CheckDraft {
    interval: Duration,
    jitter: Duration,
    fails: u32,
    passes: u32,
    uri: String,
    port: Option<u16>,
    match_name: Option<String>,
    mandatory: bool,
    persistent: bool,
    span: Span,
}

/// `health_check [interval=T] [jitter=T] [fails=N] [passes=N] [uri=URI] [port=N] [match=NAME] [mandatory
/// [persistent]]` (http) or `health_check [interval=T] [jitter=T] [fails=N] [passes=N] [port=N]` (stream). Other
/// nginx Plus parameters (`type=grpc`, `keepalive_time=`, `udp`, ...) are refused as invalid.
pub fn health_check(d: &Directive, module: Module) -> Result<CheckDraft, ConfigError> {
    let mut c = CheckDraft {
        interval: Duration::from_secs(5),
        jitter: Duration::ZERO,
        fails: 1,
        passes: 1,
        uri: "/".into(),
        port: None,
        match_name: None,
        mandatory: false,
        persistent: false,
        span: d.span.clone(),
    };
    let http = module == Module::Http;
    for p in &d.args {
        let invalid = || ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span);
        let count = |v: &str| value::atoi(v).and_then(|n| u32::try_from(n).ok()).filter(|n| *n != 0);
        if let Some(v) = p.strip_prefix("interval=") {
            c.interval = value::parse_msec(v).filter(|t| !t.is_zero()).ok_or_else(invalid)?;
        } else if let Some(v) = p.strip_prefix("jitter=") {
            c.jitter = value::parse_msec(v).ok_or_else(invalid)?;
        } else if let Some(v) = p.strip_prefix("fails=") {
            c.fails = count(v).ok_or_else(invalid)?;
        } else if let Some(v) = p.strip_prefix("passes=") {
            c.passes = count(v).ok_or_else(invalid)?;
        } else if let Some(v) = p.strip_prefix("port=") {
            let port = value::atoi(v).and_then(|n| u16::try_from(n).ok()).filter(|n| *n != 0);
            c.port = Some(port.ok_or_else(invalid)?);
        } else if let Some(v) = p.strip_prefix("uri=").filter(|_| http) {
            if !v.starts_with('/') {
                return Err(invalid());
            }
            c.uri = v.to_string();
        } else if let Some(v) = p.strip_prefix("match=").filter(|_| http) {
            if v.is_empty() {
                return Err(invalid());
            }
            c.match_name = Some(v.to_string());
        } else if p == "mandatory" && http {
            c.mandatory = true;
        } else if p == "persistent" && http {
            c.persistent = true;
        } else {
            return Err(invalid());
        }
    }
    Ok(c)
}

/// The timeouts a check's probes get from its location or server.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTimeouts {
    pub connect: Duration,
    pub read: Duration,
}

impl CheckDraft {
    /// The check, once the block is read: the upstream it probes must live in a `zone`, and a `match=` must name
    /// a `match` block of the same http block.
    pub fn finish(
        self,
        upstream: usize,
        upstreams: &[UpstreamConf],
        matches: &[MatchConf],
        timeouts: ProbeTimeouts,
    ) -> Result<HealthCheck, ConfigError> {
        let Some(u) = upstreams.get(upstream) else {
            return Err(ConfigError::invalid(
                "\"health_check\" has no upstream to check",
                &self.span,
            ));
        };
        if u.zone.is_none() {
            let msg = format!("\"health_check\" requires upstream \"{}\" to have a \"zone\"", u.name);
            return Err(ConfigError::invalid(msg, &self.span));
        }
        let matcher = match &self.match_name {
            None => None,
            Some(name) => match matches.iter().position(|m| &m.name == name) {
                Some(i) => Some(i),
                None => return Err(ConfigError::invalid(format!("match \"{name}\" not found"), &self.span)),
            },
        };
        Ok(HealthCheck {
            upstream,
            interval: self.interval,
            jitter: self.jitter,
            fails: self.fails,
            passes: self.passes,
            uri: self.uri,
            port: self.port,
            matcher,
            mandatory: self.mandatory,
            persistent: self.persistent,
            connect_timeout: timeouts.connect,
            read_timeout: timeouts.read,
            host: u.name.clone(),
            span: self.span,
        })
    }

    /// Where the line is.
    pub fn span(&self) -> &Span {
        &self.span
    }
}

/// `match NAME { status ...; header ...; body ...; }` in the http block; names are unique.
pub fn match_block(d: &Directive, known: &[MatchConf]) -> Result<MatchConf, ConfigError> {
    let name = arg(d, 0);
    if known.iter().any(|m| m.name == name) {
        return Err(ConfigError::invalid(format!("duplicate match \"{name}\""), &d.span));
    }
    let mut tests = Vec::new();
    walk(block_of(d)?, Ctx::HTTP_MATCH, |md| {
        tests.push(match md.name.as_str() {
            "status" => status_test(md)?,
            "header" => header_test(md)?,
            _ => body_test(md)?,
        });
        Ok(())
    })?;
    Ok(MatchConf {
        name: name.to_string(),
        tests,
        span: d.span.clone(),
    })
}

fn invalid_param(p: &str, d: &Directive) -> ConfigError {
    ConfigError::invalid(format!("invalid parameter \"{p}\""), &d.span)
}

/// `status [!] CODE|LOW-HIGH ...`, codes 100..=599.
fn status_test(d: &Directive) -> Result<MatchTest, ConfigError> {
    let negate = d.args.first().is_some_and(|a| a == "!");
    let codes = d.args.get(usize::from(negate)..).unwrap_or_default();
    if codes.is_empty() {
        return Err(ConfigError::invalid(
            "invalid number of arguments in \"status\" directive",
            &d.span,
        ));
    }
    let code = |s: &str| {
        value::atoi(s)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (100..=599).contains(n))
    };
    let mut ranges = Vec::with_capacity(codes.len());
    for c in codes {
        let range = match c.split_once('-') {
            Some((lo, hi)) => code(lo).zip(code(hi)).filter(|(lo, hi)| lo <= hi),
            None => code(c).map(|n| (n, n)),
        };
        ranges.push(range.ok_or_else(|| invalid_param(c, d))?);
    }
    Ok(MatchTest::Status { negate, ranges })
}

/// `header [!] NAME`, `header NAME = VALUE`, `header NAME != VALUE`, `header NAME ~ REGEX`, `header NAME !~ REGEX`.
fn header_test(d: &Directive) -> Result<MatchTest, ConfigError> {
    let args: Vec<&str> = d.args.iter().map(String::as_str).collect();
    let header = |name: &str, negate, cond| MatchTest::Header {
        name: name.to_string(),
        negate,
        cond,
    };
    match args.as_slice() {
        ["!", name] => Ok(header(name, true, HeaderCond::Present)),
        [name] if *name != "!" => Ok(header(name, false, HeaderCond::Present)),
        [name, op, v] => match *op {
            "=" => Ok(header(name, false, HeaderCond::Equals(v.to_string()))),
            "!=" => Ok(header(name, true, HeaderCond::Equals(v.to_string()))),
            "~" | "!~" => {
                check_regex(v, d)?;
                Ok(header(name, *op == "!~", HeaderCond::Matches(v.to_string())))
            }
            _ => Err(invalid_param(op, d)),
        },
        _ => Err(ConfigError::invalid(
            "invalid number of arguments in \"header\" directive",
            &d.span,
        )),
    }
}

/// `body ~ REGEX` or `body !~ REGEX`.
fn body_test(d: &Directive) -> Result<MatchTest, ConfigError> {
    let op = arg(d, 0);
    let regex = arg(d, 1);
    if op != "~" && op != "!~" {
        return Err(invalid_param(op, d));
    }
    check_regex(regex, d)?;
    Ok(MatchTest::Body {
        negate: op == "!~",
        regex: regex.to_string(),
    })
}

/// The pattern must compile (the checker compiles it again when it starts).
fn check_regex(re: &str, d: &Directive) -> Result<(), ConfigError> {
    regex::bytes::Regex::new(re)
        .map(|_| ())
        .map_err(|_| ConfigError::invalid(format!("invalid regular expression \"{re}\""), &d.span))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str, args: &[&str]) -> Directive {
        Directive::at_t_conf(name, args)
    }

    #[test]
    fn health_check_parameters_and_defaults() {
        let c = health_check(&dir("health_check", &[]), Module::Http).unwrap();
        assert_eq!(
            (c.interval, c.fails, c.passes, c.uri.as_str()),
            (Duration::from_secs(5), 1, 1, "/")
        );
        let args = [
            "interval=500ms",
            "fails=3",
            "passes=2",
            "uri=/hc",
            "port=81",
            "match=ok",
            "mandatory",
            "persistent",
        ];
        let c = health_check(&dir("health_check", &args), Module::Http).unwrap();
        assert_eq!(c.interval, Duration::from_millis(500));
        assert_eq!((c.fails, c.passes, c.port, c.mandatory), (3, 2, Some(81), true));
        assert!(c.persistent);
        assert_eq!((c.uri.as_str(), c.match_name.as_deref()), ("/hc", Some("ok")));
        let c = health_check(&dir("health_check", &["jitter=1s"]), Module::Stream).unwrap();
        assert_eq!(c.jitter, Duration::from_secs(1));
        for bad in [
            "fails=0",
            "interval=0",
            "port=70000",
            "uri=hc",
            "jitter=x",
            "persistent=on",
            "match=",
        ] {
            let e = health_check(&dir("health_check", &[bad]), Module::Http).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("[emerg] invalid parameter \"{bad}\" in t.conf:3")
            );
        }
        // stream checks are TCP connects: no uri, match or mandatory
        for bad in ["uri=/", "match=ok", "mandatory", "persistent"] {
            assert!(
                health_check(&dir("health_check", &[bad]), Module::Stream).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn match_lines() {
        let t = status_test(&dir("status", &["!", "500", "200-399"])).unwrap();
        assert_eq!(
            t,
            MatchTest::Status {
                negate: true,
                ranges: vec![(500, 500), (200, 399)]
            }
        );
        for bad in [&["399-200"][..], &["99"], &["!"], &["2xx"]] {
            assert!(status_test(&dir("status", bad)).is_err(), "{bad:?}");
        }
        let h = header_test(&dir("header", &["X-A", "!~", "^a"])).unwrap();
        assert_eq!(
            h,
            MatchTest::Header {
                name: "X-A".into(),
                negate: true,
                cond: HeaderCond::Matches("^a".into())
            }
        );
        assert!(header_test(&dir("header", &["X-A", "<", "1"])).is_err());
        assert!(header_test(&dir("header", &["!"])).is_err());
        let e = body_test(&dir("body", &["~", "(unclosed"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[emerg] invalid regular expression \"(unclosed\" in t.conf:3"
        );
        assert!(body_test(&dir("body", &["=", "x"])).is_err());
    }
}
