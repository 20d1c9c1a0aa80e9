//! The PROXY protocol (nginx's `ngx_proxy_protocol.c`): reading a v1 (text) or v2 (binary, with TLVs) header at
//! the start of a connection, looking a TLV up by nginx's names, and writing the v1 header nginx sends upstream.
//! Pure: bytes in, addresses out; never a panic on any input (fuzzed below).

pub use crate::config::proxy_tlv::TlvName;
use crate::config::proxy_tlv::TLV_SSL;
use std::fmt;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;

/// nginx's `NGX_PROXY_PROTOCOL_V1_MAX_HEADER`: a v1 line, CRLF included, is at most this long (the spec's bound).
pub const V1_MAX: usize = 107;
/// The largest v2 header corelb reads, its 16 fixed bytes included (nginx's `NGX_PROXY_PROTOCOL_MAX_HEADER`, the
/// buffer its stream module peeks into): a longer one is refused as "header is too large".
pub const V2_MAX: usize = 4096;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
const V1_PREFIX: &[u8; 6] = b"PROXY ";
/// The longest address text kept (an IPv6 address with an IPv4 tail is 45 characters).
const ADDR_TEXT: usize = 46;

/// An address as the header gave it: v1's text as sent, v2's address written as nginx writes it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AddrText {
    len: u8,
    buf: [u8; ADDR_TEXT],
}

impl AddrText {
    fn from_bytes(b: &[u8]) -> Option<AddrText> {
        let mut buf = [0; ADDR_TEXT];
        buf.get_mut(..b.len())?.copy_from_slice(b);
        Some(AddrText {
            len: u8::try_from(b.len()).ok()?,
            buf,
        })
    }

    fn from_ip(ip: IpAddr) -> AddrText {
        let mut buf = [0; ADDR_TEXT];
        let mut w = &mut buf[..];
        let _ = write!(w, "{ip}");
        let len = ADDR_TEXT - w.len();
        AddrText { len: len as u8, buf }
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..usize::from(self.len)).unwrap_or_default()
    }

    /// The address, if the text is one (nginx's `ngx_parse_addr`).
    pub fn ip(&self) -> Option<IpAddr> {
        std::str::from_utf8(self.as_bytes()).ok()?.parse().ok()
    }
}

impl fmt::Debug for AddrText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// What a header says of the connection it came on (`$proxy_protocol_addr`, `_port`, `_server_addr`, `_port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyAddrs {
    pub src: AddrText,
    pub dst: AddrText,
    pub src_port: u16,
    pub dst_port: u16,
}

impl ProxyAddrs {
    /// The client's address and port, if the source text is an address (nginx's realip takes it only then).
    pub fn client(&self) -> Option<SocketAddr> {
        Some(SocketAddr::new(self.src.ip()?, self.src_port))
    }
}

/// A complete header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// How many bytes it took: the connection's data starts after them.
    pub len: usize,
    /// The addresses; `None` for `UNKNOWN`, a v2 `LOCAL` command, or a family or transport nginx does not take
    /// (the connection goes on with its own addresses, as nginx's).
    pub addrs: Option<ProxyAddrs>,
    /// Where the v2 TLVs are in the input (empty for v1).
    pub tlvs: Range<usize>,
}

/// Why a header was refused (the connection is closed, the reason logged at `error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// nginx's `broken header: "..."`: the input up to its first CR or LF (at most [`V1_MAX`] bytes of it).
    Header(Vec<u8>),
    /// A v2 signature with a version other than 2.
    Version(u8),
    /// A v2 header longer than [`V2_MAX`].
    TooLarge(usize),
    /// A v2 address block shorter than its family needs.
    ShortAddrs { family: u8, len: usize },
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::Header(text) => write!(f, "broken header: \"{}\"", String::from_utf8_lossy(text)),
            Broken::Version(v) => write!(f, "unknown PROXY protocol version: {v}"),
            Broken::TooLarge(n) => write!(f, "header is too large ({n} bytes, corelb reads at most {V2_MAX})"),
            Broken::ShortAddrs { family, len } => {
                write!(
                    f,
                    "broken header: PROXY protocol v2 family {family} with {len} address bytes"
                )
            }
        }
    }
}

/// What the bytes read so far give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Not a whole header yet, and nothing wrong so far: read more.
    More,
    Done(Header),
    Broken(Broken),
}

/// Reads a header at the start of `buf` (all the bytes received so far).
pub fn read(buf: &[u8]) -> Read {
    let sig = buf.len().min(V2_SIGNATURE.len());
    if buf.get(..sig) == V2_SIGNATURE.get(..sig) && !buf.is_empty() {
        return if buf.len() < 16 { Read::More } else { read_v2(buf) };
    }
    let pre = buf.len().min(V1_PREFIX.len());
    if buf.get(..pre) != V1_PREFIX.get(..pre) {
        return Read::Broken(broken_v1(buf));
    }
    let window = buf.get(..buf.len().min(V1_MAX)).unwrap_or_default();
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(cr) => read_v1(buf, cr),
        None if buf.len() >= V1_MAX => Read::Broken(broken_v1(buf)),
        None => Read::More,
    }
}

/// nginx's message: the input up to its first CR or LF.
fn broken_v1(buf: &[u8]) -> Broken {
    let end = buf
        .iter()
        .take(V1_MAX)
        .position(|&c| c == b'\r' || c == b'\n')
        .unwrap_or(buf.len().min(V1_MAX));
    Broken::Header(buf.get(..end).unwrap_or_default().to_vec())
}

/// A v1 line whose CRLF starts at `cr` (nginx's parse of `PROXY TCP4|TCP6 SRC DST SPORT DPORT` or `UNKNOWN`).
fn read_v1(buf: &[u8], cr: usize) -> Read {
    let len = cr + 2;
    let line = buf.get(V1_PREFIX.len()..cr).unwrap_or_default();
    if line.starts_with(b"UNKNOWN") {
        return Read::Done(Header {
            len,
            addrs: None,
            tlvs: 0..0,
        });
    }
    let addrs = (|| {
        let rest = line.strip_prefix(b"TCP4 ").or_else(|| line.strip_prefix(b"TCP6 "))?;
        let mut fields = rest.split(|&c| c == b' ');
        let src = addr_field(fields.next()?)?;
        let dst = addr_field(fields.next()?)?;
        let src_port = port_field(fields.next()?)?;
        let dst_port = port_field(fields.next()?)?;
        fields.next().is_none().then_some(ProxyAddrs {
            src,
            dst,
            src_port,
            dst_port,
        })
    })();
    match addrs {
        Some(a) => Read::Done(Header {
            len,
            addrs: Some(a),
            tlvs: 0..0,
        }),
        None => Read::Broken(broken_v1(buf)),
    }
}

/// nginx's `ngx_proxy_protocol_read_addr`: hex digits, `.` and `:` only.
fn addr_field(f: &[u8]) -> Option<AddrText> {
    if f.is_empty() || !f.iter().all(|c| c.is_ascii_hexdigit() || *c == b'.' || *c == b':') {
        return None;
    }
    AddrText::from_bytes(f)
}

/// nginx's `ngx_proxy_protocol_read_port`: decimal, 0 to 65535.
fn port_field(f: &[u8]) -> Option<u16> {
    if f.is_empty() || f.len() > 5 || !f.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(f).ok()?.parse().ok()
}

/// A v2 header (its 16 fixed bytes are in `buf`).
fn read_v2(buf: &[u8]) -> Read {
    let (Some(&ver_cmd), Some(&fam_tr), Some(hi), Some(lo)) = (buf.get(12), buf.get(13), buf.get(14), buf.get(15))
    else {
        return Read::More;
    };
    if ver_cmd >> 4 != 2 {
        return Read::Broken(Broken::Version(ver_cmd >> 4));
    }
    let total = 16 + usize::from(u16::from_be_bytes([*hi, *lo]));
    if total > V2_MAX {
        return Read::Broken(Broken::TooLarge(total));
    }
    let Some(body) = buf.get(16..total) else {
        return Read::More;
    };
    let none = Header {
        len: total,
        addrs: None,
        tlvs: total..total,
    };
    // only PROXY over STREAM carries addresses; LOCAL, datagrams and other families go on without them
    if ver_cmd & 0x0f != 1 || fam_tr & 0x0f != 1 {
        return Read::Done(none);
    }
    let family = fam_tr >> 4;
    let (src, dst, ports, used) = match family {
        1 if body.len() >= 12 => {
            let ip = |r: Range<usize>| -> IpAddr {
                let mut o = [0u8; 4];
                o.copy_from_slice(body.get(r).unwrap_or(&[0; 4]));
                Ipv4Addr::from(o).into()
            };
            (ip(0..4), ip(4..8), 8, 12)
        }
        2 if body.len() >= 36 => {
            let ip = |r: Range<usize>| -> IpAddr {
                let mut o = [0u8; 16];
                o.copy_from_slice(body.get(r).unwrap_or(&[0; 16]));
                Ipv6Addr::from(o).into()
            };
            (ip(0..16), ip(16..32), 32, 36)
        }
        1 | 2 => {
            return Read::Broken(Broken::ShortAddrs {
                family,
                len: body.len(),
            })
        }
        _ => return Read::Done(none),
    };
    let port = |at: usize| {
        u16::from_be_bytes([
            body.get(at).copied().unwrap_or(0),
            body.get(at + 1).copied().unwrap_or(0),
        ])
    };
    Read::Done(Header {
        len: total,
        addrs: Some(ProxyAddrs {
            src: AddrText::from_ip(src),
            dst: AddrText::from_ip(dst),
            src_port: port(ports),
            dst_port: port(ports + 2),
        }),
        tlvs: 16 + used..total,
    })
}

/// A TLV list that does not hold together (nginx's "broken PROXY protocol TLV").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokenTlv;

impl fmt::Display for BrokenTlv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("broken PROXY protocol TLV")
    }
}

/// nginx's `ngx_proxy_protocol_lookup_tlv`: the value of the first TLV of type `kind` in `tlvs`.
fn lookup(tlvs: &[u8], kind: u16) -> Result<Option<&[u8]>, BrokenTlv> {
    let mut rest = tlvs;
    while !rest.is_empty() {
        let (Some(&t), Some(&hi), Some(&lo)) = (rest.first(), rest.get(1), rest.get(2)) else {
            return Err(BrokenTlv);
        };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        let value = rest.get(3..3 + len).ok_or(BrokenTlv)?;
        if u16::from(t) == kind {
            return Ok(Some(value));
        }
        rest = rest.get(3 + len..).unwrap_or_default();
    }
    Ok(None)
}

/// Appends the value of the TLV `name` from `tlvs` (a v2 header's TLV bytes) to `out`: nothing when it is not
/// there; an error for a list that does not hold together.
pub fn append_tlv(tlvs: &[u8], name: TlvName, out: &mut Vec<u8>) -> Result<(), BrokenTlv> {
    let sub = |kind: u16| -> Result<Option<&[u8]>, BrokenTlv> {
        let Some(ssl) = lookup(tlvs, TLV_SSL)? else {
            return Ok(None);
        };
        // the `ssl` TLV: one byte of client flags, four of verify, then its sub-TLVs
        let subs = ssl.get(5..).ok_or(BrokenTlv)?;
        lookup(subs, kind)
    };
    let value = match name {
        TlvName::Top(kind) => lookup(tlvs, kind)?,
        TlvName::Ssl(kind) => sub(kind)?,
        TlvName::SslVerify => {
            let Some(ssl) = lookup(tlvs, TLV_SSL)? else {
                return Ok(());
            };
            let v = ssl.get(1..5).ok_or(BrokenTlv)?;
            let verify = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            let _ = write!(out, "{verify}");
            return Ok(());
        }
        TlvName::Unknown => None,
    };
    out.extend_from_slice(value.unwrap_or_default());
    Ok(())
}

/// Writes nginx's v1 header for a connection from `client` to `local` (`ngx_proxy_protocol_write`): `PROXY TCP4
/// 127.0.0.1 127.0.0.1 40000 8080\r\n`.
pub fn write_v1(client: SocketAddr, local: SocketAddr, out: &mut Vec<u8>) {
    use crate::config::unix_addr::is_unix;
    // a unix-domain client: nginx's `PROXY UNKNOWN` (and for a TCP client of a unix listener, whose local address
    // has no IP or port, where nginx would write the path into a TCP line)
    if is_unix(&client) || is_unix(&local) {
        out.extend_from_slice(b"PROXY UNKNOWN\r\n");
        return;
    }
    let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    let _ = write!(
        out,
        "PROXY {family} {} {} {} {}\r\n",
        client.ip(),
        local.ip(),
        client.port(),
        local.port()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_unix_client_gets_nginx_s_unknown_line() {
        let mut out = Vec::new();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        write_v1(crate::config::unix_addr::unnamed(), local, &mut out);
        assert_eq!(out, b"PROXY UNKNOWN\r\n");
        out.clear();
        write_v1("127.0.0.2:1234".parse().unwrap(), local, &mut out);
        assert_eq!(out, b"PROXY TCP4 127.0.0.2 127.0.0.1 1234 8080\r\n");
    }

    fn done(buf: &[u8]) -> Header {
        match read(buf) {
            Read::Done(h) => h,
            other => panic!("{other:?}"),
        }
    }

    fn text(a: &AddrText) -> &str {
        std::str::from_utf8(a.as_bytes()).unwrap()
    }

    fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut p = V2_SIGNATURE.to_vec();
        p.push(ver_cmd);
        p.push(fam);
        p.extend_from_slice(&(body.len() as u16).to_be_bytes());
        p.extend_from_slice(body);
        p
    }

    fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
        let mut t = vec![kind];
        t.extend_from_slice(&(value.len() as u16).to_be_bytes());
        t.extend_from_slice(value);
        t
    }

    const INET: [u8; 12] = [192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e];

    #[test]
    fn v1_tcp4_and_tcp6() {
        let h = done(b"PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\nGET /");
        assert_eq!(h.len, 41);
        let a = h.addrs.unwrap();
        assert_eq!(
            (text(&a.src), text(&a.dst), a.src_port, a.dst_port),
            ("192.0.2.1", "192.0.2.2", 123, 5678)
        );
        assert_eq!(a.client(), Some("192.0.2.1:123".parse().unwrap()));
        let a = done(b"PROXY TCP6 2001:Db8::1 2001:Db8::2 123 5678\r\n").addrs.unwrap();
        // the text as sent; the address it reads as
        assert_eq!(text(&a.src), "2001:Db8::1");
        assert_eq!(a.src.ip(), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(h.tlvs, 0..0);
    }

    #[test]
    fn v1_unknown_has_no_addresses() {
        assert_eq!(done(b"PROXY UNKNOWN\r\n").addrs, None);
        let h = done(b"PROXY UNKNOWN 1 2 3 4 5 6\r\nrest");
        assert_eq!((h.len, h.addrs), (27, None));
        // an address that is no address: kept as text, no client address for realip
        let a = done(b"PROXY TCP4 1.2.3 ::: 1 2\r\n").addrs.unwrap();
        assert_eq!((text(&a.src), a.client()), ("1.2.3", None));
    }

    #[test]
    fn v1_waits_for_its_line() {
        assert_eq!(read(b""), Read::More);
        assert_eq!(read(b"PRO"), Read::More);
        assert_eq!(read(b"PROXY TCP4 192.0.2.1 "), Read::More);
        assert_eq!(read(b"\r\n\r\n\0\r"), Read::More);
    }

    #[test]
    fn v1_malformed() {
        let broken = |b: &[u8], shown: &str| assert_eq!(read(b), Read::Broken(Broken::Header(shown.into())), "{b:?}");
        broken(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1");
        broken(b"PROXY TCP5 1.2.3.4 1.2.3.5 1 2\r\n", "PROXY TCP5 1.2.3.4 1.2.3.5 1 2");
        broken(b"PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n", "PROXY TCP4 1.2.3.4 1.2.3.5 1");
        broken(
            b"PROXY TCP4 1.2.3.4 1.2.3.5 1 65536\r\n",
            "PROXY TCP4 1.2.3.4 1.2.3.5 1 65536",
        );
        broken(
            b"PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3\r\n",
            "PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3",
        );
        broken(b"PROXY TCP4 1.2.3.x 1.2.3.5 1 2\r\n", "PROXY TCP4 1.2.3.x 1.2.3.5 1 2");
        broken(b"PROXY TCP4 1.2.3.4  1 2\r\n", "PROXY TCP4 1.2.3.4  1 2");
        broken(b"PROXY\r\n", "PROXY");
        broken(b"PROXY TCP4 1.2.3.4\n1.2.3.5 1 2\r\n", "PROXY TCP4 1.2.3.4");
        // no CRLF within nginx's 107 bytes
        let long = [b"PROXY TCP4 ".as_slice(), &[b'1'; 120]].concat();
        assert_eq!(read(&long), Read::Broken(Broken::Header(long[..V1_MAX].to_vec())));
        let message = Broken::Header(b"GET /".to_vec()).to_string();
        assert_eq!(message, "broken header: \"GET /\"");
    }

    #[test]
    fn v2_inet_and_inet6() {
        let mut p = v2(0x21, 0x11, &INET);
        p.extend_from_slice(b"GET /");
        let h = done(&p);
        assert_eq!((h.len, h.tlvs.clone()), (28, 28..28));
        let a = h.addrs.unwrap();
        assert_eq!(
            (text(&a.src), text(&a.dst), a.src_port, a.dst_port),
            ("192.0.2.1", "192.0.2.2", 123, 5678)
        );
        let mut body = Vec::new();
        body.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        body.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
        body.extend_from_slice(&[0, 123, 0x16, 0x2e]);
        let a = done(&v2(0x21, 0x21, &body)).addrs.unwrap();
        assert_eq!((text(&a.src), text(&a.dst)), ("2001:db8::1", "2001:db8::2"));
    }

    #[test]
    fn v2_without_addresses() {
        // LOCAL command, UDP transport, UNIX and UNSPEC families: the header is skipped, no addresses
        for (vc, fam) in [(0x20, 0x11), (0x21, 0x12), (0x21, 0x31), (0x21, 0x01)] {
            let h = done(&v2(vc, fam, &INET));
            assert_eq!((h.len, h.addrs), (28, None), "{vc:x} {fam:x}");
        }
    }

    #[test]
    fn v2_malformed() {
        assert_eq!(read(&v2(0x11, 0x11, &INET)), Read::Broken(Broken::Version(1)));
        assert_eq!(read(&v2(0x31, 0x11, &INET)), Read::Broken(Broken::Version(3)));
        // truncated: waits for the rest
        let p = v2(0x21, 0x11, &INET);
        for cut in 1..p.len() {
            assert_eq!(read(&p[..cut]), Read::More, "{cut}");
        }
        // an address block too short for its family
        assert_eq!(
            read(&v2(0x21, 0x11, &INET[..11])),
            Read::Broken(Broken::ShortAddrs { family: 1, len: 11 })
        );
        assert_eq!(
            read(&v2(0x21, 0x21, &INET)),
            Read::Broken(Broken::ShortAddrs { family: 2, len: 12 })
        );
        // oversized: refused from its fixed part, before the rest is read
        let mut big = V2_SIGNATURE.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0x0f, 0xf1]);
        assert_eq!(read(&big), Read::Broken(Broken::TooLarge(16 + 0x0ff1)));
        let mut max = V2_SIGNATURE.to_vec();
        max.extend_from_slice(&[0x21, 0x11, 0x0f, 0xf0]);
        assert_eq!(read(&max), Read::More);
        // a bad signature is no v2 header, and no v1 either
        let mut bad = v2(0x21, 0x11, &INET);
        bad[11] = b'X';
        assert_eq!(read(&bad), Read::Broken(Broken::Header(Vec::new())));
    }

    fn with_tlvs(tlvs: &[u8]) -> (Vec<u8>, Header) {
        let body = [INET.as_slice(), tlvs].concat();
        let p = v2(0x21, 0x11, &body);
        let h = done(&p);
        (p, h)
    }

    fn value(tlvs: &[u8], name: &str) -> Result<String, BrokenTlv> {
        let mut out = Vec::new();
        append_tlv(tlvs, TlvName::parse(name).unwrap(), &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn tlvs_by_name_and_number() {
        let sub = [tlv(0x21, b"TLSv1.2"), tlv(0x22, b"example.com")].concat();
        let ssl = [&[0x01][..], &255u32.to_be_bytes(), &sub].concat();
        let list = [
            tlv(0x01, b"ALPN1"),
            tlv(0x02, b"localhost"),
            tlv(0x20, &ssl),
            tlv(0xae, b"12345"),
        ]
        .concat();
        let (p, h) = with_tlvs(&list);
        let t = &p[h.tlvs.clone()];
        assert_eq!(t, list.as_slice());
        assert_eq!(value(t, "alpn").unwrap(), "ALPN1");
        assert_eq!(value(t, "0x01").unwrap(), "ALPN1");
        assert_eq!(value(t, "0x1").unwrap(), "ALPN1");
        assert_eq!(value(t, "authority").unwrap(), "localhost");
        assert_eq!(value(t, "0x000ae").unwrap(), "12345");
        assert_eq!(value(t, "ssl_verify").unwrap(), "255");
        assert_eq!(value(t, "ssl_version").unwrap(), "TLSv1.2");
        assert_eq!(value(t, "ssl_0x22").unwrap(), "example.com");
        assert_eq!(value(t, "ssl_cipher").unwrap(), "");
        assert_eq!(value(t, "netns").unwrap(), "");
        assert_eq!(value(t, "0x100").unwrap(), "");
        assert_eq!(value(t, "nope").unwrap(), "");
        assert_eq!(TlvName::parse("nope"), Some(TlvName::Unknown));
        assert_eq!(TlvName::parse("0x"), None);
        assert_eq!(TlvName::parse("0xzz"), None);
    }

    #[test]
    fn tlv_overrun_is_broken() {
        // a TLV claiming more bytes than the header has, and a TLV cut inside its own head
        let over = [&[0x01, 0x00, 0x09][..], b"short"].concat();
        let (p, h) = with_tlvs(&over);
        assert_eq!(value(&p[h.tlvs.clone()], "alpn"), Err(BrokenTlv));
        let (p, h) = with_tlvs(&[0x01, 0x00]);
        assert_eq!(value(&p[h.tlvs.clone()], "alpn"), Err(BrokenTlv));
        // an `ssl` TLV too short for its verify field
        let (p, h) = with_tlvs(&tlv(0x20, &[1, 0]));
        assert_eq!(value(&p[h.tlvs.clone()], "ssl_verify"), Err(BrokenTlv));
        assert_eq!(value(&p[h.tlvs.clone()], "ssl_cn"), Err(BrokenTlv));
        // a TLV found before the broken one is still found, as nginx's walk finds it
        let (p, h) = with_tlvs(&[tlv(0x05, b"U").as_slice(), &[0x01, 0x00, 0x09]].concat());
        assert_eq!(value(&p[h.tlvs.clone()], "unique_id").unwrap(), "U");
    }

    #[test]
    fn writes_nginx_v1() {
        let mut out = Vec::new();
        write_v1(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
            &mut out,
        );
        assert_eq!(out, b"PROXY TCP4 127.0.0.1 127.0.0.1 40000 8080\r\n");
        out.clear();
        write_v1(
            "[::1]:5".parse().unwrap(),
            "[2001:db8::2]:80".parse().unwrap(),
            &mut out,
        );
        assert_eq!(out, b"PROXY TCP6 ::1 2001:db8::2 5 80\r\n");
        // what it writes reads back
        let a = done(&out).addrs.unwrap();
        assert_eq!(a.client(), Some("[::1]:5".parse().unwrap()));
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = read(&bytes);
            for n in [TlvName::Top(1), TlvName::Ssl(0x22), TlvName::SslVerify] {
                let _ = append_tlv(&bytes, n, &mut Vec::new());
            }
        }

        #[test]
        fn never_panics_after_a_signature(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
            let p = [V2_SIGNATURE.as_slice(), &tail].concat();
            if let Read::Done(h) = read(&p) {
                prop_assert!(h.len <= p.len() && h.tlvs.end <= p.len() && h.tlvs.start <= h.tlvs.end);
                let _ = append_tlv(&p[h.tlvs.clone()], TlvName::SslVerify, &mut Vec::new());
            }
            let v1 = [b"PROXY ".as_slice(), &tail].concat();
            if let Read::Done(h) = read(&v1) {
                prop_assert!(h.len <= v1.len() && h.len <= V1_MAX);
            }
        }
    }
}
