//! `ssl_session_timeout` over rustls's session stores, which keep a session as long as their own limits allow (the
//! ticketer's key rotation, the cache's size): each ticket and cache entry carries the second it was made, and
//! one older than the timeout is not resumed (a full handshake follows, as with nginx's expired session).

use rustls::server::{ProducesTickets, StoresServerSessions};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The bytes of the creation time put before a session's own.
const STAMP: usize = 8;

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn stamped(plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(STAMP + plain.len());
    out.extend_from_slice(&now_secs().to_be_bytes());
    out.extend_from_slice(plain);
    out
}

/// The session after its stamp, if it is no older than `timeout` seconds.
fn fresh(value: &[u8], timeout: u64) -> Option<Vec<u8>> {
    let (stamp, rest) = (value.get(..STAMP)?, value.get(STAMP..)?);
    let made = u64::from_be_bytes(stamp.try_into().ok()?);
    (now_secs().saturating_sub(made) <= timeout).then(|| rest.to_vec())
}

/// Tickets that expire after the timeout.
#[derive(Debug)]
pub struct TimedTickets {
    inner: Arc<dyn ProducesTickets>,
    timeout: u64,
}

impl TimedTickets {
    pub fn new(inner: Arc<dyn ProducesTickets>, timeout: Duration) -> Self {
        TimedTickets {
            inner,
            timeout: timeout.as_secs(),
        }
    }
}

impl ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        u32::try_from(self.timeout)
            .unwrap_or(u32::MAX)
            .min(self.inner.lifetime())
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(&stamped(plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.decrypt(cipher)?, self.timeout)
    }
}

/// A session cache whose entries expire after the timeout.
#[derive(Debug)]
pub struct TimedCache {
    inner: Arc<dyn StoresServerSessions>,
    timeout: u64,
}

impl TimedCache {
    pub fn new(inner: Arc<dyn StoresServerSessions>, timeout: Duration) -> Self {
        TimedCache {
            inner,
            timeout: timeout.as_secs(),
        }
    }
}

impl StoresServerSessions for TimedCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(key, stamped(&value))
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.get(key)?, self.timeout)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.take(key)?, self.timeout)
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_older_than_the_timeout_is_not_fresh() {
        let value = stamped(b"session");
        assert_eq!(fresh(&value, 300).as_deref(), Some(&b"session"[..]));
        let mut old = value.clone();
        old[..STAMP].copy_from_slice(&(now_secs() - 301).to_be_bytes());
        assert_eq!(fresh(&old, 300), None);
        assert_eq!(fresh(b"short", 300), None);
    }

    #[test]
    fn cache_entries_carry_their_stamp() {
        let cache = TimedCache::new(
            rustls::server::ServerSessionMemoryCache::new(4),
            Duration::from_secs(60),
        );
        assert!(cache.put(b"k".to_vec(), b"v".to_vec()));
        assert_eq!(cache.get(b"k").as_deref(), Some(&b"v"[..]));
        let expired = TimedCache::new(rustls::server::ServerSessionMemoryCache::new(4), Duration::ZERO);
        let mut old = stamped(b"v");
        old[..STAMP].copy_from_slice(&(now_secs() - 1).to_be_bytes());
        expired.inner.put(b"k".to_vec(), old);
        assert_eq!(expired.get(b"k"), None);
    }
}
