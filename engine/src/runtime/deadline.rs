//! Coarse deadlines for long I/O timeouts: a per-thread table of (deadline, waker) checked by a ticker every
//! [`TICK`], so a timeout of seconds (`keepalive_timeout`, `proxy_read_timeout`, ...) costs a table slot per wait
//! instead of a runtime timer (tokio's wheel, glommio's timer map and io_uring timeout). It fires up to one tick
//! late, as nginx's own timers do with its cached clock.

use super::Runtime;
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often expired deadlines are woken.
pub const TICK: Duration = Duration::from_millis(50);

/// Timeouts at least this long use a coarse deadline; shorter ones use the runtime's timer.
pub const COARSE_FROM: Duration = Duration::from_millis(500);

/// One thread's waiting deadlines; a slot is reused once its deadline is gone.
#[derive(Default)]
struct Table {
    slots: Vec<Option<(Instant, Waker)>>,
    free: Vec<u32>,
    waiting: usize,
    ticking: bool,
}

impl Table {
    /// The new slot's index (u32: a deadline is small, and waits fewer than 4G of them).
    fn insert(&mut self, at: Instant, waker: Waker) -> u32 {
        self.waiting += 1;
        match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.slots.get_mut(i as usize) {
                    *slot = Some((at, waker));
                }
                i
            }
            None => {
                self.slots.push(Some((at, waker)));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        }
    }

    fn remove(&mut self, i: u32) {
        if let Some(slot) = self.slots.get_mut(i as usize) {
            if slot.take().is_some() {
                self.waiting -= 1;
                self.free.push(i);
            }
        }
    }

    /// Wakes every deadline that has passed (its future removes its slot when polled or dropped).
    fn wake_expired(&mut self, now: Instant) {
        for (at, waker) in self.slots.iter().flatten() {
            if *at <= now {
                waker.wake_by_ref();
            }
        }
    }
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// Wakes every deadline of this thread, passed or not (a graceful stop: the waits that look at it then end).
pub fn wake_all() {
    TABLE.with(|t| {
        for (_, waker) in t.borrow().slots.iter().flatten() {
            waker.wake_by_ref();
        }
    });
}

/// Completes at (or up to one [`TICK`] after) a deadline, never on its first poll: it is meant for timeouts far
/// longer than a tick.
pub struct Deadline<R: Runtime> {
    at: Instant,
    slot: Option<u32>,
    runtime: PhantomData<fn() -> R>,
    /// `!Send`: the slot index is only meaningful in this thread's table.
    thread: PhantomData<*const ()>,
}

impl<R: Runtime> Deadline<R> {
    /// A deadline `d` from now.
    pub fn after(d: Duration) -> Self {
        Self::until(crate::clock::instant() + d)
    }

    /// A deadline at `at`.
    pub fn until(at: Instant) -> Self {
        Deadline {
            at,
            slot: None,
            runtime: PhantomData,
            thread: PhantomData,
        }
    }

    /// When it is due.
    pub fn at(&self) -> Instant {
        self.at
    }
}

impl<R: Runtime> Future for Deadline<R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The first poll comes right after `after` (a clock read saved); later ones come from the ticker or from
        // the raced future's wake-ups.
        if self.slot.is_some() && crate::clock::instant() >= self.at {
            if let Some(i) = self.slot.take() {
                TABLE.with(|t| t.borrow_mut().remove(i));
            }
            return Poll::Ready(());
        }
        let at = self.at;
        let slot = self.slot;
        let (new_slot, start_ticker) = TABLE.with(|t| {
            let mut t = t.borrow_mut();
            let i = match slot.and_then(|i| t.slots.get_mut(i as usize)) {
                Some(Some((_, w))) => {
                    w.clone_from(cx.waker());
                    slot
                }
                _ => Some(t.insert(at, cx.waker().clone())),
            };
            let start = !t.ticking;
            t.ticking = true;
            (i, start)
        });
        self.slot = new_slot;
        if start_ticker {
            R::spawn(tick::<R>());
        }
        Poll::Pending
    }
}

impl<R: Runtime> Drop for Deadline<R> {
    fn drop(&mut self) {
        if let Some(i) = self.slot.take() {
            // `try_with`: a deadline dropped while the thread's locals are torn down has nothing left to clean.
            let _ = TABLE.try_with(|t| t.borrow_mut().remove(i));
        }
    }
}

/// The thread's ticker: wakes expired deadlines every tick while any deadline waits, then ends.
async fn tick<R: Runtime>() {
    loop {
        R::sleep(TICK).await;
        let done = TABLE.with(|t| {
            let mut t = t.borrow_mut();
            t.wake_expired(crate::clock::instant());
            if t.waiting == 0 {
                t.ticking = false;
            }
            !t.ticking
        });
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::tokio_rt::Tokio;

    fn on_tokio(f: impl Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f);
    }

    #[test]
    fn fires_no_earlier_than_asked_and_within_a_tick() {
        on_tokio(async {
            let start = Instant::now();
            Deadline::<Tokio>::after(Duration::from_millis(120)).await;
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(120), "{took:?}");
            assert!(took < Duration::from_millis(120) + 4 * TICK, "{took:?}");
        });
    }

    #[test]
    fn dropped_deadlines_free_their_slots_and_the_ticker_stops() {
        on_tokio(async {
            for _ in 0..3 {
                let d = Deadline::<Tokio>::after(Duration::from_secs(60));
                let lost = futures_lite::future::or(
                    async {
                        d.await;
                        false
                    },
                    async { true },
                )
                .await;
                assert!(lost);
            }
            let waiting = TABLE.with(|t| t.borrow().waiting);
            assert_eq!(waiting, 0);
            Deadline::<Tokio>::after(Duration::from_millis(10)).await;
            tokio::time::sleep(3 * TICK).await;
            TABLE.with(|t| {
                let t = t.borrow();
                assert_eq!((t.waiting, t.ticking), (0, false));
                assert!(t.slots.len() <= 2, "slots are reused: {}", t.slots.len());
            });
        });
    }
}
