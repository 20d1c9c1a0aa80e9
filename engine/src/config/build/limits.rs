//! `limit_req_zone`, `limit_conn_zone` (a block's zones) and `limit_req`, `limit_conn` with their `_status`,
//! `_log_level` and `_dry_run` (each level's, with nginx's merge: a level with lines of its own replaces the
//! inherited list; the other settings merge one by one).

use super::vars::{Module, Vars};
use super::{arg, directive_err, flag_slot, unset};
use crate::config::error::ConfigError;
use crate::config::limit::{
    parse_rate, ConnLimit, ConnLimits, ConnZone, LimitAnswer, LimitsConf, ReqLimit, ReqLimits, ReqZone, Zones,
};
use crate::config::model::Span;
use crate::config::parser::Directive;
use crate::log::Level;
use std::sync::Arc;

/// nginx's smallest zone: 8 pages.
const MIN_ZONE: u64 = 8 * 4096;

/// Reads `d` into `zones` if it is `limit_req_zone` or `limit_conn_zone`; `Ok(false)` when it is not.
pub fn zone(zones: &mut Zones, vars: &mut Vars, module: Module, d: &Directive) -> Result<bool, ConfigError> {
    let req = match d.name.as_str() {
        "limit_req_zone" => true,
        "limit_conn_zone" => false,
        _ => return Ok(false),
    };
    let key = vars.compile(arg(d, 0), module, &d.span)?;
    let (mut zone, mut rate) = (None, None);
    for a in d.args.iter().skip(1) {
        if let Some(z) = a.strip_prefix("zone=") {
            zone = Some(zone_arg(z, a, d)?);
        } else if let Some(r) = a.strip_prefix("rate=").filter(|_| req) {
            rate = Some(parse_rate(r).ok_or_else(|| ConfigError::invalid(format!("invalid rate \"{a}\""), &d.span))?);
        } else if a == "sync" && req {
            let msg = "\"sync\" of \"limit_req_zone\" (nginx Plus) is not supported by corelb";
            return Err(ConfigError::invalid(msg, &d.span));
        } else {
            return Err(ConfigError::invalid(format!("invalid parameter \"{a}\""), &d.span));
        }
    }
    let Some((name, size)) = zone else {
        return Err(ConfigError::invalid(
            format!("\"{}\" must have \"zone\" parameter", d.name),
            &d.span,
        ));
    };
    let (bound, other) = match req {
        true => (
            zones.req.iter().find(|z| z.name == name).map(|z| (z.key.raw(), z.size)),
            zones.conn.iter().any(|z| z.name == name),
        ),
        false => (
            zones
                .conn
                .iter()
                .find(|z| z.name == name)
                .map(|z| (z.key.raw(), z.size)),
            zones.req.iter().any(|z| z.name == name),
        ),
    };
    if other {
        return Err(different_use(&name, &d.span));
    }
    if let Some((_, old)) = bound.filter(|b| b.1 != size) {
        let msg =
            format!("the size {size} of shared memory zone \"{name}\" conflicts with already declared size {old}");
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if let Some((old, _)) = bound {
        let msg = format!("{} \"{name}\" is already bound to key \"{old}\"", d.name);
        return Err(ConfigError::invalid(msg, &d.span));
    }
    if req {
        // nginx's rate without `rate=`: 1 request per second
        let rate = rate.unwrap_or(1000);
        zones.req.push(ReqZone { name, key, size, rate });
    } else {
        zones.conn.push(ConnZone { name, key, size });
    }
    Ok(true)
}

/// nginx's words for a zone name of the other kind (`ngx_shared_memory_add`).
fn different_use(name: &str, at: &Span) -> ConfigError {
    ConfigError::invalid(
        format!("the shared memory zone \"{name}\" is already declared for a different use"),
        at,
    )
}

/// `NAME:SIZE` of `zone=` (nginx's words for a bad size and one under 8 pages).
fn zone_arg(z: &str, whole: &str, d: &Directive) -> Result<(String, u64), ConfigError> {
    let bad = || ConfigError::invalid(format!("invalid zone size \"{whole}\""), &d.span);
    let (name, size) = z.split_once(':').ok_or_else(bad)?;
    let size = crate::config::value::parse_size(size).ok_or_else(bad)?;
    if size < MIN_ZONE {
        return Err(ConfigError::invalid(format!("zone \"{whole}\" is too small"), &d.span));
    }
    Ok((name.to_string(), size))
}

/// One kind's settings at one level.
#[derive(Debug, Clone, Default)]
struct AnswerLayer {
    status: Option<u16>,
    level: Option<Level>,
    dry_run: Option<bool>,
}

impl AnswerLayer {
    fn over(&self, parent: &AnswerLayer) -> AnswerLayer {
        AnswerLayer {
            status: self.status.or(parent.status),
            level: self.level.or(parent.level),
            dry_run: self.dry_run.or(parent.dry_run),
        }
    }

    fn conf(&self) -> LimitAnswer {
        let d = LimitAnswer::default();
        LimitAnswer {
            status: self.status.unwrap_or(d.status),
            level: self.level.unwrap_or(d.level),
            dry_run: self.dry_run.unwrap_or(d.dry_run),
        }
    }

    fn directive(&mut self, suffix: &str, d: &Directive) -> Result<bool, ConfigError> {
        match suffix {
            "status" => {
                unset(&self.status, d)?;
                let code = crate::config::value::atoi(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid number"))?;
                let code = u16::try_from(code)
                    .ok()
                    .filter(|c| (400..=599).contains(c))
                    .ok_or_else(|| ConfigError::invalid("value must be between 400 and 599", &d.span))?;
                self.status = Some(code);
            }
            "log_level" => {
                unset(&self.level, d)?;
                let level = match arg(d, 0) {
                    "info" => Level::Info,
                    "notice" => Level::Notice,
                    "warn" => Level::Warn,
                    "error" => Level::Error,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                };
                self.level = Some(level);
            }
            "dry_run" => flag_slot(&mut self.dry_run, d)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A `limit_req` line as read: the zone's name, burst and delay in milli-requests.
#[derive(Debug, Clone)]
struct ReqLine {
    zone: String,
    burst: u64,
    delay: u64,
    span: Span,
}

/// A `limit_conn` line as read.
#[derive(Debug, Clone)]
struct ConnLine {
    zone: String,
    conn: u64,
    span: Span,
}

/// What one http, server or location level (or stream, server) sets.
#[derive(Debug, Clone, Default)]
pub struct LimitsLayer {
    req: Option<Vec<ReqLine>>,
    req_answer: AnswerLayer,
    conn: Option<Vec<ConnLine>>,
    conn_answer: AnswerLayer,
}

impl LimitsLayer {
    /// Reads `d` if it is one of the limit directives of a level; `Ok(false)` when it is not.
    pub fn directive(&mut self, d: &Directive) -> Result<bool, ConfigError> {
        match d.name.as_str() {
            "limit_req" => self.limit_req(d)?,
            "limit_conn" => self.limit_conn(d)?,
            name => {
                if let Some(suffix) = name.strip_prefix("limit_req_") {
                    return self.req_answer.directive(suffix, d);
                }
                if let Some(suffix) = name.strip_prefix("limit_conn_") {
                    return self.conn_answer.directive(suffix, d);
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn limit_req(&mut self, d: &Directive) -> Result<(), ConfigError> {
        let (mut zone, mut burst, mut delay) = (None, 0, 0);
        for a in &d.args {
            let number = |v: &str, what: &str| {
                crate::config::value::atoi(v)
                    .filter(|&n| n > 0)
                    .ok_or_else(|| ConfigError::invalid(format!("invalid {what} value \"{a}\""), &d.span))
            };
            if let Some(z) = a.strip_prefix("zone=") {
                zone = Some(z.to_string());
            } else if let Some(b) = a.strip_prefix("burst=") {
                burst = number(b, "burst")?;
            } else if let Some(v) = a.strip_prefix("delay=") {
                delay = number(v, "delay")?.saturating_mul(1000);
            } else if a == "nodelay" {
                delay = u64::MAX;
            } else {
                return Err(ConfigError::invalid(format!("invalid parameter \"{a}\""), &d.span));
            }
        }
        let Some(zone) = zone else {
            return Err(ConfigError::invalid(
                "\"limit_req\" must have \"zone\" parameter",
                &d.span,
            ));
        };
        let burst = burst.saturating_mul(1000);
        if burst > corelb_shared_state::MAX_EXCESS {
            let msg = format!(
                "\"burst={}\" is more than corelb keeps ({})",
                burst / 1000,
                corelb_shared_state::MAX_EXCESS / 1000
            );
            return Err(ConfigError::invalid(msg, &d.span));
        }
        let lines = self.req.get_or_insert_with(Vec::new);
        if lines.iter().any(|l| l.zone == zone) {
            return Err(directive_err(d, "is duplicate"));
        }
        if lines.len() >= crate::config::limit::MAX_REQ_LIMITS {
            let msg = format!(
                "more than {} \"limit_req\" lines at one level are not supported by corelb",
                crate::config::limit::MAX_REQ_LIMITS
            );
            return Err(ConfigError::invalid(msg, &d.span));
        }
        lines.push(ReqLine {
            zone,
            burst,
            delay,
            span: d.span.clone(),
        });
        Ok(())
    }

    fn limit_conn(&mut self, d: &Directive) -> Result<(), ConfigError> {
        let zone = arg(d, 0).to_string();
        let lines = self.conn.get_or_insert_with(Vec::new);
        if lines.iter().any(|l| l.zone == zone) {
            return Err(directive_err(d, "is duplicate"));
        }
        let n = arg(d, 1);
        let conn = crate::config::value::atoi(n)
            .filter(|&c| c > 0)
            .ok_or_else(|| ConfigError::invalid(format!("invalid number of connections \"{n}\""), &d.span))?;
        if conn > 65535 {
            return Err(ConfigError::invalid("connection limit must be less 65536", &d.span));
        }
        lines.push(ConnLine {
            zone,
            conn,
            span: d.span.clone(),
        });
        Ok(())
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &LimitsLayer) -> LimitsLayer {
        LimitsLayer {
            req: self.req.clone().or_else(|| parent.req.clone()),
            req_answer: self.req_answer.over(&parent.req_answer),
            conn: self.conn.clone().or_else(|| parent.conn.clone()),
            conn_answer: self.conn_answer.over(&parent.conn_answer),
        }
    }

    /// The effective limits with each zone named found in `zones` (nginx's "zero size shared memory zone" for
    /// one no `*_zone` line makes).
    pub fn conf(&self, zones: &Zones) -> Result<LimitsConf, ConfigError> {
        let unknown =
            |name: &str, at: &Span| ConfigError::invalid(format!("zero size shared memory zone \"{name}\""), at);
        let req = match &self.req {
            None => None,
            Some(lines) => {
                let limits = lines
                    .iter()
                    .map(|l| {
                        if zones.conn.iter().any(|z| z.name == l.zone) {
                            return Err(different_use(&l.zone, &l.span));
                        }
                        let zone = zones.req.iter().position(|z| z.name == l.zone);
                        let zone = zone.ok_or_else(|| unknown(&l.zone, &l.span))?;
                        Ok(ReqLimit {
                            zone,
                            burst: l.burst,
                            delay: l.delay,
                        })
                    })
                    .collect::<Result<_, ConfigError>>()?;
                Some(Arc::new(ReqLimits {
                    limits,
                    answer: self.req_answer.conf(),
                }))
            }
        };
        let conn = match &self.conn {
            None => None,
            Some(lines) => {
                let limits = lines
                    .iter()
                    .map(|l| {
                        if zones.req.iter().any(|z| z.name == l.zone) {
                            return Err(different_use(&l.zone, &l.span));
                        }
                        let zone = zones.conn.iter().position(|z| z.name == l.zone);
                        let zone = zone.ok_or_else(|| unknown(&l.zone, &l.span))?;
                        Ok(ConnLimit { zone, conn: l.conn })
                    })
                    .collect::<Result<_, ConfigError>>()?;
                Some(Arc::new(ConnLimits {
                    limits,
                    answer: self.conn_answer.conf(),
                }))
            }
        };
        Ok(LimitsConf { req, conn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(name: &str, args: &[&str]) -> Directive {
        Directive::at_t_conf(name, args)
    }

    fn zones(lines: &[(&str, &[&str])]) -> Result<Zones, ConfigError> {
        let mut z = Zones::default();
        let mut vars = Vars::default();
        for (name, args) in lines {
            assert!(zone(&mut z, &mut vars, Module::Http, &d(name, args))?);
        }
        Ok(z)
    }

    fn err(e: ConfigError) -> String {
        e.to_string()
    }

    #[test]
    fn zones_as_nginx_reads_them() {
        let z = zones(&[
            ("limit_req_zone", &["$binary_remote_addr", "zone=one:1m", "rate=30r/m"]),
            ("limit_conn_zone", &["$uri", "zone=c:32k"]),
        ])
        .unwrap();
        assert_eq!(
            (z.req[0].name.as_str(), z.req[0].size, z.req[0].rate),
            ("one", 1 << 20, 500)
        );
        assert_eq!((z.conn[0].name.as_str(), z.conn[0].size), ("c", 32768));
        let e = |args: &[&str]| err(zones(&[("limit_req_zone", args)]).unwrap_err());
        assert_eq!(
            e(&["$uri", "zone=a:16k"]),
            "[emerg] zone \"zone=a:16k\" is too small in t.conf:3"
        );
        assert_eq!(
            e(&["$uri", "zone=a"]),
            "[emerg] invalid zone size \"zone=a\" in t.conf:3"
        );
        assert_eq!(
            e(&["$uri", "zone=a:1m", "rate=0r/s"]),
            "[emerg] invalid rate \"rate=0r/s\" in t.conf:3"
        );
        assert_eq!(
            e(&["$uri", "rate=1r/s"]),
            "[emerg] \"limit_req_zone\" must have \"zone\" parameter in t.conf:3"
        );
        assert!(e(&["$uri", "zone=a:1m", "rate=1r/s", "sync"]).contains("is not supported by corelb"));
        let other = zones(&[
            ("limit_req_zone", &["$uri", "zone=a:1m"]),
            ("limit_conn_zone", &["$uri", "zone=a:1m"]),
        ]);
        assert_eq!(
            err(other.unwrap_err()),
            "[emerg] the shared memory zone \"a\" is already declared for a different use in t.conf:3"
        );
        let resized = zones(&[
            ("limit_req_zone", &["$uri", "zone=a:1m"]),
            ("limit_req_zone", &["$uri", "zone=a:2m"]),
        ]);
        assert_eq!(
            err(resized.unwrap_err()),
            "[emerg] the size 2097152 of shared memory zone \"a\" conflicts with already declared size 1048576 in t.conf:3"
        );
        let twice = zones(&[
            ("limit_req_zone", &["$uri", "zone=a:1m"]),
            ("limit_req_zone", &["$host", "zone=a:1m"]),
        ]);
        assert_eq!(
            err(twice.unwrap_err()),
            "[emerg] limit_req_zone \"a\" is already bound to key \"$uri\" in t.conf:3"
        );
    }

    #[test]
    fn levels_merge_as_nginx() {
        let z = zones(&[
            ("limit_req_zone", &["$uri", "zone=one:1m", "rate=2r/s"]),
            ("limit_req_zone", &["$host", "zone=two:1m", "rate=2r/s"]),
            ("limit_conn_zone", &["$uri", "zone=c:1m"]),
        ])
        .unwrap();
        let mut http = LimitsLayer::default();
        assert!(http
            .directive(&d("limit_req", &["zone=one", "burst=5", "nodelay"]))
            .unwrap());
        assert!(http.directive(&d("limit_req_status", &["429"])).unwrap());
        assert!(http.directive(&d("limit_conn_log_level", &["warn"])).unwrap());
        assert!(!http.directive(&d("limit_rate", &["1"])).unwrap());
        let mut loc = LimitsLayer::default();
        loc.directive(&d("limit_req", &["zone=two", "delay=2", "burst=3"]))
            .unwrap();
        loc.directive(&d("limit_conn", &["c", "2"])).unwrap();
        let inherited = LimitsLayer::default().over(&http).conf(&z).unwrap();
        let req = inherited.req.unwrap();
        assert_eq!(
            req.limits,
            vec![ReqLimit {
                zone: 0,
                burst: 5000,
                delay: u64::MAX
            }]
        );
        assert_eq!(req.answer.status, 429);
        assert!(inherited.conn.is_none());
        let own = loc.over(&http).conf(&z).unwrap();
        assert_eq!(
            own.req.unwrap().limits,
            vec![ReqLimit {
                zone: 1,
                burst: 3000,
                delay: 2000
            }]
        );
        let conn = own.conn.unwrap();
        assert_eq!(conn.limits, vec![ConnLimit { zone: 0, conn: 2 }]);
        assert_eq!(conn.answer.level, Level::Warn);
        assert_eq!(LimitsLayer::default().conf(&z).unwrap(), LimitsConf::default());
    }

    #[test]
    fn bad_lines_are_refused_with_nginx_words() {
        let e = |name: &str, args: &[&str]| err(LimitsLayer::default().directive(&d(name, args)).unwrap_err());
        assert_eq!(
            e("limit_req", &["zone=a", "burst=0"]),
            "[emerg] invalid burst value \"burst=0\" in t.conf:3"
        );
        assert_eq!(
            e("limit_req", &["burst=1"]),
            "[emerg] \"limit_req\" must have \"zone\" parameter in t.conf:3"
        );
        assert_eq!(
            e("limit_req", &["zone=a", "fast"]),
            "[emerg] invalid parameter \"fast\" in t.conf:3"
        );
        assert_eq!(
            e("limit_req_status", &["302"]),
            "[emerg] value must be between 400 and 599 in t.conf:3"
        );
        assert_eq!(
            e("limit_conn", &["c", "0"]),
            "[emerg] invalid number of connections \"0\" in t.conf:3"
        );
        assert_eq!(
            e("limit_req_log_level", &["crit"]),
            "[emerg] invalid value \"crit\" in t.conf:3"
        );
        assert!(e("limit_req", &["zone=a", "burst=300000"]).contains("is more than corelb keeps"));
        let mut l = LimitsLayer::default();
        l.directive(&d("limit_req", &["zone=a"])).unwrap();
        assert_eq!(
            err(l.directive(&d("limit_req", &["zone=a"])).unwrap_err()),
            "[emerg] \"limit_req\" directive is duplicate in t.conf:3"
        );
        let z = Zones::default();
        assert_eq!(
            err(l.conf(&z).unwrap_err()),
            "[emerg] zero size shared memory zone \"a\" in t.conf:3"
        );
    }
}
