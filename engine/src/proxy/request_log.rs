//! The start of a routed request's access-log record: the location's log set, and the values only the request
//! head has, captured before the head's buffer is reused.

use crate::access_log::record::RequestRecord;
use crate::http::request::RequestHead;
use crate::http::vars::{ConnVars, RequestVars};
use crate::http::BodyFraming;
use crate::snapshot::route::LocationPlan;
use crate::snapshot::{ServerPlan, Snapshot};

/// Starts the record of a routed request (`requests`: its number on the connection) and, when its location logs,
/// captures the values only the head has (`uri`: the normalized path).
#[allow(clippy::too_many_arguments)]
pub fn begin_request(
    snap: &Snapshot,
    server: &ServerPlan,
    loc: Option<&LocationPlan>,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    requests: u64,
    rec: &mut RequestRecord,
) {
    let set = loc.map_or(server.log_set, |l| l.log_set);
    let body = match head.body {
        BodyFraming::Length(n) => n,
        _ => 0,
    };
    rec.begin(set, requests, head.head_len as u64 + body);
    if set == 0 {
        return;
    }
    let Some(targets) = snap.access_logs.sets.get(set) else {
        return;
    };
    let proxy_host = loc
        .and_then(|l| l.proxy.as_ref())
        .and_then(|p| snap.http_plans.get(p.upstream))
        .map_or("", |u| u.name.as_str());
    let vars = RequestVars {
        req: head,
        uri,
        conn,
        proxy_host,
    };
    let view = crate::access_log::render::RequestView {
        vars: &vars,
        server_name: server.names.first().map_or("", String::as_str),
    };
    crate::access_log::render::capture(targets, &view, rec);
}
