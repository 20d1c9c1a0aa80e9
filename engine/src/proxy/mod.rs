//! The proxy flows, the handlers the shard's event loop runs per connection: HTTP/1.1 (`http` reads and routes a
//! head, `client` answers it here, `forward` proxies it with `retry` and `exchange`, `body` streams bodies) and TCP
//! (`stream`, `pump`, `stream_return`). What they run on is built at load in [`crate::snapshot`].

mod accel_redirect;
pub mod body;
mod burst;
pub mod charset;
mod client;
pub mod conn_snapshot;
pub mod error_page;
pub mod exchange;
mod forward;
pub mod gzip;
mod h2;
pub mod http;
mod idle;
pub mod limit_rate;
mod limits;
mod linger;
pub mod load_report;
mod open_file_cache;
mod phase;
mod proxy_header;
pub mod pump;
pub mod queue;
pub mod read_ahead;
pub mod request_body;
pub mod request_log;
pub mod retry;
pub mod rewrite_phase;
pub(crate) use open_file_cache::clear as clear_open_file_caches;
mod sendfile;
mod static_file;
pub mod stream;
mod stream_pass;
mod stream_return;
mod stream_tls;
mod tls_conn;
pub mod try_clock;
pub mod udp;
mod upgrade;
mod var_pass;

pub(crate) use burst::trim as trim_bursts;
pub(crate) use h2::trim_relays;
