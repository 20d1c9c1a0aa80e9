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
