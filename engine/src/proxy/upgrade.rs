//! A `101 Switching Protocols` from the upstream to a client that sent `Upgrade` (WebSocket): the head goes to the
//! client with `Connection: upgrade`, then bytes flow both ways until both sides have closed or nothing moves for
//! `proxy_read_timeout` (nginx's `ngx_http_upstream_upgrade`).

use super::body::send;
use super::client::{ClientConn, Routed};
use super::exchange::{ResponseInfo, TryTarget};
use super::pump::{pump, Ends, Half, PumpEnd};
use crate::access_log::head_vars::HeadVars;
use crate::http::response::{parse_response, write_switching_head, MAX_HEADERS};
use crate::runtime::Runtime;
use crate::snapshot::proxied::ProxiedEdits;

/// Each direction's buffer while tunnelling (the stream proxy's size).
const TUNNEL_BUF: usize = 16 * 1024;

impl<R: Runtime> ClientConn<R> {
    /// Passes the `101` head in the upstream buffer to the client and tunnels until the end; returns the bytes read
    /// from the upstream. The client connection is not reused afterwards.
    pub(super) async fn tunnel(
        &mut self,
        from: TryTarget<'_, R>,
        req: &Routed,
        mut conn: R::Conn,
        info: ResponseInfo,
    ) -> u64 {
        let bufs = &mut self.bufs;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let Ok(Some(resp)) = parse_response(bufs.upstream.readable(), &mut headers, false) else {
            return info.head_len as u64;
        };
        let now = crate::clock::now_secs();
        let response = HeadVars {
            status: 101,
            rec: &bufs.log,
            upstream_head: bufs.upstream.readable().get(..info.head_len).unwrap_or_default(),
            upstream_name: bufs.headers.upstream_name(),
            cache: &bufs.vars,
        };
        let edits = ProxiedEdits {
            plan: &from.plan.response,
            headers: &from.plan.headers,
            prepared: &bufs.headers,
            response: &response,
            now,
        };
        self.shard
            .date(now, |d| write_switching_head(&resp, d, &edits, &mut bufs.out));
        let head_bytes = bufs.out.len();
        bufs.upstream.consume(info.head_len);
        // What the upstream already sent after its head follows ours; what the client sent after its head goes up.
        let early_down = bufs.upstream.readable().len() as u64;
        bufs.out.extend_from_slice(bufs.upstream.readable());
        bufs.upstream.consume(usize::MAX);
        let conf = &from.plan.conf;
        if send::<R>(&mut self.sock, &bufs.out, req.timeouts.send).await.is_err() {
            bufs.log.answered(101, head_bytes, 0);
            return info.head_len as u64 + early_down;
        }
        let early_up = bufs.client.readable();
        if !early_up.is_empty() && send::<R>(&mut conn, early_up, conf.send_timeout).await.is_err() {
            bufs.log.answered(101, head_bytes, early_down);
            return info.head_len as u64 + early_down;
        }
        bufs.client.consume(usize::MAX);
        let (mut up, mut down) = (Half::new(TUNNEL_BUF), Half::new(TUNNEL_BUF));
        // nginx ends an upgraded connection when either side ends
        let end = pump::<R, _, _>(
            &mut self.sock,
            &mut conn,
            (&mut up, &mut down),
            conf.read_timeout,
            Ends::First,
        )
        .await;
        if let PumpEnd::Idle = end {
            crate::log_info!("upgraded connection to {} timed out", from.addr);
        }
        let sent_down = early_down + down.bytes;
        bufs.log.answered(101, head_bytes, sent_down);
        info.head_len as u64 + sent_down
    }
}
