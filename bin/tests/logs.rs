//! `corelb -c FILE` and its logs as a process: `error_log FILE LEVEL` writes what its level allows (a notice is
//! not written at `error`, is at `notice`), the access log buffers are written out on SIGQUIT and SIGTERM, and an
//! `https` upstream refused by `proxy_ssl_verify` is logged with nginx's words.
//! Loopback only, free ports, bounded waits.

mod common;

use common::{free_port, wait_exit, wait_listening};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("logs", name)
}

/// Starts corelb on `conf` (text written into `dir`) and waits until `port` accepts.
fn start(dir: &Path, conf: &str, port: u16) -> Child {
    let path = dir.join("corelb.conf");
    std::fs::write(&path, conf).expect("write config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelb"))
        .arg("-c")
        .arg(&path)
        .env_remove("CORELB_RUNTIME")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start corelb");
    assert!(wait_listening(port, &mut child), "port {port} never opened");
    child
}

fn stop(mut child: Child, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status();
    assert!(ok.is_ok_and(|s| s.success()), "kill -{sig}");
    let st = wait_exit(&mut child, Duration::from_secs(15));
    assert!(
        st.is_some_and(|s| s.success()),
        "corelb did not stop on SIG{sig}: {st:?}"
    );
}

/// One GET with `Connection: close`; the status line.
fn get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .expect("send");
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    String::from_utf8_lossy(&all)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A config with `error_log` at `level` and a location proxying to a dead peer (an `[error]` per request).
fn error_log_conf(dir: &Path, level: &str, front: u16) -> String {
    format!(
        "error_log {dir}/error.log {level};\nevents {{}}\nhttp {{ access_log off;\n\
         server {{ listen 127.0.0.1:{front}; location / {{ proxy_pass http://127.0.0.1:{dead}; }} }} }}\n",
        dir = dir.display(),
        dead = common::dead_port()
    )
}

#[test]
fn error_log_writes_what_its_level_allows() {
    for (level, notices) in [("error", false), ("notice", true)] {
        let dir = temp_dir(level);
        let front = free_port();
        let child = start(&dir, &error_log_conf(&dir, level, front), front);
        assert!(get(front, "/").contains(" 502 "), "dead peer");
        stop(child, "TERM");
        let log = read(&dir.join("error.log"));
        assert!(log.contains("corelb: [error] upstream 127.0.0.1:"), "{level}: {log}");
        assert_eq!(
            log.contains("corelb: [notice] 1 shard(s) started on tokio"),
            notices,
            "{level}: {log}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn access_log_buffers_are_written_on_sigquit_and_sigterm() {
    for sig in ["QUIT", "TERM"] {
        let dir = temp_dir(sig);
        let front = free_port();
        let conf = format!(
            "events {{}}\nhttp {{ access_log {dir}/access.log combined buffer=1m flush=1h;\n\
             server {{ listen 127.0.0.1:{front}; return 200 ok; }} }}\n",
            dir = dir.display()
        );
        let child = start(&dir, &conf, front);
        assert!(get(front, "/held").contains(" 200 "));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read(&dir.join("access.log")), "", "held in the shard until the stop");
        stop(child, sig);
        let log = read(&dir.join("access.log"));
        assert_eq!(log.lines().count(), 1, "SIG{sig}: {log}");
        assert!(
            log.contains("\"GET /held HTTP/1.1\" 200 2 \"-\" \"-\""),
            "SIG{sig}: {log}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A self-signed ECDSA certificate for `name`, written as `FILE.crt` and `FILE.key` into `dir`.
fn self_signed(dir: &Path, file: &str, name: &str) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    std::fs::write(dir.join(format!("{file}.crt")), cert.pem()).expect("write certificate");
    std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).expect("write key");
}

#[test]
fn a_refused_https_upstream_is_logged_as_nginx_logs_it() {
    let dir = temp_dir("proxy-ssl");
    self_signed(&dir, "backend", "backend.test");
    self_signed(&dir, "other", "backend.test");
    let (front, tls) = (free_port(), free_port());
    let conf = format!(
        "error_log {d}/error.log error;\nevents {{}}\nhttp {{ access_log off;\n\
         server {{ listen 127.0.0.1:{tls} ssl; ssl_certificate {d}/backend.crt; ssl_certificate_key {d}/backend.key;\n\
           return 200 ok; }}\n\
         server {{ listen 127.0.0.1:{front};\n\
           location /trusted {{ proxy_pass https://127.0.0.1:{tls}; proxy_ssl_verify on; proxy_ssl_name backend.test;\n\
             proxy_ssl_trusted_certificate {d}/backend.crt; }}\n\
           location /untrusted {{ proxy_pass https://127.0.0.1:{tls}; proxy_ssl_verify on; \
             proxy_ssl_name backend.test;\n proxy_ssl_trusted_certificate {d}/other.crt; }}\n\
           location /name {{ proxy_pass https://127.0.0.1:{tls}; proxy_ssl_verify on; proxy_ssl_name other.test;\n\
             proxy_ssl_trusted_certificate {d}/backend.crt; }} }} }}\n",
        d = dir.display()
    );
    let child = start(&dir, &conf, front);
    assert!(get(front, "/trusted").contains(" 200 "), "trusted");
    assert!(get(front, "/untrusted").contains(" 502 "), "untrusted");
    assert!(get(front, "/name").contains(" 502 "), "wrong name");
    stop(child, "TERM");
    let peer = format!("127.0.0.1:{tls}");
    assert_eq!(
        read(&dir.join("error.log")),
        format!(
            "corelb: [error] upstream {peer} ({peer}): upstream SSL certificate verify error: (18:self-signed \
             certificate) while SSL handshaking to upstream\n\
             corelb: [error] upstream {peer} ({peer}): upstream SSL certificate does not match \"other.test\" while \
             SSL handshaking to upstream\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts corelb on `conf` with its stderr written to `dir/stderr`.
fn start_with_stderr(dir: &Path, conf: &str, port: u16) -> Child {
    let path = dir.join("corelb.conf");
    std::fs::write(&path, conf).expect("write config");
    let err = std::fs::File::create(dir.join("stderr")).expect("stderr file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelb"))
        .arg("-c")
        .arg(&path)
        .env_remove("CORELB_RUNTIME")
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("start corelb");
    assert!(wait_listening(port, &mut child), "port {port} never opened");
    child
}

/// nginx's `log_use_stderr`: with an `error_log stderr` line anywhere, the process's stderr stays its own (a
/// location's stderr line writes there, the main log to its file only); without one, stderr follows the main log's
/// file (`ngx_log_redirect_stderr`).
#[test]
fn stderr_stays_the_process_s_own_only_when_a_line_names_it() {
    for with_stderr in [true, false] {
        let dir = temp_dir(if with_stderr { "stderr-kept" } else { "stderr-follows" });
        let front = free_port();
        let dead = free_port();
        let line = if with_stderr { "error_log stderr;" } else { "" };
        let conf = format!(
            "error_log {d}/error.log notice;\nevents {{}}\nhttp {{ access_log off;\n\
             server {{ listen 127.0.0.1:{front};\n\
               location /dead {{ {line} proxy_pass http://127.0.0.1:{dead}; }} }} }}\n",
            d = dir.display()
        );
        let child = start_with_stderr(&dir, &conf, front);
        assert!(get(front, "/dead").contains(" 502 "), "dead peer");
        stop(child, "TERM");
        let main = read(&dir.join("error.log"));
        let stderr = read(&dir.join("stderr"));
        let refused = |text: &str| {
            text.lines()
                .filter(|l| l.contains("[error]") && l.contains("while connecting"))
                .count()
        };
        if with_stderr {
            assert_eq!(refused(&stderr), 1, "the location's line on stderr: {stderr:?}");
            assert_eq!(
                refused(&main),
                0,
                "the location's message only where its lines say: {main:?}"
            );
            assert!(main.contains("[notice]"), "the main log in its file: {main:?}");
            assert!(!stderr.contains("[notice]"), "the main log not on stderr: {stderr:?}");
        } else {
            assert_eq!(refused(&main), 1, "the main log takes the message: {main:?}");
            assert!(
                stderr.is_empty(),
                "stderr follows the file, nothing printed there: {stderr:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
