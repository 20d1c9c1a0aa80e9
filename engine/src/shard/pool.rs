//! A shard's idle upstream connections (nginx's `keepalive N` cache): per upstream, newest reused first, oldest
//! evicted when full, dropped after `keepalive_timeout` or `keepalive_requests`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

struct Idle<C> {
    addr: SocketAddr,
    conn: C,
    since: Instant,
    requests: u64,
}

/// The idle connections of one upstream on one shard.
pub struct Pool<C> {
    capacity: usize,
    max_requests: u64,
    idle_timeout: Duration,
    idle: Vec<Idle<C>>,
}

impl<C> Pool<C> {
    /// A pool keeping up to `capacity` connections (0: none).
    pub fn new(capacity: usize, max_requests: u64, idle_timeout: Duration) -> Self {
        Pool {
            capacity,
            max_requests,
            idle_timeout,
            idle: Vec::with_capacity(capacity),
        }
    }

    /// Whether this pool keeps connections at all.
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Idle connections held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.idle.len()
    }

    /// Whether no connection is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }

    /// Takes the newest idle connection to `addr` with the number of requests it has served; expired ones are
    /// dropped on the way.
    pub fn take(&mut self, addr: SocketAddr, now: Instant) -> Option<(C, u64)> {
        let timeout = self.idle_timeout;
        self.idle.retain(|c| now.duration_since(c.since) < timeout);
        let i = self.idle.iter().rposition(|c| c.addr == addr)?;
        let c = self.idle.remove(i);
        Some((c.conn, c.requests))
    }

    /// Gives back a connection that has served `requests` requests and may serve more; it is dropped (closed)
    /// when it reached `keepalive_requests`, and the oldest is evicted when the pool is full.
    pub fn put(&mut self, addr: SocketAddr, conn: C, requests: u64, now: Instant) {
        if self.capacity == 0 || requests >= self.max_requests {
            return;
        }
        if self.idle.len() >= self.capacity {
            self.idle.remove(0);
        }
        self.idle.push(Idle {
            addr,
            conn,
            since: now,
            requests,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    #[test]
    fn lifo_per_address_with_eviction() {
        let t0 = Instant::now();
        let mut p = Pool::new(2, 100, Duration::from_secs(60));
        p.put(addr(1), "a", 1, t0);
        p.put(addr(2), "b", 1, t0);
        p.put(addr(1), "c", 5, t0);
        assert_eq!(p.len(), 2, "oldest evicted");
        assert_eq!(p.take(addr(1), t0), Some(("c", 5)));
        assert_eq!(p.take(addr(1), t0), None);
        assert_eq!(p.take(addr(2), t0), Some(("b", 1)));
    }

    #[test]
    fn limits_requests_and_idle_time() {
        let t0 = Instant::now();
        let mut p = Pool::new(4, 3, Duration::from_secs(1));
        p.put(addr(1), 1, 3, t0);
        assert!(p.is_empty(), "keepalive_requests reached");
        p.put(addr(1), 2, 2, t0);
        assert_eq!(p.take(addr(1), t0 + Duration::from_secs(2)), None, "idle too long");
        assert!(p.is_empty());
        assert!(!Pool::<u8>::new(0, 3, Duration::from_secs(1)).enabled());
    }
}
