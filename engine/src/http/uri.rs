//! The request path as nginx matches locations against it: `%XX` decoded, slashes merged, `.` and `..` segments
//! resolved, query and fragment cut off (a port of nginx 1.22's `ngx_http_parse_complex_uri` with
//! `merge_slashes on`), and its re-escaping for `proxy_pass` with a URI (`ngx_escape_uri`, `NGX_ESCAPE_URI`).

/// Why a path cannot be normalized (nginx answers 400 to each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    #[error("a \"..\" segment climbs above the root")]
    AboveRoot,
    #[error("an invalid percent-encoding")]
    BadEscape,
    #[error("a percent-encoded NUL")]
    EncodedNul,
}

/// Whether the path part of `target` (before `?`) needs [`normalize`]: it has `%`, `//`, `/.` or `#`. Any other
/// path is its own normalized form.
pub fn needs_normalizing(target: &[u8]) -> bool {
    let mut prev = 0u8;
    for &c in target {
        match c {
            b'?' => return false,
            b'%' | b'#' => return true,
            b'/' | b'.' if prev == b'/' => return true,
            _ => {}
        }
        prev = c;
    }
    false
}

/// The states of nginx's parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Usual,
    Slash,
    Dot,
    DotDot,
}

/// Writes the normalized path of `target` (an origin-form target starting with `/`, query allowed) into `out`,
/// cleared first. The output is bytes: a decoded `%XX` may not be UTF-8.
pub fn normalize(target: &[u8], out: &mut Vec<u8>) -> Result<(), UriError> {
    out.clear();
    let mut state = State::Usual;
    let mut bytes = target.iter().copied();
    while let Some(raw) = bytes.next() {
        let (c, decoded) = if raw == b'%' {
            let c = decode(bytes.next(), bytes.next())?;
            // `%25`, `%23` and `%3F` stay literal characters, and the state goes back to the usual one
            if matches!(c, b'%' | b'#' | b'?') {
                out.push(c);
                state = State::Usual;
                continue;
            }
            (c, true)
        } else {
            (raw, false)
        };
        if !decoded && matches!(c, b'?' | b'#') {
            break;
        }
        state = step(state, c, out)?;
    }
    match state {
        State::Dot => {
            out.pop();
        }
        State::DotDot => pop_segment(out)?,
        State::Usual | State::Slash => {}
    }
    Ok(())
}

/// One character (decoded already) through nginx's state machine.
fn step(state: State, c: u8, out: &mut Vec<u8>) -> Result<State, UriError> {
    Ok(match (state, c) {
        (State::Slash, b'/') => State::Slash,
        (State::Dot, b'/') => {
            out.pop();
            State::Slash
        }
        (State::DotDot, b'/') => {
            pop_segment(out)?;
            State::Slash
        }
        (State::Usual, b'/') => {
            out.push(b'/');
            State::Slash
        }
        (State::Slash, b'.') => {
            out.push(b'.');
            State::Dot
        }
        (State::Dot, b'.') => {
            out.push(b'.');
            State::DotDot
        }
        _ => {
            out.push(c);
            State::Usual
        }
    })
}

/// At `/..` (already written): drops it and the segment before, keeping that segment's leading `/`.
fn pop_segment(out: &mut Vec<u8>) -> Result<(), UriError> {
    // `out` ends in "/.."; the segment before starts after the `/` preceding it
    let before = out.len().checked_sub(3).ok_or(UriError::AboveRoot)?;
    let slash = out
        .get(..before)
        .and_then(|o| o.iter().rposition(|&c| c == b'/'))
        .ok_or(UriError::AboveRoot)?;
    out.truncate(slash + 1);
    Ok(())
}

/// The byte of a `%XX` escape from its two hex digits.
fn decode(hi: Option<u8>, lo: Option<u8>) -> Result<u8, UriError> {
    let digit = |d: Option<u8>| {
        d.and_then(|d| char::from(d).to_digit(16))
            .and_then(|v| u8::try_from(v).ok())
            .ok_or(UriError::BadEscape)
    };
    let c = (digit(hi)? << 4) | digit(lo)?;
    if c == 0 {
        return Err(UriError::EncodedNul);
    }
    Ok(c)
}

/// Whether nginx's `NGX_ESCAPE_URI` escapes `c`: controls, space, `"`, `#`, `%`, `<`, `>`, `?`, `\`, `^`, `` ` ``,
/// `{`, `|`, `}`, DEL and every byte above it.
fn escaped(c: u8) -> bool {
    c <= 0x20
        || c >= 0x7f
        || matches!(
            c,
            b'"' | b'#' | b'%' | b'<' | b'>' | b'?' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
        )
}

/// Appends `uri` to `out` escaped as nginx's `ngx_escape_uri(.., NGX_ESCAPE_URI)` does (upper-case hex).
pub fn append_escaped(uri: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in uri {
        if escaped(c) {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 0xf)]]);
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(t: &str) -> Result<String, UriError> {
        let mut out = Vec::new();
        normalize(t.as_bytes(), &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Each pair was checked against nginx 1.22.1 (`return 200 $uri`).
    #[test]
    fn normalizes_as_nginx() {
        for (target, uri) in [
            ("/a/../admin", "/admin"),
            ("/admin/../a", "/a"),
            ("//admin", "/admin"),
            ("/%61dmin", "/admin"),
            ("/a%2f..%2fadmin", "/admin"),
            ("/x/%2e%2e/admin", "/admin"),
            ("/a/..", "/"),
            ("/a%3fb?c=%41", "/a?b"),
            ("/a#frag", "/a"),
            ("/a/./b/.", "/a/b/"),
            ("/exact/.", "/exact/"),
            ("/p/%2e%2e", "/"),
            ("/ex%61ct", "/exact"),
            ("/a%25b", "/a%b"),
            ("/a%23b#c", "/a#b"),
            ("/a//b///c?x//y", "/a/b/c"),
            ("/a/.b/..c/...", "/a/.b/..c/..."),
            ("/a/b/../../c", "/c"),
            ("/a/./../b", "/b"),
            ("/.", "/"),
            ("/", "/"),
            ("/a+b", "/a+b"),
            ("/a/%2E%2e/b", "/b"),
            ("/a/.%2e", "/"),
        ] {
            assert_eq!(norm(target).as_deref(), Ok(uri), "{target}");
        }
    }

    #[test]
    fn refuses_what_nginx_refuses() {
        for (target, err) in [
            ("/..", UriError::AboveRoot),
            ("/../x", UriError::AboveRoot),
            ("/a/../../x", UriError::AboveRoot),
            ("/a/%2e%2e/%2E%2E/x", UriError::AboveRoot),
            ("/%zz", UriError::BadEscape),
            ("/%2", UriError::BadEscape),
            ("/%", UriError::BadEscape),
            ("/%00", UriError::EncodedNul),
        ] {
            assert_eq!(norm(target), Err(err), "{target}");
        }
        assert_eq!(norm("/x?/../..").as_deref(), Ok("/x"), "the query is not a path");
    }

    #[test]
    fn decoded_bytes_need_not_be_utf8() {
        let mut out = Vec::new();
        normalize(b"/caf%C3%A9/%FF", &mut out).unwrap();
        assert_eq!(out, b"/caf\xc3\xa9/\xff");
    }

    #[test]
    fn fast_path_only_for_paths_that_are_their_own_form() {
        for t in ["/a/b", "/a.b/c.d", "/a?x=//..%", "/", "/a+b", "/a..b"] {
            assert!(!needs_normalizing(t.as_bytes()), "{t}");
            assert_eq!(norm(t).unwrap(), t.split('?').next().unwrap(), "{t}");
        }
        for t in ["/a//b", "/a/./b", "/a/../b", "/%41", "/a#b", "/.", "/a/."] {
            assert!(needs_normalizing(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn escapes_as_nginx() {
        let mut out = Vec::new();
        append_escaped(b"/y z/caf\xc3\xa9/a%b?c#d/a+b~!$&'()*,;=:@[]", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "/y%20z/caf%C3%A9/a%25b%3Fc%23d/a+b~!$&'()*,;=:@[]"
        );
    }
}
