//! What a certificate name with variables reads at the TLS handshake: nginx evaluates it in a request made for its
//! certificate callback, so the request's own variables are empty there; the connection's addresses,
//! `$ssl_server_name`, the process's variables, and the http block's `map`s and `geo`s over them have values.

use super::var_cache::VarCache;
use super::vars::ConnVars;
use crate::config::key::{KeyTemplate, Var, VarSource};
use crate::config::map::Map;
use crate::config::tls::TlsConf;
use crate::tls::dynamic::{HandshakeConn, HandshakeVars};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// The shard's map values of the handshake being resolved (reused: no allocation once grown).
    static CACHE: RefCell<VarCache> = RefCell::new(VarCache::default());
}

/// The http or stream block's maps, for its certificate names.
#[derive(Debug)]
pub struct HandshakeNames {
    pub maps: Vec<Map>,
}

impl HandshakeNames {
    /// What the certificate names of an address's servers (`confs`) read, where one has variables.
    pub fn of(confs: &[Option<&TlsConf>], maps: &[Map]) -> Option<Arc<dyn HandshakeVars>> {
        let dynamic = confs.iter().flatten().any(|c| c.dynamic.is_some());
        dynamic.then(|| Arc::new(HandshakeNames { maps: maps.to_vec() }) as Arc<dyn HandshakeVars>)
    }
}

/// One handshake's variables.
struct HelloVars<'a> {
    conn: &'a HandshakeConn<'a>,
    maps: &'a [Map],
    cache: Option<&'a VarCache>,
}

impl VarSource for HelloVars<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        let conn = self.conn;
        match (var, self.cache) {
            (Var::Map(i), Some(cache)) => cache.append_map(self.maps, *i, self, out),
            (Var::Msec | Var::TimeLocal | Var::TimeIso8601, Some(cache)) => cache.append_time(var, out),
            (Var::SslServerName, _) => out.extend_from_slice(conn.server_name.unwrap_or_default().as_bytes()),
            (Var::Https, _) => out.extend_from_slice(b"on"),
            (
                Var::RemoteAddr
                | Var::BinaryRemoteAddr
                | Var::RemotePort
                | Var::RealipRemoteAddr
                | Var::RealipRemotePort,
                _,
            ) => {
                if let Some(remote) = conn.remote {
                    ConnVars::new(remote, conn.local).append(var, out);
                }
            }
            _ => ConnVars::new(conn.local, conn.local).append(var, out),
        }
    }
}

impl HandshakeVars for HandshakeNames {
    fn eval(&self, name: &KeyTemplate, conn: &HandshakeConn<'_>, out: &mut Vec<u8>) {
        CACHE.with(|cell| {
            let mut cache = cell.try_borrow_mut().ok();
            if let Some(c) = cache.as_deref_mut() {
                c.begin(self.maps.len());
            }
            let vars = HelloVars {
                conn,
                maps: &self.maps,
                cache: cache.as_deref(),
            };
            name.eval_into(&vars, out);
        });
    }
}
