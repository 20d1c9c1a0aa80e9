//! `limit_req_zone`/`limit_req` and `limit_conn_zone`/`limit_conn` as read (nginx's `ngx_http_limit_req_module`,
//! `ngx_http_limit_conn_module`, `ngx_stream_limit_conn_module`): the zones of a block and each level's limits.

use super::key::KeyTemplate;
use crate::log::Level;

/// One `limit_req_zone KEY zone=NAME:SIZE rate=R`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReqZone {
    pub name: String,
    pub key: KeyTemplate,
    /// Bytes.
    pub size: u64,
    /// Milli-requests per second (nginx's `rate * 1000 / scale`: `rate=30r/m` is 500).
    pub rate: u64,
}

/// One `limit_conn_zone KEY zone=NAME:SIZE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnZone {
    pub name: String,
    pub key: KeyTemplate,
    /// Bytes.
    pub size: u64,
}

/// The most `limit_req` lines one level holds (a request's pending entries sit in a fixed array).
pub const MAX_REQ_LIMITS: usize = 16;

/// A block's zones, in the order written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Zones {
    pub req: Vec<ReqZone>,
    pub conn: Vec<ConnZone>,
}

/// One `limit_req zone=NAME [burst=N] [nodelay|delay=N]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqLimit {
    /// Index into the block's [`ReqZone`]s.
    pub zone: usize,
    /// Milli-requests (nginx's `burst * 1000`).
    pub burst: u64,
    /// Milli-requests of excess served without delay (`nodelay`: all of them).
    pub delay: u64,
}

/// One `limit_conn NAME N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimit {
    /// Index into the block's [`ConnZone`]s.
    pub zone: usize,
    pub conn: u64,
}

/// What a level's limits of one kind share: the answer's status, the log level, the dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitAnswer {
    /// `limit_req_status` / `limit_conn_status`, default 503.
    pub status: u16,
    /// `limit_req_log_level` / `limit_conn_log_level`, default `error`.
    pub level: Level,
    /// `limit_req_dry_run` / `limit_conn_dry_run`.
    pub dry_run: bool,
}

impl Default for LimitAnswer {
    fn default() -> Self {
        LimitAnswer {
            status: 503,
            level: Level::Error,
            dry_run: false,
        }
    }
}

impl LimitAnswer {
    /// nginx's `delay_log_level`: one level less severe than the limiting one (`info` stays `info`).
    pub fn delay_level(&self) -> Level {
        match self.level {
            Level::Emerg => Level::Alert,
            Level::Alert => Level::Crit,
            Level::Crit => Level::Error,
            Level::Error => Level::Warn,
            Level::Warn => Level::Notice,
            Level::Notice | Level::Info | Level::Debug => Level::Info,
        }
    }
}

/// The `limit_req` lines in force at one level (inherited whole from the parent when the level has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqLimits {
    pub limits: Vec<ReqLimit>,
    pub answer: LimitAnswer,
}

/// The `limit_conn` lines in force at one level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnLimits {
    pub limits: Vec<ConnLimit>,
    pub answer: LimitAnswer,
}

/// A level's limits; both `None` where no level has any (nothing to do per request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsConf {
    pub req: Option<std::sync::Arc<ReqLimits>>,
    pub conn: Option<std::sync::Arc<ConnLimits>>,
}

/// `rate=Nr/s` or `rate=Nr/m` in milli-requests per second (nginx's `ngx_http_limit_req_zone`: without a unit
/// the number is per second).
pub fn parse_rate(text: &str) -> Option<u64> {
    let (num, scale) = if let Some(n) = text.strip_suffix("r/s") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix("r/m") {
        (n, 60)
    } else {
        (text, 1)
    };
    let rate = super::value::atoi(num).filter(|&r| r > 0)?;
    Some(rate.checked_mul(1000)? / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_milli_requests() {
        assert_eq!(parse_rate("2r/s"), Some(2000));
        assert_eq!(parse_rate("30r/m"), Some(500));
        assert_eq!(parse_rate("1r/m"), Some(16));
        assert_eq!(parse_rate("5"), Some(5000));
        assert_eq!(parse_rate("0r/s"), None);
        assert_eq!(parse_rate("r/s"), None);
        assert_eq!(parse_rate("-1r/s"), None);
    }

    #[test]
    fn delays_log_one_level_below() {
        let a = |level| LimitAnswer {
            level,
            ..LimitAnswer::default()
        };
        assert_eq!(a(Level::Error).delay_level(), Level::Warn);
        assert_eq!(a(Level::Warn).delay_level(), Level::Notice);
        assert_eq!(a(Level::Notice).delay_level(), Level::Info);
        assert_eq!(a(Level::Info).delay_level(), Level::Info);
    }
}
