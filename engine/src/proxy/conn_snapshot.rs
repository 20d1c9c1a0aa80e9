//! Which config snapshot a client connection's next request runs on: the running one, taken again (with the
//! listen address's port looked up in it) only when a reload changed the generation.

use crate::config::model::ClientConf;
use crate::runtime::Runtime;
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The timeouts of a port's default server that apply before a request names its server (copied, so taking a
/// snapshot allocates nothing).
#[derive(Debug, Clone, Copy)]
pub struct DefaultTimeouts {
    pub keepalive_timeout: Duration,
    pub client_header_timeout: Duration,
    pub send_timeout: Duration,
    /// The lingering close after an answer to a request refused before it named its server.
    pub lingering: crate::config::model::Lingering,
}

/// The snapshot a connection's next request runs on: the running one, taken again when a reload changed it. A
/// request in flight keeps the one it started with. (Small: an idle connection holds it.)
pub struct ConnSnapshot {
    pub snap: Arc<Snapshot>,
    /// The listen address's index into `snap.http_ports` ([`ConnSnapshot::port`]; u32: an idle connection keeps
    /// this struct, and a glommio task over 512 bytes takes jemalloc's 640-byte class).
    port: u32,
    /// The running config no longer listens here: the next request is served on `snap`, then the connection closes
    /// (as nginx's old workers close their keepalive connections).
    pub gone: bool,
}

impl ConnSnapshot {
    /// The running snapshot for a connection accepted on `listen` (`None`: the running config does not listen there).
    pub fn take<R: Runtime>(shard: &Shard<R>, listen: SocketAddr) -> Option<Self> {
        let snap = shard.snapshot();
        let port = u32::try_from(snap.http_port_of(listen)?).ok()?;
        Some(ConnSnapshot {
            snap,
            port,
            gone: false,
        })
    }

    /// The listen address's index into `snap.http_ports`.
    pub fn port(&self) -> usize {
        self.port as usize
    }

    /// The default server's timeouts, before a request names its server (looked up: a few loads).
    pub fn defaults(&self) -> DefaultTimeouts {
        let server = self.snap.http_ports.get(self.port()).map(|p| p.default_server);
        let of = |c: &ClientConf| DefaultTimeouts {
            keepalive_timeout: c.keepalive_timeout,
            client_header_timeout: c.client_header_timeout,
            send_timeout: c.send_timeout,
            lingering: c.lingering,
        };
        match server.and_then(|s| self.snap.servers.get(s)) {
            Some(s) => of(&s.client),
            None => of(&ClientConf::default()),
        }
    }

    /// The listen address the connection came on (the port's, in the snapshot it was found in).
    pub fn listen(&self) -> SocketAddr {
        self.snap
            .http_ports
            .get(self.port())
            .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |p| p.addr)
    }

    /// Moves to the running snapshot if a reload changed it (one atomic load when it did not).
    pub fn refresh<R: Runtime>(&mut self, shard: &Shard<R>) {
        if self.gone || shard.current_generation() == self.snap.generation {
            return;
        }
        match Self::take(shard, self.listen()) {
            Some(next) => *self = next,
            None => self.gone = true,
        }
    }
}
