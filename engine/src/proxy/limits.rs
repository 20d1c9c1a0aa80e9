//! nginx's preaccess phase of a request: `limit_req` (go on, after a delay, or answer), then `limit_conn` (count
//! the request in each zone until it ends, or answer).

use crate::http::vars::RequestVars;
use crate::snapshot::limits::{LimitPlan, ReqOutcome};
use crate::snapshot::route::FixedAnswer;
use corelb_shared_state::ConnUnit;
use std::time::Duration;

/// What the limits decided.
pub(super) enum Preaccess<'a> {
    /// Go on, after this long (zero: now).
    Go(Duration),
    /// The limit's answer (`limit_req_status`, `limit_conn_status`).
    Answer(&'a FixedAnswer),
}

/// Runs `plan` for the request of `vars` (`key`: a reused buffer; `units`: the request's `limit_conn` units).
pub(super) fn preaccess<'a>(
    plan: &'a LimitPlan,
    vars: &RequestVars<'_, '_, '_>,
    key: &mut Vec<u8>,
    units: &mut Vec<ConnUnit>,
) -> Preaccess<'a> {
    let status = &vars.ext.cache.limits;
    let client = vars.conn.remote.ip();
    let delay = match plan.req.as_ref().map(|r| r.check(vars, key, status, client)) {
        Some(ReqOutcome::Reject(answer)) => return Preaccess::Answer(answer),
        Some(ReqOutcome::Delay(d)) => d,
        Some(ReqOutcome::Pass) | None => Duration::ZERO,
    };
    if let Some(answer) = plan
        .conn
        .as_ref()
        .and_then(|c| c.check(vars, key, status, units, client))
    {
        return Preaccess::Answer(answer);
    }
    Preaccess::Go(delay)
}
