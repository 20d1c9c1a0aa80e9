//! A network device's index and MAC address, and a neighbour's MAC address from the kernel's ARP table.

use std::net::Ipv4Addr;

/// The index of device `name`, or `None` when there is no such device.
pub fn index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// The MAC address of device `name` (`/sys/class/net/NAME/address`).
pub fn mac(name: &str) -> Option<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).ok()?;
    parse_mac(text.trim())
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// The MAC address the kernel has for `addr` on device `dev` (`/proc/net/arp`, complete entries only).
pub fn neighbour(addr: Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    let table = std::fs::read_to_string("/proc/net/arp").ok()?;
    neighbour_in(&table, addr, dev)
}

/// [`neighbour`] over the text of `/proc/net/arp`.
pub fn neighbour_in(table: &str, addr: Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (ip, flags, mac, device) = (f.first()?, f.get(2)?, f.get(3)?, f.get(5)?);
        // ATF_COM (0x2): the entry is complete
        let complete = u32::from_str_radix(flags.trim_start_matches("0x"), 16).is_ok_and(|f| f & 2 != 0);
        (ip.parse::<Ipv4Addr>().ok()? == addr && *device == dev && complete)
            .then(|| parse_mac(mac))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_arp_table() {
        let t = "IP address       HW type     Flags       HW address            Mask     Device\n\
                 10.0.0.11        0x1         0x2         02:00:00:00:00:0b     *        eth0\n\
                 10.0.0.12        0x1         0x0         00:00:00:00:00:00     *        eth0\n";
        let a = Ipv4Addr::new(10, 0, 0, 11);
        assert_eq!(neighbour_in(t, a, "eth0"), Some([2, 0, 0, 0, 0, 11]));
        assert_eq!(neighbour_in(t, a, "eth1"), None);
        assert_eq!(neighbour_in(t, Ipv4Addr::new(10, 0, 0, 12), "eth0"), None);
        assert_eq!(parse_mac("02:00:00:00:00:0b:0c"), None);
    }
}
