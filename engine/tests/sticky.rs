//! `sticky` through the network on both runtimes (2 shards): the proxy's own server blocks on loopback are the
//! backends (each names itself, and sets a session cookie for `learn`), a front server proxies to them. The cookie's
//! exact bytes, binding by cookie and by route, a draining peer that takes only bound requests, and learned
//! sessions that every shard sees and a reload keeps.

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::net::SocketAddr;
use std::path::Path;
use support::{free_addr, glommio_usable, Client, Proxy, Response};

/// Requests per check.
const N: usize = 6;

/// nginx's server id of a peer without `route=`: the MD5 in hex of its address.
fn md5_id(addr: SocketAddr) -> String {
    let id = corelb_engine::balance::sticky::server_id(addr, None);
    String::from_utf8(id.to_vec()).expect("hex")
}

/// Two backends (`a`, `b`: body and `Set-Cookie: sid=value-a|b`), and a front server proxying to upstream `u`
/// whose body is `upstream`.
fn conf(front: SocketAddr, backends: [SocketAddr; 2], upstream: &str) -> String {
    let [a, b] = backends;
    format!(
        "events {{}}\nhttp {{\n\
         server {{ listen {a}; location / {{ add_header Set-Cookie sid=value-a; return 200 a; }} }}\n\
         server {{ listen {b}; location / {{ add_header Set-Cookie sid=value-b; return 200 b; }} }}\n\
         upstream u {{ {upstream} }}\n\
         server {{ listen {front}; location / {{ proxy_pass http://u; }} }}\n}}\n"
    )
}

fn start<R: Runtime>(text: &str) -> Proxy {
    let config = parse_str(text, Path::new("/etc/corelb/sticky.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Proxy::start::<R>(config, 2)
}

/// One request on a new connection with `cookie` (none when empty).
fn ask(front: SocketAddr, path: &str, cookie: &str) -> Response {
    let mut c = Client::connect(front);
    let cookie = if cookie.is_empty() {
        String::new()
    } else {
        format!("Cookie: {cookie}\r\n")
    };
    c.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{cookie}\r\n").as_bytes());
    c.read_response().unwrap_or_else(|| panic!("{path}: no response"))
}

/// The answer's `Set-Cookie` values, in order.
fn set_cookies(r: &Response) -> Vec<String> {
    r.head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

/// The bodies of `N` requests.
fn bodies(front: SocketAddr, path: &str, cookie: &str) -> Vec<String> {
    (0..N).map(|_| ask(front, path, cookie).text()).collect()
}

fn cookie_binds_and_is_set_as_nginx_sets_it<R: Runtime>() {
    let (front, a, b) = (free_addr(), free_addr(), free_addr());
    let upstream = format!("server {a}; server {b}; sticky cookie srv path=/ httponly;");
    let _proxy = start::<R>(&conf(front, [a, b], &upstream));
    let first = ask(front, "/", "");
    let name = first.text();
    let addr = if name == "a" { a } else { b };
    // the backend's cookie, then the sticky one
    let want = vec![
        format!("sid=value-{name}"),
        format!("srv={}; httponly; path=/", md5_id(addr)),
    ];
    assert_eq!(set_cookies(&first), want, "{}", R::NAME);
    let cookie = format!("srv={}", md5_id(addr));
    assert_eq!(bodies(front, "/", &cookie), vec![name.clone(); N], "{}", R::NAME);
    // an id no peer has: balanced, and a new cookie names the peer that answered
    let other = ask(front, "/", "srv=garbage");
    let who = if other.text() == "a" { a } else { b };
    let sticky = format!("srv={}; httponly; path=/", md5_id(who));
    assert_eq!(set_cookies(&other).last(), Some(&sticky));
}

fn route_and_drain<R: Runtime>() {
    let (front, a, b) = (free_addr(), free_addr(), free_addr());
    let upstream = format!("server {a} route=ra drain; server {b} route=rb; sticky route $arg_r $cookie_r;");
    let _proxy = start::<R>(&conf(front, [a, b], &upstream));
    // the draining peer takes no new request, and bound ones (by argument or cookie)
    assert_eq!(bodies(front, "/", ""), vec!["b"; N], "{}", R::NAME);
    assert_eq!(bodies(front, "/?r=ra", ""), vec!["a"; N], "{}", R::NAME);
    assert_eq!(bodies(front, "/", "r=ra"), vec!["a"; N], "{}", R::NAME);
    // the first non-empty variable wins
    assert_eq!(bodies(front, "/?r=rb", "r=ra"), vec!["b"; N], "{}", R::NAME);
    // no cookie is written without `sticky cookie`
    assert_eq!(set_cookies(&ask(front, "/?r=ra", "")), ["sid=value-a"]);
}

fn learned_sessions_are_shared_and_survive_a_reload<R: Runtime>() {
    let (front, a, b) = (free_addr(), free_addr(), free_addr());
    let upstream = format!(
        "server {a}; server {b}; sticky learn create=$upstream_cookie_sid lookup=$cookie_sid zone=z:64k timeout=1m;"
    );
    let text = conf(front, [a, b], &upstream);
    let proxy = start::<R>(&text);
    // unknown sessions are balanced: both peers answer
    let mut seen = bodies(front, "/", "sid=none");
    seen.sort();
    seen.dedup();
    assert_eq!(seen, ["a", "b"], "{}", R::NAME);
    // each answer made its session: a request naming one goes to its peer, on any shard's connection
    assert_eq!(bodies(front, "/", "sid=value-a"), vec!["a"; N], "{}", R::NAME);
    assert_eq!(bodies(front, "/", "sid=value-b"), vec!["b"; N], "{}", R::NAME);
    let next = parse_str(&text, Path::new("/etc/corelb/sticky.conf")).expect("config");
    proxy
        .shared
        .apply(ChangeKind::Reload, move |_| Ok(next))
        .unwrap_or_else(|e| panic!("reload refused: {e}"));
    assert_eq!(
        bodies(front, "/", "sid=value-b"),
        vec!["b"; N],
        "{} after the reload",
        R::NAME
    );
    assert_eq!(
        bodies(front, "/", "sid=value-a"),
        vec!["a"; N],
        "{} after the reload",
        R::NAME
    );
}

#[test]
fn tokio_sticky_cookie() {
    cookie_binds_and_is_set_as_nginx_sets_it::<Tokio>();
}

#[test]
fn glommio_sticky_cookie() {
    if glommio_usable() {
        cookie_binds_and_is_set_as_nginx_sets_it::<Glommio>();
    }
}

#[test]
fn tokio_sticky_route_and_drain() {
    route_and_drain::<Tokio>();
}

#[test]
fn glommio_sticky_route_and_drain() {
    if glommio_usable() {
        route_and_drain::<Glommio>();
    }
}

#[test]
fn tokio_sticky_learn() {
    learned_sessions_are_shared_and_survive_a_reload::<Tokio>();
}

#[test]
fn glommio_sticky_learn() {
    if glommio_usable() {
        learned_sessions_are_shared_and_survive_a_reload::<Glommio>();
    }
}
