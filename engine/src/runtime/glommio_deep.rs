//! glommio's deep-idle wait: a connection idle past a tick gives up its glommio stream (and with it the io_uring
//! `POLL_ADD` source of ~500 bytes glommio keeps per stream) and waits for its next bytes in one per-shard epoll set,
//! which one task drains through a single glommio source; bytes give it a glommio stream again.
//!
//! glommio 0.9 has no call that drops a stream's source and keeps the socket, nor one that waits for an arbitrary
//! descriptor: a parked connection keeps its socket as a bare descriptor (the stream's own, taken by `dup` before
//! the stream is dropped), and the drainer waits for the epoll set through a glommio stream made over a duplicate
//! of the set's descriptor, whose only use is the readiness poll glommio arms when it makes a stream.

use futures_lite::AsyncRead;
use glommio::net::TcpStream;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Poll, Waker};

/// The shard thread's parked connections: their epoll set and each one's waker, indexed by descriptor (`None`: not
/// parked, or its one-shot registration fired and its task was woken).
struct DeepSet {
    epoll: OwnedFd,
    wakers: Vec<Option<Waker>>,
    /// The drainer task runs (spawned at the first park, it runs for the thread's life).
    draining: bool,
}

thread_local! {
    static SET: RefCell<Option<DeepSet>> = const { RefCell::new(None) };
}

/// Sockets parked now, in all shards (tests look at it: [`super::glommio_rt::parked_sockets`]).
static PARKED: AtomicUsize = AtomicUsize::new(0);

/// How many sockets are parked now, in all shards.
pub(super) fn parked() -> usize {
    PARKED.load(Ordering::Relaxed)
}

/// Readable, the peer's half-close, once: a fired registration is armed again by the next wait that finds the
/// socket empty.
const EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;

/// One `epoll_ctl` of `fd` in `epoll`, for [`EVENTS`] with the descriptor as the event's data.
fn ctl(epoll: RawFd, op: libc::c_int, fd: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: EVENTS,
        u64: fd as u64,
    };
    // SAFETY: `ev` is a valid event for the call; the kernel only reads it.
    match unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The stream's socket as a descriptor of its own, for a park: `None` when it cannot be duplicated or registered
/// (the connection then keeps its stream and waits as before).
pub(super) fn park(stream: &TcpStream, waker: &Waker) -> Option<OwnedFd> {
    // SAFETY: duplicating an open descriptor; the new one is owned by the `OwnedFd` made of it.
    let fd = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just made and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let spawn = SET.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            // SAFETY: a plain call; the descriptor it returns is owned by the `OwnedFd` made of it.
            let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if epoll < 0 {
                return None;
            }
            *s = Some(DeepSet {
                // SAFETY: `epoll` was just made and is owned by nothing else.
                epoll: unsafe { OwnedFd::from_raw_fd(epoll) },
                wakers: Vec::new(),
                draining: false,
            });
        }
        let set = s.as_mut()?;
        let i = usize::try_from(fd.as_raw_fd()).ok()?;
        ctl(set.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd()).ok()?;
        if set.wakers.len() <= i {
            set.wakers.resize(i + 1, None);
        }
        set.wakers[i] = Some(waker.clone());
        PARKED.fetch_add(1, Ordering::Relaxed);
        let spawn = !set.draining;
        set.draining = true;
        Some(spawn)
    })?;
    if spawn {
        glommio::spawn_local(drain()).detach();
    }
    Some(fd)
}

/// Waits (again) for a parked socket found empty: its waker is noted and its one-shot registration armed again if it
/// fired. An error means the wait could not be armed (the caller treats it as the read's error).
pub(super) fn wait(fd: RawFd, waker: &Waker) -> io::Result<()> {
    SET.with(|s| {
        let mut s = s.borrow_mut();
        let set = s.as_mut().ok_or(io::ErrorKind::NotFound)?;
        let slot = usize::try_from(fd)
            .ok()
            .and_then(|i| set.wakers.get_mut(i))
            .ok_or(io::ErrorKind::NotFound)?;
        match slot {
            Some(w) => w.clone_from(waker),
            None => {
                ctl(set.epoll.as_raw_fd(), libc::EPOLL_CTL_MOD, fd)?;
                *slot = Some(waker.clone());
            }
        }
        Ok(())
    })
}

/// Takes a parked socket out of the set (it gets a glommio stream again, or closes).
pub(super) fn unpark(fd: RawFd) {
    // `try_with`: a connection dropped while the thread's locals are torn down has nothing left to clean
    let _ = SET.try_with(|s| {
        if let Some(set) = s.borrow_mut().as_mut() {
            let _ = ctl(set.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd);
            PARKED.fetch_sub(1, Ordering::Relaxed);
            if let Some(slot) = usize::try_from(fd).ok().and_then(|i| set.wakers.get_mut(i)) {
                *slot = None;
            }
        }
    });
}

/// The drainer: waits for the epoll set to be readable, then wakes the tasks of the sockets it reports.
async fn drain() {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let Some(epoll) = SET.with(|s| s.borrow().as_ref().map(|set| set.epoll.as_raw_fd())) else {
            return;
        };
        if readable(epoll).await.is_err() {
            // (no descriptor for the glommio stream: try again a tick later rather than spin)
            glommio::timer::sleep(super::deadline::TICK).await;
        }
        loop {
            // SAFETY: `events` has room for the count passed; a zero timeout does not block.
            let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as libc::c_int, 0) };
            let Ok(n) = usize::try_from(n) else { break };
            SET.with(|s| {
                if let Some(set) = s.borrow_mut().as_mut() {
                    for ev in &events[..n] {
                        let slot = usize::try_from(ev.u64).ok().and_then(|i| set.wakers.get_mut(i));
                        if let Some(w) = slot.and_then(Option::take) {
                            w.wake();
                        }
                    }
                }
            });
            if n < events.len() {
                break;
            }
        }
    }
}

/// Completes when `epoll` is readable (or on any wake-up of the task: the caller's `epoll_wait` then finds nothing).
async fn readable(epoll: RawFd) -> io::Result<()> {
    // SAFETY: duplicating an open descriptor; the new one is owned by the glommio stream made of it.
    let dup = unsafe { libc::fcntl(epoll, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is owned by nothing else; the stream is only polled for readiness, never read from (its first
    // `poll_read` finds the poll glommio armed at its making still in flight and waits for it), and closes `dup`.
    let mut stream = unsafe { TcpStream::from_raw_fd(dup) };
    let mut polled = false;
    std::future::poll_fn(|cx| {
        if polled {
            return Poll::Ready(());
        }
        polled = true;
        match Pin::new(&mut stream).poll_read(cx, &mut []) {
            Poll::Pending => Poll::Pending,
            // (the poll had completed already)
            Poll::Ready(_) => Poll::Ready(()),
        }
    })
    .await;
    Ok(())
}
