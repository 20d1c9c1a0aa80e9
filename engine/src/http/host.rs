//! nginx's `ngx_http_validate_host` (1.31): which `Host` values (and absolute-form authorities) a request may
//! carry, and the host name they give — without the port, without one trailing dot. A refused one is a 400.

use super::Rejection;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    Host,
    IpLiteral,
    HostEnd,
    Port,
}

/// Whether `c` may appear in a host name or an IP literal (besides letters, digits, `.`, `:`): unreserved,
/// sub-delims and (in a name) `%`.
fn allowed(c: u8, literal: bool) -> bool {
    matches!(
        c,
        b'-' | b'_' | b'~' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    ) || (!literal && c == b'%')
}

/// The host of `h` as nginx validates it.
pub fn validate(h: &[u8]) -> Result<&[u8], Rejection> {
    match common_host(h) {
        Some(host) => Ok(host),
        None => validate_any(h),
    }
}

/// The common shape, `label(.label)*[:port]` (letters, digits, `-`; a port of 1 to 5 digits up to 65535), in one
/// pass without [`validate_any`]'s states: its host, or `None` for anything else (which `validate_any` decides).
#[inline]
fn common_host(h: &[u8]) -> Option<&[u8]> {
    let first = *h.first()?;
    if !first.is_ascii_alphanumeric() {
        return None;
    }
    let mut prev = first;
    let mut i = 1;
    while let Some(&c) = h.get(i) {
        match c {
            b'.' if prev == b'.' => return None,
            b'.' | b'-' => {}
            b':' => break,
            c if c.is_ascii_alphanumeric() => {}
            _ => return None,
        }
        prev = c;
        i += 1;
    }
    if prev == b'.' {
        return None;
    }
    if i < h.len() {
        let digits = h.get(i + 1..)?;
        if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let port = digits.iter().fold(0u32, |p, d| p * 10 + u32::from(d - b'0'));
        if port > 65535 {
            return None;
        }
    }
    h.get(..i)
}

/// [`validate`] for any host (`ngx_http_validate_host`'s states).
fn validate_any(h: &[u8]) -> Result<&[u8], Rejection> {
    let invalid = || Rejection::bad("invalid host");
    let mut state = State::Start;
    let mut dot: Option<usize> = None;
    let mut host_len = h.len();
    let mut port: u32 = 0;
    for (i, &c) in h.iter().enumerate() {
        if state == State::Start {
            if c == b'[' {
                state = State::IpLiteral;
                continue;
            }
            state = State::Host;
        }
        match state {
            State::Host | State::IpLiteral => {
                let literal = state == State::IpLiteral;
                if c.is_ascii_alphanumeric() {
                    continue;
                }
                match c {
                    b':' if !literal => {
                        host_len = i;
                        state = State::Port;
                    }
                    b':' => {}
                    b']' if literal => {
                        host_len = i + 1;
                        state = State::HostEnd;
                    }
                    b'.' => {
                        if i > 0 && dot == Some(i - 1) {
                            return Err(invalid());
                        }
                        dot = Some(i);
                    }
                    c if allowed(c, literal) => {}
                    _ => return Err(invalid()),
                }
            }
            State::HostEnd => {
                if c != b':' {
                    return Err(invalid());
                }
                state = State::Port;
            }
            State::Port => {
                if !c.is_ascii_digit() {
                    return Err(invalid());
                }
                port = port * 10 + u32::from(c - b'0');
                if port > 65535 {
                    return Err(invalid());
                }
            }
            State::Start => {}
        }
    }
    if state == State::IpLiteral {
        return Err(invalid());
    }
    if host_len > 0 && dot == Some(host_len - 1) {
        host_len -= 1;
    }
    if host_len == 0 {
        return Err(invalid());
    }
    h.get(..host_len).ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The common shape's pass answers as nginx's states do, for any bytes a Host line may bring.
        #[test]
        fn common_shape_as_the_states(h in proptest::collection::vec(proptest::sample::select(
            b"aZ09.-:_[]%~!*x".to_vec()), 0..12)) {
            if let Some(fast) = common_host(&h) {
                prop_assert_eq!(validate_any(&h).ok(), Some(fast));
            }
        }
    }

    #[test]
    fn common_hosts_take_the_one_pass() {
        for h in ["localhost", "127.0.0.1:8080", "a-b.example.com", "x:65535", "A9"] {
            assert_eq!(common_host(h.as_bytes()), validate_any(h.as_bytes()).ok(), "{h}");
            assert!(common_host(h.as_bytes()).is_some(), "{h}");
        }
        for h in [
            "", "a..b", "a.", "-a", "a:", "a:65536", "a:123456", "[::1]", "a_b", "a%20",
        ] {
            assert_eq!(common_host(h.as_bytes()), None, "{h}");
        }
    }

    fn host(h: &str) -> Option<String> {
        validate(h.as_bytes())
            .ok()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    #[test]
    fn nginx_hosts() {
        for (given, got) in [
            ("a", "a"),
            ("A.B.:80", "A.B"),
            ("a.", "a"),
            (".a", ".a"),
            ("a_b~c!$", "a_b~c!$"),
            ("a%20b", "a%20b"),
            ("[::1]", "[::1]"),
            ("[::1]:8080", "[::1]"),
            ("[v1.x]", "[v1.x]"),
            ("127.0.0.1:65535", "127.0.0.1"),
        ] {
            assert_eq!(host(given).as_deref(), Some(got), "{given}");
        }
        for bad in [
            "", ".", "a..b", "a:1:2", "[::1]x", "[::1].", "[::1", "a/b", "a:99999", "a:6x", "[a%20]",
        ] {
            assert_eq!(host(bad), None, "{bad}");
        }
    }
}
