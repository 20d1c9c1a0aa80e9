//! A shard's idle upstream connections (nginx's `keepalive N` cache): per upstream, newest reused first, oldest
//! evicted when full, dropped after `keepalive_timeout`, `keepalive_requests` or `keepalive_time`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How much an upstream connection has been used: what `keepalive_requests` and `keepalive_time` limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnAge {
    /// Requests it has served.
    pub requests: u64,
    /// When it was connected.
    pub opened: Instant,
}

impl ConnAge {
    /// A connection just made.
    pub fn fresh(now: Instant) -> ConnAge {
        ConnAge {
            requests: 0,
            opened: now,
        }
    }

    /// The same connection after one more request.
    pub fn served_one(self) -> ConnAge {
        ConnAge {
            requests: self.requests.saturating_add(1),
            ..self
        }
    }
}

/// The limits of an upstream's `keepalive` cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// `keepalive N`: idle connections kept (0: none).
    pub capacity: usize,
    /// `keepalive_requests`: a connection that served this many is closed.
    pub max_requests: u64,
    /// `keepalive_timeout`: an idle connection is closed after this.
    pub idle_timeout: Duration,
    /// `keepalive_time`: a connection open longer than this is closed when it comes back (nginx 1.19.10).
    pub max_time: Duration,
}

struct Idle<C> {
    addr: SocketAddr,
    conn: C,
    since: Instant,
    age: ConnAge,
}

/// The idle connections of one upstream on one shard.
pub struct Pool<C> {
    limits: PoolLimits,
    idle: Vec<Idle<C>>,
}

impl<C> Pool<C> {
    /// A pool within `limits`.
    pub fn new(limits: PoolLimits) -> Self {
        Pool {
            limits,
            idle: Vec::with_capacity(limits.capacity),
        }
    }

    /// Whether this pool keeps connections at all.
    pub fn enabled(&self) -> bool {
        self.limits.capacity > 0
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

    /// Takes the newest idle connection to `addr` with its use so far; expired ones are dropped on the way.
    pub fn take(&mut self, addr: SocketAddr, now: Instant) -> Option<(C, ConnAge)> {
        let timeout = self.limits.idle_timeout;
        self.idle.retain(|c| now.duration_since(c.since) < timeout);
        let i = self.idle.iter().rposition(|c| c.addr == addr)?;
        let c = self.idle.remove(i);
        Some((c.conn, c.age))
    }

    /// Gives back a connection that may serve more; it is dropped (closed) when it reached `keepalive_requests`
    /// or has been open longer than `keepalive_time` (nginx's `ngx_http_upstream_free_keepalive_peer`), and the
    /// oldest is evicted when the pool is full.
    pub fn put(&mut self, addr: SocketAddr, conn: C, age: ConnAge, now: Instant) {
        let l = &self.limits;
        if l.capacity == 0 || age.requests >= l.max_requests || now.duration_since(age.opened) > l.max_time {
            return;
        }
        if self.idle.len() >= l.capacity {
            self.idle.remove(0);
        }
        self.idle.push(Idle {
            addr,
            conn,
            since: now,
            age,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(p: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], p))
    }

    fn limits(capacity: usize, max_requests: u64, idle_secs: u64) -> PoolLimits {
        PoolLimits {
            capacity,
            max_requests,
            idle_timeout: Duration::from_secs(idle_secs),
            max_time: Duration::from_secs(3600),
        }
    }

    fn age(requests: u64, opened: Instant) -> ConnAge {
        ConnAge { requests, opened }
    }

    #[test]
    fn lifo_per_address_with_eviction() {
        let t0 = Instant::now();
        let mut p = Pool::new(limits(2, 100, 60));
        p.put(addr(1), "a", age(1, t0), t0);
        p.put(addr(2), "b", age(1, t0), t0);
        p.put(addr(1), "c", age(5, t0), t0);
        assert_eq!(p.len(), 2, "oldest evicted");
        assert_eq!(p.take(addr(1), t0), Some(("c", age(5, t0))));
        assert_eq!(p.take(addr(1), t0), None);
        assert_eq!(p.take(addr(2), t0), Some(("b", age(1, t0))));
    }

    #[test]
    fn limits_requests_and_idle_time() {
        let t0 = Instant::now();
        let mut p = Pool::new(limits(4, 3, 1));
        p.put(addr(1), 1, age(3, t0), t0);
        assert!(p.is_empty(), "keepalive_requests reached");
        p.put(addr(1), 2, age(2, t0), t0);
        assert_eq!(p.take(addr(1), t0 + Duration::from_secs(2)), None, "idle too long");
        assert!(p.is_empty());
        assert!(!Pool::<u8>::new(limits(0, 3, 1)).enabled());
    }

    #[test]
    fn keepalive_time_closes_old_connections_when_they_come_back() {
        let t0 = Instant::now();
        let mut p = Pool::new(PoolLimits {
            max_time: Duration::from_secs(1),
            ..limits(4, 100, 60)
        });
        p.put(addr(1), 1, age(1, t0), t0 + Duration::from_millis(1000));
        assert_eq!(p.len(), 1, "exactly keepalive_time old: kept (nginx compares with >)");
        p.put(addr(1), 2, age(1, t0), t0 + Duration::from_millis(1001));
        assert_eq!(p.len(), 1, "older: closed");
        assert_eq!(age(1, t0).served_one(), age(2, t0));
    }
}
