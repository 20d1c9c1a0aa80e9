//! A precise sleep for tokio shards: one `timerfd` per thread, registered once with tokio's reactor (tokio's own
//! timer has a 1 ms tick and rounds up, too coarse for the open-loop pacer).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

thread_local! {
    static TIMER: RefCell<Option<Rc<AsyncFd<OwnedFd>>>> = const { RefCell::new(None) };
}

/// This thread's timer, made on first use; `None` if the kernel refuses a timerfd.
fn timer() -> Option<Rc<AsyncFd<OwnedFd>>> {
    TIMER.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_none() {
            // SAFETY: a plain system call; on success the new descriptor is owned by `OwnedFd` alone.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            // SAFETY: `fd` is a fresh descriptor nobody else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: the timer owns its descriptor and is never replaced or closed while registered.
            *t = unsafe { AsyncFd::register(owned) }.ok().map(Rc::new);
        }
        t.clone()
    })
}

/// Reads the expiration count; `true` if the timer had fired.
fn consume(fd: &OwnedFd) -> bool {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into an 8-byte buffer from a descriptor we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    n == 8
}

/// Arms the timer to fire once after `d` (relative, CLOCK_MONOTONIC like `Instant`).
fn arm(fd: &OwnedFd, d: Duration) -> io::Result<()> {
    let d = d.max(Duration::from_nanos(1)); // an all-zero value would disarm it
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
        },
    };
    // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sleeps for `d` to within the kernel's hrtimer slack. Returns `false` without sleeping when no timerfd can be
/// had, so the caller can fall back to the runtime's timer. Must run inside a tokio runtime.
pub async fn sleep(d: Duration) -> bool {
    let Some(t) = timer() else { return false };
    // A previous sleep abandoned after its timer fired leaves an expiration behind: drop it before re-arming.
    consume(t.get_ref());
    if arm(t.get_ref(), d).is_err() {
        return false;
    }
    loop {
        let Ok(mut ready) = t.readable().await else {
            return false;
        };
        if consume(t.get_ref()) {
            return true;
        }
        ready.clear_ready();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::poll_once;
    use std::pin::pin;
    use std::time::Instant;

    /// How long until the timer fires: zero once a one-shot timer has fired (or was never armed).
    fn remaining(fd: &OwnedFd) -> Duration {
        let mut spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        };
        // SAFETY: `spec` is a valid itimerspec for the kernel to fill; the descriptor is this thread's timer.
        assert_eq!(unsafe { libc::timerfd_gettime(fd.as_raw_fd(), &mut spec) }, 0);
        let secs = u64::try_from(spec.it_value.tv_sec).unwrap();
        Duration::new(secs, u32::try_from(spec.it_value.tv_nsec).unwrap())
    }

    /// Sleeps `d`, checking on the way what the kernel was asked for; returns how long it took.
    async fn checked_sleep(d: Duration) -> Duration {
        let t0 = Instant::now();
        let mut sleep = pin!(sleep(d));
        // The first poll arms the timer: for `d` exactly, so the kernel reports at most `d` left (less as time
        // passes, zero if it has fired already).
        let first = poll_once(sleep.as_mut()).await;
        let fd = timer().expect("a timerfd on Linux");
        let left = remaining(fd.get_ref());
        assert!(left <= d, "armed for {left:?}, more than {d:?}");
        let fired = match first {
            Some(fired) => fired,
            // Bounded: a wake-up that never comes fails here instead of hanging the test run.
            None => tokio::time::timeout(Duration::from_secs(10), sleep)
                .await
                .expect("the timerfd woke the sleep"),
        };
        let took = t0.elapsed();
        assert!(fired, "timerfd available");
        assert!(took >= d, "woke early: {took:?} < {d:?}");
        // It returned because its one expiration fired: the one-shot timer is disarmed and nothing is left to read.
        assert_eq!(
            remaining(fd.get_ref()),
            Duration::ZERO,
            "still armed after a {d:?} sleep"
        );
        assert!(!consume(fd.get_ref()), "an expiration was left behind");
        took
    }

    #[test]
    fn sleeps_for_what_it_armed_and_consumes_its_expiration() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for us in [50u64, 300, 2_500, 40_000] {
                checked_sleep(Duration::from_micros(us)).await;
            }
            // An abandoned sleep whose timer then fires does not cut the next one short.
            let _ = tokio::time::timeout(Duration::from_micros(10), sleep(Duration::from_micros(100))).await;
            std::thread::sleep(Duration::from_millis(1));
            checked_sleep(Duration::from_millis(2)).await;
        });
    }
}
