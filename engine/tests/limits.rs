//! Client limits through a running proxy, on both runtimes: `large_client_header_buffers` (414 and nginx's "Request
//! Header Or Cookie Too Large" exactly where nginx 1.22 gives up, per server), `client_body_timeout` and
//! `send_timeout` between two reads or writes (not for the whole transfer), `worker_connections` leaving the next
//! client in the backlog, and locations matched on the normalized path.

mod support;

use corelb_engine::config::model::*;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::recorder::Recorder;
use support::*;

fn on_both(test: fn(&dyn Fn(Config) -> Proxy)) {
    test(&|c| Proxy::start::<Tokio>(c, 1));
    if glommio_usable() {
        test(&|c| Proxy::start::<Glommio>(c, 1));
    }
}

fn ok_config(listen: SocketAddr) -> Config {
    http_config(
        listen,
        vec![],
        vec![return_location(LocationMatch::Prefix("/".into()), 200, Some("ok"))],
    )
}

/// Sends `raw` on a fresh connection and reads one answer.
fn answer(addr: SocketAddr, raw: &[u8]) -> Option<Response> {
    let mut c = Client::connect(addr);
    c.send(raw);
    c.read_response()
}

fn request_line_of(len: usize) -> Vec<u8> {
    let fill = len - "GET / HTTP/1.1\r\n".len();
    [
        b"GET /".as_slice(),
        &vec![b'a'; fill],
        b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    ]
    .concat()
}

fn header_line_of(len: usize) -> Vec<u8> {
    let fill = len - "X: \r\n".len();
    [
        b"GET / HTTP/1.1\r\nHost: a\r\nX: ".as_slice(),
        &vec![b'x'; fill],
        b"\r\nConnection: close\r\n\r\n",
    ]
    .concat()
}

#[test]
fn large_client_header_buffers_as_nginx() {
    on_both(|start| {
        let listen = free_addr();
        let mut config = ok_config(listen);
        // a second server on the same port, named "small", with `large_client_header_buffers 2 1k`
        let mut small = config.http.as_ref().unwrap().servers[0].clone();
        small.server_names = vec!["small".into()];
        small.client.large_client_header_buffers = HeaderBuffers { number: 2, size: 1024 };
        config.http.as_mut().unwrap().servers.push(small);
        let _p = start(config);
        // the default `4 8k`: lines of 8192 bytes with their CRLF fit, 8193 do not (measured on nginx 1.22.1)
        assert_eq!(answer(listen, &request_line_of(8192)).map(|r| r.status), Some(200));
        assert_eq!(answer(listen, &request_line_of(8193)).map(|r| r.status), Some(414));
        assert_eq!(answer(listen, &header_line_of(8192)).map(|r| r.status), Some(200));
        let r = answer(listen, &header_line_of(8193)).expect("an answer");
        assert_eq!(r.status, 400);
        assert!(
            r.text()
                .contains("<title>400 Request Header Or Cookie Too Large</title>"),
            "{}",
            r.text()
        );
        // five 7 KB headers do not fit four 8 KB buffers
        let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..5 {
            many.extend_from_slice(format!("X-{i}: {}\r\n", "x".repeat(7000)).as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(answer(listen, &many).map(|r| r.status), Some(400));
        // the server named by Host has smaller buffers: a 1.5 KB header after its Host is too large there
        let big = format!("GET / HTTP/1.1\r\nHost: small\r\nX: {}\r\n\r\n", "x".repeat(1500));
        assert_eq!(answer(listen, big.as_bytes()).map(|r| r.status), Some(400));
        let fits = format!(
            "GET / HTTP/1.1\r\nHost: small\r\nX: {}\r\nConnection: close\r\n\r\n",
            "x".repeat(900)
        );
        assert_eq!(answer(listen, fits.as_bytes()).map(|r| r.status), Some(200));
    });
}

#[test]
fn client_body_timeout_is_between_reads() {
    on_both(|start| {
        let backend = Recorder::start();
        let listen = free_addr();
        let mut loc = proxy_location("/", 0, HttpProxyConf::default());
        loc.client.client_body_timeout = Duration::from_millis(700);
        let config = http_config(listen, vec![upstream("u", vec![server_line(backend.addr)])], vec![loc]);
        let _p = start(config);
        // a body trickling in, one byte every 250 ms for 2.5 s: each read comes in time
        let mut c = Client::connect(listen);
        c.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nConnection: close\r\n\r\n");
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(250));
            c.send(b"x");
        }
        let r = c.read_response().expect("an answer");
        assert_eq!(r.status, 200);
        // a body that stops: 408 after the timeout, and the connection closes
        let mut c = Client::connect(listen);
        c.send(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
        let started = Instant::now();
        let r = c.read_response().expect("an answer");
        let took = started.elapsed();
        assert_eq!(r.status, 408, "{}", r.head);
        assert!(
            took >= Duration::from_millis(650) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert!(c.closed());
    });
}

/// A config answering `/big` with a `len`-byte body.
fn big_answer_config(listen: SocketAddr, len: usize, send_timeout: Duration) -> Config {
    let mut loc = return_location(LocationMatch::Prefix("/big".into()), 200, Some(&"b".repeat(len)));
    loc.client.send_timeout = send_timeout;
    http_config(listen, vec![], vec![loc])
}

#[test]
fn send_timeout_is_between_writes() {
    on_both(|start| {
        let listen = free_addr();
        let len = 8 << 20;
        let _p = start(big_answer_config(listen, len, Duration::from_millis(700)));
        // a slow but steady reader (a pause every 512 KB) takes more than two send_timeouts in all and gets
        // everything
        let mut c = TcpStream::connect(listen).expect("connect");
        c.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .expect("send");
        let (mut got, mut since_pause, mut buf) = (0usize, 0usize, vec![0u8; 256 * 1024]);
        let started = Instant::now();
        loop {
            let n = read_retrying(&mut c, &mut buf).expect("read");
            if n == 0 {
                break;
            }
            got += n;
            since_pause += n;
            if since_pause >= 512 * 1024 {
                since_pause = 0;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        assert!(got > len, "the whole answer: {got}");
        assert!(
            started.elapsed() > Duration::from_millis(1400),
            "{:?}",
            started.elapsed()
        );
        // a reader that stops: the proxy closes after send_timeout
        let mut c = TcpStream::connect(listen).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        c.write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n").expect("send");
        std::thread::sleep(Duration::from_millis(2500));
        let mut got = 0usize;
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        assert!(got < len, "closed before the end: {got} of {len}");
    });
}

#[test]
fn the_client_over_worker_connections_waits_in_the_backlog() {
    on_both(|start| {
        let listen = free_addr();
        let mut config = ok_config(listen);
        config.main.worker_connections = 2;
        let _p = start(config);
        // two clients hold the shard's two connections with half a head each
        let mut holders: Vec<Client> = (0..2).map(|_| Client::connect(listen)).collect();
        for h in &mut holders {
            h.send(b"GET / HTTP/1.1\r\n");
        }
        std::thread::sleep(Duration::from_millis(200));
        // the third connects (the kernel's backlog) but is not served while both are open
        let mut third = Client::connect(listen);
        third.send(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        third
            .conn
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let mut byte = [0u8; 1];
        // (retried on EINTR: glommio's executors signal threads of the process)
        let early = read_retrying(&mut third.conn, &mut byte);
        assert!(
            matches!(&early, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
            "no answer and no reset yet: {early:?}"
        );
        // one holder leaves: the third is accepted and served
        drop(holders.pop());
        third
            .conn
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let r = third.read_response().expect("served once a connection ended");
        assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    });
}

#[test]
fn locations_match_the_normalized_path() {
    on_both(|start| {
        let backend = Recorder::start();
        let listen = free_addr();
        let mut replaced = proxy_location("/p/", 0, HttpProxyConf::default());
        if let Some(pass) = replaced.proxy_pass.as_mut() {
            pass.uri = Some("/q/".into());
        }
        let locations = vec![
            return_location(LocationMatch::Prefix("/".into()), 200, Some("root")),
            return_location(LocationMatch::Prefix("/admin".into()), 200, Some("admin")),
            return_location(LocationMatch::Prefix("/a".into()), 200, Some("a")),
            return_location(LocationMatch::Exact("/exact".into()), 200, Some("exact")),
            replaced,
            proxy_location("/raw/", 0, HttpProxyConf::default()),
        ];
        let config = http_config(listen, vec![upstream("u", vec![server_line(backend.addr)])], locations);
        let _p = start(config);
        // the answers of nginx 1.22.1 for the same locations
        for (path, text) in [
            ("/a/../admin", "admin"),
            ("/admin/../a", "a"),
            ("//admin", "admin"),
            ("/%61dmin", "admin"),
            ("/a%2f..%2fadmin", "admin"),
            ("/x/%2e%2e/admin", "admin"),
            ("/a/..", "root"),
            ("/ex%61ct", "exact"),
            ("/exact/.", "root"),
            ("/exact?x", "exact"),
        ] {
            let r = get(listen, path).expect("an answer");
            assert_eq!((r.status, r.text().as_str()), (200, text), "{path}");
        }
        for path in ["/..", "/a/../..", "/%zz", "/%00"] {
            assert_eq!(get(listen, path).map(|r| r.status), Some(400), "{path}");
        }
        for (path, sent) in [
            ("/p/x/../y%20z?q=1", "/q/y%20z?q=1"),
            ("/p//x", "/q/x"),
            ("/raw//x/../y", "/raw//x/../y"),
        ] {
            let before = backend.requests().len();
            assert_eq!(get(listen, path).map(|r| r.status), Some(200), "{path}");
            let seen = backend.requests();
            let line = seen.get(before).map(|s| s.line.clone()).unwrap_or_default();
            assert!(line.starts_with(&format!("GET {sent} HTTP/")), "{path}: {line}");
        }
    });
}
