//! Metrics micro-benchmarks: the cost the data plane pays per response for the latency histogram
//! (`PeerSlot::record_response_time`, next to the one-add `count_response` it sits beside), uncontended and with
//! two threads recording on one peer as two shards would; and the cost of one scrape's encoding.

use corelb_engine::admin::metrics::read::{PeerReading, PeerState, Reading};
use corelb_engine::admin::metrics::render;
use corelb_engine::control::ControlStats;
use corelb_shared_state::{PeerSlot, ShardStats};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// What one thread does per iteration.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// `count_response`: one relaxed add (the baseline already on the hot path).
    CountResponse,
    /// `record_response_time`: bucket search and two relaxed adds on the shard's stripe.
    RecordTime,
}

fn run(slot: &PeerSlot, shard: usize, op: Op, iters: u64) -> Duration {
    let start = Instant::now();
    for i in 0..iters {
        match op {
            Op::CountResponse => slot.count_response(black_box(200)),
            // Times spread over the buckets, as real ones are.
            Op::RecordTime => slot.record_response_time(shard, Duration::from_micros(black_box(i % 4096) * 61)),
        }
    }
    start.elapsed()
}

/// `threads` threads, as shards 0.., on one shared slot; the slowest thread's time.
fn contended(threads: usize, op: Op, iters: u64) -> Duration {
    let slot = Arc::new(PeerSlot::new());
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|shard| {
            let (slot, barrier) = (slot.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                run(&slot, shard, op, iters)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap_or_default())
        .max()
        .unwrap_or_default()
}

fn record(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics_record");
    for (name, op) in [
        ("count_response", Op::CountResponse),
        ("record_response_time", Op::RecordTime),
    ] {
        for threads in [1usize, 2] {
            group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
                b.iter_custom(|iters| contended(threads, op, iters))
            });
        }
    }
    group.finish();
}

/// A reading of `peers` http peers on 2 shards, each with some traffic.
fn reading(peers: usize) -> Reading {
    let slot = PeerSlot::new();
    for i in 0..1000u64 {
        slot.count_request();
        slot.count_response(200 + (i % 4) as u16 * 100);
        slot.record_response_time(0, Duration::from_micros(i * 37));
    }
    let peer = |i: usize| PeerReading {
        upstream: format!("u{}", i / 10),
        peer: format!("10.0.{}.{}:8080", i / 256, i % 256),
        server: format!("backend{i}.example:8080"),
        backup: false,
        state: PeerState::Up,
        weight: 1,
        weight_source: corelb_engine::balance::WeightSource::Config,
        stats: slot.stats(),
        latency: slot.latency().snapshot(),
    };
    Reading {
        control: ControlStats {
            generation: 1,
            reloads: 0,
            reload_failures: 0,
            api_changes: 0,
            agent_changes: 0,
            resolve_changes: 0,
            started_at: 1_700_000_000,
            loaded_at_ms: 1_700_000_000_000,
        },
        shards: vec![ShardStats::default(); 2],
        http: (0..peers).map(peer).collect(),
        stream: Vec::new(),
        resolvers: Vec::new(),
        names: Vec::new(),
        xdp: Vec::new(),
    }
}

fn scrape(c: &mut Criterion) {
    let mut group = c.benchmark_group("metrics_scrape_encode");
    for peers in [10usize, 100] {
        let r = reading(peers);
        group.bench_with_input(BenchmarkId::new("peers", peers), &r, |b, r| {
            b.iter(|| black_box(render(r.clone()).map(|t| t.len())))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = record, scrape
}
criterion_main!(benches);
