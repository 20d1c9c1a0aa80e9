//! How late the open-loop pacer wakes a connection, per runtime: the figure the unit tests do not assert (a loaded
//! machine can make any wake-up late). Prints p50 / p99 / p99.9 / max lateness against the schedule (as the
//! corrected histogram counts it) for one waiter sending every 50 µs, 500 µs and 5 ms, and for 16 waiters on
//! open-loop schedules (20,000 sends/s in all).
//! Run: `cargo bench -p corelb-loadgen --bench pacer` (glommio is skipped where io_uring or locked memory is missing).

use corelb_engine::preflight::{ensure_memlock, probe_io_uring};
use corelb_engine::runtime::glommio_rt::{Glommio, IO_MEMORY};
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_loadgen::net::ClientRuntime;
use corelb_loadgen::pacer::Pacer;
use corelb_loadgen::stats::{micros, new_histogram};
use hdrhistogram::Histogram;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One scenario: `waiters` connections, each on a fixed schedule of one send every `interval` (a late send does not
/// move the schedule), until `sends` sends have been paced in all.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    waiters: usize,
    interval: Duration,
    sends: usize,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "1 waiter, every 50us",
        waiters: 1,
        interval: Duration::from_micros(50),
        sends: 5_000,
    },
    Scenario {
        name: "1 waiter, every 500us",
        waiters: 1,
        interval: Duration::from_micros(500),
        sends: 2_000,
    },
    Scenario {
        name: "1 waiter, every 5ms",
        waiters: 1,
        interval: Duration::from_millis(5),
        sends: 200,
    },
    Scenario {
        name: "16 waiters, 20k/s",
        waiters: 16,
        interval: Duration::from_micros(800),
        sends: 20_000,
    },
];

/// Runs `s` on this thread's executor; the lateness of every send, in microseconds.
async fn paced<R: ClientRuntime>(s: Scenario) -> Histogram<u64> {
    let pacer = Rc::new(Pacer::new());
    let lateness = Rc::new(RefCell::new(new_histogram()));
    let start = Instant::now();
    let p = pacer.clone();
    R::spawn(async move { p.run::<R>(start + Duration::from_secs(600)).await });
    let per_waiter = s.sends / s.waiters;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    for k in 0..s.waiters {
        let (pacer, lateness, done) = (pacer.clone(), lateness.clone(), done_tx.clone());
        // Spread over the first interval as the bench's connections are.
        let mut at = start + s.interval + s.interval.mul_f64(k as f64 / s.waiters as f64);
        R::spawn(async move {
            for _ in 0..per_waiter {
                pacer.until(at).await;
                let late = Instant::now().saturating_duration_since(at);
                lateness.borrow_mut().saturating_record(micros(late).max(1));
                at += s.interval;
            }
            drop(done);
        });
    }
    drop(done_tx);
    while done_rx.try_recv() != Err(mpsc::TryRecvError::Disconnected) {
        R::sleep(Duration::from_millis(10)).await;
    }
    pacer.stop();
    let h = lateness.borrow().clone();
    h
}

fn run<R: ClientRuntime>() {
    for s in SCENARIOS {
        let (tx, rx) = mpsc::channel();
        let thread = R::start_thread(format!("pacer-{}", R::NAME), None, move || async move {
            let _ = tx.send(paced::<R>(s).await);
        })
        .expect("start the executor thread");
        let h = rx.recv().expect("the scenario's results");
        let _ = thread.join();
        println!(
            "pacer lateness, {:8} {:24} p50 {:>6} us  p99 {:>6} us  p99.9 {:>6} us  max {:>6} us  ({} sends)",
            R::NAME,
            s.name,
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.max(),
            h.len()
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it as a quick check only.
    if !std::env::args().any(|a| a == "--bench") {
        println!("pacer: run with `cargo bench -p corelb-loadgen --bench pacer`");
        return;
    }
    run::<Tokio>();
    match probe_io_uring().and_then(|()| ensure_memlock(2 * IO_MEMORY as u64, 1)) {
        Ok(()) => run::<Glommio>(),
        Err(e) => println!("pacer lateness, glommio skipped: {e}"),
    }
}
