//! Unix-domain sockets for both runtimes: the process's listening sockets, and connects.
//!
//! **One socket per path, shared by the shards.** A unix-domain listener cannot be bound once per shard as a TCP
//! one is (Linux has no `SO_REUSEPORT` for `AF_UNIX`: a second `bind` of the path fails with `EADDRINUSE`). So the
//! control plane binds each `listen unix:PATH` once ([`bind_listener`], from `control::try_new_listens` or, for a
//! shard started without it, the first shard that asks) and every shard accepts on its own duplicate of that
//! descriptor ([`listener_for`]); the kernel hands each connection to one of the shards waiting in `accept`.
//! nginx's workers share their master's listening socket in the same way. As nginx does, a path that exists
//! already fails the bind (`EADDRINUSE`: nginx does not remove a stale socket either), the socket file is made
//! `0666` (nginx's `chmod`), and the file is removed when a reload drops the address ([`remove`], from `control::Control::apply`) and at
//! exit ([`remove_all`]).
//!
//! **Carried by the runtime's TCP stream type.** Both runtimes' TCP streams are wrappers of a socket descriptor
//! whose reads, writes, `peek` and `shutdown` are plain socket calls, which `AF_UNIX` stream sockets answer as TCP
//! ones do. An accepted or connected unix-domain socket is therefore handed to the runtime as its TCP stream (the
//! `Tcp` side of [`super::tls_stream`]), with its address token beside it for what is TCP-only (`TCP_NODELAY`,
//! `getsockname`): the inet path keeps its one stream type and its code unchanged.

use crate::config::unix_addr;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::{Mutex, OnceLock};

/// The backlog of a unix-domain listener (nginx's default 511, as the TCP ones).
pub const BACKLOG: i32 = 511;

/// The listening sockets bound so far, by path.
fn bound() -> &'static Mutex<HashMap<&'static str, UnixListener>> {
    static BOUND: OnceLock<Mutex<HashMap<&'static str, UnixListener>>> = OnceLock::new();
    BOUND.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Binds the listening socket of token `addr` once for the process (nothing when it is bound already), with
/// `backlog`. Taken only at start, reload and shard start: never on a request's path.
pub fn bind_listener(addr: SocketAddr, backlog: i32) -> io::Result<()> {
    let path = unix_addr::path_of(&addr).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut map = bound().lock().unwrap_or_else(|p| p.into_inner());
    if map.contains_key(path) {
        return Ok(());
    }
    map.insert(path, bind_path(path, backlog)?);
    Ok(())
}

fn bind_path(path: &str, backlog: i32) -> io::Result<UnixListener> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let sock = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)?;
    sock.bind(&SockAddr::unix(path)?)?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    // nginx: `chmod(name, 0666)`, so that any local user may connect (a failure is logged, not fatal)
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)) {
        crate::log!(crate::log::Level::Emerg, "chmod() \"{path}\" failed ({e})");
    }
    Ok(UnixListener::from(OwnedFd::from(sock)))
}

/// A shard's own descriptor of the listening socket of token `addr` (bound now if no one bound it yet), its backlog
/// set to `backlog`.
pub fn listener_for(addr: SocketAddr, backlog: i32) -> io::Result<UnixListener> {
    bind_listener(addr, backlog)?;
    let path = unix_addr::path_of(&addr).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let map = bound().lock().unwrap_or_else(|p| p.into_inner());
    let l = map.get(path).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
    // the control plane bound it with nginx's default backlog: `listen(2)` again sets the address's `backlog=`
    socket2::SockRef::from(l).listen(backlog)?;
    l.try_clone()
}

/// Closes the process's descriptor of the listening socket of token `addr` and removes its file (one listener's
/// part of [`remove_all`]).
pub fn remove(addr: SocketAddr) {
    let Some(path) = unix_addr::path_of(&addr) else { return };
    let mut map = bound().lock().unwrap_or_else(|p| p.into_inner());
    if map.remove(path).is_some() {
        remove_file(path);
    }
}

/// At exit: closes every listening socket and removes its file (nginx's `ngx_close_listening_sockets`).
pub fn remove_all() {
    let mut map = bound().lock().unwrap_or_else(|p| p.into_inner());
    for (path, _) in map.drain() {
        remove_file(path);
    }
}

fn remove_file(path: &str) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            crate::log!(crate::log::Level::Emerg, "unlink() {path} failed ({e})");
        }
    }
}

/// Accepts one connection on `l` (non-blocking): the connection's descriptor as a std TCP stream, its carrier
/// (see the module's doc); `WouldBlock` when none is waiting.
pub fn accept(l: &UnixListener) -> io::Result<std::net::TcpStream> {
    let (s, _) = l.accept()?;
    s.set_nonblocking(true)?;
    // SAFETY: `into_raw_fd` hands over the accepted socket's only descriptor, which the stream then owns.
    Ok(unsafe { std::net::TcpStream::from_raw_fd(s.into_raw_fd()) })
}

/// Connects to the socket of token `addr` without blocking: the connection as a std TCP stream (its carrier).
/// A unix-domain connect completes at once or fails (`EAGAIN` when the listener's backlog is full: nginx fails the
/// try then too), so no wait is needed.
pub fn connect(addr: &SocketAddr) -> io::Result<std::net::TcpStream> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let path = unix_addr::path_of(addr).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let sock = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
    sock.connect(&SockAddr::unix(path)?)?;
    Ok(std::net::TcpStream::from(OwnedFd::from(sock)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn one_socket_per_path_shared_by_duplicates_and_removed_at_the_end() {
        let dir = std::env::temp_dir().join(format!("corelb-unix-rt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let addr = unix_addr::intern(path.to_str().unwrap()).unwrap();
        let a = listener_for(addr, 16).unwrap();
        let b = listener_for(addr, 16).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o666);
        let mut c = connect(&addr).unwrap();
        c.set_nonblocking(false).unwrap();
        c.write_all(b"hi").unwrap();
        // the connection waits on the one socket: either descriptor takes it
        let mut s = accept(&a).or_else(|_| accept(&b)).unwrap();
        s.set_nonblocking(false).unwrap();
        let mut got = [0u8; 2];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        remove(addr);
        assert!(!path.exists());
        drop((a, b));
        assert!(connect(&addr).is_err());
        let _ = std::fs::remove_dir(&dir);
    }
}
