//! The TCP (`stream`) flow: pick a peer with the key taken from the connection, connect with a timeout and move
//! on to the next peer on failure, then copy both ways from one future with the idle `proxy_timeout`.

use super::pump::{pump, Half, PumpEnd};
use crate::balance::next::{self, FailCause, Proto, Step, TryCx, TryEnd};
use crate::balance::{Attempt, Outcome};
use crate::http::vars::ConnVars;
use crate::runtime::{Conn, Runtime};
use crate::shard::Shard;
use std::net::SocketAddr;
use std::rc::Rc;

/// Copy buffer per direction.
const BUF: usize = 16 * 1024;

/// Serves one stream connection accepted on `listen` until both sides close, on the snapshot running when it
/// began (a reload applies to the next connection).
pub async fn serve<R: Runtime>(shard: Rc<Shard<R>>, mut client: R::Conn, remote: SocketAddr, listen: SocketAddr) {
    let snap = shard.snapshot();
    let server = snap.stream_server_of(listen);
    let Some(srv) = server.and_then(|i| snap.config.stream.as_ref()?.servers.get(i)) else {
        return;
    };
    let Some(plan) = snap.stream_plans.get(srv.upstream) else {
        return;
    };
    let local = client
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let vars = ConnVars { remote, local };
    let mut key = Vec::new();
    plan.key.eval_into(&vars, remote.ip(), &mut key);
    let mut attempt = Attempt::new(plan, srv.next_upstream_tries, &key);
    let rules = next::stream_rules(srv.next_upstream);
    let (mut upstream, peer) = loop {
        let now = crate::clock::now_secs();
        let picked = shard
            .with_stream_state(&snap, srv.upstream, |st| attempt.pick(st, &key, now))
            .flatten();
        let Some(peer) = picked else {
            crate::log_error!("no live upstreams while connecting to upstream \"{}\"", plan.name);
            return;
        };
        match R::connect(peer.addr, srv.connect_timeout).await {
            Ok(c) => break (c, peer),
            Err(e) => {
                crate::log_error!("connect() to {} failed ({e}) while connecting to upstream", peer.addr);
                let cause = if e.kind() == std::io::ErrorKind::TimedOut {
                    FailCause::Timeout
                } else {
                    FailCause::Error
                };
                let cx = TryCx {
                    proto: Proto::Stream,
                    tries_left: attempt.tries_left(),
                    replayable: true,
                    non_idempotent: false,
                    in_time: true,
                };
                let step = next::decide(&rules, TryEnd::Failed { cause, sent: false }, cx);
                shard.with_stream_state(&snap, srv.upstream, |st| {
                    attempt.report(Outcome::Failed, st, crate::clock::now_secs())
                });
                if !matches!(step, Step::Retry(_)) {
                    return;
                }
            }
        }
    };
    let _ = upstream.set_nodelay(true);
    peer.slot.count_request();
    let session = std::time::Instant::now();
    let mut up_half = Half::new(BUF);
    let mut down_half = Half::new(BUF);
    let end = pump::<R, _, _>(&mut client, &mut upstream, &mut up_half, &mut down_half, srv.timeout).await;
    if let PumpEnd::Failed(e) = &end {
        crate::log_info!("stream to {} ended: {e}", peer.addr);
    }
    peer.slot.count_bytes(up_half.bytes, down_half.bytes);
    peer.slot.record_response_time(shard.index, session.elapsed());
    shard.with_stream_state(&snap, srv.upstream, |st| {
        attempt.report(Outcome::Success, st, crate::clock::now_secs())
    });
}
