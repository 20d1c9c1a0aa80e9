//! Loads the program, attaches it to devices (native XDP, else generic) and writes and reads its maps.
//!
//! Attaching goes through a bpf_link (aya's choice on kernels from 5.9): the kernel detaches the program when the
//! link's last descriptor closes, so no exit of the process, a crash or `kill -9` included, leaves the program on
//! a device.

use crate::maps::{Counters, Flow, FlowKey, Real, VipKey, VipMeta, FLOW_CLOSED, FLOW_COUNTED, MAX_REALS, TABLE_SIZE};
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::programs::{xdp::XdpLinkId, Xdp, XdpFlags};
use aya::Ebpf;

/// The program's name in the object.
const PROGRAM: &str = "corelb_xdp";

/// What went wrong loading, attaching or writing the program's maps.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("corelb's XDP program is not in this build: {0}")]
    Missing(&'static str),
    #[error("the XDP program could not be loaded ({0})")]
    Load(String),
    #[error("no device \"{0}\"")]
    NoDevice(String),
    #[error("the XDP program could not be attached to \"{device}\" ({reason})")]
    Attach { device: String, reason: String },
    #[error("the XDP map \"{map}\" could not be written ({reason})")]
    Map { map: &'static str, reason: String },
}

/// How a device runs the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver.
    Native,
    /// In the kernel's generic path (the device has no native XDP): slower, same behaviour.
    Generic,
}

/// The loaded program, its maps and the devices it is attached to.
pub struct DataPath {
    ebpf: Ebpf,
    vips: HashMap<MapData, VipKey, VipMeta>,
    tables: Array<MapData, u32>,
    reals: Array<MapData, Real>,
    stats: PerCpuArray<MapData, Counters>,
    flows: HashMap<MapData, FlowKey, Flow>,
    active: Array<MapData, i64>,
    links: Vec<(String, XdpLinkId, AttachMode)>,
}

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> XdpError {
    move |e| XdpError::Map {
        map,
        reason: e.to_string(),
    }
}

impl DataPath {
    /// Loads the program into the kernel (verified and jited), attached nowhere yet.
    pub fn load() -> Result<DataPath, XdpError> {
        if let Some(why) = crate::missing() {
            return Err(XdpError::Missing(why));
        }
        let object = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/corelb_xdp.o"));
        let mut ebpf = Ebpf::load(object).map_err(|e| XdpError::Load(e.to_string()))?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| XdpError::Load(format!("no program \"{PROGRAM}\"")))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| XdpError::Load(e.to_string()))?;
        prog.load().map_err(|e| XdpError::Load(e.to_string()))?;
        let mut take = |name: &'static str| {
            ebpf.take_map(name)
                .ok_or_else(|| XdpError::Load(format!("no map \"{name}\"")))
        };
        let vips = HashMap::try_from(take("vips")?).map_err(map_err("vips"))?;
        let tables = Array::try_from(take("tables")?).map_err(map_err("tables"))?;
        let reals = Array::try_from(take("reals")?).map_err(map_err("reals"))?;
        let stats = PerCpuArray::try_from(take("stats")?).map_err(map_err("stats"))?;
        let flows = HashMap::try_from(take("flows")?).map_err(map_err("flows"))?;
        let active = Array::try_from(take("active")?).map_err(map_err("active"))?;
        Ok(DataPath {
            ebpf,
            vips,
            tables,
            reals,
            stats,
            flows,
            active,
            links: Vec::new(),
        })
    }

    fn program(&mut self) -> Result<&mut Xdp, XdpError> {
        self.ebpf
            .program_mut(PROGRAM)
            .and_then(|p| <&mut Xdp>::try_from(p).ok())
            .ok_or_else(|| XdpError::Load(format!("no program \"{PROGRAM}\"")))
    }

    /// Attaches the program to `device` (a no-op when it is already): natively, else in generic mode.
    pub fn attach(&mut self, device: &str) -> Result<AttachMode, XdpError> {
        if let Some((_, _, mode)) = self.links.iter().find(|(d, _, _)| d == device) {
            return Ok(*mode);
        }
        if crate::device::index(device).is_none() {
            return Err(XdpError::NoDevice(device.to_string()));
        }
        let prog = self.program()?;
        let (link, mode) = match prog.attach(device, XdpFlags::DRV_MODE) {
            Ok(link) => (link, AttachMode::Native),
            Err(native) => match prog.attach(device, XdpFlags::SKB_MODE) {
                Ok(link) => (link, AttachMode::Generic),
                Err(_) => {
                    return Err(XdpError::Attach {
                        device: device.to_string(),
                        reason: chain(&native),
                    })
                }
            },
        };
        self.links.push((device.to_string(), link, mode));
        Ok(mode)
    }

    /// The devices the program is attached to.
    pub fn devices(&self) -> impl Iterator<Item = &str> {
        self.links.iter().map(|(d, _, _)| d.as_str())
    }

    /// Detaches the program from `device`.
    pub fn detach(&mut self, device: &str) {
        let Some(at) = self.links.iter().position(|(d, _, _)| d == device) else {
            return;
        };
        let (_, link, _) = self.links.remove(at);
        if let Ok(prog) = self.program() {
            let _ = prog.detach(link);
        }
    }

    /// Writes real server `id`.
    pub fn set_real(&mut self, id: u32, real: Real) -> Result<(), XdpError> {
        if id >= MAX_REALS {
            return Err(XdpError::Map {
                map: "reals",
                reason: format!("more than {MAX_REALS} real servers"),
            });
        }
        self.reals.set(id, real, 0).map_err(map_err("reals"))
    }

    /// Writes `slots` (real server ids) into the table starting at `base`.
    pub fn write_table(&mut self, base: u32, slots: &[u32]) -> Result<(), XdpError> {
        if slots.len() > TABLE_SIZE as usize {
            return Err(XdpError::Map {
                map: "tables",
                reason: format!("a table of {} slots", slots.len()),
            });
        }
        for (i, &id) in (base..).zip(slots) {
            self.tables.set(i, id, 0).map_err(map_err("tables"))?;
        }
        Ok(())
    }

    /// Sets a VIP (one map update: a table written beforehand takes over at once).
    pub fn set_vip(&mut self, key: VipKey, meta: VipMeta) -> Result<(), XdpError> {
        self.vips.insert(key, meta, 0).map_err(map_err("vips"))
    }

    /// Removes a VIP: its packets pass to the kernel from now on.
    pub fn remove_vip(&mut self, key: &VipKey) {
        let _ = self.vips.remove(key);
    }

    /// Counts each real server's active flows in the connection table again (least connections: flows the LRU
    /// evicted or that went idle without a FIN are counted out) and writes the counts. `timeout_ns` gives a flow's
    /// idle timeout by its key (`None`: not a least-connections VIP's flow).
    pub fn recount_active(&mut self, timeout_ns: impl Fn(&FlowKey) -> Option<u64>) {
        let now = monotonic_ns();
        let mut counts = vec![0i64; MAX_REALS as usize];
        for entry in self.flows.iter() {
            let Ok((key, flow)) = entry else { continue };
            let live = flow.state & (FLOW_COUNTED | FLOW_CLOSED) == FLOW_COUNTED;
            let fresh = timeout_ns(&key).is_some_and(|t| now.saturating_sub(flow.seen_ns) < t);
            if let (true, true, Some(c)) = (live, fresh, counts.get_mut(flow.real as usize)) {
                *c += 1;
            }
        }
        for (id, n) in (0..MAX_REALS).zip(counts) {
            if self.active.get(&id, 0).is_ok_and(|had| had != n) {
                let _ = self.active.set(id, n, 0);
            }
        }
    }

    /// Real server `id`'s counters, summed over the CPUs.
    pub fn counters(&self, id: u32) -> Counters {
        let mut sum = Counters::default();
        if let Ok(per_cpu) = self.stats.get(&id, 0) {
            for c in per_cpu.iter() {
                sum += *c;
            }
        }
        sum
    }
}

/// An error with its sources (aya's say which call failed, their sources why), and what a busy device means: a
/// program attached by another tool (a crashed corelb leaves none: its link went with its descriptor).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut busy = false;
    let mut at = e.source();
    while let Some(s) = at {
        text.push_str(": ");
        text.push_str(&s.to_string());
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            busy |= matches!(io.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST));
        }
        at = s.source();
    }
    if busy {
        text.push_str("; another XDP program is attached to the device, detach it first");
    }
    text
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

impl Drop for DataPath {
    fn drop(&mut self) {
        let devices: Vec<String> = self.devices().map(str::to_string).collect();
        for d in devices {
            self.detach(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's verifier takes the program (as root, on a kernel with BPF; skipped loudly elsewhere).
    #[test]
    fn the_verifier_takes_the_program() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || crate::missing().is_some() {
            // CORELB_REQUIRE=netns (.ci/run, as root with clang) makes this skip a failure
            let required = std::env::var("CORELB_REQUIRE").is_ok_and(|l| l.split(',').any(|n| n.trim() == "netns"));
            assert!(
                !required,
                "the program cannot be loaded here, and CORELB_REQUIRE lists netns"
            );
            eprintln!("SKIP corelb_xdp::loader: the program is not loaded (not root, or not built)");
            return;
        }
        let mut dp = DataPath::load().expect("the program loads");
        dp.set_real(1, Real::default()).expect("a real server is written");
        dp.write_table(0, &[1, 1, 1]).expect("a table is written");
        assert_eq!(dp.counters(1), Counters::default());
        assert!(matches!(dp.attach("no-such-dev0"), Err(XdpError::NoDevice(_))));
    }
}
