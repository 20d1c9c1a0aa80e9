//! `geo` end to end, on both runtimes: networks (longest prefix), `ranges`, `default`, `delete`, a source
//! variable, the real address of `set_real_ip_from`, `proxy`/`proxy_recursive` over `X-Forwarded-For`, and a
//! stream `geo` read by `return`.

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;
use support::{free_addr, glommio_usable, Client, Proxy};

fn start<R: Runtime>(text: &str) -> Proxy {
    let config = parse_str(text, Path::new("/etc/corelb/geo.conf")).expect("config");
    Proxy::start::<R>(config, 2)
}

/// `X-Geo` of `GET path` with `lines` (empty when the value is: nginx adds no header with an empty value).
fn geo(listen: SocketAddr, path: &str, lines: &str) -> String {
    let mut c = Client::connect(listen);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: a\r\n{lines}Connection: close\r\n\r\n").as_bytes());
    let r = c.read_response().expect("an answer");
    assert_eq!(r.status, 204, "{}", r.head);
    r.header("x-geo").unwrap_or_default()
}

fn http_geo<R: Runtime>() {
    let (listen, real) = (free_addr(), free_addr());
    let text = format!(
        "events {{}}
        http {{
            geo $net {{
                127.0.0.0/8    loopback;
                127.0.0.7      seven;
                192.0.2.0/24   test;
                0.0.0.0/0      world;
                10.0.0.0/8     ten;
                delete         10.0.0.0/8;
                2001:db8::/32  doc6;
            }}
            geo $arg_ip $range {{
                ranges;
                default                  none;
                10.0.0.0-10.0.0.255      a;
                10.0.0.128-10.0.1.0      b;
                10.0.0.200-10.0.0.200    c;
            }}
            geo $xff {{
                proxy_recursive;
                default        default;
                proxy          127.0.0.1;
                proxy          192.0.2.0/24;
                127.0.0.0/8    loopback;
                192.0.2.0/24   test;
            }}
            server {{
                listen {listen};
                location /net {{ add_header X-Geo \"$net|$arg_ip\"; return 204; }}
                location /range {{ add_header X-Geo $range; return 204; }}
                location /xff {{ add_header X-Geo $xff; return 204; }}
            }}
            server {{
                listen {real};
                set_real_ip_from 127.0.0.1;
                location /real {{ add_header X-Geo $net; return 204; }}
            }}
        }}"
    );
    let _p = start::<R>(&text);
    assert_eq!(geo(listen, "/net", ""), "loopback|");
    // the client nginx sees is the one `set_real_ip_from` gives
    assert_eq!(geo(real, "/real", "X-Real-IP: 127.0.0.7\r\n"), "seven");
    assert_eq!(geo(real, "/real", "X-Real-IP: 192.0.2.9\r\n"), "test");
    assert_eq!(
        geo(real, "/real", "X-Real-IP: 10.1.1.1\r\n"),
        "world",
        "10.0.0.0/8 was deleted"
    );
    assert_eq!(geo(real, "/real", "X-Real-IP: 2001:db8::5\r\n"), "doc6");
    assert_eq!(geo(real, "/real", "X-Real-IP: 2001:db9::5\r\n"), "", "no IPv6 default");
    // later ranges over earlier ones
    let range = |ip: &str| geo(listen, &format!("/range?ip={ip}"), "");
    assert_eq!(range("10.0.0.1"), "a");
    assert_eq!(range("10.0.0.128"), "b");
    assert_eq!(range("10.0.0.200"), "c");
    assert_eq!(range("10.0.0.201"), "b");
    assert_eq!(range("10.0.1.1"), "none");
    assert_eq!(range("bogus"), "none");
    // `proxy`: a trusted sender's X-Forwarded-For, walked through trusted addresses with proxy_recursive
    let xff = |v: &str| geo(listen, "/xff", &format!("X-Forwarded-For: {v}\r\n"));
    assert_eq!(geo(listen, "/xff", ""), "loopback");
    assert_eq!(xff("10.0.0.1"), "default");
    assert_eq!(xff("10.0.0.1, 192.0.2.1"), "default");
    assert_eq!(xff("192.0.2.1, 127.0.0.1"), "test");
}

#[test]
fn http_geo_tokio() {
    http_geo::<Tokio>();
}

#[test]
fn http_geo_glommio() {
    if glommio_usable() {
        http_geo::<Glommio>();
    }
}

fn stream_geo<R: Runtime>() {
    let listen = free_addr();
    let text = format!(
        "events {{}}
        stream {{
            geo $where {{ default far; 127.0.0.0/24 near; }}
            server {{ listen {listen}; return \"$where $remote_addr\"; }}
        }}"
    );
    let _p = start::<R>(&text);
    let mut s = TcpStream::connect(listen).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    assert_eq!(out, "near 127.0.0.1");
}

#[test]
fn stream_geo_tokio() {
    stream_geo::<Tokio>();
}

#[test]
fn stream_geo_glommio() {
    if glommio_usable() {
        stream_geo::<Glommio>();
    }
}

#[test]
fn refused_as_nginx_refuses() {
    let conf = |body: &str| format!("events {{}}\nhttp {{\n geo $g {{ {body} }}\n}}\n");
    let parse = |body: &str| parse_str(&conf(body), Path::new("/etc/corelb/g.conf")).map_err(|e| e.to_string());
    assert!(parse("default x; 10.0.0.0/8 y; ::1 z; proxy 127.0.0.1;").is_ok());
    assert_eq!(
        parse("10.0.0.0/33 y;").unwrap_err(),
        "[emerg] invalid network \"10.0.0.0/33\" in /etc/corelb/g.conf:3"
    );
    assert_eq!(
        parse("default x; ranges;").unwrap_err(),
        "[emerg] the \"ranges\" directive must be the first directive inside \"geo\" block in /etc/corelb/g.conf:3"
    );
    assert_eq!(
        parse("ranges; 10.0.0.9-10.0.0.1 y;").unwrap_err(),
        "[emerg] invalid range \"10.0.0.9-10.0.0.1\" in /etc/corelb/g.conf:3"
    );
    assert_eq!(
        parse("10.0.0.1 a b;").unwrap_err(),
        "[emerg] invalid number of the geo parameters in /etc/corelb/g.conf:3"
    );
    let stream =
        "events {}\nstream {\n geo $g { proxy 127.0.0.1; }\n server { listen 127.0.0.1:18394; return x; }\n}\n";
    assert_eq!(
        parse_str(stream, Path::new("/etc/corelb/g.conf"))
            .unwrap_err()
            .to_string(),
        "[emerg] invalid network \"proxy\" in /etc/corelb/g.conf:3"
    );
}
