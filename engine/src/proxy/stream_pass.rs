//! A stream `proxy_pass` with variables (nginx's `ngx_stream_proxy_eval`): the value, evaluated per session,
//! names an upstream of the block (an `upstream` block, or the implicit one of another server's `proxy_pass
//! host:port`), else an `IP:PORT` connected to directly with one try; any other name would need nginx's resolver,
//! which corelb does not have: the session ends as nginx's without one (502).

use super::pump::{pump, Ends, Half, PumpEnd};
use crate::access_log::record::TryPeer;
use crate::access_log::stream::StreamRecord;
use crate::config::model::StreamServer;
use crate::log::{ErrorLogs, Level};
use crate::runtime::{Conn, Runtime};
use crate::snapshot::Snapshot;
use std::net::SocketAddr;

/// Copy buffer per direction.
const BUF: usize = 16 * 1024;

/// Where an evaluated `proxy_pass` value leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassTarget {
    /// Index into the snapshot's stream plans.
    Upstream(usize),
    Addr(SocketAddr),
}

/// The target `value` names: an upstream of that name (without case, as nginx compares hosts), else an address
/// with a port or `unix:PATH`; `None` for a name only a resolver could find.
pub fn target(snap: &Snapshot, value: &[u8]) -> Option<PassTarget> {
    let text = std::str::from_utf8(value).ok()?;
    if let Some(i) = snap.stream_plans.iter().position(|p| p.name.eq_ignore_ascii_case(text)) {
        return Some(PassTarget::Upstream(i));
    }
    if text.len() > 5 && text.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("unix:")) {
        // a unix-domain path named per session: interned once (a lock while the table grows, bounded by its size)
        return crate::config::unix_addr::intern(text.get(5..)?)
            .ok()
            .map(PassTarget::Addr);
    }
    text.parse::<SocketAddr>().ok().map(PassTarget::Addr)
}

/// Logs why a value that names no target ends the session, in nginx's words.
pub fn log_unreachable(errors: Option<&ErrorLogs>, value: &[u8]) {
    let name = String::from_utf8_lossy(value);
    if name.parse::<std::net::IpAddr>().is_ok() {
        crate::log_in!(errors, Level::Error, "no port in upstream \"{name}\"");
    } else {
        crate::log_in!(errors, Level::Error, "no resolver defined to resolve {name}");
    }
}

/// What goes to the upstream before the client's next bytes: `proxy_protocol on`'s line for `conn`, then what came
/// with the client's own PROXY protocol header.
pub struct First<'a> {
    pub conn: crate::http::vars::ConnVars,
    pub early: &'a [u8],
    /// `proxy_ssl on`: the connection is TLS.
    pub tls: Option<&'a crate::tls::client_config::UpstreamTls>,
}

/// Proxies the session of `client` to `addr` (one try: nginx's round robin of one peer), the try and bytes into
/// `rec`; the messages to the server's `errors` lines.
pub async fn direct<R: Runtime>(
    srv: &StreamServer,
    addr: SocketAddr,
    client: &mut R::Conn,
    rec: &mut StreamRecord,
    first: First<'_>,
    errors: Option<&ErrorLogs>,
) {
    rec.try_start(TryPeer::Addr(addr));
    let connected = match R::connect(addr, srv.connect_timeout).await {
        Ok(c) => c,
        Err(e) => {
            crate::log_in!(
                errors,
                Level::Error,
                "connect() to {} failed ({e}) while connecting to upstream",
                crate::config::unix_addr::Display(&addr)
            );
            return;
        }
    };
    let mut upstream = match first.tls {
        Some(tls) => match super::stream_tls::to_upstream::<R>(connected, tls, addr, srv.connect_timeout, errors).await
        {
            Ok(c) => c,
            Err(_) => return,
        },
        None => connected,
    };
    rec.try_connected();
    let _ = upstream.set_nodelay(true);
    let room = BUF.max(first.early.len() + crate::http::proxy_protocol::V1_MAX);
    let (mut up_half, mut down_half) = (Half::new(room), Half::new(BUF));
    if srv.proxy_protocol {
        let mut line = Vec::with_capacity(crate::http::proxy_protocol::V1_MAX);
        crate::http::proxy_protocol::write_v1(first.conn.remote, first.conn.local, &mut line);
        up_half.preload(&line, false);
    }
    up_half.preload(first.early, true);
    let ends = if srv.half_close { Ends::Both } else { Ends::First };
    let end = pump::<R, _, _>(client, &mut upstream, (&mut up_half, &mut down_half), srv.timeout, ends).await;
    if let PumpEnd::Failed(e) = &end {
        crate::log_in!(
            errors,
            Level::Info,
            "stream to {} ended: {e}",
            crate::config::unix_addr::Display(&addr)
        );
    }
    rec.proxied(
        (down_half.bytes, up_half.read),
        (up_half.bytes, down_half.read),
        down_half.first_read,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Config;

    #[test]
    fn values_name_upstreams_then_addresses() {
        let text = "events {}\nstream {\n upstream 8081 { server 127.0.0.1:8091; }\n \
                    upstream Back { server 127.0.0.1:8092; }\n \
                    server { listen 127.0.0.1:8081; proxy_pass $server_port; }\n \
                    server { listen 127.0.0.1:8083; proxy_pass 127.0.0.1:8093; }\n}\n";
        let config: Config = crate::config::parse_str(text, std::path::Path::new("p.conf")).unwrap();
        let zone = corelb_shared_state::Zone::new();
        let snap = Snapshot::build(config, &zone, 1).unwrap();
        let index = |name: &str| snap.stream_plans.iter().position(|p| p.name == name).unwrap();
        assert_eq!(target(&snap, b"8081"), Some(PassTarget::Upstream(index("8081"))));
        assert_eq!(target(&snap, b"back"), Some(PassTarget::Upstream(index("Back"))));
        assert_eq!(
            target(&snap, b"127.0.0.1:8093"),
            Some(PassTarget::Upstream(index("127.0.0.1:8093"))),
            "another server's implicit upstream"
        );
        assert_eq!(
            target(&snap, b"127.0.0.1:9000"),
            Some(PassTarget::Addr("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(target(&snap, b"backend.example:80"), None, "a resolver's name");
        assert_eq!(target(&snap, b"\xff"), None);
        let pass = snap.config.stream.as_ref().unwrap().servers[0].pass.clone();
        assert!(pass.is_some_and(|p| p.raw() == "$server_port"));
    }
}
