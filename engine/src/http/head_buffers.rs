//! nginx's request-head buffers replayed over the bytes of a head: the first `client_header_buffer_size` (1k)
//! buffer, then up to NUMBER `large_client_header_buffers` of SIZE, each holding whole lines (a line cut at a
//! buffer's end moves to the next buffer). A request line that cannot fit is a 414, a header line or a head that
//! cannot is nginx's 494 (sent as 400 "Request Header Or Cookie Too Large"), exactly where nginx refuses them
//! (`ngx_http_alloc_large_header_buffer`).

use super::Rejection;

pub use crate::config::model::{HeaderBuffers, CLIENT_HEADER_BUFFER};

/// nginx's internal status for a head that does not fit its buffers; the client sees a 400 with its own page.
pub const HEADER_TOO_LARGE: u16 = 494;

/// Where nginx's reading stands: the buffer being filled (its start in the head and its size) and the large
/// buffers taken so far.
struct Reading {
    start: usize,
    size: usize,
    taken: usize,
}

impl Reading {
    /// Moves the line starting at `line` (with `len` bytes so far) to fresh buffers until it fits; false when
    /// nginx would give up (the line alone fills a large buffer, or no large buffer is left).
    fn fit(&mut self, line: usize, len: usize, limits: HeaderBuffers) -> bool {
        while line + len > self.start + self.size {
            let cut = self.start + self.size - line;
            if (cut > 0 && cut >= limits.size) || self.taken >= limits.number {
                return false;
            }
            self.taken += 1;
            self.start = line;
            self.size = limits.size;
        }
        true
    }
}

/// The buffers a head starts with: the first buffer's size (`client_header_buffer_size`) and the large buffers,
/// both the port's default server's (for the request line and the headers before `Host`).
#[derive(Debug, Clone, Copy)]
pub struct FirstBuffers {
    pub size: usize,
    pub large: HeaderBuffers,
}

impl Default for FirstBuffers {
    fn default() -> Self {
        FirstBuffers {
            size: CLIENT_HEADER_BUFFER,
            large: HeaderBuffers::default(),
        }
    }
}

/// Checks the head at the start of `buf` (complete, or the part read so far) against nginx's buffers: `first`
/// those the head starts with, `for_host` the large buffers of the server a host names (the absolute-form
/// target's, else the `Host` header's value).
pub fn check(buf: &[u8], first: FirstBuffers, for_host: impl Fn(&[u8]) -> HeaderBuffers) -> Result<(), Rejection> {
    if buf.len() <= first.size {
        return Ok(());
    }
    let mut limits = first.large;
    let mut host_known = false;
    let mut reading = Reading {
        start: 0,
        size: first.size,
        taken: 0,
    };
    let mut line_start = 0;
    let mut request_line = true;
    while let Some(rest) = buf.get(line_start..) {
        let end = rest.iter().position(|&c| c == b'\n').map(|i| i + 1);
        if !reading.fit(line_start, end.unwrap_or(rest.len()), limits) {
            return Err(if request_line {
                Rejection::new(414, "request line too long")
            } else {
                Rejection::new(HEADER_TOO_LARGE, "request header too large")
            });
        }
        let Some(end) = end else {
            return Ok(());
        };
        let line = &rest[..end];
        if request_line {
            request_line = false;
            if let Some(host) = absolute_form_host(line) {
                limits = for_host(host);
                host_known = true;
            }
        } else if line.trim_ascii().is_empty() {
            return Ok(());
        } else if !host_known {
            if let Some(host) = header_value(line, b"host") {
                limits = for_host(host);
                host_known = true;
            }
        }
        line_start += end;
    }
    Ok(())
}

/// The authority of an absolute-form request target (`GET http://host:port/x HTTP/1.1`).
fn absolute_form_host(line: &[u8]) -> Option<&[u8]> {
    let target = line.split(|&c| c == b' ').filter(|t| !t.is_empty()).nth(1)?;
    if target.first() == Some(&b'/') {
        return None;
    }
    let after = target.windows(3).position(|w| w == b"://")? + 3;
    let authority = target.get(after..)?;
    let end = authority.iter().position(|&c| c == b'/').unwrap_or(authority.len());
    authority.get(..end)
}

/// The value of a header line named `name` (ASCII case-insensitive), trimmed.
fn header_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let colon = line.iter().position(|&c| c == b':')?;
    let (n, v) = line.split_at(colon);
    n.eq_ignore_ascii_case(name)
        .then(|| v.get(1..).unwrap_or(b"").trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &[u8]) -> u16 {
        status_with(head, HeaderBuffers::default())
    }

    fn status_with(head: &[u8], limits: HeaderBuffers) -> u16 {
        check(head, first(limits), |_| limits).map_or_else(|r| r.status, |()| 200)
    }

    fn first(large: HeaderBuffers) -> FirstBuffers {
        FirstBuffers {
            large,
            ..FirstBuffers::default()
        }
    }

    fn x(n: usize) -> Vec<u8> {
        vec![b'x'; n]
    }

    fn head(lines: &[&[u8]]) -> Vec<u8> {
        let mut h = Vec::new();
        for l in lines {
            h.extend_from_slice(l);
            h.extend_from_slice(b"\r\n");
        }
        h.extend_from_slice(b"\r\n");
        h
    }

    /// The boundaries measured on nginx 1.22.1 with the default `4 8k`.
    #[test]
    fn lines_up_to_size_fit_as_in_nginx() {
        // a request line of 8192 bytes with its CRLF fits, 8193 is a 414
        let line = |n: usize| [b"GET /".as_slice(), &x(n), b" HTTP/1.1"].concat();
        assert_eq!(status(&head(&[&line(8176), b"Host: a"])), 200);
        assert_eq!(status(&head(&[&line(8177), b"Host: a"])), 414);
        assert_eq!(status(&line(9000)), 414, "known before the line ends");
        // a header line of 8192 bytes with its CRLF fits, 8193 is a 494
        let hdr = |n: usize| [b"X: ".as_slice(), &x(n)].concat();
        assert_eq!(status(&head(&[b"GET / HTTP/1.1", b"Host: a", &hdr(8187)])), 200);
        assert_eq!(
            status(&head(&[b"GET / HTTP/1.1", b"Host: a", &hdr(8188)])),
            HEADER_TOO_LARGE
        );
        // four 7 KB headers fit four large buffers, a fifth does not
        let many = |n: usize| {
            let mut lines: Vec<Vec<u8>> = vec![b"GET / HTTP/1.1".to_vec(), b"Host: a".to_vec()];
            lines.extend((0..n).map(|i| [format!("X-H{i}: ").as_bytes(), &x(7000)].concat()));
            head(&lines.iter().map(Vec::as_slice).collect::<Vec<_>>())
        };
        assert_eq!(status(&many(4)), 200);
        assert_eq!(status(&many(5)), HEADER_TOO_LARGE);
        assert_eq!(status(&many(5)[..20_000]), 200, "not known yet");
    }

    #[test]
    fn small_heads_and_partial_lines_pass() {
        assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
        assert_eq!(status(&[b"GET /".as_slice(), &x(3000)].concat()), 200);
        let small = HeaderBuffers { number: 2, size: 1024 };
        assert_eq!(status_with(&[b"GET /".as_slice(), &x(3000)].concat(), small), 414);
        assert_eq!(small.capacity(CLIENT_HEADER_BUFFER), 3 * 1024);
    }

    #[test]
    fn the_named_server_sets_the_limits_after_its_host() {
        let big = HeaderBuffers {
            number: 8,
            size: 16 * 1024,
        };
        let by_host = |h: &[u8]| if h == b"big" { big } else { HeaderBuffers::default() };
        let raw = head(&[
            b"GET / HTTP/1.1",
            b"Host: big",
            &[b"X: ".as_slice(), &x(12_000)].concat(),
        ]);
        assert!(check(&raw, FirstBuffers::default(), by_host).is_ok());
        let raw = head(&[
            b"GET / HTTP/1.1",
            &[b"X: ".as_slice(), &x(12_000)].concat(),
            b"Host: big",
        ]);
        assert!(check(&raw, FirstBuffers::default(), by_host).is_err(), "too late");
        let raw = head(&[
            b"GET http://big/ HTTP/1.1",
            b"Host: small",
            &[b"X: ".as_slice(), &x(12_000)].concat(),
        ]);
        assert!(
            check(&raw, FirstBuffers::default(), by_host).is_ok(),
            "the target's host wins"
        );
    }

    /// nginx-tests' `http_header_buffers.t` settings: `client_header_buffer_size 128`, `large_client_header_buffers
    /// 1 256` (and `connection_pool_size 128`, which lets 256 pass).
    #[test]
    fn small_first_buffer() {
        let first = FirstBuffers {
            size: 128,
            large: HeaderBuffers { number: 1, size: 256 },
        };
        let check_with = |raw: &[u8]| check(raw, first, |_| first.large).map_or_else(|r| r.status, |()| 200);
        let mut one_line = b"GET / HTTP/1.1\r\nHost: a\r\nX-A: ".to_vec();
        one_line.extend(x(200));
        one_line.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            check_with(&one_line),
            200,
            "the long line moves to the one large buffer"
        );
        let mut two = one_line[..one_line.len() - 2].to_vec();
        two.extend_from_slice(b"X-B: ");
        two.extend(x(200));
        two.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            check_with(&two),
            HEADER_TOO_LARGE,
            "a second one needs a second large buffer"
        );
        assert_eq!(
            check_with(&[b"GET /".to_vec(), x(300), b" HTTP/1.1\r\n\r\n".to_vec()].concat()),
            414
        );
    }
}
