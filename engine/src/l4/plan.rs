//! What the XDP maps should hold, read from a snapshot: each VIP with its upstream's servers and whether each takes
//! new flows (the same zone flags the user-space balancers read: `down`, health checks, the API, drain, agents).

use super::table::Candidate;
use crate::config::model::XdpVip;
use crate::snapshot::Snapshot;
use std::net::SocketAddr;

/// One VIP and its real servers now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipNow {
    pub vip: XdpVip,
    pub reals: Vec<Candidate>,
}

/// The VIPs of `snapshot`'s config with their servers' state now.
pub fn vips_now(snapshot: &Snapshot) -> Vec<VipNow> {
    let Some(stream) = snapshot.config.stream.as_ref() else {
        return Vec::new();
    };
    stream
        .xdp
        .iter()
        .map(|vip| {
            let reals = snapshot
                .stream_plans
                .get(vip.upstream)
                .map(|plan| {
                    plan.primary
                        .peers
                        .iter()
                        .filter_map(|p| match p.addr {
                            SocketAddr::V4(addr) => Some(Candidate {
                                addr,
                                weight: p.weight,
                                live: !p.down && !p.slot.is_blocked(),
                            }),
                            SocketAddr::V6(_) => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            VipNow {
                vip: vip.clone(),
                reals,
            }
        })
        .collect()
}
