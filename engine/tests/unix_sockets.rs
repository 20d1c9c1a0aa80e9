//! Unix-domain sockets end to end, on both runtimes: an http client over `listen unix:` proxied to a TCP backend
//! (with nginx's `$remote_addr` `unix:`, empty `$remote_port`, `$server_addr` `unix:PATH`), a TCP client proxied
//! to a unix-socket backend (`server unix:`, `proxy_pass http://unix:PATH:/uri`, keepalive kept, `$upstream_addr`
//! `unix:PATH`, the API's and the metrics' peer `unix:PATH`), the stream module both ways (and `proxy_pass $var`),
//! `allow`/`deny unix:` and `set_real_ip_from unix:`, reloads that add, drop or fail to add a unix listener, and
//! the one socket file the control plane binds for every shard (removed by `runtime::unix::remove`, what the
//! process does for each at exit; bin/tests/unix_socket_file.rs stops a real process).

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::backend::{Backend, Mode};
use support::{free_addr, glommio_usable, Proxy};

/// A fresh directory for one test's sockets.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-unix-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn start<R: Runtime>(text: &str) -> Proxy {
    let config = parse_str(text, Path::new("/etc/corelb/unix.conf")).expect("config");
    Proxy::start::<R>(config, 2)
}

/// Sends `request` on `s` and reads until the proxy closes (every request here says `Connection: close`).
fn exchange(mut s: impl Read + Write, request: &str) -> String {
    s.write_all(request.as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get_unix(path: &Path, uri: &str) -> String {
    let s = UnixStream::connect(path).expect("connect to the unix listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    exchange(
        s,
        &format!("GET {uri} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
    )
}

fn get_tcp(addr: std::net::SocketAddr, uri: &str) -> String {
    let s = TcpStream::connect(addr).expect("connect to the proxy");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    exchange(
        s,
        &format!("GET {uri} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
    )
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// An HTTP/1.1 backend on a unix socket: answers `200 unix-backend URI` keeping the connection, and counts the
/// connections it accepted.
fn unix_backend(path: &Path) -> Arc<AtomicUsize> {
    let l = UnixListener::bind(path).expect("bind the unix backend");
    let accepts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepts);
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let mut w = conn.try_clone().expect("clone");
                let mut r = BufReader::new(conn);
                loop {
                    let mut first = String::new();
                    if r.read_line(&mut first).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut line = String::new();
                    while r.read_line(&mut line).unwrap_or(0) > 2 {
                        line.clear();
                    }
                    let uri = first.split(' ').nth(1).unwrap_or("").to_string();
                    let text = format!("unix-backend {uri}");
                    let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}", text.len());
                    if w.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    accepts
}

/// A stream backend on a unix socket: echoes what it reads, then closes.
fn unix_echo(path: &Path) {
    let l = UnixListener::bind(path).expect("bind the unix echo");
    std::thread::spawn(move || {
        for mut conn in l.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = [0u8; 1024];
                if let Ok(n) = conn.read(&mut buf) {
                    let _ = conn.write_all(&buf[..n]);
                }
            });
        }
    });
}

fn http_client_over_unix<R: Runtime>(name: &str) {
    let dir = temp_dir(name);
    let sock = dir.join("front.sock");
    let ok = Backend::start("tcp-backend", Mode::Ok);
    let text = format!(
        "events {{}}
        http {{
            server {{
                listen unix:{sock};
                location / {{ proxy_pass http://{ok}; proxy_set_header X-Client \"$remote_addr|$remote_port\"; }}
                location /vars {{ return 200 \"[$remote_addr][$remote_port][$server_addr][$server_port][$binary_remote_addr]\"; }}
                location /deny {{ deny unix:; proxy_pass http://{ok}; }}
                location /allow {{ allow unix:; deny all; proxy_pass http://{ok}; }}
                location /real {{
                    set_real_ip_from unix:;
                    real_ip_header X-Real-IP;
                    proxy_pass http://{ok};
                    proxy_set_header X-Client $remote_addr;
                }}
            }}
        }}",
        sock = sock.display(),
        ok = ok.addr,
    );
    let _p = start::<R>(&text);
    let meta = std::fs::metadata(&sock).expect("the socket file");
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
    assert_eq!(mode & 0o777, 0o666, "nginx makes the socket 0666");

    let a = get_unix(&sock, "/");
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    assert_eq!(body(&a), "tcp-backend");
    assert!(ok.last_head().contains("X-Client: unix:|\r\n"), "{}", ok.last_head());

    let a = get_unix(&sock, "/vars");
    let want = format!("[unix:][][unix:{}][][unix:]", sock.display());
    assert_eq!(body(&a), want);

    assert!(get_unix(&sock, "/deny").starts_with("HTTP/1.1 403"));
    assert_eq!(body(&get_unix(&sock, "/allow")), "tcp-backend");

    let s = UnixStream::connect(&sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let a = exchange(
        s,
        "GET /real HTTP/1.1\r\nHost: a\r\nX-Real-IP: 192.0.2.7\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(body(&a), "tcp-backend");
    assert!(
        ok.last_head().contains("X-Client: 192.0.2.7\r\n"),
        "set_real_ip_from unix: trusts a unix client: {}",
        ok.last_head()
    );

    // every shard accepts on the one socket: many connections in a row are all answered
    for _ in 0..20 {
        assert_eq!(body(&get_unix(&sock, "/allow")), "tcp-backend");
    }
    drop(_p);
    // what the process does for each listener at exit (remove_all), for this test's one only: the other tests'
    // sockets live in this process too
    let token = corelb_engine::config::unix_addr::intern(sock.to_str().expect("utf-8")).expect("token");
    corelb_engine::runtime::unix::remove(token);
    assert!(!sock.exists(), "the socket file is removed at exit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http_client_over_unix_tokio() {
    http_client_over_unix::<Tokio>("http-in-tokio");
}

#[test]
fn http_client_over_unix_glommio() {
    if glommio_usable() {
        http_client_over_unix::<Glommio>("http-in-glommio");
    }
}

fn http_to_unix_backend<R: Runtime>(name: &str) {
    let dir = temp_dir(name);
    let back = dir.join("back.sock");
    let accepts = unix_backend(&back);
    let listen = free_addr();
    let text = format!(
        "events {{}}
        http {{
            upstream u {{ zone u 64k; server unix:{back}; keepalive 4; }}
            server {{
                listen {listen};
                location /u {{
                    proxy_pass http://u;
                    proxy_http_version 1.1;
                    proxy_set_header Connection \"\";
                    add_header X-Up $upstream_addr;
                }}
                location /implicit/ {{ proxy_pass http://unix:{back}:/there/; }}
                location /inet {{ deny unix:; proxy_pass http://u; }}
                location /api/ {{ api; }}
                location = /metrics {{ metrics; }}
            }}
        }}",
        back = back.display(),
    );
    let _p = start::<R>(&text);
    let a = get_tcp(listen, "/u");
    assert_eq!(body(&a), "unix-backend /u", "{a}");
    assert_eq!(header(&a, "X-Up"), Some(format!("unix:{}", back.display()).as_str()));
    let b = get_tcp(listen, "/u");
    assert_eq!(body(&b), "unix-backend /u");
    // both requests may land on different shards, each with a pool of its own: at most one connect per shard
    assert!(accepts.load(Ordering::SeqCst) <= 2, "keepalive to a unix peer");
    for _ in 0..6 {
        assert_eq!(body(&get_tcp(listen, "/u")), "unix-backend /u");
    }
    assert!(
        accepts.load(Ordering::SeqCst) <= 2,
        "the pools keep their unix connections"
    );

    let a = get_tcp(listen, "/implicit/x");
    assert_eq!(body(&a), "unix-backend /there/x", "{a}");
    // the API and the metrics name the peer as nginx prints it
    let printed = format!("unix:{}", back.display());
    let api = get_tcp(listen, "/api/9/http/upstreams/u");
    assert!(api.contains(&format!("\"server\":\"{printed}\"")), "{api}");
    let metrics = get_tcp(listen, "/metrics");
    assert!(metrics.contains(&format!("\"{printed}\"")), "{metrics}");
    // a TCP client is no unix one: `deny unix:` does not match it
    assert_eq!(body(&get_tcp(listen, "/inet")), "unix-backend /inet");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http_to_unix_backend_tokio() {
    http_to_unix_backend::<Tokio>("http-out-tokio");
}

#[test]
fn http_to_unix_backend_glommio() {
    if glommio_usable() {
        http_to_unix_backend::<Glommio>("http-out-glommio");
    }
}

fn stream_both_ways<R: Runtime>(name: &str) {
    let dir = temp_dir(name);
    let (front, echo, denied) = (dir.join("front.sock"), dir.join("echo.sock"), dir.join("denied.sock"));
    unix_echo(&echo);
    let (to_echo, to_front, to_denied, to_var) = (free_addr(), free_addr(), free_addr(), free_addr());
    let text = format!(
        "events {{}}
        stream {{
            upstream e {{ server unix:{echo}; }}
            map $server_port $dest {{ default unix:{echo}; }}
            server {{ listen {to_var}; proxy_pass $dest; }}
            server {{ listen {to_echo}; proxy_pass e; }}
            server {{ listen {to_front}; proxy_pass unix:{front}; }}
            server {{ listen {to_denied}; proxy_pass unix:{denied}; }}
            server {{ listen unix:{front}; allow unix:; deny all; return \"[$remote_addr][$remote_port][$server_addr]\"; }}
            server {{ listen unix:{denied}; deny unix:; return no; }}
        }}",
        echo = echo.display(),
        front = front.display(),
        denied = denied.display(),
    );
    let _p = start::<R>(&text);
    let talk = |addr, send: &[u8]| {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        // a `return` server may close before this lands: the answer read is what is checked
        let _ = s.write_all(send);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    assert_eq!(talk(to_echo, b"ping"), "ping", "a TCP client to a unix-socket backend");
    assert_eq!(talk(to_var, b"pong"), "pong", "proxy_pass with variables to unix:PATH");
    assert_eq!(
        talk(to_front, b"x"),
        format!("[unix:][][unix:{}]", front.display()),
        "through a unix listener"
    );
    assert_eq!(talk(to_denied, b"x"), "", "deny unix: closes a unix client's session");
    // a unix client straight to the stream listener (`return` answers at once: nothing is sent, so no write
    // races the close)
    let mut s = UnixStream::connect(&front).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert_eq!(got, format!("[unix:][][unix:{}]", front.display()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stream_both_ways_tokio() {
    stream_both_ways::<Tokio>("stream-tokio");
}

#[test]
fn stream_both_ways_glommio() {
    if glommio_usable() {
        stream_both_ways::<Glommio>("stream-glommio");
    }
}

#[test]
fn refused_by_name() {
    let parse = |text: &str| parse_str(text, Path::new("/etc/corelb/u.conf")).map_err(|e| e.to_string());
    assert_eq!(
        parse("events {}\nstream {\n server { listen unix:/tmp/x.sock udp; return x; }\n}\n").unwrap_err(),
        "[emerg] parameter \"udp\" on \"unix:\" of \"listen\" is not supported by corelb in /etc/corelb/u.conf:3"
    );
    assert_eq!(
        parse("events {}\nhttp {\n server { listen unix:; }\n}\n").unwrap_err(),
        "[emerg] no path in the unix domain socket in \"unix:\" of the \"listen\" directive in /etc/corelb/u.conf:3"
    );
}

fn reloads<R: Runtime>(name: &str) {
    let dir = temp_dir(name);
    let (a, b) = (dir.join("a.sock"), dir.join("b.sock"));
    let (listen, held) = (free_addr(), support::dead_addr());
    let text = |socks: &[&Path], extra: &str| {
        let listens: String = socks.iter().map(|s| format!("listen unix:{};", s.display())).collect();
        format!(
            "events {{}}\nhttp {{ server {{ listen {listen}; {listens} location / {{ return 200 \"$server_addr\"; }} }}\n{extra}}}\n"
        )
    };
    let p = start::<R>(&text(&[&a], ""));
    let config = |t: String| parse_str(&t, Path::new("/etc/corelb/unix.conf")).expect("config");
    let reload = |t: String| {
        let next = config(t);
        p.shared
            .apply(corelb_engine::control::ChangeKind::Reload, move |_| Ok(next))
    };
    assert_eq!(body(&get_unix(&a, "/")), format!("unix:{}", a.display()));

    // a reload adds b: bound by the control plane, accepted on by the shards as they follow
    reload(text(&[&a, &b], "")).expect("reload adding b");
    let answered = support::wait_until(Duration::from_secs(10), || {
        UnixStream::connect(&b).is_ok_and(|s| {
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            body(&exchange(s, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
                == format!("unix:{}", b.display())
        })
    });
    assert!(answered, "b is served after the reload");

    // a refused change (a TCP address another socket holds, after b2's bind) leaves no socket of its own behind
    let b2 = dir.join("b2.sock");
    let refused = reload(text(
        &[&a, &b, &b2],
        &format!("server {{ listen {held}; return 200 x; }}\n"),
    ));
    assert!(refused.is_err(), "a held address fails the change");
    assert!(!b2.exists(), "the refused change's unix socket is gone");
    assert!(b.exists() && a.exists());

    // a reload without b removes b's file; a goes on
    reload(text(&[&a], "")).expect("reload dropping b");
    assert!(!b.exists(), "b's file goes with its listener");
    assert_eq!(body(&get_unix(&a, "/")), format!("unix:{}", a.display()));
    drop(p);
    let token = corelb_engine::config::unix_addr::intern(a.to_str().expect("utf-8")).expect("token");
    corelb_engine::runtime::unix::remove(token);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reloads_tokio() {
    reloads::<Tokio>("reload-tokio");
}

#[test]
fn reloads_glommio() {
    if glommio_usable() {
        reloads::<Glommio>("reload-glommio");
    }
}
