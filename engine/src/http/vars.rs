//! Variable sources for key templates and `proxy_set_header` values: one over a parsed request, one over a bare
//! connection (stream); both write into reused buffers, never allocating once they have grown.

use crate::config::key::{Var, VarSource};
use crate::config::map::Map;
use crate::config::proxy_tlv::TlvName;
use crate::config::regex::Captures;
use crate::http::proxy_protocol::ProxyAddrs;
use crate::http::request::RequestHead;
use crate::http::var_cache::VarCache;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

/// Writes `ip` as text (no allocation beyond `out`'s growth).
fn append_ip(out: &mut Vec<u8>, ip: IpAddr) {
    let _ = write!(out, "{ip}");
}

/// Writes the address part of `addr` as nginx's `$remote_addr` and `$server_addr` have it: the IP, or `unix:PATH`
/// for a unix-domain socket (`unix:` for a client, whose address has no path).
pub fn append_addr_ip(out: &mut Vec<u8>, addr: &SocketAddr) {
    match crate::config::unix_addr::path_of(addr) {
        None => append_ip(out, addr.ip()),
        Some(path) => {
            out.extend_from_slice(b"unix:");
            out.extend_from_slice(path.as_bytes());
        }
    }
}

fn append_port(out: &mut Vec<u8>, port: u16) {
    crate::http::pages::append_decimal(out, u64::from(port));
}

/// The variables of a connection: addresses and ports (the stream module's `$remote_addr`, `$server_port`...).
#[derive(Debug, Clone, Copy)]
pub struct ConnVars {
    /// `$remote_addr`: the client, after `set_real_ip_from` if it applied.
    pub remote: SocketAddr,
    pub local: SocketAddr,
    /// `$realip_remote_addr`: the connection's own peer.
    pub peer: SocketAddr,
}

/// What a connection's PROXY protocol header said (`$proxy_protocol_*`): nothing without one.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProxyVars<'a> {
    /// The header's addresses, if its listener takes one and it carried them.
    pub addrs: Option<&'a ProxyAddrs>,
    /// Its v2 TLVs.
    pub tlvs: &'a [u8],
}

impl ProxyVars<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        let a = self.addrs;
        match var {
            Var::ProxyProtocolAddr => out.extend_from_slice(a.map_or(&[][..], |p| p.src.as_bytes())),
            Var::ProxyProtocolServerAddr => out.extend_from_slice(a.map_or(&[][..], |p| p.dst.as_bytes())),
            Var::ProxyProtocolPort => append_nonzero_port(out, a.map_or(0, |p| p.src_port)),
            Var::ProxyProtocolServerPort => append_nonzero_port(out, a.map_or(0, |p| p.dst_port)),
            Var::ProxyProtocolTlv(name) => append_tlv(self.tlvs, *name, out),
            _ => {}
        }
    }
}

impl ConnVars {
    /// A connection from `remote` to `local`, with no PROXY protocol header.
    pub fn new(remote: SocketAddr, local: SocketAddr) -> Self {
        ConnVars {
            remote,
            local,
            peer: remote,
        }
    }
}

/// nginx writes a port only when it is not 0.
fn append_nonzero_port(out: &mut Vec<u8>, port: u16) {
    if port != 0 {
        append_port(out, port);
    }
}

/// `$proxy_protocol_tlv_NAME` of a connection whose v2 header left `tlvs` (nginx logs a broken list).
pub fn append_tlv(tlvs: &[u8], name: TlvName, out: &mut Vec<u8>) {
    let start = out.len();
    if let Err(e) = crate::http::proxy_protocol::append_tlv(tlvs, name, out) {
        out.truncate(start);
        crate::log_error!("{e}");
    }
}

/// The machine's host name (nginx's `gethostname()`, lower-cased), read once.
pub fn hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_ascii_lowercase())
            .unwrap_or_else(|_| "localhost".into())
    })
}

/// `$nginx_version`: corelb's own version (nginx's would be `1.x.y`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The variables every module has, whatever it serves: `$hostname`, `$nginx_version`, `$pid`.
fn append_process(var: &Var, out: &mut Vec<u8>) {
    match var {
        Var::Hostname => out.extend_from_slice(hostname().as_bytes()),
        Var::NginxVersion => out.extend_from_slice(VERSION.as_bytes()),
        Var::Pid => crate::http::pages::append_decimal(out, u64::from(std::process::id())),
        _ => {}
    }
}

/// What a stream session's values read: the connection, and the stream block's maps with a cache for them.
pub struct StreamVars<'a> {
    pub conn: ConnVars,
    pub proxy: ProxyVars<'a>,
    pub maps: &'a [Map],
    pub cache: &'a VarCache,
    /// The session's TLS handshake (`listen ... ssl`) and its `ssl_preread` facts.
    pub tls: Option<&'a crate::tls::TlsFacts>,
    pub preread: Option<&'a crate::tls::preread::Preread>,
}

/// What nginx's named-capture variables of a regex `server_name` read ([`Var::ServerCapture`]).
#[derive(Clone, Copy, Default)]
pub struct ServerMatch<'a> {
    /// The group number of each of the http block's named groups (none: not a regex match).
    pub groups: &'a [Option<usize>],
    pub caps: Option<&'a Captures>,
    /// The request's last location, `rewrite` or `if` regex match, once routed (nginx's `r->captures`).
    pub last: Option<&'a Captures>,
}

impl ServerMatch<'_> {
    fn append(&self, id: usize, out: &mut Vec<u8>) {
        if let (Some(Some(g)), Some(caps)) = (self.groups.get(id), self.caps) {
            out.extend_from_slice(caps.group(*g));
        }
    }

    /// `$1`..`$9` ([`Var::Capture`]) and named groups ([`Var::RegexCapture`]) of the last regex that matched: a
    /// location's, `rewrite`'s or `if`'s, else the regex server name's.
    pub fn append_capture(&self, var: &Var, out: &mut Vec<u8>) {
        let last = self.last.filter(|c| !c.is_empty());
        match var {
            Var::Capture(n) => {
                if let Some(caps) = last.or(self.caps) {
                    out.extend_from_slice(caps.group(*n));
                }
            }
            Var::RegexCapture(name) => {
                if let Some(text) = last.and_then(|c| c.named(name)) {
                    out.extend_from_slice(text);
                }
            }
            _ => {}
        }
    }
}

impl VarSource for StreamVars<'_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Map(i) => self.cache.append_map(self.maps, *i, self, out),
            Var::Msec | Var::TimeLocal | Var::TimeIso8601 => self.cache.append_time(var, out),
            Var::ProxyProtocolAddr
            | Var::ProxyProtocolPort
            | Var::ProxyProtocolServerAddr
            | Var::ProxyProtocolServerPort
            | Var::ProxyProtocolTlv(_) => self.proxy.append(var, out),
            Var::SslProtocol
            | Var::SslCipher
            | Var::SslServerName
            | Var::SslSessionReused
            | Var::SslSessionId
            | Var::SslAlpnProtocol => crate::tls::facts::append(self.tls, var, out),
            Var::SslClient(v) => crate::tls::client_vars::append(self.tls, *v, out),
            Var::SslPreread(v) => crate::tls::preread::append(self.preread, *v, out),
            _ => self.conn.append(var, out),
        }
    }
}

impl VarSource for ConnVars {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Hostname | Var::NginxVersion | Var::Pid => append_process(var, out),
            Var::RemoteAddr => append_addr_ip(out, &self.remote),
            // nginx: a unix-domain client's binary address is its text (`unix:`)
            Var::BinaryRemoteAddr if crate::config::unix_addr::is_unix(&self.remote) => {
                append_addr_ip(out, &self.remote)
            }
            Var::BinaryRemoteAddr => match self.remote.ip() {
                IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
                IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
            },
            Var::RemotePort => append_nonzero_port(out, self.remote.port()),
            Var::RealipRemoteAddr => append_addr_ip(out, &self.peer),
            Var::RealipRemotePort => append_nonzero_port(out, self.peer.port()),
            Var::ServerAddr => append_addr_ip(out, &self.local),
            // a unix-domain listener has no port: nginx writes nothing
            Var::ServerPort => append_nonzero_port(out, self.local.port()),
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
    /// What routing knows of the request beyond its head.
    pub ext: RequestExt<'a>,
}

/// The request's place: its server, its connection, and the block's maps with the request's cache.
#[derive(Clone, Copy)]
pub struct RequestExt<'a> {
    /// `$server_name`: the server's first name.
    pub server_name: &'a str,
    /// `$connection`.
    pub connection: u64,
    /// `$connection_requests`: this request's number on its connection.
    pub requests: u64,
    /// When the connection was accepted (`$connection_time`).
    pub opened: std::time::Instant,
    pub maps: &'a [Map],
    pub cache: &'a VarCache,
    /// The connection's PROXY protocol header.
    pub proxy: ProxyVars<'a>,
    /// The regex server name the host matched: its groups by the block's named groups, and their text.
    pub server_match: ServerMatch<'a>,
    /// `$request_body`: the body when it is whole in the client buffer, else empty.
    pub body: &'a [u8],
    /// The connection's TLS handshake (`$https`, `$ssl_*`, `$scheme`); none on a plain connection.
    pub tls: Option<&'a crate::tls::TlsFacts>,
    /// `$http2` of an HTTP/2 stream (`h2`, `h2c`): `$server_protocol` is then `HTTP/2.0`.
    pub http2: Option<&'static str>,
    /// The upstream's variables (`$upstream_*`) of a request routed again after its upstream answered (an error
    /// page, an `X-Accel-Redirect`); `None` on a request's first routing, where they are empty.
    pub upstream: Option<&'a dyn VarSource>,
}

impl<'a> RequestExt<'a> {
    /// This place, with `caps` as the request's last regex match ([`ServerMatch::last`]).
    pub fn with_captures(self, caps: &'a Captures) -> RequestExt<'a> {
        RequestExt {
            server_match: ServerMatch {
                last: Some(caps),
                ..self.server_match
            },
            ..self
        }
    }
}

impl RequestVars<'_, '_, '_> {
    /// Whether nginx finds `var` set for this request (an access log writes `-` for one that is not): a header
    /// variable needs its header, `$args` a `?`; an argument or cookie variable a non-empty value, and
    /// `$remote_user` a Basic user (both checked by the caller on the value).
    pub fn is_set(&self, var: &Var) -> bool {
        let req = self.req;
        match var {
            Var::Http(name) => req.header(name).is_some(),
            Var::Args => req.args().is_some(),
            Var::ContentLength => req.header("content-length").is_some(),
            Var::ContentType => req.header("content-type").is_some(),
            // a named group nginx's last match did not set
            Var::RegexCapture(name) => {
                let last = self.ext.server_match.last;
                last.is_some_and(|c| c.named(name).is_some())
            }
            // nginx's ssl variables are not found on a plain connection (`$https` is empty there, but found)
            Var::SslProtocol
            | Var::SslCipher
            | Var::SslSessionReused
            | Var::SslSessionId
            | Var::SslAlpnProtocol
            | Var::SslCiphers => self.ext.tls.is_some(),
            Var::SslServerName => self.ext.tls.is_some_and(|t| !t.server_name.is_empty()),
            Var::SslClient(_) => self.ext.tls.is_some(),
            _ => true,
        }
    }
}

impl VarSource for RequestVars<'_, '_, '_> {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        let req = self.req;
        match var {
            Var::RequestUri => out.extend_from_slice(req.target.as_bytes()),
            Var::Uri => out.extend_from_slice(self.uri),
            // up to a `#`, as nginx's parser ends the arguments there
            Var::Args => out.extend_from_slice(req.query().as_bytes()),
            Var::Host => match req.host {
                Some(h) => out.extend(h.iter().map(u8::to_ascii_lowercase)),
                None => append_addr_ip(out, &self.conn.local),
            },
            Var::RequestMethod => out.extend_from_slice(req.method.as_bytes()),
            Var::Scheme => out.extend_from_slice(if self.ext.tls.is_some() { b"https" } else { b"http" }),
            Var::Https
            | Var::SslProtocol
            | Var::SslCipher
            | Var::SslServerName
            | Var::SslSessionReused
            | Var::SslSessionId
            | Var::SslAlpnProtocol
            | Var::SslCiphers => crate::tls::facts::append(self.ext.tls, var, out),
            Var::SslClient(v) => crate::tls::client_vars::append(self.ext.tls, *v, out),
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
                append_addr_ip(out, &self.conn.remote);
            }
            Var::Http(name) => out.extend_from_slice(req.header(name).unwrap_or(b"")),
            Var::Arg(name) => out.extend_from_slice(arg(req.args().unwrap_or(""), name).as_bytes()),
            Var::Cookie(name) => out.extend_from_slice(cookie(req.header("cookie").unwrap_or(b""), name)),
            Var::IsArgs => {
                // nginx's: `?` when `$args` is not empty
                if !req.query().is_empty() {
                    out.push(b'?');
                }
            }
            Var::ContentLength => out.extend_from_slice(req.header("content-length").unwrap_or_default()),
            Var::ContentType => out.extend_from_slice(req.header("content-type").unwrap_or_default()),
            Var::Request => {
                out.extend_from_slice(req.method.as_bytes());
                out.push(b' ');
                out.extend_from_slice(req.target.as_bytes());
                out.push(b' ');
                out.extend_from_slice(protocol(req.version_11, self.ext.http2));
            }
            Var::ServerProtocol => out.extend_from_slice(protocol(req.version_11, self.ext.http2)),
            Var::Http2 => out.extend_from_slice(self.ext.http2.unwrap_or("").as_bytes()),
            Var::ServerName => out.extend_from_slice(self.ext.server_name.as_bytes()),
            Var::RequestId => self.ext.cache.append_request_id(out),
            Var::Connection => crate::http::pages::append_decimal(out, self.ext.connection),
            Var::ConnectionRequests => crate::http::pages::append_decimal(out, self.ext.requests),
            Var::ConnectionTime => {
                // nginx's "%T.%03M"
                let ms = self.ext.opened.elapsed().as_millis();
                crate::http::pages::append_decimal(out, u64::try_from(ms / 1000).unwrap_or(u64::MAX));
                out.push(b'.');
                let rest = (ms % 1000) as u16;
                out.extend_from_slice(&[
                    b'0' + (rest / 100) as u8,
                    b'0' + (rest / 10 % 10) as u8,
                    b'0' + (rest % 10) as u8,
                ]);
            }
            Var::RemoteUser => {
                let start = out.len();
                if !crate::http::basic_auth::basic_user(req.header("authorization").unwrap_or_default(), out) {
                    out.truncate(start);
                }
            }
            Var::Msec | Var::TimeLocal | Var::TimeIso8601 => self.ext.cache.append_time(var, out),
            Var::Map(i) => self.ext.cache.append_map(self.ext.maps, *i, self, out),
            Var::ProxyProtocolAddr
            | Var::ProxyProtocolPort
            | Var::ProxyProtocolServerAddr
            | Var::ProxyProtocolServerPort
            | Var::ProxyProtocolTlv(_) => self.ext.proxy.append(var, out),
            Var::ServerCapture(id) => self.ext.server_match.append(*id, out),
            Var::Capture(_) | Var::RegexCapture(_) => self.ext.server_match.append_capture(var, out),
            Var::User(i) => self.ext.cache.users.append(*i, out),
            Var::RequestBody => out.extend_from_slice(self.ext.body),
            Var::LimitRate => self.ext.cache.users.append_limit_rate(out),
            Var::LimitReqStatus => self.ext.cache.limits.append_req(out),
            Var::LimitConnStatus => self.ext.cache.limits.append_conn(out),
            Var::UpstreamHttp(_) | Var::UpstreamCookie(_) => {
                if let Some(u) = self.ext.upstream {
                    u.append(var, out);
                }
            }
            v if v.is_upstream_try() && self.ext.upstream.is_some() => {
                if let Some(u) = self.ext.upstream {
                    u.append(var, out);
                }
            }
            // Known only once the answer is done (an access log reads them from its record); `$request_body` and
            // captures outside a map are refused at load.
            _ => self.conn.append(var, out),
        }
    }
}

fn protocol(version_11: bool, http2: Option<&str>) -> &'static [u8] {
    if http2.is_some() {
        b"HTTP/2.0"
    } else if version_11 {
        b"HTTP/1.1"
    } else {
        b"HTTP/1.0"
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
        let mut cache = VarCache::default();
        cache.begin(0);
        let vars = RequestVars {
            req: &req,
            uri,
            conn: ConnVars::new("10.1.2.3:5555".parse().unwrap(), "127.0.0.1:8080".parse().unwrap()),
            proxy_host: "backend",
            ext: RequestExt {
                server_name: "example.org",
                connection: 7,
                requests: 3,
                opened: std::time::Instant::now(),
                maps: &[],
                cache: &cache,
                proxy: ProxyVars::default(),
                server_match: ServerMatch::default(),
                body: b"",
                tls: None,
                http2: None,
                upstream: None,
            },
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
    fn request_line_server_and_connection_variables() {
        let raw = b"POST /p?a=1 HTTP/1.0\r\nHost: h\r\nContent-Type: text/x\r\nContent-Length: 3\r\n\r\n";
        let t = "$request|$server_protocol|$is_args|$content_type|$content_length|$server_name|$connection|\
                 $connection_requests|$nginx_version";
        assert_eq!(
            String::from_utf8(eval(raw, t)).unwrap(),
            format!("POST /p?a=1 HTTP/1.0|HTTP/1.0|?|text/x|3|example.org|7|3|{VERSION}")
        );
        assert_eq!(
            eval(b"GET /p HTTP/1.1\r\nHost: h\r\n\r\n", "[$is_args$content_type]"),
            b"[]"
        );
        assert_eq!(
            eval(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "$hostname"),
            hostname().as_bytes()
        );
        assert_eq!(
            eval(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "$pid"),
            std::process::id().to_string().as_bytes()
        );
        let user = eval(
            b"GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n\r\n",
            "[$remote_user]",
        );
        assert_eq!(user, b"[alice]");
        assert_eq!(
            eval(
                b"GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Basic OnB3\r\n\r\n",
                "[$remote_user]"
            ),
            b"[]"
        );
    }

    #[test]
    fn request_id_and_times_hold_for_the_request() {
        let id = eval(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", "$request_id $request_id");
        let (a, b) = id.split_at(32);
        assert_eq!(&b[1..], a, "one id in every place of a request");
        assert!(a.iter().all(u8::is_ascii_hexdigit));
        let times = String::from_utf8(eval(
            b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
            "$time_iso8601|$msec|$time_local",
        ))
        .unwrap();
        let parts: Vec<&str> = times.split('|').collect();
        assert_eq!(parts[0].len(), "1970-09-28T12:00:00+06:00".len(), "{times}");
        assert_eq!(parts[1].split_once('.').map(|(_, ms)| ms.len()), Some(3), "{times}");
        assert_eq!(parts[2].len(), "28/Sep/1970:12:00:00 +0600".len(), "{times}");
    }

    #[test]
    fn stream_values_read_the_stream_maps() {
        use crate::config::map::Map;
        let mut m = Map::new("k", KeyTemplate::compile("$remote_port").unwrap());
        let v = m.add_value(KeyTemplate::compile("port-$server_port").unwrap());
        m.add_key("5555", v, false).unwrap();
        let maps = [m];
        let mut cache = VarCache::default();
        cache.begin(1);
        let vars = StreamVars {
            conn: ConnVars::new("10.1.2.3:5555".parse().unwrap(), "127.0.0.1:8080".parse().unwrap()),
            maps: &maps,
            cache: &cache,
            proxy: ProxyVars::default(),
            tls: None,
            preread: None,
        };
        let t = KeyTemplate::compile_with("$k|$hostname", &|n| {
            (n == "k").then_some(Var::Map(0)).or_else(|| Var::from_name(n))
        })
        .unwrap();
        let mut out = Vec::new();
        t.eval_into(&vars, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), format!("port-8080|{}", hostname()));
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
