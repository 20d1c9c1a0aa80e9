//! The fuzz targets' checks, shared with the stable-Rust smoke loop (`engine/tests/fuzz_smoke.rs` includes
//! `checks.rs` by path).

pub mod checks;
