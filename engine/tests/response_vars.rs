//! Response-time variables end to end, on both runtimes: `add_header` values naming `$upstream_addr`,
//! `$upstream_status` (a try that failed, a backup that answered, "no live upstreams" naming the upstream),
//! `$upstream_http_*`, `$upstream_cookie_*`, `$sent_http_*` and `$status`, as nginx's header filter writes them;
//! `return 444` closing without an answer; a stream `map` in a stream `return` and in `proxy_pass $map` (an
//! upstream's name, an address). Exact heads (the `Date` masked).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use support::{dead_addr, free_addr, glommio_usable, Client, Proxy};

/// An upstream that answers every request with the same head and `ok`, then closes.
fn upstream() -> SocketAddr {
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
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nX-Len: 42\r\nSet-Cookie: sid=abc; Path=/\r\nContent-Length: 2\r\n\
                  Connection: close\r\n\r\nok",
            );
        }
    });
    addr
}

/// The addresses of one run.
struct Addrs {
    front: SocketAddr,
    up: SocketAddr,
    dead: SocketAddr,
    gone: [SocketAddr; 2],
    /// Two `return` servers, then three `proxy_pass $up` ones.
    stream: [SocketAddr; 5],
    /// A `root` with `files/a.txt`.
    root: std::path::PathBuf,
}

fn config_text(a: &Addrs) -> String {
    let Addrs {
        front,
        up,
        dead,
        gone: [g1, g2],
        stream: [s1, s2, s3, s4, s5],
        ..
    } = a;
    format!(
        r#"events {{}}
http {{
    upstream backed {{
        server {dead} max_fails=0;
        server {up} backup;
    }}
    upstream gone {{
        server {g1};
        server {g2};
    }}
    server {{
        listen {front};
        server_tokens off;
        add_header X-IP $upstream_addr always;
        add_header X-S $upstream_status always;
        location /one/ {{
            proxy_pass http://{up};
        }}
        location /retry/ {{
            proxy_pass http://backed;
        }}
        location /gone/ {{
            proxy_pass http://gone;
        }}
        location /headers/ {{
            proxy_pass http://{up};
            add_header X-U "$upstream_http_x_len/$upstream_cookie_sid";
            add_header X-T "$status $sent_http_content_length $sent_http_x_u";
            add_header X-Uri $uri;
        }}
        location /ret {{
            return 200 hi;
        }}
        location /close {{
            return 444;
        }}
        location /scripted {{
            add_header X-Script "$uri $status" always;
            if ($arg_x) {{
                return 204;
            }}
            return 200 hi;
        }}
        location /files/ {{
            root {root};
            add_header X-F "$status $sent_http_content_length $sent_http_content_type";
        }}
    }}
}}
stream {{
    map $server_port $x {{
        {p1} literal;
        default default;
    }}
    server {{
        listen {s1};
        listen {s2};
        return "$x:${{x}}";
    }}
    upstream back {{
        server {s1};
    }}
    map $server_port $up {{
        {p3} back;
        {p4} {s2};
        default $server_addr;
    }}
    server {{
        listen {s3};
        listen {s4};
        listen {s5};
        proxy_pass $up;
    }}
}}
"#,
        root = a.root.display(),
        p1 = s1.port(),
        p3 = s3.port(),
        p4 = s4.port(),
    )
}

/// The head of the answer to `GET path`, its `Date` masked, and the body.
fn get(front: SocketAddr, path: &str) -> (String, String) {
    let mut c = Client::connect(front);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    let r = c.read_response().expect("a response");
    let head: Vec<&str> = r
        .head
        .split("\r\n")
        .map(|l| if l.starts_with("Date: ") { "Date: D" } else { l })
        .collect();
    (head.join("\r\n"), r.text())
}

/// What a stream server sends before it closes.
fn stream_answer(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).expect("connect to the stream server");
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let mut got = Vec::new();
    let _ = conn.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

fn sequence<R: Runtime>() {
    let a = Addrs {
        front: free_addr(),
        up: upstream(),
        dead: dead_addr(),
        gone: [dead_addr(), dead_addr()],
        stream: [free_addr(), free_addr(), free_addr(), free_addr(), free_addr()],
        root: std::env::temp_dir().join(format!("corelb-response-vars-{}-{}", R::NAME, std::process::id())),
    };
    std::fs::create_dir_all(a.root.join("files")).expect("root");
    std::fs::write(a.root.join("files/a.txt"), "hello").expect("file");
    let config = corelb_engine::config::parse_str(&config_text(&a), std::path::Path::new("response_vars.conf"))
        .unwrap_or_else(|e| panic!("{e}"));
    let _proxy = Proxy::start::<R>(config, 1);
    let up = a.up;
    let answer = |x: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nX-Len: 42\r\nSet-Cookie: sid=abc; Path=/\r\n\
             Content-Length: 2\r\nConnection: close\r\n{x}\r\n"
        )
    };

    // The server's lines, inherited: the one try.
    let (head, body) = get(a.front, "/one/a");
    assert_eq!(head, answer(&format!("X-IP: {up}\r\nX-S: 200\r\n")));
    assert_eq!(body, "ok");

    // A refused try, then the backup that answered (the try under way has its status: the head was read).
    let (head, _) = get(a.front, "/retry/b");
    assert_eq!(head, answer(&format!("X-IP: {}, {up}\r\nX-S: 502, 200\r\n", a.dead)));

    // Both peers refuse: corelb's 502 page lists both tries; then no peer is live, and nginx names the upstream.
    let (head, _) = get(a.front, "/gone/c");
    let [g1, g2] = a.gone;
    let page = |ip: &str, s: &str| {
        format!(
            "HTTP/1.1 502 Bad Gateway\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/html\r\n\
             Content-Length: 151\r\nConnection: close\r\nX-IP: {ip}\r\nX-S: {s}\r\n\r\n"
        )
    };
    let both = [format!("{g1}, {g2}"), format!("{g2}, {g1}")];
    assert!(both.iter().any(|ip| head == page(ip, "502, 502")), "{head}");
    let (head, _) = get(a.front, "/gone/d");
    assert_eq!(head, page("gone", "502"));

    // The location's own lines: the upstream's header and cookie, the status and the lines sent before.
    let (head, _) = get(a.front, "/headers/e");
    assert_eq!(
        head,
        answer("X-U: 42/abc\r\nX-T: 200 2 42/abc\r\nX-Uri: /headers/e\r\n")
    );

    // No upstream: the values are empty and their lines are left out.
    let (head, body) = get(a.front, "/ret");
    assert_eq!(
        head,
        "HTTP/1.1 200 OK\r\nServer: corelb\r\nDate: D\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\
         Connection: close\r\n\r\n"
    );
    assert_eq!(body, "hi");

    // A file's head: its status and lines.
    let (head, body) = get(a.front, "/files/a.txt");
    assert!(
        head.ends_with("\r\nX-F: 200 5 text/plain\r\nAccept-Ranges: bytes\r\n\r\n"),
        "{head}"
    );
    assert_eq!(body, "hello");
    let _ = std::fs::remove_dir_all(&a.root);

    // A `return` of the location's script gets the location's lines, as its own `return` does.
    // (Its `Server` line is left out here: a script's answer renders it at load without the server's
    // `server_tokens`, a separate matter.)
    let (head, _) = get(a.front, "/scripted?x=1");
    assert!(head.starts_with("HTTP/1.1 204 No Content\r\n"), "{head}");
    assert!(
        head.ends_with("\r\nDate: D\r\nConnection: close\r\nX-Script: /scripted 204\r\n\r\n"),
        "{head}"
    );

    // `return 444`: closed, nothing sent.
    let mut c = Client::connect(a.front);
    c.send(b"GET /close HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(c.closed(), "444 closes the connection without an answer");

    // A stream map in a stream `return`: a listed port, the default; `${x}` as `$x`.
    assert_eq!(stream_answer(a.stream[0]), "literal:literal");
    assert_eq!(stream_answer(a.stream[1]), "default:default");

    // `proxy_pass $up`: an upstream's name, an address, a name only a resolver could find (closed, nothing sent).
    assert_eq!(stream_answer(a.stream[2]), "literal:literal");
    assert_eq!(stream_answer(a.stream[3]), "default:default");
    assert_eq!(stream_answer(a.stream[4]), "");
}

#[test]
fn tokio_response_vars_as_nginx() {
    sequence::<Tokio>();
}

#[test]
fn glommio_response_vars_as_nginx() {
    if glommio_usable() {
        sequence::<Glommio>();
    }
}
