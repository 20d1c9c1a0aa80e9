//! A bounded, stable-Rust stand-in for the cargo-fuzz targets in `fuzz/`: the same five checks (config parser,
//! request head, chunked decoder, response head, PROXY protocol header) over the seed corpus in
//! `fuzz/corpus/<target>/` and over
//! seeded random mutations of it (byte flips, HTTP-significant bytes inserted, ranges deleted or repeated,
//! inputs spliced). A failure prints the input that broke the check.

#[path = "../../fuzz/src/checks.rs"]
mod checks;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Mutated inputs tried per target at most, and the time spent on one target at most.
const ROUNDS: usize = 20_000;
const BUDGET: Duration = Duration::from_secs(3);

/// Bytes and words that matter to the parsers.
const DICTIONARY: [&[u8]; 24] = [
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b";",
    b",",
    b"\0",
    b"\x0b",
    b"0",
    b"f",
    b"9",
    b"\"",
    b"{",
    b"}",
    b"chunked",
    b"Content-Length: ",
    b"Transfer-Encoding: ",
    b"HTTP/1.1",
    b"\r\n\r\n",
    b"ffffffffffffffff",
    b"upstream u { server 127.0.0.1:1; }",
    b"$",
];

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 5, "a seed corpus for {target}");
    seeds
}

fn mutate(rng: &mut SmallRng, seeds: &[Vec<u8>], input: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(1..=4) {
        let len = input.len();
        match rng.gen_range(0..6) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                input[i] ^= 1 << rng.gen_range(0..8);
            }
            1 => {
                let word = DICTIONARY[rng.gen_range(0..DICTIONARY.len())];
                let at = rng.gen_range(0..=len);
                input.splice(at..at, word.iter().copied());
            }
            2 if len > 0 => {
                let a = rng.gen_range(0..len);
                let b = rng.gen_range(a..=len.min(a + 32));
                input.drain(a..b);
            }
            3 if len > 0 => {
                let a = rng.gen_range(0..len);
                let b = rng.gen_range(a..=len.min(a + 64));
                let piece = input[a..b].to_vec();
                input.splice(b..b, piece.into_iter().cycle().take((b - a) * rng.gen_range(1..4)));
            }
            4 => {
                let other = &seeds[rng.gen_range(0..seeds.len())];
                let cut = rng.gen_range(0..=len);
                let from = rng.gen_range(0..=other.len());
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            _ if len > 0 => {
                let i = rng.gen_range(0..len);
                input[i] = rng.gen();
            }
            _ => input.push(rng.gen()),
        }
    }
    input.truncate(20_000);
}

/// Runs `check` over the corpus and its mutations; returns how many inputs were run.
fn run(target: &str, seed: u64, check: fn(&[u8])) -> usize {
    let seeds = corpus(target);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut runs = 0;
    let start = Instant::now();
    let mut input = Vec::new();
    for i in 0..seeds.len() + ROUNDS {
        if i < seeds.len() {
            input.clone_from(&seeds[i]);
        } else {
            if start.elapsed() > BUDGET {
                break;
            }
            input.clone_from(&seeds[rng.gen_range(0..seeds.len())]);
            mutate(&mut rng, &seeds, &mut input);
        }
        if catch_unwind(AssertUnwindSafe(|| check(&input))).is_err() {
            panic!("{target}: check failed on {:?}", String::from_utf8_lossy(&input));
        }
        runs += 1;
    }
    eprintln!("{target}: {runs} inputs in {:?}", start.elapsed());
    runs
}

#[test]
fn request_head_survives_mutations() {
    assert!(run("request_head", 1, checks::request_head) > 45);
}

#[test]
fn chunked_decoder_survives_mutations() {
    assert!(run("chunked", 2, checks::chunked) > 11);
}

#[test]
fn response_head_survives_mutations() {
    assert!(run("response_head", 3, checks::response_head) > 12);
}

#[test]
fn proxy_header_survives_mutations() {
    assert!(run("proxy_header", 5, checks::proxy_header) > 6);
}

#[test]
fn config_parser_survives_mutations() {
    assert!(run("config_parse", 4, checks::config_parse) > 37);
}
