//! corelb's engine: the nginx-syntax config, the balancers, and (with the data-plane work) the proxy logic.

pub mod balance;
pub mod config;
pub mod simulate;
