//! `queue N [timeout=T]` through the network on both runtimes: one real backend on loopback with `max_conns=1`,
//! held at a gate so its one slot stays taken. A second request waits and is served once the slot frees; a request
//! beyond the queue's size, or one whose wait runs out, gets nginx Plus's 502; a waiting request whose client
//! closes leaves the queue.

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::backend::{Backend, Gate, Mode};
use support::{free_addr, get, glommio_usable, Client, Proxy};

fn start<R: Runtime>(backend: SocketAddr, queue: &str) -> (Proxy, SocketAddr) {
    let front = free_addr();
    let text = format!(
        "events {{}}\nhttp {{\n upstream u {{ server {backend} max_conns=1; {queue} }}\n \
         server {{ listen {front}; location / {{ proxy_pass http://u; }} }}\n}}\n"
    );
    let config = parse_str(&text, Path::new("/etc/corelb/queue.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (Proxy::start::<R>(config, 1), front)
}

/// A request on its own thread: its status (0: no response).
fn spawn_get(front: SocketAddr, path: &'static str) -> thread::JoinHandle<u16> {
    thread::spawn(move || get(front, path).map_or(0, |r| r.status))
}

/// Waits until `backend` has `n` active requests (bounded).
fn until_active(b: &Backend, n: usize) {
    let end = Instant::now() + Duration::from_secs(5);
    while b.active() < n {
        assert!(Instant::now() < end, "the backend never had {n} active requests");
        thread::sleep(Duration::from_millis(5));
    }
}

fn waits_then_is_served<R: Runtime>() {
    let gate = Arc::new(Gate::default());
    let backend = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let (_proxy, front) = start::<R>(backend.addr, "queue 2 timeout=10s;");
    let first = spawn_get(front, "/1");
    until_active(&backend, 1);
    let second = spawn_get(front, "/2");
    let third = spawn_get(front, "/3");
    thread::sleep(Duration::from_millis(200));
    // both wait (the slot is taken), neither got a 502
    assert!(!second.is_finished() && !third.is_finished(), "{}", R::NAME);
    assert_eq!(backend.requests(), 1);
    gate.open();
    for (i, h) in [first, second, third].into_iter().enumerate() {
        assert_eq!(h.join().expect("client"), 200, "{} request {i}", R::NAME);
    }
    assert_eq!((backend.requests(), backend.max_active()), (3, 1), "{}", R::NAME);
}

fn overflow_and_timeout_are_502<R: Runtime>() {
    let gate = Arc::new(Gate::default());
    let backend = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let (_proxy, front) = start::<R>(backend.addr, "queue 1 timeout=300ms;");
    let first = spawn_get(front, "/1");
    until_active(&backend, 1);
    let started = Instant::now();
    let waiting = spawn_get(front, "/2");
    thread::sleep(Duration::from_millis(50));
    // the queue holds one: the next is refused at once
    let over = Instant::now();
    assert_eq!(get(front, "/3").map(|r| r.status), Some(502), "{}", R::NAME);
    assert!(
        over.elapsed() < Duration::from_millis(250),
        "{}: {:?}",
        R::NAME,
        over.elapsed()
    );
    // the waiting one runs out of time
    assert_eq!(waiting.join().expect("client"), 502, "{}", R::NAME);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    gate.open();
    assert_eq!(first.join().expect("client"), 200);
    assert_eq!(
        backend.requests(),
        1,
        "{}: neither refused request reached the backend",
        R::NAME
    );
}

fn a_client_that_leaves_leaves_the_queue<R: Runtime>() {
    let gate = Arc::new(Gate::default());
    let backend = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let (_proxy, front) = start::<R>(backend.addr, "queue 1 timeout=10s;");
    let first = spawn_get(front, "/1");
    until_active(&backend, 1);
    let mut leaving = Client::connect(front);
    leaving.send(b"GET /gone HTTP/1.1\r\nHost: test\r\n\r\n");
    thread::sleep(Duration::from_millis(100));
    drop(leaving);
    thread::sleep(Duration::from_millis(100));
    // its place is free again: this one waits instead of a 502
    let next = spawn_get(front, "/next");
    thread::sleep(Duration::from_millis(200));
    assert!(
        !next.is_finished(),
        "{}: the queue still counted the gone client",
        R::NAME
    );
    gate.open();
    assert_eq!(first.join().expect("client"), 200);
    assert_eq!(next.join().expect("client"), 200, "{}", R::NAME);
    assert_eq!(
        backend.requests(),
        2,
        "{}: the gone client's request was never sent",
        R::NAME
    );
}

fn all<R: Runtime>() {
    waits_then_is_served::<R>();
    overflow_and_timeout_are_502::<R>();
    a_client_that_leaves_leaves_the_queue::<R>();
}

#[test]
fn tokio_queue() {
    all::<Tokio>();
}

#[test]
fn glommio_queue() {
    if glommio_usable() {
        all::<Glommio>();
    }
}
