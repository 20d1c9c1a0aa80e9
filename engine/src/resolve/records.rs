//! Blocking DNS exchanges for the upstream name resolver (one thread for the process, off every shard): a query
//! for one name's `A`, `AAAA` or `SRV` records over UDP to the name servers in turn, every [`super::RESEND`] to
//! the next until `resolver_timeout`, again over TCP when the answer is cut; what the answer holds (addresses,
//! service records, a CNAME to follow, the least TTL), by hickory-proto.

use super::dns::DnsError;
use crate::config::resolver::ResolverConf;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// One `SRV` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Srv {
    pub priority: u16,
    /// nginx reads a weight of 0 as 1.
    pub weight: u16,
    pub port: u16,
    /// The target name (lower case, no trailing dot).
    pub target: String,
}

/// What one answer holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    /// Addresses of the asked type (`A` or `AAAA`).
    pub addrs: Vec<IpAddr>,
    /// `SRV` records (when `SRV` was asked).
    pub srvs: Vec<Srv>,
    /// A CNAME whose target has no records of the asked type in this answer.
    pub cname: Option<String>,
    /// The least TTL of the records, in seconds (0 without records).
    pub ttl: u32,
    truncated: bool,
}

/// `name`'s records of `kind` by `conf`'s name servers, starting at server `first`, counted in the resolver's
/// status zone.
pub fn ask(conf: &ResolverConf, name: &str, kind: RecordType, first: usize) -> Result<Records, DnsError> {
    use corelb_shared_state::Asked;
    conf.count_asked(if kind == RecordType::SRV {
        Asked::Srv
    } else {
        Asked::Name
    });
    let r = ask_servers(conf, name, kind, first);
    conf.count_answered(super::dns::answered(&r));
    r
}

/// [`ask`] without the counting.
fn ask_servers(conf: &ResolverConf, name: &str, kind: RecordType, first: usize) -> Result<Records, DnsError> {
    let deadline = Instant::now() + conf.timeout;
    let mut at = first;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let server = conf.servers.get(at % conf.servers.len().max(1));
        let Some(&server) = server.filter(|_| !left.is_zero()) else {
            return Err(DnsError::TimedOut);
        };
        at = at.wrapping_add(1);
        let id: u16 = rand::random();
        let query = query(id, name, kind)?;
        let wait = left.min(super::RESEND);
        let started = Instant::now();
        match udp(server, id, kind, &query, wait) {
            Ok(Some(r)) if r.truncated => return tcp(server, id, kind, &query, left),
            Ok(Some(r)) => return Ok(r),
            Err(e) => return Err(e),
            // no answer in time, or the server unreachable: the next one, after the resend interval
            Ok(None) => std::thread::sleep(wait.saturating_sub(started.elapsed())),
        }
    }
}

fn query(id: u16, name: &str, kind: RecordType) -> Result<Vec<u8>, DnsError> {
    let name = Name::from_ascii(name).map_err(|_| DnsError::BadName)?;
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name, kind));
    m.to_vec().map_err(|_| DnsError::BadName)
}

/// One UDP exchange: the answer, or `Ok(None)` when none came within `wait`.
fn udp(
    server: SocketAddr,
    id: u16,
    kind: RecordType,
    query: &[u8],
    wait: Duration,
) -> Result<Option<Records>, DnsError> {
    let local: SocketAddr = if server.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let Ok(sock) = UdpSocket::bind(local) else {
        return Ok(None);
    };
    if sock.connect(server).is_err() || sock.send(query).is_err() {
        return Ok(None);
    }
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; super::UDP_MAX];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
            return Ok(None);
        }
        let Ok(n) = sock.recv(&mut buf) else {
            return Ok(None);
        };
        if let Some(r) = decode(id, kind, buf.get(..n).unwrap_or_default())? {
            return Ok(Some(r));
        }
    }
}

/// The query again over TCP (RFC 1035 4.2.2: each message after its two-byte length).
fn tcp(server: SocketAddr, id: u16, kind: RecordType, query: &[u8], left: Duration) -> Result<Records, DnsError> {
    let exchange = || -> std::io::Result<Vec<u8>> {
        let mut conn = TcpStream::connect_timeout(&server, left)?;
        conn.set_read_timeout(Some(left))?;
        conn.set_write_timeout(Some(left))?;
        let len = u16::try_from(query.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let mut out = Vec::with_capacity(query.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(query);
        conn.write_all(&out)?;
        let mut len = [0u8; 2];
        conn.read_exact(&mut len)?;
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        conn.read_exact(&mut msg)?;
        Ok(msg)
    };
    match exchange() {
        Ok(msg) => match decode(id, kind, &msg)? {
            Some(r) if !r.truncated => Ok(r),
            _ => Err(DnsError::Format),
        },
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            Err(DnsError::TimedOut)
        }
        Err(_) => Err(DnsError::ServFail),
    }
}

/// What `bytes` answers to query `id` for `kind`: `Ok(None)` when it is no answer to it (the caller keeps waiting).
pub fn decode(id: u16, kind: RecordType, bytes: &[u8]) -> Result<Option<Records>, DnsError> {
    let Ok(m) = Message::from_vec(bytes) else {
        return Ok(None);
    };
    if m.id() != id || m.message_type() != MessageType::Response {
        return Ok(None);
    }
    let mut r = Records {
        truncated: m.truncated(),
        ..Records::default()
    };
    if r.truncated {
        return Ok(Some(r));
    }
    match m.response_code() {
        ResponseCode::NoError => {}
        ResponseCode::FormErr => return Err(DnsError::Format),
        ResponseCode::ServFail => return Err(DnsError::ServFail),
        ResponseCode::NXDomain => return Err(DnsError::NotFound),
        ResponseCode::NotImp => return Err(DnsError::NotImplemented),
        _ => return Err(DnsError::Refused),
    }
    let mut ttl = u32::MAX;
    for rec in m.answers() {
        match (kind, rec.data()) {
            (RecordType::A, RData::A(a)) => r.addrs.push(IpAddr::V4(a.0)),
            (RecordType::AAAA, RData::AAAA(a)) => r.addrs.push(IpAddr::V6(a.0)),
            (RecordType::SRV, RData::SRV(s)) => r.srvs.push(Srv {
                priority: s.priority(),
                weight: s.weight().max(1),
                port: s.port(),
                target: name_text(s.target()),
            }),
            (_, RData::CNAME(c)) => {
                r.cname = Some(name_text(&c.0));
                continue;
            }
            _ => continue,
        }
        ttl = ttl.min(rec.ttl());
    }
    if !r.addrs.is_empty() || !r.srvs.is_empty() {
        r.cname = None;
        r.ttl = ttl;
    }
    Ok(Some(r))
}

/// A name as text: lower case, without the trailing dot.
fn name_text(n: &Name) -> String {
    n.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME, SRV};
    use hickory_proto::rr::Record;

    fn reply(q: &[u8], data: Vec<RData>) -> Vec<u8> {
        let q = Message::from_vec(q).unwrap();
        let mut m = Message::new();
        m.set_id(q.id()).set_message_type(MessageType::Response);
        let asked = q.queries()[0].clone();
        for d in data {
            m.add_answer(Record::from_rdata(asked.name().clone(), 30, d));
        }
        m.add_query(asked);
        m.to_vec().unwrap()
    }

    #[test]
    fn srv_records_cnames_and_addresses() {
        let q = query(9, "_http._tcp.example.net", RecordType::SRV).unwrap();
        let target = Name::from_ascii("A.example.net.").unwrap();
        let r = reply(&q, vec![RData::SRV(SRV::new(10, 0, 8080, target))]);
        let got = decode(9, RecordType::SRV, &r).unwrap().unwrap();
        let want = Srv {
            priority: 10,
            weight: 1,
            port: 8080,
            target: "a.example.net".into(),
        };
        assert_eq!((got.srvs, got.ttl), (vec![want], 30));
        let q = query(3, "example.net", RecordType::A).unwrap();
        let alias = Name::from_ascii("alias.example.net.").unwrap();
        let r = reply(&q, vec![RData::CNAME(CNAME(alias.clone()))]);
        let got = decode(3, RecordType::A, &r).unwrap().unwrap();
        assert_eq!(got.cname.as_deref(), Some("alias.example.net"));
        let r = reply(
            &q,
            vec![RData::CNAME(CNAME(alias)), RData::A(A("127.0.0.1".parse().unwrap()))],
        );
        let got = decode(3, RecordType::A, &r).unwrap().unwrap();
        assert_eq!(
            (got.addrs.len(), got.cname),
            (1, None),
            "a CNAME with its records needs no second query"
        );
        assert_eq!(decode(4, RecordType::A, &r), Ok(None));
    }
}
