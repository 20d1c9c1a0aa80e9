//! stream over UDP (`listen ... udp`) end to end on both runtimes, with real UDP sockets on loopback: sessions
//! balanced over two backends, a dead peer's ICMP error marking it failed (nginx: no next peer for that datagram),
//! `return` as one datagram, `proxy_requests` starting a new session after N datagrams, and the session's access
//! log line (`$protocol` UDP).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::{dead_addr, glommio_usable, Proxy};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-stream-udp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

/// A UDP port of `ip` free now (the proxy binds it next). Each runtime's test has a loopback address of its own,
/// where no other socket of the test process binds, so a port released here is not taken meanwhile.
fn udp_addr(ip: &str) -> SocketAddr {
    let s = UdpSocket::bind((ip, 0)).expect("bind");
    s.local_addr().expect("addr")
}

/// A UDP backend answering each datagram with `NAME SENDER_PORT PAYLOAD`.
fn backend(name: &'static str) -> SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind backend");
    let addr = s.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            let payload = String::from_utf8_lossy(&buf[..n]).into_owned();
            let _ = s.send_to(format!("{name} {} {payload}", from.port()).as_bytes(), from);
        }
    });
    addr
}

/// A client socket connected to `to`.
fn client(to: SocketAddr) -> UdpSocket {
    let c = UdpSocket::bind("127.0.0.1:0").expect("client");
    c.connect(to).expect("connect");
    c
}

/// Sends `data` on `c` and waits up to `wait` for an answer.
fn ask(c: &UdpSocket, data: &str, wait: Duration) -> Option<String> {
    c.set_read_timeout(Some(wait)).expect("timeout");
    c.send(data.as_bytes()).expect("send");
    let mut buf = [0u8; 2048];
    let end = Instant::now() + wait;
    loop {
        match c.recv(&mut buf) {
            Ok(n) => return Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            // a signal for another thread of the test process
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted && Instant::now() < end => {}
            Err(_) => return None,
        }
    }
}

fn udp<R: Runtime>(ip: &str) {
    let d = dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    let (a, b) = (backend("a"), backend("b"));
    // a port no UDP socket holds: a datagram to it comes back as ICMP port unreachable
    let dead = dead_addr();
    let (two, failing, ret, requests) = (udp_addr(ip), udp_addr(ip), udp_addr(ip), udp_addr(ip));
    let text = format!(
        r#"events {{}}
stream {{
  log_format u '$protocol $status $bytes_received $bytes_sent $upstream_addr';
  proxy_timeout 1s;
  proxy_responses 1;
  upstream two {{ server {a}; server {b}; }}
  upstream failing {{ server {dead}; server {a}; }}
  server {{ listen {two} udp; proxy_pass two; access_log {d}/u.log u; }}
  server {{ listen {failing} udp; proxy_pass failing; }}
  server {{ listen {ret} udp; return "hi $remote_port $protocol"; }}
  server {{ listen {requests} udp; proxy_pass {a}; proxy_requests 2; proxy_responses 3; }}
}}
"#,
        d = d.display()
    );
    let config = corelb_engine::config::parse_str(&text, &d.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let long = Duration::from_secs(5);
    // each client a session; round robin over the two
    let mut names = Vec::new();
    for i in 0..10 {
        let got = ask(&client(two), &format!("q{i}"), long).expect("an answer");
        let name = got.split(' ').next().unwrap_or_default().to_string();
        assert!(got.ends_with(&format!(" q{i}")), "{got}");
        names.push(name);
    }
    let count = |n: &str| names.iter().filter(|x| *x == n).count();
    assert_eq!((count("a"), count("b")), (5, 5), "{names:?}");
    // the dead peer's ICMP error: no answer for that datagram, the peer marked failed, the rest go to `a`
    let first = ask(&client(failing), "x", Duration::from_millis(500));
    assert_eq!(first, None, "no next peer for a datagram sent");
    for _ in 0..4 {
        let got = ask(&client(failing), "y", long).expect("an answer from the live peer");
        assert!(got.starts_with("a "), "{got}");
    }
    // return: one datagram with the value
    let c = client(ret);
    let port = c.local_addr().expect("addr").port();
    assert_eq!(ask(&c, "", long).as_deref(), Some(format!("hi {port} UDP").as_str()));
    // proxy_requests 2: the first two datagrams share a session (one upstream socket), the third starts another
    let c = client(requests);
    let sender = |s: &str| s.split(' ').nth(1).unwrap_or_default().to_string();
    let s1 = sender(&ask(&c, "1", long).expect("answer 1"));
    let s2 = sender(&ask(&c, "2", long).expect("answer 2"));
    let s3 = sender(&ask(&c, "3", long).expect("answer 3"));
    assert_eq!(s1, s2, "one session for the first two datagrams");
    assert_ne!(s2, s3, "a new session after proxy_requests");
    // the log lines of the ten sessions of `two`
    let log = d.join("u.log");
    let end = Instant::now() + long;
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 10 || Instant::now() > end {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(proxy);
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 10, "{lines:?}");
    for l in &lines {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.first().copied(), Some("UDP"), "{l}");
        assert_eq!(f.get(1).copied(), Some("200"), "{l}");
        assert_eq!(f.get(2).copied(), Some("2"), "bytes from the client: {l}");
        let peer = f.get(4).copied().unwrap_or_default();
        assert!(peer == a.to_string() || peer == b.to_string(), "{l}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tokio_proxies_udp_sessions() {
    udp::<Tokio>("127.0.0.21");
}

#[test]
fn glommio_proxies_udp_sessions() {
    if glommio_usable() {
        udp::<Glommio>("127.0.0.22");
    }
}
