//! corelb's engine: the nginx-syntax config, the balancers, and (with the data-plane work) the proxy logic.

pub mod access_log;
pub mod admin;
pub mod balance;
pub mod config;
pub mod control;
pub mod health;
pub mod http;
pub mod loadgen;
pub mod log;
pub mod preflight;
pub mod proxy;
pub mod runtime;
pub mod server;
pub mod shard;
pub mod simulate;
pub mod snapshot;
pub mod state;
