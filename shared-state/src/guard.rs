//! `ConnGuard`: one active connection to a peer, given back when dropped.

use crate::slot::PeerSlot;
use std::sync::atomic::Ordering;

/// One unit of a peer's `conns`, held from the pick until the attempt ends; dropping it gives the unit back on every
/// path, panics included.
#[must_use = "dropping the guard gives the connection back at once"]
#[derive(Debug)]
pub struct ConnGuard<'a> {
    slot: &'a PeerSlot,
}

impl<'a> ConnGuard<'a> {
    pub(crate) fn new(slot: &'a PeerSlot) -> Self {
        ConnGuard { slot }
    }

    /// The slot this connection is counted in.
    pub fn slot(&self) -> &'a PeerSlot {
        self.slot
    }
}

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire of a contending `try_acquire`: a freed unit is seen as free.
        self.slot.conns_atomic().fetch_sub(1, Ordering::Release);
    }
}
