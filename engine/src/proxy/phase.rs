//! Where an HTTP connection is as nginx's stub_status counts it (waiting, reading a head, writing), kept in the
//! shard's counters for as long as the connection lives, panics included.

use corelb_shared_state::{HttpPhase, ShardSlot};
use std::sync::Arc;

/// One connection's phase in its shard's counters; leaving every phase when dropped.
#[derive(Debug)]
pub(super) struct ConnPhase {
    slot: Arc<ShardSlot>,
    phase: HttpPhase,
}

impl ConnPhase {
    /// A new connection: waiting for its first request, as nginx counts it from the accept.
    pub(super) fn waiting(slot: &Arc<ShardSlot>) -> ConnPhase {
        slot.move_phase(HttpPhase::None, HttpPhase::Waiting);
        ConnPhase {
            slot: Arc::clone(slot),
            phase: HttpPhase::Waiting,
        }
    }

    /// Moves the connection to `phase` (nothing when it is there already).
    pub(super) fn set(&mut self, phase: HttpPhase) {
        if self.phase != phase {
            self.slot.move_phase(self.phase, phase);
            self.phase = phase;
        }
    }

    /// Waiting when nothing of the next request is buffered, else reading its head.
    pub(super) fn between_reads(&mut self, buffered: bool) {
        self.set(if buffered {
            HttpPhase::Reading
        } else {
            HttpPhase::Waiting
        });
    }
}

impl Drop for ConnPhase {
    fn drop(&mut self) {
        self.set(HttpPhase::None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_counts_in_one_phase_until_dropped() {
        let slot = Arc::new(ShardSlot::new());
        let gauges = |s: &ShardSlot| {
            let st = s.stats();
            (st.waiting, st.reading, st.writing, st.http_requests)
        };
        let mut phase = ConnPhase::waiting(&slot);
        assert_eq!(gauges(&slot), (1, 0, 0, 0));
        phase.between_reads(true);
        phase.between_reads(true);
        assert_eq!(gauges(&slot), (0, 1, 0, 1));
        phase.set(HttpPhase::Writing);
        assert_eq!(gauges(&slot), (0, 0, 1, 1));
        phase.between_reads(false);
        assert_eq!(gauges(&slot), (1, 0, 0, 1));
        drop(phase);
        assert_eq!(gauges(&slot), (0, 0, 0, 1));
    }
}
