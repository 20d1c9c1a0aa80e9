//! The block a client connection's burst of requests runs in: a future built in place in a block taken from the
//! thread's free list of blocks of its layout and given back when the burst ends, so that a connection waiting idle
//! keeps none of a request's state (an async fn's future is always as large as its largest state) and a burst costs
//! no `malloc`, no `free` and no copy of the future. Blocks a peak left unused are freed on the shard's tick
//! ([`trim`]).

use std::alloc::Layout;
use std::cell::RefCell;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Free blocks a thread keeps (as many as a shard keeps spare buffer sets): the most bursts that ran at once, up to
/// this, and no more (the tick's [`trim`] frees what a peak left unused).
const KEPT: usize = 4096;
/// Free blocks a thread keeps however long they stay unused.
const RESERVE: usize = 4;

/// One thread's free blocks, all of `layout` (the first layout given back; a block of another one is freed).
struct Blocks {
    layout: Option<Layout>,
    free: Vec<NonNull<u8>>,
    /// The fewest free blocks since the last [`trim`]: that many went unused all that time.
    low: usize,
}

impl Drop for Blocks {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            for block in self.free.drain(..) {
                // SAFETY: each block was allocated with `layout` (only blocks of it are kept) and is not in use.
                unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static BLOCKS: RefCell<Blocks> = const {
        RefCell::new(Blocks {
            layout: None,
            free: Vec::new(),
            low: 0,
        })
    };
}

/// A block for `layout` (not zero-sized): a kept one when there is one.
fn take(layout: Layout) -> NonNull<u8> {
    let kept = BLOCKS.with(|b| {
        let mut b = b.borrow_mut();
        match b.layout == Some(layout) {
            true => {
                let block = b.free.pop();
                b.low = b.low.min(b.free.len());
                block
            }
            false => None,
        }
    });
    kept.unwrap_or_else(|| {
        // SAFETY: `layout` is not zero-sized (checked by the caller).
        let block = unsafe { std::alloc::alloc(layout) };
        NonNull::new(block).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
    })
}

/// Keeps `block` (of `layout`, no longer in use) for the next burst, or frees it.
fn give(block: NonNull<u8>, layout: Layout) {
    let kept = BLOCKS
        .try_with(|b| {
            let mut b = b.borrow_mut();
            let layout_kept = *b.layout.get_or_insert(layout);
            if layout_kept == layout && b.free.len() < KEPT {
                b.free.push(block);
                return true;
            }
            false
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: `block` was allocated with `layout` and is no longer in use.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
    }
}

/// Frees this thread's blocks that stayed unused since the last call (all but [`RESERVE`]), so that the blocks of a
/// peak's bursts go back once it has passed; called on the shard's tick, never per request. The bytes freed.
pub(crate) fn trim() -> usize {
    BLOCKS
        .try_with(|b| {
            let mut b = b.borrow_mut();
            let Some(layout) = b.layout else {
                return 0;
            };
            let free = b.low.min(b.free.len()).saturating_sub(RESERVE);
            // the unused ones are at the bottom (taken and given at the top)
            for block in b.free.drain(..free) {
                // SAFETY: each kept block was allocated with `layout` and is not in use.
                unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
            }
            b.low = b.free.len();
            free * layout.size()
        })
        .unwrap_or(0)
}

/// A future running in a block of the thread's free list; the block goes back when it is dropped.
pub(super) struct Burst<F: Future> {
    fut: NonNull<F>,
}

impl<F: Future> Burst<F> {
    /// The future `make` builds, built in a block: taken first, then written by [`build`] (so that the ~10 KiB
    /// future is written there, not built on the stack and copied).
    #[inline(always)]
    pub(super) fn new(make: impl FnOnce() -> F) -> Self {
        let layout = Layout::new::<F>();
        let block = match layout.size() {
            0 => NonNull::<F>::dangling(),
            _ => take(layout).cast::<F>(),
        };
        // SAFETY: the block is valid for writes of an `F` and aligned for it (allocated or kept with its layout), and
        // no one else uses it.
        build(unsafe { &mut *block.cast::<MaybeUninit<F>>().as_ptr() }, make);
        Burst { fut: block }
    }
}

/// Writes what `make` returns into `dest`: out of line, so that `dest` is a reference the optimizer knows to be
/// valid and unaliased, and the future is written in place (its few fields, or by `make`'s own call).
#[inline(never)]
fn build<F>(dest: &mut MaybeUninit<F>, make: impl FnOnce() -> F) {
    dest.write(make());
}

impl<F: Future> Future for Burst<F> {
    type Output = F::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the future lives in its block, which does not move, until it is dropped in place by `drop`.
        unsafe { Pin::new_unchecked(&mut *self.fut.as_ptr()) }.poll(cx)
    }
}

impl<F: Future> Drop for Burst<F> {
    fn drop(&mut self) {
        let layout = Layout::new::<F>();
        // SAFETY: the block holds a live `F`, dropped once here; it is not used after.
        unsafe { std::ptr::drop_in_place(self.fut.as_ptr()) };
        if layout.size() != 0 {
            give(self.fut.cast(), layout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// A future that ends on its second poll, noting when it is dropped.
    struct TwoPolls {
        polled: bool,
        dropped: Rc<std::cell::Cell<u32>>,
        _pad: [u64; 64],
    }

    impl Future for TwoPolls {
        type Output = u32;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            if self.polled {
                return Poll::Ready(7);
            }
            self.polled = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    impl Drop for TwoPolls {
        fn drop(&mut self) {
            self.dropped.set(self.dropped.get() + 1);
        }
    }

    #[test]
    fn a_burst_runs_in_a_kept_block_and_gives_it_back() {
        let dropped = Rc::new(std::cell::Cell::new(0));
        let make = || TwoPolls {
            polled: false,
            dropped: Rc::clone(&dropped),
            _pad: [0; 64],
        };
        let first = Burst::new(make);
        let first_at = first.fut.as_ptr() as usize;
        assert_eq!(futures_lite::future::block_on(first), 7);
        assert_eq!(dropped.get(), 1, "the future is dropped with its burst");
        // the next burst of that layout takes the same block, a concurrent one another
        let second = Burst::new(make);
        assert_eq!(second.fut.as_ptr() as usize, first_at);
        let third = Burst::new(make);
        assert_ne!(third.fut.as_ptr() as usize, first_at);
        drop(second);
        drop(third);
        assert_eq!(dropped.get(), 3, "a burst dropped unfinished drops its future");
        let kept = BLOCKS.with(|b| b.borrow().free.len());
        assert_eq!(kept, 2);
    }

    #[test]
    fn a_peaks_blocks_are_freed_once_it_has_passed() {
        let dropped = Rc::new(std::cell::Cell::new(0));
        let make = || TwoPolls {
            polled: false,
            dropped: Rc::clone(&dropped),
            _pad: [0; 64],
        };
        let size = Layout::new::<TwoPolls>().size();
        let peak: Vec<_> = (0..20).map(|_| Burst::new(make)).collect();
        drop(peak);
        // the tick during the peak frees nothing; the next one all but the reserve
        assert_eq!(trim(), 0);
        let steady = Burst::new(make);
        drop(steady);
        assert_eq!(trim(), (20 - 1 - RESERVE) * size);
        assert_eq!(BLOCKS.with(|b| b.borrow().free.len()), RESERVE + 1);
        assert_eq!(trim(), size);
        assert_eq!(trim(), 0);
    }
}
