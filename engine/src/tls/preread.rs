//! nginx's `ssl_preread` (`ngx_stream_ssl_preread_module`): a client's TLS hello read without answering it, for
//! `$ssl_preread_server_name`, `$ssl_preread_protocol` and `$ssl_preread_alpn_protocols`. The hello may span
//! records; anything that is not a TLS hello (another first byte, a broken hello) is declined, as nginx declines
//! it: the variables stay empty and the session goes on.

use crate::config::var::PrereadVar;

/// What a client's hello said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preread {
    /// The SNI host name, as sent.
    pub server_name: Vec<u8>,
    /// `SSL_get_version()`'s name of the version offered (`TLSv1.3` with `supported_versions`), or empty.
    pub protocol: &'static str,
    /// The ALPN protocols offered, joined by `,`.
    pub alpn: Vec<u8>,
}

/// What the bytes read so far come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A whole hello: its facts are in the [`Preread`].
    Hello,
    /// A hello so far: more bytes are needed.
    More,
    /// Not a TLS hello (nginx's `NGX_DECLINED`).
    Declined,
}

/// A handshake record's content type.
const HANDSHAKE: u8 = 0x16;

/// Parses the client's first bytes `bytes` into `out` (cleared first).
pub fn parse(bytes: &[u8], out: &mut Preread) -> Parsed {
    out.server_name.clear();
    out.alpn.clear();
    out.protocol = "";
    // the handshake message, from the records' fragments (a hello is at most 16 MiB; a record 16 KiB + 5)
    let mut hello: Vec<u8> = Vec::new();
    let mut p = bytes;
    while p.len() >= 5 {
        let (b0, b1, b2, b3, b4) = (p[0], p[1], p[2], p[3], p[4]);
        if b0 & 0x80 != 0 && b2 == 1 && (b3 == 0 || b3 == 3) {
            // an SSLv2 hello: nginx takes its version and nothing more
            out.protocol = version_name(b3, b4);
            return Parsed::Hello;
        }
        if b0 != HANDSHAKE || b1 != 3 {
            return Parsed::Declined;
        }
        let len = usize::from(b3) << 8 | usize::from(b4);
        let Some(fragment) = p.get(5..5 + len) else {
            return Parsed::More;
        };
        hello.extend_from_slice(fragment);
        p = p.get(5 + len..).unwrap_or_default();
        match client_hello(&hello, out) {
            Some(Parsed::More) => {}
            Some(done) => return done,
            None => {
                out.server_name.clear();
                out.alpn.clear();
                out.protocol = "";
                return Parsed::Declined;
            }
        }
    }
    Parsed::More
}

/// A cursor over a hello's bytes; every read past the end is `None`.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).and_then(|b| b.first()).map(|&b| usize::from(b))
    }

    fn u16(&mut self) -> Option<usize> {
        let b = self.take(2)?;
        Some(usize::from(*b.first()?) << 8 | usize::from(*b.get(1)?))
    }
}

/// Parses the handshake message `msg` (possibly still partial): `Some(More)` until it is whole, `None` for a
/// message that is not a well-formed client hello.
fn client_hello(msg: &[u8], out: &mut Preread) -> Option<Parsed> {
    let mut c = Cursor(msg);
    let Some(head) = c.take(4) else {
        return Some(Parsed::More);
    };
    if head.first() != Some(&1) {
        return None;
    }
    let len = usize::from(*head.get(1)?) << 16 | usize::from(*head.get(2)?) << 8 | usize::from(*head.get(3)?);
    let Some(body) = c.take(len) else {
        return Some(Parsed::More);
    };
    let mut c = Cursor(body);
    let version = c.take(2)?;
    out.protocol = version_name(*version.first()?, *version.get(1)?);
    c.take(32)?;
    let sid = c.u8()?;
    c.take(sid)?;
    let suites = c.u16()?;
    c.take(suites)?;
    let methods = c.u8()?;
    c.take(methods)?;
    if c.0.is_empty() {
        return Some(Parsed::Hello);
    }
    // as nginx's parser: the extensions run to the end of the hello (their total length is not checked), and
    // the SNI, ALPN and supported_versions extensions are read by their own lengths
    c.u16()?;
    let mut exts = c;
    let (mut sni_seen, mut alpn_seen) = (false, false);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let size = exts.u16()?;
        match kind {
            0 if !sni_seen => {
                sni_seen = true;
                let list = exts.u16()?;
                if exts.u8()? != 0 {
                    return None; // nginx: "SNI hostname type is not DNS"
                }
                let n = exts.u16()?;
                let rest = list.checked_sub(3 + n)?; // nginx: "SNI format error"
                out.server_name.extend_from_slice(exts.take(n)?);
                exts.take(rest)?;
            }
            16 if !alpn_seen => {
                alpn_seen = true;
                let mut list = exts.u16()?;
                loop {
                    let n = exts.u8()?;
                    if n == 0 {
                        return None; // nginx: "ALPN empty protocol"
                    }
                    list = list.checked_sub(1 + n)?; // nginx: "ALPN format error"
                    if !out.alpn.is_empty() {
                        out.alpn.push(b',');
                    }
                    out.alpn.extend_from_slice(exts.take(n)?);
                    if list == 0 {
                        break;
                    }
                }
            }
            43 => {
                out.protocol = "TLSv1.3";
                let n = exts.u8()?;
                exts.take(n)?;
            }
            _ => {
                exts.take(size)?;
            }
        }
    }
    Some(Parsed::Hello)
}

/// `SSL_get_version()`'s name of a version's two bytes (empty for one it has no name for).
fn version_name(major: u8, minor: u8) -> &'static str {
    match (major, minor) {
        (0, 2) => "SSLv2",
        (3, 0) => "SSLv3",
        (3, 1) => "TLSv1",
        (3, 2) => "TLSv1.1",
        (3, 3) => "TLSv1.2",
        (3, 4) => "TLSv1.3",
        _ => "",
    }
}

/// Appends the value of an `ssl_preread` variable of a session that preread `facts` (none: nothing read, or
/// declined).
pub fn append(facts: Option<&Preread>, var: PrereadVar, out: &mut Vec<u8>) {
    let Some(f) = facts else {
        return;
    };
    match var {
        PrereadVar::ServerName => out.extend_from_slice(&f.server_name),
        PrereadVar::Protocol => out.extend_from_slice(f.protocol.as_bytes()),
        PrereadVar::AlpnProtocols => out.extend_from_slice(&f.alpn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS 1.2 record holding a hello with SNI `name` and ALPN `alpn`, and `supported_versions` if `tls13`.
    fn hello(name: &[u8], alpn: &[&[u8]], tls13: bool) -> Vec<u8> {
        let mut exts = Vec::new();
        let mut sni = vec![0u8];
        sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
        sni.extend_from_slice(name);
        exts.extend_from_slice(&[0, 0]);
        exts.extend_from_slice(&((sni.len() + 2) as u16).to_be_bytes());
        exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        exts.extend_from_slice(&sni);
        let mut list = Vec::new();
        for p in alpn {
            list.push(p.len() as u8);
            list.extend_from_slice(p);
        }
        if !list.is_empty() {
            exts.extend_from_slice(&[0, 16]);
            exts.extend_from_slice(&((list.len() + 2) as u16).to_be_bytes());
            exts.extend_from_slice(&(list.len() as u16).to_be_bytes());
            exts.extend_from_slice(&list);
        }
        if tls13 {
            exts.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01, 1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut msg = vec![1, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend_from_slice(&body);
        let mut rec = vec![HANDSHAKE, 3, 1];
        rec.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        rec.extend_from_slice(&msg);
        rec
    }

    #[test]
    fn a_hello_gives_its_name_version_and_protocols() {
        let mut f = Preread::default();
        assert_eq!(
            parse(&hello(b"foo", &[b"h2", b"http/1.1"], true), &mut f),
            Parsed::Hello
        );
        assert_eq!(f.server_name, b"foo");
        assert_eq!(f.protocol, "TLSv1.3");
        assert_eq!(f.alpn, b"h2,http/1.1");
        assert_eq!(parse(&hello(b"bar", &[b"x"], false), &mut f), Parsed::Hello);
        assert_eq!((f.server_name.as_slice(), f.protocol), (&b"bar"[..], "TLSv1.2"));
    }

    #[test]
    fn a_partial_hello_wants_more_at_every_cut() {
        let whole = hello(b"example.com", &[b"h2"], true);
        let mut f = Preread::default();
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut], &mut f), Parsed::More, "cut at {cut}");
        }
    }

    #[test]
    fn a_hello_split_over_records_is_read_whole() {
        let whole = hello(b"split", &[], false);
        let msg = &whole[5..];
        let mut two = vec![HANDSHAKE, 3, 1, 0, 10];
        two.extend_from_slice(&msg[..10]);
        two.extend_from_slice(&[HANDSHAKE, 3, 1]);
        two.extend_from_slice(&((msg.len() - 10) as u16).to_be_bytes());
        two.extend_from_slice(&msg[10..]);
        let mut f = Preread::default();
        assert_eq!(parse(&two, &mut f), Parsed::Hello);
        assert_eq!(f.server_name, b"split");
    }

    #[test]
    fn what_is_not_a_hello_is_declined() {
        let mut f = Preread::default();
        assert_eq!(parse(b"GET / HTTP/1.0\r\n\r\n", &mut f), Parsed::Declined);
        assert_eq!(parse(&[HANDSHAKE, 2, 0, 0, 1, 0], &mut f), Parsed::Declined);
        // a handshake message that is not a client hello
        assert_eq!(parse(&[HANDSHAKE, 3, 1, 0, 4, 2, 0, 0, 0], &mut f), Parsed::Declined);
        // a hello whose fields run past its length
        let mut bad = hello(b"x", &[b"h2"], false);
        bad[5 + 4 + 2 + 32] = 200; // a session id longer than the rest of the hello
        assert_eq!(parse(&bad, &mut f), Parsed::Declined);
        assert!(f.server_name.is_empty() && f.protocol.is_empty());
        // an SSLv2 hello: its version only
        assert_eq!(parse(&[0x80, 0x2e, 1, 3, 1, 0, 0], &mut f), Parsed::Hello);
        assert_eq!(f.protocol, "TLSv1");
    }
}
