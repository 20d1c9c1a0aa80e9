//! A lab of network namespaces for the XDP tests: a client, a balancer and three real servers, each joined by a
//! veth pair to a bridge in a namespace of its own, all made by the test and removed when it ends. Addresses are
//! the lab's own (10.218.1.0/24 for clients, 10.218.2.0/24 for real servers) and exist only inside it: no route
//! leads out. Real servers are threads of the test that entered their namespace (`setns`): each answers a TCP
//! connection with its name and then echoes, and a UDP datagram with its name.
#![allow(dead_code)] // each test uses its part

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const VIP: Ipv4Addr = Ipv4Addr::new(10, 218, 1, 100);
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 218, 1, 2);

/// A real server's address in the lab (`n` from 1).
pub fn real_addr(n: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 218, 2, 10 + n as u8)
}

/// Runs `ip ARGS`, panicking with its output when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sh(ns: &str, cmd: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", cmd])
        .output()
        .expect("run ip netns exec");
    assert!(
        out.status.success(),
        "{ns}: {cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the lab can be built here, or why not.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Some(why) = corelb_xdp::missing() {
        return Some(why.into());
    }
    for tool in ["ip", "ethtool"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("no {tool}"));
        }
    }
    None
}

/// How the real servers route replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Return {
    /// Direct server return: the VIP on their loopback, replies straight to the client subnet.
    Direct,
    /// NAT: replies through the balancer (their default route).
    ThroughBalancer,
}

/// The namespaces of one test.
pub struct Lab {
    pub tag: String,
    pub reals: Vec<RealServer>,
    peer: Option<corelb_xdp::DataPath>,
}

impl Lab {
    /// Namespace `role` of this lab.
    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.tag)
    }

    /// Builds the lab `name` (unique per test) with three real servers listening on `port`.
    pub fn new(name: &str, ret: Return, port: u16) -> Lab {
        let tag = format!("xl{}{name}", std::process::id() % 100_000);
        let mut lab = Lab {
            tag,
            reals: Vec::new(),
            peer: None,
        };
        let sw = lab.ns("sw");
        for role in ["sw", "c", "lb", "r1", "r2", "r3"] {
            let _ = Command::new("ip").args(["netns", "del", &lab.ns(role)]).output();
            ip(&["netns", "add", &lab.ns(role)]);
            ip(&["-n", &lab.ns(role), "link", "set", "lo", "up"]);
        }
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &sw, "link", "set", "br0", "up"]);
        for role in ["c", "lb", "r1", "r2", "r3"] {
            let port_name = format!("p-{role}");
            ip(&[
                "-n",
                &sw,
                "link",
                "add",
                &port_name,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &lab.ns(role),
            ]);
            ip(&["-n", &sw, "link", "set", &port_name, "master", "br0", "up"]);
            ip(&["-n", &lab.ns(role), "link", "set", "eth0", "up"]);
        }
        // XDP_TX on the balancer's veth lands in its peer's XDP ring, which exists while the peer has a program
        // of its own: corelb's, with empty maps, passes everything
        let peer = in_ns(&sw, || {
            let mut p = corelb_xdp::DataPath::load().expect("the program loads");
            p.attach("p-lb").expect("the program attaches to the balancer's peer");
            p
        });
        lab.peer = Some(peer);
        // veth leaves checksums to the receiver (offload), which a frame sent back by XDP no longer tells: the
        // lab's hosts compute theirs, as real NICs deliver them
        for role in ["c", "r1", "r2", "r3"] {
            sh(&lab.ns(role), "ethtool -K eth0 tx off >/dev/null");
        }
        let lb = lab.ns("lb");
        ip(&["-n", &lab.ns("c"), "addr", "add", "10.218.1.2/24", "dev", "eth0"]);
        ip(&["-n", &lab.ns("c"), "route", "add", "default", "via", "10.218.1.1"]);
        ip(&["-n", &lb, "addr", "add", "10.218.1.1/24", "dev", "eth0"]);
        ip(&["-n", &lb, "addr", "add", "10.218.2.1/24", "dev", "eth0"]);
        ip(&["-n", &lb, "addr", "add", "10.218.1.100/32", "dev", "eth0"]);
        sh(&lb, "sysctl -qw net.ipv4.ip_forward=1");
        for n in 1..=3 {
            let r = lab.ns(&format!("r{n}"));
            ip(&["-n", &r, "addr", "add", &format!("{}/24", real_addr(n)), "dev", "eth0"]);
            match ret {
                Return::Direct => {
                    ip(&["-n", &r, "addr", "add", "10.218.1.100/32", "dev", "lo"]);
                    sh(
                        &r,
                        "sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2",
                    );
                    ip(&["-n", &r, "route", "add", "10.218.1.0/24", "dev", "eth0"]);
                }
                Return::ThroughBalancer => ip(&["-n", &r, "route", "add", "default", "via", "10.218.2.1"]),
            }
            let mut udp = vec![SocketAddrV4::new(real_addr(n), port)];
            if ret == Return::Direct {
                udp.push(SocketAddrV4::new(VIP, port));
            }
            lab.reals.push(RealServer::start(&r, &format!("r{n}"), port, &udp));
        }
        lab
    }

    /// Device counters `(rx packets, tx packets)` of `dev` in namespace `role`.
    pub fn packets(&self, role: &str, dev: &str) -> (u64, u64) {
        let out = Command::new("ip")
            .args(["-n", &self.ns(role), "-s", "-j", "link", "show", dev])
            .output()
            .expect("ip -s link");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip's JSON");
        let stats = &v[0]["stats64"];
        (
            stats["rx"]["packets"].as_u64().unwrap_or(0),
            stats["tx"]["packets"].as_u64().unwrap_or(0),
        )
    }

    /// Whether an XDP program is on `dev` in namespace `role`.
    pub fn has_xdp(&self, role: &str, dev: &str) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.ns(role), "-j", "link", "show", dev])
            .output()
            .expect("ip link");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        !v[0]["xdp"].is_null()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for r in &self.reals {
            r.stop();
        }
        self.peer = None;
        for role in ["sw", "c", "lb", "r1", "r2", "r3"] {
            let _ = Command::new("ip").args(["netns", "del", &self.ns(role)]).output();
        }
    }
}

/// Runs `f` on a thread that entered namespace `ns`: its sockets are the namespace's.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        enter(&path);
        f()
    })
    .join()
    .expect("a thread in the namespace")
}

fn enter(path: &str) {
    let f = std::fs::File::open(path).expect("the namespace's file");
    // SAFETY: a valid descriptor of a network namespace; setns changes only the calling thread's namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
}

/// A real server: threads in its namespace answering TCP and UDP.
pub struct RealServer {
    pub name: String,
    stop: Arc<AtomicBool>,
}

impl RealServer {
    fn start(ns: &str, name: &str, port: u16, udp: &[SocketAddrV4]) -> RealServer {
        let stop = Arc::new(AtomicBool::new(false));
        let path = format!("/run/netns/{ns}");
        let (p, n, s) = (path.clone(), name.to_string(), stop.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            enter(&p);
            let l = TcpListener::bind(("0.0.0.0", port)).expect("a real server's listener");
            l.set_nonblocking(true).expect("nonblocking");
            let _ = tx.send(());
            serve_tcp(&l, &n, &s);
        });
        rx.recv().expect("the listener is up");
        for &a in udp {
            let (p, n, s) = (path.clone(), name.to_string(), stop.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                enter(&p);
                let u = UdpSocket::bind(a).expect("a real server's UDP socket");
                u.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
                let _ = tx.send(());
                let mut buf = [0u8; 512];
                while !s.load(Ordering::Relaxed) {
                    if let Ok((_, from)) = u.recv_from(&mut buf) {
                        let _ = u.send_to(n.as_bytes(), from);
                    }
                }
            });
            rx.recv().expect("the UDP socket is up");
        }
        RealServer {
            name: name.to_string(),
            stop,
        }
    }

    /// Stops answering: the listener closes and every connection with it (a killed server).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_tcp(l: &TcpListener, name: &str, stop: &Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((mut c, _)) => {
                let (name, stop) = (name.to_string(), stop.clone());
                std::thread::spawn(move || {
                    let _ = c.set_nonblocking(false);
                    let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
                    let _ = c.write_all(format!("{name}\n").as_bytes());
                    let mut buf = [0u8; 512];
                    while !stop.load(Ordering::Relaxed) {
                        match c.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => {
                                if c.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut => {}
                            Err(_) => return,
                        }
                    }
                    // a killed server's connections end with a reset
                    let _ = socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO));
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Connects to `to` (from `from`, port 0 for any) and reads the real server's name.
pub fn name_of(from: Option<SocketAddrV4>, to: SocketAddrV4) -> std::io::Result<(String, TcpStream)> {
    let s = match from {
        None => TcpStream::connect_timeout(&to.into(), Duration::from_secs(3))?,
        Some(local) => {
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            sock.set_reuse_address(true)?;
            sock.bind(&local.into())?;
            sock.connect_timeout(&to.into(), Duration::from_secs(3))?;
            sock.into()
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    let mut name = Vec::new();
    let mut b = [0u8; 1];
    let mut r = &s;
    while r.read(&mut b)? == 1 && b[0] != b'\n' {
        name.push(b[0]);
    }
    Ok((String::from_utf8_lossy(&name).into_owned(), s))
}
