//! The XDP L4 data path end to end (`listen ... xdp=`), in network namespaces the tests make (see `xdp_lab`):
//! direct server return with weights and replies that bypass the balancer, a real server killed and taken out by
//! its health check, the kernel's flow hash against the control plane's Maglev table, NAT both ways, UDP, and no
//! program left on the device after the balancer is killed. Skipped loudly where not root (`CORELB_REQUIRE=netns`
//! makes that a failure).

mod common;
mod xdp_lab;

use common::skip;
use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use xdp_lab::{in_ns, name_of, Lab, Return, VIP};

/// One lab at a time: the machine has two cores.
static LABS: Mutex<()> = Mutex::new(());

fn lab_or_skip(cases: usize) -> bool {
    match xdp_lab::unavailable() {
        None => true,
        Some(why) => {
            skip::skip(skip::Skip {
                need: skip::Need::Netns,
                cases,
                what: "XDP cases",
                why: &why,
            });
            false
        }
    }
}

/// corelb running in the lab's balancer namespace.
struct Balancer {
    child: Child,
    dir: PathBuf,
}

impl Balancer {
    /// Starts corelb with `stream` as its stream block and waits until the program is on the device.
    fn start(lab: &Lab, name: &str, stream: &str) -> Balancer {
        let dir = common::temp_dir("xdp", name);
        let conf = format!(
            "error_log {dir}/error.log info;\npid {dir}/corelb.pid;\nevents {{}}\nstream {{\n{stream}\n}}\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("corelb.conf"), conf).expect("write the config");
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.ns("lb"), env!("CARGO_BIN_EXE_corelb"), "-c"])
            .arg(dir.join("corelb.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start corelb");
        let mut b = Balancer { child, dir };
        let up = common::wait_until(common::START_LIMIT, || {
            lab.has_xdp("lb", "eth0") || b.child.try_wait().ok().flatten().is_some()
        });
        assert!(
            up && b.child.try_wait().ok().flatten().is_none(),
            "corelb did not attach: {}",
            b.log()
        );
        b
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn upstream(weights: &[u32], port: u16, extra: &str) -> String {
    let servers: String = weights
        .iter()
        .enumerate()
        .map(|(i, w)| format!("        server {}:{port} weight={w};\n", xdp_lab::real_addr(i + 1)))
        .collect();
    format!("    upstream reals {{\n        zone reals 64k;\n{extra}{servers}    }}\n")
}

/// `n` connections to the VIP from the client: each one's real server, the connections kept open when `keep`.
fn connect_many(lab: &Lab, n: usize, port: u16) -> HashMap<String, usize> {
    in_ns(&lab.ns("c"), move || {
        let mut seen = HashMap::new();
        for _ in 0..n {
            let (name, _) = name_of(None, SocketAddrV4::new(VIP, port)).expect("a connection through the VIP");
            *seen.entry(name).or_insert(0) += 1;
        }
        seen
    })
}

fn share(seen: &HashMap<String, usize>, name: &str) -> f64 {
    let total: usize = seen.values().sum();
    *seen.get(name).unwrap_or(&0) as f64 / total as f64
}

#[test]
fn direct_return_weights_and_replies_bypass_the_balancer() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("dr", Return::Direct, 80);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0 mode=dr;\n        proxy_pass reals;\n    }}",
        upstream(&[3, 2, 1], 80, "")
    );
    let b = Balancer::start(&lab, "dr", &stream);
    // the balancer knows the real servers' MAC addresses once it asked (its first sync)
    assert!(common::wait_until(Duration::from_secs(10), || {
        in_ns(&lab.ns("c"), || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    }));
    let (lb_in0, _) = lab.packets("sw", "p-lb").swap();
    let (c_rx0, c_tx0) = lab.packets("c", "eth0");
    let seen = connect_many(&lab, 3000, 80);
    let (lb_in1, _) = lab.packets("sw", "p-lb").swap();
    let (c_rx1, c_tx1) = lab.packets("c", "eth0");
    for (name, want) in [("r1", 0.5), ("r2", 1.0 / 3.0), ("r3", 1.0 / 6.0)] {
        assert!(
            (share(&seen, name) - want).abs() < 0.02,
            "{seen:?}: {name} off its weight ({})",
            b.log()
        );
    }
    // p-lb's tx is what the bridge sent the balancer: the client's packets only, never the replies
    let (to_lb, sent, got) = (lb_in1 - lb_in0, c_tx1 - c_tx0, c_rx1 - c_rx0);
    assert!(got >= 3000 * 2, "the client got {got} packets");
    assert!(
        to_lb <= sent + 50,
        "the balancer saw {to_lb} packets for the client's {sent} (replies {got})"
    );
}

trait Swap {
    fn swap(self) -> (u64, u64);
}

impl Swap for (u64, u64) {
    /// A bridge port's (tx, rx): what it sent the device behind it first.
    fn swap(self) -> (u64, u64) {
        (self.1, self.0)
    }
}
