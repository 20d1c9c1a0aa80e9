//! Slowloris: a head trickling in one byte a second is closed at `client_header_timeout` (a limit on the whole
//! head, as nginx's timer, not on each read), and a thousand such clients do not keep a normal client from being
//! served while their heads are pending. Both runtimes; the margins hold on a loaded 2-core machine.

mod support;

use corelb_engine::config::model::*;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::*;

const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The header timeout with a thousand slow clients: far more than opening them takes on a loaded machine, so that
/// they are all still pending when the normal client asks.
const MANY_TIMEOUT: Duration = Duration::from_secs(10);
const SLOW_CLIENTS: usize = 1000;
const HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: slow\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";

fn config(listen: SocketAddr, header_timeout: Duration) -> Config {
    let mut config = http_config(
        listen,
        vec![],
        vec![return_location(LocationMatch::Prefix("/".into()), 200, Some("ok"))],
    );
    config.main.worker_connections = 4 * SLOW_CLIENTS;
    if let Some(s) = config.http.as_mut().and_then(|h| h.servers.first_mut()) {
        s.client.client_header_timeout = header_timeout;
    }
    config
}

/// Raises the soft open-file limit so that both ends of every slow connection fit in this process.
fn raise_fd_limit(need: u64) {
    // SAFETY: getrlimit/setrlimit on a plain struct owned here.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < need {
            lim.rlim_cur = need.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Whether the proxy has closed `c` (end of stream or reset; a read timeout, or nothing to read on a non-blocking
/// socket, means it is still open).
fn closed_by_proxy(c: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match c.read(&mut byte) {
        Ok(0) => true,
        Err(e) => !matches!(
            e.kind(),
            ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
        ),
        Ok(_) => false,
    }
}

/// Sends one more byte of the head to each client still open; returns how many took it.
fn trickle(clients: &mut [(TcpStream, usize)]) -> usize {
    let mut sent = 0;
    for (c, at) in clients.iter_mut() {
        if let Some(b) = HEAD.get(*at) {
            if c.write(std::slice::from_ref(b)).is_ok_and(|n| n == 1) {
                *at += 1;
                sent += 1;
            }
        }
    }
    sent
}

fn one_slow_client_is_closed_at_the_header_timeout<R: Runtime>() {
    let listen = free_addr();
    let _p = Proxy::start::<R>(config(listen, HEADER_TIMEOUT), 1);
    let mut c = TcpStream::connect(listen).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(1000))).expect("timeout");
    let started = Instant::now();
    let mut sent = 0;
    while sent < HEAD.len() && started.elapsed() < Duration::from_secs(30) {
        if c.write_all(&HEAD[sent..sent + 1]).is_err() || closed_by_proxy(&mut c) {
            break;
        }
        sent += 1;
    }
    let took = started.elapsed();
    assert!(sent < HEAD.len(), "the head was never finished: {sent} bytes sent");
    // never before the timeout; after it within a margin that a loaded machine's late timer cannot break (the
    // head is 80 bytes: a per-read timer would have let it finish)
    assert!(
        took >= HEADER_TIMEOUT - Duration::from_millis(100) && took < HEADER_TIMEOUT + Duration::from_secs(20),
        "closed after {took:?} and {sent} bytes"
    );
}

fn many_slow_clients_do_not_stop_a_normal_one<R: Runtime>() {
    raise_fd_limit(4 * SLOW_CLIENTS as u64 + 256);
    let listen = free_addr();
    let _p = Proxy::start::<R>(config(listen, MANY_TIMEOUT), 1);
    let started = Instant::now();
    let mut slow: Vec<(TcpStream, usize)> = (0..SLOW_CLIENTS)
        .map(|_| {
            let c = TcpStream::connect(listen).expect("connect a slow client");
            c.set_nonblocking(true).expect("non-blocking");
            (c, 0)
        })
        .collect();
    assert_eq!(
        trickle(&mut slow),
        SLOW_CLIENTS,
        "every slow client sent its first byte"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(trickle(&mut slow), SLOW_CLIENTS, "and its second");
    // with a thousand heads pending, a normal request is served
    let r = get(listen, "/").expect("the normal client is served");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert!(
        started.elapsed() < MANY_TIMEOUT,
        "served only once the slow clients' timeout had passed: {:?}",
        started.elapsed()
    );
    // then every slow client is closed by the header timeout, one byte every half second notwithstanding (a
    // bounded wait: when they close is the one-client test's check)
    let mut open = SLOW_CLIENTS;
    while open > 0 && started.elapsed() < MANY_TIMEOUT + Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        trickle(&mut slow);
        open = slow
            .iter_mut()
            .map(|(c, _)| closed_by_proxy(c))
            .filter(|&closed| !closed)
            .count();
    }
    assert_eq!(open, 0, "slow clients still open after {:?}", started.elapsed());
    assert!(
        started.elapsed() >= MANY_TIMEOUT - Duration::from_millis(100),
        "closed before their timeout"
    );
}

#[test]
fn tokio_slowloris() {
    one_slow_client_is_closed_at_the_header_timeout::<Tokio>();
    many_slow_clients_do_not_stop_a_normal_one::<Tokio>();
}

#[test]
fn glommio_slowloris() {
    if glommio_usable() {
        one_slow_client_is_closed_at_the_header_timeout::<Glommio>();
        many_slow_clients_do_not_stop_a_normal_one::<Glommio>();
    }
}
