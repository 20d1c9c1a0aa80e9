//! Every supported directive's happy path: what it puts in the typed model, with nginx's defaults and inheritance.

use corelb_engine::config::key::Var;
use corelb_engine::config::model::*;
use corelb_engine::config::parse_str;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

fn parse(text: &str) -> Config {
    parse_str(text, Path::new("/etc/corelb/corelb.conf")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn http(body: &str) -> HttpConf {
    parse(&format!("events {{}}\nhttp {{\n{body}\n}}\n"))
        .http
        .expect("http")
}

fn stream(body: &str) -> StreamConf {
    parse(&format!("events {{}}\nstream {{\n{body}\n}}\n"))
        .stream
        .expect("stream")
}

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The one location of the one server.
fn only_location(h: &HttpConf) -> &Location {
    &h.servers[0].locations[0]
}

#[test]
fn config_main_context_defaults_and_values() {
    let c = parse("events {}\n");
    assert_eq!(c.main.worker_processes, Workers::Count(1));
    assert_eq!(c.main.worker_connections, 512);
    assert_eq!(c.main.error_log, None);
    assert!(c.main.daemon);
    assert_eq!(c.main.runtime, None);
    assert!(c.http.is_none() && c.stream.is_none() && c.warnings.is_empty());

    let c = parse(
        "load_module modules/ngx_stream_module.so;\nworker_processes auto;\ndaemon off;\npid /run/corelb.pid;\n\
         error_log /var/log/corelb.log warn;\nworker_runtime glommio;\nevents { worker_connections 4096; }\n",
    );
    assert_eq!(c.main.worker_processes, Workers::Auto);
    assert_eq!(c.main.worker_connections, 4096);
    assert!(!c.main.daemon);
    assert_eq!(c.main.pid.as_deref(), Some(Path::new("/run/corelb.pid")));
    assert_eq!(
        c.main.error_log,
        Some(("/var/log/corelb.log".into(), Some("warn".into())))
    );
    assert_eq!(c.main.runtime, Some(RuntimeKind::Glommio));
    let c = parse("worker_processes 4;\nerror_log stderr;\nworker_runtime tokio;\nevents {}\n");
    assert_eq!(c.main.worker_processes, Workers::Count(4));
    assert_eq!(c.main.error_log, Some(("stderr".into(), None)));
    assert_eq!(c.main.runtime, Some(RuntimeKind::Tokio));
}

#[test]
fn config_upstream_server_parameters() {
    let h = http(
        "upstream b {\n server 127.0.0.1:8081 weight=5 max_fails=3 fail_timeout=30s max_conns=100;\n \
         server 127.0.0.1 down;\n server [::1]:9000 backup;\n server localhost:8083 fail_timeout=1m;\n}",
    );
    let u = h.upstream("b").expect("upstream b");
    assert_eq!(u.servers.len(), 4);
    let s = &u.servers[0];
    assert_eq!(s.text, "127.0.0.1:8081");
    assert_eq!(s.addrs, [sa("127.0.0.1:8081")]);
    assert_eq!(
        (s.weight, s.max_fails, s.fail_timeout, s.max_conns),
        (5, 3, secs(30), 100)
    );
    assert!(!s.backup && !s.down);
    assert_eq!(s.span.line, 4);
    let s = &u.servers[1];
    assert_eq!(s.addrs, [sa("127.0.0.1:80")], "default port 80");
    assert_eq!(
        (s.weight, s.max_fails, s.fail_timeout, s.max_conns),
        (1, 1, secs(10), 0)
    );
    assert!(s.down);
    assert!(u.servers[2].backup);
    assert_eq!(u.servers[2].addrs, [sa("[::1]:9000")]);
    let s = &u.servers[3];
    assert_eq!(s.text, "localhost:8083");
    assert!(s.addrs.contains(&sa("127.0.0.1:8083")), "{:?}", s.addrs);
    assert_eq!(s.fail_timeout, secs(60));
    assert_eq!(u.method, Method::RoundRobin);
    assert_eq!(
        (u.keepalive, u.keepalive_requests, u.keepalive_timeout),
        (None, 1000, secs(60))
    );
    assert!(!u.implicit);
    assert_eq!(u.span.line, 3);
}

#[test]
fn config_balancing_methods() {
    let h = http(
        "upstream a { ip_hash; server 127.0.0.1:1; }\n\
         upstream b { hash $request_uri; server 127.0.0.1:1; }\n\
         upstream c { hash \"$host$request_uri\" consistent; server 127.0.0.1:1; }\n\
         upstream d { least_conn; server 127.0.0.1:1; server 127.0.0.1:2 backup; }\n\
         upstream e { random; server 127.0.0.1:1; }\n\
         upstream f { random two; server 127.0.0.1:1; }\n\
         upstream g { random two least_conn; server 127.0.0.1:1; }",
    );
    assert_eq!(h.upstream("a").unwrap().method, Method::IpHash);
    match &h.upstream("b").unwrap().method {
        Method::Hash { key, consistent: false } => assert!(key.is_only(&Var::RequestUri)),
        other => panic!("{other:?}"),
    }
    match &h.upstream("c").unwrap().method {
        Method::Hash { key, consistent: true } => assert_eq!(key.raw(), "$host$request_uri"),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.upstream("d").unwrap().method, Method::LeastConn);
    assert!(h.upstream("d").unwrap().servers[1].backup);
    assert_eq!(h.upstream("e").unwrap().method, Method::Random { two: None });
    let two = Method::Random {
        two: Some(RandomTwo::LeastConn),
    };
    assert_eq!(h.upstream("f").unwrap().method, two);
    assert_eq!(h.upstream("g").unwrap().method, two);
}

#[test]
fn config_method_flags_apply_to_later_server_lines_only() {
    // nginx checks `backup` against the method set so far: after the server line, ip_hash accepts it.
    let h = http("upstream u { server 127.0.0.1:1; server 127.0.0.1:2 backup; ip_hash; }");
    let u = h.upstream("u").unwrap();
    assert_eq!(u.method, Method::IpHash);
    assert!(u.servers[1].backup);
}

#[test]
fn config_redefinitions_as_nginx() {
    let c = parse(
        "events {}\nhttp {\n upstream u { random two; server 127.0.0.1:1; random; }\n \
         upstream k { server 127.0.0.1:1; keepalive 8; least_conn; }\n \
         upstream m { least_conn; server 127.0.0.1:1; keepalive 8; keepalive_requests 50; keepalive_timeout 5s; }\n}\n",
    );
    let h = c.http.as_ref().unwrap();
    // `random` after `random two` keeps `two`, as nginx's module config does.
    assert_eq!(
        h.upstream("u").unwrap().method,
        Method::Random {
            two: Some(RandomTwo::LeastConn)
        }
    );
    // A method after `keepalive` replaces keepalive's wrapper in nginx: no keepalive, and a warning.
    let k = h.upstream("k").unwrap();
    assert_eq!((k.method.clone(), k.keepalive), (Method::LeastConn, None));
    let m = h.upstream("m").unwrap();
    assert_eq!(m.method, Method::LeastConn);
    assert_eq!(
        (m.keepalive, m.keepalive_requests, m.keepalive_timeout),
        (Some(8), 50, secs(5))
    );
    assert_eq!(
        c.warnings,
        [
            "[warn] load balancing method redefined in /etc/corelb/corelb.conf:3",
            "[warn] load balancing method redefined in /etc/corelb/corelb.conf:4",
        ]
    );
}

#[test]
fn config_zones() {
    let h =
        http("upstream a { zone shared 64k; server 127.0.0.1:1; }\nupstream b { zone shared; server 127.0.0.1:2; }");
    assert_eq!(
        h.upstream("a").unwrap().zone,
        Some(ZoneConf {
            name: "shared".into(),
            size: Some(65536)
        })
    );
    assert_eq!(
        h.upstream("b").unwrap().zone,
        Some(ZoneConf {
            name: "shared".into(),
            size: None
        })
    );
}

#[test]
fn config_proxy_pass_to_named_and_implicit_upstreams() {
    let h = http(
        "server {\n listen 127.0.0.1:8090;\n location /a { proxy_pass http://Backend; }\n \
         location /b { proxy_pass http://127.0.0.1:8081/prefix/; }\n location /c { proxy_pass http://127.0.0.1:8081; }\n \
         location /d { proxy_pass http://localhost:8082; }\n}\nupstream backend { server 127.0.0.1:9000; }",
    );
    let locs = &h.servers[0].locations;
    // Named before it is declared, case-insensitively.
    let a = locs[0].proxy_pass.as_ref().unwrap();
    assert_eq!(h.upstreams[a.upstream].name, "backend");
    assert!(!h.upstreams[a.upstream].implicit);
    assert_eq!((a.scheme.as_str(), a.uri.as_deref()), ("http", None));
    // host:port makes one implicit upstream, shared by every proxy_pass to it.
    let b = locs[1].proxy_pass.as_ref().unwrap();
    let c = locs[2].proxy_pass.as_ref().unwrap();
    assert_eq!(b.upstream, c.upstream);
    assert_eq!(b.uri.as_deref(), Some("/prefix/"));
    let imp = &h.upstreams[b.upstream];
    assert!(imp.implicit);
    assert_eq!(imp.name, "127.0.0.1:8081");
    assert_eq!(imp.method, Method::RoundRobin);
    assert_eq!(imp.servers.len(), 1);
    let s = &imp.servers[0];
    assert_eq!(s.addrs, [sa("127.0.0.1:8081")]);
    assert_eq!(
        (s.weight, s.max_fails, s.fail_timeout, s.backup),
        (1, 1, secs(10), false)
    );
    // A name is resolved at load, every address kept.
    let d = &h.upstreams[locs[3].proxy_pass.as_ref().unwrap().upstream];
    assert!(d.implicit);
    assert_eq!(d.name, "localhost:8082");
    assert!(d.servers[0].addrs.contains(&sa("127.0.0.1:8082")));
    // The list keeps nginx's order: first named first.
    let names: Vec<&str> = h.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["backend", "127.0.0.1:8081", "localhost:8082"]);
}

#[test]
fn config_implicit_upstream_names_follow_proxy_host() {
    let h = http(
        "server { location / { proxy_pass http://127.0.0.1:80/x; } location /y { proxy_pass http://127.0.0.1; } }",
    );
    assert_eq!(h.upstreams.len(), 1, "port 80 written or not is the same upstream");
    assert_eq!(h.upstreams[0].name, "127.0.0.1");
    assert_eq!(h.upstreams[0].servers[0].addrs, [sa("127.0.0.1:80")]);
}

#[test]
fn config_proxy_settings_inherit_http_server_location() {
    let h = http(
        "proxy_connect_timeout 5s;\nproxy_read_timeout 30s;\nproxy_set_header Host $host;\n\
         proxy_next_upstream error timeout http_502;\nproxy_next_upstream_tries 3;\n\
         server {\n proxy_read_timeout 20s;\n proxy_http_version 1.1;\n\
          location /a { proxy_send_timeout 500ms; proxy_set_header X-Real-IP $remote_addr; \
         proxy_set_header Connection \"\"; }\n\
          location /b { proxy_next_upstream off; proxy_next_upstream_timeout 1m; }\n}",
    );
    let a = &h.servers[0].locations[0].proxy;
    assert_eq!(a.connect_timeout, secs(5));
    assert_eq!(a.read_timeout, secs(20));
    assert_eq!(a.send_timeout, Duration::from_millis(500));
    assert!(a.http_version_11);
    // A level's own proxy_set_header lines replace the inherited ones entirely.
    let names: Vec<&str> = a.set_headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["X-Real-IP", "Connection"]);
    assert!(a.set_headers[0].1.is_only(&Var::RemoteAddr));
    assert_eq!(a.set_headers[1].1.raw(), "");
    assert!(a.next_upstream.error && a.next_upstream.timeout && a.next_upstream.http_502);
    assert!(!a.next_upstream.http_500 && !a.next_upstream.non_idempotent);
    assert_eq!((a.next_upstream_tries, a.next_upstream_timeout), (3, Duration::ZERO));
    let b = &h.servers[0].locations[1].proxy;
    assert_eq!(b.next_upstream, NextUpstream::OFF);
    assert_eq!(b.next_upstream_timeout, secs(60));
    assert_eq!(b.set_headers.len(), 1);
    assert!(b.set_headers[0].1.is_only(&Var::Host));
}

#[test]
fn config_http_level_settings_apply_even_after_the_servers() {
    let h = http("server { location / { } }\nproxy_read_timeout 7s;\nkeepalive_timeout 0;");
    assert_eq!(only_location(&h).proxy.read_timeout, secs(7));
    assert_eq!(only_location(&h).client.keepalive_timeout, Duration::ZERO);
    assert_eq!(h.servers[0].client.keepalive_timeout, Duration::ZERO);
}

#[test]
fn config_defaults_when_nothing_is_set() {
    let h = http("server { location / { proxy_pass http://127.0.0.1:1; } }");
    let l = only_location(&h);
    assert_eq!(l.proxy, HttpProxyConf::default());
    assert_eq!(l.client, ClientConf::default());
    assert_eq!(l.proxy.next_upstream, NextUpstream::default());
    assert_eq!(h.servers[0].server_names, [""]);
}

#[test]
fn config_client_settings_inherit() {
    let h = http(
        "keepalive_timeout 65s 60;\nkeepalive_requests 100;\nclient_header_timeout 10s;\naccess_log off;\n\
         server {\n client_max_body_size 10m;\n client_header_timeout 5s;\n\
          location / { client_max_body_size 0; access_log /var/log/a.log combined; }\n\
          location /up { keepalive_requests 5; }\n}",
    );
    let s = &h.servers[0];
    assert_eq!(s.client.client_max_body_size, 10 * 1024 * 1024);
    assert_eq!(s.client.client_header_timeout, secs(5));
    assert!(s.client.access_log.is_empty(), "access_log off");
    let root = &s.locations[0].client;
    assert_eq!(root.client_max_body_size, 0);
    assert_eq!(root.keepalive_timeout, secs(65));
    assert_eq!(root.keepalive_requests, 100);
    assert_eq!(root.client_header_timeout, secs(5));
    assert_eq!(root.access_log.len(), 1);
    assert_eq!(root.access_log[0].path, std::path::Path::new("/var/log/a.log"));
    assert_eq!(root.access_log[0].format.name, "combined");
    let up = &s.locations[1].client;
    assert_eq!((up.keepalive_requests, up.client_max_body_size), (5, 10 * 1024 * 1024));
    assert!(up.access_log.is_empty(), "inherits access_log off");
}

#[test]
fn config_client_timeouts_and_header_buffers_inherit() {
    let h = http(
        "client_body_timeout 10s;\nsend_timeout 20s;\nlarge_client_header_buffers 8 16k;\n\
         server {\n send_timeout 5s;\n location / { client_body_timeout 1s; }\n}\n\
         server {\n listen 127.0.0.1:8081;\n large_client_header_buffers 2 1k;\n}",
    );
    let s = &h.servers[0];
    assert_eq!(
        (s.client.client_body_timeout, s.client.send_timeout),
        (secs(10), secs(5))
    );
    assert_eq!(
        s.client.large_client_header_buffers,
        HeaderBuffers {
            number: 8,
            size: 16 * 1024
        }
    );
    let root = &s.locations[0].client;
    assert_eq!((root.client_body_timeout, root.send_timeout), (secs(1), secs(5)));
    let other = &h.servers[1].client;
    assert_eq!(
        other.large_client_header_buffers,
        HeaderBuffers { number: 2, size: 1024 }
    );
    assert_eq!(other.send_timeout, secs(20));
    let d = ClientConf::default();
    assert_eq!((d.client_body_timeout, d.send_timeout), (secs(60), secs(60)));
    assert_eq!(d.large_client_header_buffers, HeaderBuffers { number: 4, size: 8192 });
}

#[test]
fn config_locations_prefix_and_exact() {
    let h = http("server { location / { } location = /exact { } location =/joined { } location \"\" { } }");
    let m: Vec<&LocationMatch> = h.servers[0].locations.iter().map(|l| &l.matcher).collect();
    assert_eq!(
        m,
        [
            &LocationMatch::Prefix("/".into()),
            &LocationMatch::Exact("/exact".into()),
            &LocationMatch::Exact("/joined".into()),
            &LocationMatch::Prefix(String::new()),
        ]
    );
    assert_eq!(h.servers[0].locations[1].span.line, 3);
}

#[test]
fn config_listens() {
    let h = http(
        "server {\n listen 8080;\n listen *:8081 default_server reuseport backlog=511;\n listen [::1]:8082 default;\n \
         listen 127.0.0.1:8083 bind;\n listen 127.0.0.1:9000-9001;\n}",
    );
    let l: Vec<(SocketAddr, bool)> = h.servers[0]
        .listens
        .iter()
        .map(|l| (l.addr, l.default_server))
        .collect();
    assert_eq!(
        l,
        [
            (sa("0.0.0.0:8080"), false),
            (sa("0.0.0.0:8081"), true),
            (sa("[::1]:8082"), true),
            (sa("127.0.0.1:8083"), false),
            (sa("127.0.0.1:9000"), false),
            (sa("127.0.0.1:9001"), false),
        ]
    );
    assert_eq!(h.servers[0].listens[1].span.line, 5);
}

#[test]
fn config_a_server_without_listen_gets_nginx_default() {
    let h = http("server { }");
    let l = &h.servers[0].listens;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].addr.ip(), "0.0.0.0".parse::<std::net::IpAddr>().unwrap());
    assert!([80, 8000].contains(&l[0].addr.port()), "{:?}", l[0].addr);
}

#[test]
fn config_server_names() {
    let h = http("server { server_name Example.COM *.example.org .example.net www.; server_name \"\"; }");
    assert_eq!(
        h.servers[0].server_names,
        ["example.com", "*.example.org", ".example.net", "www.", ""]
    );
    let h = http("server { server_name $hostname; }");
    assert_eq!(h.servers[0].server_names.len(), 1);
    assert!(!h.servers[0].server_names[0].is_empty());
}

#[test]
fn config_returns() {
    let h = http(
        "server {\n return 444;\n location /a { return 200 \"hello $remote_addr\"; return 404; }\n \
         location /b { return https://example.com$request_uri; }\n location /c { return 301 /new; }\n \
         location /d { return 0; }\n}",
    );
    let s = &h.servers[0];
    assert_eq!(s.ret, Some(Return { code: 444, text: None }));
    let r: Vec<Option<Return>> = s.locations.iter().map(|l| l.ret.clone()).collect();
    assert_eq!(
        r,
        [
            Some(Return {
                code: 200,
                text: Some("hello $remote_addr".into())
            }),
            Some(Return {
                code: 302,
                text: Some("https://example.com$request_uri".into())
            }),
            Some(Return {
                code: 301,
                text: Some("/new".into())
            }),
            Some(Return { code: 0, text: None }),
        ]
    );
}

#[test]
fn config_stream_servers() {
    let s = stream(
        "proxy_connect_timeout 2s;\nproxy_next_upstream off;\n\
         upstream db { hash $remote_addr consistent; server 127.0.0.1:5432; server 127.0.0.1:5433 weight=2; }\n\
         server { listen 127.0.0.1:6000; proxy_pass db; proxy_timeout 30s; proxy_next_upstream_tries 2; }\n\
         server { listen 6001; proxy_pass 127.0.0.1:7000; proxy_connect_timeout 1s; proxy_next_upstream on; }\n\
         server { listen 6002; proxy_pass localhost:7001; }",
    );
    assert_eq!(s.servers.len(), 3);
    let a = &s.servers[0];
    assert_eq!(a.listens[0].addr, sa("127.0.0.1:6000"));
    assert_eq!(s.upstreams[a.upstream.unwrap()].name, "db");
    match &s.upstreams[a.upstream.unwrap()].method {
        Method::Hash { key, consistent: true } => assert!(key.is_only(&Var::RemoteAddr)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (a.connect_timeout, a.timeout, a.next_upstream, a.next_upstream_tries),
        (secs(2), secs(30), false, 2)
    );
    let b = &s.servers[1];
    assert_eq!(b.listens[0].addr, sa("0.0.0.0:6001"));
    assert_eq!(
        (b.connect_timeout, b.timeout, b.next_upstream),
        (secs(1), secs(600), true)
    );
    let imp = &s.upstreams[b.upstream.unwrap()];
    assert!(imp.implicit);
    assert_eq!(imp.name, "127.0.0.1:7000");
    assert_eq!(imp.servers[0].addrs, [sa("127.0.0.1:7000")]);
    let c = &s.upstreams[s.servers[2].upstream.unwrap()];
    assert!(c.servers[0].addrs.contains(&sa("127.0.0.1:7001")));
}

#[test]
fn config_stream_defaults() {
    let s = stream("server { listen 127.0.0.1:6000; proxy_pass 127.0.0.1:7000; }");
    let a = &s.servers[0];
    assert_eq!(
        (a.connect_timeout, a.timeout, a.next_upstream, a.next_upstream_tries),
        (secs(60), secs(600), true, 0)
    );
    assert_eq!(a.span.line, 3);
}

#[test]
fn config_quoting_and_comments_reach_the_model() {
    let h = http(
        "# a comment { ; }\nupstream 'b' { server \"127.0.0.1:1\" 'weight=2'; } # trailing\n\
         server { location \"/with space\" { return 200 'it\\'s \"ok\"\\n'; } }",
    );
    assert_eq!(h.upstream("b").unwrap().servers[0].weight, 2);
    let l = only_location(&h);
    assert_eq!(l.matcher, LocationMatch::Prefix("/with space".into()));
    assert_eq!(l.ret.as_ref().unwrap().text.as_deref(), Some("it's \"ok\"\n"));
}
