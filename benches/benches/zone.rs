//! Zone micro-benchmarks: one `conns` take and give (`PeerSlot::try_acquire` and the guard's drop) on a single
//! slot, uncontended and with two threads hammering the same slot, for the unlimited (`fetch_add`) and the
//! `max_conns` (compare-and-swap) paths.

use corelb_shared_state::PeerSlot;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Takes and gives one unit `iters` times; returns how long it took.
fn take_give(slot: &PeerSlot, max_conns: u32, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(slot.try_acquire(max_conns));
    }
    start.elapsed()
}

/// `threads` threads each take and give `iters` times on one shared slot; the slowest thread's time is the
/// result, so a figure is the cost of one take/give while the others contend.
fn contended(threads: usize, max_conns: u32, iters: u64) -> Duration {
    let slot = Arc::new(PeerSlot::new());
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (slot, barrier) = (slot.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                take_give(&slot, max_conns, iters)
            })
        })
        .collect();
    let times = handles.into_iter().map(|h| h.join().unwrap_or_default());
    assert_eq!(slot.conns(), 0, "every unit was given back");
    times.max().unwrap_or_default()
}

fn conns(c: &mut Criterion) {
    for (path, max_conns) in [("unlimited", 0u32), ("max_conns", 64)] {
        let mut group = c.benchmark_group(format!("zone_conns/{path}"));
        for threads in [1usize, 2] {
            group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &threads| {
                b.iter_custom(|iters| contended(threads, max_conns, iters))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, conns);
criterion_main!(benches);
