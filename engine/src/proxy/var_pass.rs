//! The request side of `proxy_pass` with variables: the URL is evaluated (with `$proxy_host` still empty, as the
//! URL is what makes it) into the connection's buffer, and the snapshot's table says where the request goes.

use crate::http::request::RequestHead;
use crate::http::vars::{ConnVars, RequestExt, RequestVars};
use crate::snapshot::route::{FixedAnswer, ProxyPlan};
use crate::snapshot::var_pass::{Picked, VarPass};
use std::ops::Range;

/// The plan the URL names and its URI part (a range of `url`), or the answer when it names none.
pub fn pick<'s>(
    pass: &'s VarPass,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    ext: RequestExt<'_>,
    url: &mut Vec<u8>,
) -> (Option<&'s ProxyPlan>, Option<Range<usize>>, Option<&'s FixedAnswer>) {
    let vars = RequestVars {
        req: head,
        uri,
        conn,
        proxy_host: "",
        ext,
    };
    match pass.pick(&vars, url) {
        Picked::Plan { plan, uri } => (Some(plan), uri, None),
        Picked::Fail { answer, why } => {
            crate::log_error!("{}", why.message(url));
            (None, None, Some(answer))
        }
    }
}
