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
    //! What the pacer guarantees, checked without timing bounds: waiters are released in the order of their send
    //! times (ties in the order they registered), never before their time, and a waiter whose time has passed goes
    //! at once, so a connection that fell behind catches up slot by slot (what coordinated-omission correction
    //! counts from). How late a wake-up is on a given machine is a figure for `benches/pacer.rs`, not a test.
    use super::*;
    use corelb_engine::runtime::tokio_rt::Tokio;
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};
    use std::task::Wake;

    /// A waker that appends its id to a shared log when woken.
    struct Logged {
        id: usize,
        log: Arc<Mutex<Vec<usize>>>,
    }

    impl Wake for Logged {
        fn wake(self: Arc<Self>) {
            self.log.lock().unwrap().push(self.id);
        }
    }

    fn logged(id: usize, log: &Arc<Mutex<Vec<usize>>>) -> Waker {
        Waker::from(Arc::new(Logged { id, log: log.clone() }))
    }

    fn woken(log: &Arc<Mutex<Vec<usize>>>) -> Vec<usize> {
        std::mem::take(&mut *log.lock().unwrap())
    }

    #[test]
    fn releases_due_waiters_in_the_order_of_their_times() {
        let pacer = Pacer::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Registered out of order; ids 2 and 5 share a time.
        for (id, ms) in [30, 5, 20, 2, 12, 20].into_iter().enumerate() {
            pacer.register(at(ms), logged(id, &log));
        }
        assert_eq!(pacer.wake_due(at(1)), Some(at(2)), "nobody is due yet");
        assert_eq!(woken(&log), Vec::<usize>::new());
        assert_eq!(pacer.wake_due(at(2)), Some(at(5)), "due at its exact time");
        assert_eq!(woken(&log), vec![3]);
        assert_eq!(pacer.wake_due(at(20)), Some(at(30)));
        assert_eq!(woken(&log), vec![1, 4, 2, 5], "by time, then by registration");
        assert_eq!(pacer.wake_due(at(20)), Some(at(30)), "nobody is woken twice");
        assert_eq!(woken(&log), Vec::<usize>::new());
        assert_eq!(pacer.wake_due(at(60)), None);
        assert_eq!(woken(&log), vec![0]);
    }

    #[test]
    fn only_a_new_earliest_waiter_wakes_the_sleeping_pacer() {
        let pacer = Pacer::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        const SLEEPER: usize = 100;
        let sleep = |pacer: &Pacer| pacer.inner.borrow_mut().sleeper = Some(logged(SLEEPER, &log));
        // The pacer sleeps towards the end of the run while nobody waits: the first waiter is the earliest.
        sleep(&pacer);
        pacer.register(at(10), logged(0, &log));
        assert_eq!(woken(&log), vec![SLEEPER]);
        assert!(pacer.inner.borrow().sleeper.is_none());
        // Sleeping towards 10 ms: a later or an equal time does not change the target, an earlier one does.
        sleep(&pacer);
        pacer.register(at(20), logged(1, &log));
        pacer.register(at(10), logged(2, &log));
        assert_eq!(woken(&log), Vec::<usize>::new());
        pacer.register(at(4), logged(3, &log));
        assert_eq!(woken(&log), vec![SLEEPER]);
        assert_eq!(pacer.wake_due(at(30)), None);
        assert_eq!(woken(&log), vec![3, 0, 2, 1]);
    }

    #[test]
    fn a_waiter_behind_schedule_goes_at_once_and_none_goes_early() {
        let pacer = Pacer::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let waker = logged(0, &log);
        let mut cx = Context::from_waker(&waker);
        // A connection 10 slots of 1 ms behind: every slot that has passed completes on its first poll, without
        // waiting for the pacer, so none is skipped and each is counted from its own slot.
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(10));
        for k in 0..10 {
            let mut until = pacer.until(t0 + Duration::from_millis(k));
            assert_eq!(Pin::new(&mut until).poll(&mut cx), Poll::Ready(()), "slot {k}");
            assert!(!until.registered, "slot {k}");
        }
        assert!(pacer.inner.borrow().waiting.is_empty());
        // A slot an hour ahead waits, registered once however often it is polled, until the pacer releases it.
        let mut ahead = pacer.until(Instant::now() + Duration::from_secs(3600));
        for _ in 0..3 {
            assert_eq!(Pin::new(&mut ahead).poll(&mut cx), Poll::Pending);
        }
        assert_eq!(pacer.inner.borrow().waiting.len(), 1);
        assert_eq!(woken(&log), Vec::<usize>::new());
        assert_eq!(pacer.wake_due(Instant::now()), Some(ahead.at), "not due: kept");
        assert_eq!(Pin::new(&mut ahead).poll(&mut cx), Poll::Pending, "never early");
        pacer.stop();
        assert_eq!(woken(&log), vec![0], "a stop releases it");
        assert_eq!(Pin::new(&mut ahead).poll(&mut cx), Poll::Ready(()));
    }

    #[test]
    fn the_pacer_task_wakes_waiters_in_order_and_never_early() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let (woke, order) = local.block_on(&rt, async {
            let pacer = Rc::new(Pacer::new());
            // The run ends in a minute: every waiter below must be released by the pacer's schedule, not by the
            // end of the run.
            let p = pacer.clone();
            let run =
                tokio::task::spawn_local(async move { p.run::<Tokio>(Instant::now() + Duration::from_secs(60)).await });
            // Wait until the pacer sleeps towards the end, so that the first waiter has to wake it.
            while pacer.inner.borrow().sleeper.is_none() {
                tokio::task::yield_now().await;
            }
            let order = Rc::new(RefCell::new(Vec::new()));
            let base = Instant::now() + Duration::from_millis(100);
            let mut tasks = Vec::new();
            for (id, ms) in [30u64, 5, 20, 2, 12, 20].into_iter().enumerate() {
                let (p, order) = (pacer.clone(), order.clone());
                let at = base + Duration::from_micros(ms * 1000 + 300);
                tasks.push(tokio::task::spawn_local(async move {
                    let mut until = p.until(at);
                    (&mut until).await;
                    let when = Instant::now();
                    order.borrow_mut().push(id);
                    (id, at, when, until.registered)
                }));
            }
            let mut woke = Vec::new();
            for t in tasks {
                woke.push(t.await.unwrap());
            }
            let stopped_early = pacer.is_stopped();
            pacer.stop();
            run.await.unwrap();
            assert!(
                !stopped_early,
                "every waiter was released by the schedule, not by the end of the run"
            );
            let order = order.borrow().clone();
            (woke, order)
        });
        for &(id, at, when, _) in &woke {
            assert!(when >= at, "waiter {id} released {:?} early", at - when);
        }
        // The pacer releases in the order of the times; a waiter only goes by itself (unregistered) if its time had
        // already passed when it was first polled, which only a stall of 100 ms before that poll can cause.
        let registered: Vec<_> = woke.iter().filter(|w| w.3).collect();
        let mut by_time: Vec<(Instant, usize)> = registered.iter().map(|w| (w.1, w.0)).collect();
        by_time.sort();
        let expected: Vec<usize> = by_time.into_iter().map(|(_, id)| id).collect();
        let released: Vec<usize> = order
            .into_iter()
            .filter(|id| registered.iter().any(|w| w.0 == *id))
            .collect();
        assert_eq!(
            released, expected,
            "released in the order of their times, ties in registration order"
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
