//! nginx's choice to keep a client connection after a request (`ngx_http_update_location_config`): the
//! location's `keepalive_timeout`, `keepalive_requests`, `keepalive_time` and `keepalive_disable`; and the
//! `Connection` line every answer carries for it (nginx's header filter), with `keepalive_timeout`'s
//! `Keep-Alive: timeout=N` line.

use super::request::RequestHead;
use crate::config::model::{ClientConf, KeepaliveHeader, KEEPALIVE_DISABLE_MSIE6, KEEPALIVE_DISABLE_SAFARI};
use std::time::Duration;

/// Whether a connection stays open after an answer, and the lines that say so: `Connection: close`, or
/// `Connection: keep-alive` and the location's `Keep-Alive: timeout=N` (rendered at load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    keep: bool,
    header: KeepaliveHeader,
}

impl Connection {
    /// The connection closes after the answer.
    pub const CLOSE: Connection = Connection {
        keep: false,
        header: KeepaliveHeader::NONE,
    };
    /// It stays open, with no `Keep-Alive` line.
    pub const KEEP: Connection = Connection {
        keep: true,
        header: KeepaliveHeader::NONE,
    };

    /// It stays open; `header` follows the `Connection` line.
    pub fn kept(header: KeepaliveHeader) -> Connection {
        Connection { keep: true, header }
    }

    /// Whether the connection stays open.
    pub fn keeps(self) -> bool {
        self.keep
    }

    /// This, or [`Connection::CLOSE`] unless `still` (the body was read, the client is still there...).
    pub fn and(self, still: bool) -> Connection {
        if still {
            self
        } else {
            Connection::CLOSE
        }
    }

    /// Appends the lines (each with its CRLF).
    pub fn write(self, out: &mut Vec<u8>) {
        if self.keep {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
            if self.header.secs() != 0 {
                out.extend_from_slice(b"Keep-Alive: timeout=");
                super::pages::append_decimal(out, u64::from(self.header.secs()));
                out.extend_from_slice(b"\r\n");
            }
        } else {
            out.extend_from_slice(b"Connection: close\r\n");
        }
    }
}

/// The connection decision for a request whose location's settings are `client` (see [`keeps`]).
pub fn connection(head: &RequestHead<'_, '_>, client: &ClientConf, served: u64, open_for: Duration) -> Connection {
    if keeps(head, client, served, open_for) {
        Connection::kept(client.keepalive_header)
    } else {
        Connection::CLOSE
    }
}

/// Whether the connection may serve another request after this one: `served` requests before it, open for
/// `open_for`.
pub fn keeps(head: &RequestHead<'_, '_>, client: &ClientConf, served: u64, open_for: Duration) -> bool {
    head.keepalive
        && !client.keepalive_timeout.is_zero()
        && served.saturating_add(1) < client.keepalive_requests
        && open_for <= client.keepalive_time
        && !disabled_for(head, client.keepalive_disable)
}

/// `keepalive_disable msie6|safari`: the browsers nginx does not keep connections for.
fn disabled_for(head: &RequestHead<'_, '_>, mask: u8) -> bool {
    // the default (`msie6`) only matters for a POST: no header is looked at for anything else
    let msie6_post = mask & KEEPALIVE_DISABLE_MSIE6 != 0 && head.method == "POST";
    if !msie6_post && mask & KEEPALIVE_DISABLE_SAFARI == 0 {
        return false;
    }
    let Some(ua) = head.header("user-agent") else {
        return false;
    };
    let browser = Browser::of(ua);
    (browser.msie6 && head.method == "POST" && mask & KEEPALIVE_DISABLE_MSIE6 != 0)
        || (browser.safari && mask & KEEPALIVE_DISABLE_SAFARI != 0)
}

/// What nginx reads off a `User-Agent` (`ngx_http_process_user_agent`), as far as keepalive needs it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Browser {
    pub(crate) msie6: bool,
    safari: bool,
}

impl Browser {
    pub(crate) fn of(ua: &[u8]) -> Browser {
        let mut b = Browser::default();
        let mut msie = false;
        if let Some(at) = find(ua, b"MSIE ") {
            // nginx: only when at least 8 bytes follow the start of "MSIE "
            if at + 7 < ua.len() {
                msie = true;
                if ua.get(at + 6) == Some(&b'.') {
                    b.msie6 = match ua.get(at + 5) {
                        Some(b'4' | b'5') => true,
                        Some(b'6') => ua.get(at + 8..).is_none_or(|rest| find(rest, b"SV1").is_none()),
                        _ => false,
                    };
                }
            }
        }
        let opera = find(ua, b"Opera").is_some();
        if opera {
            b.msie6 = false;
        }
        if !msie && !opera && find(ua, b"Gecko/").is_none() && find(ua, b"Chrome/").is_none() {
            b.safari = find(ua, b"Safari/").is_some() && find(ua, b"Mac OS X").is_some();
        }
        b
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{parse_request, MAX_HEADERS};

    fn browser(ua: &str) -> Browser {
        Browser::of(ua.as_bytes())
    }

    #[test]
    fn user_agents_as_nginx_reads_them() {
        assert!(browser("MSIE 5.0").msie6);
        assert!(browser("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)").msie6);
        assert!(!browser("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)").msie6);
        assert!(!browser("MSIE 7.0").msie6);
        assert!(!browser("MSIE 5.").msie6, "too short after MSIE");
        assert!(!browser("Opera MSIE 5.0").msie6);
        assert!(browser("Mac OS X Safari/7534.48.3").safari);
        assert!(!browser("Mac OS X Chrome/1 Safari/7534.48.3").safari);
        assert!(!browser("Safari/7534.48.3").safari, "needs Mac OS X");
        assert!(!browser("MSIE 5.0 Mac OS X Safari/1").safari);
    }

    fn keeps_for(raw: &str, client: &ClientConf, served: u64, open_for: Duration) -> bool {
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = parse_request(raw.as_bytes(), &mut hs).unwrap().unwrap();
        keeps(&head, client, served, open_for)
    }

    #[test]
    fn connection_lines_as_nginx_header_filter() {
        let mut out = Vec::new();
        Connection::kept(KeepaliveHeader::new(9)).write(&mut out);
        assert_eq!(out, b"Connection: keep-alive\r\nKeep-Alive: timeout=9\r\n");
        out.clear();
        Connection::kept(KeepaliveHeader::new(0)).write(&mut out);
        assert_eq!(out, b"Connection: keep-alive\r\n", "0: no Keep-Alive line");
        out.clear();
        Connection::kept(KeepaliveHeader::new(9)).and(false).write(&mut out);
        assert_eq!(out, b"Connection: close\r\n");
        assert!(!Connection::KEEP.and(false).keeps() && Connection::KEEP.and(true).keeps());
        let mut longest = Vec::new();
        Connection::kept(KeepaliveHeader::new(u64::MAX)).write(&mut longest);
        let expected = format!("Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n", u32::MAX);
        assert_eq!(longest, expected.as_bytes(), "held in four bytes, saturated");
        let header = ClientConf {
            keepalive_header: KeepaliveHeader::new(5),
            ..ClientConf::default()
        };
        let mut hs = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let head = parse_request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &mut hs)
            .unwrap()
            .unwrap();
        assert_eq!(
            connection(&head, &header, 0, Duration::ZERO),
            Connection::kept(KeepaliveHeader::new(5))
        );
        assert_eq!(connection(&head, &header, 999, Duration::ZERO), Connection::CLOSE);
    }

    #[test]
    fn location_settings_decide() {
        let d = ClientConf::default();
        let get = "GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: MSIE 5.0\r\n\r\n";
        let post = "POST / HTTP/1.1\r\nHost: a\r\nUser-Agent: MSIE 5.0\r\nContent-Length: 0\r\n\r\n";
        let safari = "GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: Mac OS X Safari/7534.48.3\r\n\r\n";
        let z = Duration::ZERO;
        assert!(keeps_for(get, &d, 0, z));
        assert!(!keeps_for(post, &d, 0, z), "msie6 by default");
        assert!(keeps_for(safari, &d, 0, z));
        let safari_off = ClientConf {
            keepalive_disable: KEEPALIVE_DISABLE_SAFARI,
            ..ClientConf::default()
        };
        assert!(!keeps_for(safari, &safari_off, 0, z));
        assert!(keeps_for(post, &safari_off, 0, z));
        let none = ClientConf {
            keepalive_disable: 0,
            ..ClientConf::default()
        };
        assert!(keeps_for(post, &none, 0, z));
        assert!(
            !keeps_for(get, &d, 999, z),
            "keepalive_requests 1000: the 1000th closes"
        );
        assert!(keeps_for(get, &d, 998, z));
        let short = ClientConf {
            keepalive_time: Duration::from_secs(1),
            ..ClientConf::default()
        };
        assert!(keeps_for(get, &short, 0, Duration::from_millis(1000)));
        assert!(!keeps_for(get, &short, 0, Duration::from_millis(1001)));
        let zero = ClientConf {
            keepalive_timeout: Duration::ZERO,
            ..ClientConf::default()
        };
        assert!(!keeps_for(get, &zero, 0, z));
        assert!(!keeps_for("GET / HTTP/1.0\r\n\r\n", &d, 0, z));
    }
}
