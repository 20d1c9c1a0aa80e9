//! `limit_req` and `limit_conn` end to end, on both runtimes with 2 shards: the bucket exact across shards (4
//! concurrent clients, counted at the backend), `nodelay` and the delay on the shard's timer, nginx's exact 503
//! and `limit_req_status`, `$limit_req_status`, `limit_conn` never exceeded across shards and given back whatever
//! ends the request, a full `limit_req` table giving up its oldest key, a reload keeping the state, and stream's
//! `limit_conn` closing the session.
//!
//! (`engine/tests/limits.rs` is about the client buffer and timeout limits.)

mod support;

use corelb_engine::config::parse_str;
use corelb_engine::control::ChangeKind;
use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::api_client::{api, error_code};
use support::backend::{tcp_echo, Backend, Gate, Mode};
use support::{free_addr, glommio_usable, wait_until, Client, Proxy, Response};

fn config(text: &str) -> corelb_engine::config::model::Config {
    parse_str(text, Path::new("/etc/corelb/limits.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn start<R: Runtime>(text: &str) -> Proxy {
    Proxy::start::<R>(config(text), 2)
}

fn ask(c: &mut Client, path: &str) -> Response {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
    c.read_response().expect("an answer")
}

/// `GET path` on a connection of its own.
fn get(listen: SocketAddr, path: &str) -> Response {
    ask(&mut Client::connect(listen), path)
}

/// The head without its `Date` line.
fn head_without_date(r: &Response) -> String {
    r.head
        .lines()
        .filter(|l| !l.starts_with("Date: "))
        .map(|l| format!("{l}\r\n"))
        .collect()
}

fn page(code: &str) -> String {
    format!(
        "<html>\r\n<head><title>{code}</title></head>\r\n<body>\r\n<center><h1>{code}</h1></center>\r\n\
         <hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"
    )
}

/// Starts a proxy of a config text (2 shards).
type Start<'a> = &'a dyn Fn(&str) -> Proxy;

fn on_both(test: fn(Start<'_>)) {
    test(&|t| start::<Tokio>(t));
    if glommio_usable() {
        test(&|t| start::<Glommio>(t));
    }
}

/// rate=1r/m drains 16 milli-requests a second: over the test's few seconds, burst=7 admits exactly 8 requests
/// of the one key, whichever shard and client sends them; per-shard buckets would admit 16.
fn exact_across_shards(start: Start<'_>) {
    let ok = Backend::start("ok", Mode::Ok);
    let listen = free_addr();
    let ok_at = ok.addr;
    let proxy = start(&format!(
        "events {{}}
        http {{
            server_tokens off;
            limit_req_zone $server_port zone=one:1m rate=1r/m;
            upstream ok {{ server {ok_at}; }}
            server {{
                listen {listen};
                location / {{ limit_req zone=one burst=7 nodelay; proxy_pass http://ok; }}
                location /api/ {{ api; }}
            }}
        }}"
    ));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                // a new connection per request: the kernel spreads them over both shards
                (0..20).map(|_| get(listen, "/").status).collect::<Vec<_>>()
            })
        })
        .collect();
    let statuses: Vec<u16> = clients.into_iter().flat_map(|c| c.join().expect("client")).collect();
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 8, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 503).count(), 72);
    assert_eq!(ok.requests(), 8, "the backend saw exactly the burst and one");
    let served: Vec<u64> = proxy.shared.zone.shard_stats().iter().map(|s| s.requests).collect();
    assert!(served.iter().all(|&n| n > 0), "both shards served: {served:?}");
    // nginx's 503, exactly
    let r = get(listen, "/");
    let body = page("503 Service Temporarily Unavailable");
    assert_eq!(
        head_without_date(&r),
        format!(
            "HTTP/1.1 503 Service Temporarily Unavailable\r\nServer: corelb\r\nContent-Type: text/html\r\n\
             Content-Length: {}\r\nConnection: keep-alive\r\n\r\n",
            body.len()
        )
    );
    assert_eq!(r.text(), body);
    // nginx Plus's counters of the zone, summed over the shards
    let zone = json!({"passed": 8, "delayed": 0, "rejected": 73, "delayed_dry_run": 0, "rejected_dry_run": 0});
    assert_eq!(
        api(listen, "GET", "/api/9/http/limit_reqs", ""),
        (200, json!({ "one": zone.clone() }))
    );
    assert_eq!(api(listen, "GET", "/api/9/http/limit_reqs/one", ""), (200, zone));
    let (status, err) = api(listen, "GET", "/api/9/http/limit_reqs/two", "");
    assert_eq!((status, error_code(&err)), (404, "LimitReqNotFound"));
}

#[test]
fn limit_req_is_exact_across_shards() {
    on_both(exact_across_shards);
}

/// burst=3 without `nodelay` at 10r/s: four requests at once all pass, the last after about 300 ms (delays of
/// 100, 200, 300 ms from the excess); `delay=1` lets the first excess through at once. `$limit_req_status`
/// says which, and `limit_req_status` changes the answer.
fn delays_and_statuses(start: Start<'_>) {
    let ok = Backend::start("ok", Mode::Ok);
    let ok_at = ok.addr;
    let listen = free_addr();
    let _p = start(&format!(
        "events {{}}
        http {{
            limit_req_zone $arg_k zone=r:1m rate=10r/s;
            add_header X-Status $limit_req_status always;
            upstream ok {{ server {ok_at}; }}
            server {{
                listen {listen};
                location /d {{ limit_req zone=r burst=3; proxy_pass http://ok; }}
                location /two {{ limit_req zone=r burst=3 delay=1; proxy_pass http://ok; }}
                location /s {{ limit_req zone=r; limit_req_status 429; proxy_pass http://ok; }}
                location /ret {{ limit_req zone=r; return 200 r; }}
                location /none {{ proxy_pass http://ok; }}
            }}
        }}"
    ));
    let started = Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || (get(listen, "/d?k=a"), started.elapsed())))
        .collect();
    let mut done: Vec<(Response, Duration)> = clients.into_iter().map(|c| c.join().expect("client")).collect();
    done.sort_by_key(|d| d.1);
    assert!(done.iter().all(|d| d.0.status == 200));
    let marks: Vec<String> = done
        .iter()
        .map(|d| d.0.header("X-Status").unwrap_or_default())
        .collect();
    assert_eq!(marks, ["PASSED", "DELAYED", "DELAYED", "DELAYED"]);
    assert!(
        done[3].1 >= Duration::from_millis(280),
        "the last waited its turn: {:?}",
        done[3].1
    );
    // key b, delay=1: the first excess passes now, the second waits
    assert_eq!(get(listen, "/two?k=b").header("X-Status").as_deref(), Some("PASSED"));
    assert_eq!(get(listen, "/two?k=b").header("X-Status").as_deref(), Some("PASSED"));
    assert_eq!(get(listen, "/two?k=b").header("X-Status").as_deref(), Some("DELAYED"));
    // no burst: the second at once is rejected with limit_req_status
    assert_eq!(get(listen, "/s?k=c").status, 200);
    let r = get(listen, "/s?k=c");
    assert_eq!((r.status, r.header("X-Status").as_deref()), (429, Some("REJECTED")));
    // an empty key is not limited, and no limit leaves the variable unset
    for _ in 0..3 {
        assert_eq!(get(listen, "/s").header("X-Status"), None);
    }
    assert_eq!(get(listen, "/none?k=c").header("X-Status"), None);
    // a `return` answers in the rewrite phase, before nginx's preaccess: never limited
    for _ in 0..3 {
        let r = get(listen, "/ret?k=c");
        assert_eq!((r.status, r.header("X-Status")), (200, None));
    }
}

#[test]
fn limit_req_delays_on_the_shard_timer() {
    on_both(delays_and_statuses);
}

/// A client that closes during its delay is noticed then (nginx's `ngx_http_test_reading`): its request never
/// reaches the backend; one that stays is proxied after the delay.
fn gone_during_delay(start: Start<'_>) {
    let ok = Backend::start("ok", Mode::Ok);
    let ok_at = ok.addr;
    let listen = free_addr();
    let _p = start(&format!(
        "events {{}}
        http {{
            limit_req_zone $server_port zone=r:1m rate=1r/s;
            upstream ok {{ server {ok_at}; }}
            server {{ listen {listen}; location / {{ limit_req zone=r burst=5; proxy_pass http://ok; }} }}
        }}"
    ));
    assert_eq!(get(listen, "/").status, 200);
    // the second would wait 1 s; its client leaves at once
    let mut gone = TcpStream::connect(listen).expect("connect");
    gone.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").expect("send");
    drop(gone);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(ok.requests(), 1, "the gone client's request was not proxied");
    // the third waits its turn (the gone one's request was counted, as nginx counts it: about 500 ms left)
    let started = Instant::now();
    assert_eq!(get(listen, "/").status, 200);
    assert_eq!(ok.requests(), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_client_gone_during_its_delay_is_not_proxied() {
    on_both(gone_during_delay);
}

/// `limit_conn c 2` over 6 concurrent requests on 2 shards: exactly 2 reach the held backend, 4 get 503; once
/// they end (answered, or failed upstream) their units are back.
fn conn_limit(start: Start<'_>) {
    let gate = Arc::new(Gate::default());
    let held = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let reset = Backend::start("reset", Mode::Reset);
    let listen = free_addr();
    let (held_at, reset_at) = (held.addr, reset.addr);
    let _p = start(&format!(
        "events {{}}
        http {{
            server_tokens off;
            limit_conn_zone $server_port zone=c:1m;
            upstream held {{ server {held_at}; }}
            upstream reset {{ server {reset_at} max_fails=0; }}
            server {{
                listen {listen};
                limit_conn c 2;
                location / {{ proxy_pass http://held; }}
                location /reset {{ proxy_pass http://reset; }}
                location /api/ {{ limit_conn c 1000; api; }}
            }}
        }}"
    ));
    let clients: Vec<_> = (0..6)
        .map(|_| std::thread::spawn(move || get(listen, "/").status))
        .collect();
    assert!(wait_until(Duration::from_secs(5), || held.active() == 2), "two held");
    // the four others are refused while the two are held
    let mut refused = 0;
    assert!(wait_until(Duration::from_secs(5), || {
        refused = clients.iter().filter(|c| c.is_finished()).count();
        refused == 4
    }));
    let r = get(listen, "/");
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), page("503 Service Temporarily Unavailable"));
    assert_eq!(held.max_active(), 2);
    gate.open();
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().expect("client")).collect();
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 2, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 503).count(), 4, "{statuses:?}");
    // a failed upstream (502) gives its unit back too: three in a row, one at a time, all tried
    for _ in 0..3 {
        assert_eq!(get(listen, "/reset").status, 502);
    }
    assert_eq!(reset.accepts(), 3);
    // a kept-alive connection counts one per request, not per connection
    let mut c = Client::connect(listen);
    for _ in 0..3 {
        assert_eq!(ask(&mut c, "/").status, 200);
    }
    assert_eq!(held.max_active(), 2);
    // 2 + 3 + 3 passed, 4 + 1 rejected; the API's own request counts too (its location's limit)
    let (status, c) = api(listen, "GET", "/api/9/http/limit_conns", "");
    assert_eq!(
        (status, c),
        (200, json!({"c": {"passed": 9, "rejected": 5, "rejected_dry_run": 0}}))
    );
    let (status, none) = api(listen, "GET", "/api/9/stream/limit_conns", "");
    assert_eq!((status, none), (200, json!({})));
}

#[test]
fn limit_conn_is_never_exceeded_across_shards() {
    on_both(conn_limit);
}

/// A client that closes while its request waits on the upstream gives its `limit_conn` unit back at once (nginx
/// watches the client while the upstream is asked: limit_conn.t's `passed`), counted as a client abort (499).
/// (`/here` serves files, 404: a `return` would answer before the preaccess phase and never be limited.)
fn client_gone_while_upstream_asked(start: Start<'_>) {
    let gate = Arc::new(Gate::default());
    let held = Backend::start("held", Mode::Held(Arc::clone(&gate)));
    let listen = free_addr();
    let held_at = held.addr;
    let _p = start(&format!(
        "events {{}}
        http {{
            limit_conn_zone $server_port zone=c:1m;
            server {{
                listen {listen};
                location / {{ limit_conn c 1; proxy_pass http://{held_at}; }}
                location /here {{ limit_conn c 1; root /nonexistent-corelb-test; }}
                location = /metrics {{ metrics; }}
            }}
        }}"
    ));
    let mut waiting = Client::connect(listen);
    waiting.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        wait_until(Duration::from_secs(5), || held.active() == 1),
        "held at the backend"
    );
    assert_eq!(get(listen, "/here").status, 503, "the unit is taken");
    drop(waiting);
    assert!(
        wait_until(Duration::from_secs(5), || get(listen, "/here").status == 404),
        "the unit is back once the client is gone, while the upstream still holds the request"
    );
    assert_eq!(held.active(), 1, "the backend never answered");
    let metrics = support::get(listen, "/metrics").expect("metrics").text();
    let aborts: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("corelb_shard_client_aborts_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(aborts, 1, "{metrics}");
    gate.open();
}

#[test]
fn a_client_gone_while_the_upstream_is_asked_frees_its_unit() {
    on_both(client_gone_while_upstream_asked);
}

/// A 32k zone keeps 512 keys: after 2000 others, the limited key's state is gone (nginx frees its oldest nodes
/// when the zone is full), so it passes again; the new keys all passed (nothing "could not allocate").
fn full_table(start: Start<'_>) {
    let ok = Backend::start("ok", Mode::Ok);
    let ok_at = ok.addr;
    let listen = free_addr();
    let _p = start(&format!(
        "events {{}}
        http {{
            limit_req_zone $arg_k zone=small:32k rate=1r/m;
            upstream ok {{ server {ok_at}; keepalive 4; }}
            server {{ listen {listen}; location / {{ limit_req zone=small; proxy_pass http://ok; }} }}
        }}"
    ));
    let mut c = Client::connect(listen);
    assert_eq!(ask(&mut c, "/?k=first").status, 200);
    assert_eq!(ask(&mut c, "/?k=first").status, 503);
    for i in 0..2000 {
        if i % 500 == 0 {
            // under keepalive_requests
            c = Client::connect(listen);
        }
        assert_eq!(ask(&mut c, &format!("/?k=other{i}")).status, 200, "key {i}");
    }
    assert_eq!(ask(&mut c, "/?k=first").status, 200, "the oldest key was given up");
    assert_eq!(ask(&mut c, "/?k=first").status, 503);
}

#[test]
fn a_full_limit_req_zone_gives_up_its_oldest_keys() {
    on_both(full_table);
}

/// A reload that keeps a zone's name, key and size keeps its state; one that changes its size starts afresh; one
/// that changes its key is refused with nginx's words.
#[test]
fn a_reload_keeps_the_state() {
    let ok = Backend::start("ok", Mode::Ok);
    let ok_at = ok.addr;
    let listen = free_addr();
    let text = |size: &str, key: &str, extra: &str| {
        format!(
            "events {{}}
            http {{
                limit_req_zone {key} zone=one:{size} rate=1r/m;
                limit_conn_zone $server_port zone=c:1m;
                upstream ok {{ server {ok_at}; }}
                server {{ listen {listen}; limit_req zone=one; limit_conn c 10; location / {{ proxy_pass http://ok; }} {extra} }}
            }}"
        )
    };
    let proxy = start::<Tokio>(&text("1m", "$server_port", ""));
    assert_eq!(get(listen, "/").status, 200);
    assert_eq!(get(listen, "/").status, 503);
    let reload = |t: String| {
        let next = config(&t);
        proxy
            .shared
            .apply(ChangeKind::Reload, move |_| Ok(next))
            .map_err(|e| e.to_string())
    };
    reload(text("1m", "$server_port", "location /x { return 204; }")).expect("reload");
    assert_eq!(get(listen, "/x").status, 204, "the new config runs");
    assert_eq!(get(listen, "/").status, 503, "the bucket survived the reload");
    let err = reload(text("1m", "$remote_addr", "")).expect_err("a changed key");
    assert!(
        err.contains(
            "limit_req \"one\" uses the \"$remote_addr\" key while previously it used the \"$server_port\" key"
        ),
        "{err}"
    );
    reload(text("2m", "$server_port", "")).expect("resized");
    assert_eq!(get(listen, "/").status, 200, "a new size is a new zone");
}

/// Stream `limit_conn 1`: a second session of the key is closed while the first is open; once it ends the next
/// one is proxied.
fn stream_limit(start: Start<'_>) {
    let (echo, stats) = tcp_echo();
    let listen = free_addr();
    let _p = start(&format!(
        "events {{}}
        stream {{
            limit_conn_zone $binary_remote_addr zone=s:1m;
            server {{ listen {listen}; limit_conn s 1; proxy_pass {echo}; }}
        }}"
    ));
    let open = |what: &[u8]| {
        let mut s = TcpStream::connect(listen).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        s.write_all(what).expect("send");
        s
    };
    let mut first = open(b"one");
    let mut buf = [0u8; 3];
    first.read_exact(&mut buf).expect("echoed");
    assert_eq!(&buf, b"one");
    let mut second = open(b"two");
    let mut out = Vec::new();
    let _ = second.read_to_end(&mut out);
    assert_eq!(out, b"", "the second session is closed");
    assert_eq!(stats.accepts.load(std::sync::atomic::Ordering::Relaxed), 1);
    drop(first);
    assert!(wait_until(Duration::from_secs(5), || {
        let mut third = open(b"3");
        let mut b = [0u8; 1];
        third.read_exact(&mut b).is_ok()
    }));
}

#[test]
fn stream_limit_conn_closes_the_session() {
    on_both(stream_limit);
}

#[test]
fn refused_as_nginx_refuses() {
    let conf = |body: &str| format!("events {{}}\nhttp {{\n {body}\n}}\n");
    let parse = |body: &str| parse_str(&conf(body), Path::new("/etc/corelb/a.conf")).map_err(|e| e.to_string());
    assert!(parse("limit_req_zone $uri zone=a:1m rate=5r/s; server { limit_req zone=a burst=5 nodelay; }").is_ok());
    assert_eq!(
        parse("server { limit_req zone=nope; }").unwrap_err(),
        "[emerg] zero size shared memory zone \"nope\" in /etc/corelb/a.conf:3"
    );
    assert_eq!(
        parse("limit_req_zone $uri zone=a:1m rate=5r/s sync;").unwrap_err(),
        "[emerg] \"sync\" of \"limit_req_zone\" (nginx Plus) is not supported by corelb in /etc/corelb/a.conf:3"
    );
    assert_eq!(
        parse("limit_conn_zone $uri zone=c:1k;").unwrap_err(),
        "[emerg] zone \"zone=c:1k\" is too small in /etc/corelb/a.conf:3"
    );
    assert_eq!(
        parse("server { location / { limit_conn_status 200; } }").unwrap_err(),
        "[emerg] value must be between 400 and 599 in /etc/corelb/a.conf:3"
    );
}
