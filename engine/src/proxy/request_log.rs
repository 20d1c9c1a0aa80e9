//! The start of a routed request's access-log record: the location's log set, and the values only the request
//! head has, captured before the head's buffer is reused.

use crate::access_log::record::RequestRecord;
use crate::access_log::render::{capture, RequestView};
use crate::http::vars::RequestVars;
use crate::http::BodyFraming;
use crate::snapshot::route::LocationPlan;
use crate::snapshot::{ServerPlan, Snapshot};

/// Starts the record of a routed request (`requests`: its number on the connection) and, when its location logs,
/// captures the values only the head has (`vars`: the head, the normalized path, `$proxy_host`); when it does not
/// log but its `add_header` lines read the upstream tries, keeps those for the answer's head.
pub fn begin_request(
    snap: &Snapshot,
    server: &ServerPlan,
    loc: Option<&LocationPlan>,
    vars: &RequestVars<'_, '_, '_>,
    requests: u64,
    rec: &mut RequestRecord,
) {
    let set = loc.map_or(server.log_set, |l| l.log_set);
    let head = vars.req;
    let body = match head.body {
        BodyFraming::Length(n) => n,
        _ => 0,
    };
    rec.begin(set, requests, head.head_len as u64 + body);
    if set == 0 {
        // a location with error pages keeps the tries for the page's `$upstream_*` (after a proxied error)
        if loc.map_or(&server.headers, |l| &l.headers).reads_record() || loc.is_some_and(|l| l.error_pages.is_some()) {
            rec.keep_for_head(requests, head.head_len as u64 + body);
        }
        return;
    }
    let Some(targets) = snap.access_logs.sets.get(set) else {
        return;
    };
    rec.header_vars = snap.access_logs.header_vars.get(set).cloned().flatten();
    let view = RequestView { vars };
    capture(targets, &view, rec);
}

/// Starts the record of a request refused before it was routed (`read`: the head's bytes so far): nginx logs it
/// in the default server of the listen address `port`, with what the refused head set (see
/// [`crate::access_log::refused`]).
pub fn begin_refused(
    snap: &Snapshot,
    port: usize,
    conn: crate::http::vars::ConnVars,
    read: &[u8],
    requests: u64,
    rec: &mut RequestRecord,
) {
    let Some((server, _)) = snap.server_named(port, None, None) else {
        return;
    };
    rec.begin(server.log_set, requests, read.len() as u64);
    let Some(targets) = snap
        .access_logs
        .sets
        .get(server.log_set)
        .filter(|_| server.log_set != 0)
    else {
        return;
    };
    rec.header_vars = snap.access_logs.header_vars.get(server.log_set).cloned().flatten();
    let refused = crate::access_log::refused::Refused {
        conn,
        read,
        server_name: &server.server_name,
        connection: rec.connection,
        requests,
    };
    crate::access_log::refused::capture(targets, &refused, rec);
}
