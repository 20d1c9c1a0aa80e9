//! Every refusal corelb makes, worded as nginx words it and placed on nginx's line; and nginx's warnings. Where
//! nginx 1.22 is installed, every case is also run through `nginx -t` and the messages compared (the cases marked
//! `Differs` are corelb's deliberate differences, listed in docs/directives.md).

#[path = "support/skip.rs"]
mod skip;

use corelb_engine::config;
use skip::{Need, Skip};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How nginx's own message compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nginx {
    /// The same message on the same line.
    Same,
    /// The same message, which nginx gives without a place (corelb adds one).
    NoPlace,
    /// nginx accepts the config or says something else: a corelb limitation.
    Differs,
}
use Nginx::{Differs, NoPlace, Same};

struct Case {
    name: &'static str,
    text: String,
    msg: &'static str,
    line: usize,
    nginx: Nginx,
}

fn case(name: &'static str, text: String, msg: &'static str, line: usize, nginx: Nginx) -> Case {
    Case {
        name,
        text,
        msg,
        line,
        nginx,
    }
}

/// A fresh directory under the system temp dir for this test process.
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corelb-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The nginx binary, when installed.
fn nginx_binary() -> Option<PathBuf> {
    let path = std::env::var_os("NGINX").map_or_else(|| PathBuf::from("/usr/sbin/nginx"), PathBuf::from);
    path.exists().then_some(path)
}

/// Whether nginx can load its stream module (Debian's `libnginx-mod-stream`).
fn nginx_has_stream() -> bool {
    Path::new("/usr/share/nginx/modules/ngx_stream_module.so").exists()
        || Path::new("/usr/lib/nginx/modules/ngx_stream_module.so").exists()
}

/// `nginx -t` on `path`: its `[emerg]` and `[warn]` lines, without nginx's time stamp and pid.
fn nginx_messages(nginx: &Path, path: &Path) -> Vec<String> {
    let out = Command::new(nginx)
        .arg("-t")
        .arg("-q")
        .arg("-e")
        .arg("stderr")
        .arg("-c")
        .arg(path)
        .output()
        .expect("run nginx");
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let at = l.find("[emerg] ").or_else(|| l.find("[warn] "))?;
            let (level, rest) = l.get(at..)?.split_once("] ")?;
            let rest = match rest.split_once(": ") {
                Some((pid, msg)) if pid.contains('#') && pid.chars().all(|c| c.is_ascii_digit() || c == '#') => msg,
                _ => rest,
            };
            Some(format!("{level}] {rest}"))
        })
        .collect()
}

const STREAM: &str = "ngx_stream_module";

fn cases() -> Vec<Case> {
    vec![
        case(
            "accesslog_fmt",
            r#"events {}
http { access_log /tmp/x.log main; }
"#
            .to_string(),
            r#"unknown log format "main""#,
            2,
            Same,
        ),
        case(
            "allbackup",
            r#"events {}
http { upstream u {
 server 127.0.0.1:1 backup; }
}
"#
            .to_string(),
            r#"no servers in upstream "u""#,
            2,
            Same,
        ),
        case(
            "backup_iphash",
            r#"events {}
http { upstream u { ip_hash; server 127.0.0.1:1 backup; } }
"#
            .to_string(),
            r#"balancing method does not support parameter "backup""#,
            2,
            Same,
        ),
        case(
            "error_page_code",
            r#"events {}
http { server { location / {
 error_page 404 499 /x; } } }
"#
            .to_string(),
            r#"invalid value "499""#,
            3,
            Same,
        ),
        case(
            "error_page_range",
            r#"events {}
http { error_page 404 299 /x; }
"#
            .to_string(),
            r#"value "299" must be between 300 and 599"#,
            2,
            Same,
        ),
        case(
            "error_page_overwrite",
            r#"events {}
http { server {
 error_page 404 =2x /x; } }
"#
            .to_string(),
            r#"invalid value "=2x""#,
            3,
            Same,
        ),
        case(
            "error_page_no_code",
            r#"events {}
http { server { error_page = /x; } }
"#
            .to_string(),
            r#"invalid value "=""#,
            2,
            Same,
        ),
        case(
            "error_page_args",
            r#"events {}
http { server { location / { error_page /x; } } }
"#
            .to_string(),
            r#"invalid number of arguments in "error_page" directive"#,
            2,
            Same,
        ),
        case(
            "recursive_error_pages_flag",
            r#"events {}
http { recursive_error_pages yes; }
"#
            .to_string(),
            r#"invalid value "yes" in "recursive_error_pages" directive, it must be "on" or "off""#,
            2,
            Same,
        ),
        case(
            "proxy_intercept_errors_duplicate",
            r#"events {}
http { server { location / {
 proxy_intercept_errors on;
 proxy_intercept_errors off; } } }
"#
            .to_string(),
            r#""proxy_intercept_errors" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "error_page_in_if",
            r#"events {}
http { server { location / {
 if ($arg_a) { error_page 404 /x; } } } }
"#
            .to_string(),
            r#""error_page" directive is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "add_header_param",
            r#"events {}
http { server { location / {
 add_header X-A b c; } } }
"#
            .to_string(),
            r#"invalid parameter "c""#,
            3,
            Same,
        ),
        case(
            "expires_daily",
            r#"events {}
http { server { expires @25h; } }
"#
            .to_string(),
            r#""expires" directive daily time value must be less than 24 hours"#,
            2,
            Same,
        ),
        case(
            "expires_modified_daily",
            r#"events {}
http { expires modified @1h; }
"#
            .to_string(),
            r#""expires" directive daily time cannot be used with "modified" parameter"#,
            2,
            Same,
        ),
        case(
            "server_tokens_value",
            r#"events {}
http { server_tokens x; }
"#
            .to_string(),
            r#"invalid value "x""#,
            2,
            Same,
        ),
        case(
            "redirect_default_first",
            r#"events {}
http { server { location / { proxy_redirect default; proxy_pass http://127.0.0.1:1; } } }
"#
            .to_string(),
            r#""proxy_redirect default" should be placed after the "proxy_pass" directive"#,
            2,
            Same,
        ),
        case(
            "redirect_off_twice",
            r#"events {}
http { server { location / {
 proxy_redirect /a /b;
 proxy_redirect off; } } }
"#
            .to_string(),
            r#""proxy_redirect" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "redirect_regex",
            r#"events {}
http { server { location / { proxy_redirect ~^/a /$host; } } }
"#
            .to_string(),
            r#""proxy_redirect" with a regular expression and variables in the replacement is not supported by corelb"#,
            2,
            Differs,
        ),
        case(
            "bad_modifier",
            r#"events {}
http { server { location ! /a {} } }
"#
            .to_string(),
            r#"invalid location modifier "!""#,
            2,
            Same,
        ),
        case(
            "badparam",
            r#"events {}
http { upstream u { server 127.0.0.1:1 foo; } }
"#
            .to_string(),
            r#"invalid parameter "foo""#,
            2,
            Same,
        ),
        case(
            "badvar",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; hash "$"; }
}
"#
            .to_string(),
            r#"invalid variable name"#,
            3,
            Same,
        ),
        case(
            "bodysize_bad",
            r#"events {}
http { client_max_body_size 1t; }
"#
            .to_string(),
            r#""client_max_body_size" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "bracket",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; hash "${ab"; }
}
"#
            .to_string(),
            r#"the closing bracket in "ab" variable is missing"#,
            3,
            Same,
        ),
        case(
            "daemon_bad",
            r#"daemon maybe;
events {}
"#
            .to_string(),
            r#"invalid value "maybe" in "daemon" directive, it must be "on" or "off""#,
            1,
            Same,
        ),
        case(
            "dup_location",
            r#"events {}
http { server { listen 127.0.0.1:18094;
 location /a {}
 location /a {}
 } }
"#
            .to_string(),
            r#"duplicate location "/a""#,
            4,
            Same,
        ),
        case(
            "dup_wp",
            r#"worker_processes 1;
worker_processes 2;
events {}
"#
            .to_string(),
            r#""worker_processes" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "dupups",
            r#"events {}
http { upstream u { server 127.0.0.1:1; }
 upstream u { server 127.0.0.1:2; } }
"#
            .to_string(),
            r#"duplicate upstream "u""#,
            3,
            Same,
        ),
        case(
            "eof_block",
            r#"events {}
http {
 server {
"#
            .to_string(),
            r#"unexpected end of file, expecting "}""#,
            4,
            Same,
        ),
        case(
            "eof_directive",
            r#"events {}
http
"#
            .to_string(),
            r#"unexpected end of file, expecting ";" or "}""#,
            3,
            Same,
        ),
        case(
            "errlog_duplevel",
            r#"error_log /tmp/e.log info warn;
events {}
"#
            .to_string(),
            r#"duplicate log level "warn""#,
            1,
            Same,
        ),
        case(
            "errlog_level",
            r#"error_log /tmp/e.log loud;
events {}
"#
            .to_string(),
            r#"invalid log level "loud""#,
            1,
            Same,
        ),
        case(
            "events_dup",
            r#"events {}
events {}
"#
            .to_string(),
            r#""events" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "hash_badparam",
            r#"events {}
http { upstream u { server 127.0.0.1:1; hash $remote_addr foo; } }
"#
            .to_string(),
            r#"invalid parameter "foo""#,
            2,
            Same,
        ),
        case(
            "hostnotfound",
            r#"events {}
http {
 upstream u { server nosuch.invalid; }
}
"#
            .to_string(),
            r#"host not found in upstream "nosuch.invalid""#,
            3,
            Same,
        ),
        case(
            "http_dup",
            r#"events {}
http {}
http {}
"#
            .to_string(),
            r#""http" directive is duplicate"#,
            3,
            Same,
        ),
        case(
            "proxy_ssl_verify_no_ca",
            r#"events {}
http { server { location / { proxy_pass https://127.0.0.1:1;
  proxy_ssl_verify on; } } }
"#
            .to_string(),
            "no proxy_ssl_trusted_certificate for proxy_ssl_verify",
            2,
            NoPlace,
        ),
        case(
            "proxy_ssl_name_vars",
            r#"events {}
http { server { location / { proxy_pass https://127.0.0.1:1;
  proxy_ssl_name $host; } } }
"#
            .to_string(),
            r#""proxy_ssl_name" with variables is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "implicit_nf",
            r#"events {}
http {
 server { location / {
 proxy_pass http://nosuch.invalid:81;
 } }
}
"#
            .to_string(),
            r#"host not found in upstream "nosuch.invalid""#,
            4,
            Same,
        ),
        case(
            "include_args",
            r#"events {}
include;
"#
            .to_string(),
            r#"invalid number of arguments in "include" directive"#,
            2,
            Same,
        ),
        case(
            "include_missing",
            r#"events {}
include /tmp/cmp/none/missing.conf;
"#
            .to_string(),
            r#"open() "/tmp/cmp/none/missing.conf" failed (2: No such file or directory)"#,
            2,
            Same,
        ),
        case(
            "invhost",
            r#"events {}
http { upstream u { server a/b; } }
"#
            .to_string(),
            r#"invalid host in upstream "a/b""#,
            2,
            Same,
        ),
        case(
            "invport",
            r#"events {}
http { upstream u { server 127.0.0.1:99999; } }
"#
            .to_string(),
            r#"invalid port in upstream "127.0.0.1:99999""#,
            2,
            Same,
        ),
        case(
            "keepalive0",
            r#"events {}
http { upstream u { server 127.0.0.1:1; keepalive 0; } }
"#
            .to_string(),
            r#"invalid value "0" in "keepalive" directive"#,
            2,
            Same,
        ),
        case(
            "keepalive_dup",
            r#"events {}
http { upstream u { server 127.0.0.1:1; keepalive 2; keepalive 3; } }
"#
            .to_string(),
            r#""keepalive" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "listen_badbacklog",
            r#"events {}
http { server { listen 127.0.0.1:18094 backlog=x; } }
"#
            .to_string(),
            r#"invalid backlog "backlog=x""#,
            2,
            Same,
        ),
        case(
            "listen_badparam",
            r#"events {}
http { server { listen 127.0.0.1:18094 foo; } }
"#
            .to_string(),
            r#"invalid parameter "foo""#,
            2,
            Same,
        ),
        case(
            "listen_badport",
            r#"events {}
http { server { listen 127.0.0.1:0; } }
"#
            .to_string(),
            r#"invalid port in "127.0.0.1:0" of the "listen" directive"#,
            2,
            Same,
        ),
        case(
            "listen_dup",
            r#"events {}
http { server { listen 127.0.0.1:18094; listen 127.0.0.1:18094; } }
"#
            .to_string(),
            r#"a duplicate listen 127.0.0.1:18094"#,
            2,
            Same,
        ),
        case(
            "listen_dupdefault",
            r#"events {}
http { server { listen 127.0.0.1:18094 default_server; }
 server { listen 127.0.0.1:18094 default_server; } }
"#
            .to_string(),
            r#"a duplicate default server for 127.0.0.1:18094"#,
            3,
            Same,
        ),
        case(
            "listen_dupopts",
            r#"events {}
http { server { listen 127.0.0.1:18094 backlog=10; }
 server { listen 127.0.0.1:18094 reuseport; } }
"#
            .to_string(),
            r#"duplicate listen options for 127.0.0.1:18094"#,
            3,
            Same,
        ),
        case(
            "loadmod_late",
            r#"events {}
load_module modules/ngx_stream_module.so;
"#
            .to_string(),
            r#""load_module" directive is specified too late"#,
            2,
            Same,
        ),
        case(
            "mayport",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; }
 server { location / { proxy_pass http://u:8080; } }
}
"#
            .to_string(),
            r#"upstream "u" may not have port 8080"#,
            4,
            Same,
        ),
        case(
            "mayport2",
            r#"events {}
http {
 server { location / { proxy_pass http://u:8080; } }
 upstream u { server 127.0.0.1:1; }
}
"#
            .to_string(),
            r#"upstream "u" may not have port 8080"#,
            3,
            Same,
        ),
        case(
            "nargs",
            r#"events {}
http { server { listen; } }
"#
            .to_string(),
            r#"invalid number of arguments in "listen" directive"#,
            2,
            Same,
        ),
        case(
            "nested_exact",
            r#"events {}
http { server { location = /a { location /a/b {} } } }
"#
            .to_string(),
            r#"location "/a/b" cannot be inside the exact location "/a""#,
            2,
            Same,
        ),
        case(
            "noevents",
            r#"http {}
"#
            .to_string(),
            r#"no "events" section in configuration"#,
            2,
            NoPlace,
        ),
        case(
            "noopen",
            r#"events {}
http { server; }
"#
            .to_string(),
            r#"directive "server" has no opening "{""#,
            2,
            Same,
        ),
        case(
            "noservers",
            r#"events {}
http { upstream u {
 }
}
"#
            .to_string(),
            r#"no servers are inside upstream"#,
            3,
            Same,
        ),
        case(
            "notallowed",
            r#"events {}
http {
 server {
  proxy_pass http://x;
 }
}
"#
            .to_string(),
            r#""proxy_pass" directive is not allowed here"#,
            4,
            Same,
        ),
        case(
            "rewrite_in_http",
            r#"events {}
http {
 rewrite ^/a$ /b last;
 server { listen 127.0.0.1:8080; }
}
"#
            .to_string(),
            r#""rewrite" directive is not allowed here"#,
            3,
            Same,
        ),
        case(
            "if_in_http",
            r#"events {}
http {
 server { listen 127.0.0.1:8080; }
 if ($uri) { return 404; }
}
"#
            .to_string(),
            r#""if" directive is not allowed here"#,
            4,
            Same,
        ),
        case(
            "notterm",
            r#"events {}
http { server { listen 80 { } } }
"#
            .to_string(),
            r#"directive "listen" is not terminated by ";""#,
            2,
            Same,
        ),
        case(
            "nu_bad",
            r#"events {}
http { proxy_next_upstream error foo; }
"#
            .to_string(),
            r#"invalid value "foo""#,
            2,
            Same,
        ),
        case(
            "pp_dup",
            r#"events {}
http { server { location / { proxy_pass http://127.0.0.1:1; proxy_pass http://127.0.0.1:2; } } }
"#
            .to_string(),
            r#""proxy_pass" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "quote_x",
            r#"events {}
http { server { listen "80"x; } }
"#
            .to_string(),
            r#"unexpected "x""#,
            2,
            Same,
        ),
        case(
            "random_bad",
            r#"events {}
http { upstream u { server 127.0.0.1:1; random two foo; } }
"#
            .to_string(),
            r#"invalid parameter "foo""#,
            2,
            Same,
        ),
        case(
            "random_bad2",
            r#"events {}
http { upstream u { server 127.0.0.1:1; random three; } }
"#
            .to_string(),
            r#"invalid parameter "three""#,
            2,
            Same,
        ),
        case(
            "return_bad",
            r#"events {}
http { server { location / { return abc; } } }
"#
            .to_string(),
            r#"invalid return code "abc""#,
            2,
            Same,
        ),
        case(
            "return_big",
            r#"events {}
http { server { location / { return 1000; } } }
"#
            .to_string(),
            r#"invalid return code "1000""#,
            2,
            Same,
        ),
        case(
            "servername_bad",
            r#"events {}
http { server { server_name *x; } }
"#
            .to_string(),
            r#"server name "*x" is invalid"#,
            2,
            Same,
        ),
        case(
            "setheader_bad",
            r#"events {}
http {
 server {
 proxy_set_header X "a$";
 }
}
"#
            .to_string(),
            r#"invalid variable name"#,
            6,
            Same,
        ),
        case(
            "stream_dup_listen",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18093; listen 127.0.0.1:18093; proxy_pass 127.0.0.1:1; } }
"#
            .to_string(),
            // nginx 1.25.5+'s word (stream virtual servers); Debian's nginx 1.22 says `duplicate "ADDR" address and
            // port pair`
            r#"a duplicate listen 127.0.0.1:18093"#,
            3,
            Differs,
        ),
        case(
            "stream_hash_httpvar",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { upstream u { server 127.0.0.1:1; hash $request_uri; }
 server { listen 127.0.0.1:18095; proxy_pass u; } }
"#
            .to_string(),
            r#"unknown "request_uri" variable"#,
            3,
            NoPlace,
        ),
        case(
            "stream_implicit_noport",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 server { listen 127.0.0.1:18092;
 proxy_pass backend;
 }
}
"#
            .to_string(),
            r#"no port in upstream "backend""#,
            5,
            Same,
        ),
        case(
            "stream_iphash",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { upstream u { ip_hash; server 127.0.0.1:1; } }
"#
            .to_string(),
            r#""ip_hash" directive is not allowed here"#,
            3,
            Same,
        ),
        case(
            "stream_keepalive",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { upstream u { server 127.0.0.1:1; keepalive 2; } }
"#
            .to_string(),
            r#""keepalive" directive is not allowed here"#,
            3,
            Same,
        ),
        case(
            "stream_listen_param",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18093 foo; proxy_pass 127.0.0.1:1; } }
"#
            .to_string(),
            r#"the invalid "foo" parameter"#,
            3,
            Same,
        ),
        case(
            "stream_nohandler",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 server {
 listen 127.0.0.1:18091;
 }
}
"#
            .to_string(),
            r#"no handler for server"#,
            4,
            Same,
        ),
        case(
            "stream_nolisten",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 server {
 proxy_pass 127.0.0.1:1;
 }
}
"#
            .to_string(),
            r#"no "listen" is defined for server"#,
            4,
            Same,
        ),
        case(
            "stream_noport",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { upstream u { server 127.0.0.1; } }
"#
            .to_string(),
            r#"no port in upstream "127.0.0.1""#,
            3,
            Same,
        ),
        case(
            "timeout_bad",
            r#"events {}
http { proxy_read_timeout 1y; }
"#
            .to_string(),
            r#""proxy_read_timeout" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "timeout_dup",
            r#"events {}
http { proxy_read_timeout 1s; proxy_read_timeout 2s; }
"#
            .to_string(),
            r#""proxy_read_timeout" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "tries_bad",
            r#"events {}
http { proxy_next_upstream_tries -1; }
"#
            .to_string(),
            r#""proxy_next_upstream_tries" directive invalid number"#,
            2,
            Same,
        ),
        case(
            "unexpected_brace",
            r#"events {}
}
"#
            .to_string(),
            r#"unexpected "}""#,
            2,
            Same,
        ),
        case(
            "unexpected_semi",
            r#"events {}
;
"#
            .to_string(),
            r#"unexpected ";""#,
            2,
            Same,
        ),
        case(
            "unknown",
            r#"events {}
foo bar;
"#
            .to_string(),
            r#"unknown directive "foo""#,
            2,
            Same,
        ),
        case(
            "unknownvar",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; hash $nope; }
}
"#
            .to_string(),
            r#"unknown "nope" variable"#,
            3,
            NoPlace,
        ),
        case(
            "ups_notallowed_main",
            r#"upstream u { server 127.0.0.1:1; }
events {}
"#
            .to_string(),
            r#""upstream" directive is not allowed here"#,
            1,
            Same,
        ),
        case(
            "ups_shared_zone_diff",
            r#"load_module modules/ngx_stream_module.so;
events {}
http { upstream u { server 127.0.0.1:1; zone z 64k; } }
stream { upstream v { server 127.0.0.1:1; zone z 64k; } server { listen 127.0.0.1:18097; proxy_pass v; } }
"#
            .to_string(),
            r#"the shared memory zone "z" is already declared for a different use"#,
            4,
            Same,
        ),
        case(
            "urlprefix",
            r#"events {}
http { server { location / { proxy_pass ftp://x; } } }
"#
            .to_string(),
            r#"invalid URL prefix"#,
            2,
            Same,
        ),
        case(
            "version_bad",
            r#"events {}
http { proxy_http_version 2.0; }
"#
            .to_string(),
            r#"invalid value "2.0""#,
            2,
            Same,
        ),
        case(
            "wc_bad",
            r#"events { worker_connections x; }
"#
            .to_string(),
            r#"invalid number "x""#,
            1,
            Same,
        ),
        case(
            "weight0",
            r#"events {}
http { upstream u { server 127.0.0.1:1 weight=0; } }
"#
            .to_string(),
            r#"invalid parameter "weight=0""#,
            2,
            Same,
        ),
        case(
            "wp_bad",
            r#"worker_processes x;
events {}
"#
            .to_string(),
            r#""worker_processes" directive invalid value"#,
            1,
            Same,
        ),
        case(
            "zero_zone",
            r#"events {}
http { upstream u { server 127.0.0.1:1; zone z; } }
"#
            .to_string(),
            r#"zero size shared memory zone "z""#,
            2,
            NoPlace,
        ),
        case(
            "zone_badsize",
            r#"events {}
http { upstream u { server 127.0.0.1:1; zone z 1x; } }
"#
            .to_string(),
            r#"invalid zone size "1x""#,
            2,
            Same,
        ),
        case(
            "zone_conflict",
            r#"events {}
http { upstream u { server 127.0.0.1:1; zone z 64k; }
 upstream v { server 127.0.0.1:1; zone z 128k; } }
"#
            .to_string(),
            r#"the size 131072 of shared memory zone "z" conflicts with already declared size 65536"#,
            3,
            Same,
        ),
        case(
            "zone_name_empty",
            r#"events {}
http { upstream u { server 127.0.0.1:1; zone ""; } }
"#
            .to_string(),
            r#"invalid zone name """#,
            2,
            Same,
        ),
        case(
            "zone_small",
            r#"events {}
http { upstream u { server 127.0.0.1:1; zone z 1k; } }
"#
            .to_string(),
            r#"zone "z" is too small"#,
            2,
            Same,
        ),
        case(
            "al_off_x",
            r#"events {}
http { access_log off x; }
"#
            .to_string(),
            r#"invalid parameter "x""#,
            2,
            Same,
        ),
        case(
            "lchb_zero",
            r#"events {}
http { large_client_header_buffers 0 8k; }
"#
            .to_string(),
            r#""large_client_header_buffers" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "lchb_pool",
            r#"events {}
http {
 server {
  listen 127.0.0.1:18999;
  large_client_header_buffers 4 511;
 }
}
"#
            .to_string(),
            r#"the "large_client_header_buffers" size must be equal to or greater than "connection_pool_size""#,
            7,
            Same,
        ),
        case(
            "lchb_loc",
            r#"events {}
http { server { location / { large_client_header_buffers 4 1k; } } }
"#
            .to_string(),
            r#""large_client_header_buffers" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "body_timeout_bad",
            r#"events {}
http { send_timeout 1s; client_body_timeout 5x; }
"#
            .to_string(),
            r#""client_body_timeout" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "cht_loc",
            r#"events {}
http { server { location / { client_header_timeout 1s; } } }
"#
            .to_string(),
            r#""client_header_timeout" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "close_paren",
            r#"events {}
http { server_name "a")b; }
"#
            .to_string(),
            r#""server_name" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "daemon_dup",
            r#"daemon on;
daemon off;
events {}
"#
            .to_string(),
            r#""daemon" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "empty_name_dir",
            r#"events {}
"" x;
"#
            .to_string(),
            r#"unknown directive """#,
            2,
            Same,
        ),
        case(
            "events_block_arg",
            r#"events x {}
"#
            .to_string(),
            r#"invalid number of arguments in "events" directive"#,
            1,
            Same,
        ),
        case(
            "events_unknown",
            r#"events { foo; }
"#
            .to_string(),
            r#"unknown directive "foo""#,
            1,
            Same,
        ),
        case(
            "failto",
            r#"events {}
http { upstream u { server 127.0.0.1:1 fail_timeout=1x; } }
"#
            .to_string(),
            r#"invalid parameter "fail_timeout=1x""#,
            2,
            Same,
        ),
        case(
            "hash_noargs",
            r#"events {}
http { upstream u { server 127.0.0.1:1; hash; } }
"#
            .to_string(),
            r#"invalid number of arguments in "hash" directive"#,
            2,
            Same,
        ),
        case(
            "http_semicolon",
            r#"events {}
http;
"#
            .to_string(),
            r#"directive "http" has no opening "{""#,
            2,
            Same,
        ),
        case(
            "iphash_arg",
            r#"events {}
http { upstream u { server 127.0.0.1:1; ip_hash x; } }
"#
            .to_string(),
            r#"invalid number of arguments in "ip_hash" directive"#,
            2,
            Same,
        ),
        case(
            "ka_neg",
            r#"events {}
http { upstream u { server 127.0.0.1:1; keepalive -1; } }
"#
            .to_string(),
            r#"invalid value "-1" in "keepalive" directive"#,
            2,
            Same,
        ),
        case(
            "ka_srv",
            r#"events {}
http { server { keepalive 2; } }
"#
            .to_string(),
            r#""keepalive" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "ka_timeout_2nd",
            r#"events {}
http { keepalive_timeout 1s 1ms; }
"#
            .to_string(),
            r#""keepalive_timeout" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "ka_timeout_args",
            r#"events {}
http { keepalive_timeout 1s 2s 3s; }
"#
            .to_string(),
            r#"invalid number of arguments in "keepalive_timeout" directive"#,
            2,
            Same,
        ),
        case(
            "listen_http",
            r#"events {}
http { listen 80; }
"#
            .to_string(),
            r#""listen" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "listen_v6bad",
            r#"events {}
http { server { listen [::1; } }
"#
            .to_string(),
            r#"invalid host in "[::1" of the "listen" directive"#,
            2,
            Same,
        ),
        case(
            "loadmod_after_http",
            r#"events {}
http {}
load_module x.so;
"#
            .to_string(),
            r#""load_module" directive is specified too late"#,
            3,
            Same,
        ),
        case(
            "loc_3args",
            r#"events {}
http { server { location = /a /b {} } }
"#
            .to_string(),
            r#"invalid number of arguments in "location" directive"#,
            2,
            Same,
        ),
        case(
            "long_quote",
            format!("events {{}}\nhttp {{ server_name \"{}\"; }}\n", "x".repeat(5000)),
            r#"too long parameter, probably missing terminating """ character"#,
            2,
            Same,
        ),
        case(
            "long_word",
            format!("events {{}}\nhttp {{ server_name {}; }}\n", "x".repeat(5000)),
            r#"too long parameter "xxxxxxxxxx..." started"#,
            2,
            Same,
        ),
        case(
            "maxconns",
            r#"events {}
http { upstream u { server 127.0.0.1:1 max_conns=; } }
"#
            .to_string(),
            r#"invalid parameter "max_conns=""#,
            2,
            Same,
        ),
        case(
            "maxfails",
            r#"events {}
http { upstream u { server 127.0.0.1:1 max_fails=-1; } }
"#
            .to_string(),
            r#"invalid parameter "max_fails=-1""#,
            2,
            Same,
        ),
        case(
            "mixed_dup_loc_exact",
            r#"events {}
http { server { listen 127.0.0.1:18105; location = /a {} location /a {} location = /a {} } }
"#
            .to_string(),
            r#"duplicate location "/a""#,
            2,
            Same,
        ),
        case(
            "order_deferred",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1 backup; }
 server { listen 127.0.0.1:18101; location /a {} location /a {} }
}
"#
            .to_string(),
            r#"no servers in upstream "u""#,
            3,
            Same,
        ),
        case(
            "order_hostnf_vs_syntax",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; }
 server { location / { proxy_pass http://nosuch.invalid; } }
}
}
"#
            .to_string(),
            r#"host not found in upstream "nosuch.invalid""#,
            4,
            Same,
        ),
        case(
            "order_noservers_vs_later",
            r#"events {}
http {
 upstream u {
 }
 bad bad
"#
            .to_string(),
            r#"no servers are inside upstream"#,
            4,
            Same,
        ),
        case(
            "order_psh_vs_dup",
            r#"events {}
http {
 proxy_set_header A "$";
 server { listen 127.0.0.1:18103; location /a {} location /a {} }
}
"#
            .to_string(),
            r#"invalid variable name"#,
            5,
            Same,
        ),
        case(
            "order_psh_vs_ups",
            r#"events {}
http {
 proxy_set_header A "$";
 server { listen 127.0.0.1:18102; }
 upstream u { server 127.0.0.1:1 backup; }
}
"#
            .to_string(),
            r#"no servers in upstream "u""#,
            5,
            Same,
        ),
        case(
            "order_syntax_in_ups",
            r#"events {}
http {
 upstream u {
 server 127.0.0.1:1 foo;
 }
 upstream v {
"#
            .to_string(),
            r#"invalid parameter "foo""#,
            4,
            Same,
        ),
        case(
            "order_unknown_then_syntax",
            r#"events {}
foo;
}
"#
            .to_string(),
            r#"unknown directive "foo""#,
            2,
            Same,
        ),
        case(
            "order_var_vs_dup",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1; hash $nope; }
 server { listen 127.0.0.1:18101; location /a {} location /a {} }
}
"#
            .to_string(),
            r#"duplicate location "/a""#,
            4,
            Same,
        ),
        case(
            "pid_dup",
            r#"pid /tmp/a.pid;
pid /tmp/b.pid;
events {}
"#
            .to_string(),
            r#""pid" directive is duplicate"#,
            2,
            Same,
        ),
        case(
            "proxy_pass_nohost",
            r#"events {}
http { server { location / { proxy_pass http://; } } }
"#
            .to_string(),
            r#"no host in upstream """#,
            2,
            Same,
        ),
        case(
            "psh_args",
            r#"events {}
http { proxy_set_header X; }
"#
            .to_string(),
            r#"invalid number of arguments in "proxy_set_header" directive"#,
            2,
            Same,
        ),
        case(
            "random_4",
            r#"events {}
http { upstream u { server 127.0.0.1:1; random two least_conn x; } }
"#
            .to_string(),
            r#"invalid number of arguments in "random" directive"#,
            2,
            Same,
        ),
        case(
            "ret_text3",
            r#"events {}
http { server { location / { return 200 a b; } } }
"#
            .to_string(),
            r#"invalid number of arguments in "return" directive"#,
            2,
            Same,
        ),
        case(
            "ret_url",
            r#"events {}
http { server { location / { return ftp://x; } } }
"#
            .to_string(),
            r#"invalid return code "ftp://x""#,
            2,
            Same,
        ),
        case(
            "server_in_loc",
            r#"events {}
http { server { location / { server { } } } }
"#
            .to_string(),
            r#""server" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "server_v6bad",
            r#"events {}
http { upstream u { server [::1]x; } }
"#
            .to_string(),
            r#"invalid host in upstream "[::1]x""#,
            2,
            Same,
        ),
        case(
            "sn_dot",
            r#"events {}
http { server { server_name .; } }
"#
            .to_string(),
            r#"server name "." is invalid"#,
            2,
            Same,
        ),
        case(
            "sn_regex_empty",
            r#"events {}
http { server { server_name ~; } }
"#
            .to_string(),
            r#"empty regex in server name "~""#,
            2,
            Same,
        ),
        case(
            "stream_dup",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {}
stream {}
"#
            .to_string(),
            r#""stream" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "stream_listen0",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 0; proxy_pass 127.0.0.1:1; } }
"#
            .to_string(),
            r#"invalid port in "0" of the "listen" directive"#,
            3,
            Same,
        ),
        case(
            "stream_nu",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { proxy_next_upstream maybe; }
"#
            .to_string(),
            r#"invalid value "maybe" in "proxy_next_upstream" directive, it must be "on" or "off""#,
            3,
            Same,
        ),
        case(
            "stream_order",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 upstream u { server 127.0.0.1:1 backup; }
 server { listen 127.0.0.1:18104; }
}
"#
            .to_string(),
            r#"no handler for server"#,
            5,
            Same,
        ),
        case(
            "stream_pp_dup",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18100; proxy_pass 127.0.0.1:1; proxy_pass 127.0.0.1:2; } }
"#
            .to_string(),
            r#""proxy_pass" directive is duplicate"#,
            3,
            Same,
        ),
        case(
            "stream_pp_host",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18100; proxy_pass a/b; } }
"#
            .to_string(),
            r#"invalid host in upstream "a/b""#,
            3,
            Same,
        ),
        case(
            "unterminated_quote",
            r#"events {}
http { server_name "abc;
}
"#
            .to_string(),
            r#"unexpected end of file, expecting ";" or "}""#,
            4,
            Same,
        ),
        case(
            "ups_in_srv",
            r#"events {}
http { server { upstream u { server 127.0.0.1:1; } } }
"#
            .to_string(),
            r#""upstream" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "ups_ka_req",
            r#"events {}
http { upstream u { server 127.0.0.1:1; keepalive_requests x; } }
"#
            .to_string(),
            r#""keepalive_requests" directive invalid number"#,
            2,
            Same,
        ),
        case(
            "ups_ka_to",
            r#"events {}
http { upstream u { server 127.0.0.1:1; keepalive_timeout 1y; } }
"#
            .to_string(),
            r#""keepalive_timeout" directive invalid value"#,
            2,
            Same,
        ),
        case(
            "ups_port_noport",
            r#"events {}
http {
 server { location / { proxy_pass http://u; } }
 server { location /b { proxy_pass http://u:81; } }
}
"#
            .to_string(),
            r#"host not found in upstream "u""#,
            3,
            Same,
        ),
        case(
            "wc_dup",
            r#"events { worker_connections 1; worker_connections 2; }
"#
            .to_string(),
            r#""worker_connections" directive is duplicate"#,
            1,
            Same,
        ),
        case(
            "wc_main",
            r#"worker_connections 10;
events {}
"#
            .to_string(),
            r#""worker_connections" directive is not allowed here"#,
            1,
            Same,
        ),
        case(
            "weight_big",
            r#"events {}
http { upstream u { server 127.0.0.1:1 weight=4294967296; } }
"#
            .to_string(),
            r#"invalid parameter "weight=4294967296""#,
            2,
            Differs,
        ),
        case(
            "access_log_gzip_level",
            r#"events {}
http {
 access_log /tmp/a.log combined buffer=32k gzip=10;
}
"#
            .to_string(),
            r#"invalid compression level "10""#,
            3,
            Same,
        ),
        case(
            "gzip_comp_level_bounds",
            r#"events {}
http {
 gzip_comp_level 0;
}
"#
            .to_string(),
            "value must be between 1 and 9",
            3,
            Same,
        ),
        case(
            "gzip_proxied_value",
            r#"events {}
http {
 gzip_proxied any sometimes;
}
"#
            .to_string(),
            r#"invalid value "sometimes""#,
            3,
            Same,
        ),
        case(
            "gzip_in_if",
            r#"events {}
http {
 server { location / { if ($arg_a) { gzip on; } } }
}
"#
            .to_string(),
            r#""gzip" directive is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "access_log_flush_without_buffer",
            r#"events {}
http {
 access_log /tmp/corelb-a.log combined flush=1s;
}
"#
            .to_string(),
            r#"no buffer is defined for access_log "/tmp/corelb-a.log""#,
            3,
            Same,
        ),
        case(
            "access_log_conflicting_buffers",
            r#"events {}
http {
 access_log /tmp/corelb-a.log combined buffer=8k;
 server { access_log /tmp/corelb-a.log combined buffer=16k; }
}
"#
            .to_string(),
            r#"access_log "/tmp/corelb-a.log" already defined with conflicting parameters"#,
            4,
            Same,
        ),
        case(
            "log_format_duplicate",
            r#"events {}
http {
 log_format combined '$status';
}
"#
            .to_string(),
            r#"duplicate "log_format" name "combined""#,
            3,
            Same,
        ),
        case(
            "log_format_escape",
            r#"events {}
http {
 log_format j escape=xml '$status';
}
"#
            .to_string(),
            r#"unknown log format escaping "xml""#,
            3,
            Same,
        ),
        case(
            "log_format_in_server",
            r#"events {}
http { server {
 log_format j '$status';
} }
"#
            .to_string(),
            r#""log_format" directive is not allowed here"#,
            3,
            Same,
        ),
        case(
            "capture_var",
            r#"events {}
stream { upstream u { server 127.0.0.1:1;
 hash $1; } }
"#
            .to_string(),
            r#"regex captures ("$1") are not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "default_type_dup",
            r#"events {}
http {
 default_type a/b;
 default_type c/d;
}
"#
            .to_string(),
            r#""default_type" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "error_log_debug_http",
            r#"error_log /tmp/a.log debug_http;
events {}
"#
            .to_string(),
            r#"log level "debug_http" is not supported by corelb"#,
            1,
            Differs,
        ),
        case(
            "error_log_stream",
            r#"events {}
stream {
 error_log syslog:server=127.0.0.1;
}
"#
            .to_string(),
            r#"error log "syslog:server=127.0.0.1" is not supported by corelb (a file or stderr)"#,
            3,
            Differs,
        ),
        case(
            "error_log_syslog",
            r#"error_log syslog:server=127.0.0.1;
events {}
"#
            .to_string(),
            r#"error log "syslog:server=127.0.0.1" is not supported by corelb (a file or stderr)"#,
            1,
            Differs,
        ),
        case(
            "gunzip",
            r#"events {}
http {
 gunzip on;
}
"#
            .to_string(),
            r#""gunzip" directive is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "event_method",
            r#"events {
 use kqueue;
}
"#
            .to_string(),
            r#"invalid event type "kqueue""#,
            2,
            Same,
        ),
        case(
            "multi_accept_flag",
            r#"events {
 multi_accept maybe;
}
"#
            .to_string(),
            r#"invalid value "maybe" in "multi_accept" directive, it must be "on" or "off""#,
            2,
            Same,
        ),
        case(
            "rlimit_nofile_number",
            r#"worker_rlimit_nofile x;
events {}
"#
            .to_string(),
            r#""worker_rlimit_nofile" directive invalid number"#,
            1,
            Same,
        ),
        case(
            "cpu_affinity_char",
            r#"worker_cpu_affinity 0102;
events {}
"#
            .to_string(),
            r#"invalid character "2" in "worker_cpu_affinity""#,
            1,
            Same,
        ),
        case(
            "cpu_affinity_auto_args",
            r#"worker_cpu_affinity auto 01 10;
events {}
"#
            .to_string(),
            r#"invalid number of arguments in "worker_cpu_affinity" directive"#,
            1,
            Same,
        ),
        case(
            "keepalive_disable_value",
            r#"events {}
http { server {
 keepalive_disable msie6 msie7;
} }
"#
            .to_string(),
            r#"invalid value "msie7""#,
            3,
            Same,
        ),
        case(
            "listen_rcvbuf",
            r#"events {}
http { server {
 listen 443 rcvbuf=64x;
} }
"#
            .to_string(),
            r#"invalid rcvbuf "rcvbuf=64x""#,
            3,
            Same,
        ),
        case(
            "listen_ssl",
            r#"events {}
http { server {
 listen 443 ssl;
} }
"#
            .to_string(),
            r#"no "ssl_certificate" is defined for the "listen ... ssl" directive"#,
            2,
            Same,
        ),
        case(
            "named_location_nested",
            r#"events {}
http { server {
 location / {
 location @fallback { }
 }
} }
"#
            .to_string(),
            r#"named location "@fallback" can be on the server level only"#,
            4,
            Same,
        ),
        case(
            "inside_named_location",
            r#"events {}
http { server {
 location @fallback {
 location /a { }
 }
} }
"#
            .to_string(),
            r#"location "/a" cannot be inside the named location "@fallback""#,
            4,
            Same,
        ),
        case(
            "nested_location",
            r#"events {}
http { server {
 location /a {
 location /b { }
 }
} }
"#
            .to_string(),
            r#"location "/b" is outside location "/a""#,
            4,
            Same,
        ),
        case(
            "noregex_location_duplicate",
            r#"events {}
http { server {
 location /x { }
 location = /x { }
 location ^~ /x { }
} }
"#
            .to_string(),
            r#"duplicate location "/x""#,
            5,
            Same,
        ),
        case(
            "if_unexpected_operator",
            r#"events {}
http { server {
 location / {
 if ($arg_a == 1) { return 204; }
 }
} }
"#
            .to_string(),
            r#"unexpected "==" in condition"#,
            4,
            Same,
        ),
        case(
            "if_without_parentheses",
            r#"events {}
http { server {
 if $host { return 204; }
} }
"#
            .to_string(),
            r#"invalid condition "$host""#,
            3,
            Same,
        ),
        case(
            "if_inside_if",
            r#"events {}
http { server { location / {
 if ($arg_a) {
 if ($arg_b) { return 204; }
 }
} } }
"#
            .to_string(),
            r#""if" directive is not allowed here"#,
            4,
            Same,
        ),
        case(
            "proxy_pass_inside_if",
            r#"events {}
http { server { location / {
 if ($arg_a) {
 proxy_pass http://127.0.0.1:9;
 }
} } }
"#
            .to_string(),
            r#""proxy_pass" directive is not supported by corelb"#,
            4,
            Differs,
        ),
        case(
            "rewrite_bad_flag",
            r#"events {}
http { server {
 rewrite ^/a /b lst;
} }
"#
            .to_string(),
            r#"invalid parameter "lst""#,
            3,
            Same,
        ),
        case(
            "rewrite_new_args_internal",
            r#"events {}
http { server { location / {
 rewrite ^/a /b?x=1 last;
} } }
"#
            .to_string(),
            r#""rewrite" to a URI with new arguments ("?") is not supported by corelb (a redirect is)"#,
            3,
            Differs,
        ),
        case(
            "proxy_pass_uri_in_regex_location",
            r#"events {}
http { server {
 location ~ \.php$ {
 proxy_pass http://127.0.0.1:9/php/;
 }
} }
"#
            .to_string(),
            r#""proxy_pass" cannot have URI part in location given by regular expression, or inside named location, or inside "if" statement, or inside "limit_except" block"#,
            4,
            Same,
        ),
        // nginx checks the buffer sizes when it merges the http block, and names the block's last line
        case(
            "proxy_buffers_merge",
            r#"events {}
http {
 proxy_buffers 1 4k;
 server { listen 127.0.0.1:1;
 location / { }
 }
}
"#
            .to_string(),
            r#"there must be at least 2 "proxy_buffers""#,
            5,
            Differs,
        ),
        case(
            "proxy_busy_buffers_size_merge",
            r#"events {}
http { server { listen 127.0.0.1:1;
 location / {
 proxy_busy_buffers_size 1k;
 }
} }
"#
            .to_string(),
            r#""proxy_busy_buffers_size" must be equal to or greater than the maximum of the value of "proxy_buffer_size" and one of the "proxy_buffers""#,
            3,
            Differs,
        ),
        case(
            "limit_rate_var",
            r#"events {}
http { server { location / {
 limit_rate $arg_l;
} } }
"#
            .to_string(),
            r#""limit_rate" with variables is not supported by corelb ("set $limit_rate" is)"#,
            3,
            Differs,
        ),
        case(
            "regex_location",
            r#"events {}
http { server {
 location ~ \.php($ { }
} }
"#
            .to_string(),
            r#"pcre2_compile() failed: missing closing parenthesis in "\.php($""#,
            3,
            Same,
        ),
        case(
            "regex_location_1arg",
            r#"events {}
http { server {
 location ~*^/(?!api) { }
} }
"#
            .to_string(),
            r#"regular expression "^/(?!api)" uses look-around, which corelb does not support (its regex engine runs in linear time, without backtracking)"#,
            3,
            Differs,
        ),
        case(
            "regex_server_name",
            r#"events {}
http { server {
 server_name "~^www\.(.+$";
} }
"#
            .to_string(),
            r#"pcre2_compile() failed: missing closing parenthesis in "^www\.(.+$""#,
            3,
            Same,
        ),
        case(
            "root_dup",
            r#"events {}
http { server {
 root /var/www;
 root /srv;
} }
"#
            .to_string(),
            r#""root" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "root_document_root",
            r#"events {}
http { server {
 location / { root ${document_root}/x; }
} }
"#
            .to_string(),
            r#"the $document_root variable cannot be used in the "root" directive"#,
            3,
            Same,
        ),
        case(
            "try_files_args",
            r#"events {}
http { server {
 try_files $uri /index.php?$args;
} }
"#
            .to_string(),
            r#""try_files" with arguments in its last URI is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "index_empty",
            r#"events {}
http {
 index "";
}
"#
            .to_string(),
            r#"index "" in "index" directive is invalid"#,
            3,
            Same,
        ),
        case(
            "try_files_proxy",
            r#"events {}
http { server {
 location / {
  try_files $uri @up;
  proxy_pass http://127.0.0.1:1;
 }
} }
"#
            .to_string(),
            r#""try_files" in a location with a handler ("proxy_pass", "api"...) is not supported by corelb"#,
            3,
            Differs,
        ),
        case(
            "sendfile_value",
            r#"events {}
http {
 sendfile maybe;
}
"#
            .to_string(),
            r#"invalid value "maybe" in "sendfile" directive, it must be "on" or "off""#,
            3,
            Same,
        ),
        case(
            "sendfile_max_chunk_value",
            r#"events {}
http {
 sendfile_max_chunk 1x;
}
"#
            .to_string(),
            r#""sendfile_max_chunk" directive invalid value"#,
            3,
            Same,
        ),
        case(
            "tcp_nodelay_off",
            r#"events {}
http {
 tcp_nodelay off;
}
"#
            .to_string(),
            r#""tcp_nodelay off" is not supported by corelb (it sets TCP_NODELAY on every connection)"#,
            3,
            Differs,
        ),
        case(
            "open_file_cache_no_max",
            r#"events {}
http {
 open_file_cache inactive=10s;
}
"#
            .to_string(),
            r#""open_file_cache" must have the "max" parameter"#,
            3,
            Same,
        ),
        case(
            "open_file_cache_param",
            r#"events {}
http {
 open_file_cache max=0;
}
"#
            .to_string(),
            r#"invalid "open_file_cache" parameter "max=0""#,
            3,
            Same,
        ),
        case(
            "open_file_cache_valid_value",
            r#"events {}
http {
 open_file_cache_valid 1ms;
}
"#
            .to_string(),
            r#""open_file_cache_valid" directive invalid value"#,
            3,
            Same,
        ),
        case(
            "stream_access_log",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 access_log /tmp/x.log;
}
"#
            .to_string(),
            r#"log format is not specified"#,
            4,
            Same,
        ),
        case(
            "stream_log_format_duplicate",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 log_format basic '$remote_addr $status';
 log_format Basic '$status';
 log_format basic '$status';
}
"#
            .to_string(),
            r#"duplicate "log_format" name "basic""#,
            6,
            Same,
        ),
        case(
            "stream_access_log_unknown_format",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 access_log /tmp/corelb-stream-uf.log combined;
}
"#
            .to_string(),
            r#"unknown log format "combined""#,
            4,
            Same,
        ),
        case(
            "stream_log_format_http_variable",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 log_format t '$remote_addr $request';
}
"#
            .to_string(),
            r#"unknown "request" variable"#,
            4,
            NoPlace,
        ),
        case(
            "stream_nu_timeout",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream {
 proxy_next_upstream_timeout 1s;
}
"#
            .to_string(),
            r#""proxy_next_upstream_timeout" directive is not supported by corelb"#,
            4,
            Differs,
        ),
        case(
            "stream_pp_var",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18110;
 proxy_pass $x;
} }
"#
            .to_string(),
            r#"unknown "x" variable"#,
            4,
            NoPlace,
        ),
        case(
            "stream_return_duplicate",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server { listen 127.0.0.1:18112; return 1;
 return 2;
} }
"#
            .to_string(),
            r#""return" directive is duplicate"#,
            4,
            Same,
        ),
        case(
            "stream_udp",
            r#"load_module modules/ngx_stream_module.so;
events {}
stream { server {
 listen 127.0.0.1:53 udp proxy_protocol;
 return x;
} }
"#
            .to_string(),
            r#""listen" directive "proxy_protocol" parameter is incompatible with "udp""#,
            4,
            Same,
        ),
        case(
            "two_error_logs",
            r#"error_log /tmp/a.log;
error_log /tmp/b.log;
events {}
"#
            .to_string(),
            r#"several "error_log" directives are not supported by corelb"#,
            2,
            Differs,
        ),
        case(
            "types_brace",
            r#"events {}
http {
 types {
 text/html html { }
 }
}
"#
            .to_string(),
            r#"unexpected "{""#,
            4,
            Same,
        ),
        case(
            "types_main",
            r#"events {}
types { text/html html; }
"#
            .to_string(),
            r#""types" directive is not allowed here"#,
            2,
            Same,
        ),
        case(
            "types_no_block",
            r#"events {}
http {
 types;
}
"#
            .to_string(),
            r#"directive "types" has no opening "{""#,
            3,
            Same,
        ),
        case(
            "unix",
            r#"events {}
http { upstream u {
 server unix:;
} }
"#
            .to_string(),
            r#"no path in the unix domain socket in upstream "unix:""#,
            3,
            Same,
        ),
        case(
            "unknown_var",
            r#"events {}
http {
 upstream u { server 127.0.0.1:1;
 hash $nope; }
}
"#
            .to_string(),
            r#"unknown "nope" variable"#,
            4,
            NoPlace,
        ),
        case(
            "worker_runtime_bad",
            r#"worker_runtime threads;
events {}
"#
            .to_string(),
            r#"invalid value "threads" in "worker_runtime" directive, it must be "tokio" or "glommio""#,
            1,
            Differs,
        ),
        case(
            "worker_runtime_dup",
            r#"worker_runtime tokio;
worker_runtime glommio;
events {}
"#
            .to_string(),
            r#""worker_runtime" directive is duplicate"#,
            2,
            Differs,
        ),
        case(
            "map_default_twice",
            "events {}\nhttp {\n map $uri $m {\n  default 1;\n  default 2;\n }\n}\n".to_string(),
            "duplicate default map parameter",
            5,
            Same,
        ),
        case(
            "map_conflict",
            "events {}\nhttp {\n map $uri $m {\n  /A 1;\n  /a 2;\n }\n}\n".to_string(),
            r#"conflicting parameter "/a""#,
            5,
            Same,
        ),
        case(
            "map_wildcard",
            "events {}\nhttp {\n map $host $m {\n  hostnames;\n  a.*.com 2;\n }\n}\n".to_string(),
            r#"invalid hostname or wildcard "a.*.com""#,
            5,
            Same,
        ),
        case(
            "map_params",
            "events {}\nhttp {\n map $uri $m {\n  a 1 2;\n }\n}\n".to_string(),
            "invalid number of the map parameters",
            4,
            Same,
        ),
        case(
            "map_builtin",
            "events {}\nhttp {\n map $uri $host {\n  default 1;\n }\n}\n".to_string(),
            r#"the duplicate "host" variable"#,
            3,
            Same,
        ),
        case(
            "map_name",
            "events {}\nhttp {\n map $uri m {\n  default 1;\n }\n}\n".to_string(),
            r#"invalid variable name "m""#,
            3,
            Same,
        ),
        case(
            "map_unknown_value_var",
            "events {}\nhttp {\n map $uri $m {\n  default $nope;\n }\n}\n".to_string(),
            r#"unknown "nope" variable"#,
            4,
            NoPlace,
        ),
        case(
            "map_lookaround",
            "events {}\nhttp {\n map $uri $m {\n  ~^/(?!x) 1;\n }\n}\n".to_string(),
            r#"regular expression "^/(?!x)" uses look-around, which corelb does not support (its regex engine runs in linear time, without backtracking)"#,
            4,
            Differs,
        ),
        case(
            "map_mixed_in_log",
            "events {}\nhttp {\n map $status$uri $m {\n  default 1;\n }\n server {\n  access_log /tmp/corelb-mixed.log combined if=$m;\n }\n}\n".to_string(),
            r#"map "$m" in an access log, with variables of both the request and the answer (or an answer header), is not supported by corelb"#,
            7,
            Differs,
        ),
        case(
            "request_body_log",
            "events {}\nhttp {\n log_format f $request_body;\n server {\n }\n}\n".to_string(),
            r#"the "$request_body" variable in a log format is not supported by corelb (bodies are not kept until the line is written)"#,
            3,
            Differs,
        ),
    ]
}

#[test]
fn config_refusals_have_nginx_messages_and_lines() {
    let dir = scratch_dir("errors");
    let mut failures = Vec::new();
    for c in cases() {
        let path = dir.join(format!("{}.conf", c.name));
        std::fs::write(&path, &c.text).expect("write");
        let want = format!("[emerg] {} in {}:{}", c.msg, path.display(), c.line);
        match config::load(&path) {
            Ok(_) => failures.push(format!("{}: accepted", c.name)),
            Err(e) => {
                if e.to_string() != want || e.line() != Some(c.line) || e.file() != Some(path.as_path()) {
                    failures.push(format!("{}:\n  got  {e}\n  want {want}", c.name));
                }
                match config::parse_str(&c.text, &path) {
                    Err(same) if same == e => {}
                    other => failures.push(format!("{}: parse_str differs from load: {other:?}", c.name)),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn config_nginx_gives_the_same_messages() {
    let comparable: Vec<Case> = cases().into_iter().filter(|c| c.nginx != Differs).collect();
    let Some(nginx) = nginx_binary() else {
        skip::skip(Skip {
            need: Need::Nginx,
            cases: comparable.len(),
            what: "nginx -t comparisons",
            why: "nginx not installed",
        });
        return;
    };
    let (stream, comparable): (Vec<Case>, Vec<Case>) = comparable
        .into_iter()
        .partition(|c| c.text.contains(STREAM) && !nginx_has_stream());
    if !stream.is_empty() {
        skip::skip(Skip {
            need: Need::NginxStream,
            cases: stream.len(),
            what: "stream cases",
            why: "nginx stream module not installed",
        });
    }
    let dir = scratch_dir("nginx-errors");
    let mut failures = Vec::new();
    let mut compared = 0;
    for c in comparable {
        let path = dir.join(format!("{}.conf", c.name));
        std::fs::write(&path, &c.text).expect("write");
        let want = match c.nginx {
            NoPlace => format!("[emerg] {}", c.msg),
            _ => format!("[emerg] {} in {}:{}", c.msg, path.display(), c.line),
        };
        let got = nginx_messages(&nginx, &path);
        compared += 1;
        if !got.contains(&want) {
            failures.push(format!("{}:\n  nginx {got:?}\n  want  {want}", c.name));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(compared > 100, "only {compared} cases compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Configs nginx accepts with warnings: corelb accepts them and records the same warnings.
fn warning_cases(dir: &Path) -> Vec<(&'static str, String, Vec<String>)> {
    let p = |name: &str| dir.join(format!("{name}.conf")).display().to_string();
    vec![
        (
            "redefined",
            "events {}\nhttp {\n upstream u { server 127.0.0.1:1; least_conn;\n ip_hash; }\n}\n".into(),
            vec![format!(
                "[warn] load balancing method redefined in {}:4",
                p("redefined")
            )],
        ),
        (
            "keepalive_first",
            "events {}\nhttp {\n upstream u { server 127.0.0.1:1; keepalive 4;\n least_conn; }\n}\n".into(),
            vec![format!(
                "[warn] load balancing method redefined in {}:4",
                p("keepalive_first")
            )],
        ),
        (
            "duplicate_value",
            "events {}\nhttp { proxy_next_upstream error error; }\n".into(),
            vec![format!(
                "[warn] duplicate value \"error\" in {}:2",
                p("duplicate_value")
            )],
        ),
        (
            "index_absolute",
            "events {}\nhttp {\n index /a.html b.html;\n}\n".into(),
            vec![format!(
                "[warn] only the last index in \"index\" directive should be absolute in {}:3",
                p("index_absolute")
            )],
        ),
        (
            "duplicate_extension",
            "events {}\nhttp {\n types {\n text/html html;\n text/x HTML;\n }\n}\n".into(),
            vec![format!(
                "[warn] duplicate extension \"html\", content type: \"text/x\", previous content type: \
                 \"text/html\" in {}:5",
                p("duplicate_extension")
            )],
        ),
        (
            "suspicious_name",
            "events {}\nhttp { server { listen 127.0.0.1:18096; server_name a/b; } }\n".into(),
            vec![format!(
                "[warn] server name \"a/b\" has suspicious symbols in {}:2",
                p("suspicious_name")
            )],
        ),
        (
            "conflicting_names",
            "events {}\nhttp { server { listen 127.0.0.1:18080; } server { listen 127.0.0.1:18080; }\n server { \
             listen 127.0.0.1:18081; server_name A.com; } server { listen 127.0.0.1:18081; server_name a.com; } }\n"
                .into(),
            vec![
                "[warn] conflicting server name \"\" on 127.0.0.1:18080, ignored".into(),
                "[warn] conflicting server name \"a.com\" on 127.0.0.1:18081, ignored".into(),
            ],
        ),
    ]
}

#[test]
fn config_warnings_as_nginx_gives_them() {
    let dir = scratch_dir("warnings");
    let nginx = nginx_binary();
    if nginx.is_none() {
        skip::skip(Skip {
            need: Need::Nginx,
            cases: warning_cases(&dir).len(),
            what: "nginx -t comparisons",
            why: "nginx not installed",
        });
    }
    for (name, text, want) in warning_cases(&dir) {
        let path = dir.join(format!("{name}.conf"));
        std::fs::write(&path, &text).expect("write");
        let conf = config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(conf.warnings, want, "{name}");
        if let Some(nginx) = &nginx {
            assert_eq!(nginx_messages(nginx, &path), want, "{name}: nginx -t");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Configs that look wrong but that nginx accepts: corelb accepts them too.
fn accepted_cases() -> Vec<(&'static str, &'static str)> {
    vec![
        // A bad header value at the http level is never compiled when every server has its own headers.
        ("unused_http_header", "events {}\nhttp {\n proxy_set_header A \"$\";\n}\n"),
        (
            "overridden_http_header",
            "events {}\nhttp {\n proxy_set_header A \"$\";\n server { listen 127.0.0.1:18200; proxy_set_header B b; }\n}\n",
        ),
        // `backup` before the method that refuses it.
        (
            "backup_before_hash",
            "events {}\nhttp { upstream u { server 127.0.0.1:2; server 127.0.0.1:1 backup; hash $remote_addr; } }\n",
        ),
        (
            "zone_size_once",
            "events {}\nhttp { upstream u { server 127.0.0.1:1; zone z 64k; }\n upstream v { server 127.0.0.1:2; zone z; } }\n",
        ),
        (
            "implicit_with_and_without_port",
            "events {}\nhttp { server { listen 127.0.0.1:18201; location / { proxy_pass http://127.0.0.1:1/x; } \
             location /b { proxy_pass http://127.0.0.1; } } }\n",
        ),
        ("listen_port_range", "events {}\nhttp { server { listen 127.0.0.1:18202-18203; } }\n"),
        (
            "stream_listen_without_port",
            "load_module modules/ngx_stream_module.so;\nevents {}\nstream { server { listen 127.0.0.1; proxy_pass 127.0.0.1:1; } }\n",
        ),
        ("empty_server_name", "events {}\nhttp { server { listen 127.0.0.1:18204; server_name \"\"; } }\n"),
        ("quoted_names", "events {}\n\"http\" { 'server' { \"listen\" '127.0.0.1:18205'; } }\n"),
        ("comment_everywhere", "# a\nevents { # b\n} # c\nhttp{server{listen 127.0.0.1:18206;#d\n}}#e"),
        (
            "files",
            "events {}\nhttp { sendfile on; tcp_nopush on; tcp_nodelay on; sendfile_max_chunk 512k;\n \
             open_file_cache max=100 inactive=20s; open_file_cache_valid 30s; open_file_cache_min_uses 2;\n \
             open_file_cache_errors on; types_hash_max_size 2048; types_hash_bucket_size 64; etag off; root /;\n \
             types { text/html html; image/x; } types { text/css css; } default_type application/octet-stream;\n \
             index index.html /x.html; server { listen 127.0.0.1:18208; root html/;\n \
             location / { root www; index a b; types {} } location /o { open_file_cache off; log_not_found off; } } }\n",
        ),
        ("escaped_semicolon", "events {}\nhttp { server { listen 127.0.0.1:18207; server_name a\\;b; } }\n"),
    ]
}

#[test]
fn config_accepted_like_nginx() {
    let dir = scratch_dir("accepted");
    let nginx = nginx_binary();
    let stream = accepted_cases().iter().filter(|(_, t)| t.contains(STREAM)).count();
    if nginx.is_none() {
        skip::skip(Skip {
            need: Need::Nginx,
            cases: accepted_cases().len(),
            what: "nginx -t comparisons",
            why: "nginx not installed",
        });
    } else if !nginx_has_stream() {
        skip::skip(Skip {
            need: Need::NginxStream,
            cases: stream,
            what: "stream cases",
            why: "nginx stream module not installed",
        });
    }
    for (name, text) in accepted_cases() {
        let path = dir.join(format!("{name}.conf"));
        std::fs::write(&path, text).expect("write");
        if let Err(e) = config::load(&path) {
            panic!("{name}: {e}");
        }
        if let Some(nginx) = &nginx {
            if text.contains(STREAM) && !nginx_has_stream() {
                continue;
            }
            let emerg: Vec<String> = nginx_messages(nginx, &path)
                .into_iter()
                .filter(|m| m.starts_with("[emerg]"))
                .collect();
            assert!(emerg.is_empty(), "{name}: nginx -t says {emerg:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
