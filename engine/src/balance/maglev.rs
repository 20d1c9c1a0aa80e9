//! `hash KEY maglev` (corelb): Maglev consistent hashing (Eisenbud et al., NSDI 2016), a 65537-entry lookup table
//! built at config load.
//!
//! Each distinct `server` text gets a permutation of the table's slots from two hashes of the text (`offset`,
//! `skip`); the servers take turns claiming their next free preferred slot, a server of weight `w` taking `w` turns
//! per round, until the table is full. So every server holds its weight's share of the slots to within one turn,
//! and adding or removing a server moves few other servers' slots. A request's key is hashed (crc32, as nginx's
//! `hash`) to a slot; an SWRR pass among that server's untried, usable peers picks one, and when none is, the next
//! slot is tried (a miss, as in `hash consistent`: more than 20 go to round robin). The slots that follow one
//! server's are spread over all the others, so a dead server's keys spread evenly.

use super::attempt::AttemptState;
use super::consistent_hash::ServersByText;
use super::{Balancer, Choice, PeerList, PickCx};

/// The table size: the paper's prime, 65537.
pub const TABLE_SIZE: usize = 65_537;

/// FNV-1a (64-bit) of `bytes` from `basis`: two bases give Maglev's two independent hashes of a server's text.
fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(basis, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The first slot and the step of a server's permutation of the table: `offset = h1 % M`,
/// `skip = h2 % (M - 1) + 1` (M prime, so every step visits every slot).
pub fn permutation(text: &str) -> (u64, u64) {
    let m = TABLE_SIZE as u64;
    let offset = fnv1a(0xcbf2_9ce4_8422_2325, text.as_bytes()) % m;
    let skip = fnv1a(0x6c62_272e_07bb_0142, text.as_bytes()) % (m - 1) + 1;
    (offset, skip)
}

/// Fills a table of `size` slots (a prime) for servers with these permutations and weights (each at least 1).
/// Returns each slot's server index; an empty input gives an empty table.
pub fn populate(perms: &[(u64, u64)], weights: &[u32], size: usize) -> Vec<u32> {
    const EMPTY: u32 = u32::MAX;
    if perms.is_empty() || size == 0 {
        return Vec::new();
    }
    let m = size as u64;
    let mut table = vec![EMPTY; size];
    let mut next = vec![0u64; perms.len()];
    let mut filled = 0;
    loop {
        for (i, (&(offset, skip), &weight)) in perms.iter().zip(weights).enumerate() {
            for _ in 0..weight.max(1) {
                let Some(n) = next.get_mut(i) else { return table };
                // every permutation visits every slot, so a free one is found while any is left
                loop {
                    let slot = ((offset + *n % m * (skip % m)) % m) as usize;
                    *n += 1;
                    if let Some(entry) = table.get_mut(slot).filter(|e| **e == EMPTY) {
                        *entry = i as u32;
                        break;
                    }
                }
                filled += 1;
                if filled == size {
                    return table;
                }
            }
        }
    }
}

/// `hash KEY maglev`: the lookup table and, for each server, its primary peers.
#[derive(Debug, Clone, Default)]
pub struct Maglev {
    /// Each slot's server.
    table: Vec<u32>,
    /// The texts of the servers.
    texts: Vec<std::sync::Arc<str>>,
    /// `members[s]`: the primary peers whose text is server `s`, ascending.
    members: Vec<Vec<usize>>,
}

impl Maglev {
    /// Builds the table of `primary` (down peers included, as the ring of `hash consistent` keeps them).
    pub fn build(primary: &PeerList) -> Maglev {
        let servers = ServersByText::of(primary);
        let perms: Vec<(u64, u64)> = servers.texts.iter().map(|t| permutation(t)).collect();
        Maglev {
            table: populate(&perms, &servers.weights, TABLE_SIZE),
            texts: servers.texts,
            members: servers.members,
        }
    }

    /// The server text holding each slot.
    pub fn slot_server(&self, slot: usize) -> Option<&str> {
        let s = *self.table.get(slot)?;
        self.texts.get(s as usize).map(|t| &**t)
    }

    /// The table's size (0 for an empty list).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The slot a key hashes to.
    pub fn slot_of(key: &[u8]) -> u64 {
        u64::from(crc32fast::hash(key)) % TABLE_SIZE as u64
    }

    fn members_at(&self, slot: u64) -> &[usize] {
        slot.checked_rem(self.table.len() as u64)
            .and_then(|i| self.table.get(i as usize))
            .and_then(|&s| self.members.get(s as usize))
            .map_or(&[], |m| m.as_slice())
    }
}

impl Balancer for Maglev {
    fn start(&self, attempt: &mut AttemptState, key: &[u8]) {
        attempt.hash = Self::slot_of(key);
    }

    /// The slot's server; an SWRR pass among its untried, usable peers; the next slot (a miss) when none is. An
    /// empty key, a lone server, the backup list or more than 20 misses go to round robin.
    fn choose(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        super::consistent_hash::walk_points(cx, self.table.is_empty(), |slot| self.members_at(slot))
    }

    fn name(&self) -> &'static str {
        "hash maglev"
    }
}

#[cfg(test)]
mod tests;
