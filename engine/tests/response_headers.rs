//! Response headers end to end, on both runtimes: `add_header` (nginx's inheritance, `always`, variables, an
//! empty value, `ETag` replacing the upstream's), `expires`, `server_tokens`, the upstream headers nginx hides by
//! default, `proxy_hide_header`/`proxy_pass_header`, `proxy_redirect` (`default`, explicit, `off`) on
//! `Location` and `Refresh`, `proxy_cookie_domain`/`proxy_cookie_path` on `Set-Cookie`; on proxied responses, `return` answers and error pages. Exact heads (the `Date` and
//! the `Expires` of `expires 1h` masked).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use support::{dead_addr, free_addr, glommio_usable, Client, Proxy};

/// An upstream that answers every request with the same head (its `Location` and `Refresh` name the path it
/// was asked for), then closes; with `X-Accel-Redirect` when `accel` (an internal redirect, in nginx and corelb:
/// engine/tests/accel_redirect.rs covers it).
fn upstream(accel: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match conn.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let text = String::from_utf8_lossy(&head);
            let path = text.split(' ').nth(1).unwrap_or("/").to_string();
            let redirect = if accel { "X-Accel-Redirect: /internal\r\n" } else { "" };
            let answer = format!(
                "HTTP/1.1 200 OK\r\nServer: upstream\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\nX-Pad: avoid browser bug\r\n\
                 {redirect}X-Accel-Other: kept\r\nX-Secret: s\r\nETag: \"up\"\r\n\
                 Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nExpires: never\r\nCache-Control: private\r\n\
                 Location: http://{addr}{path}\r\nRefresh: 5; url=http://{addr}{path}\r\n\
                 Set-Cookie: sid=1;Domain=.Backend.Local; Path=/app/x; HttpOnly\r\nContent-Length: 2\r\n\
                 Connection: close\r\n\r\nok"
            );
            let _ = conn.write_all(answer.as_bytes());
        }
    });
    addr
}

fn config(front: SocketAddr, up: SocketAddr, dead: SocketAddr) -> corelb_engine::config::model::Config {
    corelb_engine::config::parse_str(
        &config_text(front, up, dead),
        std::path::Path::new("response_headers.conf"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The config both corelb and nginx run.
fn config_text(front: SocketAddr, up: SocketAddr, dead: SocketAddr) -> String {
    format!(
        r#"events {{}}
http {{
    add_header X-Http http-level;
    server {{
        listen {front};
        server_tokens off;
        location /plain/ {{
            proxy_pass http://{up};
        }}
        location /own/ {{
            add_header X-Own $uri always;
            add_header ETag "";
            expires 1h;
            proxy_hide_header X-Secret;
            proxy_pass_header Server;
            proxy_cookie_domain backend.local example.com;
            proxy_cookie_path /app/ /;
            proxy_pass http://{up}/x/;
        }}
        location /redir/ {{
            proxy_pass http://{up};
            proxy_redirect http://{up}/redir/ /new/;
        }}
        location /off/ {{
            proxy_pass http://{up}/;
            proxy_redirect off;
            expires epoch;
        }}
        location /ret {{
            return 200 hi;
        }}
        location /modified/ {{
            expires modified 2048;
            proxy_pass http://{up};
        }}
        location /var {{
            expires $arg_e;
            return 204;
        }}
        location /missing {{
            return 404;
        }}
        location /always {{
            add_header X-A "a $request_method" always;
            add_header X-Empty $arg_none always;
            server_tokens on;
            return 404;
        }}
        location /dead/ {{
            add_header X-A a always;
            add_header X-Safe only-safe;
            proxy_pass http://{dead};
        }}
    }}
}}
"#
    )
}

/// The head of the answer to `GET path` (Host `Test.Example`), with the values that change masked.
fn head_of(front: SocketAddr, path: &str) -> (String, String) {
    let mut c = Client::connect(front);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: Test.Example\r\nConnection: close\r\n\r\n").as_bytes());
    let r = c.read_response().expect("a response");
    let masked: Vec<String> = r
        .head
        .split("\r\n")
        .map(|l| {
            if l.starts_with("Date: ") && !l.contains("2001") {
                "Date: D".to_string()
            } else if l.starts_with("Expires: ") && !l.contains("1970") && l != "Expires: never" {
                "Expires: E".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    (masked.join("\r\n"), r.text())
}

fn sequence<R: Runtime>() {
    let (front, up, dead) = (free_addr(), upstream(false), dead_addr());
    let _proxy = Proxy::start::<R>(config(front, up, dead), 1);
    let port = front.port();
    let version = env!("CARGO_PKG_VERSION");

    // Inherited http-level line; nginx's hidden headers (Server, Date, X-Pad) dropped, other
    // X-Accel-* kept; proxy_redirect default (no URI part: "http://up/" -> "/"), absolute with the request's host.
    let (head, body) = head_of(front, "/plain/a?q=1");
    assert_eq!(
        head,
        format!(
            "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nX-Accel-Other: kept\r\nX-Secret: s\r\nETag: \"up\"\r\n\
             Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nExpires: never\r\nCache-Control: private\r\n\
             Location: http://test.example:{port}/plain/a?q=1\r\nRefresh: 5; url=/plain/a?q=1\r\n\
             Set-Cookie: sid=1;Domain=.Backend.Local; Path=/app/x; HttpOnly\r\nContent-Length: 2\r\n\
             Connection: close\r\nX-Http: http-level\r\n\r\n"
        )
    );
    assert_eq!(body, "ok");

    // Own lines only; ETag "" drops the upstream's; expires replaces Expires and Cache-Control; hidden X-Secret;
    // the upstream's Server passed (and corelb's own left out); default redirect with a URI part.
    let (head, _) = head_of(front, "/own/b");
    assert_eq!(
        head,
        format!(
            "HTTP/1.1 200 OK\r\nDate: D\r\nServer: upstream\r\nX-Accel-Other: kept\r\n\
             Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nLocation: http://test.example:{port}/own/b\r\n\
             Refresh: 5; url=/own/b\r\nSet-Cookie: sid=1; Domain=.example.com; Path=/x; HttpOnly\r\n\
             Content-Length: 2\r\nConnection: close\r\nExpires: E\r\n\
             Cache-Control: max-age=3600\r\nX-Own: /own/b\r\n\r\n"
        )
    );

    // An explicit rule; `off`, with expires epoch.
    let (head, _) = head_of(front, "/redir/c");
    assert!(
        head.contains(&format!(
            "\r\nLocation: http://test.example:{port}/new/c\r\nRefresh: 5; url=/new/c\r\n"
        )),
        "{head}"
    );
    let (head, _) = head_of(front, "/off/d");
    assert!(
        head.contains(&format!(
            "\r\nLocation: http://{up}/d\r\nRefresh: 5; url=http://{up}/d\r\n"
        )),
        "{head}"
    );
    assert!(
        head.ends_with(
            "Connection: close\r\nExpires: Thu, 01 Jan 1970 00:00:01 GMT\r\nCache-Control: no-cache\r\n\
             X-Http: http-level\r\n\r\n"
        ),
        "{head}"
    );

    // headers.t's "expires modified proxy": 2048 s after the upstream's Last-Modified, long past: no-cache.
    let (head, _) = head_of(front, "/modified/f");
    assert!(
        head.ends_with(
            "Connection: close\r\nExpires: Mon, 28 Sep 1970 06:34:08 GMT\r\nCache-Control: no-cache\r\n\
             X-Http: http-level\r\n\r\n"
        ),
        "{head}"
    );
    assert!(!head.contains("Expires: never") && !head.contains("private"), "{head}");

    // expires with a variable: parsed per request; a value that does not parse (or none) sets nothing.
    let tail = |e: &str| {
        let (head, _) = head_of(front, &format!("/var?e={e}"));
        head.split("Connection: close\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        tail("2048"),
        "Expires: E\r\nCache-Control: max-age=2048\r\nX-Http: http-level\r\n\r\n"
    );
    assert_eq!(
        tail("-5"),
        "Expires: E\r\nCache-Control: no-cache\r\nX-Http: http-level\r\n\r\n"
    );
    assert_eq!(
        tail("epoch"),
        "Expires: Thu, 01 Jan 1970 00:00:01 GMT\r\nCache-Control: no-cache\r\nX-Http: http-level\r\n\r\n"
    );
    assert_eq!(tail("bad"), "X-Http: http-level\r\n\r\n");
    assert_eq!(tail("off"), "X-Http: http-level\r\n\r\n");

    // A return answer gets the inherited line; a 404 does not (not `always`).
    let (head, body) = head_of(front, "/ret");
    assert_eq!(
        head,
        "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\
         Connection: close\r\nX-Http: http-level\r\n\r\n"
    );
    assert_eq!(body, "hi");
    let (head, body) = head_of(front, "/missing");
    assert_eq!(
        head,
        "HTTP/1.1 404 Not Found\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: 147\r\n\
         Connection: close\r\n\r\n"
    );
    assert!(body.contains("<hr><center>corelb</center>"), "{body}");

    // `always` on a 404, a variable in the value, an empty value dropped; server_tokens on in the location.
    let (head, body) = head_of(front, "/always");
    let page = 147 + version.len() + 1;
    assert_eq!(
        head,
        format!(
            "HTTP/1.1 404 Not Found\r\nServer: corelb/{version}\r\nDate: D\r\nContent-Type: text/html\r\n\
             Content-Length: {page}\r\nConnection: close\r\nX-A: a GET\r\n\r\n"
        )
    );
    assert!(
        body.contains(&format!("<hr><center>corelb/{version}</center>")),
        "{body}"
    );

    // corelb's own 502 page: only the `always` line.
    let (head, _) = head_of(front, "/dead/e");
    assert!(
        head.starts_with("HTTP/1.1 502 Bad Gateway\r\nServer: corelb\r\n"),
        "{head}"
    );
    assert!(head.ends_with("Connection: close\r\nX-A: a\r\n\r\n"), "{head}");
}

/// The paths the comparison with nginx asks for.
const PATHS: [&str; 13] = [
    "/plain/a?q=1",
    "/own/b",
    "/redir/c",
    "/off/d",
    "/modified/f",
    "/var?e=2048",
    "/var?e=-5",
    "/var?e=epoch",
    "/var?e=bad",
    "/ret",
    "/missing",
    "/always",
    "/dead/e",
];

/// A head as a sorted list of lines, with what differs by design made equal: the product name and version, the
/// front's port, and the length of error pages (whose footer names the product).
fn comparable(head: &str, port: u16) -> Vec<String> {
    let version = env!("CARGO_PKG_VERSION");
    let html = head.contains("Content-Type: text/html");
    let mut lines: Vec<String> = head
        .split("\r\n")
        .filter(|l| !(l.is_empty() || html && l.starts_with("Content-Length: ")))
        .map(|l| {
            l.replace(&format!("nginx/{}", "1.22.1"), "NAME/V")
                .replace(&format!("corelb/{version}"), "NAME/V")
                .replace("Server: nginx", "Server: NAME")
                .replace("Server: corelb", "Server: NAME")
                .replace(&format!(":{port}/"), ":PORT/")
        })
        .collect();
    lines.sort();
    lines
}

/// nginx 1.22 (when installed) running the same config against the same upstream answers with the same header
/// lines (nginx orders some of them differently: docs/directives.md).
#[test]
fn tokio_response_headers_are_nginx_s() {
    let nginx = std::path::PathBuf::from(std::env::var_os("NGINX").unwrap_or_else(|| "/usr/sbin/nginx".into()));
    if !nginx.exists() {
        support::skip::skip(support::skip::Skip {
            need: support::skip::Need::Nginx,
            cases: PATHS.len(),
            what: "nginx comparisons",
            why: "nginx not installed",
        });
        return;
    }
    let (up, dead) = (upstream(false), dead_addr());
    let dir = std::env::temp_dir().join(format!("corelb-response-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (ours, theirs) = (free_addr(), free_addr());
    let _proxy = Proxy::start::<Tokio>(config(ours, up, dead), 1);
    let conf = dir.join("nginx.conf");
    let main = format!(
        "daemon off;\nmaster_process off;\npid {0}/nginx.pid;\nerror_log {0}/error.log;\n",
        dir.display()
    );
    // reuseport: the test's port holder has SO_REUSEPORT, as corelb's listeners have
    let http = config_text(theirs, up, dead)
        .replace("http {", "http {\n    access_log off;")
        .replace(&format!("listen {theirs};"), &format!("listen {theirs} reuseport;"));
    std::fs::write(&conf, main + &http).expect("write nginx.conf");
    let mut child = std::process::Command::new(&nginx)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start nginx");
    let up_now = support::wait_until(std::time::Duration::from_secs(10), || {
        std::net::TcpStream::connect(theirs).is_ok()
    });
    let mut differences = Vec::new();
    if up_now {
        for path in PATHS {
            let (a, _) = head_of(ours, path);
            let (b, _) = head_of(theirs, path);
            let (a, b) = (comparable(&a, ours.port()), comparable(&b, theirs.port()));
            if a != b {
                differences.push(format!("{path}:\n  corelb {a:?}\n  nginx  {b:?}"));
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(up_now, "nginx did not start on {theirs}: {log}");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn tokio_response_headers_as_nginx() {
    sequence::<Tokio>();
}

#[test]
fn glommio_response_headers_as_nginx() {
    if glommio_usable() {
        sequence::<Glommio>();
    }
}
