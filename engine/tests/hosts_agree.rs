//! Many hosts agree (issue 17, point 4): two proxies, each with its own state, zone and resolver thread (one on
//! tokio, the other on glommio where io_uring is usable), the same config and the same DNS server, map every one of
//! 10,000 keys of `hash $arg_k consistent` over a `service=` pool (one SRV target name per backend: the ring places
//! server names, so the addresses of one name share its points and take turns, in nginx as here) to the same
//! backend, and again right after the DNS adds an eleventh target (once both have it), which moves about an
//! eleventh of the keys, all to the new backend.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use support::api_client::api;
use support::backend::{Backend, Mode};
use support::dns::{Answer, DnsServer};
use support::{free_addr, glommio_usable, wait_until, Client, Proxy};

const KEYS: usize = 10_000;

/// The SRV records of targets `b21.pool.test` .. `bLAST.pool.test`, all at `port`.
fn pool(last: u8, port: u16) -> Vec<(u16, u16, u16, String)> {
    (21..=last).map(|i| (10, 1, port, format!("b{i}.pool.test"))).collect()
}

/// The backend that answers each key through `front`, on one keepalive connection (a new one when the proxy closes
/// it after `keepalive_requests`).
fn picks(front: SocketAddr) -> Vec<String> {
    let mut c = Client::connect(front);
    (0..KEYS)
        .map(|k| {
            let req = format!("GET /?k={k} HTTP/1.1\r\nHost: t\r\n\r\n");
            c.send(req.as_bytes());
            let r = c.read_response().or_else(|| {
                c = Client::connect(front);
                c.send(req.as_bytes());
                c.read_response()
            });
            r.filter(|r| r.status == 200)
                .map_or_else(|| "failed".into(), |r| r.text())
        })
        .collect()
}

fn peers(front: SocketAddr) -> usize {
    let (_, v) = api(front, "GET", "/api/9/http/upstreams/u", "");
    v["peers"].as_array().map_or(0, Vec::len)
}

/// Both proxies' picks, side by side.
fn both(a: SocketAddr, b: SocketAddr) -> (Vec<String>, Vec<String>) {
    let other = std::thread::spawn(move || picks(b));
    let mine = picks(a);
    (mine, other.join().expect("picks"))
}

#[test]
fn two_proxies_map_every_key_to_the_same_peer() {
    let first = Backend::start_on("b21", Mode::Ok, "127.0.0.21:0");
    let port = first.addr.port();
    let mut backends = vec![first];
    for i in 22..=31u8 {
        backends.push(Backend::start_on(
            &format!("b{i}"),
            Mode::Ok,
            &format!("127.0.0.{i}:{port}"),
        ));
    }
    let dns = DnsServer::start();
    for i in 21..=31u8 {
        dns.set(
            &format!("b{i}.pool.test"),
            Answer::Addrs(vec![IpAddr::from([127, 0, 0, i])], 300),
        );
    }
    dns.set("_http._tcp.pool.test", Answer::Srv(pool(30, port), 1));
    let text = |front: SocketAddr| {
        format!(
            "events {{}}\nhttp {{ resolver {dns} ipv6=off; \
             upstream u {{ zone u 1m; hash $arg_k consistent; server pool.test service=http resolve; }} \
             server {{ listen {front}; location / {{ proxy_pass http://u; }} location /api/ {{ api; }} }} }}",
            dns = dns.addr
        )
    };
    let config = |front| corelb_engine::config::parse_str(&text(front), std::path::Path::new("/t/c.conf")).unwrap();
    let (fa, fb) = (free_addr(), free_addr());
    let _a = Proxy::start::<Tokio>(config(fa), 2);
    let _b = if glommio_usable() {
        Proxy::start::<Glommio>(config(fb), 2)
    } else {
        Proxy::start::<Tokio>(config(fb), 2)
    };
    assert!(wait_until(Duration::from_secs(10), || peers(fa) == 10 && peers(fb) == 10));

    let (a, b) = both(fa, fb);
    assert!(!a.contains(&"failed".to_string()));
    let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert_eq!(differ, 0, "{differ} of {KEYS} keys picked differently");
    let used: std::collections::HashSet<&String> = a.iter().collect();
    assert_eq!(used.len(), 10, "every peer takes keys");

    // the DNS adds an eleventh address: once both have it, they agree again
    dns.set("_http._tcp.pool.test", Answer::Srv(pool(31, port), 1));
    assert!(wait_until(Duration::from_secs(10), || peers(fa) == 11 && peers(fb) == 11));
    let (a2, b2) = both(fa, fb);
    let differ = a2.iter().zip(&b2).filter(|(x, y)| x != y).count();
    let sample: Vec<(usize, &String, &String)> = a2
        .iter()
        .zip(&b2)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| (i, x, y))
        .take(5)
        .collect();
    assert_eq!(differ, 0, "{sample:?}");
    assert_eq!(differ, 0, "{differ} of {KEYS} keys picked differently after the change");
    let moved = a.iter().zip(&a2).filter(|(x, y)| x != y).count();
    assert!(moved > 0 && moved <= 2 * KEYS / 11, "{moved} keys moved");
    assert!(
        a2.iter().zip(&a).all(|(now, was)| now == was || now == "b31"),
        "only to the new peer"
    );
}
