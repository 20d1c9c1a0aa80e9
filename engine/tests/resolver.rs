//! `resolver` end to end, on both runtimes, against a DNS server on loopback (`support::dns`): a `proxy_pass` with
//! variables whose host is no upstream goes to the addresses the resolver finds (`Host` is the URL's host and
//! port), answers are kept for their TTL (names in any case are one name), errors are kept and answer 502, a
//! server that does not answer costs `resolver_timeout` and a 502, a cut UDP answer is asked again over TCP,
//! requests that want a name being asked wait for that one query; an address needs no resolver, a name without
//! one is nginx's 502.

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use std::time::{Duration, Instant};
use support::backend::{Backend, Mode};
use support::dns::{Answer, DnsServer};
use support::{free_addr, glommio_usable, Client, Proxy};

fn run<R: Runtime>() {
    let a = Backend::start("a", Mode::Ok);
    let dns = DnsServer::start();
    let local = vec!["127.0.0.1".parse().unwrap()];
    dns.set("app.test", Answer::Addrs(local.clone(), 1));
    dns.set("fail.test", Answer::Code(ResponseCode::ServFail));
    dns.set("slow.test", Answer::Silent);
    dns.set("big.test", Answer::TcpOnly(local.clone(), 300));
    dns.set("late.test", Answer::Late(local, 300, Duration::from_millis(300)));
    let front = free_addr();
    let port = a.addr.port();
    let text = format!(
        r#"events {{}}
http {{
  server {{
    listen {front};
    location /r {{
      resolver {dns} ipv6=off;
      resolver_timeout 700ms;
      proxy_pass http://$arg_h:{port};
    }}
    location /both {{
      resolver {dns};
      proxy_pass http://$arg_h:{port};
    }}
    location /none {{ proxy_pass http://$arg_h:{port}; }}
  }}
}}
"#,
        dns = dns.addr,
    );
    let config = corelb_engine::config::parse_str(&text, std::path::Path::new("/t/corelb.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    let mut c = Client::connect(front);
    let mut get = |target: &str| {
        c.send(format!("GET {target} HTTP/1.1\r\nHost: front\r\n\r\n").as_bytes());
        c.read_response().expect("response")
    };
    let a_queries = |name: &str| dns.queries(name, RecordType::A, "udp");

    // resolved, proxied, `Host` the URL's host:port
    let r = get("/r?h=app.test");
    assert_eq!((r.status, r.text().as_str()), (200, "a"));
    let head = a.last_head();
    assert!(head.contains(&format!("\r\nHost: app.test:{port}\r\n")), "{head}");
    assert_eq!(a_queries("app.test"), 1);
    assert_eq!(
        dns.queries("app.test", RecordType::AAAA, "udp"),
        0,
        "ipv6=off asks no AAAA"
    );
    // kept for its TTL, whatever the name's case
    assert_eq!(get("/r?h=APP.test").status, 200);
    assert_eq!(a_queries("app.test"), 1);
    // asked again once the TTL (1 s) is over
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get("/r?h=app.test").status, 200);
    assert_eq!(a_queries("app.test"), 2);

    // both families asked by default; a name with only A records is proxied to them
    assert_eq!(get("/both?h=app.test").status, 200);
    assert_eq!(dns.queries("app.test", RecordType::AAAA, "udp"), 1);

    // NXDOMAIN and SERVFAIL: 502, kept (no second query within 10 s)
    let before = a.requests();
    assert_eq!(get("/r?h=gone.test").status, 502);
    assert_eq!(get("/r?h=gone.test").status, 502);
    assert_eq!(a_queries("gone.test"), 1);
    assert_eq!(get("/r?h=fail.test").status, 502);
    assert_eq!(a.requests(), before, "nothing went upstream");

    // no answer: resolver_timeout, then 502 (a timeout is not kept)
    let t0 = Instant::now();
    assert_eq!(get("/r?h=slow.test").status, 502);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(650) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(a_queries("slow.test") >= 1);

    // a cut UDP answer: asked again over TCP
    assert_eq!(get("/r?h=big.test").status, 200);
    assert_eq!(
        (a_queries("big.test"), dns.queries("big.test", RecordType::A, "tcp")),
        (1, 1)
    );

    // three requests at once for a name whose answer is late: one query, three answers
    let askers: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(front);
                c.send(b"GET /r?h=late.test HTTP/1.1\r\nHost: front\r\n\r\n");
                c.read_response().expect("response").status
            })
        })
        .collect();
    let statuses: Vec<u16> = askers.into_iter().map(|t| t.join().expect("asker")).collect();
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(
        a_queries("late.test"),
        1,
        "the waiting requests took the first one's answer"
    );

    // an address needs no resolver; a name without one is nginx's 502, asked nowhere
    let r = get("/none?h=127.0.0.1");
    assert_eq!((r.status, r.text().as_str()), (200, "a"));
    assert!(a.last_head().contains(&format!("\r\nHost: 127.0.0.1:{port}\r\n")));
    assert_eq!(get("/none?h=other.test").status, 502);
    assert_eq!(a_queries("other.test"), 0);

    // the connection still serves
    assert_eq!(get("/r?h=app.test").status, 200);
    drop(proxy);
}

#[test]
fn tokio_resolver() {
    run::<Tokio>();
}

#[test]
fn glommio_resolver() {
    if glommio_usable() {
        run::<Glommio>();
    }
}
