//! The flow hash the program schedules new flows by (`flow_hash` in `bpf/corelb_xdp.c`, murmur3's finalizer over
//! the 5-tuple as the packet carries it): the control plane and the tests compute the slot a flow takes without
//! the kernel.

use crate::maps::{wire_addr, wire_port, VIP_HASH_SRC};
use std::net::SocketAddrV4;

/// One flow: client and VIP addresses, and the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub client: SocketAddrV4,
    pub vip: SocketAddrV4,
    pub udp: bool,
}

fn fmix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The program's hash of `flow` under a VIP's `flags` (`VIP_HASH_SRC`: the client's address alone).
pub fn flow_hash(flow: &Flow, flags: u32) -> u32 {
    let h = fmix(wire_addr(*flow.client.ip()));
    if flags & VIP_HASH_SRC != 0 {
        return h;
    }
    let h = fmix(h ^ wire_addr(*flow.vip.ip()));
    let ports = (u32::from(wire_port(flow.client.port())) << 16) | u32::from(wire_port(flow.vip.port()));
    let h = fmix(h ^ ports);
    let proto: u32 = if flow.udp { 17 } else { 6 };
    fmix(h ^ proto)
}

/// The slot of a table of `len` slots that `flow` takes (`len` > 0).
pub fn flow_slot(flow: &Flow, flags: u32, len: u32) -> u32 {
    flow_hash(flow, flags) % len.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flow(c: [u8; 4], cport: u16) -> Flow {
        Flow {
            client: SocketAddrV4::new(c.into(), cport),
            vip: SocketAddrV4::new([10, 0, 0, 100].into(), 80),
            udp: false,
        }
    }

    #[test]
    fn source_hash_ignores_the_port() {
        let a = flow([10, 0, 1, 2], 1000);
        let b = flow([10, 0, 1, 2], 2000);
        assert_eq!(flow_hash(&a, VIP_HASH_SRC), flow_hash(&b, VIP_HASH_SRC));
        assert_ne!(flow_hash(&a, 0), flow_hash(&b, 0));
    }

    proptest! {
        /// Slots spread: 4,096 flows from one client over 7 slots leave none empty.
        #[test]
        fn slots_spread(base in 1024u16..60000) {
            let mut seen = [0u32; 7];
            for p in 0..4096u16 {
                seen[flow_slot(&flow([10, 0, 1, 2], base.wrapping_add(p)), 0, 7) as usize] += 1;
            }
            prop_assert!(seen.iter().all(|&n| n > 400), "{seen:?}");
        }
    }
}
