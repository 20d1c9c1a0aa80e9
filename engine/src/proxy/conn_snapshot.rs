//! Which config snapshot a client connection's next request runs on: the running one, taken again (with the
//! listen address's port looked up in it) only when a reload changed the generation.

use crate::config::model::ClientConf;
use crate::runtime::Runtime;
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use std::net::SocketAddr;
use std::sync::Arc;

/// The snapshot a connection's next request runs on: the running one, taken again when a reload changed it. A
/// request in flight keeps the one it started with.
pub struct ConnSnapshot {
    pub snap: Arc<Snapshot>,
    /// The listen address's index into `snap.http_ports`.
    pub port: usize,
    listen: SocketAddr,
    /// The default server's client settings (header and keepalive timeouts before a request names its server).
    pub client: ClientConf,
    /// The running config no longer listens here: the next request is served on `snap`, then the connection closes
    /// (as nginx's old workers close their keepalive connections).
    pub gone: bool,
}

impl ConnSnapshot {
    /// The running snapshot for a connection accepted on `listen` (`None`: the running config does not listen there).
    pub fn take<R: Runtime>(shard: &Shard<R>, listen: SocketAddr) -> Option<Self> {
        let snap = shard.snapshot();
        let port = snap.http_port_of(listen)?;
        let client = Self::default_client(&snap, port);
        Some(ConnSnapshot {
            snap,
            port,
            listen,
            client,
            gone: false,
        })
    }

    fn default_client(snap: &Snapshot, port: usize) -> ClientConf {
        let server = snap.http_ports.get(port).map(|p| p.default_server);
        let http = snap.config.http.as_ref();
        server
            .and_then(|s| http?.servers.get(s))
            .map(|s| s.client.clone())
            .unwrap_or_default()
    }

    /// Moves to the running snapshot if a reload changed it (one atomic load when it did not).
    pub fn refresh<R: Runtime>(&mut self, shard: &Shard<R>) {
        if self.gone || shard.current_generation() == self.snap.generation {
            return;
        }
        match Self::take(shard, self.listen) {
            Some(next) => *self = next,
            None => self.gone = true,
        }
    }
}
