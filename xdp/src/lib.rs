//! corelb's XDP L4 data path: the BPF program (`bpf/corelb_xdp.c`, built with clang by `build.rs`), the layout of
//! its maps (`maps`), the flow hash it schedules with (`hash`, the same function in Rust for the control plane and
//! its tests) and the loader that attaches it and writes the maps (`loader`, over aya).
//!
//! The engine's `l4` module is the control plane: it turns the running config and the upstreams' live state into
//! map contents; this crate knows nothing of the config.

pub mod device;
pub mod hash;
pub mod loader;
pub mod maps;

pub use loader::{AttachMode, DataPath, XdpError};

/// Why the program is not in this build (clang was missing or failed at build time), or `None` when it is.
pub fn missing() -> Option<&'static str> {
    let why = env!("CORELB_XDP_MISSING");
    (!why.is_empty()).then_some(why)
}
