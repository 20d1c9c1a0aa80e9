//! Property tests on plain threads: `max_conns` is never exceeded and `conns` always returns to zero.

use corelb_shared_state::PeerSlot;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;

/// Runs `threads` threads that each take and give back a unit `rounds` times; returns the highest `conns` any holder
/// observed while holding.
fn hammer(slot: &PeerSlot, threads: usize, rounds: usize, max_conns: u32) -> (u32, usize) {
    let peak = AtomicU32::new(0);
    let taken = std::sync::atomic::AtomicUsize::new(0);
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                start.wait();
                for _ in 0..rounds {
                    if let Some(g) = slot.try_acquire(max_conns) {
                        taken.fetch_add(1, Ordering::Relaxed);
                        peak.fetch_max(g.slot().conns(), Ordering::Relaxed);
                        std::hint::spin_loop();
                        drop(g);
                    }
                }
            });
        }
    });
    (peak.load(Ordering::Relaxed), taken.load(Ordering::Relaxed))
}

#[test]
fn eight_threads_never_pass_three() {
    let slot = PeerSlot::new();
    let (peak, taken) = hammer(&slot, 8, 20_000, 3);
    assert!(peak <= 3, "observed {peak} connections with max_conns=3");
    assert!(peak >= 1 && taken > 0);
    assert_eq!(slot.conns(), 0);
}

#[test]
fn unlimited_counts_exactly() {
    let slot = PeerSlot::new();
    let guards: Vec<_> = (0..100).map(|_| slot.try_acquire(0).unwrap()).collect();
    assert_eq!(slot.conns(), 100);
    drop(guards);
    assert_eq!(slot.conns(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn never_above_limit(threads in 2usize..8, max in 1u32..5, rounds in 100usize..3000) {
        let slot = PeerSlot::new();
        let (peak, _) = hammer(&slot, threads, rounds, max);
        prop_assert!(peak <= max);
        prop_assert_eq!(slot.conns(), 0);
    }
}
