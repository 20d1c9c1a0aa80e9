//! A shard's spare buffer sets and husks: taken by a connection while it is served, given back while it waits idle,
//! and, once a peak has passed, the sets it needed freed again (on the shard's tick, never per request).

use super::Buffers;
use std::cell::{Cell, RefCell};
use std::task::Poll;

/// Buffer sets (and husks) kept for reuse per shard (each set is about 60 KiB with the default `client_buffer`); a
/// set given back beyond this bound is freed. It is not what bounds idle memory (the tick's [`Spares::trim`] frees
/// what a peak left unused within two trims, 2 s): it is large enough that a steady load with thousands of requests in
/// flight reuses its sets instead of freeing and allocating them (at 256, 2,000 connections cost 2.7 page faults
/// and 0.5 `madvise` per request: BENCHMARKS.md).
const SPARE_BUFFERS: usize = 4096;
/// Sets a shard keeps however long they stay unused (so that a quiet shard's next requests find one).
const RESERVE: usize = 4;
/// About the heap of a set with the default `client_buffer` (1 KiB): client 1, upstream 32, answer 16, request 4, the
/// small ones and the struct; what [`Spares::freed`] counts a freed set as.
pub(super) const SET_BYTES: usize = 56 * 1024;
/// Bytes freed (on this thread, since the allocator's free pages last went back) worth giving the pages back for.
const RETURN_FROM: usize = 1024 * 1024;
/// Ticks between two returns at most (a return walks the allocator's free lists).
const RETURN_EVERY: u64 = 5;

/// The spare sets, the husks, and the fewest spare sets the list held since the last trim.
#[derive(Default)]
pub(super) struct Spares {
    /// Boxed: a connection holds its set as a `Box` and lends it back while idle, so a take or a give moves a
    /// pointer, not the 2-KiB struct.
    #[allow(clippy::vec_box)]
    sets: RefCell<Vec<Box<Buffers>>>,
    /// Empty buffers for connections that close after a keepalive wait.
    #[allow(clippy::vec_box)]
    husks: RefCell<Vec<Box<Buffers>>>,
    /// The fewest sets the list held since the last [`Spares::trim`]: that many went unused all that time.
    low: Cell<usize>,
    /// Likewise for the husks.
    husks_low: Cell<usize>,
    /// Bytes freed since the allocator's free pages last went back to the system, and the tick of that return.
    unreturned: Cell<usize>,
    returned_at: Cell<u64>,
}

/// What a [`Spares::trim`] freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Trimmed {
    pub sets: usize,
    pub husks: usize,
}

impl Spares {
    /// A set with a client buffer of `client_size` bytes: a spare one when there is one of that size.
    #[inline]
    pub(super) fn take(&self, client_size: usize) -> Box<Buffers> {
        let mut sets = self.sets.borrow_mut();
        while let Some(b) = sets.pop() {
            self.low.set(self.low.get().min(sets.len()));
            // a buffer sized for another config generation is dropped
            if b.client.capacity() == client_size {
                return b;
            }
        }
        Box::new(Buffers::new(client_size))
    }

    /// A husk (no heap of its own), recycled.
    #[inline]
    pub(super) fn take_husk(&self) -> Box<Buffers> {
        let mut husks = self.husks.borrow_mut();
        let husk = husks.pop();
        self.husks_low.set(self.husks_low.get().min(husks.len()));
        husk.unwrap_or_else(|| Box::new(Buffers::husk()))
    }

    /// Runs `read` on the client buffer of the set on top of the list (made if there is none, or if that one is
    /// sized for another generation), and takes the set only when bytes came into it.
    #[inline]
    pub(super) fn read_into_top(
        &self,
        client_size: usize,
        read: impl FnOnce(&mut [u8]) -> Poll<std::io::Result<usize>>,
    ) -> Poll<Option<Box<Buffers>>> {
        let mut sets = self.sets.borrow_mut();
        if sets.last().is_none_or(|b| b.client.capacity() != client_size) {
            sets.pop();
            sets.push(Box::new(Buffers::new(client_size)));
        }
        let Some(top) = sets.last_mut() else {
            return Poll::Ready(None);
        };
        match read(top.client.spare()) {
            Poll::Ready(Ok(n)) if n > 0 => {
                top.client.commit(n);
                let set = sets.pop();
                self.low.set(self.low.get().min(sets.len()));
                Poll::Ready(set)
            }
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Keeps `b` (a set, or a husk), or frees it when the list is full.
    #[inline]
    pub(super) fn give(&self, mut b: Box<Buffers>) {
        if b.limited {
            b.end_limits();
        }
        if b.client.capacity() == 0 {
            let mut husks = self.husks.borrow_mut();
            if husks.len() < SPARE_BUFFERS {
                husks.push(b);
            }
            return;
        }
        let mut sets = self.sets.borrow_mut();
        if sets.len() < SPARE_BUFFERS {
            b.client.consume(usize::MAX);
            b.upstream.consume(usize::MAX);
            sets.push(b);
        }
    }

    /// Frees the sets and husks that stayed unused since the last trim (all but [`RESERVE`] sets): what the
    /// busiest moment needed is given back once it has passed, and a steady load keeps what it uses.
    pub(super) fn trim(&self) -> Trimmed {
        let mut sets = self.sets.borrow_mut();
        let free = self.low.get().min(sets.len()).saturating_sub(RESERVE);
        // the unused ones are at the bottom of the list (taken and given at its top)
        sets.drain(..free);
        self.low.set(sets.len());
        let mut husks = self.husks.borrow_mut();
        let free_husks = self.husks_low.get().min(husks.len());
        husks.drain(..free_husks);
        self.husks_low.set(husks.len());
        Trimmed {
            sets: free,
            husks: free_husks,
        }
    }

    /// Notes `bytes` freed on this thread at `tick`, and gives the allocator's free pages back to the system once
    /// enough was freed (glibc keeps a freed chunk's pages, and pages of the arena's middle, until `malloc_trim`).
    pub(super) fn freed(&self, bytes: usize, tick: u64) {
        let unreturned = self.unreturned.get() + bytes;
        if unreturned < RETURN_FROM || tick.saturating_sub(self.returned_at.get()) < RETURN_EVERY {
            self.unreturned.set(unreturned);
            return;
        }
        self.unreturned.set(0);
        self.returned_at.set(tick);
        return_free_pages();
    }

    /// The sets and husks kept now.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        (self.sets.borrow().len(), self.husks.borrow().len())
    }
}

/// How the process's allocator hands its free pages back, when it is not the system's (set once, by the binary).
static PAGE_RETURN: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets how the free pages of the process's allocator go back to the system (the binary's allocator is not glibc's:
/// `malloc_trim` would find nothing to trim). Before any shard starts.
pub fn set_page_return(f: fn()) {
    let _ = PAGE_RETURN.set(f);
}

/// Gives the allocator's free pages back to the system: the binary's way, else glibc's `malloc_trim` (which releases
/// the free pages of every arena, not only the top of the heap).
fn return_free_pages() {
    if let Some(f) = PAGE_RETURN.get() {
        return f();
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists (under its locks) and madvises free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peaks_sets_are_freed_once_it_has_passed_and_a_steady_loads_are_kept() {
        let spares = Spares::default();
        // a peak: 40 sets and 10 husks in use at once, then given back
        let peak: Vec<_> = (0..40).map(|_| spares.take(1024)).collect();
        let husks: Vec<_> = (0..10).map(|_| spares.take_husk()).collect();
        peak.into_iter().chain(husks).for_each(|b| spares.give(b));
        assert_eq!(spares.kept(), (40, 10));
        // the tick during the peak: the list was empty at its lowest, nothing is freed
        assert_eq!(spares.trim(), Trimmed::default());
        // a steady load of 6 at once until the next tick
        for _ in 0..3 {
            let busy: Vec<_> = (0..6).map(|_| spares.take(1024)).collect();
            busy.into_iter().for_each(|b| spares.give(b));
        }
        // the 34 sets it never reached are freed but the reserve; the husks no one took likewise
        assert_eq!(spares.trim(), Trimmed { sets: 30, husks: 10 });
        assert_eq!(spares.kept(), (10, 0));
        // the steady load goes on: what it uses stays
        let busy: Vec<_> = (0..6).map(|_| spares.take(1024)).collect();
        busy.into_iter().for_each(|b| spares.give(b));
        assert_eq!(spares.trim(), Trimmed { sets: 0, husks: 0 });
        // a quiet shard keeps its reserve
        assert_eq!(spares.trim(), Trimmed { sets: 6, husks: 0 });
        assert_eq!(spares.kept(), (4, 0));
        assert_eq!(spares.trim(), Trimmed::default());
    }

    #[test]
    fn an_idle_reads_set_counts_as_taken() {
        let spares = Spares::default();
        spares.give(Box::new(Buffers::new(1024)));
        spares.give(Box::new(Buffers::new(1024)));
        spares.trim();
        let got = spares.read_into_top(1024, |buf| {
            buf[0] = b'G';
            Poll::Ready(Ok(1))
        });
        let Poll::Ready(Some(set)) = got else {
            panic!("no set taken");
        };
        assert_eq!(set.client.readable(), b"G");
        // one set was in use at the lowest: the other one stays (within the reserve anyway)
        assert_eq!(spares.trim(), Trimmed::default());
        assert_eq!(spares.kept(), (1, 0));
    }
}
