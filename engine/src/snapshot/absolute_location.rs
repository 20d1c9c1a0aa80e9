//! nginx's header filter completing a `Location` that starts with `/` (`absolute_redirect`,
//! `server_name_in_redirect`, `port_in_redirect`), for the answers corelb makes: `return`, `rewrite ... redirect`.

use crate::config::headers::RedirectStyle;
use crate::config::key::{Var, VarSource};
use std::sync::LazyLock;

/// `$http_host`: whether the request named a host.
static HTTP_HOST: LazyLock<Var> = LazyLock::new(|| Var::Http("host".to_string()));

/// Puts `SCHEME://HOST[:PORT]` in front of `location` (in place, without allocating) when it starts with `/` and
/// `style.absolute`: HOST is the server's first name under `server_name_in_redirect`, else the request's host
/// (lower case, without its port), else the address the client connected to; `:PORT` is the local port under
/// `port_in_redirect`, unless it is the scheme's own (nginx's `ngx_http_header_filter`).
pub fn complete(style: RedirectStyle, vars: &dyn VarSource, location: &mut Vec<u8>) {
    if !style.absolute || location.first() != Some(&b'/') {
        return;
    }
    let value_len = location.len();
    let scheme_at = location.len();
    vars.append(&Var::Scheme, location);
    let https = location.get(scheme_at..) == Some(b"https".as_slice());
    location.extend_from_slice(b"://");
    if style.server_name {
        vars.append(&Var::ServerName, location);
    } else {
        let host_at = location.len();
        vars.append(&HTTP_HOST, location);
        let named = location.len() > host_at;
        location.truncate(host_at);
        vars.append(if named { &Var::Host } else { &Var::ServerAddr }, location);
    }
    if style.port {
        let colon_at = location.len();
        location.push(b':');
        vars.append(&Var::ServerPort, location);
        let own: &[u8] = if https { b"443" } else { b"80" };
        if location.get(colon_at + 1..) == Some(own) || location.len() == colon_at + 1 {
            location.truncate(colon_at);
        }
    }
    // [value | prefix] -> [prefix | value]
    location.rotate_left(value_len);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's variables: `$http_host` given or not, the server's name, its address and port.
    struct Req {
        host_header: Option<&'static str>,
        port: &'static str,
    }

    impl VarSource for Req {
        fn append(&self, var: &Var, out: &mut Vec<u8>) {
            let v: &str = match var {
                Var::Scheme => "http",
                Var::Http(h) if h == "host" => self.host_header.unwrap_or(""),
                Var::Host => self.host_header.map_or("srv", |h| h.split(':').next().unwrap_or(h)),
                Var::ServerName => "srv",
                Var::ServerAddr => "127.0.0.1",
                Var::ServerPort => self.port,
                _ => "?",
            };
            out.extend_from_slice(v.as_bytes());
        }
    }

    fn completed(style: RedirectStyle, req: &Req, location: &str) -> String {
        let mut out = location.as_bytes().to_vec();
        complete(style, req, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn as_nginx_header_filter_completes_a_location() {
        let named = Req {
            host_header: Some("Example.com:8080"),
            port: "8000",
        };
        let nameless = Req {
            host_header: None,
            port: "80",
        };
        let n = RedirectStyle::NGINX;
        assert_eq!(completed(n, &named, "/x?a=1"), "http://Example.com:8000/x?a=1");
        assert_eq!(
            completed(n, &nameless, "/x"),
            "http://127.0.0.1/x",
            "no Host: the local address, port 80 left out"
        );
        assert_eq!(completed(n, &named, "http://e/x"), "http://e/x", "absolute already");
        assert_eq!(completed(n, &named, ""), "");
        let server_name = RedirectStyle { server_name: true, ..n };
        assert_eq!(completed(server_name, &named, "/x"), "http://srv:8000/x");
        let no_port = RedirectStyle { port: false, ..n };
        assert_eq!(completed(no_port, &named, "/x"), "http://Example.com/x");
        let off = RedirectStyle { absolute: false, ..n };
        assert_eq!(completed(off, &named, "/x"), "/x");
    }
}
