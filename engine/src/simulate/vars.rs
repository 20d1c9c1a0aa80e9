//! A simulated request's variables (`$remote_addr`, `$request_uri`, `$arg_X`, `$host`, ...) and its key bytes.

use crate::config::key::{Var, VarSource};
use std::io::Write;
use std::net::IpAddr;

/// What a simulated request carries: the client address, the method, the request URI (path and query) and the Host
/// header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub remote: IpAddr,
    /// The request method (`GET` unless a trace line says `method=`).
    pub method: String,
    /// As sent on the request line: `/path?query`.
    pub uri: String,
    /// The `Host` header as sent, if any.
    pub host: Option<String>,
}

impl Request {
    /// A request from `remote` for `uri` without a Host header.
    pub fn new(remote: IpAddr, uri: impl Into<String>) -> Self {
        Request {
            remote,
            method: "GET".into(),
            uri: uri.into(),
            host: None,
        }
    }

    /// POST, LOCK or PATCH: nginx does not send such a request to a next peer once a peer got it, unless
    /// `proxy_next_upstream non_idempotent`.
    pub fn non_idempotent(&self) -> bool {
        matches!(self.method.as_str(), "POST" | "LOCK" | "PATCH")
    }

    /// The path part of the URI as sent.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(self.uri.as_str(), |(p, _)| p)
    }

    /// nginx's `$uri`: the path with `%XX` decoded, slashes merged and dot segments resolved; an error for a path
    /// nginx refuses with 400 (above the root, a bad escape).
    pub fn normalized_path(&self) -> Result<Vec<u8>, crate::http::uri::UriError> {
        let raw = self.uri.as_bytes();
        if !crate::http::uri::needs_normalizing(raw) {
            return Ok(self.path().as_bytes().to_vec());
        }
        let mut normal = Vec::new();
        crate::http::uri::normalize(raw, &mut normal)?;
        Ok(normal)
    }

    /// The query part of the URI (nginx's `$args`), empty without `?`.
    pub fn args(&self) -> &str {
        self.uri.split_once('?').map_or("", |(_, a)| a)
    }

    /// nginx's `$host`: the Host header lower-cased, without its port; empty without a Host header.
    pub fn host_name(&self) -> String {
        let Some(h) = self.host.as_deref() else {
            return String::new();
        };
        let name = if h.starts_with('[') {
            h.find(']').map_or(h, |end| &h[..=end])
        } else {
            h.rsplit_once(':').map_or(h, |(name, _)| name)
        };
        name.to_ascii_lowercase()
    }
}

/// nginx's `$arg_NAME`: the value of the first `NAME=` argument (name compared case-insensitively) in `args`.
pub fn arg<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    args.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

impl VarSource for Request {
    fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::RemoteAddr | Var::ProxyAddXForwardedFor => {
                // Writing to a Vec cannot fail.
                let _ = write!(out, "{}", self.remote);
            }
            Var::BinaryRemoteAddr => match self.remote {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            },
            Var::RequestUri => out.extend_from_slice(self.uri.as_bytes()),
            // A target nginx refuses never reaches a balancer (see `Simulator::run`); its raw path is a fallback.
            Var::Uri => match self.normalized_path() {
                Ok(normal) => out.extend_from_slice(&normal),
                Err(_) => out.extend_from_slice(self.path().as_bytes()),
            },
            Var::Args => out.extend_from_slice(self.args().as_bytes()),
            Var::Host => out.extend_from_slice(self.host_name().as_bytes()),
            Var::RequestMethod => out.extend_from_slice(b"GET"),
            Var::Scheme => out.extend_from_slice(b"http"),
            Var::Http(name) if name == "host" => {
                out.extend_from_slice(self.host.as_deref().unwrap_or("").as_bytes());
            }
            Var::Arg(name) => {
                if let Some(v) = arg(self.args(), name) {
                    out.extend_from_slice(v.as_bytes());
                }
            }
            // Not known to a simulated request: unset, as nginx leaves a missing value.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::key::KeyTemplate;

    fn req(uri: &str, host: Option<&str>) -> Request {
        Request {
            remote: "127.0.3.4".parse().unwrap(),
            method: "GET".into(),
            uri: uri.into(),
            host: host.map(String::from),
        }
    }

    fn eval(t: &str, r: &Request) -> String {
        let mut out = Vec::new();
        KeyTemplate::compile(t).unwrap().eval_into(r, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn evaluates_request_variables() {
        let r = req("/a/b?k=v1&K2=x&k=v2", Some("Example.COM:8080"));
        assert_eq!(eval("$remote_addr", &r), "127.0.3.4");
        assert_eq!(eval("$request_uri", &r), "/a/b?k=v1&K2=x&k=v2");
        assert_eq!(eval("$uri|$args", &r), "/a/b|k=v1&K2=x&k=v2");
        assert_eq!(eval("$arg_k,$arg_k2,$arg_none", &r), "v1,x,");
        assert_eq!(eval("$host$request_uri", &r), "example.com/a/b?k=v1&K2=x&k=v2");
        assert_eq!(eval("$http_host", &r), "Example.COM:8080");
        assert_eq!(eval("$cookie_x$remote_port", &r), "");
    }

    #[test]
    fn host_name_handles_ipv6_and_absence() {
        assert_eq!(req("/", Some("[::1]:80")).host_name(), "[::1]");
        assert_eq!(req("/", Some("[::1]")).host_name(), "[::1]");
        assert_eq!(req("/", Some("a.example")).host_name(), "a.example");
        assert_eq!(req("/", None).host_name(), "");
        assert_eq!(req("/p", None).args(), "");
    }

    #[test]
    fn arg_needs_an_equals_sign_and_a_whole_name() {
        assert_eq!(arg("kk=1&k=2", "k"), Some("2"));
        assert_eq!(arg("k&k=3", "k"), Some("3"));
        assert_eq!(arg("k=", "k"), Some(""));
        assert_eq!(arg("", "k"), None);
    }

    #[test]
    fn ip_hash_key_takes_three_octets_of_ipv4() {
        let mut out = Vec::new();
        crate::balance::ip_hash::key_into("192.168.1.10".parse().unwrap(), &mut out);
        assert_eq!(out, [192, 168, 1]);
        crate::balance::ip_hash::key_into("::1".parse().unwrap(), &mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(out[15], 1);
    }
}
