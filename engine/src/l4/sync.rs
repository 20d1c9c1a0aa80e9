//! Brings the XDP program's maps to a set of VIPs: devices attached and detached, real servers' entries (and, for
//! direct return, their MAC addresses from the ARP table), each VIP's table written to its idle half and then
//! switched to by one update of the VIP's entry. Flows in the connection table are never touched: established
//! flows keep their real server across table changes and reloads.

use super::plan::VipNow;
use super::table;
use crate::config::model::{XdpMode, XdpScheduler};
use corelb_xdp::maps::{Real, VipKey, VipMeta, MAX_VIPS, TABLE_SIZE, VIP_HASH_SRC, VIP_LEAST, VIP_NAT, VIP_SEQ};
use corelb_xdp::{AttachMode, DataPath, XdpError};
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

/// One VIP's place in the maps and what was last written for it.
struct VipSlot {
    index: u32,
    /// Which half of its tables is in use.
    half: u32,
    meta: VipMeta,
    table: Vec<u32>,
}

/// The maps' state as this process wrote them.
pub struct Syncer {
    path: DataPath,
    /// Real servers' ids, by address: kept for the process's life, so a flow's id always means one server.
    ids: HashMap<SocketAddrV4, u32>,
    written: HashMap<u32, Real>,
    vips: HashMap<VipKey, VipSlot>,
    /// When an unresolved real server's address was last asked for (direct return needs its MAC).
    asked: HashMap<SocketAddrV4, Instant>,
    /// The counters' owners: each real server id's address.
    pub owners: Vec<(u32, SocketAddrV4)>,
}

/// A real server's flags for the program (unused yet: 0).
const REAL_FLAGS: u32 = 0;

impl Syncer {
    /// Loads the program.
    pub fn load() -> Result<Syncer, XdpError> {
        Ok(Syncer {
            path: DataPath::load()?,
            ids: HashMap::new(),
            written: HashMap::new(),
            vips: HashMap::new(),
            asked: HashMap::new(),
            owners: Vec::new(),
        })
    }

    /// The program's counters for real server `id`.
    pub fn counters(&self, id: u32) -> corelb_xdp::maps::Counters {
        self.path.counters(id)
    }

    /// Writes the maps for `now`; returns the warnings to log once (a device in generic mode).
    pub fn sync(&mut self, now: &[VipNow]) -> Result<Vec<String>, XdpError> {
        let mut warnings = Vec::new();
        for v in now {
            if self.path.attach(&v.vip.device)? == AttachMode::Generic {
                warnings.push(format!(
                    "device \"{}\" has no native XDP: the XDP program runs in generic mode",
                    v.vip.device
                ));
            }
            // NAT's next hop is the kernel's FIB lookup, which answers only where the device forwards
            let forwarding = format!("/proc/sys/net/ipv4/conf/{}/forwarding", v.vip.device);
            if v.vip.mode == XdpMode::Nat && std::fs::read_to_string(&forwarding).is_ok_and(|f| f.trim() == "0") {
                warnings.push(format!(
                    "\"mode=nat\" on device \"{}\" needs forwarding (net.ipv4.ip_forward=1): until then its \
                     packets go to the kernel",
                    v.vip.device
                ));
            }
        }
        let used: Vec<String> = self
            .path
            .devices()
            .filter(|d| !now.iter().any(|v| v.vip.device == *d))
            .map(str::to_string)
            .collect();
        for d in used {
            self.path.detach(&d);
        }
        let keys: Vec<VipKey> = now
            .iter()
            .map(|v| VipKey::new(*v.vip.addr.ip(), v.vip.addr.port(), v.vip.udp))
            .collect();
        let gone: Vec<VipKey> = self.vips.keys().filter(|k| !keys.contains(k)).copied().collect();
        for k in gone {
            self.path.remove_vip(&k);
            self.vips.remove(&k);
        }
        // the kernel's ARP table, read once per sync (direct return needs the real servers' MAC addresses)
        let arp = match now.iter().any(|v| v.vip.mode == XdpMode::Dr) {
            true => std::fs::read_to_string("/proc/net/arp").unwrap_or_default(),
            false => String::new(),
        };
        for (v, key) in now.iter().zip(keys) {
            self.sync_vip(v, key, &arp)?;
        }
        Ok(warnings)
    }

    /// Least connections: each real's active flows counted again from the connection table (flows the LRU
    /// evicted, or idle past their timeout without a FIN, counted out). Nothing without a `least_conn` VIP.
    pub fn recount(&mut self, now: &[VipNow]) {
        let least: Vec<(VipKey, u64)> = now
            .iter()
            .filter(|v| v.vip.scheduler == XdpScheduler::LeastConn)
            .map(|v| {
                let key = VipKey::new(*v.vip.addr.ip(), v.vip.addr.port(), v.vip.udp);
                (key, u64::try_from(v.vip.timeout.as_nanos()).unwrap_or(u64::MAX))
            })
            .collect();
        if least.is_empty() {
            return;
        }
        self.path.recount_active(|k| {
            least
                .iter()
                .find(|(v, _)| v.addr == k.dst && v.port == k.dport && v.proto == k.proto)
                .map(|&(_, t)| t)
        });
    }

    fn real_id(&mut self, addr: SocketAddrV4) -> u32 {
        let next = self.ids.len() as u32 + 1;
        let id = *self.ids.entry(addr).or_insert(next);
        if !self.owners.iter().any(|(i, _)| *i == id) {
            self.owners.push((id, addr));
        }
        id
    }

    /// The real server's entry; `None` while its MAC address is unknown (direct return).
    fn real_entry(&mut self, addr: SocketAddrV4, (mode, device): (XdpMode, &str), arp: &str) -> Option<Real> {
        let mac = match mode {
            XdpMode::Nat => [0; 6],
            XdpMode::Dr => match corelb_xdp::device::neighbour_in(arp, *addr.ip(), device) {
                Some(mac) => mac,
                None => {
                    self.ask_neighbour(addr);
                    return None;
                }
            },
        };
        Some(Real {
            addr: corelb_xdp::maps::wire_addr(*addr.ip()),
            port: corelb_xdp::maps::wire_port(addr.port()),
            mac,
            flags: REAL_FLAGS,
        })
    }

    /// Makes the kernel resolve `addr`'s MAC address: an empty datagram to it, at most once a second.
    fn ask_neighbour(&mut self, addr: SocketAddrV4) {
        let due = match self.asked.get(&addr) {
            Some(t) => t.elapsed() >= Duration::from_secs(1),
            None => true,
        };
        if due {
            self.asked.insert(addr, Instant::now());
            if let Ok(s) = std::net::UdpSocket::bind("0.0.0.0:0") {
                let _ = s.send_to(&[], addr);
            }
        }
    }

    fn sync_vip(&mut self, v: &VipNow, key: VipKey, arp: &str) -> Result<(), XdpError> {
        let mut reals = v.reals.clone();
        let mut ids = Vec::with_capacity(reals.len());
        for r in &mut reals {
            let id = self.real_id(r.addr);
            ids.push(id);
            match self.real_entry(r.addr, (v.vip.mode, &v.vip.device), arp) {
                Some(entry) => {
                    if self.written.get(&id) != Some(&entry) {
                        self.path.set_real(id, entry)?;
                        self.written.insert(id, entry);
                    }
                }
                None => r.live = false,
            }
        }
        let least = v.vip.scheduler == XdpScheduler::LeastConn;
        let table: Vec<u32> = table::build(v.vip.scheduler, &reals)
            .into_iter()
            .map(|i| match least {
                true => corelb_xdp::maps::least_entry(ids[i as usize], reals[i as usize].weight),
                false => ids[i as usize],
            })
            .collect();
        let index = match self.vips.get(&key) {
            Some(s) => s.index,
            None => (0..MAX_VIPS)
                .find(|i| !self.vips.values().any(|s| s.index == *i))
                .ok_or(XdpError::Map {
                    map: "vips",
                    reason: format!("more than {MAX_VIPS} VIPs"),
                })?,
        };
        let flags = match v.vip.mode {
            XdpMode::Nat => VIP_NAT,
            XdpMode::Dr => 0,
        } | match v.vip.scheduler {
            XdpScheduler::RoundRobin => VIP_SEQ,
            XdpScheduler::SourceHash | XdpScheduler::Maglev { source_only: true } => VIP_HASH_SRC,
            XdpScheduler::Maglev { source_only: false } => 0,
            XdpScheduler::LeastConn => VIP_LEAST,
        };
        let mac = corelb_xdp::device::mac(&v.vip.device).unwrap_or_default();
        let timeout_ns = u64::try_from(v.vip.timeout.as_nanos()).unwrap_or(u64::MAX);
        let slot = self.vips.entry(key).or_insert(VipSlot {
            index,
            half: 1,
            meta: VipMeta::default(),
            table: vec![u32::MAX],
        });
        let mut meta = VipMeta {
            index,
            flags,
            table_len: slot.meta.table_len,
            table_base: slot.meta.table_base,
            timeout_ns,
            mac,
            pad: [0; 2],
        };
        if slot.table != table {
            let half = 1 - slot.half;
            let base = (index * 2 + half) * TABLE_SIZE;
            self.path.write_table(base, &table)?;
            meta.table_len = table.len() as u32;
            meta.table_base = base;
            slot.half = half;
            slot.table = table;
        }
        if slot.meta != meta {
            self.path.set_vip(key, meta)?;
            slot.meta = meta;
        }
        Ok(())
    }
}
