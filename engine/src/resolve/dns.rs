//! DNS messages for the resolver: a query for one name's `A` or `AAAA` records, and what an answer says (its
//! addresses, their least TTL, whether it was cut), encoded and decoded by hickory-proto.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use std::net::IpAddr;

/// The record type asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `A`
    V4,
    /// `AAAA`
    V6,
}

impl Family {
    fn record_type(self) -> RecordType {
        match self {
            Family::V4 => RecordType::A,
            Family::V6 => RecordType::AAAA,
        }
    }
}

/// Why a name has no addresses, with nginx's codes and texts (`ngx_resolver_strerror`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    #[error("1: Format error")]
    Format,
    #[error("2: Server failure")]
    ServFail,
    #[error("3: Host not found")]
    NotFound,
    #[error("4: Unimplemented")]
    NotImplemented,
    #[error("5: Operation refused")]
    Refused,
    #[error("110: Operation timed out")]
    TimedOut,
    /// A name the DNS cannot carry (a label over 63 bytes, a name over 255).
    #[error("1: Format error")]
    BadName,
}

impl DnsError {
    /// How a query that failed so is counted in a resolver's status zone.
    pub fn answered(self) -> corelb_shared_state::Answered {
        use corelb_shared_state::Answered;
        match self {
            DnsError::Format => Answered::FormErr,
            DnsError::ServFail => Answered::ServFail,
            DnsError::NotFound => Answered::NxDomain,
            DnsError::NotImplemented => Answered::NotImp,
            DnsError::Refused => Answered::Refused,
            DnsError::TimedOut => Answered::TimedOut,
            DnsError::BadName => Answered::Unknown,
        }
    }
}

/// How a query that ended with `r` is counted in a resolver's status zone.
pub fn answered<T>(r: &Result<T, DnsError>) -> corelb_shared_state::Answered {
    r.as_ref()
        .map_or_else(|e| e.answered(), |_| corelb_shared_state::Answered::NoError)
}

/// One decoded answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The addresses of the asked type, in the answer's order.
    pub addrs: Vec<IpAddr>,
    /// The least TTL of those records, in seconds (0 without records).
    pub ttl: u32,
    /// The TC bit: the answer did not fit a UDP datagram and must be asked again over TCP.
    pub truncated: bool,
}

/// A recursive query for `name`'s records of `family`, with the message id `id`.
pub fn query(id: u16, name: &str, family: Family) -> Result<Vec<u8>, DnsError> {
    let name = Name::from_ascii(name).map_err(|_| DnsError::BadName)?;
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name, family.record_type()));
    m.to_vec().map_err(|_| DnsError::BadName)
}

/// What `bytes` answers to the query `id` for `family`: `Ok(None)` when it is no answer to that query (another
/// id, not a response: the caller keeps waiting, as nginx ignores such datagrams).
pub fn answer(id: u16, family: Family, bytes: &[u8]) -> Result<Option<Answer>, DnsError> {
    let Ok(m) = Message::from_vec(bytes) else {
        return Ok(None);
    };
    if m.id() != id || m.message_type() != MessageType::Response {
        return Ok(None);
    }
    if m.truncated() {
        return Ok(Some(Answer {
            addrs: Vec::new(),
            ttl: 0,
            truncated: true,
        }));
    }
    match m.response_code() {
        ResponseCode::NoError => {}
        ResponseCode::FormErr => return Err(DnsError::Format),
        ResponseCode::ServFail => return Err(DnsError::ServFail),
        ResponseCode::NXDomain => return Err(DnsError::NotFound),
        ResponseCode::NotImp => return Err(DnsError::NotImplemented),
        _ => return Err(DnsError::Refused),
    }
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    for r in m.answers() {
        let addr = match (family, r.data()) {
            (Family::V4, RData::A(a)) => IpAddr::V4(a.0),
            (Family::V6, RData::AAAA(a)) => IpAddr::V6(a.0),
            _ => continue,
        };
        addrs.push(addr);
        ttl = ttl.min(r.ttl());
    }
    Ok(Some(Answer {
        ttl: if addrs.is_empty() { 0 } else { ttl },
        addrs,
        truncated: false,
    }))
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA};
    use hickory_proto::rr::Record;

    /// A server's answer to `query_bytes`: `addrs` (of the asked type) with `ttl`, or `code`.
    pub fn reply(query_bytes: &[u8], addrs: &[IpAddr], ttl: u32, code: ResponseCode, truncated: bool) -> Vec<u8> {
        let q = Message::from_vec(query_bytes).unwrap();
        let mut m = Message::new();
        m.set_id(q.id())
            .set_message_type(MessageType::Response)
            .set_op_code(OpCode::Query)
            .set_response_code(code)
            .set_truncated(truncated);
        let asked = q.queries()[0].clone();
        for a in addrs {
            let data = match (asked.query_type(), a) {
                (RecordType::A, IpAddr::V4(v4)) => RData::A(A(*v4)),
                (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(*v6)),
                _ => continue,
            };
            m.add_answer(Record::from_rdata(asked.name().clone(), ttl, data));
        }
        m.add_query(asked);
        m.to_vec().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_query_and_its_answer() {
        let q = query(0x1234, "backend.example", Family::V4).unwrap();
        assert_eq!(&q[..2], &[0x12, 0x34], "the id leads the message");
        assert_eq!(q[2] & 0x01, 0x01, "recursion desired");
        let r = reply(&q, &[ip("10.0.0.1"), ip("10.0.0.2")], 300, ResponseCode::NoError, false);
        let a = answer(0x1234, Family::V4, &r).unwrap().unwrap();
        assert_eq!(a.addrs, [ip("10.0.0.1"), ip("10.0.0.2")]);
        assert_eq!(a.ttl, 300);
        assert!(!a.truncated);
        // another id, or the query itself echoed back, is no answer
        assert_eq!(answer(0x1235, Family::V4, &r), Ok(None));
        assert_eq!(answer(0x1234, Family::V4, &q), Ok(None));
        assert_eq!(answer(0x1234, Family::V4, b"\x12\x34garbage"), Ok(None));
    }

    #[test]
    fn aaaa_codes_and_truncation() {
        let q = query(7, "h", Family::V6).unwrap();
        let r = reply(&q, &[ip("::1")], 5, ResponseCode::NoError, false);
        assert_eq!(answer(7, Family::V6, &r).unwrap().unwrap().addrs, [ip("::1")]);
        let none = reply(&q, &[], 5, ResponseCode::NoError, false);
        assert!(answer(7, Family::V6, &none).unwrap().unwrap().addrs.is_empty());
        let nx = reply(&q, &[], 5, ResponseCode::NXDomain, false);
        assert_eq!(answer(7, Family::V6, &nx), Err(DnsError::NotFound));
        let fail = reply(&q, &[], 5, ResponseCode::ServFail, false);
        assert_eq!(answer(7, Family::V6, &fail), Err(DnsError::ServFail));
        let cut = reply(&q, &[], 5, ResponseCode::NoError, true);
        assert!(answer(7, Family::V6, &cut).unwrap().unwrap().truncated);
        assert_eq!(DnsError::NotFound.to_string(), "3: Host not found");
        assert_eq!(query(1, &"a".repeat(64), Family::V4), Err(DnsError::BadName));
    }
}
