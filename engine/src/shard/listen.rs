//! A shard's listening sockets: bound at start, then following each new snapshot (new addresses bound, removed
//! ones closed while their accepted connections go on, unchanged ones kept), and the accept loop of each.

use super::{spawn_connection, spawn_counted, Shard, StartError};
use crate::proxy::udp::{self, Endpoint};
use crate::runtime::{DatagramListener, Listener, Runtime};
use crate::snapshot::{Role, Snapshot};
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::shared_listen::{SharedListeners, BACKLOG};

/// Tells one accept loop to close its listener (a reload removed the address).
#[derive(Default)]
struct CloseListener {
    closed: Cell<bool>,
    notify: tokio::sync::Notify,
}

impl CloseListener {
    fn close(&self) {
        self.closed.set(true);
        self.notify.notify_waiters();
    }

    async fn closed(&self) {
        if !self.closed.get() {
            self.notify.notified().await;
        }
    }
}

/// A bound listening socket: TCP (http, stream) or UDP (stream `listen ... udp`).
pub(super) enum Bound<R: Runtime> {
    Tcp(R::Listener),
    Udp(R::UdpListener),
}

/// The shard's listener of `addr` for `role`, with the backlog and buffer sizes `snap` gives it: its duplicate of
/// the socket the shards share (TCP), or its own socket bound with `SO_REUSEPORT` (`listen ... reuseport`, and UDP:
/// the kernel keeps a client's datagrams on one shard, where its session lives). A unix-domain address is always
/// shared (the runtime's `bind` takes the process's socket).
fn bind<R: Runtime>(
    snap: &Snapshot,
    shared: &SharedListeners,
    addr: SocketAddr,
    role: Role,
) -> std::io::Result<Bound<R>> {
    let options = snap.listen_options(addr, role);
    match role {
        Role::Udp => R::bind_udp(addr, options).map(Bound::Udp),
        _ if options.reuseport || crate::config::unix_addr::is_unix(&addr) => {
            R::bind(addr, options.backlog.unwrap_or(BACKLOG), options).map(Bound::Tcp)
        }
        Role::Http | Role::Stream => R::listen_shared(shared.duplicate(addr, options)?).map(Bound::Tcp),
    }
}

/// A shard's listening sockets, by address and role, and the snapshot generation they follow.
pub(super) struct Listeners {
    open: Vec<(SocketAddr, Role, Rc<CloseListener>)>,
    generation: u64,
}

/// Every listen address of `snap` with its role.
fn wanted(snap: &Snapshot) -> Vec<(SocketAddr, Role)> {
    snap.listen_addrs().collect()
}

impl Listeners {
    /// Binds every listen address of `snap` (before the shard reports ready: a failure stops the start).
    pub(super) fn bind_all<R: Runtime>(
        snap: &Snapshot,
        shared: &SharedListeners,
    ) -> Result<Vec<(SocketAddr, Role, Bound<R>)>, StartError> {
        wanted(snap)
            .into_iter()
            .map(|(addr, role)| match bind::<R>(snap, shared, addr, role) {
                Ok(l) => Ok((addr, role, l)),
                Err(source) => Err(StartError::Bind { addr, source }),
            })
            .collect()
    }

    /// Starts an accept loop per bound listener.
    pub(super) fn spawn<R: Runtime>(
        shard: &Rc<Shard<R>>,
        bound: Vec<(SocketAddr, Role, Bound<R>)>,
        generation: u64,
    ) -> Self {
        let mut this = Listeners {
            open: Vec::new(),
            generation,
        };
        for (addr, role, l) in bound {
            this.accept_on::<R>(shard, addr, role, l);
        }
        this
    }

    fn accept_on<R: Runtime>(&mut self, shard: &Rc<Shard<R>>, addr: SocketAddr, role: Role, l: Bound<R>) {
        let close = Rc::new(CloseListener::default());
        shard.accepting.set(shard.accepting.get() + 1);
        match l {
            Bound::Tcp(l) => R::spawn(accept_loop::<R>(Rc::clone(shard), l, addr, role, Rc::clone(&close))),
            Bound::Udp(s) => R::spawn(datagram_loop::<R>(Rc::clone(shard), s, addr, Rc::clone(&close))),
        }
        self.open.push((addr, role, close));
    }

    /// After a reload: closes the listeners whose address the running snapshot no longer has (accepted connections
    /// go on) and binds the new addresses; an address in both keeps its socket, so nothing is refused there. The
    /// control plane tried every new address before the swap, so a bind failing here lost a race with another
    /// process: it is logged and the shard goes on without that listener.
    pub(super) fn follow<R: Runtime>(&mut self, shard: &Rc<Shard<R>>) {
        let snap = shard.shared.snapshot.load_full();
        if snap.generation == self.generation {
            return;
        }
        self.generation = snap.generation;
        let want = wanted(&snap);
        self.open.retain(|(addr, role, close)| {
            let keep = want.contains(&(*addr, *role));
            if !keep {
                close.close();
            }
            keep
        });
        for (addr, role) in want {
            if self.open.iter().any(|(a, r, _)| (*a, *r) == (addr, role)) {
                continue;
            }
            match bind::<R>(&snap, &shard.shared.control.listen_sockets, addr, role) {
                Ok(l) => self.accept_on::<R>(shard, addr, role, l),
                Err(e) => crate::log!(
                    crate::log::Level::Emerg,
                    "shard {}: bind() to {addr} failed ({e}); generation {} does not listen there",
                    shard.index,
                    snap.generation
                ),
            }
        }
    }
}

async fn accept_loop<R: Runtime>(
    shard: Rc<Shard<R>>,
    listener: R::Listener,
    addr: SocketAddr,
    role: Role,
    close: Rc<CloseListener>,
) {
    loop {
        // Read each time: a reload may change it.
        let limit = shard.local.borrow().snap.config.main.worker_connections.max(1);
        if shard.active.get() >= limit {
            // nginx's "worker_connections are not enough": stop accepting until a connection ends.
            R::sleep(Duration::from_millis(5)).await;
            if !shard.draining() && !close.closed.get() {
                continue;
            }
        }
        let next = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            futures_lite::future::or(shard.stopped(), close.closed()).await;
            None
        })
        .await;
        match next {
            None => break,
            Some(Ok((conn, remote))) => spawn_connection::<R>(&shard, conn, remote, addr, role),
            Some(Err(e)) => {
                // out of descriptors: `accept_mutex_delay`, nginx's pause then (the clients wait in the backlog)
                let no_fd_pause = shard.local.borrow().snap.config.main.accept_mutex_delay;
                R::sleep(accept_failed(&e, no_fd_pause)).await
            }
        }
    }
    drop(listener);
    shard.accepting.set(shard.accepting.get() - 1);
}

/// The receive loop of a UDP listening socket: each datagram goes to its client's session, or starts one (a
/// task counted as a connection, within `worker_connections`: past it the datagram is dropped).
async fn datagram_loop<R: Runtime>(
    shard: Rc<Shard<R>>,
    sock: R::UdpListener,
    addr: SocketAddr,
    close: Rc<CloseListener>,
) {
    let ep = Rc::new(Endpoint::<R>::new(sock, addr));
    let mut buf = vec![0u8; udp::MAX_DATAGRAM];
    loop {
        let next = futures_lite::future::or(async { Some(ep.sock.recv_from(&mut buf).await) }, async {
            futures_lite::future::or(shard.stopped(), close.closed()).await;
            None
        })
        .await;
        match next {
            None => break,
            Some(Ok((n, from, local))) => {
                let (limit, requests) = {
                    let local = shard.local.borrow();
                    let snap = &local.snap;
                    let srv = snap
                        .udp_server_of(addr)
                        .and_then(|i| snap.config.stream.as_ref()?.servers.get(i));
                    (
                        snap.config.main.worker_connections.max(1),
                        srv.map_or(0, |s| s.udp_requests),
                    )
                };
                let room = shard.active.get() < limit && !shard.draining();
                let client = udp::Client { remote: from, local };
                if let Some(inbox) = ep.arrived(client, buf.get(..n).unwrap_or_default(), room, requests) {
                    spawn_counted(
                        &shard,
                        udp::serve::<R>(Rc::clone(&shard), Rc::clone(&ep), client, inbox),
                    );
                }
            }
            Some(Err(e)) => {
                // an error queued on the socket (an ICMP message for an earlier reply): logged, then the next one
                crate::log!(crate::log::Level::Info, "recvmsg() on {addr} failed ({e})");
                R::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    drop(ep);
    shard.accepting.set(shard.accepting.get() - 1);
}

/// Logs a failed accept as nginx does (`accept4() failed (24: Too many open files)`: `crit` when the process or
/// the system is out of descriptors, `err` for a connection aborted before it was taken, `alert` otherwise) and
/// says how long to wait before the next one (`no_fd_pause` when out of descriptors).
fn accept_failed(e: &std::io::Error, no_fd_pause: Duration) -> Duration {
    let text = crate::config::error::errno_text(e);
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE) => {
            crate::log!(crate::log::Level::Crit, "accept4() failed ({text})");
            no_fd_pause
        }
        Some(libc::ECONNABORTED) => {
            crate::log_error!("accept4() failed ({text})");
            Duration::ZERO
        }
        _ => {
            crate::log_alert!("accept4() failed ({text})");
            Duration::from_millis(10)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_descriptors_pauses_accepting_and_an_aborted_connection_does_not() {
        let pause = Duration::from_millis(500);
        let after = |errno| accept_failed(&std::io::Error::from_raw_os_error(errno), pause);
        assert_eq!(after(libc::EMFILE), pause);
        assert_eq!(after(libc::ENFILE), pause);
        assert_eq!(after(libc::ECONNABORTED), Duration::ZERO);
        assert_eq!(after(libc::EINVAL), Duration::from_millis(10));
    }
}
