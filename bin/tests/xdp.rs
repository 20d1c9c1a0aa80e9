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
        // the API and /metrics on the balancer's loopback (its own namespace)
        let conf = format!(
            "error_log {dir}/error.log info;\npid {dir}/corelb.pid;\nevents {{}}\nstream {{\n{stream}\n}}\n\
             http {{\n    server {{\n        listen 127.0.0.1:{ADMIN};\n        location /api {{ api write=on; }}\n        \
             location = /metrics {{ metrics; }}\n    }}\n}}\n",
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

/// The balancer's API and metrics port (on its namespace's loopback).
const ADMIN: u16 = 8081;

/// GET `path` from the balancer's admin server.
fn admin_get(lab: &Lab, path: &'static str) -> String {
    in_ns(&lab.ns("lb"), move || common::get(ADMIN, path))
}

/// The `corelb_xdp_real_NAME_total` series of `/metrics`, by server.
fn xdp_series(metrics: &str, name: &str) -> HashMap<String, u64> {
    let prefix = format!("corelb_xdp_real_{name}_total{{server=\"");
    metrics
        .lines()
        .filter_map(|l| {
            let (server, value) = l.strip_prefix(&prefix)?.split_once("\"} ")?;
            Some((server.to_string(), value.parse().ok()?))
        })
        .collect()
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
    // the program's counters per real server, in /metrics and the API
    let mut flows = HashMap::new();
    let counted = common::wait_until(Duration::from_secs(5), || {
        flows = xdp_series(&admin_get(&lab, "/metrics"), "flows");
        flows.values().sum::<u64>() >= 3000
    });
    assert!(counted, "{flows:?}");
    let r1 = format!("{}:80", xdp_lab::real_addr(1));
    let metrics = admin_get(&lab, "/metrics");
    let packets = xdp_series(&metrics, "packets");
    assert!(packets[&r1] > flows[&r1] && flows[&r1] >= 1500, "{packets:?} {flows:?}");
    let api: serde_json::Value = serde_json::from_str(&admin_get(&lab, "/api/9/stream/xdp")).expect("the API's JSON");
    assert!(api[&r1]["flows"].as_u64().is_some_and(|n| n >= 1500), "{api}");
    assert!(api[&r1]["bytes"].as_u64().is_some_and(|n| n > 0), "{api}");
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

#[test]
fn a_killed_real_server_is_taken_out_and_other_flows_go_on() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("hc", Return::Direct, 80);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n        \
         health_check interval=500ms fails=1 passes=1;\n    }}",
        upstream(&[1, 1, 1], 80, "")
    );
    let b = Balancer::start(&lab, "hc", &stream);
    let c = lab.ns("c");
    assert!(common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    }));
    // 30 established flows, then r2 dies
    let open = in_ns(&c, || {
        (0..30)
            .map(|_| name_of(None, SocketAddrV4::new(VIP, 80)).expect("a flow"))
            .collect::<Vec<_>>()
    });
    lab.reals[1].stop();
    let killed = std::time::Instant::now();
    // taken out: 60 new connections in a row all reach a live server
    let out = common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || {
            (0..60).all(|_| name_of(None, SocketAddrV4::new(VIP, 80)).is_ok_and(|(n, _)| n != "r2"))
        })
    });
    assert!(out, "r2 was not taken out: {}", b.log());
    assert!(
        killed.elapsed() < Duration::from_secs(8),
        "taken out after {:?}",
        killed.elapsed()
    );
    let seen = connect_many(&lab, 600, 80);
    assert_eq!(seen.get("r2"), None, "{seen:?}");
    assert!(
        seen.get("r1").is_some_and(|&n| n > 200) && seen.get("r3").is_some_and(|&n| n > 200),
        "{seen:?}"
    );
    // the flows on r1 and r3 still answer
    let alive = open.into_iter().filter(|(n, _)| n != "r2").collect::<Vec<_>>();
    assert!(!alive.is_empty());
    for (name, mut s) in alive {
        use std::io::{Read, Write};
        s.write_all(b"ping").expect("write on an established flow");
        let mut got = [0u8; 4];
        s.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("a flow on {name} broke: {e}"));
        assert_eq!(&got, b"ping");
    }
}

#[test]
fn the_kernel_sends_each_flow_where_the_maglev_table_says() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("mg", Return::Direct, 80);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }}",
        upstream(&[2, 1, 1], 80, "        hash $remote_addr$remote_port maglev;\n")
    );
    let b = Balancer::start(&lab, "mg", &stream);
    use corelb_engine::config::model::XdpScheduler;
    use corelb_engine::l4::table::{build, Candidate};
    let reals: Vec<Candidate> = [2, 1, 1]
        .iter()
        .enumerate()
        .map(|(i, &weight)| Candidate {
            addr: SocketAddrV4::new(xdp_lab::real_addr(i + 1), 80),
            weight,
            live: true,
        })
        .collect();
    let table = build(XdpScheduler::Maglev { source_only: false }, &reals);
    let c = lab.ns("c");
    assert!(common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    }));
    let got = in_ns(&c, || {
        (0..300u16)
            .map(|i| {
                let port = 20_000 + i;
                let from = SocketAddrV4::new(xdp_lab::CLIENT, port);
                (port, name_of(Some(from), SocketAddrV4::new(VIP, 80)).map(|(n, _)| n))
            })
            .collect::<Vec<_>>()
    });
    for (port, name) in got {
        let flow = corelb_xdp::hash::Flow {
            client: SocketAddrV4::new(xdp_lab::CLIENT, port),
            vip: SocketAddrV4::new(VIP, 80),
            udp: false,
        };
        let slot = corelb_xdp::hash::flow_slot(&flow, 0, table.len() as u32) as usize;
        let want = format!("r{}", table[slot] + 1);
        assert_eq!(name.expect("a connection"), want, "port {port} ({})", b.log());
    }
}

#[test]
fn nat_rewrites_both_ways() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("nat", Return::ThroughBalancer, 8080);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0 mode=nat;\n        proxy_pass reals;\n    }}\n    \
         server {{\n        listen 10.218.1.100:53 xdp=eth0 mode=nat udp;\n        proxy_pass reals;\n    }}",
        upstream(&[1, 1, 1], 8080, "")
    );
    let b = Balancer::start(&lab, "nat", &stream);
    let c = lab.ns("c");
    let first = common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    });
    assert!(first, "no NAT connection: {}", b.log());
    let seen = connect_many(&lab, 300, 80);
    for r in ["r1", "r2", "r3"] {
        assert!(seen.get(r).is_some_and(|&n| n >= 90), "{seen:?}");
    }
    let echoed = in_ns(&c, || {
        use std::io::{Read, Write};
        let (_, mut s) = name_of(None, SocketAddrV4::new(VIP, 80)).expect("a connection");
        s.write_all(b"nat!").expect("write");
        let mut got = [0u8; 4];
        s.read_exact(&mut got).expect("the echo through the balancer");
        got
    });
    assert_eq!(&echoed, b"nat!");
    // UDP: VIP:53 to the real servers' 8080 and the answers back from VIP:53 (checksums rewritten: the client's
    // kernel checks them)
    let answers = in_ns(&c, || {
        (0..90)
            .filter_map(|_| {
                let s = std::net::UdpSocket::bind("10.218.1.2:0").expect("bind");
                s.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
                s.send_to(b"q", SocketAddrV4::new(VIP, 53)).expect("send");
                let mut buf = [0u8; 64];
                let (n, from) = s.recv_from(&mut buf).ok()?;
                let vip = std::net::SocketAddr::V4(SocketAddrV4::new(VIP, 53));
                (from == vip).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(answers.len(), 90, "{answers:?}");
    for r in ["r1", "r2", "r3"] {
        assert!(answers.iter().filter(|a| *a == r).count() >= 20, "{answers:?}");
    }
}

#[test]
fn udp_flows_are_balanced_and_stick() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("udp", Return::Direct, 53);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:53 xdp=eth0 udp;\n        proxy_pass reals;\n    }}\n    \
         server {{\n        listen 10.218.1.100:81;\n        return \"lb\\n\";\n    }}",
        upstream(&[1, 1, 1], 53, "")
    );
    let b = Balancer::start(&lab, "udp", &stream);
    let c = lab.ns("c");
    let ask = |s: &std::net::UdpSocket| -> Option<String> {
        s.send_to(b"q", SocketAddrV4::new(VIP, 53)).ok()?;
        let mut buf = [0u8; 64];
        let (n, from) = s.recv_from(&mut buf).ok()?;
        (from == std::net::SocketAddr::V4(SocketAddrV4::new(VIP, 53)))
            .then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    let ready = common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, move || {
            let s = std::net::UdpSocket::bind("10.218.1.2:0").expect("bind");
            s.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
            ask(&s).is_some()
        })
    });
    assert!(ready, "no UDP answer: {}", b.log());
    let (seen, sticky) = in_ns(&c, move || {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut sticky = true;
        for _ in 0..300 {
            let s = std::net::UdpSocket::bind("10.218.1.2:0").expect("bind");
            s.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
            let first = ask(&s).expect("an answer");
            for _ in 0..3 {
                sticky &= ask(&s).as_deref() == Some(first.as_str());
            }
            *seen.entry(first).or_insert(0) += 1;
        }
        (seen, sticky)
    });
    assert!(sticky, "a UDP flow changed real server");
    for r in ["r1", "r2", "r3"] {
        assert!(seen.get(r).is_some_and(|&n| n >= 90), "{seen:?}");
    }
    // not the program's, so the balancer's own kernel's: a TCP port of the VIP it does not serve (corelb's
    // user-space stream server there), and a datagram in fragments (4,000 bytes over a 1,500-byte MTU)
    let (name, _) = in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 81))).expect("the user-space server");
    assert_eq!(name, "lb");
    let own = in_ns(&lab.ns("lb"), || {
        let s = std::net::UdpSocket::bind(SocketAddrV4::new(VIP, 53)).expect("the balancer's own socket");
        s.set_read_timeout(Some(Duration::from_secs(3))).expect("timeout");
        s
    });
    in_ns(&c, || {
        let s = std::net::UdpSocket::bind("10.218.1.2:0").expect("bind");
        s.send_to(&[7u8; 4000], SocketAddrV4::new(VIP, 53)).expect("send");
    });
    let mut buf = [0u8; 8192];
    let (n, _) = own
        .recv_from(&mut buf)
        .expect("the fragmented datagram, whole, on the balancer");
    assert_eq!(n, 4000);
}

#[test]
fn no_program_is_left_on_the_device_after_kill_9() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("k9", Return::Direct, 80);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }}",
        upstream(&[1], 80, "")
    );
    let mut b = Balancer::start(&lab, "k9", &stream);
    assert!(lab.has_xdp("lb", "eth0"));
    b.child.kill().expect("kill -9");
    let _ = b.child.wait();
    assert!(common::wait_until(Duration::from_secs(10), || !lab.has_xdp("lb", "eth0")));
    // and a new balancer attaches again
    let again = Balancer::start(&lab, "k9b", &stream);
    assert!(lab.has_xdp("lb", "eth0"), "{}", again.log());
}

/// Sends `method path` with a JSON `body` to the balancer's API; the status line.
fn admin_send(lab: &Lab, method: &'static str, path: &'static str, body: &'static str) -> String {
    in_ns(&lab.ns("lb"), move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", ADMIN)).expect("the API");
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.lines().next().unwrap_or_default().to_string()
    })
}

/// Writes `ping` on each flow and reads it back: every flow still goes to its real server.
fn all_echo(flows: Vec<(String, std::net::TcpStream)>) -> Vec<(String, std::net::TcpStream)> {
    use std::io::{Read, Write};
    for (name, s) in &flows {
        let mut s = s;
        s.write_all(b"ping").expect("write on an established flow");
        let mut got = [0u8; 4];
        s.read_exact(&mut got)
            .unwrap_or_else(|e| panic!("a flow on {name} broke: {e}"));
        assert_eq!(&got, b"ping");
    }
    flows
}

fn xdp_prog_id(lab: &Lab) -> u64 {
    let out = Command::new("ip")
        .args(["-n", &lab.ns("lb"), "-j", "link", "show", "eth0"])
        .output()
        .expect("ip link");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v[0]["xdp"]["prog"]["id"].as_u64().unwrap_or(0)
}

#[test]
fn api_down_and_reload_change_the_maps_and_keep_established_flows() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("rl", Return::Direct, 80);
    let server = "    server {\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }";
    let stream = format!("{}{server}", upstream(&[1, 1, 1], 80, ""));
    let b = Balancer::start(&lab, "rl", &stream);
    let c = lab.ns("c");
    assert!(common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    }));
    let open = in_ns(&c, || {
        (0..30)
            .map(|_| name_of(None, SocketAddrV4::new(VIP, 80)).expect("a flow"))
            .collect::<Vec<_>>()
    });
    assert!(open.iter().any(|(n, _)| n == "r1"));
    // the API takes r1 (id 0) down: no new flow to it, its established flows go on
    let status = admin_send(
        &lab,
        "PATCH",
        "/api/9/stream/upstreams/reals/servers/0",
        r#"{"down":true}"#,
    );
    assert!(status.contains(" 200 "), "{status}");
    let out = common::wait_until(Duration::from_secs(5), || {
        let seen = connect_many(&lab, 60, 80);
        !seen.contains_key("r1")
    });
    assert!(out, "r1 still takes new flows: {}", b.log());
    let open = all_echo(open);
    // a reload to r2 and r3 with other weights: the same program (its connection table kept), every flow goes on
    let prog = xdp_prog_id(&lab);
    let conf_path = b.dir.join("corelb.conf");
    let conf = std::fs::read_to_string(&conf_path).expect("the config");
    let next = conf.replace(
        &upstream(&[1, 1, 1], 80, ""),
        &upstream(&[0, 3, 1], 80, "").replace(&format!("        server {}:80 weight=0;\n", xdp_lab::real_addr(1)), ""),
    );
    assert_ne!(next, conf);
    std::fs::write(&conf_path, next).expect("write the config");
    let pid = std::fs::read_to_string(b.dir.join("corelb.pid")).expect("the pid file");
    common::signal(pid.trim().parse().expect("a pid"), "HUP");
    assert!(
        common::wait_until(Duration::from_secs(10), || b.log().contains("generation 3 serves")),
        "no reload: {}",
        b.log()
    );
    assert_eq!(xdp_prog_id(&lab), prog, "the program was replaced");
    all_echo(open);
    let seen = connect_many(&lab, 400, 80);
    assert_eq!(seen.get("r1"), None, "{seen:?}");
    assert!((share(&seen, "r2") - 0.75).abs() < 0.05, "{seen:?}");
}

#[test]
fn a_device_without_native_xdp_runs_generic_mode_with_a_warning() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("gen", Return::Direct, 80);
    // a bridge has no native XDP
    xdp_lab::ip(&["-n", &lab.ns("lb"), "link", "add", "br9", "type", "bridge"]);
    xdp_lab::ip(&["-n", &lab.ns("lb"), "link", "set", "br9", "up"]);
    let off = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.ns("lb"),
            "sysctl",
            "-qw",
            "net.ipv4.conf.br9.forwarding=0",
        ])
        .status()
        .expect("sysctl");
    assert!(off.success());
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }}\n    \
         server {{\n        listen 10.218.9.100:80 xdp=br9 mode=nat;\n        proxy_pass reals;\n    }}",
        upstream(&[1], 80, "")
    );
    let b = Balancer::start(&lab, "gen", &stream);
    let want = "[warn] device \"br9\" has no native XDP: the XDP program runs in generic mode";
    assert!(
        common::wait_until(Duration::from_secs(5), || b.log().contains(want)),
        "{}",
        b.log()
    );
    assert!(!b.log().contains("\"eth0\" has no native"), "{}", b.log());
    // NAT where the device does not forward: said once
    let want = "[warn] \"mode=nat\" on device \"br9\" needs forwarding (net.ipv4.ip_forward=1)";
    assert_eq!(b.log().matches(want).count(), 1, "{}", b.log());
}

#[test]
fn least_conn_sends_new_flows_to_the_fewest_active() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("lc", Return::Direct, 80);
    let stream = format!(
        "{}    server {{\n        listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }}",
        upstream(&[1, 1, 2], 80, "        least_conn;\n")
    );
    let b = Balancer::start(&lab, "lc", &stream);
    let c = lab.ns("c");
    assert!(common::wait_until(Duration::from_secs(10), || {
        in_ns(&c, || name_of(None, SocketAddrV4::new(VIP, 80)).is_ok())
    }));
    let (first, after) = in_ns(&c, || {
        // 40 flows kept open: r3 (weight 2) holds twice as many as r1 and r2
        let open: Vec<_> = (0..40)
            .map(|_| name_of(None, SocketAddrV4::new(VIP, 80)).expect("a flow"))
            .collect();
        let mut first: HashMap<String, usize> = HashMap::new();
        for (n, _) in &open {
            *first.entry(n.clone()).or_insert(0) += 1;
        }
        // r1's flows end (the client's FIN): the next new flows go to r1 until it is even again
        let (gone, kept): (Vec<_>, Vec<_>) = open.into_iter().partition(|(n, _)| n == "r1");
        let ended = gone.len();
        drop(gone);
        let after: Vec<String> = (0..ended - 1)
            .map(|_| name_of(None, SocketAddrV4::new(VIP, 80)).expect("a flow").0)
            .collect();
        drop(kept);
        (first, after)
    });
    assert_eq!(
        (first["r1"], first["r2"], first["r3"]),
        (10, 10, 20),
        "{first:?} ({})",
        b.log()
    );
    assert!(after.iter().all(|n| n == "r1"), "{after:?}");
}

#[test]
fn a_device_with_another_program_is_refused_at_start() {
    if !lab_or_skip(1) {
        return;
    }
    let _one = LABS.lock().unwrap_or_else(PoisonError::into_inner);
    let lab = Lab::new("busy", Return::Direct, 80);
    // another program on the balancer's device (attached through a link of this test process)
    let other = in_ns(&lab.ns("lb"), || {
        let mut p = corelb_xdp::DataPath::load().expect("the program loads");
        p.attach("eth0").expect("attached");
        p
    });
    let dir = common::temp_dir("xdp", "busy");
    let conf = format!(
        "error_log {dir}/error.log info;\nevents {{}}\nstream {{\n{}    server {{\n        \
         listen 10.218.1.100:80 xdp=eth0;\n        proxy_pass reals;\n    }}\n}}\n",
        upstream(&[1], 80, ""),
        dir = dir.display()
    );
    std::fs::write(dir.join("corelb.conf"), conf).expect("write the config");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.ns("lb"), env!("CARGO_BIN_EXE_corelb"), "-c"])
        .arg(dir.join("corelb.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start corelb");
    let status = common::wait_exit(&mut child, common::START_LIMIT);
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{log}");
    assert!(
        log.contains("[emerg] the XDP program could not be attached to \"eth0\"")
            && log.contains("another XDP program is attached to the device"),
        "{log}"
    );
    drop(other);
    assert!(common::wait_until(Duration::from_secs(5), || !lab.has_xdp("lb", "eth0")));
}
