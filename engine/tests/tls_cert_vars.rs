//! `ssl_certificate` / `ssl_certificate_key` with variables end to end, on both runtimes, with a rustls client: the
//! pair is chosen at the handshake by `$ssl_server_name` (directly and through a `map`) and by a `geo`, in http
//! and stream servers, read from its files on each handshake (a rewritten file is served to the next one), a name
//! whose file is missing fails the handshake, and a session resumes on another server only where its certificate
//! lines are the same (nginx's session id context).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use support::tls::{params, self_signed, test_dir, TlsClient};
use support::{free_addr, glommio_usable, Proxy};

/// The body of `GET /` over a new connection of `client` to `addr` naming `sni`.
fn get(client: &TlsClient, addr: SocketAddr, sni: &str) -> Result<String, String> {
    let mut s = client.connect(addr, sni)?;
    s.write_all(format!("GET / HTTP/1.0\r\nHost: {sni}\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// The ports of one test.
struct Ports {
    /// `$one` (a `geo` over `$remote_addr`: `one` for loopback clients) and `$ssl_server_name` through a `map`, on
    /// one address.
    one: SocketAddr,
    /// The same lines as `one`'s first server: its sessions resume here.
    same: SocketAddr,
    /// `$two`: other lines, no resumption of `one`'s sessions.
    other: SocketAddr,
    /// `$ssl_server_name.crt` itself.
    by_name: SocketAddr,
    /// The same in a stream server.
    stream: SocketAddr,
}

fn config(dir: &Path, p: &Ports) -> corelb_engine::config::model::Config {
    let d = dir.display();
    let text = format!(
        "events {{}}\nhttp {{\n access_log off;\n ssl_session_cache shared:SSL:1m;\n\
         geo $one {{ default two; 127.0.0.0/8 one; }}\n geo $two {{ default two; }}\n\
         map $ssl_server_name $mapped {{ m.test two; default one; }}\n\
         server {{ listen {one} ssl; server_name default;\n\
           ssl_certificate {d}/$one.crt; ssl_certificate_key {d}/$one.key;\n\
           return 200 \"default:$ssl_server_name:$ssl_session_reused\"; }}\n\
         server {{ listen {one} ssl; server_name m.test;\n\
           ssl_certificate {d}/$mapped.crt; ssl_certificate_key {d}/$mapped.key;\n\
           return 200 \"mapped:$ssl_session_reused\"; }}\n\
         server {{ listen {same} ssl; server_name default;\n\
           ssl_certificate {d}/$one.crt; ssl_certificate_key {d}/$one.key;\n\
           return 200 \"same:$ssl_session_reused\"; }}\n\
         server {{ listen {other} ssl; server_name default;\n\
           ssl_certificate {d}/$two.crt; ssl_certificate_key {d}/$two.key;\n\
           return 200 \"other:$ssl_session_reused\"; }}\n\
         server {{ listen {by_name} ssl; server_name localhost;\n\
           ssl_certificate {d}/$ssl_server_name.crt; ssl_certificate_key {d}/$ssl_server_name.key;\n\
           return 200 \"by-name:$ssl_server_name\"; }}\n}}\n\
         stream {{\n server {{ listen {stream} ssl; return \"stream:$ssl_server_name\";\n\
           ssl_certificate {d}/$ssl_server_name.crt; ssl_certificate_key {d}/$ssl_server_name.key; }}\n}}\n",
        one = p.one,
        same = p.same,
        other = p.other,
        by_name = p.by_name,
        stream = p.stream,
    );
    corelb_engine::config::parse_str(&text, Path::new("vars.conf")).unwrap_or_else(|e| panic!("{e}"))
}

fn cert_vars<R: Runtime>(tag: &str) {
    let dir = test_dir(&format!("tls-cert-vars-{tag}"));
    let one = self_signed(&dir, "one", params(&["default"], "one"));
    let two = self_signed(&dir, "two", params(&["default"], "two"));
    let named = self_signed(&dir, "a.test", params(&["a.test"], "a.test"));
    let ports = Ports {
        one: free_addr(),
        same: free_addr(),
        other: free_addr(),
        by_name: free_addr(),
        stream: free_addr(),
    };
    let proxy = Proxy::start::<R>(config(&dir, &ports), 1);

    // the pair each server's lines name, evaluated at the handshake
    let client = TlsClient::new(None);
    assert_eq!(get(&client, ports.one, "default").expect("one"), "default:default:.");
    assert_eq!(client.last_cert(), one.der().to_vec());
    assert_eq!(get(&client, ports.one, "m.test").expect("mapped"), "mapped:.");
    assert_eq!(client.last_cert(), two.der().to_vec(), "the map's value for m.test");
    assert_eq!(
        get(&client, ports.by_name, "a.test").expect("by name"),
        "by-name:a.test"
    );
    assert_eq!(client.last_cert(), named.der().to_vec());
    // a name without files: the handshake fails, the shard goes on
    assert!(
        get(&client, ports.by_name, "nx.test").is_err(),
        "no certificate for nx.test"
    );
    assert_eq!(get(&client, ports.by_name, "a.test").expect("after"), "by-name:a.test");

    // a stream server's the same way
    let mut s = client.connect(ports.stream, "a.test").expect("stream");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert_eq!(out, "stream:a.test");
    assert_eq!(client.last_cert(), named.der().to_vec());
    assert!(
        client.connect(ports.stream, "nx.test").is_err(),
        "no certificate for nx.test"
    );

    // the files are read at each handshake (no `ssl_certificate_cache`): a rewritten pair is served next
    let renewed = self_signed(&dir, "a.test", params(&["a.test"], "a.test renewed"));
    let fresh = TlsClient::new(None);
    assert_eq!(get(&fresh, ports.by_name, "a.test").expect("renewed"), "by-name:a.test");
    assert_eq!(fresh.last_cert(), renewed.der().to_vec());

    // nginx's session id context: the session of `one`'s server resumes there and where its lines are the same,
    // not where they differ
    let resuming = TlsClient::new(None);
    assert_eq!(
        get(&resuming, ports.one, "default").expect("first"),
        "default:default:."
    );
    assert_eq!(
        get(&resuming, ports.one, "default").expect("again"),
        "default:default:r"
    );
    assert_eq!(get(&resuming, ports.same, "default").expect("same lines"), "same:r");
    let distinct = TlsClient::new(None);
    assert_eq!(
        get(&distinct, ports.one, "default").expect("first"),
        "default:default:."
    );
    assert_eq!(get(&distinct, ports.other, "default").expect("other lines"), "other:.");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn certificate_variables_tokio() {
    cert_vars::<Tokio>("tokio");
}

#[test]
fn certificate_variables_glommio() {
    if glommio_usable() {
        cert_vars::<Glommio>("glommio");
    }
}

fn config_error(text: &str) -> String {
    corelb_engine::config::parse_str(text, Path::new("/t/vars.conf"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn certificate_variables_config_errors() {
    // an unknown variable, as nginx reports it when the block ends
    let e = config_error(
        "events {}\nhttp {\n server { listen 127.0.0.1:1 ssl;\n ssl_certificate $nx.crt; ssl_certificate_key k; }\n}\n",
    );
    assert_eq!(e, "[emerg] unknown \"nx\" variable in /t/vars.conf:4");
    // a certificate line needs its key line, with variables too
    let e = config_error("events {}\nhttp {\n server { listen 127.0.0.1:1 ssl;\n ssl_certificate $host.crt; }\n}\n");
    assert_eq!(
        e,
        "[emerg] no \"ssl_certificate_key\" is defined for certificate \"$host.crt\" in /t/vars.conf:4"
    );
    // stream's lines take variables too, its block's maps and geos
    let e = config_error(
        "events {}\nstream {\n geo $one { default one; }\n server { listen 127.0.0.1:1 ssl;\n \
         ssl_certificate $one.crt; ssl_certificate_key $ssl_server_name.key; proxy_pass 127.0.0.1:2; }\n}\n",
    );
    assert_eq!(e, "");
}
