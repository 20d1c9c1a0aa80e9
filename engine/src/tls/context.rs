//! nginx's session id context over rustls's session stores: each ticket and cache entry carries the context of
//! the server whose handshake made it, and resumes only on a handshake whose server (as SNI picked it) has the
//! same one, so a session of one server block is taken by another whose certificate lines are the same, not by
//! one whose lines differ (OpenSSL's `SSL_R_ATTEMPT_TO_REUSE_SESSION_IN_DIFFERENT_CONTEXT`, a full handshake).

use crate::config::tls::SessionContext;
use rustls::server::{ProducesTickets, StoresServerSessions};
use std::sync::{Arc, OnceLock};

/// The context of one handshake's server: set when the certificate resolver has picked the server (before rustls
/// looks at a session to resume), or at load where every server of an address has the same one.
#[derive(Debug, Default)]
pub struct Picked(OnceLock<SessionContext>);

impl Picked {
    /// A context known before the handshake.
    pub fn fixed(context: SessionContext) -> Arc<Picked> {
        Arc::new(Picked(OnceLock::from(context)))
    }

    /// Sets the context of the handshake's server (once: a later call leaves the first).
    pub fn set(&self, context: SessionContext) {
        let _ = self.0.set(context);
    }

    fn get(&self) -> Option<&SessionContext> {
        self.0.get()
    }
}

/// `plain` after the handshake's context (none picked: `None`, nothing is stored).
fn with_context(picked: &Picked, plain: &[u8]) -> Option<Vec<u8>> {
    let context = picked.get()?;
    let mut out = Vec::with_capacity(context.len() + plain.len());
    out.extend_from_slice(context);
    out.extend_from_slice(plain);
    Some(out)
}

/// The session in `value` if it was made under the handshake's context.
fn same_context(picked: &Picked, value: &[u8]) -> Option<Vec<u8>> {
    let context = picked.get()?;
    value.strip_prefix(context.as_slice()).map(<[u8]>::to_vec)
}

/// Tickets that carry the context.
#[derive(Debug)]
pub struct ContextTickets {
    inner: Arc<dyn ProducesTickets>,
    picked: Arc<Picked>,
}

impl ContextTickets {
    pub fn new(inner: Arc<dyn ProducesTickets>, picked: Arc<Picked>) -> Self {
        ContextTickets { inner, picked }
    }
}

impl ProducesTickets for ContextTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.inner.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(&with_context(&self.picked, plain)?)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        same_context(&self.picked, &self.inner.decrypt(cipher)?)
    }
}

/// A session cache whose entries carry the context.
#[derive(Debug)]
pub struct ContextCache {
    inner: Arc<dyn StoresServerSessions>,
    picked: Arc<Picked>,
}

impl ContextCache {
    pub fn new(inner: Arc<dyn StoresServerSessions>, picked: Arc<Picked>) -> Self {
        ContextCache { inner, picked }
    }
}

impl StoresServerSessions for ContextCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        match with_context(&self.picked, &value) {
            Some(v) => self.inner.put(key, v),
            None => false,
        }
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        same_context(&self.picked, &self.inner.get(key)?)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        // a session of another context stays for its own servers
        let value = self.inner.get(key)?;
        let session = same_context(&self.picked, &value)?;
        self.inner.take(key);
        Some(session)
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_entry_resumes_only_under_its_context() {
        let store: Arc<dyn StoresServerSessions> = rustls::server::ServerSessionMemoryCache::new(4);
        let one = ContextCache::new(Arc::clone(&store), Picked::fixed([1; 32]));
        let two = ContextCache::new(Arc::clone(&store), Picked::fixed([2; 32]));
        assert!(one.put(b"k".to_vec(), b"v".to_vec()));
        assert_eq!(two.get(b"k"), None);
        assert_eq!(two.take(b"k"), None);
        assert_eq!(one.get(b"k").as_deref(), Some(&b"v"[..]));
        assert_eq!(one.take(b"k").as_deref(), Some(&b"v"[..]));
        assert_eq!(one.get(b"k"), None);
        let unpicked = ContextCache::new(store, Arc::new(Picked::default()));
        assert!(!unpicked.put(b"k".to_vec(), b"v".to_vec()));
    }
}
