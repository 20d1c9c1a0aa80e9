//! `ssl_certificate` with variables (nginx's certificate callback, `ngx_http_ssl_certificate`): once SNI has
//! chosen the server, each line's certificate and key names are evaluated with what the connection has then
//! (its addresses, `$ssl_server_name`, `geo` and `map` over them) and the two files read and checked, on every
//! handshake as nginx does without `ssl_certificate_cache`. A pair that does not load fails the handshake and is
//! logged with nginx's message.

use crate::config::key::KeyTemplate;
use crate::config::tls::{load_pair_with, DynamicCerts, LoadError};
use rustls::sign::CertifiedKey;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// What a handshake's certificate names read: built where the variables are (the http block's maps), given to
/// the address's resolver at load.
pub trait HandshakeVars: Send + Sync + std::fmt::Debug {
    /// Writes the value of `name` for `conn` into `out` (cleared first).
    fn eval(&self, name: &KeyTemplate, conn: &HandshakeConn<'_>, out: &mut Vec<u8>);
}

/// What a connection has at its handshake.
#[derive(Debug, Clone, Copy)]
pub struct HandshakeConn<'a> {
    /// The client's address, where the accepting flow knows it.
    pub remote: Option<SocketAddr>,
    pub local: SocketAddr,
    /// The name the client sent (SNI).
    pub server_name: Option<&'a str>,
}

/// Evaluates and loads each pair of `certs` for `conn`; the first that fails gives nginx's message.
pub fn load(
    certs: &DynamicCerts,
    vars: &dyn HandshakeVars,
    conn: &HandshakeConn<'_>,
) -> Result<Vec<Arc<CertifiedKey>>, LoadError> {
    let mut cert = Vec::with_capacity(64);
    let mut key = Vec::with_capacity(64);
    let mut out = Vec::with_capacity(certs.pairs.len());
    for (cert_name, key_name) in &certs.pairs {
        vars.eval(cert_name, conn, &mut cert);
        vars.eval(key_name, conn, &mut key);
        let (cert, key) = (String::from_utf8_lossy(&cert), String::from_utf8_lossy(&key));
        let (cert_path, key_path) = (certs.prefix.join(&*cert), certs.prefix.join(&*key));
        let pair = load_pair_with(&cert_path, &key_path, &certs.passwords)
            .map_err(|m| as_named(m, &cert_path, &cert))
            .map_err(|m| as_named(m, &key_path, &key))?;
        out.push(pair);
    }
    Ok(out)
}

/// nginx names the file in its message as the line's value evaluated (`cannot load certificate "one.crt"`), and
/// in OpenSSL's reason by its full path.
fn as_named(message: LoadError, path: &Path, name: &str) -> LoadError {
    let full = format!("\"{}\"", path.display());
    match message.starts_with("cannot load") {
        true => message.replacen(&full, &format!("\"{name}\""), 1),
        false => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_file_as_evaluated() {
        let m = "cannot load certificate \"/p/nx.crt\": BIO_new_file() failed (fopen(/p/nx.crt, r))".to_string();
        assert_eq!(
            as_named(m, Path::new("/p/nx.crt"), "nx.crt"),
            "cannot load certificate \"nx.crt\": BIO_new_file() failed (fopen(/p/nx.crt, r))"
        );
    }
}
