//! Which shard takes a new connection, on both runtimes with 2 shards: a `listen` address without `reuseport` is one
//! socket the shards share (nginx's workers and their one listening socket), so a shard that cannot take a
//! connection leaves it to another; `listen ... reuseport` gives each shard a socket of its own (`SO_REUSEPORT`);
//! a reload keeps a kept address's shared socket, binds an added one once and closes a dropped one.

mod support;

use corelb_engine::config::model::Config;
use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::{free_addr, glommio_usable, socket_option as option, wait_until, Client, Proxy};

fn config(text: &str) -> Config {
    corelb_engine::config::parse_str(text, std::path::Path::new("/t/corelb.conf")).unwrap_or_else(|e| panic!("{e}"))
}

/// The descriptors of this process's listening sockets bound to `addr`, with the socket each refers to (its
/// `socket:[inode]` name: descriptors of one shared socket have the same).
fn listening(addr: SocketAddr) -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|fd| {
            // SAFETY: the descriptor is only borrowed for a `getsockname` (a non-socket answers an error)
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let local = socket2::SockRef::from(&borrowed).local_addr().ok()?.as_socket();
            let bound = local == Some(addr) && option(fd, libc::SO_ACCEPTCONN) == Some(1);
            let name = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
            bound.then(|| (fd, name.to_string_lossy().into_owned()))
        })
        .collect()
}

/// The distinct sockets listening on `addr`.
fn sockets(addr: SocketAddr) -> BTreeSet<String> {
    listening(addr).into_iter().map(|(_, s)| s).collect()
}

/// `SO_REUSEPORT` of each distinct socket listening on `addr`.
fn reuseport_of(addr: SocketAddr) -> Vec<Option<i32>> {
    let mut seen = BTreeSet::new();
    listening(addr)
        .into_iter()
        .filter(|(_, s)| seen.insert(s.clone()))
        .map(|(fd, _)| option(fd, libc::SO_REUSEPORT))
        .collect()
}

fn one_socket_shared_or_one_per_shard<R: Runtime>() {
    let [http, http_own, stream, stream_own] = [0; 4].map(|_| free_addr());
    let text = format!(
        "events {{}}
        http {{
            server {{ listen {http}; listen {http_own} reuseport; return 200 ok; }}
        }}
        stream {{
            server {{ listen {stream}; return ok; }}
            server {{ listen {stream_own} reuseport; return ok; }}
        }}"
    );
    let _proxy = Proxy::start::<R>(config(&text), 2);
    for shared in [http, stream] {
        assert_eq!(sockets(shared).len(), 1, "{} {shared}: one socket", R::NAME);
        assert!(listening(shared).len() >= 2, "a descriptor per shard");
        assert_eq!(
            reuseport_of(shared),
            [Some(0)],
            "nginx's listening socket: no SO_REUSEPORT"
        );
    }
    for own in [http_own, stream_own] {
        assert_eq!(sockets(own).len(), 2, "{} {own}: a socket per shard", R::NAME);
        assert_eq!(reuseport_of(own), [Some(1), Some(1)]);
    }
    assert_eq!(support::get(http, "/").map(|r| r.status), Some(200));
    assert_eq!(support::get(http_own, "/").map(|r| r.status), Some(200));
}

#[test]
fn one_socket_shared_or_one_per_shard_tokio() {
    one_socket_shared_or_one_per_shard::<Tokio>();
}

#[test]
fn one_socket_shared_or_one_per_shard_glommio() {
    if glommio_usable() {
        one_socket_shared_or_one_per_shard::<Glommio>();
    }
}

/// A keepalive connection that was served (so a shard accepted it and holds it).
fn served(addr: SocketAddr) -> Client {
    let mut c = Client::connect(addr);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response().expect("a response");
    assert_eq!(r.status, 200);
    c
}

/// With `worker_connections 1` a shard holding a connection accepts no other; the next client is then the other
/// shard's, every time. (Per-shard `reuseport` sockets would leave about half of them waiting in the full shard's
/// queue until its connection ends: the kernel picks the socket by a hash of the addresses.)
fn a_busy_shard_leaves_the_next_connection_to_the_other<R: Runtime>() {
    let addr = free_addr();
    let text = format!("events {{ worker_connections 1; }} http {{ server {{ listen {addr}; return 200 ok; }} }}");
    let _proxy = Proxy::start::<R>(config(&text), 2);
    for _ in 0..6 {
        let first = served(addr);
        // the second client is served while the first keeps its shard full (`served` waits at most 10 s)
        let second = served(addr);
        // both closed before the next round (a client of the next one waits for its shard to see that)
        for c in [first, second] {
            let _ = c.conn.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[test]
fn a_busy_shard_leaves_the_next_connection_to_the_other_tokio() {
    a_busy_shard_leaves_the_next_connection_to_the_other::<Tokio>();
}

#[test]
fn a_busy_shard_leaves_the_next_connection_to_the_other_glommio() {
    if glommio_usable() {
        a_busy_shard_leaves_the_next_connection_to_the_other::<Glommio>();
    }
}

/// A reload keeps a kept address's socket (the same one: nothing is refused there, even when the reload adds
/// `reuseport` to it), binds an added shared address once for the shards, and closes a dropped one once every shard
/// has let its descriptor go.
fn a_reload_keeps_binds_and_closes_shared_sockets<R: Runtime>() {
    let (kept, added) = (free_addr(), free_addr());
    let conf = |addrs: &[SocketAddr]| {
        let listens: String = addrs.iter().map(|a| format!("listen {a}; ")).collect();
        config(&format!("events {{}} http {{ server {{ {listens}return 200 ok; }} }}"))
    };
    let proxy = Proxy::start::<R>(conf(&[kept]), 2);
    let before = sockets(kept);
    assert_eq!(before.len(), 1);
    let mut held = served(kept);
    let reload = |c: Config| proxy.shared.apply(ChangeKind::Reload, move |_| Ok(c)).expect("reload");
    reload(conf(&[kept, added]));
    // the instance's descriptor and each shard's, once the shards have followed the new snapshot
    assert!(
        wait_until(Duration::from_secs(5), || listening(added).len() == 3),
        "{}: {:?}",
        R::NAME,
        listening(added)
    );
    assert_eq!(sockets(added).len(), 1);
    assert_eq!(sockets(kept), before, "the kept address keeps its socket");
    assert_eq!(support::get(added, "/").map(|r| r.status), Some(200));
    reload(conf(&[kept]));
    assert!(
        wait_until(Duration::from_secs(5), || listening(added).is_empty()),
        "{}: the dropped address's socket closes",
        R::NAME
    );
    assert!(TcpStream::connect(added).is_err());
    assert_eq!(sockets(kept), before);
    // `reuseport` added to a kept address: the address keeps its socket as it was bound (README)
    let generation = proxy.shared.snapshot.load().generation;
    reload(config(&format!(
        "events {{}} http {{ server {{ listen {kept} reuseport; return 200 ok; }} }}"
    )));
    assert!(proxy.shared.snapshot.load().generation > generation);
    // the shards follow a new snapshot within a tick (100 ms): none binds a socket of its own in three
    assert!(
        !wait_until(Duration::from_millis(300), || sockets(kept) != before),
        "{}",
        R::NAME
    );
    held.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(held.read_response().map(|r| r.status), Some(200));
}

#[test]
fn a_reload_keeps_binds_and_closes_shared_sockets_tokio() {
    a_reload_keeps_binds_and_closes_shared_sockets::<Tokio>();
}

#[test]
fn a_reload_keeps_binds_and_closes_shared_sockets_glommio() {
    if glommio_usable() {
        a_reload_keeps_binds_and_closes_shared_sockets::<Glommio>();
    }
}
