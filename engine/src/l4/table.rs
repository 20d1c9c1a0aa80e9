//! The lookup tables the XDP program schedules new flows by, built from the live real servers: pure functions,
//! tested without the kernel.
//!
//! Round robin and source hashing take nginx's smooth weighted round robin sequence of the live servers (each
//! server `weight` times per cycle, interleaved); Maglev takes `balance::maglev`'s table (65,537 slots) over the
//! live servers' `addr:port` texts in address order, so that two balancers with the same servers build the same
//! table whatever order their configs or health changes came in.

use crate::balance::maglev;
use crate::config::model::XdpScheduler;
use std::net::SocketAddrV4;

/// The most slots a table has (the program's `TABLE_SIZE`).
pub const TABLE_SIZE: usize = corelb_xdp::maps::TABLE_SIZE as usize;

/// A real server as the table builder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub addr: SocketAddrV4,
    pub weight: u32,
    /// Takes new flows (not down, healthy, not draining).
    pub live: bool,
}

/// The table of `reals` under `scheduler`: each slot an index into `reals` (live ones only; empty when none is).
pub fn build(scheduler: XdpScheduler, reals: &[Candidate]) -> Vec<u32> {
    let mut live: Vec<usize> = (0..reals.len()).filter(|&i| reals[i].live).collect();
    match scheduler {
        XdpScheduler::RoundRobin | XdpScheduler::SourceHash => {
            let weights: Vec<u32> = live.iter().map(|&i| reals[i].weight.max(1)).collect();
            swrr_sequence(&weights)
                .into_iter()
                .map(|k| live[k as usize] as u32)
                .collect()
        }
        // each live server once, at most the program's LEAST_MAX (the config refuses more)
        XdpScheduler::LeastConn => live
            .into_iter()
            .take(corelb_xdp::maps::LEAST_MAX)
            .map(|i| i as u32)
            .collect(),
        XdpScheduler::Maglev { .. } => {
            live.sort_by_key(|&i| (u32::from(*reals[i].addr.ip()), reals[i].addr.port()));
            let perms: Vec<(u64, u64)> = live
                .iter()
                .map(|&i| maglev::permutation(&reals[i].addr.to_string()))
                .collect();
            let weights: Vec<u32> = live.iter().map(|&i| reals[i].weight.max(1)).collect();
            maglev::populate(&perms, &weights, TABLE_SIZE)
                .into_iter()
                .map(|k| live[k as usize] as u32)
                .collect()
        }
    }
}

/// nginx's smooth weighted round robin over `weights` for one cycle (Σ weights picks, at most [`TABLE_SIZE`]):
/// each pick the indices gain their weight, the largest is taken and loses the total.
pub fn swrr_sequence(weights: &[u32]) -> Vec<u32> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let len = usize::try_from(total).unwrap_or(TABLE_SIZE).min(TABLE_SIZE);
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        let mut best = 0;
        for (i, w) in weights.iter().enumerate() {
            current[i] += i64::from(*w);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        out.push(best as u32);
    }
    out
}

#[cfg(test)]
mod tests;
