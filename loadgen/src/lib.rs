//! `corelb bench`: a thread-per-core load generator, closed loop or open loop at a fixed rate (with wrk2's
//! coordinated-omission correction), HDR histograms per shard merged at the end, text/.hgrm/JSON/SVG reports.
//! The proxy engine does not depend on it; it uses the engine's runtime seam, response parsers and preflight.

#![warn(missing_docs)]
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
    /// The target URL cannot be used.
    #[error("bad URL \"{url}\": {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The target's host name does not resolve.
    #[error("cannot resolve \"{host}\": {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        source: io::Error,
    },
    /// A `--header` is not `Name: value`.
    #[error("bad header \"{header}\": {reason}")]
    BadHeader {
        /// The header as given.
        header: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The method is not an HTTP token.
    #[error("bad method \"{0}\": use an HTTP token such as GET or POST")]
    BadMethod(String),
    /// A line of the request list cannot be used.
    #[error("{path}:{line}: {reason}")]
    BadRequestLine {
        /// The request list.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A source address of the request list cannot be bound.
    #[error("source address {src} cannot be used: {reason}")]
    Source {
        /// The address.
        src: IpAddr,
        /// Why not.
        reason: String,
    },
    /// The request list has no request lines.
    #[error("{0}: the request list has no requests")]
    EmptyRequestList(PathBuf),
    /// A file the options name cannot be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        source: io::Error,
    },
    /// An option that must be positive is 0 (the option's name).
    #[error("{0} must be greater than 0")]
    Zero(&'static str),
    /// The options do not go together or are out of range (the message).
    #[error("{0}")]
    Invalid(&'static str),
    /// Fewer connections than shards.
    #[error("{connections} connections cannot be spread over {shards} shards: use at least one per shard")]
    TooFewConnections {
        /// Connections asked for.
        connections: usize,
        /// Shards asked for.
        shards: usize,
    },
    /// The first connect to the target failed.
    #[error("target {addr} is unreachable: {source}")]
    Unreachable {
        /// The target's address.
        addr: SocketAddr,
        /// The connect's error.
        source: io::Error,
    },
    /// The CPUs cannot be read or a CPU asked for is not allowed.
    #[error("CPU affinity: {0}")]
    Cpu(String),
    /// The runtime cannot run here (io_uring or locked memory for glommio).
    #[error("{0}")]
    Runtime(String),
    /// A shard thread could not be started or its executor failed.
    #[error("cannot start a shard: {0}")]
    Thread(io::Error),
    /// A shard ended without sending its results (it panicked).
    #[error("a shard stopped without reporting its results")]
    LostShard,
    /// A report file cannot be written.
    #[error("cannot write {path}: {source}")]
    Output {
        /// The file.
        path: PathBuf,
        /// The error writing it.
        source: io::Error,
    },
    /// The SVG chart cannot be drawn.
    #[error("cannot draw the chart: {0}")]
    Plot(String),
}
