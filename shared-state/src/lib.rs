//! The cross-core zone: per-peer atomics every shard reads and writes, like nginx's `zone` shared memory.
//!
//! A [`Zone`] maps a peer's identity ([`PeerKey`]) to its [`PeerSlot`]. Slots are looked up only when a config is
//! loaded; the per-request path holds `&PeerSlot` through the config snapshot and touches nothing but atomics.
//! Each shard also has a [`ShardSlot`] of connection and request counters here, handed to it at start-up.
//! `sticky learn`'s session tables ([`LearnTable`]) and the `limit_req`/`limit_conn` tables ([`ReqTable`],
//! [`ConnTable`]) and the resolvers' `status_zone=` counters ([`ResolverStats`]) live here too, by zone name. Nothing here depends on an async
//! runtime.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(rust_2018_idioms)]

mod agent;
mod guard;
mod latency;
mod least_time;
mod limit;
mod peak_ewma;
mod resolver;
mod shard_slot;
mod slot;
mod sticky;
mod zone;

pub use agent::{AgentSlot, AgentWeight, LoadReport};
pub use guard::ConnGuard;
pub use latency::{bucket_index, LatencyHistogram, LatencySnapshot, LATENCY_BOUNDS_US, LATENCY_BUCKETS};
pub use least_time::{time_avg, PeerTimes, TimeMetric};
pub use limit::{
    Bucket, ConnTable, ConnUnit, Decided, Decisions, ReqTable, ReqVerdict, CONN_BYTES_PER_ENTRY, MAX_EXCESS,
    REQ_BYTES_PER_ENTRY,
};
pub use peak_ewma::{PeakEwma, DECAY_MS};
pub use resolver::{Answered, Asked, ResolverStats};
pub use shard_slot::{HttpPhase, ShardSlot, ShardStats};
pub use slot::{HealthStats, PeerFlags, PeerSlot, PeerStats, StatusClass};
pub use sticky::{LearnTable, SessionKey, Sid, SID_MAX};
pub use zone::{PeerKey, Zone};
