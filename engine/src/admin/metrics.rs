//! The Prometheus text exposition of the zone's counters (`location = /metrics { metrics; }`).

use super::{AdminRequest, AdminResponse};
use crate::shard::Shared;
use std::fmt::Write;

/// Answers a scrape: per-shard counters and the control plane's.
pub fn handle(shared: &Shared, _req: &AdminRequest<'_>) -> AdminResponse {
    let mut out = String::new();
    let c = shared.control_stats();
    let _ = writeln!(
        out,
        "# TYPE corelb_config_generation gauge\ncorelb_config_generation {}",
        c.generation
    );
    let _ = writeln!(out, "# TYPE corelb_shard_requests counter");
    for (i, s) in shared.zone.shard_stats().iter().enumerate() {
        let _ = writeln!(out, "corelb_shard_requests{{shard=\"{i}\"}} {}", s.requests);
    }
    AdminResponse {
        status: 200,
        content_type: "text/plain; version=0.0.4; charset=utf-8",
        allow: None,
        body: out.into_bytes(),
    }
}
