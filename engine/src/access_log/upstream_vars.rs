//! The upstream's variables in the phases of a request routed again after its upstream answered (an error page
//! of an intercepted answer or a failed proxy, an `X-Accel-Redirect`), as nginx keeps `r->upstream_states` and
//! the upstream's headers across an internal redirect: `$upstream_addr`, `$upstream_status` and their times from
//! the tries, `$upstream_http_*` and `$upstream_cookie_*` from the upstream's head.

use super::answer_headers::{header, set_cookie};
use super::record::UpstreamTry;
use super::render::upstream_list;
use crate::balance::UpstreamPlan;
use crate::config::key::{Var, VarSource};

/// The tries and the upstream's head the request kept (references, built where the request is routed again).
pub struct UpstreamVars<'a> {
    pub tries: &'a [UpstreamTry],
    /// The upstream's response head (empty when it gave none).
    pub head: &'a [u8],
    /// The snapshot's upstreams: a try that found no live peer writes its upstream's name.
    pub plans: &'a [UpstreamPlan],
}

impl VarSource for UpstreamVars<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            v if v.is_upstream_try() => {
                let name = |i: usize, o: &mut Vec<u8>| {
                    if let Some(p) = self.plans.get(i) {
                        o.extend_from_slice(p.name.as_bytes());
                    }
                };
                upstream_list(v, self.tries, &name, out);
            }
            Var::UpstreamHttp(name) => {
                header(self.head, name, out);
            }
            Var::UpstreamCookie(name) => {
                set_cookie(self.head, name, out);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_log::record::{RequestRecord, TryPeer};

    fn eval(vars: &UpstreamVars<'_>, v: Var) -> String {
        let mut out = Vec::new();
        vars.append(&v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn tries_and_the_upstream_head_of_the_request_routed_again() {
        let mut rec = RequestRecord::default();
        rec.begin(0, 1, 0);
        rec.keep_for_head(1, 40);
        let (a, b) = ("127.0.0.1:8081".parse().unwrap(), "127.0.0.1:8082".parse().unwrap());
        rec.try_start(TryPeer::Addr(a));
        rec.try_header(404);
        rec.try_start(TryPeer::Addr(b));
        rec.try_header(404);
        let head = b"HTTP/1.1 204 No Content\r\nX-Accel-Redirect: /next?a=1\r\nSet-Cookie: s=v; Path=/\r\n\r\n";
        let vars = UpstreamVars {
            tries: &rec.tries,
            head,
            plans: &[],
        };
        assert_eq!(eval(&vars, Var::UpstreamAddr), "127.0.0.1:8081, 127.0.0.1:8082");
        assert_eq!(eval(&vars, Var::UpstreamStatus), "404, 404");
        assert_eq!(eval(&vars, Var::UpstreamHttp("x-accel-redirect".into())), "/next?a=1");
        assert_eq!(eval(&vars, Var::UpstreamCookie("s".into())), "v");
        assert_eq!(eval(&vars, Var::Uri), "", "only the upstream's variables");
    }
}
