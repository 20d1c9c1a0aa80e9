use super::*;
use corelb_xdp::hash::{flow_slot, Flow};
use corelb_xdp::maps::VIP_HASH_SRC;
use proptest::prelude::*;

fn real(last: u8, weight: u32, live: bool) -> Candidate {
    Candidate {
        addr: SocketAddrV4::new([10, 218, 2, last].into(), 80),
        weight,
        live,
    }
}

#[test]
fn swrr_is_nginx_s_smooth_sequence() {
    // nginx's example: weights 5, 1, 1 give a a b a c a a
    assert_eq!(swrr_sequence(&[5, 1, 1]), [0, 0, 1, 0, 2, 0, 0]);
    assert_eq!(swrr_sequence(&[]), Vec::<u32>::new());
}

#[test]
fn round_robin_leaves_out_servers_that_are_not_live() {
    let reals = [real(11, 2, true), real(12, 1, false), real(13, 1, true)];
    let t = build(XdpScheduler::RoundRobin, &reals);
    assert_eq!(t.len(), 3);
    assert_eq!(t.iter().filter(|&&i| i == 0).count(), 2);
    assert!(!t.contains(&1));
    assert!(build(XdpScheduler::RoundRobin, &[real(11, 1, false)]).is_empty());
}

#[test]
fn maglev_shares_follow_the_weights() {
    let reals = [real(11, 3, true), real(12, 2, true), real(13, 1, true)];
    let t = build(XdpScheduler::Maglev { source_only: false }, &reals);
    assert_eq!(t.len(), TABLE_SIZE);
    let share = |i| t.iter().filter(|&&s| s == i).count() as f64 / TABLE_SIZE as f64;
    for (i, want) in [(0, 0.5), (1, 1.0 / 3.0), (2, 1.0 / 6.0)] {
        assert!((share(i) - want).abs() < 0.01, "server {i}: {} of the slots", share(i));
    }
}

/// The real server (by address) a flow goes to through a table built from `reals`.
fn server_of(t: &[u32], reals: &[Candidate], f: &Flow, flags: u32) -> SocketAddrV4 {
    let slot = flow_slot(f, flags, t.len() as u32) as usize;
    reals[t[slot] as usize].addr
}

fn flows(n: u32, seed: u32) -> Vec<Flow> {
    (0..n)
        .map(|i| {
            let x = i.wrapping_mul(2_654_435_761).wrapping_add(seed);
            Flow {
                client: SocketAddrV4::new([10, 218, 1, (x % 200) as u8 + 2].into(), 1024 + (x >> 8) as u16 % 60000),
                vip: SocketAddrV4::new([10, 218, 1, 100].into(), 80),
                udp: i % 3 == 0,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Two balancers with the same servers, listed in any order, send each of 10,000 flows to the same server.
    #[test]
    fn two_balancers_agree(weights in proptest::collection::vec(1u32..5, 2..6), rot in 0usize..6, seed: u32) {
        let reals: Vec<Candidate> = weights.iter().enumerate().map(|(i, &w)| real(11 + i as u8, w, true)).collect();
        let mut other = reals.clone();
        other.rotate_left(rot % reals.len());
        let scheduler = XdpScheduler::Maglev { source_only: false };
        let (a, b) = (build(scheduler, &reals), build(scheduler, &other));
        for f in flows(10_000, seed) {
            prop_assert_eq!(server_of(&a, &reals, &f, 0), server_of(&b, &other, &f, 0));
        }
    }

    /// A server taken out moves only its own flows: every other flow keeps its server (Maglev's small
    /// disruption; the paper bounds the rest, here at most 2% of the others).
    #[test]
    fn a_server_out_moves_few_others(n in 3usize..7, out in 0usize..7, seed: u32) {
        let reals: Vec<Candidate> = (0..n).map(|i| real(11 + i as u8, 1, true)).collect();
        let mut less = reals.clone();
        less[out % n].live = false;
        let scheduler = XdpScheduler::Maglev { source_only: true };
        let (a, b) = (build(scheduler, &reals), build(scheduler, &less));
        let (mut kept, mut moved) = (0, 0);
        for f in flows(10_000, seed) {
            let before = server_of(&a, &reals, &f, VIP_HASH_SRC);
            let after = server_of(&b, &less, &f, VIP_HASH_SRC);
            prop_assert_ne!(after, reals[out % n].addr);
            if before != reals[out % n].addr {
                if before == after { kept += 1 } else { moved += 1 }
            }
        }
        prop_assert!(moved * 50 <= kept + moved, "{moved} of {} flows moved", kept + moved);
    }

    /// Any weights and liveness give a table of live servers only, each in its weight's share (SWRR: exactly).
    #[test]
    fn tables_hold_live_servers_in_their_weights(spec in proptest::collection::vec((1u32..20, any::<bool>()), 0..8)) {
        let reals: Vec<Candidate> = spec.iter().enumerate().map(|(i, &(w, l))| real(11 + i as u8, w, l)).collect();
        let t = build(XdpScheduler::RoundRobin, &reals);
        let total: u32 = reals.iter().filter(|r| r.live).map(|r| r.weight).sum();
        prop_assert_eq!(t.len() as u32, total);
        for (i, r) in reals.iter().enumerate() {
            let n = t.iter().filter(|&&s| s as usize == i).count() as u32;
            prop_assert_eq!(n, if r.live { r.weight } else { 0 });
        }
    }
}

#[test]
fn least_conn_lists_each_live_server_once() {
    let reals = [real(11, 5, true), real(12, 1, false), real(13, 2, true)];
    assert_eq!(build(XdpScheduler::LeastConn, &reals), [0, 2]);
}
