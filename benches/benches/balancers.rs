//! Balancer micro-benchmarks: one request (start, pick, report) per method and upstream size, and the consistent
//! hash ring build.

use corelb_benches::{keys, methods, plan, servers, NOW};
use corelb_engine::balance::consistent_hash::ConsistentHash;
use corelb_engine::balance::maglev::Maglev;
use corelb_engine::balance::{Attempt, Outcome, ShardState};
use corelb_engine::config::model::Method;
use corelb_shared_state::TimeMetric;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

fn picks(c: &mut Criterion) {
    for (name, method) in methods() {
        let mut group = c.benchmark_group(format!("pick/{name}"));
        for n in [3, 10, 100, 1000] {
            let plan = plan(method.clone(), servers(n, 0));
            let mut shard = ShardState::seeded(&plan, 1);
            measured(&plan);
            let keys = keys(&method, 1024);
            let mut k = 0;
            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                b.iter(|| {
                    k = (k + 1) % keys.len();
                    let key = keys.get(k).map_or(&[][..], |v| v.as_slice());
                    let mut attempt = Attempt::new(&plan, 0, key);
                    let picked = attempt.pick(&mut shard, key, NOW).map(|p| p.addr);
                    attempt.report(Outcome::Success, &mut shard, NOW);
                    black_box(picked)
                })
            });
        }
        group.finish();
    }
}

/// Gives every peer a latency history (1..50 ms), so the time-measuring methods compare real averages.
fn measured(plan: &corelb_engine::balance::UpstreamPlan) {
    for (i, p) in plan.primary.peers.iter().enumerate() {
        let ms = (i % 50 + 1) as u64;
        p.slot.times().record(TimeMetric::Header, ms);
        p.slot.ewma().observe(NOW * 1000, ms as f64);
        p.slot.note_selected(NOW, p.fail_timeout);
    }
}

fn ring_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_build");
    for weight in [1, 10] {
        for n in [10, 100, 1000] {
            let plan = plan(Method::RoundRobin, servers(n, weight));
            group.bench_with_input(BenchmarkId::new(format!("weight{weight}"), n), &n, |b, _| {
                b.iter(|| black_box(ConsistentHash::build(&plan.primary)).ring().len())
            });
        }
    }
    group.finish();
}

fn maglev_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("maglev_build");
    for n in [10, 100, 1000] {
        let plan = plan(Method::RoundRobin, servers(n, 1));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(Maglev::build(&plan.primary)).len())
        });
    }
    group.finish();
}

criterion_group!(benches, picks, ring_build, maglev_build);
criterion_main!(benches);
