//! nginx's preaccess phase of a request: `limit_req` (go on, after a delay, or answer), then `limit_conn` (count
//! the request in each zone until it ends, or answer).

use super::client::ClientConn;
use crate::http::vars::RequestVars;
use crate::runtime::Runtime;
use crate::snapshot::limits::{LimitPlan, ReqOutcome};
use crate::snapshot::route::FixedAnswer;
use corelb_shared_state::ConnUnit;
use std::time::{Duration, Instant};

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
    let client = vars.conn.remote;
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

impl<R: Runtime> ClientConn<R> {
    /// `limit_req`'s delay on the shard's timer, watching the client as nginx's `ngx_http_test_reading` does:
    /// bytes it sends are kept in its buffer for later (a body, a pipelined request); false when it closed or
    /// its connection failed (the request ends, logged as nginx's 499).
    pub(super) async fn limit_delay(&mut self, delay: Duration) -> bool {
        let end = Instant::now() + delay;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            let client = async {
                let spare = self.bufs.client.spare();
                if spare.is_empty() {
                    // a full buffer is no longer watched: the delay is waited out
                    std::future::pending::<()>().await;
                }
                match futures_lite::AsyncReadExt::read(&mut self.sock, spare).await {
                    Ok(0) | Err(_) => false,
                    Ok(n) => {
                        self.bufs.client.commit(n);
                        true
                    }
                }
            };
            match crate::runtime::timeout::<R, _>(left, client).await {
                Err(_) => return true,
                Ok(false) => return false,
                Ok(true) => {}
            }
        }
    }
}
