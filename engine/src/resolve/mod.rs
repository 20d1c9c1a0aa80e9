//! The resolver of `resolver`: one per shard, as nginx has one per worker. A name is looked up (`A`, and `AAAA`
//! unless `ipv6=off`, side by side) over UDP on the shard's own runtime, asking the next name server again every
//! [`RESEND`] until `resolver_timeout`, over TCP when an answer is cut; answers are kept in the shard's
//! [`cache::Cache`]. Requests that want a name already being asked wait for that query's answer, as nginx's
//! resolver contexts wait on one node.

pub mod cache;
pub mod dns;
pub mod names;
pub mod records;

use crate::config::resolver::ResolverConf;
use crate::runtime::{Datagram, Runtime};
use cache::{Cache, Lookup, ERROR_VALID};
use dns::{Answer, DnsError, Family};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long one name server has to answer before the query goes to the next (nginx's `resend_timeout`).
pub const RESEND: Duration = Duration::from_secs(5);

/// The largest UDP answer read (no EDNS is offered, so servers send at most 512 bytes).
const UDP_MAX: usize = 512;

/// One shard's resolver.
#[derive(Debug, Default)]
pub struct Resolver {
    cache: RefCell<Cache>,
    /// Which name server the next query goes to first.
    next_server: Cell<usize>,
    /// The names being asked now, by resolver and name: their answer once it came.
    asking: RefCell<AskingTable>,
}

/// The names being asked, by (resolver, name).
type AskingTable = HashMap<(u64, Box<[u8]>), Rc<Asking>>;

/// One name's query in flight: the requests waiting for it, and its answer.
#[derive(Debug, Default)]
struct Asking {
    done: tokio::sync::Notify,
    answer: RefCell<Option<Lookup>>,
}

/// Ends a query in flight however its request ends (an answer, or the request dropped): the entry goes and its
/// waiters wake (without an answer, one of them asks again).
struct AskingGuard<'r> {
    asking: &'r RefCell<AskingTable>,
    key: (u64, Box<[u8]>),
    entry: Rc<Asking>,
}

impl Drop for AskingGuard<'_> {
    fn drop(&mut self) {
        self.asking.borrow_mut().remove(&self.key);
        self.entry.done.notify_waiters();
    }
}

impl Resolver {
    /// `name`'s addresses (lower case, without a trailing dot) by `conf`: the kept answer while it is valid, else
    /// asked. IPv4 addresses come before IPv6 ones, as nginx exports them. Answers are kept per resolver: by its
    /// settings ([`ResolverConf::cache_key`]), so that a reload keeps the answers of a `resolver` line it did not
    /// change.
    pub async fn lookup<R: Runtime>(&self, conf: &ResolverConf, name: &[u8]) -> Lookup {
        let now = Instant::now();
        let by = conf.cache_key;
        if let Some(kept) = self.cache.borrow().get(by, name, now) {
            return kept;
        }
        let key = (by, Box::<[u8]>::from(name));
        loop {
            let waiting = self.asking.borrow().get(&key).cloned();
            let Some(entry) = waiting else { break };
            // registered at creation: the querier's wake-up cannot be missed
            let notified = entry.done.notified();
            notified.await;
            let answer = entry.answer.borrow().clone();
            if let Some(answer) = answer {
                return answer;
            }
        }
        let entry = Rc::new(Asking::default());
        self.asking.borrow_mut().insert(key.clone(), entry.clone());
        let guard = AskingGuard {
            asking: &self.asking,
            key,
            entry,
        };
        let result = self.ask_both::<R>(conf, name, by).await;
        *guard.entry.answer.borrow_mut() = Some(result.clone());
        drop(guard);
        result
    }

    /// Asks the name servers for `name` (both families as `conf` says) and keeps the answer.
    async fn ask_both<R: Runtime>(&self, conf: &ResolverConf, name: &[u8], by: u64) -> Lookup {
        let text = std::str::from_utf8(name).map_err(|_| DnsError::BadName)?;
        let first = self.next_server.get();
        self.next_server.set(first.wrapping_add(1));
        let ask = |family, on: bool| async move {
            if on {
                Some(ask::<R>(conf, text, family, first).await)
            } else {
                None
            }
        };
        let (v4, v6) = futures_lite::future::zip(ask(Family::V4, conf.ipv4), ask(Family::V6, conf.ipv6)).await;
        let (result, ttl) = merge(v4, v6);
        let valid = match (&result, conf.valid) {
            (_, Some(v)) => Some(v),
            (Ok(_), None) => Some(Duration::from_secs(u64::from(ttl))),
            // a timeout is not kept: the next request asks again
            (Err(DnsError::TimedOut), None) => None,
            (Err(_), None) => Some(ERROR_VALID),
        };
        if let Some(valid) = valid {
            self.cache
                .borrow_mut()
                .put(by, name, result.clone(), valid, Instant::now());
        }
        result
    }
}

/// Both families' answers as one result and its TTL (the least of the answers with addresses): an error only
/// when no family gave an address (the first family's error, as nginx reports the `A` query's).
fn merge(v4: Option<Result<Answer, DnsError>>, v6: Option<Result<Answer, DnsError>>) -> (Lookup, u32) {
    let mut addrs: Vec<IpAddr> = Vec::new();
    let mut ttl = u32::MAX;
    let mut error = None;
    for r in [v4, v6].into_iter().flatten() {
        match r {
            Ok(a) if !a.addrs.is_empty() => {
                addrs.extend(a.addrs);
                ttl = ttl.min(a.ttl);
            }
            Ok(_) => {}
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    if addrs.is_empty() {
        return (Err(error.unwrap_or(DnsError::NotFound)), 0);
    }
    (Ok(Rc::from(addrs)), ttl)
}

/// One family's query, counted in the resolver's status zone.
async fn ask<R: Runtime>(conf: &ResolverConf, name: &str, family: Family, first: usize) -> Result<Answer, DnsError> {
    conf.count_asked(corelb_shared_state::Asked::Name);
    let r = ask_servers::<R>(conf, name, family, first).await;
    conf.count_answered(dns::answered(&r));
    r
}

/// One family's query, to the servers in turn from `first`, until an answer or `conf.timeout`.
async fn ask_servers<R: Runtime>(
    conf: &ResolverConf,
    name: &str,
    family: Family,
    first: usize,
) -> Result<Answer, DnsError> {
    let deadline = Instant::now() + conf.timeout;
    let mut server_at = first;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let server = conf.servers.get(server_at % conf.servers.len().max(1));
        let Some(&server) = server.filter(|_| !left.is_zero()) else {
            return Err(DnsError::TimedOut);
        };
        server_at = server_at.wrapping_add(1);
        let id: u16 = rand::random();
        let query = dns::query(id, name, family)?;
        let wait = left.min(RESEND);
        match crate::runtime::timeout::<R, _>(wait, udp_try::<R>(server, id, family, &query)).await {
            Ok(Ok(Some(a))) if a.truncated => return tcp_try::<R>(server, id, family, &query, left).await,
            Ok(Ok(Some(a))) => return Ok(a),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => {
                // the server could not be reached (ICMP unreachable, no route): the next one, after the resend
                // interval, so that a refusing server is not asked in a loop
                R::sleep(wait).await;
            }
            Err(_) => {}
        }
    }
}

/// One UDP query: its answer, or `Ok(None)` when the socket failed.
async fn udp_try<R: Runtime>(
    server: SocketAddr,
    id: u16,
    family: Family,
    query: &[u8],
) -> Result<Option<Answer>, DnsError> {
    let Ok(sock) = R::udp_connect(server) else {
        return Ok(None);
    };
    if sock.send(query).await.is_err() {
        return Ok(None);
    }
    let mut buf = [0u8; UDP_MAX];
    loop {
        let Ok(n) = sock.recv(&mut buf).await else {
            return Ok(None);
        };
        if let Some(a) = dns::answer(id, family, buf.get(..n).unwrap_or_default())? {
            return Ok(Some(a));
        }
    }
}

/// The query again over TCP (RFC 1035 4.2.2: each message after its two-byte length).
async fn tcp_try<R: Runtime>(
    server: SocketAddr,
    id: u16,
    family: Family,
    query: &[u8],
    left: Duration,
) -> Result<Answer, DnsError> {
    let exchange = async {
        let mut conn = R::connect(server, left).await?;
        let len = u16::try_from(query.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let mut out = Vec::with_capacity(query.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(query);
        conn.write_all(&out).await?;
        conn.flush().await?;
        let mut len = [0u8; 2];
        conn.read_exact(&mut len).await?;
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        conn.read_exact(&mut msg).await?;
        Ok::<_, std::io::Error>(msg)
    };
    match crate::runtime::timeout::<R, _>(left, exchange).await {
        Ok(Ok(msg)) => match dns::answer(id, family, &msg)? {
            Some(a) if !a.truncated => Ok(a),
            _ => Err(DnsError::Format),
        },
        Ok(Err(_)) => Err(DnsError::ServFail),
        Err(_) => Err(DnsError::TimedOut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ans(addrs: &[&str], ttl: u32) -> Option<Result<Answer, DnsError>> {
        Some(Ok(Answer {
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            ttl,
            truncated: false,
        }))
    }

    #[test]
    fn families_merged_as_nginx_exports_them() {
        let (r, ttl) = merge(ans(&["10.0.0.1"], 30), ans(&["::1"], 10));
        let got: Vec<String> = r.unwrap().iter().map(|a| a.to_string()).collect();
        assert_eq!(got, ["10.0.0.1", "::1"]);
        assert_eq!(ttl, 10);
        // one family empty or failed: the other's addresses
        let (r, ttl) = merge(ans(&["10.0.0.1"], 30), Some(Err(DnsError::ServFail)));
        assert_eq!(r.unwrap().len(), 1);
        assert_eq!(ttl, 30);
        assert_eq!(merge(ans(&[], 30), ans(&[], 30)).0, Err(DnsError::NotFound));
        assert_eq!(
            merge(Some(Err(DnsError::TimedOut)), ans(&[], 1)).0,
            Err(DnsError::TimedOut)
        );
        assert_eq!(merge(ans(&[], 1), None).0, Err(DnsError::NotFound));
    }
}
