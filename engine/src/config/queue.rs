//! `queue N [timeout=T]` (nginx Plus) as read from an http upstream block.

use std::time::Duration;

/// Requests that find no usable peer wait, up to `max` at a time per shard, for at most `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConf {
    /// Waiting requests per shard (nginx Plus: per worker process).
    pub max: u32,
    /// Default 60s.
    pub timeout: Duration,
}
