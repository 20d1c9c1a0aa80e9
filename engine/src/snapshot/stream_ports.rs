//! A snapshot's stream listen addresses: the servers on each (nginx 1.25.5+ stream virtual servers), the default
//! one, their names as a handshake's or a preread hello's SNI looks them up, and the address's TLS config (every
//! server's certificates behind the SNI resolver, as an http address's).

use super::server_names::ServerNames;
use super::SnapshotError;
use crate::config::model::StreamServer;
use std::net::SocketAddr;
use std::sync::Arc;

/// One stream listen address.
#[derive(Debug, Clone)]
pub struct StreamPort {
    pub addr: SocketAddr,
    /// The default server (index into the stream block's servers): `default_server`, else the first.
    pub server: usize,
    /// Every server listening here, by index.
    pub servers: Vec<usize>,
    /// Connections start with a PROXY protocol header.
    pub proxy_protocol: bool,
    /// `listen ... ssl`: connections start with the TLS handshake.
    pub ssl: bool,
    /// `listen ... udp`: a UDP socket (its servers apart from a TCP socket's on the same address).
    pub udp: bool,
    /// The servers' names.
    pub names: ServerNames,
    /// The handshake's config, for an `ssl` address.
    pub tls: Option<Arc<crate::tls::PortTls>>,
    /// `listen ... rcvbuf= sndbuf=` of the address.
    pub socket: crate::config::model::SocketOptions,
}

impl StreamPort {
    /// The server a name sent in SNI picks (none, or no match: the default one).
    pub fn server_for(&self, name: &[u8]) -> usize {
        if name.is_empty() || self.servers.len() <= 1 {
            return self.server;
        }
        self.names.find(name, None).map_or(self.server, |f| f.server)
    }
}

/// The addresses of `servers`; `taken` says whether an http server listens on an address already.
pub fn build(
    servers: &[StreamServer],
    maps: &[crate::config::map::Map],
    taken: impl Fn(SocketAddr) -> bool,
) -> Result<Vec<StreamPort>, SnapshotError> {
    let mut ports: Vec<StreamPort> = Vec::new();
    for (si, srv) in servers.iter().enumerate() {
        for l in &srv.listens {
            if !l.udp && taken(l.addr) {
                return Err(SnapshotError::DuplicateListen(l.addr));
            }
            match ports.iter_mut().find(|p| p.addr == l.addr && p.udp == l.udp) {
                Some(p) => {
                    p.servers.push(si);
                    p.proxy_protocol |= l.proxy_protocol;
                    p.ssl |= l.ssl;
                    p.socket = p.socket.or(l.socket);
                    if l.default_server {
                        p.server = si;
                    }
                }
                None => ports.push(StreamPort {
                    addr: l.addr,
                    server: si,
                    servers: vec![si],
                    proxy_protocol: l.proxy_protocol,
                    ssl: l.ssl,
                    udp: l.udp,
                    names: ServerNames::default(),
                    tls: None,
                    socket: l.socket,
                }),
            }
        }
    }
    for p in &mut ports {
        let of_port = p
            .servers
            .iter()
            .filter_map(|&i| Some((i, servers.get(i)?.server_names.as_slice())));
        p.names = ServerNames::build(of_port, &[]).map_err(SnapshotError::ServerName)?;
        if p.ssl {
            p.tls = Some(Arc::new(port_tls(p, servers, maps)?));
        }
    }
    Ok(ports)
}

/// The TLS config of an `ssl` address: the default server's settings, every server's certificates.
fn port_tls(
    port: &StreamPort,
    servers: &[StreamServer],
    maps: &[crate::config::map::Map],
) -> Result<crate::tls::PortTls, SnapshotError> {
    let on_port = |i: usize| port.servers.contains(&i);
    let confs: Vec<Option<&crate::config::tls::TlsConf>> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| s.ssl.server.as_ref().filter(|_| on_port(i)))
        .collect();
    let names = port.names.clone();
    let (default, several) = (port.server, port.servers.len() > 1);
    let pick = Box::new(move |sni: &str| match several {
        true => names.find(sni.as_bytes(), None).map_or(default, |f| f.server),
        false => default,
    });
    let mut tls = crate::tls::server_config(crate::tls::PortServers {
        confs: confs.clone(),
        default,
        pick,
        h2: false,
        vars: crate::http::handshake_vars::HandshakeNames::of(&confs, maps),
    })?;
    // stream answers ALPN only with `ssl_alpn` (nginx sets no callback without it)
    let mut config = (*tls.config).clone();
    let alpn = servers.get(default).map(|s| s.ssl.alpn.clone()).unwrap_or_default();
    config.alpn_protocols = alpn;
    tls.config = Arc::new(config);
    Ok(tls)
}
