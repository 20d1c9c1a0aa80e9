//! `corelb bench`: a thread-per-core load generator, closed loop or open loop at a fixed rate (with wrk2's
//! coordinated-omission correction), HDR histograms per shard merged at the end, text/.hgrm/JSON/SVG reports.
//! The proxy engine does not depend on it; it uses the engine's runtime seam, response parsers and preflight.

#![deny(rust_2018_idioms)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod exchange;
pub mod hgrm;
pub mod json;
pub mod net;
pub mod pacer;
pub mod plan;
pub mod report;
pub mod requests;
pub mod run;
pub mod stats;
pub mod svg;
pub mod target;
mod timerfd;
mod worker;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

pub use plan::{Options, Plan};
pub use report::Report;
pub use run::{run, Flow, Progress};

/// Why a load test could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    #[error("bad URL \"{url}\": {reason}")]
    BadUrl { url: String, reason: &'static str },
    #[error("cannot resolve \"{host}\": {source}")]
    Resolve { host: String, source: io::Error },
    #[error("bad header \"{header}\": {reason}")]
    BadHeader { header: String, reason: &'static str },
    #[error("bad method \"{0}\": use an HTTP token such as GET or POST")]
    BadMethod(String),
    #[error("{path}:{line}: {reason}")]
    BadRequestLine {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },
    #[error("source address {src} cannot be used: {reason}")]
    Source { src: IpAddr, reason: String },
    #[error("{0}: the request list has no requests")]
    EmptyRequestList(PathBuf),
    #[error("cannot read {path}: {source}")]
    ReadFile { path: PathBuf, source: io::Error },
    #[error("{0} must be greater than 0")]
    Zero(&'static str),
    #[error("{0}")]
    Invalid(&'static str),
    #[error("{connections} connections cannot be spread over {shards} shards: use at least one per shard")]
    TooFewConnections { connections: usize, shards: usize },
    #[error("target {addr} is unreachable: {source}")]
    Unreachable { addr: SocketAddr, source: io::Error },
    #[error("CPU affinity: {0}")]
    Cpu(String),
    #[error("{0}")]
    Runtime(String),
    #[error("cannot start a shard: {0}")]
    Thread(io::Error),
    #[error("a shard stopped without reporting its results")]
    LostShard,
    #[error("cannot write {path}: {source}")]
    Output { path: PathBuf, source: io::Error },
    #[error("cannot draw the chart: {0}")]
    Plot(String),
}
