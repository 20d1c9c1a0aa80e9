//! `limit_req` and `limit_conn` ready for nginx's preaccess phase: each zone's key, rate and table in the shared
//! zone, a level's limits over them, and the answer a limited request gets (nginx's `ngx_http_limit_req_handler`,
//! `ngx_http_limit_conn_handler`, `ngx_stream_limit_conn_handler`).

use super::headers::HeadersPlan;
use super::route::FixedAnswer;
use super::SnapshotError;
use crate::config::headers::ServerTokens;
use crate::config::key::{KeyTemplate, VarSource};
use crate::config::limit::{LimitAnswer, LimitsConf, Zones};
use crate::http::limit_status::{ConnStatus, LimitStatus, ReqStatus};
use corelb_shared_state::{ConnTable, ConnUnit, Decided, ReqTable, ReqVerdict, Zone};
use std::hash::Hasher;
use std::sync::Arc;
use std::time::Duration;

use crate::config::limit::MAX_REQ_LIMITS;

/// The longest `limit_req` key (nginx's 65535) and `limit_conn` key (255); a longer one is not limited.
const MAX_REQ_KEY: usize = 65535;
const MAX_CONN_KEY: usize = 255;

/// One `limit_req_zone`.
#[derive(Debug)]
pub struct ReqZonePlan {
    pub name: String,
    key: KeyTemplate,
    /// Milli-requests per second.
    rate: u64,
    pub table: Arc<ReqTable>,
}

/// One `limit_conn_zone`.
#[derive(Debug)]
pub struct ConnZonePlan {
    pub name: String,
    key: KeyTemplate,
    pub table: Arc<ConnTable>,
}

/// A block's zones with their tables from the shared zone (kept across a reload when name, key and size stay).
#[derive(Debug, Default)]
pub struct LimitZones {
    pub req: Vec<Arc<ReqZonePlan>>,
    pub conn: Vec<Arc<ConnZonePlan>>,
}

impl LimitZones {
    /// The zones of a block (`stream` or http) with their tables from `zone`; nginx's refusal of a reload that
    /// changes a zone's key.
    pub fn build(zones: &Zones, stream: bool, zone: &Zone) -> Result<LimitZones, SnapshotError> {
        let changed = |kind: &str, name: &str, key: &str, old: String| {
            SnapshotError::LimitKey(format!(
                "{kind} \"{name}\" uses the \"{key}\" key while previously it used the \"{old}\" key"
            ))
        };
        let mut out = LimitZones::default();
        for z in &zones.req {
            let table = zone
                .limit_req_table(&z.name, z.key.raw(), z.size)
                .map_err(|old| changed("limit_req", &z.name, z.key.raw(), old))?;
            out.req.push(Arc::new(ReqZonePlan {
                name: z.name.clone(),
                key: z.key.clone(),
                rate: z.rate,
                table,
            }));
        }
        for z in &zones.conn {
            let table = zone
                .limit_conn_table(stream, &z.name, z.key.raw(), z.size)
                .map_err(|old| changed("limit_conn", &z.name, z.key.raw(), old))?;
            out.conn.push(Arc::new(ConnZonePlan {
                name: z.name.clone(),
                key: z.key.clone(),
                table,
            }));
        }
        Ok(out)
    }
}

/// A key's hash as the tables keep it (std's `DefaultHasher::new`, SipHash with fixed keys: the same in every
/// shard).
fn hash_key(key: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(key);
    h.finish()
}

/// One `limit_req` line over its zone.
#[derive(Debug)]
struct ReqLine {
    zone: Arc<ReqZonePlan>,
    burst: u64,
    delay: u64,
}

/// A level's `limit_req` lines.
#[derive(Debug)]
pub struct ReqPlan {
    lines: Vec<ReqLine>,
    answer: LimitAnswer,
    /// The level's `error_log` lines (`None`: the main log), where its messages go.
    errors: Option<Arc<crate::log::ErrorLogs>>,
    /// `limit_req_status`'s answer, with the level's `add_header`s (a special response: `error_page` applies).
    reject: FixedAnswer,
}

/// What `limit_req` decided.
#[derive(Debug, Clone, Copy)]
pub enum ReqOutcome<'a> {
    Pass,
    /// Go on after this long (on the shard's timer).
    Delay(Duration),
    Reject(&'a FixedAnswer),
}

/// One request's entries in the zones before its last (nginx's `ctx->node`): the entry and the key's hash.
type Pending = [Option<(usize, u64)>; MAX_REQ_LIMITS];

impl ReqPlan {
    /// nginx's `ngx_http_limit_req_handler`: every zone's key (an empty one is not limited) looked up in order,
    /// the first over its burst rejecting (nothing stored for any zone); else each zone accounted and the delay
    /// that of the zone that wants the longest.
    pub fn check(
        &self,
        src: &dyn VarSource,
        key: &mut Vec<u8>,
        status: &LimitStatus,
        client: std::net::SocketAddr,
    ) -> ReqOutcome<'_> {
        if status.req_checked() {
            return ReqOutcome::Pass;
        }
        let client = crate::config::unix_addr::Ip(&client);
        let mut pending: Pending = [None; MAX_REQ_LIMITS];
        let mut decided: Option<(usize, ReqVerdict)> = None;
        let last = self.lines.len().saturating_sub(1);
        for (n, line) in self.lines.iter().enumerate() {
            key.clear();
            line.zone.key.eval_into(src, key);
            if key.is_empty() {
                continue;
            }
            if key.len() > MAX_REQ_KEY {
                crate::log_error!(
                    "the value of the \"{}\" key is more than 65535 bytes: \"{}\", client: {client}",
                    line.zone.key.raw(),
                    String::from_utf8_lossy(key)
                );
                continue;
            }
            let hash = hash_key(key);
            let z = &line.zone;
            let verdict = z.table.lookup(hash, z.rate, line.burst, z.table.now(), n == last);
            if let ReqVerdict::Pending(entry, _) = verdict {
                if let Some(p) = pending.get_mut(n) {
                    *p = Some((entry, hash));
                }
                decided = Some((n, verdict));
                continue;
            }
            decided = Some((n, verdict));
            break;
        }
        let Some((mut n, verdict)) = decided else {
            return ReqOutcome::Pass;
        };
        let dry = if self.answer.dry_run { ", dry run" } else { "" };
        let zone_name = |i: usize| self.lines.get(i).map_or("", |l| l.zone.name.as_str());
        let excess = match verdict {
            ReqVerdict::Busy(excess) => {
                crate::log_in!(
                    self.errors.as_deref(),
                    self.answer.level,
                    "limiting requests{dry}, excess: {}.{:03} by zone \"{}\", client: {client}",
                    excess / 1000,
                    excess % 1000,
                    zone_name(n)
                );
                return self.rejected(status, n);
            }
            ReqVerdict::NoEntry => {
                crate::log_in!(
                    self.errors.as_deref(),
                    crate::log::Level::Alert,
                    "could not allocate node in limit_req zone \"{}\"",
                    zone_name(n)
                );
                return self.rejected(status, n);
            }
            ReqVerdict::Passed(excess) => excess,
            // the last zone's key was empty: every zone before it is accounted, none decided yet
            ReqVerdict::Pending(..) => {
                n = self.lines.len();
                0
            }
        };
        let (delay, excess, by) = self.account(n, excess, &pending);
        let count = |d: Decided| {
            if let Some(l) = self.lines.get(by) {
                l.zone.table.decisions.count(d);
            }
        };
        if delay == 0 {
            // every zone the request was looked up in passed it
            for (i, line) in self.lines.iter().enumerate() {
                if i == n || pending.get(i).is_some_and(Option::is_some) {
                    line.zone.table.decisions.count(Decided::Passed);
                }
            }
            status.set_req(ReqStatus::Passed);
            return ReqOutcome::Pass;
        }
        crate::log_in!(
            self.errors.as_deref(),
            self.answer.delay_level(),
            "delaying request{dry}, excess: {}.{:03}, by zone \"{}\", client: {client}",
            excess / 1000,
            excess % 1000,
            zone_name(by)
        );
        if self.answer.dry_run {
            count(Decided::DelayedDryRun);
            status.set_req(ReqStatus::DelayedDryRun);
            return ReqOutcome::Pass;
        }
        count(Decided::Delayed);
        status.set_req(ReqStatus::Delayed);
        ReqOutcome::Delay(Duration::from_millis(delay))
    }

    /// nginx's `ngx_http_limit_req_account`: the delay of the zone `n` decided with (its `excess`), then each
    /// earlier zone's entry takes the request and may want longer. The delay (ms), its excess and its zone.
    fn account(&self, n: usize, excess: u64, pending: &Pending) -> (u64, u64, usize) {
        let delay_of = |line: &ReqLine, excess: u64| match excess.checked_sub(line.delay) {
            Some(over) if over > 0 => over.saturating_mul(1000) / line.zone.rate.max(1),
            _ => 0,
        };
        let mut best = (self.lines.get(n).map_or(0, |l| delay_of(l, excess)), excess, n);
        for (i, line) in self.lines.iter().enumerate().take(n.min(MAX_REQ_LIMITS)) {
            let Some((entry, hash)) = pending.get(i).copied().flatten() else {
                continue;
            };
            let z = &line.zone;
            let excess = z.table.account(entry, hash, z.rate, z.table.now());
            let delay = delay_of(line, excess);
            if delay > best.0 {
                best = (delay, excess, i);
            }
        }
        best
    }

    /// The answer of a request zone `n` rejected.
    fn rejected(&self, status: &LimitStatus, n: usize) -> ReqOutcome<'_> {
        if let Some(l) = self.lines.get(n) {
            let d = if self.answer.dry_run {
                Decided::RejectedDryRun
            } else {
                Decided::Rejected
            };
            l.zone.table.decisions.count(d);
        }
        if self.answer.dry_run {
            status.set_req(ReqStatus::RejectedDryRun);
            return ReqOutcome::Pass;
        }
        status.set_req(ReqStatus::Rejected);
        ReqOutcome::Reject(&self.reject)
    }
}

/// A level's `limit_conn` lines.
#[derive(Debug)]
pub struct ConnPlan {
    lines: Vec<(Arc<ConnZonePlan>, u64)>,
    answer: LimitAnswer,
    /// The level's `error_log` lines (`None`: the main log), where its messages go.
    errors: Option<Arc<crate::log::ErrorLogs>>,
    /// `limit_conn_status`'s answer (http).
    reject: FixedAnswer,
}

impl ConnPlan {
    /// nginx's `ngx_http_limit_conn_handler`: each zone's key (an empty one is not limited) counts one more in
    /// `units`, given back when they are dropped; at a zone's limit every unit taken is given back and the
    /// request is rejected (the answer), or, dry run, goes on uncounted.
    pub fn check(
        &self,
        src: &dyn VarSource,
        key: &mut Vec<u8>,
        status: &LimitStatus,
        units: &mut Vec<ConnUnit>,
        client: std::net::SocketAddr,
    ) -> Option<&FixedAnswer> {
        if status.conn_checked() {
            return None;
        }
        let client = crate::config::unix_addr::Ip(&client);
        for (zone, limit) in &self.lines {
            key.clear();
            zone.key.eval_into(src, key);
            if key.is_empty() {
                continue;
            }
            if key.len() > MAX_CONN_KEY {
                crate::log_error!(
                    "the value of the \"{}\" key is more than 255 bytes: \"{}\", client: {client}",
                    zone.key.raw(),
                    String::from_utf8_lossy(key)
                );
                continue;
            }
            status.set_conn(ConnStatus::Passed);
            match ConnUnit::take(&zone.table, hash_key(key), *limit) {
                Ok(unit) => {
                    zone.table.decisions.count(Decided::Passed);
                    units.push(unit);
                }
                Err(at_limit) => {
                    if at_limit {
                        let dry = if self.answer.dry_run { ", dry run," } else { "" };
                        crate::log_in!(
                            self.errors.as_deref(),
                            self.answer.level,
                            "limiting connections{dry} by zone \"{}\", client: {client}",
                            zone.name
                        );
                    } else {
                        crate::log_in!(
                            self.errors.as_deref(),
                            crate::log::Level::Crit,
                            "ngx_slab_alloc() failed: no memory in limit_conn zone \"{}\"",
                            zone.name
                        );
                    }
                    units.clear();
                    if self.answer.dry_run {
                        zone.table.decisions.count(Decided::RejectedDryRun);
                        status.set_conn(ConnStatus::RejectedDryRun);
                        return None;
                    }
                    zone.table.decisions.count(Decided::Rejected);
                    status.set_conn(ConnStatus::Rejected);
                    return Some(&self.reject);
                }
            }
        }
        None
    }
}

/// A level's limits (at least one kind).
#[derive(Debug)]
pub struct LimitPlan {
    pub req: Option<ReqPlan>,
    pub conn: Option<ConnPlan>,
}

impl LimitPlan {
    /// The plan of `conf` over the block's `zones`, answering with the level's `headers` and `server_tokens` and
    /// logging to its `errors`; `None` when the level has no limits.
    pub fn new(
        conf: &LimitsConf,
        zones: &LimitZones,
        tokens: ServerTokens,
        headers: &HeadersPlan,
        errors: &Option<Arc<crate::log::ErrorLogs>>,
    ) -> Option<Box<LimitPlan>> {
        let answer = |status: u16| FixedAnswer::error(status, tokens).with_headers(headers.clone());
        let req = conf.req.as_deref().map(|r| ReqPlan {
            lines: r
                .limits
                .iter()
                .filter_map(|l| {
                    Some(ReqLine {
                        zone: Arc::clone(zones.req.get(l.zone)?),
                        burst: l.burst,
                        delay: l.delay,
                    })
                })
                .collect(),
            answer: r.answer,
            errors: errors.clone(),
            reject: answer(r.answer.status),
        });
        let conn = conf.conn.as_deref().map(|c| ConnPlan {
            lines: c
                .limits
                .iter()
                .filter_map(|l| Some((Arc::clone(zones.conn.get(l.zone)?), l.conn)))
                .collect(),
            answer: c.answer,
            errors: errors.clone(),
            reject: answer(c.answer.status),
        });
        (req.is_some() || conn.is_some()).then(|| Box::new(LimitPlan { req, conn }))
    }
}

/// The names of a block's zones, for [`Zone::retain_limits`].
pub fn zone_names<'a>(http: &'a LimitZones, stream: &'a LimitZones) -> (Vec<&'a str>, Vec<(bool, &'a str)>) {
    let req = http.req.iter().map(|z| z.name.as_str()).collect();
    let conn = http
        .conn
        .iter()
        .map(|z| (false, z.name.as_str()))
        .chain(stream.conn.iter().map(|z| (true, z.name.as_str())))
        .collect();
    (req, conn)
}
