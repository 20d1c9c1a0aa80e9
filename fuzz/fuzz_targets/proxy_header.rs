//! libFuzzer target: `corelb_fuzz::checks::proxy_header` on each input (no panic, and its invariants hold).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| corelb_fuzz::checks::proxy_header(data));
