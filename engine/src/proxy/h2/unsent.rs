//! The answer bytes each stream's relay has handed h2 and that h2 has not written to the connection yet: the
//! relay hands h2 whole chunks while the client's window allows them, and a shorter piece only where the window
//! does not, which it tells from a send buffer still full by this count (h2 shows neither its window nor what it
//! holds; its capacity is the smaller of the two). The frames adapter counts the DATA h2 writes.

use std::cell::RefCell;
use std::task::{Context, Waker};

/// One stream being relayed.
struct Queued {
    sid: u32,
    handed: u64,
    written: u64,
    /// The relay waits for h2 to have written all of it.
    waker: Option<Waker>,
}

/// A connection's streams being relayed (as many as its streams at once; kept for the connection's life).
#[derive(Default)]
pub(super) struct Unsent {
    streams: RefCell<Vec<Queued>>,
}

impl Unsent {
    /// Counts `sid`'s DATA from now on, until the guard is dropped.
    pub(super) fn open(&self, sid: u32) -> Counted<'_> {
        self.streams.borrow_mut().push(Queued {
            sid,
            handed: 0,
            written: 0,
            waker: None,
        });
        Counted { unsent: self, sid }
    }

    /// h2 wrote a DATA frame of `len` bytes on `sid` (the adapter, as the frame goes out).
    pub(super) fn written(&self, sid: u32, len: u32) {
        let mut streams = self.streams.borrow_mut();
        let Some(q) = streams.iter_mut().find(|q| q.sid == sid) else {
            return;
        };
        q.written += u64::from(len);
        if q.written >= q.handed {
            if let Some(w) = q.waker.take() {
                w.wake();
            }
        }
    }
}

/// A stream whose DATA is counted (dropped when its relay ends).
pub(super) struct Counted<'u> {
    unsent: &'u Unsent,
    sid: u32,
}

impl Counted<'_> {
    /// The relay handed h2 `len` bytes.
    pub(super) fn handed(&self, len: usize) {
        let mut streams = self.unsent.streams.borrow_mut();
        if let Some(q) = streams.iter_mut().find(|q| q.sid == self.sid) {
            q.handed += len as u64;
        }
    }

    /// The bytes h2 has written of the stream so far.
    pub(super) fn written(&self) -> u64 {
        let streams = self.unsent.streams.borrow();
        streams.iter().find(|q| q.sid == self.sid).map_or(0, |q| q.written)
    }

    /// Whether h2 has written all it was handed; if not, `cx` is woken when it has.
    pub(super) fn poll_all_written(&self, cx: &Context<'_>) -> bool {
        let mut streams = self.unsent.streams.borrow_mut();
        let Some(q) = streams.iter_mut().find(|q| q.sid == self.sid) else {
            return true;
        };
        if q.written >= q.handed {
            return true;
        }
        match &mut q.waker {
            Some(w) => w.clone_from(cx.waker()),
            None => q.waker = Some(cx.waker().clone()),
        }
        false
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        let mut streams = self.unsent.streams.borrow_mut();
        if let Some(at) = streams.iter().position(|q| q.sid == self.sid) {
            streams.swap_remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_relay_is_woken_once_its_bytes_are_written() {
        let unsent = Unsent::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let cx = Context::from_waker(&waker);
        let one = unsent.open(1);
        let three = unsent.open(3);
        assert!(one.poll_all_written(&cx));
        one.handed(100);
        three.handed(5);
        assert!(!one.poll_all_written(&cx));
        unsent.written(3, 5);
        unsent.written(1, 60);
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
        assert_eq!(one.written(), 60);
        unsent.written(1, 40);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert!(one.poll_all_written(&cx));
        drop(one);
        unsent.written(1, 10);
        assert_eq!(unsent.streams.borrow().len(), 1);
        assert!(three.poll_all_written(&cx));
    }
}
