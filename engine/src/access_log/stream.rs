//! Stream sessions' access log lines (nginx's `ngx_stream_log_module`): what a session leaves in its record (the
//! addresses, the status nginx finalizes it with, the byte counts, and one entry per upstream try as nginx's
//! `ngx_stream_upstream_state_t`), rendered when the session ends into the shard's buffers. The records are kept
//! by the shard and reused: a session allocates nothing for its log once they have grown.

use super::clock::LogClock;
use super::record::TryPeer;
use super::render::{append_addr, append_ipv4, optional_seconds, seconds, three_digits};
use super::ShardLog;
use crate::config::log_format::{append_escaped, missing, needs_escape, Escape};
use crate::config::stream_format::{StreamFormat, StreamOp, StreamTls, StreamVar};
use crate::http::pages::append_decimal;
use crate::http::proxy_protocol::ProxyAddrs;
use crate::http::var_cache::VarCache;
use crate::http::vars::{ConnVars, ProxyVars, StreamVars};
use crate::snapshot::Snapshot;
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Records a shard keeps for reuse.
const SPARE_RECORDS: usize = 64;

/// nginx's session statuses (`NGX_STREAM_OK`, `..._BAD_GATEWAY`, ...).
pub const OK: u16 = 200;
pub const BAD_GATEWAY: u16 = 502;
pub const BAD_REQUEST: u16 = 400;
pub const FORBIDDEN: u16 = 403;
pub const INTERNAL_SERVER_ERROR: u16 = 500;
pub const SERVICE_UNAVAILABLE: u16 = 503;

/// One upstream try of a session.
#[derive(Debug, Clone, Copy)]
pub struct StreamTry {
    /// The peer, or (no live peer) the upstream, an index into the snapshot's stream plans.
    pub peer: TryPeer,
    pub started: Instant,
    pub connect: Option<Duration>,
    pub first_byte: Option<Duration>,
    /// `$upstream_session_time`: until the next try, or the end of the session.
    pub session: Option<Duration>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// One session's log facts.
#[derive(Debug)]
pub struct StreamRecord {
    /// Index of the snapshot's stream log set; 0 = the session is not logged (and nothing more is recorded).
    pub set: usize,
    pub started: Instant,
    pub connection: u64,
    pub remote: SocketAddr,
    pub local: SocketAddr,
    /// The connection's own peer (`$realip_remote_addr`), and what its PROXY protocol header said.
    pub peer: SocketAddr,
    pub proxy: Option<ProxyAddrs>,
    /// The header's v2 TLVs.
    pub tlvs: Vec<u8>,
    /// 0 until the session ends.
    pub status: u16,
    /// To the client and from it.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub tries: Vec<StreamTry>,
    /// A `return` value being put together.
    pub text: Vec<u8>,
    /// What `limit_conn` decided (`$limit_conn_status`).
    pub limit_conn: crate::http::limit_status::LimitStatus,
    /// A UDP session (`$protocol` is `UDP`).
    pub udp: bool,
    /// The session's TLS handshake (`listen ... ssl`), and what `ssl_preread` read.
    pub tls: Option<crate::tls::TlsFacts>,
    pub preread: Option<crate::tls::preread::Preread>,
}

impl Default for StreamRecord {
    fn default() -> Self {
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        StreamRecord {
            set: 0,
            started: Instant::now(),
            connection: 0,
            remote: any,
            local: any,
            peer: any,
            proxy: None,
            tlvs: Vec::new(),
            status: 0,
            bytes_sent: 0,
            bytes_received: 0,
            tries: Vec::with_capacity(4),
            text: Vec::new(),
            limit_conn: Default::default(),
            udp: false,
            tls: None,
            preread: None,
        }
    }
}

impl StreamRecord {
    /// Starts a session accepted now on `local` from `remote`, logged to `set`.
    pub fn begin(&mut self, set: usize, connection: u64, remote: SocketAddr, local: SocketAddr) {
        self.set = set;
        self.started = Instant::now();
        self.connection = connection;
        self.remote = remote;
        self.local = local;
        self.peer = remote;
        self.proxy = None;
        self.tlvs.clear();
        self.status = 0;
        self.bytes_sent = 0;
        self.bytes_received = 0;
        self.tries.clear();
        self.text.clear();
        self.limit_conn.begin();
        self.udp = false;
        self.tls = None;
        self.preread = None;
    }

    /// A try against `peer` starts (the previous one's session time ends here, as in nginx).
    pub fn try_start(&mut self, peer: TryPeer) {
        if self.set == 0 {
            return;
        }
        let now = Instant::now();
        if let Some(last) = self.tries.last_mut() {
            last.session.get_or_insert(now.saturating_duration_since(last.started));
        }
        self.tries.push(StreamTry {
            peer,
            started: now,
            connect: None,
            first_byte: None,
            session: None,
            bytes_sent: 0,
            bytes_received: 0,
        });
    }

    /// The current try connected.
    pub fn try_connected(&mut self) {
        if let Some(t) = self.tries.last_mut() {
            t.connect = Some(t.started.elapsed());
        }
    }

    /// No live peer in `upstream`: nginx's try named after the upstream, and a 502.
    pub fn no_live(&mut self, upstream: usize) {
        self.try_start(TryPeer::Upstream(upstream));
        self.status = BAD_GATEWAY;
    }

    /// The proxied session ended: the bytes each way (client side, upstream side) and when the first upstream
    /// byte came.
    pub fn proxied(&mut self, client: (u64, u64), upstream: (u64, u64), first_byte: Option<Instant>) {
        self.status = OK;
        (self.bytes_sent, self.bytes_received) = client;
        if let Some(t) = self.tries.last_mut() {
            (t.bytes_sent, t.bytes_received) = upstream;
            t.first_byte = first_byte.map(|at| at.saturating_duration_since(t.started));
        }
    }

    /// Closes the last try's session time at `now` (when the line is written).
    fn finish_tries(&mut self, now: Instant) {
        if let Some(last) = self.tries.last_mut() {
            last.session.get_or_insert(now.saturating_duration_since(last.started));
        }
    }
}

/// What a line needs beyond the record.
pub struct StreamContext<'a> {
    pub snap: &'a Snapshot,
    pub clock: &'a LogClock,
    pub now: Instant,
    /// The session's values of the stream block's maps (begun for it).
    pub maps: &'a VarCache,
}

/// Appends `format` for `rec`.
pub fn render(format: &StreamFormat, rec: &StreamRecord, cx: &StreamContext<'_>, out: &mut Vec<u8>) {
    for op in format.ops() {
        match op {
            StreamOp::Text(t) => out.extend_from_slice(t),
            StreamOp::Var(v) => value(*v, format.escape, rec, cx, out),
        }
    }
}

fn value(v: StreamVar, escape: Escape, rec: &StreamRecord, cx: &StreamContext<'_>, out: &mut Vec<u8>) {
    match v {
        StreamVar::RemoteAddr => addr_ip(out, &rec.remote),
        // nginx: a unix-domain client's binary address is its text (`unix:`)
        StreamVar::BinaryRemoteAddr if crate::config::unix_addr::is_unix(&rec.remote) => addr_ip(out, &rec.remote),
        StreamVar::BinaryRemoteAddr => match rec.remote.ip() {
            IpAddr::V4(ip) => append_escaped(out, &ip.octets(), escape),
            IpAddr::V6(ip) => append_escaped(out, &ip.octets(), escape),
        },
        // a unix-domain socket has no port: nginx writes nothing
        StreamVar::RemotePort => nonzero(out, rec.remote.port()),
        StreamVar::RealipRemoteAddr => addr_ip(out, &rec.peer),
        StreamVar::RealipRemotePort => nonzero(out, rec.peer.port()),
        StreamVar::ProxyProtocolAddr => {
            append_escaped(out, rec.proxy.as_ref().map_or(&[][..], |p| p.src.as_bytes()), escape)
        }
        StreamVar::ProxyProtocolServerAddr => {
            append_escaped(out, rec.proxy.as_ref().map_or(&[][..], |p| p.dst.as_bytes()), escape)
        }
        StreamVar::ProxyProtocolPort => nonzero(out, rec.proxy.map_or(0, |p| p.src_port)),
        StreamVar::ProxyProtocolServerPort => nonzero(out, rec.proxy.map_or(0, |p| p.dst_port)),
        StreamVar::ProxyProtocolTlv(name) => {
            let mut value = Vec::new();
            crate::http::vars::append_tlv(&rec.tlvs, name, &mut value);
            append_escaped(out, &value, escape);
        }
        StreamVar::ServerAddr => addr_ip(out, &rec.local),
        StreamVar::ServerPort => nonzero(out, rec.local.port()),
        StreamVar::Protocol => out.extend_from_slice(if rec.udp { b"UDP" } else { b"TCP" }),
        StreamVar::Connection => append_decimal(out, rec.connection),
        StreamVar::Pid => append_decimal(out, u64::from(std::process::id())),
        StreamVar::Hostname => append_escaped(out, hostname().as_bytes(), escape),
        StreamVar::NginxVersion => out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes()),
        StreamVar::Msec => cx.clock.append_msec(out),
        StreamVar::TimeLocal => out.extend_from_slice(&cx.clock.local),
        StreamVar::TimeIso8601 => out.extend_from_slice(&cx.clock.iso8601),
        StreamVar::Status => three_digits(out, u32::from(rec.status)),
        StreamVar::LimitConnStatus if !rec.limit_conn.conn_checked() => out.push(b'-'),
        StreamVar::LimitConnStatus => rec.limit_conn.append_conn(out),
        StreamVar::BytesSent => append_decimal(out, rec.bytes_sent),
        StreamVar::BytesReceived => append_decimal(out, rec.bytes_received),
        StreamVar::SessionTime => seconds(out, cx.now.saturating_duration_since(rec.started)),
        StreamVar::UpstreamAddr => tries(rec, escape, out, |t, o| match t.peer {
            TryPeer::Addr(a) => append_addr(o, a),
            TryPeer::Upstream(i) => {
                let name = cx.snap.stream_plans.get(i).map_or("", |p| p.name.as_str());
                append_escaped(o, name.as_bytes(), escape);
            }
        }),
        StreamVar::UpstreamBytesSent => tries(rec, escape, out, |t, o| append_decimal(o, t.bytes_sent)),
        StreamVar::UpstreamBytesReceived => tries(rec, escape, out, |t, o| append_decimal(o, t.bytes_received)),
        StreamVar::UpstreamConnectTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.connect)),
        StreamVar::UpstreamFirstByteTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.first_byte)),
        StreamVar::UpstreamSessionTime => tries(rec, escape, out, |t, o| optional_seconds(o, t.session)),
        StreamVar::Tls(t) => {
            let start = out.len();
            let var = t.var();
            match t {
                StreamTls::Client(c) => crate::tls::client_vars::append(rec.tls.as_ref(), c, out),
                StreamTls::Preread(p) => crate::tls::preread::append(rec.preread.as_ref(), p, out),
                _ => crate::tls::facts::append(rec.tls.as_ref(), &var, out),
            }
            if needs_escape(out.get(start..).unwrap_or_default(), escape) {
                let raw = out.split_off(start);
                append_escaped(out, &raw, escape);
            }
        }
        StreamVar::Map(i) => {
            let maps = stream_maps(cx.snap);
            let vars = StreamVars {
                conn: ConnVars {
                    remote: rec.remote,
                    local: rec.local,
                    peer: rec.peer,
                },
                proxy: ProxyVars {
                    addrs: rec.proxy.as_ref(),
                    tlvs: &rec.tlvs,
                },
                maps,
                cache: cx.maps,
                tls: rec.tls.as_ref(),
                preread: rec.preread.as_ref(),
            };
            let start = out.len();
            cx.maps.append_map(maps, i, &vars, out);
            if needs_escape(out.get(start..).unwrap_or_default(), escape) {
                // escaped from a copy (the line's buffer holds it): rare, map values are short words
                let raw = out.split_off(start);
                append_escaped(out, &raw, escape);
            }
        }
    }
}

/// The stream block's maps.
fn stream_maps(snap: &Snapshot) -> &[crate::config::map::Map] {
    snap.config.stream.as_ref().map_or(&[][..], |s| s.maps.as_slice())
}

/// nginx writes a PROXY protocol port only when it is not 0.
fn nonzero(out: &mut Vec<u8>, port: u16) {
    if port != 0 {
        append_decimal(out, u64::from(port));
    }
}

/// The address part of `addr` (`$remote_addr`, `$server_addr`): IPv4 without the formatting machinery, a
/// unix-domain socket as `unix:PATH`.
fn addr_ip(out: &mut Vec<u8>, addr: &std::net::SocketAddr) {
    match addr {
        std::net::SocketAddr::V4(v4) => append_ipv4(out, *v4.ip()),
        other => crate::http::vars::append_addr_ip(out, other),
    }
}

/// nginx's upstream lists: one value per try, `, ` between them; missing when there was no try.
fn tries(rec: &StreamRecord, escape: Escape, out: &mut Vec<u8>, each: impl Fn(&StreamTry, &mut Vec<u8>)) {
    if rec.tries.is_empty() {
        out.extend_from_slice(missing(escape));
        return;
    }
    for (i, t) in rec.tries.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        each(t, out);
    }
}

/// `$hostname`: the host's name, lower-cased as nginx keeps it (`ngx_cycle->hostname`).
pub fn hostname() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return String::new();
        }
        let len = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(buf.get(..len).unwrap_or_default()).to_ascii_lowercase()
    })
}

impl ShardLog {
    /// A record for a new session (a reused one when the shard has one).
    pub fn take_stream_record(&mut self) -> StreamRecord {
        self.stream_records.pop().unwrap_or_default()
    }

    /// Keeps a finished session's record for the next one.
    pub fn keep_stream_record(&mut self, rec: StreamRecord) {
        if self.stream_records.len() < SPARE_RECORDS {
            self.stream_records.push(rec);
        }
    }

    /// Renders `format` for the session of `rec` as it is now (a `return` value) into `out`.
    pub fn render_stream_value(
        &mut self,
        snap: &Snapshot,
        format: &StreamFormat,
        rec: &StreamRecord,
        out: &mut Vec<u8>,
    ) {
        self.clock.update();
        self.answer_vars.begin(stream_maps(snap).len());
        let cx = StreamContext {
            snap,
            clock: &self.clock,
            now: Instant::now(),
            maps: &self.answer_vars,
        };
        render(format, rec, &cx, out);
    }

    /// Writes the lines of `rec`'s set into this shard's buffers, handing full ones to `writer`.
    pub fn write_stream(&mut self, snap: &Snapshot, rec: &mut StreamRecord, writer: &super::writer::LogWriter) {
        let Some(set) = snap.access_logs.stream_sets.get(rec.set) else {
            return;
        };
        self.files_of(snap, writer);
        let now = Instant::now();
        rec.finish_tries(now);
        self.clock.update();
        self.answer_vars.begin(stream_maps(snap).len());
        let cx = StreamContext {
            snap,
            clock: &self.clock,
            now,
            maps: &self.answer_vars,
        };
        for t in set {
            if let Some(cond) = &t.cond {
                self.line.clear();
                render(cond, rec, &cx, &mut self.line);
                if self.line.is_empty() || self.line == b"0" {
                    continue;
                }
            }
            if let Some(path) = &t.path {
                let (mut name, mut line) = (
                    std::mem::take(&mut self.named_path),
                    std::mem::take(&mut self.named_line),
                );
                line.clear();
                render(&t.format, rec, &cx, &mut line);
                line.push(b'\n');
                name.clear();
                name.extend_from_slice(&path.lead);
                render(&path.format, rec, &cx, &mut name);
                let plan = std::sync::Arc::clone(path) as _;
                let mut ticket = 0;
                (self.named_path, self.named_line) = writer.send_named(plan, name, line, &mut ticket);
                continue;
            }
            let Some(buf) = self.bufs.get_mut(t.file) else {
                continue;
            };
            render(&t.format, rec, &cx, &mut buf.data);
            buf.data.push(b'\n');
            buf.since.get_or_insert(now);
            if buf.data.len() >= buf.buffer {
                buf.hand_over(writer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::Config;

    fn format(args: &[&str]) -> StreamFormat {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (f, unknown) = StreamFormat::compile("t", &args).unwrap();
        assert!(unknown.is_empty());
        f
    }

    fn line(f: &StreamFormat, rec: &mut StreamRecord) -> String {
        let zone = corelb_shared_state::Zone::new();
        let snap = Snapshot::build(Config::default(), &zone, 1).unwrap();
        let mut clock = LogClock::default();
        clock.update();
        let now = Instant::now();
        rec.finish_tries(now);
        let cx = StreamContext {
            snap: &snap,
            clock: &clock,
            now,
            maps: &VarCache::default(),
        };
        let mut out = Vec::new();
        render(f, rec, &cx, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// A stream `map` in a `return` value and in a log format (a map naming a map), read once per
    /// session from its connection's values.
    #[test]
    fn stream_maps_in_values_and_formats() {
        let text = "events {}\nstream {\n map $server_port $x { 8080 \"a b\"; default def; }\n \
                    map $remote_addr $y { default \"[$x]\"; }\n \
                    log_format f '$x|$y|$remote_port';\n \
                    server { listen 127.0.0.1:8080; return \"$y-${x}\"; }\n}\n";
        let config = crate::config::parse_str(text, std::path::Path::new("m.conf")).unwrap();
        let zone = corelb_shared_state::Zone::new();
        let snap = Snapshot::build(config, &zone, 1).unwrap();
        let server = &snap.config.stream.as_ref().unwrap().servers[0];
        let value = server.ret.clone().unwrap();
        assert_eq!(value.ops().len(), 3);
        let (log, unknown) = StreamFormat::compile_with("f", &["$x|$y|$remote_port".to_string()], &|n| {
            ["x", "y"].iter().position(|m| *m == n)
        })
        .unwrap();
        assert!(unknown.is_empty());
        let mut log_shard = ShardLog::default();
        let mut rec = session();
        for (local, want_value, want_line) in [
            ("127.0.0.1:8080", "[a b]-a b", "a b|[a b]|40000"),
            ("127.0.0.1:8081", "[def]-def", "def|[def]|40000"),
        ] {
            rec.local = local.parse().unwrap();
            let mut out = Vec::new();
            log_shard.render_stream_value(&snap, &value, &rec, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want_value);
            let mut out = Vec::new();
            log_shard.render_stream_value(&snap, &log, &rec, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want_line);
        }
    }

    fn session() -> StreamRecord {
        let mut rec = StreamRecord::default();
        rec.begin(
            1,
            7,
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.2:8088".parse().unwrap(),
        );
        rec
    }

    #[test]
    fn addresses_as_nginx_writes_them() {
        let mut rec = session();
        let f = format(&[
            "$binary_remote_addr:$remote_addr:$remote_port:",
            "$server_addr:$server_port:$protocol",
        ]);
        assert_eq!(
            line(&f, &mut rec),
            "\\x7F\\x00\\x00\\x01:127.0.0.1:40000:127.0.0.2:8088:TCP"
        );
        rec.remote = "[::1]:5".parse().unwrap();
        let f = format(&["escape=none", "$remote_addr $connection"]);
        assert_eq!(line(&f, &mut rec), "::1 7");
    }

    #[test]
    fn tries_are_listed_as_nginx_lists_them() {
        let mut rec = session();
        let f = format(&["$upstream_addr|$upstream_bytes_sent|$upstream_connect_time|$status"]);
        assert_eq!(line(&f, &mut rec), "-|-|-|000");
        let dead: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let live: SocketAddr = "127.0.0.1:2".parse().unwrap();
        rec.try_start(TryPeer::Addr(dead));
        rec.try_start(TryPeer::Addr(live));
        rec.try_connected();
        rec.proxied((3, 8), (8, 3), Some(Instant::now()));
        let f = format(&[
            "$upstream_addr|$upstream_bytes_sent:$upstream_bytes_received|$bytes_received:$bytes_sent|$status",
        ]);
        assert_eq!(line(&f, &mut rec), "127.0.0.1:1, 127.0.0.1:2|0, 8:0, 3|8:3|200");
        let f = format(&["$upstream_connect_time"]);
        let times = line(&f, &mut rec);
        let (first, second) = times.split_once(", ").unwrap();
        assert_eq!(first, "-");
        assert!(second.len() == 5 && second.starts_with("0."), "{times}");
        let f = format(&["$upstream_first_byte_time $upstream_session_time $session_time"]);
        let shape = line(&f, &mut rec).replace(|c: char| c.is_ascii_digit(), "d");
        assert_eq!(shape, "-, d.ddd d.ddd, d.ddd d.ddd");
    }

    #[test]
    fn a_session_not_logged_records_no_tries() {
        let mut rec = StreamRecord::default();
        rec.begin(0, 1, "127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap());
        rec.no_live(0);
        assert!(rec.tries.is_empty());
        assert_eq!(rec.status, BAD_GATEWAY);
        assert_eq!(hostname(), hostname().to_ascii_lowercase());
    }
}
