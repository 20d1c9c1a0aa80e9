//! The proxy flows: HTTP/1.1 (`http`, `exchange`, `body`) and TCP (`stream`, `pump`), with their compiled routes,
//! request variables and the upstream keepalive pool.

pub mod body;
mod client;
pub mod conn_snapshot;
pub mod exchange;
mod forward;
pub mod http;
pub mod pump;
pub mod request_log;
pub mod retry;
pub mod stream;
