//! corelb's engine: the nginx-syntax config, the balancers, the config snapshot, the services beside the
//! request path (health checks, access logs), the control plane, the runtimes, the shards and the proxy flows.
//!
//! The modules are listed in layer order, bottom first; each imports only modules above it in this list, except
//! the event loop and its handlers (`shard` ⇄ `proxy`). `tools/check_layers.py` (part of `tools/test.sh`) fails
//! on any other cycle. docs/ARCHITECTURE.md walks one request through them.
//!
//! ```text
//! L0  config                 nginx syntax, the typed model, templates compiled at load
//! L1  http, balance, clock   wire formats and request variables; the balancers and the retry decision
//! L2  snapshot               everything the request path needs, built once per load
//! L3  access_log, health     services beside the request path
//! L4  control, state         the one path from a config to the running snapshot; process-wide state
//! L5  admin, runtime, resolve the API and metrics; the seam over tokio and glommio; the DNS resolver
//! L6  shard <-> proxy        the event loop and the protocol flows
//! L7  server                 the process: signals, pid file, reload, watchdog
//! side: simulate (over balance), preflight, log
//! ```

#![deny(rust_2018_idioms)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod config;

#[warn(missing_docs)]
pub mod balance;
pub mod clock;
pub mod http;

pub mod snapshot;

pub mod access_log;
pub mod health;

pub mod control;
pub mod state;

pub mod admin;
pub mod l4;
pub mod resolve;
pub mod runtime;
pub mod tls;

pub mod proxy;
pub mod shard;

pub mod process;
pub mod server;

pub mod log;
pub mod preflight;
pub mod simulate;
