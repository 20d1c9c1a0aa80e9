//! nginx's command line on the `corelb` binary, with real processes: `-p` (include, pid, error and access log
//! paths), `-c` relative to the prefix, `-e`, `-g` and its errors, `-t`, `-T`, `-q`, `-v`, `-V` (and that it tells
//! the truth about modules), `-h`, `-s` through the prefix, glued forms and invalid options. When
//! `/usr/sbin/nginx` is installed, the wording of `-t`, `-g`, `-T` and option errors is compared with nginx's.

mod common;

use common::{free_port, get, wait_exit, wait_until, KillOnDrop};
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const NGINX: &str = "/usr/sbin/nginx";

/// `corelb ARGS` run in the directory `cwd`.
fn corelb_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corelb"))
        .args(args)
        .current_dir(cwd)
        .env_remove("CORELB_RUNTIME")
        .output()
        .expect("run corelb")
}

fn corelb(args: &[&str]) -> Output {
    corelb_in(Path::new("/"), args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The `[emerg]`/`[warn]` message of each line, without what precedes the level (`corelb: `, or nginx's
/// `nginx: ` or time stamp and pid).
fn messages(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| {
            let at = l.find("[emerg] ").or_else(|| l.find("[warn] "))?;
            let (level, rest) = l[at..].split_once(' ')?;
            // nginx's log lines carry `PID#TID: ` after the level.
            let rest = match rest.split_once(": ") {
                Some((id, msg)) if id.bytes().all(|b| b.is_ascii_digit() || b == b'#') => msg,
                _ => rest,
            };
            Some(format!("{level} {rest}"))
        })
        .collect()
}

/// `nginx ARGS`, when nginx is installed.
fn nginx(args: &[&str]) -> Option<Output> {
    if !Path::new(NGINX).exists() {
        return None;
    }
    Some(Command::new(NGINX).args(args).output().expect("run nginx"))
}

fn http_server(port: u16, extra: &str) -> String {
    format!("http {{\n{extra}\n    server {{ listen 127.0.0.1:{port}; return 200 ok; }}\n}}\n")
}

#[test]
fn prefix_resolves_include_pid_and_logs_and_signals_find_the_pid_through_it() {
    let prefix = common::temp_dir("nginx-cli", "prefix");
    fs::create_dir_all(prefix.join("conf")).expect("conf dir");
    let port = free_port();
    // `include` resolves against the config file's directory (nginx's conf prefix); pid and logs against -p.
    fs::write(prefix.join("conf/events.conf"), "events { worker_connections 64; }\n").expect("write");
    let main = format!(
        "worker_processes 1;\npid run.pid;\nerror_log err.log notice;\ninclude events.conf;\n{}",
        http_server(port, "access_log access.log;")
    );
    fs::write(prefix.join("conf/main.conf"), main).expect("write");
    let p = format!("{}/", prefix.display());
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .args(["-p", &p, "-c", "conf/main.conf"])
            .current_dir("/")
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start corelb"),
    );
    let pid_file = prefix.join("run.pid");
    assert!(
        wait_until(Duration::from_secs(20), || pid_file.exists()),
        "no pid file at {}",
        pid_file.display()
    );
    assert_eq!(get(port, "/x"), "ok");
    // The access line is written when the shard flushes; the error log has the start-up notice.
    let err_log = prefix.join("err.log");
    assert!(wait_until(Duration::from_secs(10), || {
        fs::read_to_string(&err_log).is_ok_and(|l| l.contains("shard(s) started"))
    }));
    // `-s` reads the same config through the same prefix, so it finds run.pid; glued `-sreopen` as nginx allows.
    let sent = corelb(&["-sreopen", &format!("-p{p}"), "-cconf/main.conf"]);
    assert!(sent.status.success(), "{}", text(&sent.stderr));
    assert!(wait_until(Duration::from_secs(10), || {
        fs::read_to_string(&err_log).is_ok_and(|l| l.contains("reopened the error log"))
    }));
    let quit = corelb(&["-p", &p, "-c", "conf/main.conf", "-s", "quit"]);
    assert!(quit.status.success(), "{}", text(&quit.stderr));
    let st = wait_exit(&mut child, Duration::from_secs(20)).expect("stopped after -s quit");
    assert_eq!(st.code(), Some(0));
    let access = fs::read_to_string(prefix.join("access.log")).expect("access.log under the prefix");
    assert!(access.contains("\"GET /x HTTP/1.1\" 200"), "{access}");
    assert!(!pid_file.exists(), "the pid file goes with the process");
    let _ = fs::remove_dir_all(&prefix);
}

#[test]
fn conf_file_is_relative_to_the_prefix_not_the_working_directory() {
    let prefix = common::temp_dir("nginx-cli", "relative");
    let elsewhere = common::temp_dir("nginx-cli", "elsewhere");
    fs::write(prefix.join("nginx.conf"), "events {}\n").expect("write");
    let p = s(&prefix);
    // Without a trailing slash too: nginx adds it.
    let out = corelb_in(&elsewhere, &["-t", "-p", p, "-c", "nginx.conf"]);
    let f = prefix.join("nginx.conf");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!(
            "corelb: the configuration file {f} syntax is ok\ncorelb: configuration file {f} test is successful\n",
            f = f.display()
        )
    );
    // Without -p the working directory is the prefix.
    let out = corelb_in(&prefix, &["-t", "-c", "nginx.conf"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("{} syntax is ok", f.display())));
    let out = corelb_in(&elsewhere, &["-t", "-c", "nginx.conf"]);
    assert_eq!(out.status.code(), Some(1));
    let missing = elsewhere.join("nginx.conf");
    assert!(
        text(&out.stderr).starts_with(&format!("corelb: [emerg] open() \"{}\" failed (2: ", missing.display())),
        "{}",
        text(&out.stderr)
    );
    let _ = fs::remove_dir_all(&prefix);
    let _ = fs::remove_dir_all(&elsewhere);
}

#[test]
fn error_log_option_gets_start_up_errors_and_is_the_log_while_the_config_names_none() {
    let prefix = common::temp_dir("nginx-cli", "elog");
    let p = s(&prefix);
    fs::write(prefix.join("bad.conf"), "events {}\nbogus;\n").expect("write");
    // A config error: on stderr and in the -e file (relative to the prefix), as nginx writes it to both.
    let out = corelb(&["-p", p, "-c", "bad.conf", "-e", "early.log"]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "corelb: [emerg] unknown directive \"bogus\" in {}:2\n",
        prefix.join("bad.conf").display()
    );
    assert_eq!(text(&out.stderr), want);
    assert_eq!(fs::read_to_string(prefix.join("early.log")).expect("early.log"), want);
    // -e stderr: no file.
    let out = corelb(&["-p", p, "-c", "bad.conf", "-e", "stderr"]);
    assert_eq!(text(&out.stderr), want);
    assert!(!prefix.join("stderr").exists());
    // A log that cannot be opened is nginx's [alert], and stderr keeps the messages.
    let out = corelb(&["-p", p, "-c", "bad.conf", "-e", "no/such/dir/e.log"]);
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "corelb: [alert] could not open error log file: open() \"{}\" failed (2: No such file or directory)\n",
            prefix.join("no/such/dir/e.log").display()
        )),
        "{err}"
    );
    assert!(err.ends_with(&want), "{err}");

    // Running without error_log: -e is the error log. A refused reload's [emerg] lands there, not on stderr.
    let port = free_port();
    let conf = prefix.join("run.conf");
    let good = format!("pid run.pid;\nevents {{}}\n{}", http_server(port, ""));
    fs::write(&conf, &good).expect("write");
    let stderr_file = fs::File::create(prefix.join("stderr.txt")).expect("stderr file");
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .args(["-p", p, "-c", "run.conf", "-e", "run.log"])
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(stderr_file)
            .spawn()
            .expect("start corelb"),
    );
    assert!(wait_until(Duration::from_secs(20), || prefix.join("run.pid").exists()));
    fs::write(&conf, good + "bogus on;\n").expect("break");
    common::signal(child.id(), "HUP");
    let at = format!("[emerg] unknown directive \"bogus\" in {}:7", conf.display());
    assert!(
        wait_until(Duration::from_secs(10), || {
            fs::read_to_string(prefix.join("run.log")).is_ok_and(|l| l.contains(&at))
        }),
        "no `{at}` in run.log"
    );
    common::signal(child.id(), "TERM");
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(20)).and_then(|s| s.code()),
        Some(0)
    );
    let terminal = fs::read_to_string(prefix.join("stderr.txt")).expect("stderr");
    assert!(!terminal.contains("bogus"), "{terminal}");
    let _ = fs::remove_dir_all(&prefix);
}

#[test]
fn global_directives_come_first_and_errors_cite_the_command_line() {
    let prefix = common::temp_dir("nginx-cli", "params");
    let p = s(&prefix);
    fs::write(prefix.join("nginx.conf"), "events {}\n").expect("write");
    fs::write(prefix.join("pid.conf"), "events {}\npid a.pid;\n").expect("write");
    // -g applies: a pid given there is where `-s` looks (relative to the prefix).
    let out = corelb(&[
        "-p",
        p,
        "-c",
        "nginx.conf",
        "-g",
        "pid g.pid;",
        "-s",
        "stop",
        "-e",
        "s.log",
    ]);
    let want = format!(
        "corelb: [error] open() \"{}\" failed (2: No such file or directory)\n",
        prefix.join("g.pid").display()
    );
    assert_eq!(text(&out.stderr), want);
    assert_eq!(fs::read_to_string(prefix.join("s.log")).expect("-e file"), want);
    let file = prefix.join("pid.conf");
    let cases: &[(&str, &str, String)] = &[
        ("nginx.conf", "pid g.pid; worker_processes 1;", String::new()),
        (
            "nginx.conf",
            "foo;",
            "[emerg] unknown directive \"foo\" in command line".into(),
        ),
        (
            "nginx.conf",
            "pid x",
            "[emerg] unexpected end of parameter, expecting \";\" in command line".into(),
        ),
        (
            "nginx.conf",
            "events {}",
            "[emerg] block directives are not supported in -g option in command line".into(),
        ),
        (
            "nginx.conf",
            "pid a; }",
            "[emerg] unexpected \"}\" in command line".into(),
        ),
        (
            "nginx.conf",
            "pid a; pid b;",
            "[emerg] \"pid\" directive is duplicate in command line".into(),
        ),
        (
            "nginx.conf",
            "listen 80;",
            "[emerg] \"listen\" directive is not allowed here in command line".into(),
        ),
        // Read before the file: the file's line is the duplicate.
        (
            "pid.conf",
            "pid g.pid;",
            format!("[emerg] \"pid\" directive is duplicate in {}:2", file.display()),
        ),
    ];
    for (conf, params, want) in cases {
        let out = corelb(&["-t", "-p", p, "-c", conf, "-g", params]);
        let got = messages(&text(&out.stderr));
        if want.is_empty() {
            assert_eq!(out.status.code(), Some(0), "-g {params:?}: {}", text(&out.stderr));
            assert!(got.is_empty(), "{got:?}");
        } else {
            assert_eq!(out.status.code(), Some(1), "-g {params:?}");
            assert_eq!(got, std::slice::from_ref(want), "-g {params:?}");
            assert!(text(&out.stderr).ends_with(&format!(
                "corelb: configuration file {} test failed\n",
                prefix.join(conf).display()
            )));
        }
        // nginx says the same (its time stamp and pid aside).
        let pp = format!("{p}/");
        if let Some(n) = nginx(&["-t", "-p", &pp, "-c", conf, "-e", "stderr", "-g", params]) {
            assert_eq!(
                n.status.code(),
                out.status.code(),
                "nginx -g {params:?}: {}",
                text(&n.stderr)
            );
            assert_eq!(messages(&text(&n.stderr)), got, "nginx -g {params:?}");
        }
    }
    let _ = fs::remove_dir_all(&prefix);
}

#[test]
fn test_dump_and_quiet() {
    let prefix = common::temp_dir("nginx-cli", "dump");
    let p = format!("{}/", prefix.display());
    let main_text = "worker_processes 1;\ninclude events.conf;\ninclude events.conf.d/*.conf;\n";
    fs::write(prefix.join("nginx.conf"), main_text).expect("write");
    fs::write(prefix.join("events.conf"), "events {\n    worker_connections 64;\n}").expect("write");
    fs::create_dir_all(prefix.join("events.conf.d")).expect("dir");
    fs::write(prefix.join("events.conf.d/none.conf"), "# nothing\n").expect("write");
    let out = corelb(&["-T", "-p", &p, "-c", "nginx.conf"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let f = |name: &str| prefix.join(name).display().to_string();
    assert_eq!(
        text(&out.stdout),
        format!(
            "# configuration file {}:\n{main_text}\n# configuration file {}:\nevents {{\n    worker_connections 64;\n}}\n\
             # configuration file {}:\n# nothing\n\n",
            f("nginx.conf"),
            f("events.conf"),
            f("events.conf.d/none.conf")
        )
    );
    assert!(text(&out.stderr).ends_with("test is successful\n"));
    if let Some(n) = nginx(&["-T", "-p", &p, "-c", "nginx.conf", "-e", "stderr"]) {
        assert_eq!(text(&n.stdout), text(&out.stdout), "nginx -T: {}", text(&n.stderr));
    }

    // -q: nothing when the file is good; the error and `test failed` when it is not. -T dumps nothing on failure.
    let quiet = corelb(&["-tq", "-p", &p, "-c", "nginx.conf"]);
    assert_eq!((quiet.status.code(), text(&quiet.stderr)), (Some(0), String::new()));
    fs::write(prefix.join("events.conf"), "events {\n").expect("write");
    let bad = corelb(&["-q", "-T", "-p", &p, "-c", "nginx.conf"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(text(&bad.stdout), "");
    assert_eq!(
        text(&bad.stderr),
        format!(
            "corelb: [emerg] unexpected end of file, expecting \"}}\" in {}:2\ncorelb: configuration file {} test failed\n",
            f("events.conf"),
            f("nginx.conf")
        )
    );
    let _ = fs::remove_dir_all(&prefix);
}

#[test]
fn version_help_and_long_spellings() {
    let version = format!("corelb version: corelb/{}\n", env!("CARGO_PKG_VERSION"));
    let v = corelb(&["-v"]);
    assert_eq!(
        (v.status.code(), text(&v.stdout), text(&v.stderr)),
        (Some(0), String::new(), version.clone())
    );
    let big = corelb(&["-V"]);
    assert_eq!(big.status.code(), Some(0));
    let err = text(&big.stderr);
    let mut lines = err.lines();
    assert_eq!(lines.next(), Some(version.trim_end()));
    // nginx-tests' `has('openssl:N')` reads the TLS library's line (`/with openssl ([0-9.]+)/i`)
    let built = lines.next().expect("built with line");
    assert!(
        built.starts_with("built with OpenSSL 1.1.1 (compatible; rustls "),
        "{built}"
    );
    assert_eq!(lines.next(), Some("TLS SNI support enabled"));
    let configure = lines.next().expect("configure line");
    assert!(
        configure.starts_with("configure arguments: --with-stream "),
        "{configure}"
    );
    assert_eq!(lines.next(), None);
    for help in ["-h", "-?"] {
        let out = corelb(&[help]);
        assert_eq!(out.status.code(), Some(0));
        let err = text(&out.stderr);
        assert!(err.starts_with(&version), "{err}");
        assert!(
            err.contains("\nUsage: corelb [-?hvVtTq] [-s signal] [-p prefix]\n"),
            "{err}"
        );
    }
    // The old spellings keep working.
    let old = corelb(&["--version"]);
    assert_eq!(
        text(&old.stdout),
        format!("corelb version {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = corelb(&["--help"]);
    assert!(help.status.success());
    assert!(text(&help.stdout).contains("pick"), "{}", text(&help.stdout));
    // -v with -t: the version, then the test (as nginx).
    let prefix = common::temp_dir("nginx-cli", "vt");
    fs::write(prefix.join("nginx.conf"), "events {}\n").expect("write");
    let out = corelb(&["-vt", "-p", s(&prefix), "-c", "nginx.conf"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).starts_with(&version));
    assert!(text(&out.stderr).ends_with("test is successful\n"));
    let _ = fs::remove_dir_all(&prefix);
}

/// A config using one directive of `module` (nginx's `./configure` name), in the context it belongs to.
fn probe(module: &str) -> Option<&'static str> {
    Some(match module {
        "http_charset_module" => "http { charset utf-8; }",
        "http_gzip_module" => "http { gzip on; }",
        "http_ssi_module" => "http { ssi on; }",
        "http_userid_module" => "http { userid on; }",
        "http_access_module" => "http { allow all; }",
        "http_auth_basic_module" => "http { auth_basic x; }",
        "http_mirror_module" => "http { server { location / { mirror /m; } } }",
        "http_autoindex_module" => "http { autoindex on; }",
        "http_geo_module" => "http { geo $g { default 1; } }",
        "http_split_clients_module" => "http { split_clients $uri $s { * a; } }",
        "http_referer_module" => "http { server { valid_referers none; } }",
        "http_fastcgi_module" => "http { server { location / { fastcgi_pass 127.0.0.1:9; } } }",
        "http_uwsgi_module" => "http { server { location / { uwsgi_pass 127.0.0.1:9; } } }",
        "http_scgi_module" => "http { server { location / { scgi_pass 127.0.0.1:9; } } }",
        "http_grpc_module" => "http { server { location / { grpc_pass 127.0.0.1:9; } } }",
        "http_memcached_module" => "http { server { location / { memcached_pass 127.0.0.1:9; } } }",
        "http_empty_gif_module" => "http { server { location / { empty_gif; } } }",
        "http_browser_module" => "http { modern_browser unlisted; }",
        "http_tunnel_module" => "http { server { location / { tunnel_pass; } } }",
        "http-cache" => "http { proxy_cache_path /tmp/c keys_zone=c:1m; }",
        "pcre" => "http { server { location ~ /x { return 200; } } }",
        "stream_access_module" => "stream { server { listen 127.0.0.1:9; allow all; proxy_pass 127.0.0.1:8; } }",
        "stream_geo_module" => "stream { geo $g { default 1; } }",
        "stream_pass_module" => "stream { server { listen 127.0.0.1:9; pass 127.0.0.1:8; } }",
        "stream_set_module" => "stream { server { listen 127.0.0.1:9; set $a 1; proxy_pass 127.0.0.1:8; } }",
        "stream_split_clients_module" => "stream { split_clients $remote_addr $s { * a; } }",
        // Modules corelb has.
        "http_upstream_sticky_module" => "http { upstream u { sticky cookie s; server 127.0.0.1:9; } }",
        "http_upstream_least_time_module" => "http { upstream u { least_time header; server 127.0.0.1:9; } }",
        "stream_upstream_least_time_module" => "stream { upstream u { least_time connect; server 127.0.0.1:9; } }",
        "http_map_module" => "http { map $uri $m { default 1; } }",
        "http_realip_module" => "http { set_real_ip_from 127.0.0.1; real_ip_header X-Forwarded-For; }",
        "stream_realip_module" => "stream { server { listen 127.0.0.1:9; set_real_ip_from ::1; return x; } }",
        "stream_map_module" => "stream { map $remote_addr $m { default 1; } }",
        "http_proxy_module" => "http { server { location / { proxy_pass http://127.0.0.1:9; } } }",
        "http_rewrite_module" => "http { server { location / { return 204; } } }",
        "http_upstream_hash_module" => "http { upstream u { hash $uri; server 127.0.0.1:9; } }",
        "http_upstream_ip_hash_module" => "http { upstream u { ip_hash; server 127.0.0.1:9; } }",
        "http_upstream_least_conn_module" => "http { upstream u { least_conn; server 127.0.0.1:9; } }",
        "http_upstream_random_module" => "http { upstream u { random two; server 127.0.0.1:9; } }",
        "http_upstream_keepalive_module" => "http { upstream u { server 127.0.0.1:9; keepalive 2; } }",
        "http_upstream_zone_module" => "http { upstream u { zone z 64k; server 127.0.0.1:9; } }",
        "stream_upstream_hash_module" => "stream { upstream u { hash $remote_addr; server 127.0.0.1:9; } }",
        "stream_upstream_least_conn_module" => "stream { upstream u { least_conn; server 127.0.0.1:9; } }",
        "stream_upstream_random_module" => "stream { upstream u { random; server 127.0.0.1:9; } }",
        "stream_upstream_zone_module" => "stream { upstream u { zone z 64k; server 127.0.0.1:9; } }",
        "stream_return_module" => "stream { server { listen 127.0.0.1:9; return x; } }",
        "http_limit_conn_module" => "http { limit_conn_zone $uri zone=c:1m; }",
        "http_limit_req_module" => "http { limit_req_zone $uri zone=r:1m rate=1r/s; }",
        "stream_limit_conn_module" => "stream { limit_conn_zone $remote_addr zone=c:1m; }",
        _ => return None,
    })
}

#[test]
fn configure_arguments_tell_the_truth_about_modules() {
    let out = corelb(&["-V"]);
    let err = text(&out.stderr);
    let configure = err
        .lines()
        .find_map(|l| l.strip_prefix("configure arguments:"))
        .expect("configure arguments line");
    let without: Vec<&str> = configure
        .split_whitespace()
        .filter_map(|a| a.strip_prefix("--without-"))
        .collect();
    let present = [
        "http_proxy_module",
        "http_rewrite_module",
        "http_upstream_hash_module",
        "http_upstream_ip_hash_module",
        "http_upstream_least_conn_module",
        "http_upstream_random_module",
        "http_upstream_keepalive_module",
        "http_upstream_zone_module",
        "stream_upstream_hash_module",
        "stream_upstream_least_conn_module",
        "stream_upstream_random_module",
        "stream_upstream_zone_module",
        "stream_return_module",
        "http_map_module",
        "stream_map_module",
        "http_realip_module",
        "stream_realip_module",
        "http_upstream_sticky_module",
        "http_limit_conn_module",
        "http_limit_req_module",
        "stream_limit_conn_module",
        "http_charset_module",
    ];
    let prefix = common::temp_dir("nginx-cli", "modules");
    let mut checked = 0;
    for (module, lacks) in without
        .iter()
        .map(|m| (*m, true))
        .chain(present.iter().map(|m| (*m, false)))
    {
        let body = probe(module).unwrap_or_else(|| panic!("no probe for {module}: add one"));
        fs::write(prefix.join("nginx.conf"), format!("events {{}}\n{body}\n")).expect("write");
        let out = corelb(&["-t", "-p", s(&prefix), "-c", "nginx.conf"]);
        let refused = out.status.code() == Some(1);
        assert_eq!(
            refused,
            lacks,
            "{module}: -V says without={lacks}, -t says {}",
            text(&out.stderr)
        );
        if refused {
            // Refused as a directive corelb lacks, not for some other mistake in the probe.
            let msg = messages(&text(&out.stderr)).join("");
            assert!(
                msg.contains("not supported by corelb") || msg.contains("unknown directive"),
                "{module}: {msg}"
            );
        }
        checked += 1;
    }
    assert!(checked > 40, "{checked}");
    // Non-default modules are named only when present: stream, stub_status, realip, http and stream ssl, and
    // http_v2 are.
    for present in [
        "--with-stream",
        "--with-http_stub_status_module",
        "--with-http_realip_module",
        "--with-stream_realip_module",
        "--with-http_ssl_module",
        "--with-stream_ssl_module",
        "--with-stream_ssl_preread_module",
        "--with-http_v2_module",
    ] {
        assert!(
            configure.split_whitespace().any(|a| a == present),
            "{present} in {configure}"
        );
    }
    assert!(err.contains("\nTLS SNI support enabled\n"), "{err}");
    let _ = fs::remove_dir_all(&prefix);
}

#[test]
fn invalid_options_in_nginx_words() {
    let cases: &[(&[&str], &str)] = &[
        (&["x"], "invalid option: \"x\""),
        (&["-z"], "invalid option: \"z\""),
        (&["-tz"], "invalid option: \"z\""),
        (&["-c"], "option \"-c\" requires file name"),
        (&["-p"], "option \"-p\" requires directory name"),
        (&["-e"], "option \"-e\" requires file name"),
        (&["-g"], "option \"-g\" requires parameter"),
        (&["-s"], "option \"-s\" requires parameter"),
        (&["-s", "restart"], "invalid option: \"-s restart\""),
    ];
    for (args, want) in cases {
        let out = corelb(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&out.stderr), format!("corelb: {want}\n"), "{args:?}");
        if let Some(n) = nginx(args) {
            assert_eq!(n.status.code(), Some(1), "nginx {args:?}");
            assert_eq!(text(&n.stderr), format!("nginx: {want}\n"), "nginx {args:?}");
        }
    }
    // No -c: corelb has no compiled-in default file.
    let out = corelb(&["-t"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no configuration file given"));
}

#[test]
fn temp_path_directives_are_accepted_and_checked() {
    let prefix = common::temp_dir("nginx-cli", "temp");
    let globals = "client_body_temp_path body; proxy_temp_path proxy 1 2; fastcgi_temp_path f; \
                   uwsgi_temp_path u; scgi_temp_path sc;";
    fs::write(
        prefix.join("nginx.conf"),
        format!("events {{}}\nhttp {{ {globals} }}\n"),
    )
    .expect("write");
    let out = corelb(&["-t", "-p", s(&prefix), "-c", "nginx.conf"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // No directory is made: nothing is buffered to disk.
    assert!(!prefix.join("proxy").exists());
    fs::write(prefix.join("nginx.conf"), "events {}\nhttp { proxy_temp_path p 0; }\n").expect("write");
    let out = corelb(&["-t", "-p", s(&prefix), "-c", "nginx.conf"]);
    assert_eq!(
        messages(&text(&out.stderr)),
        [format!(
            "[emerg] \"proxy_temp_path\" directive invalid value in {}:2",
            prefix.join("nginx.conf").display()
        )]
    );
    let _ = fs::remove_dir_all(&prefix);
}

/// `user nobody nogroup;` run as root: the process serves as that account once its listener and files are open
/// (read back from /proc), and still answers; as anyone else, nginx's warning and nothing changes.
#[test]
fn user_directive_drops_root_privileges_after_start() {
    let prefix = common::temp_dir("nginx-cli", "user");
    let port = free_port();
    let conf = format!(
        "user nobody nogroup;\npid run.pid;\nerror_log err.log notice;\nevents {{}}\n{}",
        http_server(port, "")
    );
    fs::write(prefix.join("user.conf"), conf).expect("write");
    let p = format!("{}/", prefix.display());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tested = corelb(&["-p", &p, "-c", "user.conf", "-t"]);
    if !root {
        assert!(tested.status.success(), "{}", text(&tested.stderr));
        assert!(text(&tested.stderr).contains("the \"user\" directive makes sense only if"));
        eprintln!("SKIP user: not running as root, the privilege drop is not tested");
        return;
    }
    assert!(tested.status.success(), "{}", text(&tested.stderr));
    let refused = {
        fs::write(prefix.join("bad.conf"), "user no-such-user-corelb;\nevents {}\n").expect("write");
        corelb(&["-p", &p, "-c", "bad.conf", "-t"])
    };
    assert!(
        text(&refused.stderr).contains("getpwnam(\"no-such-user-corelb\") failed in"),
        "{}",
        text(&refused.stderr)
    );
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .args(["-p", &p, "-c", "user.conf"])
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start corelb"),
    );
    let pid = common::wait_pid_file(&prefix.join("run.pid"), &mut child.0);
    let err_log = prefix.join("err.log");
    assert!(wait_until(Duration::from_secs(20), || {
        fs::read_to_string(&err_log).is_ok_and(|l| l.contains("serving as user \"nobody\""))
    }));
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let ids = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(ids("Uid:"), "65534 65534 65534 65534", "{status}");
    assert_eq!(ids("Gid:"), "65534 65534 65534 65534", "{status}");
    assert_eq!(get(port, "/"), "ok", "still serving");
    common::signal(pid, "TERM");
    wait_exit(&mut child.0, Duration::from_secs(20)).expect("stopped");
    let _ = fs::remove_dir_all(&prefix);
}

/// `worker_cpu_affinity 10 01;` with two workers: shard 0 runs on CPU 1 and shard 1 on CPU 0 (read back from
/// /proc), as nginx's masks say.
#[test]
fn cpu_affinity_masks_pin_the_shards() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let allowed = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    if cpus < 2 || !allowed.contains("0-") {
        eprintln!("SKIP cpu_affinity: needs CPUs 0 and 1 ({allowed})");
        return;
    }
    let prefix = common::temp_dir("nginx-cli", "affinity");
    let port = free_port();
    let conf = format!(
        "worker_processes 2;\nworker_cpu_affinity 10 01;\npid run.pid;\nevents {{}}\n{}",
        http_server(port, "")
    );
    fs::write(prefix.join("affinity.conf"), conf).expect("write");
    let p = format!("{}/", prefix.display());
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_corelb"))
            .args(["-p", &p, "-c", "affinity.conf"])
            .env_remove("CORELB_RUNTIME")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start corelb"),
    );
    let pid = common::wait_pid_file(&prefix.join("run.pid"), &mut child.0);
    assert_eq!(get(port, "/"), "ok");
    let mut pinned = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).expect("tasks").flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if let Some(shard) = comm.trim().strip_prefix("corelb-shard-") {
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
                .unwrap_or_default();
            pinned.push((shard.to_string(), list));
        }
    }
    pinned.sort();
    assert_eq!(
        pinned,
        [("0".to_string(), "1".to_string()), ("1".to_string(), "0".to_string())]
    );
    common::signal(pid, "TERM");
    wait_exit(&mut child.0, Duration::from_secs(20)).expect("stopped");
    let _ = fs::remove_dir_all(&prefix);
}
