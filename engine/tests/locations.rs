//! Locations picked as nginx picks them, end to end on both runtimes: exact, longest prefix, `^~`, regexes in
//! config order (`~*` caseless), nested locations, named locations reached by no path, and a regex location that
//! proxies (the request target sent as is).

mod support;

use support::api_client::start;
use support::backend::{Backend, Mode};
use support::{free_addr, get};

/// nginx-tests' http_location.t locations (each answering its name), then nested, `^~` and named ones.
fn config_text(listen: std::net::SocketAddr, backend: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
 upstream php {{ server {backend}; }}
 server {{
  listen {listen};
  location = / {{ return 200 "exactlyroot"; }}
  location / {{ return 200 "root"; }}
  location ^~ /images/ {{ return 200 "images"; }}
  location ~* \.(gif|jpg|jpeg)$ {{ return 200 "regex"; }}
  location ~ casefull {{ return 200 "casefull"; }}
  location = /foo {{ return 200 "/foo exact"; }}
  location /foo {{ return 200 "/foo prefix"; }}
  location = /foo/ {{ return 200 "/foo/ exact"; }}
  location /foo/ {{ return 200 "/foo/ prefix"; }}
  location /lowercase {{ return 200 "lowercase"; }}
  location /UPPERCASE {{ return 200 "uppercase"; }}
  location /app/ {{
   return 200 "app";
   location /app/admin/ {{ return 200 "app admin"; }}
   location ~ \.php$ {{ proxy_pass http://php; }}
   location = /app/x.php {{ return 200 "app exact"; }}
  }}
  location ^~ /static/ {{
   return 200 "static";
   location ~ \.css$ {{ return 200 "static css"; }}
  }}
  location @fallback {{ return 200 "named"; }}
 }}
}}
"#
    )
}

#[test]
fn locations_are_picked_as_nginx_picks_them_on_both_runtimes() {
    for rt in 0..2 {
        let backend = Backend::start("php", Mode::Ok);
        let listen = free_addr();
        let _p = start(rt, &config_text(listen, backend.addr));
        for (path, want) in [
            ("/", "exactlyroot"),
            ("/x", "root"),
            ("/images/t.gif", "images"),
            ("/t.gif", "regex"),
            ("/t.GIF", "regex"),
            ("/casefull/t.gif", "regex"),
            ("/casefull/", "casefull"),
            ("/foo", "/foo exact"),
            ("/foobar", "/foo prefix"),
            ("/foo/", "/foo/ exact"),
            ("/foo/bar", "/foo/ prefix"),
            ("/CASEFULL/", "root"),
            ("/lowercase", "lowercase"),
            ("/UPPERCASE", "uppercase"),
            ("/app/", "app"),
            ("/app/admin/users", "app admin"),
            ("/app/x.php", "app exact"),
            ("/app/a.gif", "regex"),
            ("/static/a.gif", "static"),
            ("/static/site.css", "static css"),
            ("/@fallback", "root"),
            // the normalized path is matched: `%2E` decoded, `..` resolved
            ("/a/..//t%2EJPG", "regex"),
        ] {
            let r = get(listen, path).unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            assert_eq!((r.status, r.text()), (200, want.to_string()), "runtime {rt}: {path}");
        }
        let r = get(listen, "/app/admin/index.php?x=1").expect("an answer");
        assert_eq!((r.status, r.text()), (200, "php".to_string()), "runtime {rt}");
        assert!(
            backend
                .last_head()
                .starts_with("GET /app/admin/index.php?x=1 HTTP/1.0\r\n"),
            "runtime {rt}: {}",
            backend.last_head()
        );
    }
}

/// `if`, `break` and `return` in a server and its locations, in the order nginx runs them.
fn rewrite_text(listen: std::net::SocketAddr, dir: &std::path::Path) -> String {
    let dir = dir.display();
    format!(
        r#"events {{}}
http {{
 server {{
  listen {listen};
  if ($http_x_block) {{ return 403; }}
  location / {{
   if ($arg_c) {{ return 204; }}
   if ($arg_c = 0) {{ return 200 "zero"; }}
   return 200 "root";
  }}
  location /eq {{ if ($arg_c != 2) {{ return 200 "not 2"; }} return 200 "2"; }}
  location /re {{ if ($arg_c ~* ^foo) {{ return 200 "foo"; }} if ($arg_c !~ bar) {{ return 200 "no bar"; }} }}
  location /file {{ if (-f {dir}/$arg_c) {{ return 200 "file"; }} if (!-e {dir}/$arg_c) {{ return 200 "none"; }} }}
  location /brk {{ if ($arg_c) {{ break; }} return 200 "went on"; }}
 }}
}}
"#
    )
}

#[test]
fn rewrite_directives_run_in_nginx_order_on_both_runtimes() {
    let dir = std::env::temp_dir().join(format!("corelb-locations-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).expect("temp dir");
    std::fs::write(dir.join("f"), "").expect("file");
    for rt in 0..2 {
        let listen = free_addr();
        let _p = start(rt, &rewrite_text(listen, &dir));
        for (path, status, body) in [
            ("/?c=1", 204, ""),
            ("/?c=0", 200, "zero"),
            ("/", 200, "root"),
            ("/eq?c=3", 200, "not 2"),
            ("/eq?c=2", 200, "2"),
            ("/re?c=FOOD", 200, "foo"),
            ("/re?c=xbar", 404, ""),
            ("/re?c=x", 200, "no bar"),
            ("/file?c=f", 200, "file"),
            ("/file?c=sub", 404, ""),
            ("/file?c=nx", 200, "none"),
            ("/brk?c=1", 404, ""),
            ("/brk", 200, "went on"),
        ] {
            let r = get(listen, path).unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            let text = r.text();
            let got_body = if status == 404 { "" } else { text.as_str() };
            assert_eq!((r.status, got_body), (status, body), "runtime {rt}: {path}");
        }
        let mut c = support::Client::connect(listen);
        c.send(b"GET /?c=1 HTTP/1.1\r\nHost: a\r\nX-Block: 1\r\nConnection: close\r\n\r\n");
        assert_eq!(
            c.read_response().map(|r| r.status),
            Some(403),
            "runtime {rt}: server-level if"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rewrite` with each flag: redirects (`Location` built from the captures and the arguments), `last` searching
/// the locations again, `break` staying, and the rewritten URI proxied.
fn rewrite_flags_text(listen: std::net::SocketAddr, backend: std::net::SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
 upstream b {{ server {backend}; }}
 server {{
  listen {listen};
  rewrite ^/old/(.*)$ /new/$1 permanent;
  rewrite ^/tmp/(?<rest>.*)$ http://example.com/$rest;
  rewrite ^/srv/(.*)$ /in/$1;
  location /in/ {{ return 200 "in"; }}
  location /new/ {{ return 200 "new"; }}
  location /a/ {{ rewrite ^/a/(.*)$ /b/$1 last; return 200 "not reached"; }}
  location /b/ {{ return 200 "b"; }}
  location /loop/ {{ rewrite ^ /loop/ last; }}
  location /p/ {{ rewrite ^/p/(.*)$ /q/$1 break; proxy_pass http://b; }}
  location /drop/ {{ rewrite ^ /x? redirect; }}
  location ~ ^/u/(\d+)$ {{ rewrite ^ /user/$1 last; }}
  location /user/ {{ proxy_pass http://b; }}
 }}
}}
"#
    )
}

#[test]
fn rewrite_flags_as_nginx_on_both_runtimes() {
    for rt in 0..2 {
        let backend = Backend::start("b", Mode::Ok);
        let listen = free_addr();
        let _p = start(rt, &rewrite_flags_text(listen, backend.addr));
        // a redirect's `Location` starting with `/` is made absolute (`absolute_redirect on`): the Host, the port
        let at = |path: &str| format!("http://test:{}{path}", listen.port());
        for (path, status, location, body) in [
            ("/old/x?k=v", 301, Some(at("/new/x?k=v")), None),
            ("/tmp/a/b", 302, Some("http://example.com/a/b".to_string()), None),
            ("/drop/y?k=v", 302, Some(at("/x")), None),
            ("/srv/z", 200, None, Some("in")),
            ("/a/c", 200, None, Some("b")),
            ("/loop/", 500, None, None),
        ] {
            let r = get(listen, path).unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            assert_eq!(r.status, status, "runtime {rt}: {path}");
            assert_eq!(r.header("location"), location, "runtime {rt}: {path}");
            if let Some(b) = body {
                assert_eq!(r.text(), b, "runtime {rt}: {path}");
            }
        }
        // nginx's auto_redirect: a `proxy_pass` location `/x/` takes `/x` with a 301, its `Location` made absolute
        for (path, location) in [("/p", "/p/"), ("/user?x=1", "/user/?x=1")] {
            let r = get(listen, path).unwrap_or_else(|| panic!("runtime {rt}: no answer for {path}"));
            let absolute = format!("http://test:{}{location}", listen.port());
            assert_eq!(
                (r.status, r.header("location")),
                (301, Some(absolute)),
                "runtime {rt}: {path}"
            );
        }
        let r = get(listen, "/p/s%20t?x=1").expect("an answer");
        assert_eq!((r.status, r.text()), (200, "b".to_string()), "runtime {rt}");
        assert!(
            backend.last_head().starts_with("GET /q/s%20t?x=1 HTTP/1.0\r\n"),
            "runtime {rt}: {}",
            backend.last_head()
        );
        // the rewrite's own match (no groups) replaces the location regex's captures: nginx 1.22 sends /user/
        let r = get(listen, "/u/42").expect("an answer");
        assert_eq!(r.status, 200, "runtime {rt}");
        assert!(
            backend.last_head().starts_with("GET /user/ HTTP/1.0\r\n"),
            "runtime {rt}: {}",
            backend.last_head()
        );
    }
}
