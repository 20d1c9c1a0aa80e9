//! Datagrams on a wildcard UDP socket with their local address (nginx's `IP_PKTINFO`/`IPV6_RECVPKTINFO` in
//! `ngx_event_recvmsg` and `ngx_sendmsg`): the address a client's datagram was sent to is read from its control
//! message, and the answer goes out from that same address, so a client that connected its socket to it takes the
//! answer. Non-blocking calls on the raw descriptor; a runtime waits for readiness around them.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Room for one `in6_pktinfo` control message (the larger of the two).
const CONTROL: usize = 64;

/// Asks the kernel to tell the local address of each datagram on `fd` (a socket bound to a wildcard address).
pub fn enable(fd: RawFd, v6: bool) -> io::Result<()> {
    let on: libc::c_int = 1;
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO)
    } else {
        (libc::IPPROTO_IP, libc::IP_PKTINFO)
    };
    // SAFETY: `on` lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(s as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(s as *const libc::sockaddr_storage).cast() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn to_storage(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in.
            let sin: &mut libc::sockaddr_in = unsafe { &mut *(&mut s as *mut libc::sockaddr_storage).cast() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in6.
            let sin6: &mut libc::sockaddr_in6 = unsafe { &mut *(&mut s as *mut libc::sockaddr_storage).cast() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (s, len as libc::socklen_t)
}

/// One `recvmsg` (non-blocking: `WouldBlock` when nothing is there): the datagram into `buf`, its sender, and
/// the local address it was sent to when the kernel said (`None` otherwise).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<IpAddr>)> {
    // SAFETY: zeroed C structs; every pointer set below points into a live local or `buf` with its length.
    unsafe {
        let mut from: libc::sockaddr_storage = zeroed();
        let mut control = [0u64; CONTROL / 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = CONTROL as _;
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let sender = from_storage(&from).ok_or_else(|| io::Error::other("datagram from an unknown family"))?;
        let mut local = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::IPPROTO_IP && h.cmsg_type == libc::IP_PKTINFO {
                let info: libc::in_pktinfo = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                local = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr))));
            } else if h.cmsg_level == libc::IPPROTO_IPV6 && h.cmsg_type == libc::IPV6_PKTINFO {
                let info: libc::in6_pktinfo = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                local = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Ok((n as usize, sender, local))
    }
}

/// One `sendmsg` of `buf` to `to` from the local address `from` (non-blocking).
pub fn send(fd: RawFd, buf: &[u8], to: SocketAddr, from: IpAddr) -> io::Result<usize> {
    // SAFETY: zeroed C structs; every pointer set below points into a live local or `buf` with its length, and
    // the control buffer is large and aligned enough for the one message written into it.
    unsafe {
        let (mut dst, dst_len) = to_storage(to);
        let mut control = [0u64; CONTROL / 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = (&mut dst as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = dst_len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        let (level, kind, len) = match from {
            IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_PKTINFO, size_of::<libc::in_pktinfo>()),
            IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, size_of::<libc::in6_pktinfo>()),
        };
        msg.msg_controllen = libc::CMSG_SPACE(len as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() {
            return Err(io::Error::other("no room for the control message"));
        }
        (*c).cmsg_level = level;
        (*c).cmsg_type = kind;
        (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
        match from {
            IpAddr::V4(ip) => {
                let mut info: libc::in_pktinfo = zeroed();
                info.ipi_spec_dst.s_addr = u32::from(ip).to_be();
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), info);
            }
            IpAddr::V6(ip) => {
                let mut info: libc::in6_pktinfo = zeroed();
                info.ipi6_addr.s6_addr = ip.octets();
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast(), info);
            }
        }
        let n = libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}
