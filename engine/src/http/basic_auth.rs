//! `$remote_user`: the user name of an `Authorization: Basic` request header, as nginx decodes it.

/// `$remote_user`: the user of `Authorization: Basic`, as nginx's `ngx_http_auth_basic_user` decodes it (missing
/// when the scheme is not Basic, the base64 is bad, or there is no `:` or no user).
pub fn basic_user(header: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(scheme) = header.get(..6) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(b"Basic ") {
        return false;
    }
    let encoded = header.get(6..).unwrap_or_default().trim_ascii_start();
    let start = out.len();
    if !decode_base64(encoded, out) {
        out.truncate(start);
        return false;
    }
    match out.get(start..).and_then(|d| d.iter().position(|&c| c == b':')) {
        Some(0) | None => {
            out.truncate(start);
            false
        }
        Some(colon) => {
            out.truncate(start + colon);
            true
        }
    }
}

/// Standard base64 with optional padding, as `ngx_decode_base64` accepts it.
fn decode_base64(src: &[u8], out: &mut Vec<u8>) -> bool {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let data = src
        .strip_suffix(b"==")
        .or_else(|| src.strip_suffix(b"="))
        .unwrap_or(src);
    if data.len() % 4 == 1 {
        return false;
    }
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in data {
        let Some(v) = value(c) else {
            return false;
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(h: &str) -> Option<String> {
        let mut out = b"x".to_vec();
        basic_user(h.as_bytes(), &mut out).then(|| String::from_utf8(out[1..].to_vec()).unwrap())
    }

    #[test]
    fn remote_user_from_basic_auth() {
        assert_eq!(user("Basic YWxpY2U6c2VjcmV0").as_deref(), Some("alice")); // alice:secret
        assert_eq!(user("basic   Ym9iOg==").as_deref(), Some("bob")); // bob:
        assert_eq!(user("Basic OnB3"), None); // :pw, no user
        assert_eq!(user("Basic YWxpY2U="), None); // alice, no colon
        assert_eq!(user("Basic !!!"), None);
        assert_eq!(user("Bearer YWxpY2U6c2VjcmV0"), None);
        assert_eq!(user(""), None);
    }
}
