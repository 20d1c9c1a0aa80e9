//! Header names compared without case, a word at a time: the hot path compares each header line's name with
//! known lower-case names (`host`, `connection`, the hidden ones), and `str::eq_ignore_ascii_case` lowers both
//! sides byte by byte.
//!
//! [`eq_plain`] is exact when the known name is *plain* (lower-case letters, digits and `-`, as every name nginx
//! gives meaning to is) and the other is an HTTP token (what httparse accepts as a header name): ORing `0x20` into a
//! token byte gives the plain byte only for that byte itself or, for a letter, its upper case. A name with other
//! bytes (`_`, `~`...) must go through [`eq_any`], which picks the right test.

/// Whether `lower` is a plain name: lower-case ASCII letters, digits and `-` only.
pub fn is_plain(lower: &str) -> bool {
    lower
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

const CASE: u64 = 0x2020_2020_2020_2020;

#[inline(always)]
fn word(s: &[u8], at: usize) -> u64 {
    s.get(at..at + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

/// `name` (an HTTP token) equals the plain name `lower` without regard to case (see the module's note).
#[inline]
pub fn eq_plain(name: &str, lower: &str) -> bool {
    let (a, b) = (name.as_bytes(), lower.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(b).all(|(x, y)| x | 0x20 == *y);
    }
    let mut at = 0;
    while at + 8 <= n {
        if word(a, at) | CASE != word(b, at) {
            return false;
        }
        at += 8;
    }
    // the last, partial word again as the 8 bytes that end the name
    at == n || word(a, n - 8) | CASE == word(b, n - 8)
}

/// `name` equals the lower-case `lower` (plain when `plain`, as [`is_plain`] said at load) without regard to case.
#[inline]
pub fn eq_any(name: &str, lower: &str, plain: bool) -> bool {
    if plain {
        eq_plain(name, lower)
    } else {
        name.eq_ignore_ascii_case(lower)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// httparse's header-name bytes (RFC 9110 tchar).
    const TCHAR: &str = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

    #[test]
    fn known_names() {
        for (name, lower, same) in [
            ("Host", "host", true),
            ("HOST", "host", true),
            ("Hosts", "host", false),
            ("Connection", "connection", true),
            ("Connectiom", "connection", false),
            ("Transfer-Encoding", "transfer-encoding", true),
            ("Transfer-EncodinG", "transfer-encoding", true),
            ("Transfer_Encoding", "transfer-encoding", false),
            ("X-Accel-Redirect", "x-accel-redirect", true),
            ("Keep-Alive", "keep-alive", true),
            ("Content-Length", "content-lengtx", false),
            ("", "", true),
        ] {
            assert_eq!(eq_plain(name, lower), same, "{name} {lower}");
        }
        assert!(is_plain("x-accel-redirect") && !is_plain("x_foo") && !is_plain("Host"));
        assert!(eq_any("X_Foo", "x_foo", false) && !eq_any("X~Foo", "x_foo", false));
    }

    proptest! {
        /// The same answer as `eq_ignore_ascii_case` for every token against every plain name.
        #[test]
        fn as_eq_ignore_ascii_case(
            name in proptest::collection::vec(proptest::sample::select(TCHAR.as_bytes().to_vec()), 0..24),
            flip in proptest::collection::vec(any::<bool>(), 0..24),
        ) {
            let name = String::from_utf8(name).unwrap();
            // a plain name: the token's letters lowered, other bytes kept when plain, else `-`
            let lower: String = name.bytes().zip(flip.iter().chain(std::iter::repeat(&false))).map(|(b, f)| {
                let l = b.to_ascii_lowercase();
                let l = if l.is_ascii_lowercase() || l.is_ascii_digit() || l == b'-' { l } else { b'-' };
                if *f && l.is_ascii_lowercase() { b'a' + (l - b'a' + 1) % 26 } else { l }
            } as char).collect();
            prop_assert!(is_plain(&lower));
            prop_assert_eq!(eq_plain(&name, &lower), name.eq_ignore_ascii_case(&lower));
        }
    }
}
