//! stream's `proxy_upload_rate` and `proxy_download_rate` (nginx's `ngx_stream_proxy_process` pacing: a second's
//! worth at once, then a pause as long as the bytes take) and access log paths with variables, end to end on both
//! runtimes. The rates are checked by a lower bound on how long the bytes take (the pacing itself, not a speed).

mod support;

use corelb_engine::runtime::glommio_rt::Glommio;
use corelb_engine::runtime::tokio_rt::Tokio;
use corelb_engine::runtime::Runtime;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::backend::tcp_echo;
use support::{free_addr, glommio_usable, Proxy};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("corelb-stream-rates-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    d
}

/// Sends `n` bytes through `addr` to the echo and reads them back; the bytes and how long it took.
fn echo_through(addr: SocketAddr, n: usize) -> (Vec<u8>, Duration) {
    let data: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
    let started = Instant::now();
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    c.write_all(&data).expect("send");
    let _ = c.shutdown(Shutdown::Write);
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert_eq!(got, data, "every byte echoed, in order");
    (got, started.elapsed())
}

fn rates<R: Runtime>() {
    let d = dir(std::any::type_name::<R>().rsplit("::").next().unwrap_or("rt"));
    let (echo, _) = tcp_echo();
    let (down, up, var, bad, free) = (free_addr(), free_addr(), free_addr(), free_addr(), free_addr());
    let text = format!(
        r#"events {{}}
stream {{
  proxy_half_close on;
  log_format f '$server_port $bytes_received $bytes_sent';
  map $server_port $rate {{ {var_port} 2k; default bogus; }}
  server {{ listen {down}; proxy_pass {echo}; proxy_download_rate 2000; }}
  server {{ listen {up}; proxy_pass {echo}; proxy_upload_rate 2000; }}
  server {{ listen {var}; proxy_pass {echo}; proxy_download_rate $rate; }}
  server {{ listen {bad}; proxy_pass {echo}; proxy_download_rate $rate; error_log {d}/bad.log; }}
  server {{ listen {free}; proxy_pass {echo}; proxy_download_rate 0; access_log {d}/port_$server_port.log f; }}
}}
"#,
        var_port = var.port(),
        d = d.display()
    );
    let config = corelb_engine::config::parse_str(&text, &d.join("corelb.conf")).unwrap_or_else(|e| panic!("{e}"));
    let proxy = Proxy::start::<R>(config, 1);
    // 5,000 bytes at 2,000 a second: 2,000 at once, 2,000 after a second, the rest after two
    for (name, addr) in [("download", down), ("upload", up), ("download from a map", var)] {
        let (_, took) = echo_through(addr, 5000);
        assert!(
            took >= Duration::from_millis(1800),
            "{name} rate: 5,000 bytes in {took:?}"
        );
    }
    // a value that is not a size: nginx's `invalid size`, and no limit
    let (_, _) = echo_through(bad, 5000);
    let (_, _) = echo_through(free, 300);
    let named_path = d.join(format!("port_{}.log", free.port()));
    // the writer thread creates the file, then writes the line: wait for the whole line, not the file
    let end = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&named_path).is_ok_and(|t| t.ends_with('\n')) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(proxy);
    let bad_log = std::fs::read_to_string(d.join("bad.log")).unwrap_or_default();
    assert!(bad_log.contains("[error] invalid size \"bogus\""), "{bad_log}");
    let named = std::fs::read_to_string(&named_path).unwrap_or_default();
    assert_eq!(
        named,
        format!("{} 300 300\n", free.port()),
        "the line in the file its variables name"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tokio_paces_stream_directions_and_names_log_files_by_variables() {
    rates::<Tokio>();
}

#[test]
fn glommio_paces_stream_directions_and_names_log_files_by_variables() {
    if glommio_usable() {
        rates::<Glommio>();
    }
}
