//! The `Location` of corelb's own redirects (`return 3XX`, `rewrite ... redirect|permanent`) completed as nginx's
//! header filter completes it (`absolute_redirect`, `server_name_in_redirect`, `port_in_redirect`), and the
//! pages of those answers, end to end on both runtimes with exact bytes.

mod support;

use std::net::SocketAddr;
use support::api_client::start;
use support::{free_addr, Client, Response};

fn config_text(listen: SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
 server {{
  listen {listen};
  server_name first.example second.example;
  location /ret {{ return 301 /to?a=1; }}
  location /var {{ return 302 /v$uri; }}
  location /full {{ return 302 http://other.example/x; }}
  location /rw {{ rewrite ^/rw/(.*)$ /new/$1 redirect; }}
  location /off {{ absolute_redirect off; return 302 /relative; }}
  location /name {{ server_name_in_redirect on; return 302 /n; }}
  location /noport {{ port_in_redirect off; return 302 /p; }}
  location /gone {{ return 410; }}
  location /teapot {{ return 418; }}
 }}
}}
"#
    )
}

/// One request (`raw` sent as is) on a new connection.
fn ask(listen: SocketAddr, raw: &str) -> Response {
    let mut c = Client::connect(listen);
    c.send(raw.as_bytes());
    c.read_response().unwrap_or_else(|| panic!("no answer to {raw:?}"))
}

fn get_host(listen: SocketAddr, path: &str, host: &str) -> Response {
    ask(
        listen,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

#[test]
fn redirects_are_completed_as_nginx_header_filter_on_both_runtimes() {
    for rt in 0..2 {
        let listen = free_addr();
        let _p = start(rt, &config_text(listen));
        let port = listen.port();
        for (path, host, location) in [
            (
                "/ret",
                "Test.Example:1234",
                format!("http://test.example:{port}/to?a=1"),
            ),
            ("/var", "h", format!("http://h:{port}/v/var")),
            ("/full", "h", "http://other.example/x".to_string()),
            ("/rw/a?k=v", "h", format!("http://h:{port}/new/a?k=v")),
            ("/off", "h", "/relative".to_string()),
            ("/name", "h", format!("http://first.example:{port}/n")),
            ("/noport", "h", "http://h/p".to_string()),
        ] {
            let r = get_host(listen, path, host);
            assert_eq!(r.header("location"), Some(location), "runtime {rt}: {path}");
        }
        // without a Host header: the address the client connected to
        let r = ask(listen, "GET /ret HTTP/1.0\r\n\r\n");
        assert_eq!(
            r.header("location"),
            Some(format!("http://{}:{port}/to?a=1", listen.ip())),
            "runtime {rt}"
        );
        // nginx's page of a 302 is titled `302 Found`; its status line says `Moved Temporarily`
        let r = get_host(listen, "/var", "h");
        assert!(
            r.head.starts_with("HTTP/1.1 302 Moved Temporarily\r\n"),
            "runtime {rt}: {}",
            r.head
        );
        assert!(
            r.text()
                .starts_with("<html>\r\n<head><title>302 Found</title></head>\r\n"),
            "runtime {rt}"
        );
        // a code with a page, and one without (no body, no Content-Type)
        let r = get_host(listen, "/gone", "h");
        assert!(r.head.starts_with("HTTP/1.1 410 Gone\r\n"), "runtime {rt}: {}", r.head);
        assert!(
            r.text().starts_with("<html>\r\n<head><title>410 Gone</title></head>"),
            "runtime {rt}"
        );
        let r = get_host(listen, "/teapot", "h");
        assert!(r.head.starts_with("HTTP/1.1 418 \r\n"), "runtime {rt}: {}", r.head);
        assert_eq!(
            (r.header("content-length"), r.header("content-type")),
            (Some("0".into()), None)
        );
    }
}

/// A directory's slash and a `proxy_pass` location's slash (nginx's `auto_redirect`) under the server's
/// `absolute_redirect`, `server_name_in_redirect` and `port_in_redirect`: a location name escaped once.
fn slash_config(listen: SocketAddr, root: &std::path::Path) -> String {
    let root = root.display();
    format!(
        r#"events {{}}
http {{
 absolute_redirect off;
 server {{
  listen {listen};
  server_name on;
  absolute_redirect on;
  root {root};
  location / {{ }}
  location "/auto sp/" {{ proxy_pass http://127.0.0.1:9; }}
 }}
 server {{
  listen {listen};
  server_name off;
  root {root};
  location / {{ }}
  location "/auto sp/" {{ proxy_pass http://127.0.0.1:9; }}
 }}
 server {{
  listen {listen};
  server_name named.example;
  absolute_redirect on;
  server_name_in_redirect on;
  port_in_redirect off;
  root {root};
  location / {{ }}
 }}
}}
"#
    )
}

#[test]
fn slash_redirects_follow_absolute_redirect_on_both_runtimes() {
    let root = std::env::temp_dir().join(format!("corelb-slash-redirects-{}", std::process::id()));
    std::fs::create_dir_all(root.join("dir sp")).unwrap();
    for rt in 0..2 {
        let listen = free_addr();
        let _p = start(rt, &slash_config(listen, &root));
        let port = listen.port();
        for (host, path, location) in [
            ("on", "/dir%20sp?a=b", format!("http://on:{port}/dir%20sp/?a=b")),
            ("on", "/auto%20sp?a=b", format!("http://on:{port}/auto%20sp/?a=b")),
            ("off", "/dir%20sp", "/dir%20sp/".to_string()),
            ("off", "/auto%20sp?a=b", "/auto%20sp/?a=b".to_string()),
            (
                "named.example",
                "/dir%20sp",
                "http://named.example/dir%20sp/".to_string(),
            ),
        ] {
            let r = get_host(listen, path, host);
            assert!(
                r.head.starts_with("HTTP/1.1 301 "),
                "runtime {rt}: {host}{path}: {}",
                r.head
            );
            assert_eq!(r.header("location"), Some(location), "runtime {rt}: {host}{path}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
