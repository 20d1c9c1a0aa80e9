//! `-v`, `-V` and `-h` in the shape of nginx's `ngx_show_version_info`: the version line, the usage, and a
//! `configure arguments:` line that names, in nginx's `./configure` words, the optional modules corelb has
//! (`--with-...`) and the default modules it lacks (`--without-...`), so that scripts and nginx's test suite
//! (`has()` in `lib/Test/Nginx.pm`) read the truth from it.

/// The version line, as nginx's `nginx version: nginx/1.x.y`.
pub fn version_line() -> String {
    format!("corelb version: corelb/{}", env!("CARGO_PKG_VERSION"))
}

/// Non-default nginx modules corelb has.
pub const WITH: &[&str] = &[
    "--with-stream",
    "--with-http_stub_status_module",
    "--with-http_realip_module",
    "--with-stream_realip_module",
    "--with-http_gzip_static_module",
    "--with-http_ssl_module",
    "--with-stream_ssl_module",
    "--with-stream_ssl_preread_module",
    "--with-http_v2_module",
];

/// nginx's default modules corelb does not have: every directive of each is refused by the config reader. (A
/// module of which corelb has a part, such as the rewrite module's `return`, counts as present; what corelb
/// lacks of it is in `docs/directives.md`.)
pub const WITHOUT: &[&str] = &[
    "--without-http_ssi_module",
    "--without-http_userid_module",
    "--without-http_auth_basic_module",
    "--without-http_mirror_module",
    "--without-http_autoindex_module",
    "--without-http_split_clients_module",
    "--without-http_referer_module",
    "--without-http_fastcgi_module",
    "--without-http_uwsgi_module",
    "--without-http_scgi_module",
    "--without-http_grpc_module",
    "--without-http_memcached_module",
    "--without-http_empty_gif_module",
    "--without-http_browser_module",
    "--without-http_tunnel_module",
    "--without-http-cache",
    "--without-stream_pass_module",
    "--without-stream_set_module",
    "--without-stream_split_clients_module",
];

/// The `configure arguments:` line.
pub fn configure_line() -> String {
    let mut line = String::from("configure arguments:");
    for arg in WITH.iter().chain(WITHOUT) {
        line.push(' ');
        line.push_str(arg);
    }
    line
}

/// The usage `-h` prints after the version line.
pub const USAGE: &str = "\
Usage: corelb [-?hvVtTq] [-s signal] [-p prefix]
              [-e filename] [-c filename] [-g directives] [--runtime tokio|glommio]
       corelb pick|bench ...   (see corelb --help)

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to the running process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: the current directory)
  -e filename   : set error log file (default: stderr)
  -c filename   : set configuration file (no default: required)
  -g directives : set global directives out of configuration file
  --runtime R   : shard runtime, tokio or glommio (default: worker_runtime, else $CORELB_RUNTIME, else tokio)
  --version     : print `corelb version X.Y.Z` on stdout and exit
";

/// nginx's line naming its TLS library, as nginx built with BoringSSL prints it (`built with OpenSSL 1.1.1
/// (compatible; BoringSSL)`): the OpenSSL feature level rustls gives (TLS 1.3, SNI, ALPN, certificate callbacks),
/// which nginx-tests' `has('openssl:1.1.1')` reads (README, differences).
pub const BUILT_WITH: &str = concat!(
    "built with OpenSSL 1.1.1 (compatible; rustls ",
    env!("CORELB_RUSTLS_VERSION"),
    ")"
);

/// What `-v`, `-V` or `-h` print (on stderr, as nginx).
pub fn text(help: bool, configure: bool) -> String {
    let mut out = version_line();
    out.push('\n');
    if help {
        out.push_str(USAGE);
        out.push('\n');
    }
    if configure {
        out.push_str(BUILT_WITH);
        out.push('\n');
        // nginx's line when its TLS library has SNI (nginx-tests' `has('sni')` reads it); rustls always has it
        out.push_str("TLS SNI support enabled\n");
        out.push_str(&configure_line());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_as_nginx() {
        assert_eq!(
            text(false, false),
            format!("corelb version: corelb/{}\n", env!("CARGO_PKG_VERSION"))
        );
        let v = text(false, true);
        let mut lines = v.lines();
        assert_eq!(lines.next(), Some(version_line().as_str()));
        let built = lines.next().unwrap();
        assert!(
            built.starts_with("built with OpenSSL 1.1.1 (compatible; rustls 0."),
            "{built}"
        );
        assert_eq!(lines.next(), Some("TLS SNI support enabled"));
        let configure = lines.next().unwrap();
        assert!(configure.starts_with(
            "configure arguments: --with-stream --with-http_stub_status_module --with-http_realip_module \
             --with-stream_realip_module --with-http_gzip_static_module --with-http_ssl_module \
             --with-stream_ssl_module --with-stream_ssl_preread_module --with-http_v2_module --without-http_ssi_module"
        ));
        // nginx-tests' has('gzip') looks for --without-http_gzip_module, has('charset') for the charset module's
        assert!(!configure.contains("--without-http_gzip_module"));
        assert!(!configure.contains("--without-http_charset_module"));
        assert_eq!(lines.next(), None);
        assert!(text(true, false).contains("\n  -g directives : set global directives out of configuration file\n"));
    }

    #[test]
    fn each_module_is_named_once() {
        let mut all: Vec<&str> = WITH.iter().chain(WITHOUT).copied().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
