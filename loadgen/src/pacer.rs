//! A shard's pacer for the open loop: wakes each connection at its send time with microsecond precision. Runtime
//! timers may round up to their tick (tokio's is 1 ms), which would add up to a tick to every corrected sample, so
//! one pacer task per shard sleeps on the timer until within a tick of the earliest send time and then yields
//! until it is reached: at most one task spins, however many connections wait.

use super::net::ClientRuntime;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Inner {
    waiting: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// The pacer task, while it sleeps on the timer.
    sleeper: Option<Waker>,
    /// After [`Pacer::stop`], every wait completes at once.
    stopped: bool,
}

/// The pacer of one shard (shard-local, not `Send`).
#[derive(Default)]
pub struct Pacer {
    inner: RefCell<Inner>,
}

impl Pacer {
    /// A pacer with nobody waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Completes at `at` (at once when it has passed).
    pub fn until(&self, at: Instant) -> Until<'_> {
        Until {
            pacer: self,
            at,
            registered: false,
        }
    }

    /// Ends the pacing early: wakes the pacer task and every waiter; later waits complete at once.
    pub fn stop(&self) {
        let (sleeper, left) = {
            let mut inner = self.inner.borrow_mut();
            inner.stopped = true;
            (inner.sleeper.take(), std::mem::take(&mut inner.waiting))
        };
        if let Some(w) = sleeper {
            w.wake();
        }
        for Reverse(e) in left {
            e.waker.wake();
        }
    }

    fn is_stopped(&self) -> bool {
        self.inner.borrow().stopped
    }

    fn register(&self, at: Instant, waker: Waker) {
        let mut inner = self.inner.borrow_mut();
        let earliest = !matches!(inner.waiting.peek(), Some(Reverse(e)) if e.at <= at);
        inner.seq += 1;
        let seq = inner.seq;
        inner.waiting.push(Reverse(Entry { at, seq, waker }));
        if earliest {
            // The pacer may be sleeping towards a later time: it has to look again.
            if let Some(w) = inner.sleeper.take() {
                w.wake();
            }
        }
    }

    /// Wakes every waiter due by `now`; returns the earliest time still waited for.
    fn wake_due(&self, now: Instant) -> Option<Instant> {
        let mut inner = self.inner.borrow_mut();
        while let Some(Reverse(e)) = inner.waiting.peek() {
            if e.at > now {
                return Some(e.at);
            }
            if let Some(Reverse(e)) = inner.waiting.pop() {
                e.waker.wake();
            }
        }
        None
    }

    /// Completes when `d` has passed or an earlier waiter has registered.
    async fn sleep_or_earlier<R: ClientRuntime>(&self, d: Duration) {
        let mut armed = false;
        let woken = poll_fn(|cx| {
            if armed && self.inner.borrow().sleeper.is_none() {
                return Poll::Ready(());
            }
            armed = true;
            self.inner.borrow_mut().sleeper = Some(cx.waker().clone());
            Poll::Pending
        });
        futures_lite::future::or(R::pacer_sleep(d), woken).await;
        self.inner.borrow_mut().sleeper = None;
    }

    /// The pacer task: wakes waiters on time until `end`, then wakes everyone left and returns.
    pub async fn run<R: ClientRuntime>(&self, end: Instant) {
        loop {
            let now = Instant::now();
            if now >= end || self.is_stopped() {
                break;
            }
            let wait = match self.wake_due(now) {
                Some(next) => next - now,
                None => end - now,
            };
            if wait > R::TIMER_TICK {
                self.sleep_or_earlier::<R>(wait - R::TIMER_TICK).await;
            } else {
                futures_lite::future::yield_now().await;
            }
        }
        self.stop();
    }
}

/// The future of [`Pacer::until`].
pub struct Until<'p> {
    pacer: &'p Pacer,
    at: Instant,
    registered: bool,
}

impl Future for Until<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at || self.pacer.is_stopped() {
            return Poll::Ready(());
        }
        if !self.registered {
            self.registered = true;
            self.pacer.register(self.at, cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelb_engine::runtime::tokio_rt::Tokio;
    use std::rc::Rc;

    #[test]
    fn wakes_waiters_in_order_and_on_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let woke = local.block_on(&rt, async {
            let pacer = Rc::new(Pacer::new());
            let start = Instant::now();
            let end = start + Duration::from_millis(200);
            let p = pacer.clone();
            tokio::task::spawn_local(async move { p.run::<Tokio>(end).await });
            let mut tasks = Vec::new();
            // Registered out of order; a late registration earlier than the pacer's current target still counts.
            for ms in [30u64, 5, 20, 2, 12] {
                let p = pacer.clone();
                let at = start + Duration::from_micros(ms * 1000 + 300);
                tasks.push(tokio::task::spawn_local(async move {
                    p.until(at).await;
                    (at, Instant::now())
                }));
                tokio::time::sleep(Duration::from_micros(100)).await;
            }
            let mut woke = Vec::new();
            for t in tasks {
                woke.push(t.await.unwrap());
            }
            woke
        });
        for &(at, when) in &woke {
            assert!(when >= at, "never early");
            assert!(when - at < Duration::from_millis(20), "woke {:?} late", when - at);
        }
        let mut by_time = woke.clone();
        by_time.sort();
        assert!(
            by_time.windows(2).all(|w| w[0].1 <= w[1].1),
            "woken in the order of their times"
        );
    }

    #[test]
    fn stop_releases_waiters_and_the_pacer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let waited = local.block_on(&rt, async {
            let pacer = Rc::new(Pacer::new());
            let start = Instant::now();
            let p = pacer.clone();
            let run = tokio::task::spawn_local(async move { p.run::<Tokio>(start + Duration::from_secs(60)).await });
            let p = pacer.clone();
            let waiter = tokio::task::spawn_local(async move { p.until(start + Duration::from_secs(30)).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            pacer.stop();
            waiter.await.unwrap();
            run.await.unwrap();
            pacer.until(start + Duration::from_secs(30)).await;
            start.elapsed()
        });
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }
}
