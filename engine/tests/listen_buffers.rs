//! `listen ... sndbuf=SIZE rcvbuf=SIZE`, on both runtimes: each shard's listening socket (http, stream) has the
//! sizes set (`SO_SNDBUF`, `SO_RCVBUF`, which Linux reports doubled), as nginx sets them on its listening sockets.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use support::{free_addr, glommio_usable, Proxy};

/// An option of a socket of this process, as `getsockopt` gives it.
fn option(fd: i32, name: i32) -> Option<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are a valid `int` buffer and its size for the call to fill.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

/// The local address of the socket `fd`, if it is an IPv4 one.
fn local(fd: i32) -> Option<SocketAddr> {
    // SAFETY: an all-zero `sockaddr_in` is a valid value to be overwritten.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sa` and `len` are a valid address buffer and its size.
    let r = unsafe { libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) };
    if r != 0 || i32::from(sa.sin_family) != libc::AF_INET {
        return None;
    }
    let ip = std::net::Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr));
    Some(SocketAddr::from((ip, u16::from_be(sa.sin_port))))
}

/// `(SO_SNDBUF, SO_RCVBUF)` of every listening socket of this process bound to `addr`.
fn listeners_of(addr: SocketAddr) -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| local(fd) == Some(addr) && option(fd, libc::SO_ACCEPTCONN) == Some(1))
        .filter_map(|fd| Some((option(fd, libc::SO_SNDBUF)?, option(fd, libc::SO_RCVBUF)?)))
        .collect()
}

fn run<R: Runtime>() {
    let (http, stream, plain) = (free_addr(), free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            server {{ listen {http} sndbuf=64k rcvbuf=32k; return 200 ok; }}
            server {{ listen {plain}; return 200 ok; }}
        }}
        stream {{
            server {{ listen {stream} rcvbuf=48k; return ok; }}
        }}"
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 2);
    let plain_sizes = listeners_of(plain);
    assert_eq!(plain_sizes.len(), 2, "a listener per shard");
    let (system_snd, _) = plain_sizes[0];
    assert_eq!(listeners_of(http), vec![(2 * 65536, 2 * 32768); 2]);
    let stream_sizes = listeners_of(stream);
    assert_eq!(stream_sizes.len(), 2);
    assert!(
        stream_sizes
            .iter()
            .all(|&(snd, rcv)| rcv == 2 * 49152 && snd == system_snd),
        "{stream_sizes:?}"
    );
}

#[test]
fn tokio_listen_buffers() {
    run::<Tokio>();
}

#[test]
fn glommio_listen_buffers() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
