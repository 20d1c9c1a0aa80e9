//! The maps' keys and values, laid out as `bpf/corelb_xdp.c` declares them, and their sizes.

use std::net::Ipv4Addr;

/// VIPs the program serves at once.
pub const MAX_VIPS: u32 = 8;
/// Slots of one lookup table (Maglev's prime); each VIP has two, the one in use and the one being written.
pub const TABLE_SIZE: u32 = 65_537;
/// Real servers the program knows (ids are not reused while the process runs).
pub const MAX_REALS: u32 = 1024;

/// Rewrite addresses both ways (else direct server return).
pub const VIP_NAT: u32 = 1;
/// The flow's hash is its source address's alone.
pub const VIP_HASH_SRC: u32 = 2;
/// The table is walked in turn (weighted round robin), not hashed into.
pub const VIP_SEQ: u32 = 4;
/// Weighted least connections: the table lists the live reals as [`least_entry`]s.
pub const VIP_LEAST: u32 = 8;
/// The reals a least-connections VIP chooses among.
pub const LEAST_MAX: usize = 64;

/// A least-connections table's entry: the real's weight (at most 65,535) and id.
pub fn least_entry(id: u32, weight: u32) -> u32 {
    (weight.clamp(1, 0xffff) << 16) | (id & 0xffff)
}

/// `FLOW_CLOSED`: the client sent FIN or RST.
pub const FLOW_CLOSED: u32 = 1;
/// `FLOW_COUNTED`: the flow counts in its real's active flows.
pub const FLOW_COUNTED: u32 = 2;

/// `struct flow_key`: a flow's 5-tuple as the packet carries it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowKey {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub pad: [u8; 3],
}

/// `struct flow`: a flow's real server, state and last packet (`bpf_ktime_get_ns`, CLOCK_MONOTONIC).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    pub real: u32,
    pub state: u32,
    pub seen_ns: u64,
}

/// An address and port as the packet carries them (network byte order), read as the host reads memory.
pub fn wire_addr(a: Ipv4Addr) -> u32 {
    u32::from_ne_bytes(a.octets())
}

/// A port as the packet carries it, read as the host reads memory.
pub fn wire_port(p: u16) -> u16 {
    u16::from_ne_bytes(p.to_be_bytes())
}

/// `struct vip_key`: the VIP's address, port and protocol.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VipKey {
    pub addr: u32,
    pub port: u16,
    pub proto: u8,
    pub pad: u8,
}

impl VipKey {
    /// The key of `addr:port` over TCP or UDP.
    pub fn new(addr: Ipv4Addr, port: u16, udp: bool) -> VipKey {
        VipKey {
            addr: wire_addr(addr),
            port: wire_port(port),
            proto: if udp {
                libc::IPPROTO_UDP as u8
            } else {
                libc::IPPROTO_TCP as u8
            },
            pad: 0,
        }
    }
}

/// `struct vip_meta`: how the VIP's new flows are scheduled.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VipMeta {
    /// The VIP's number (its round-robin counter, its tables' place).
    pub index: u32,
    /// `VIP_*`.
    pub flags: u32,
    /// Slots in use; 0: no live real server (packets pass to the kernel).
    pub table_len: u32,
    /// Where the table in use starts in `tables`.
    pub table_base: u32,
    /// A flow idle longer is scheduled again.
    pub timeout_ns: u64,
    /// The device's own MAC address (a direct-return frame's source).
    pub mac: [u8; 6],
    pub pad: [u8; 2],
}

/// `struct real`: a real server.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Real {
    pub addr: u32,
    pub port: u16,
    /// Its MAC address (direct server return).
    pub mac: [u8; 6],
    pub flags: u32,
}

/// `struct counters`: one CPU's counts for a real server.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub flows: u64,
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.flows += o.flows;
    }
}

// SAFETY: plain `repr(C)` structs of integers, with their padding written out as fields.
unsafe impl aya::Pod for VipKey {}
// SAFETY: as above.
unsafe impl aya::Pod for VipMeta {}
// SAFETY: as above.
unsafe impl aya::Pod for Real {}
// SAFETY: as above.
unsafe impl aya::Pod for Counters {}
// SAFETY: as above.
unsafe impl aya::Pod for FlowKey {}
// SAFETY: as above.
unsafe impl aya::Pod for Flow {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_c_program_s() {
        assert_eq!(std::mem::size_of::<VipKey>(), 8);
        assert_eq!(std::mem::size_of::<VipMeta>(), 32);
        assert_eq!(std::mem::size_of::<Real>(), 16);
        assert_eq!(std::mem::size_of::<Counters>(), 24);
        assert_eq!(std::mem::size_of::<FlowKey>(), 16);
        assert_eq!(std::mem::size_of::<Flow>(), 16);
        assert_eq!(least_entry(5, 3), 0x0003_0005);
        assert_eq!(least_entry(5, 0), 0x0001_0005);
    }

    #[test]
    fn wire_order_is_network_order_in_memory() {
        let k = VipKey::new(Ipv4Addr::new(10, 0, 0, 1), 80, false);
        assert_eq!(k.addr.to_ne_bytes(), [10, 0, 0, 1]);
        assert_eq!(k.port.to_ne_bytes(), [0, 80]);
        assert_eq!(k.proto, 6);
    }
}
