//! gzip of a 100 KiB JSON response with corelb's encoder (`http::gzip::Encoder`, flate2), fed in the 32 KiB pieces
//! the body path reads: CPU per response at levels 1 and 6, and the ratio (printed once per level). Run with
//! `--features zlib-rs` for the zlib-rs backend; the default is miniz_oxide.

use corelb_engine::http::gzip::Encoder;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

/// A JSON array of records like an API's answer, 100 KiB, from a fixed seed.
fn json_100k() -> Vec<u8> {
    let mut out = b"[".to_vec();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    let mut i = 0u64;
    while out.len() < 100 * 1024 - 200 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let w = words[(seed % 8) as usize];
        let rec = format!(
            "{{\"id\":{i},\"name\":\"{w}-{}\",\"score\":{}.{},\"active\":{},\"tags\":[\"{}\",\"{w}\"],\
             \"updated\":\"2026-12-{:02}T{:02}:{:02}:00Z\"}},",
            seed % 10_000,
            seed % 100,
            (seed >> 8) % 1000,
            seed % 3 == 0,
            words[((seed >> 16) % 8) as usize],
            1 + (seed >> 20) % 28,
            (seed >> 24) % 24,
            (seed >> 28) % 60,
        );
        out.extend_from_slice(rec.as_bytes());
        i += 1;
    }
    out.pop();
    out.push(b']');
    out.resize(100 * 1024, b' ');
    out
}

fn compress(enc: &mut Encoder, body: &[u8], out: &mut Vec<u8>) {
    out.clear();
    enc.reset();
    for piece in body.chunks(32 * 1024) {
        enc.write(piece, out);
    }
    enc.finish(out);
}

fn gzip(c: &mut Criterion) {
    let body = json_100k();
    let backend = if cfg!(feature = "zlib-rs") {
        "zlib-rs"
    } else {
        "miniz_oxide"
    };
    let mut group = c.benchmark_group(format!("gzip_100k_json/{backend}"));
    group.throughput(Throughput::Bytes(body.len() as u64));
    for level in [1, 6] {
        let mut enc = Encoder::new(level);
        let mut out = Vec::with_capacity(64 * 1024);
        compress(&mut enc, &body, &mut out);
        println!(
            "{backend} level {level}: {} -> {} bytes, ratio {:.2}",
            body.len(),
            out.len(),
            body.len() as f64 / out.len() as f64
        );
        group.bench_function(format!("level_{level}"), |b| {
            b.iter(|| compress(&mut enc, black_box(&body), &mut out))
        });
    }
    group.finish();
}

criterion_group!(benches, gzip);
criterion_main!(benches);
