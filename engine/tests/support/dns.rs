//! A DNS server for tests on a loopback thread (UDP and TCP on one port), its messages made by hickory-proto: each
//! name answers the addresses it is given (with their TTL), an error code, nothing at all, or, over UDP, a cut
//! answer that sends the client to TCP, `SRV` records, or a CNAME. Counts the queries per name, type and transport.

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the server answers for a name.
#[derive(Debug, Clone)]
pub enum Answer {
    /// These addresses (those of the asked type), with this TTL.
    Addrs(Vec<IpAddr>, u32),
    /// This response code and no records.
    Code(ResponseCode),
    /// No answer at all.
    Silent,
    /// Over UDP a cut answer (TC set); over TCP these addresses.
    TcpOnly(Vec<IpAddr>, u32),
    /// These addresses with this TTL, after a pause (the server answers nothing else meanwhile).
    Late(Vec<IpAddr>, u32, Duration),
    /// To `SRV` queries these records (priority, weight, port, target), with this TTL.
    Srv(Vec<(u16, u16, u16, String)>, u32),
    /// A CNAME to this name (whose records the client asks for itself), with this TTL.
    Cname(String, u32),
}

#[derive(Debug, Default)]
struct State {
    names: HashMap<String, Answer>,
    /// (name, type, "udp"|"tcp") -> queries seen.
    seen: HashMap<(String, RecordType, &'static str), usize>,
}

/// A running server.
pub struct DnsServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl DnsServer {
    /// Starts a server on a free loopback port (the same port for UDP and TCP).
    pub fn start() -> DnsServer {
        let (udp, tcp) = loop {
            let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
            let addr = udp.local_addr().expect("udp addr");
            if let Ok(tcp) = TcpListener::bind(addr) {
                break (udp, tcp);
            }
        };
        let addr = udp.local_addr().expect("udp addr");
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = udp.recv_from(&mut buf) {
                if let Some(reply) = reply(&st, &buf[..n], "udp") {
                    let _ = udp.send_to(&reply, from);
                }
            }
        });
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in tcp.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut len = [0u8; 2];
                if conn.read_exact(&mut len).is_err() {
                    continue;
                }
                let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                if conn.read_exact(&mut msg).is_err() {
                    continue;
                }
                if let Some(reply) = reply(&st, &msg, "tcp") {
                    let mut out = u16::try_from(reply.len()).expect("short").to_be_bytes().to_vec();
                    out.extend_from_slice(&reply);
                    let _ = conn.write_all(&out);
                }
            }
        });
        DnsServer { addr, state }
    }

    /// What `name` (lower case, no trailing dot) answers from now on.
    pub fn set(&self, name: &str, answer: Answer) {
        self.lock().names.insert(name.to_string(), answer);
    }

    /// The queries seen for `name` of `kind` over `transport` ("udp" or "tcp").
    pub fn queries(&self, name: &str, kind: RecordType, transport: &'static str) -> usize {
        self.lock()
            .seen
            .get(&(name.to_string(), kind, transport))
            .copied()
            .unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn reply(state: &Mutex<State>, query: &[u8], transport: &'static str) -> Option<Vec<u8>> {
    let q = Message::from_vec(query).ok()?;
    let asked = q.queries().first()?.clone();
    let name = asked.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
    let answer = {
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        *st.seen
            .entry((name.clone(), asked.query_type(), transport))
            .or_default() += 1;
        st.names
            .get(&name)
            .cloned()
            .unwrap_or(Answer::Code(ResponseCode::NXDomain))
    };
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .set_recursion_available(true);
    let (addrs, ttl) = match answer {
        Answer::Silent => return None,
        Answer::Late(a, ttl, pause) => {
            std::thread::sleep(pause);
            (a, ttl)
        }
        Answer::Code(code) => {
            m.set_response_code(code);
            (Vec::new(), 0)
        }
        Answer::TcpOnly(_, _) if transport == "udp" => {
            m.set_truncated(true);
            (Vec::new(), 0)
        }
        Answer::Addrs(a, ttl) | Answer::TcpOnly(a, ttl) => (a, ttl),
        Answer::Srv(records, ttl) => {
            for (priority, weight, port, target) in records {
                let Ok(target) = Name::from_ascii(format!("{target}.")) else {
                    continue;
                };
                if asked.query_type() == RecordType::SRV {
                    let data = RData::SRV(SRV::new(priority, weight, port, target));
                    m.add_answer(Record::from_rdata(asked.name().clone(), ttl, data));
                }
            }
            (Vec::new(), 0)
        }
        Answer::Cname(to, ttl) => {
            if let Ok(to) = Name::from_ascii(format!("{to}.")) {
                m.add_answer(Record::from_rdata(asked.name().clone(), ttl, RData::CNAME(CNAME(to))));
            }
            (Vec::new(), 0)
        }
    };
    for a in addrs {
        let data = match (asked.query_type(), a) {
            (RecordType::A, IpAddr::V4(v4)) => RData::A(A(v4)),
            (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(v6)),
            _ => continue,
        };
        m.add_answer(Record::from_rdata(asked.name().clone(), ttl, data));
    }
    m.add_query(asked);
    m.to_vec().ok()
}
