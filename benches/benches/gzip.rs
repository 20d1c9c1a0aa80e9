//! gzip of a 100 KiB JSON response fed in the 32 KiB pieces the body path reads, at levels 1 and 6: corelb's
//! encoder (`http::gzip::Encoder`, flate2 on zlib-rs) beside miniz_oxide (flate2's other pure-Rust backend)
//! driven the same way. CPU per response from criterion; the ratio of each is printed once per level.

use corelb_engine::http::gzip::{header, Encoder};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
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
            seed.is_multiple_of(3),
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

fn zlib_rs(enc: &mut Encoder, body: &[u8], out: &mut Vec<u8>) {
    out.clear();
    enc.reset();
    for piece in body.chunks(32 * 1024) {
        enc.write(piece, out);
    }
    enc.finish(out);
}

/// The same stream with miniz_oxide's raw deflate, its header, CRC-32 and size around it.
fn miniz(c: &mut CompressorOxide, level: u8, body: &[u8], out: &mut Vec<u8>, room: &mut [u8]) {
    out.clear();
    c.reset();
    c.set_compression_level_raw(level);
    out.extend_from_slice(&header(u32::from(level)));
    let mut crc = crc32fast::Hasher::new();
    let pieces: Vec<&[u8]> = body.chunks(32 * 1024).collect();
    for (i, piece) in pieces.iter().enumerate() {
        crc.update(piece);
        let flush = if i + 1 == pieces.len() {
            TDEFLFlush::Finish
        } else {
            TDEFLFlush::None
        };
        let mut rest: &[u8] = piece;
        loop {
            let (status, used, made) = compress(c, rest, room, flush);
            out.extend_from_slice(&room[..made]);
            rest = &rest[used..];
            if status == TDEFLStatus::Done || (rest.is_empty() && flush == TDEFLFlush::None && made < room.len()) {
                break;
            }
            assert!(status == TDEFLStatus::Okay, "{status:?}");
        }
    }
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
}

fn gzip(c: &mut Criterion) {
    let body = json_100k();
    let mut group = c.benchmark_group("gzip_100k_json");
    group.throughput(Throughput::Bytes(body.len() as u64));
    let mut out = Vec::with_capacity(64 * 1024);
    let mut room = vec![0; 64 * 1024];
    for level in [1u8, 6] {
        let mut enc = Encoder::new(u32::from(level));
        zlib_rs(&mut enc, &body, &mut out);
        println!(
            "zlib-rs level {level}: {} -> {} bytes, ratio {:.2}",
            body.len(),
            out.len(),
            body.len() as f64 / out.len() as f64
        );
        group.bench_function(format!("zlib-rs/level_{level}"), |b| {
            b.iter(|| zlib_rs(&mut enc, black_box(&body), &mut out))
        });
        let mut m = CompressorOxide::new(create_comp_flags_from_zip_params(i32::from(level), -15, 0));
        miniz(&mut m, level, &body, &mut out, &mut room);
        println!(
            "miniz_oxide level {level}: {} -> {} bytes, ratio {:.2}",
            body.len(),
            out.len(),
            body.len() as f64 / out.len() as f64
        );
        group.bench_function(format!("miniz_oxide/level_{level}"), |b| {
            b.iter(|| miniz(&mut m, level, black_box(&body), &mut out, &mut room))
        });
    }
    group.finish();
}

criterion_group!(benches, gzip);
criterion_main!(benches);
