//! The request side of `proxy_pass` with variables: the URL is evaluated (with `$proxy_host` still empty, as the
//! URL is what makes it) into the connection's buffer, and the snapshot's table says where the request goes.

use crate::http::request::RequestHead;
use crate::http::vars::{ConnVars, RequestExt, RequestVars};
use crate::snapshot::route::{FixedAnswer, ProxyPlan};
use crate::snapshot::var_pass::{Picked, VarPass};
use std::ops::Range;

/// Where the URL sends the request.
pub struct Pick<'s> {
    /// The plan it names (`None`: `answer`).
    pub plan: Option<&'s ProxyPlan>,
    /// Its URI part, a range of the URL.
    pub uri: Option<Range<usize>>,
    /// The answer when it names nowhere.
    pub answer: Option<&'s FixedAnswer>,
    /// `$proxy_host` for a host that is no upstream, a range of the URL.
    pub proxy_host: Option<Range<usize>>,
}

/// The plan the URL names and its URI part (a range of `url`), or the answer when it names none.
pub fn pick<'s>(
    pass: &'s VarPass,
    head: &RequestHead<'_, '_>,
    uri: &[u8],
    conn: ConnVars,
    ext: RequestExt<'_>,
    url: &mut Vec<u8>,
) -> Pick<'s> {
    let vars = RequestVars {
        req: head,
        uri,
        conn,
        proxy_host: "",
        ext,
    };
    let none = Pick {
        plan: None,
        uri: None,
        answer: None,
        proxy_host: None,
    };
    match pass.pick(&vars, url) {
        Picked::Plan { plan, uri } => Pick {
            plan: Some(plan),
            uri,
            ..none
        },
        Picked::Resolve { plan, target, uri } => Pick {
            plan: Some(plan),
            uri,
            proxy_host: Some(target.proxy_host),
            ..none
        },
        Picked::Fail { answer, why } => {
            crate::log_error!("{}", why.message(url));
            Pick {
                answer: Some(answer),
                ..none
            }
        }
    }
}
