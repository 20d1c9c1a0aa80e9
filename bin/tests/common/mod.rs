//! What the process tests share: free ports, temp dirs, bounded waits, the pid file, signals and one-shot GETs.
#![allow(dead_code)] // each test file uses its own part

#[path = "../../../engine/tests/support/skip.rs"]
pub mod skip;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A loopback port for `corelb` to listen on, held for the life of the test process by a socket bound with
/// SO_REUSEADDR and SO_REUSEPORT that never listens: corelb's listeners bind beside it (a socket the shards share has
/// SO_REUSEADDR, a `reuseport` one both, as the holder), while no other test running at the same time can be given
/// the port, as it could a port bound and released (the kernel never picks a port a socket is bound to for `:0`).
pub fn free_port() -> u16 {
    held_port(true)
}

/// A loopback port that refuses connections (ECONNREFUSED) for the life of the test process: its holder has neither
/// SO_REUSEADDR nor SO_REUSEPORT and never listens, so no listener of this or any other process can have it.
pub fn dead_port() -> u16 {
    held_port(false)
}

/// A loopback port bound by a TCP socket kept for the life of the process, never listening, with SO_REUSEADDR and
/// SO_REUSEPORT both on or both off.
fn held_port(reuse_port: bool) -> u16 {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    static HELD: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());
    let os = std::io::Error::last_os_error;
    // SAFETY: socket() takes no pointer; it returns a new descriptor or -1.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(raw >= 0, "socket: {}", os());
    // SAFETY: `raw` is a descriptor this call just opened and nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let on: libc::c_int = reuse_port.into();
    for option in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        // SAFETY: setsockopt reads one c_int from `on`, whose size it is given.
        let set = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0, "setsockopt {option}: {}", os());
    }
    let mut addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: bind reads `len` bytes of `addr`, a sockaddr_in of that size.
    let bound = unsafe { libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_in).cast(), len) };
    assert_eq!(bound, 0, "bind: {}", os());
    // SAFETY: getsockname writes at most `len` bytes into `addr` and the length it wrote into `len`.
    let named = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) };
    assert_eq!(named, 0, "getsockname: {}", os());
    HELD.lock().unwrap_or_else(PoisonError::into_inner).push(fd);
    u16::from_be(addr.sin_port)
}

/// An empty directory of its own for the test `name` of the suite `suite`.
pub fn temp_dir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Polls `cond` every 20 ms until it holds (true) or `limit` passes (false).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// How long a started `corelb` may take to bind its listeners and write its pid file on a loaded machine.
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// Waits until `port` on 127.0.0.1 accepts a connection (within [`START_LIMIT`]) or `child` has exited; whether it
/// accepts.
pub fn wait_listening(port: u16, child: &mut Child) -> bool {
    wait_until(START_LIMIT, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok() || child.try_wait().ok().flatten().is_some()
    }) && matches!(child.try_wait(), Ok(None))
}

/// The pid that `pid_file` holds once it is written whole (`PID` and a newline) and names `child`, within
/// [`START_LIMIT`]: `corelb` binds its listeners before it writes the pid file, as nginx does (`ngx_init_cycle`
/// before `ngx_create_pidfile`), so a port that accepts does not mean that `-s` can find the process yet.
pub fn wait_pid_file(pid_file: &Path, child: &mut Child) -> u32 {
    let want = child.id();
    let mut seen = String::new();
    let written = wait_until(START_LIMIT, || {
        seen = std::fs::read_to_string(pid_file).unwrap_or_default();
        let whole = seen.strip_suffix('\n').and_then(|p| p.parse::<u32>().ok());
        whole == Some(want) || child.try_wait().ok().flatten().is_some()
    });
    assert!(
        written && matches!(child.try_wait(), Ok(None)),
        "no pid file {} naming {want}: {seen:?} (child: {:?})",
        pid_file.display(),
        child.try_wait()
    );
    want
}

/// The child's exit status within `limit`; killed (and `None`) if it has not ended by then.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(limit, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Sends `kill -SIG pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
    assert!(ok.is_ok_and(|s| s.success()), "kill -{sig}");
}

/// One GET of `path` with `Connection: close`; the body.
pub fn get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .expect("send");
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A spawned process killed when the test ends, failed or not (so a failing test leaves nothing running).
pub struct KillOnDrop(pub Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
