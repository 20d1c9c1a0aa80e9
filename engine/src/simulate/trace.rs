//! Text formats of simulated traffic: request lines (`SRC_IP URI [t=S] [hold] [host=H]`) and backend modes
//! (`ADDR MODE [head=MS] [body=MS]`).

use super::vars::Request;
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// How a simulated backend answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendMode {
    /// Answers 200.
    #[default]
    Ok,
    /// Nothing listens: the connect is refused (`error`).
    Dead,
    /// Accepts, then resets the connection before answering (`error` in http; a connected session in stream).
    Reset,
    /// Accepts and never answers (`timeout` in http; a connected session in stream).
    Timeout,
    /// Answers this HTTP status (`eNNN` in text, e.g. `e502`).
    Status(u16),
}

impl FromStr for BackendMode {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, TraceError> {
        Ok(match s {
            "ok" => BackendMode::Ok,
            "dead" => BackendMode::Dead,
            "reset" => BackendMode::Reset,
            "timeout" => BackendMode::Timeout,
            _ => match s.strip_prefix('e').and_then(|n| n.parse::<u16>().ok()) {
                Some(code) if (100..=599).contains(&code) => BackendMode::Status(code),
                _ => return Err(TraceError::BadMode(s.into())),
            },
        })
    }
}

impl fmt::Display for BackendMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendMode::Ok => f.write_str("ok"),
            BackendMode::Dead => f.write_str("dead"),
            BackendMode::Reset => f.write_str("reset"),
            BackendMode::Timeout => f.write_str("timeout"),
            BackendMode::Status(c) => write!(f, "e{c}"),
        }
    }
}

/// When a simulated backend answers, from the request (ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timing {
    /// To the answer's head (in stream: its first byte).
    pub head: u64,
    /// From the head to the answer's last byte (in stream: the close).
    pub body: u64,
}

impl Timing {
    /// To the last byte.
    pub fn last_byte(self) -> u64 {
        self.head.saturating_add(self.body)
    }
}

/// The modes of the backends by address; an address not listed answers [`BackendMode::Ok`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backends {
    modes: HashMap<SocketAddr, BackendMode>,
    /// Simulated answer times by address; unlisted backends answer in 0 ms.
    timings: HashMap<SocketAddr, Timing>,
}

impl Backends {
    /// No backend listed: every one answers 200.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the mode of `addr`.
    pub fn set(&mut self, addr: SocketAddr, mode: BackendMode) {
        self.modes.insert(addr, mode);
    }

    /// Sets the time (ms) `addr` takes to answer whole, which the time-measuring methods (`least_time`,
    /// `random two ewma`, `random two least_time=`) see as its header, last-byte and first-byte time.
    pub fn set_latency(&mut self, addr: SocketAddr, ms: u64) {
        self.set_timing(addr, Timing { head: ms, body: 0 });
    }

    /// Sets when `addr` sends its answer's head and its last byte.
    pub fn set_timing(&mut self, addr: SocketAddr, timing: Timing) {
        self.timings.insert(addr, timing);
    }

    /// When `addr` answers.
    pub fn timing(&self, addr: SocketAddr) -> Timing {
        self.timings.get(&addr).copied().unwrap_or_default()
    }

    /// The mode of `addr`.
    pub fn mode(&self, addr: SocketAddr) -> BackendMode {
        self.modes.get(&addr).copied().unwrap_or_default()
    }

    /// Parses `ADDR MODE [head=MS] [body=MS]` lines (blank lines and `#` comments skipped).
    pub fn parse(text: &str) -> Result<Backends, TraceError> {
        let mut out = Backends::new();
        for (n, line) in numbered_lines(text) {
            let mut words = line.split_whitespace();
            let (Some(addr), Some(mode)) = (words.next(), words.next()) else {
                return Err(TraceError::Line(n, "expected \"ADDR MODE\"".into()));
            };
            let addr = addr
                .parse()
                .map_err(|_| TraceError::Line(n, format!("invalid address \"{addr}\"")))?;
            let mode = mode
                .parse()
                .map_err(|e: TraceError| TraceError::Line(n, e.to_string()))?;
            out.set(addr, mode);
            let mut timing = Timing::default();
            for word in words {
                let ms = |v: &str| {
                    v.parse::<u64>()
                        .map_err(|_| TraceError::Line(n, format!("invalid time \"{word}\" (milliseconds)")))
                };
                if let Some(v) = word.strip_prefix("head=") {
                    timing.head = ms(v)?;
                } else if let Some(v) = word.strip_prefix("body=") {
                    timing.body = ms(v)?;
                } else {
                    return Err(TraceError::Line(n, format!("unknown field \"{word}\"")));
                }
            }
            if timing != Timing::default() {
                out.set_timing(addr, timing);
            }
        }
        Ok(out)
    }
}

/// One line of a request trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLine {
    pub request: Request,
    /// `t=SECONDS`: when to send it, from the start of the trace.
    pub at: Option<u64>,
    /// `hold`: the request stays open (and keeps its peer's connection) until the trace ends.
    pub hold: bool,
    /// The line number in the trace text (from 1).
    pub line: usize,
}

/// Why a trace or backends text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("line {0}: {1}")]
    Line(usize, String),
    #[error("unknown backend mode \"{0}\" (expected ok, dead, reset, timeout or eNNN)")]
    BadMode(String),
}

/// Parses a trace: one request per line, `SRC_IP URI [t=SECONDS] [hold] [host=HOST]`; blank lines and `#`
/// comments are skipped.
pub fn parse_trace(text: &str) -> Result<Vec<TraceLine>, TraceError> {
    numbered_lines(text).map(|(n, line)| parse_line(n, line)).collect()
}

fn parse_line(n: usize, line: &str) -> Result<TraceLine, TraceError> {
    let bad = |msg: String| TraceError::Line(n, msg);
    let mut words = line.split_whitespace();
    let (Some(src), Some(uri)) = (words.next(), words.next()) else {
        return Err(bad("expected \"REMOTE_ADDR URI\"".into()));
    };
    let remote = src.parse().map_err(|_| bad(format!("invalid address \"{src}\"")))?;
    if !uri.starts_with('/') {
        return Err(bad(format!("the URI \"{uri}\" does not start with \"/\"")));
    }
    let mut out = TraceLine {
        request: Request::new(remote, uri),
        at: None,
        hold: false,
        line: n,
    };
    for field in words {
        if field == "hold" {
            out.hold = true;
        } else if let Some(t) = field.strip_prefix("t=") {
            out.at = Some(
                t.parse()
                    .map_err(|_| bad(format!("invalid time \"{field}\" (whole seconds)")))?,
            );
        } else if let Some(h) = field.strip_prefix("host=").filter(|h| !h.is_empty()) {
            out.request.host = Some(h.into());
        } else if let Some(m) = field.strip_prefix("method=").filter(|m| is_token(m)) {
            out.request.method = m.into();
        } else {
            return Err(bad(format!("unknown field \"{field}\"")));
        }
    }
    Ok(out)
}

/// Whether `m` is a method token as the request line carries it (upper-case letters, digits, `-`, `_`).
fn is_token(m: &str) -> bool {
    !m.is_empty()
        && m.bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

/// Non-blank, non-comment lines with their numbers (from 1), trimmed.
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_lines_with_fields() {
        let t = parse_trace("# comment\n\n127.0.0.1 /a\n::1 /b?k=1 t=12 hold host=x.test\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].line, 3);
        assert_eq!(t[0].request.uri, "/a");
        assert_eq!((t[0].at, t[0].hold, t[0].request.host.as_deref()), (None, false, None));
        assert_eq!(t[1].request.remote, "::1".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(
            (t[1].at, t[1].hold, t[1].request.host.as_deref()),
            (Some(12), true, Some("x.test"))
        );
    }

    #[test]
    fn rejects_bad_trace_lines_with_their_number() {
        let e = |s: &str| parse_trace(s).unwrap_err().to_string();
        assert_eq!(e("127.0.0.1 /\nnope /"), "line 2: invalid address \"nope\"");
        assert_eq!(e("127.0.0.1"), "line 1: expected \"REMOTE_ADDR URI\"");
        assert_eq!(e("127.0.0.1 a"), "line 1: the URI \"a\" does not start with \"/\"");
        assert_eq!(e("127.0.0.1 / t=x"), "line 1: invalid time \"t=x\" (whole seconds)");
        assert_eq!(e("127.0.0.1 / what"), "line 1: unknown field \"what\"");
    }

    #[test]
    fn parses_backends() {
        let b = Backends::parse("127.0.0.1:1 dead\n127.0.0.1:2 e502\n[::1]:3 reset\n").unwrap();
        assert_eq!(b.mode("127.0.0.1:1".parse().unwrap()), BackendMode::Dead);
        assert_eq!(b.mode("127.0.0.1:2".parse().unwrap()), BackendMode::Status(502));
        assert_eq!(b.mode("[::1]:3".parse().unwrap()), BackendMode::Reset);
        assert_eq!(b.mode("127.0.0.1:9".parse().unwrap()), BackendMode::Ok);
        assert_eq!(
            Backends::parse("127.0.0.1:1 e99").unwrap_err().to_string(),
            "line 1: unknown backend mode \"e99\" (expected ok, dead, reset, timeout or eNNN)"
        );
        assert!(Backends::parse("127.0.0.1 ok").is_err());
        assert_eq!(
            Backends::parse("127.0.0.1:1 ok extra").unwrap_err().to_string(),
            "line 1: unknown field \"extra\""
        );
        assert_eq!(
            Backends::parse("127.0.0.1:1 ok head=x").unwrap_err().to_string(),
            "line 1: invalid time \"head=x\" (milliseconds)"
        );
        let t = Backends::parse("127.0.0.1:1 ok head=10 body=130\n127.0.0.1:2 ok body=5\n").unwrap();
        assert_eq!(t.timing("127.0.0.1:1".parse().unwrap()), Timing { head: 10, body: 130 });
        assert_eq!(t.timing("127.0.0.1:1".parse().unwrap()).last_byte(), 140);
        assert_eq!(t.timing("127.0.0.1:2".parse().unwrap()), Timing { head: 0, body: 5 });
        assert_eq!(t.timing("127.0.0.1:3".parse().unwrap()), Timing::default());
        assert_eq!(BackendMode::Status(404).to_string(), "e404");
    }
}
