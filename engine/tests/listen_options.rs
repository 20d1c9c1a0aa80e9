//! `listen ... backlog=N sndbuf=SIZE rcvbuf=SIZE`, on both runtimes: the listening socket the shards share and each
//! shard's own (`reuseport`), http and stream, have the `listen(2)` backlog (nginx's 511 by default) and the sizes
//! set (`SO_SNDBUF`, `SO_RCVBUF`, which Linux reports doubled), as nginx sets them on its listening sockets.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use support::{free_addr, glommio_usable, socket_option as option, Proxy};

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

/// The backlog of the listening socket `fd`: Linux reports a listener's `sk_max_ack_backlog` in `TCP_INFO`'s
/// `tcpi_sacked`.
fn backlog(fd: i32) -> Option<u32> {
    // SAFETY: an all-zero `tcp_info` is a valid value to be overwritten.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are a valid `tcp_info` buffer and its size for the call to fill.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(info.tcpi_sacked)
}

/// The listening sockets of this process bound to `addr`: a descriptor of each (a socket the shards share has
/// several).
fn listening(addr: SocketAddr) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut seen = std::collections::HashSet::new();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| local(fd) == Some(addr) && option(fd, libc::SO_ACCEPTCONN) == Some(1))
        .filter(|fd| {
            let socket = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok();
            seen.insert(socket)
        })
        .collect()
}

/// `(SO_SNDBUF, SO_RCVBUF)` of every listening socket of this process bound to `addr`.
fn listeners_of(addr: SocketAddr) -> Vec<(i32, i32)> {
    listening(addr)
        .into_iter()
        .filter_map(|fd| Some((option(fd, libc::SO_SNDBUF)?, option(fd, libc::SO_RCVBUF)?)))
        .collect()
}

/// The backlog of every listening socket of this process bound to `addr`.
fn backlogs_of(addr: SocketAddr) -> Vec<u32> {
    listening(addr).into_iter().filter_map(backlog).collect()
}

fn run<R: Runtime>() {
    let (http, stream, plain) = (free_addr(), free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            server {{ listen {http} sndbuf=64k rcvbuf=32k backlog=100 reuseport; return 200 ok; }}
            server {{ listen {plain}; return 200 ok; }}
        }}
        stream {{
            server {{ listen {stream} rcvbuf=48k backlog=4000000000; return ok; }}
        }}"
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 2);
    let plain_sizes = listeners_of(plain);
    assert_eq!(plain_sizes.len(), 1, "one socket the shards share");
    let (system_snd, _) = plain_sizes[0];
    assert_eq!(listeners_of(http), vec![(2 * 65536, 2 * 32768); 2]);
    let stream_sizes = listeners_of(stream);
    assert_eq!(stream_sizes.len(), 1);
    assert!(
        stream_sizes
            .iter()
            .all(|&(snd, rcv)| rcv == 2 * 49152 && snd == system_snd),
        "{stream_sizes:?}"
    );
    // backlog=: as given (nginx's 511 without it); a value past an int is the kernel's cap, somaxconn
    assert_eq!(backlogs_of(http), vec![100; 2]);
    assert_eq!(backlogs_of(plain), vec![511]);
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    assert_eq!(backlogs_of(stream), vec![somaxconn]);
}

#[test]
fn tokio_listen_options() {
    run::<Tokio>();
}

#[test]
fn glommio_listen_options() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
