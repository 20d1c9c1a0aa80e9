//! Every balancing method through the network: keys evaluated per request, picks as nginx makes them (the
//! vectors of docs/algorithms.md where they do not depend on ports), all on real loopback sockets.

mod support;

use corelb_engine::config::key::KeyTemplate;
use corelb_engine::config::model::*;
use std::net::{SocketAddr, TcpStream};
use support::backend::{Backend, Mode};
use support::*;

fn three(method: Method) -> (Vec<Backend>, SocketAddr, Proxy) {
    let backends: Vec<Backend> = ["s1", "s2", "s3"].iter().map(|n| Backend::start(n, Mode::Ok)).collect();
    let mut up = upstream("u", backends.iter().map(|b| server_line(b.addr)).collect());
    up.method = method;
    let listen = free_addr();
    let p = Proxy::tokio(http_config(
        listen,
        vec![up],
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    (backends, listen, p)
}

fn hash(key: &str, consistent: bool) -> Method {
    Method::Hash {
        key: KeyTemplate::compile(key).expect("key"),
        consistent,
    }
}

/// A GET from a chosen loopback source address.
fn get_from(listen: SocketAddr, src: [u8; 4], path: &str) -> String {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from((src, 0)).into()).expect("bind source");
    sock.connect(&listen.into()).expect("connect");
    let mut c = Client::from_stream(TcpStream::from(sock));
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    c.read_response().expect("response").text()
}

#[test]
fn hash_follows_the_memcached_vectors() {
    // docs/algorithms.md §7 vector H: 3 equal servers, key = the URI: a -> s3, b -> s1, c -> s3, /index.html -> s3
    let (_b, listen, _p) = three(hash("$uri", false));
    assert_eq!(get(listen, "/index.html").expect("response").text(), "s3");
    let (_b, listen, _p) = three(hash("$arg_k", false));
    for (k, want) in [("a", "s3"), ("b", "s1"), ("c", "s3"), ("x", "s2"), ("hello", "s2")] {
        for _ in 0..3 {
            assert_eq!(
                get(listen, &format!("/?k={k}")).expect("response").text(),
                want,
                "key {k}"
            );
        }
    }
}

#[test]
fn ip_hash_follows_the_address_vectors() {
    // docs/algorithms.md §6 vector IPH, 3 equal servers: 127.0.0.1 -> s3, 127.0.1.1 -> s1, 127.1.0.1 -> s2
    let (_b, listen, _p) = three(Method::IpHash);
    for (src, want) in [
        ([127, 0, 0, 1], "s3"),
        ([127, 0, 1, 1], "s1"),
        ([127, 1, 0, 1], "s2"),
        ([127, 0, 0, 77], "s3"),
    ] {
        for _ in 0..2 {
            assert_eq!(get_from(listen, src, "/"), want, "{src:?}");
        }
    }
}

#[test]
fn consistent_hash_is_stable_and_spreads() {
    let (backends, listen, _p) = three(hash("$request_uri", true));
    let mut first = Vec::new();
    for i in 0..30 {
        first.push(get(listen, &format!("/k{i}")).expect("response").text());
    }
    for (i, want) in first.iter().enumerate() {
        let got = get(listen, &format!("/k{i}")).expect("response").text();
        assert_eq!(&got, want, "key k{i}");
    }
    assert!(
        backends.iter().all(|b| b.requests() > 0),
        "30 keys reach all three servers"
    );
}

#[test]
fn least_conn_without_concurrency_is_swrr() {
    let backends: Vec<Backend> = ["a", "b", "c"].iter().map(|n| Backend::start(n, Mode::Ok)).collect();
    let mut lines: Vec<ServerLine> = backends.iter().map(|b| server_line(b.addr)).collect();
    lines[0].weight = 5;
    let mut up = upstream("u", lines);
    up.method = Method::LeastConn;
    let listen = free_addr();
    let _p = Proxy::tokio(http_config(
        listen,
        vec![up],
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    let seq: String = (0..7).map(|_| get(listen, "/").expect("response").text()).collect();
    assert_eq!(seq, "aabacaa");
}

#[test]
fn random_reaches_only_live_peers_by_weight() {
    // Two live peers of weights 4 and 1, a `down` one and a dead one (connection refused): every request is
    // answered by a live peer, the down peer is never connected to, and the live peers share by weight.
    let names = ["heavy", "light", "down"];
    let backends: Vec<Backend> = names.iter().map(|n| Backend::start(n, Mode::Ok)).collect();
    let mut lines: Vec<ServerLine> = backends.iter().map(|b| server_line(b.addr)).collect();
    lines[0].weight = 4;
    lines[2].down = true;
    lines.push(server_line(dead_addr()));
    let mut up = upstream("u", lines);
    up.method = Method::Random { two: None };
    let listen = free_addr();
    let p = Proxy::tokio(http_config(
        listen,
        vec![up],
        vec![proxy_location("/", 0, HttpProxyConf::default())],
    ));
    const N: usize = 300;
    for _ in 0..N {
        let r = get(listen, "/").expect("response");
        assert!(
            r.status == 200 && ["heavy", "light"].contains(&r.text().as_str()),
            "{r:?}"
        );
    }
    let [heavy, light, down] = [0, 1, 2].map(|i| backends[i].accepts());
    assert_eq!(down, 0, "the down peer was connected to");
    assert_eq!(heavy + light, N, "one connection per request, all to live peers");
    // heavy's count is binomial(300, 4/5): 240, standard deviation 6.9; six of them either side.
    assert!(
        (199..=281).contains(&heavy),
        "heavy drew {heavy} of {N} (4:1 gives 240)"
    );
    drop(p);
    let (backends, listen, _p) = three(Method::Random {
        two: Some(RandomTwo::LeastConn),
    });
    for _ in 0..30 {
        assert_eq!(get(listen, "/").expect("response").status, 200);
    }
    assert_eq!(backends.iter().map(Backend::requests).sum::<usize>(), 30);
}
