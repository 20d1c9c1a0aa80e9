//! A socket's `recv` and `send` as bare system calls, without glibc's wrappers: corelb is multi-threaded, so each
//! wrapper call of a cancellation point (`recv`, `send`) turns asynchronous thread cancellation on and off around
//! the call, two atomic read-modify-writes that corelb, which never cancels a thread, does not need (1.5 % of a
//! small static file's CPU in `perf`). The calls are the same, with the same flags, as std's. And a file's
//! `fstat`, which std's `File::metadata` makes a `statx` of every field.

use std::io;
use std::os::fd::RawFd;

/// `recv(fd, buf, 0)`: the bytes read, 0 at the end of the stream.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call; the null address arguments ask for no
    // peer address, as recv(2) does
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `send(fd, buf, MSG_NOSIGNAL)` (a closed peer is `EPIPE`, not `SIGPIPE`, as std sends): the bytes sent.
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call; no destination address, as send(2)
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `sendmsg(fd, bufs, MSG_NOSIGNAL)`: one call for several buffers (a TLS session's queued records), the bytes
/// sent. At most `IOV_MAX` (1024) buffers go in one call.
pub fn send_vectored(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let bufs = bufs.get(..bufs.len().min(1024)).unwrap_or_default();
    // SAFETY: a zeroed msghdr is valid (no address, no control data); `IoSlice` is ABI-compatible with `iovec` on
    // unix, and the slices are valid for reads for the call
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len() as _;
        libc::syscall(libc::SYS_sendmsg, fd, &msg as *const libc::msghdr, libc::MSG_NOSIGNAL)
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `fstat(fd)`: the open file's `struct stat`.
pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid place for one `struct stat`, which fstat fills when it returns 0
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat returned 0: it wrote the whole struct
    Ok(unsafe { st.assume_init() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn bytes_cross_a_socket_pair_and_errors_are_errno() {
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(send(a.as_raw_fd(), b"hello").unwrap(), 5);
        let mut buf = [0u8; 16];
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        b.write_all(b"back").unwrap();
        let mut got = [0u8; 4];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"back");
        b.set_nonblocking(true).unwrap();
        assert_eq!(
            recv(b.as_raw_fd(), &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(a);
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 0);
        assert_eq!(send(b.as_raw_fd(), b"x").unwrap_err().raw_os_error(), Some(libc::EPIPE));
        assert_eq!(send(-1, b"x").unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn several_buffers_go_in_one_call() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let parts = [io::IoSlice::new(b"ab"), io::IoSlice::new(b""), io::IoSlice::new(b"cde")];
        assert_eq!(send_vectored(a.as_raw_fd(), &parts).unwrap(), 5);
        let mut got = [0u8; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcde");
        drop(b);
        let one = [io::IoSlice::new(b"x")];
        assert_eq!(
            send_vectored(a.as_raw_fd(), &one).unwrap_err().raw_os_error(),
            Some(libc::EPIPE)
        );
    }
}
