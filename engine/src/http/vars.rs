//! Variable sources for key templates and `proxy_set_header` values: one over a parsed request, one over a bare
//! connection (stream); both write into reused buffers, never allocating once they have grown.

use crate::config::key::{Var, VarSource};
use crate::http::request::RequestHead;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

/// Writes `ip` as text (no allocation beyond `out`'s growth).
fn append_ip(out: &mut Vec<u8>, ip: IpAddr) {
    let _ = write!(out, "{ip}");
}

fn append_port(out: &mut Vec<u8>, port: u16) {
    crate::http::pages::append_decimal(out, u64::from(port));
}

/// The variables of a connection: addresses and ports (the stream module's `$remote_addr`, `$server_port`...).
#[derive(Debug, Clone, Copy)]
pub struct ConnVars {
    pub remote: SocketAddr,
    pub local: SocketAddr,
}

impl VarSource for ConnVars {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::RemoteAddr => append_ip(out, self.remote.ip()),
            Var::BinaryRemoteAddr => match self.remote.ip() {
                IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
                IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
            },
            Var::RemotePort => append_port(out, self.remote.port()),
            Var::ServerAddr => append_ip(out, self.local.ip()),
            Var::ServerPort => append_port(out, self.local.port()),
            _ => {}
        }
    }
}

/// The variables of one http request.
pub struct RequestVars<'a, 'h, 'b> {
    pub req: &'a RequestHead<'h, 'b>,
    pub conn: ConnVars,
    /// `$uri`: the normalized path (`%XX` decoded, slashes merged, dot segments resolved), as locations match.
    pub uri: &'a [u8],
    /// `$proxy_host`: the upstream's name.
    pub proxy_host: &'a str,
}

impl VarSource for RequestVars<'_, '_, '_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        let req = self.req;
        match var {
            Var::RequestUri => out.extend_from_slice(req.target.as_bytes()),
            Var::Uri => out.extend_from_slice(self.uri),
            Var::Args => out.extend_from_slice(req.args().unwrap_or("").as_bytes()),
            Var::Host => match req.host {
                Some(h) => out.extend(h.iter().map(u8::to_ascii_lowercase)),
                None => append_ip(out, self.conn.local.ip()),
            },
            Var::RequestMethod => out.extend_from_slice(req.method.as_bytes()),
            Var::Scheme => out.extend_from_slice(b"http"),
            Var::ProxyHost => out.extend_from_slice(self.proxy_host.as_bytes()),
            Var::ProxyAddXForwardedFor => {
                // every X-Forwarded-For line, in order, as nginx 1.22 joins them
                for h in req
                    .headers
                    .iter()
                    .filter(|h| h.name.eq_ignore_ascii_case("x-forwarded-for"))
                {
                    out.extend_from_slice(h.value);
                    out.extend_from_slice(b", ");
                }
                append_ip(out, self.conn.remote.ip());
            }
            Var::Http(name) => out.extend_from_slice(req.header(name).unwrap_or(b"")),
            Var::Arg(name) => out.extend_from_slice(arg(req.args().unwrap_or(""), name).as_bytes()),
            Var::Cookie(name) => out.extend_from_slice(cookie(req.header("cookie").unwrap_or(b""), name)),
            Var::RemoteAddr | Var::BinaryRemoteAddr | Var::RemotePort | Var::ServerAddr | Var::ServerPort => {
                self.conn.append(var, out)
            }
        }
    }
}

/// The value of query argument `name` (case-insensitive name, as nginx), empty when absent.
fn arg<'a>(args: &'a str, name: &str) -> &'a str {
    args.split('&')
        .find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k.eq_ignore_ascii_case(name).then_some(v)
        })
        .unwrap_or("")
}

/// The value of cookie `name`, empty when absent. Names compare without case, as nginx's
/// `ngx_http_parse_multi_header_lines` does (and `$cookie_NAME` is stored lower-case).
fn cookie<'a>(header: &'a [u8], name: &str) -> &'a [u8] {
    header
        .split(|&c| c == b';')
        .find_map(|kv| {
            let kv = kv.trim_ascii();
            let eq = kv.iter().position(|&c| c == b'=')?;
            kv[..eq].eq_ignore_ascii_case(name.as_bytes()).then(|| &kv[eq + 1..])
        })
        .unwrap_or(b"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::KeyTemplate;
    use crate::http::request::{parse_request, MAX_HEADERS};

    /// Evaluates `template` over the request `raw` from client 10.1.2.3:5555 to 127.0.0.1:8080.
    fn eval(raw: &[u8], template: &str) -> Vec<u8> {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let req = parse_request(raw, &mut hs).unwrap().unwrap();
        let mut buf = Vec::new();
        let uri = req.uri(&mut buf).unwrap();
        let vars = RequestVars {
            req: &req,
            uri,
            conn: ConnVars {
                remote: "10.1.2.3:5555".parse().unwrap(),
                local: "127.0.0.1:8080".parse().unwrap(),
            },
            proxy_host: "backend",
        };
        let mut out = Vec::new();
        KeyTemplate::compile(template).unwrap().eval_into(&vars, &mut out);
        out
    }

    #[test]
    fn request_variables() {
        let raw =
            b"GET /p?a=1&Key=v2 HTTP/1.1\r\nHost: Ex.COM:80\r\nX-Forwarded-For: 1.1.1.1\r\nCookie: s=abc; t=9\r\n\r\n";
        let t = "$host|$uri|$args|$arg_key|$cookie_t|$http_x_forwarded_for|$remote_addr:$remote_port|$server_port|$proxy_host";
        assert_eq!(
            String::from_utf8(eval(raw, t)).unwrap(),
            "ex.com|/p|a=1&Key=v2|v2|9|1.1.1.1|10.1.2.3:5555|8080|backend"
        );
        assert_eq!(eval(raw, "$proxy_add_x_forwarded_for"), b"1.1.1.1, 10.1.2.3");
    }

    #[test]
    fn uri_is_the_normalized_path_as_nginx() {
        let raw = b"GET /a//b/./c/../d%41?x=%41 HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(
            eval(raw, "$uri|$args|$request_uri"),
            b"/a/b/dA|x=%41|/a//b/./c/../d%41?x=%41"
        );
    }

    #[test]
    fn cookie_names_compare_without_case() {
        assert_eq!(cookie(b"SessionID=a1; t=9", "sessionid"), b"a1");
        assert_eq!(cookie(b"a=1;  B=2", "b"), b"2");
        assert_eq!(cookie(b"a=1", "b"), b"");
        assert_eq!(
            eval(b"GET / HTTP/1.1\r\nHost: a\r\nCookie: SID=xyz\r\n\r\n", "$cookie_SID"),
            b"xyz"
        );
    }

    #[test]
    fn proxy_add_x_forwarded_for_joins_every_line() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2\r\n\r\n";
        assert_eq!(eval(raw, "$proxy_add_x_forwarded_for"), b"1.1.1.1, 2.2.2.2, 10.1.2.3");
    }
}
