//! TCP listening sockets shared by the shards: one socket per `listen` address without `reuseport`, each shard
//! accepting on its own duplicate of it.
//!
//! **Placement.** nginx's workers share one listening socket per address (their master's), unless the `listen` has
//! `reuseport`, which gives each worker a socket of its own. With one shared socket a new connection waits in one
//! accept queue until a shard takes it, and the shard that takes it is the one that is free first: a shard whose
//! core is busy (with other connections, or with another program) gets fewer new connections. With per-shard
//! `SO_REUSEPORT` sockets the kernel deals new connections out by a hash of their addresses, an equal share to
//! each shard whatever its load. A connection stays on the shard that accepted it, in both cases (BENCHMARKS.md,
//! *Per-core scaling*, measures both).
//!
//! **One set per instance.** The control plane binds the socket of an address a reload adds before the new
//! snapshot is published (so a reload that cannot bind it is refused with nothing changed), a shard binds it at
//! start when no one has yet, and each shard accepts on a duplicate ([`SharedListeners::duplicate`]). A reload that
//! drops the address closes the instance's descriptor ([`SharedListeners::remove`]); the socket closes when the
//! last shard closes its duplicate too. A graceful stop closes them all ([`SharedListeners::close_all`]), so that
//! no new client waits in a queue no shard reads. The set belongs to the instance (tests run several in one
//! process), unlike the unix-domain sockets' ([`super::unix`]), whose file names are the process's.

use crate::config::model::SocketOptions;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Mutex, PoisonError};

/// The backlog of a listening socket without `backlog=` (nginx's default, 511).
pub const BACKLOG: i32 = 511;

/// The shared listening sockets of one instance, by address.
#[derive(Debug, Default)]
pub struct SharedListeners {
    bound: Mutex<HashMap<SocketAddr, TcpListener>>,
}

impl SharedListeners {
    /// Binds the socket of `addr` once for the instance (nothing when it is bound already) with the `listen`
    /// options `options`; whether it was bound now. Taken at start, reload and shard start only.
    pub fn bind(&self, addr: SocketAddr, options: SocketOptions) -> io::Result<bool> {
        let mut map = self.bound.lock().unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(&addr) {
            return Ok(false);
        }
        map.insert(addr, bind_shared(addr, options)?);
        Ok(true)
    }

    /// A shard's own descriptor of the socket of `addr`, bound now with `options` if no one bound it yet.
    pub fn duplicate(&self, addr: SocketAddr, options: SocketOptions) -> io::Result<TcpListener> {
        let mut map = self.bound.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = map.get(&addr) {
            return l.try_clone();
        }
        let l = bind_shared(addr, options)?;
        let dup = l.try_clone()?;
        map.insert(addr, l);
        Ok(dup)
    }

    /// Closes the instance's descriptor of the socket of `addr` (a reload dropped the address, or a refused one
    /// had bound it); the shards close theirs when they follow the snapshot.
    pub fn remove(&self, addr: SocketAddr) {
        drop(self.bound.lock().unwrap_or_else(PoisonError::into_inner).remove(&addr));
    }

    /// Closes the instance's descriptor of every socket (a graceful stop: the shards close theirs as they stop
    /// accepting).
    pub fn close_all(&self) {
        self.bound.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// A non-blocking listening socket on `addr` with `SO_REUSEADDR` (as nginx's), no `SO_REUSEPORT`: another program
/// that binds the address fails with `EADDRINUSE`, as it would beside nginx.
fn bind_shared(addr: SocketAddr, options: SocketOptions) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    super::set_buffers(&sock, options, addr);
    sock.listen(options.backlog.unwrap_or(BACKLOG))?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn one_socket_per_address_whose_duplicates_all_accept_and_which_a_second_bind_cannot_join() {
        let set = SharedListeners::default();
        let (asked, options) = ("127.0.0.1:0".parse().unwrap(), SocketOptions::default());
        assert!(set.bind(asked, options).unwrap());
        assert!(!set.bind(asked, options).unwrap(), "bound once");
        let (one, two) = (
            set.duplicate(asked, options).unwrap(),
            set.duplicate(asked, options).unwrap(),
        );
        let addr = one.local_addr().unwrap();
        assert_eq!(two.local_addr().unwrap(), addr, "one socket");
        // not even a socket with SO_REUSEPORT can join it (ours has not set it)
        let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        other.set_reuse_port(true).unwrap();
        assert!(other.bind(&addr.into()).is_err(), "EADDRINUSE for another socket");
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"hi").unwrap();
        // one queue: the connection is taken by whichever descriptor asks, and only once
        let (mut s, _) = loop {
            match two.accept() {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(one.accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        s.set_nonblocking(false).unwrap();
        let mut got = [0u8; 2];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        set.remove(asked);
        drop((one, two));
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "closed with its last descriptor"
        );
    }
}
