//! The TCP (`stream`) flow: pick a peer with the key taken from the connection, connect with a timeout and move
//! on to the next peer on failure, then copy both ways from one future with the idle `proxy_timeout`; or answer
//! with the server's `return`. The session's access log lines are written when it ends.

use super::proxy_header::NoHeader;
use super::pump::{pump, Ends, Half, PumpEnd};
use super::stream_pass::{self, PassTarget};
use super::try_clock;
use crate::access_log::record::TryPeer;
use crate::access_log::stream::{
    StreamRecord, BAD_GATEWAY, BAD_REQUEST, FORBIDDEN, INTERNAL_SERVER_ERROR, OK, SERVICE_UNAVAILABLE,
};
use crate::balance::least_time::{Phase, TryTimes};
use crate::balance::next::{self, FailCause, Proto, Step, TryCx, TryEnd};
use crate::balance::{Attempt, Outcome};
use crate::config::model::{StreamServer, StreamSize};
use crate::http::var_cache::VarCache;
use crate::http::vars::{ConnVars, ProxyVars, StreamVars};
use crate::log::{ErrorLogs, Level};
use crate::runtime::iobuf::IoBuf;
use crate::runtime::{Conn, Runtime};
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

/// Copy buffer per direction.
const BUF: usize = 16 * 1024;

/// Serves one stream connection accepted on `listen` until both sides close, on the snapshot running when it
/// began (a reload applies to the next connection).
pub async fn serve<R: Runtime>(shard: Rc<Shard<R>>, mut client: R::Conn, remote: SocketAddr, listen: SocketAddr) {
    let snap = shard.snapshot();
    let Some(port) = snap.stream_port(listen) else {
        return;
    };
    let index = port.server;
    let Some(srv) = snap.config.stream.as_ref().and_then(|s| s.servers.get(index)) else {
        return;
    };
    let local = client
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let mut rec = shard.stream_record();
    let plan = snap.stream_servers.get(index);
    rec.begin(plan.map_or(0, |p| p.log_set), shard.next_connection_id(), remote, local);
    let mut conn = ConnVars::new(remote, local);
    // what the client sent after its PROXY protocol header, passed on first
    let mut early = None;
    let mut proxy = None;
    if port.proxy_protocol {
        let mut buf = IoBuf::new(crate::http::proxy_protocol::V2_MAX);
        let read = super::proxy_header::HeaderRead::<R> {
            sock: &mut client,
            buf: &mut buf,
            tlvs: &mut rec.tlvs,
            peer: remote,
            local,
        };
        let addrs = match read.read(srv.proxy_protocol_timeout).await {
            Ok(addrs) => addrs,
            Err(end) => {
                // nginx finalizes the session: 400 for a broken header, 200 for a client that left or timed out
                rec.status = if end == NoHeader::Broken { BAD_REQUEST } else { OK };
                shard.log_session(&snap, rec);
                return;
            }
        };
        proxy = addrs;
        // nginx's stream realip: the header's source, when the connection's peer is trusted
        if let Some(real) = plan.and_then(|p| p.realip.as_ref()?.stream(remote, addrs.as_ref())) {
            conn.remote = real;
        }
        (rec.remote, rec.proxy) = (conn.remote, proxy);
        early = Some(buf);
    }
    let mut units = Vec::new();
    let errors = plan.and_then(|p| p.errors.as_deref());
    let admission = Admission {
        snap: &snap,
        srv,
        plan,
        conn,
        proxy: proxy.as_ref(),
    };
    if !admission.admit(&mut rec, &mut units) {
        shard.log_session(&snap, rec);
        return;
    }
    // nginx's ssl phase: the handshake of `listen ... ssl`; its SNI picks the server the session goes on with
    let mut picked = index;
    if let Some(tls) = port.tls.as_deref() {
        let wait = srv.ssl.handshake_timeout;
        match super::stream_tls::handshake::<R>(client, conn.remote, tls, wait, &shard.counters, errors).await {
            Some((sock, facts)) => {
                client = sock;
                picked = port.server_for(facts.server_name.as_bytes());
                rec.tls = Some(facts);
            }
            None => {
                rec.status = INTERNAL_SERVER_ERROR;
                shard.log_session(&snap, rec);
                return;
            }
        }
    }
    // nginx's preread phase: `ssl_preread` reads the client's hello, kept to go to the upstream first; its SNI
    // picks the server too
    if srv.ssl.preread {
        match super::stream_tls::read_hello::<R>(&mut client, early.as_ref(), &srv.ssl, errors).await {
            Ok((buf, facts)) => {
                early = Some(buf);
                if let Some(f) = &facts {
                    picked = port.server_for(&f.server_name);
                }
                rec.preread = facts;
            }
            Err(status) => {
                rec.status = status;
                shard.log_session(&snap, rec);
                return;
            }
        }
    }
    let Some(srv) = snap.config.stream.as_ref().and_then(|s| s.servers.get(picked)) else {
        return;
    };
    let plan = snap.stream_servers.get(picked);
    let errors = plan.and_then(|p| p.errors.as_deref());
    rec.set = plan.map_or(0, |p| p.log_set);
    // `ssl_verify_client` of the server the handshake picked
    if let Some(facts) = &rec.tls {
        if super::stream_tls::client_refused(facts, &srv.ssl, errors) {
            rec.status = INTERNAL_SERVER_ERROR;
            shard.log_session(&snap, rec);
            return;
        }
    }
    if let Some(value) = &srv.ret {
        super::stream_return::answer(&shard, &snap, &mut client, value, &mut rec).await;
        shard.log_session(&snap, rec);
        return;
    }
    let early = early.as_ref().map_or(&[][..], IoBuf::readable);
    let maps = snap.config.stream.as_ref().map_or(&[][..], |s| s.maps.as_slice());
    let mut cache = VarCache::default();
    cache.begin(maps.len());
    let tlvs = std::mem::take(&mut rec.tlvs);
    let (tls, preread) = (rec.tls.take(), rec.preread.take());
    let vars = StreamVars {
        conn,
        proxy: ProxyVars {
            addrs: proxy.as_ref(),
            tlvs: &tlvs,
        },
        maps,
        cache: &cache,
        tls: tls.as_ref(),
        preread: preread.as_ref(),
    };
    let target = match (srv.upstream, &srv.pass) {
        (Some(upstream), _) => Some(PassTarget::Upstream(upstream)),
        (None, Some(pass)) => {
            let mut value = Vec::new();
            pass.eval_into(&vars, &mut value);
            let target = stream_pass::target(&snap, &value);
            if target.is_none() {
                rec.status = BAD_GATEWAY;
                stream_pass::log_unreachable(errors, &value);
            }
            target
        }
        (None, None) => None,
    };
    match target {
        Some(PassTarget::Upstream(upstream)) => {
            let session = Session {
                shard: &shard,
                snap: &snap,
                srv,
                upstream,
                early,
                errors,
                tls: plan.and_then(|p| p.upstream_tls.as_deref()),
            };
            session.proxy(&mut client, &vars, &mut rec).await;
        }
        Some(PassTarget::Addr(addr)) => {
            rec.status = BAD_GATEWAY;
            let first = super::stream_pass::First {
                conn: vars.conn,
                early,
                tls: plan.and_then(|p| p.upstream_tls.as_deref()),
            };
            stream_pass::direct::<R>(srv, addr, &mut client, &mut rec, first, errors).await;
        }
        None => {}
    }
    rec.tlvs = tlvs;
    (rec.tls, rec.preread) = (tls, preread);
    shard.log_session(&snap, rec);
}

/// What nginx's stream preaccess and access phases look at for one session (TCP or UDP).
pub(super) struct Admission<'a> {
    pub snap: &'a Snapshot,
    pub srv: &'a StreamServer,
    pub plan: Option<&'a crate::snapshot::stream_logs::StreamServerPlan>,
    pub conn: ConnVars,
    pub proxy: Option<&'a crate::http::proxy_protocol::ProxyAddrs>,
}

impl Admission<'_> {
    /// `limit_conn` (a client over a limit: status 503; the units taken are held in `units` until the session
    /// ends, whatever ends it), then `allow`/`deny` (status 403); false when the session ends here.
    pub(super) fn admit(&self, rec: &mut StreamRecord, units: &mut Vec<corelb_shared_state::ConnUnit>) -> bool {
        let (snap, conn) = (self.snap, self.conn);
        if let Some(limits) = self
            .plan
            .and_then(|p| p.limits.as_deref())
            .and_then(|l| l.conn.as_ref())
        {
            let maps = snap.config.stream.as_ref().map_or(&[][..], |s| s.maps.as_slice());
            let mut cache = VarCache::default();
            cache.begin(maps.len());
            let vars = StreamVars {
                conn,
                proxy: ProxyVars {
                    addrs: self.proxy,
                    tlvs: &rec.tlvs,
                },
                maps,
                cache: &cache,
                tls: None,
                preread: None,
            };
            let mut key = Vec::new();
            if limits
                .check(&vars, &mut key, &rec.limit_conn, units, conn.remote)
                .is_some()
            {
                rec.status = SERVICE_UNAVAILABLE;
                return false;
            }
        }
        let errors = self.plan.and_then(|p| p.errors.as_deref());
        if self.srv.access.as_ref().is_some_and(|a| a.denies(conn.remote)) {
            crate::log_in!(
                errors,
                Level::Error,
                "access forbidden by rule, client: {}",
                crate::config::unix_addr::Ip(&conn.remote)
            );
            rec.status = FORBIDDEN;
            return false;
        }
        true
    }
}

/// What proxying one session runs on.
struct Session<'a, R: Runtime> {
    shard: &'a Rc<Shard<R>>,
    snap: &'a Snapshot,
    srv: &'a StreamServer,
    /// Index into the snapshot's stream plans.
    upstream: usize,
    /// Client bytes that came with its PROXY protocol header.
    early: &'a [u8],
    /// The server's `error_log` lines (`None`: the main log).
    errors: Option<&'a ErrorLogs>,
    /// `proxy_ssl on`: upstream connections are TLS.
    tls: Option<&'a crate::tls::client_config::UpstreamTls>,
}

impl<R: Runtime> Session<'_, R> {
    /// Logs a failed connect to `addr` in nginx's words.
    fn log_connect_error(&self, e: &std::io::Error, addr: SocketAddr) {
        match e.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => crate::log_in!(
                self.errors,
                Level::Alert,
                "socket() failed ({}) while connecting to upstream {}",
                crate::config::error::errno_text(e),
                crate::config::unix_addr::Display(&addr)
            ),
            _ => crate::log_in!(
                self.errors,
                Level::Error,
                "connect() to {} failed ({e}) while connecting to upstream",
                crate::config::unix_addr::Display(&addr)
            ),
        }
    }

    /// Connects (moving on to the next peer on failure) and copies both ways; the tries and bytes go into `rec`.
    async fn proxy(&self, client: &mut R::Conn, vars: &StreamVars<'_>, rec: &mut StreamRecord) {
        let (shard, snap, srv) = (self.shard, self.snap, self.srv);
        let Some(plan) = snap.stream_plans.get(self.upstream) else {
            return;
        };
        let mut key = Vec::new();
        plan.key
            .eval_into(vars, crate::config::unix_addr::client_ip(&vars.conn.remote), &mut key);
        let mut attempt = Attempt::new(plan, srv.next_upstream_tries, &key);
        let rules = next::stream_rules(srv.next_upstream);
        rec.status = BAD_GATEWAY;
        let timed = plan.timed();
        let (mut upstream, peer, started) = loop {
            let (now, now_ms) = try_clock::pick_time(timed);
            let picked = shard
                .with_stream_state(snap, self.upstream, |st| attempt.pick_at(st, &key, now, now_ms))
                .flatten();
            let started = timed.then(Instant::now);
            let Some(peer) = picked else {
                crate::log_in!(
                    self.errors,
                    Level::Error,
                    "no live upstreams while connecting to upstream \"{}\"",
                    plan.name
                );
                rec.no_live(self.upstream);
                return;
            };
            rec.try_start(TryPeer::Addr(peer.addr));
            let connected = match R::connect(peer.addr, srv.connect_timeout).await {
                Ok(c) => match self.tls {
                    Some(tls) => {
                        super::stream_tls::to_upstream::<R>(c, tls, peer.addr, srv.connect_timeout, self.errors).await
                    }
                    None => Ok(c),
                },
                Err(e) => {
                    self.log_connect_error(&e, peer.addr);
                    Err(e)
                }
            };
            match connected {
                Ok(c) => break (c, peer, started),
                Err(e) => {
                    let cause = if e.kind() == std::io::ErrorKind::TimedOut {
                        FailCause::Timeout
                    } else {
                        FailCause::Error
                    };
                    let cx = TryCx {
                        proto: Proto::Stream,
                        tries_left: attempt.tries_left(),
                        replayable: true,
                        non_idempotent: false,
                        in_time: true,
                    };
                    let step = next::decide(&rules, TryEnd::Failed { cause, sent: false }, cx);
                    let times = stream_times(started, 0, None);
                    let (now, now_ms) = try_clock::pick_time(timed);
                    shard.with_stream_state(snap, self.upstream, |st| {
                        attempt.report_timed(Outcome::Failed, st, now, times, now_ms)
                    });
                    if !matches!(step, Step::Retry(_)) {
                        return;
                    }
                }
            }
        };
        rec.try_connected();
        let connect_ms = started.map_or(0, try_clock::ms_since);
        if timed {
            attempt.notify(Phase::Connect, connect_ms, crate::clock::now_ms());
        }
        // nginx marks a peer live again when a TCP connect succeeds (NGX_STREAM_UPSTREAM_NOTIFY_CONNECT), not
        // when the session ends: other sessions may pick it while this one lasts.
        peer.slot.record_success();
        let _ = upstream.set_nodelay(true);
        peer.slot.count_request();
        let session = std::time::Instant::now();
        // room for what goes first: the PROXY protocol line and the client's early or preread bytes
        let mut up_half = Half::new(BUF.max(self.early.len() + crate::http::proxy_protocol::V1_MAX));
        if srv.proxy_protocol {
            // nginx's `proxy_protocol on`: its v1 line for the client's (real) address, before any client byte
            let mut line = Vec::with_capacity(crate::http::proxy_protocol::V1_MAX);
            crate::http::proxy_protocol::write_v1(vars.conn.remote, vars.conn.local, &mut line);
            up_half.preload(&line, false);
        }
        up_half.preload(self.early, true);
        up_half.pace(self.rate(srv.upload_rate.as_ref(), rec));
        let mut down_half = Half::new(BUF);
        down_half.pace(self.rate(srv.download_rate.as_ref(), rec));
        let ends = if srv.half_close { Ends::Both } else { Ends::First };
        let halves = (&mut up_half, &mut down_half);
        let end = pump::<R, _, _>(client, &mut upstream, halves, srv.timeout, ends).await;
        if let PumpEnd::Failed(e) = &end {
            crate::log_in!(
                self.errors,
                Level::Info,
                "stream to {} ended: {e}",
                crate::config::unix_addr::Display(&peer.addr)
            );
        }
        rec.proxied(
            (down_half.bytes, up_half.read),
            (up_half.bytes, down_half.read),
            down_half.first_read,
        );
        peer.slot.count_bytes(up_half.bytes, down_half.bytes);
        peer.slot.record_response_time(shard.index, session.elapsed());
        let times = stream_times(started, connect_ms, down_half.first_read);
        let (now, now_ms) = try_clock::pick_time(timed);
        shard.with_stream_state(snap, self.upstream, |st| {
            attempt.report_timed(Outcome::Success, st, now, times, now_ms)
        });
    }
}

impl<R: Runtime> Session<'_, R> {
    fn rate(&self, size: Option<&StreamSize>, rec: &mut StreamRecord) -> u64 {
        session_rate(self.shard, self.snap, size, rec, self.errors)
    }
}

/// A rate of a stream server (`proxy_upload_rate`, `proxy_download_rate`) for the session of `rec`, bytes per
/// second (0: none); a value with variables that is not a size is logged as nginx logs it and means no limit.
pub(super) fn session_rate<R: Runtime>(
    shard: &Shard<R>,
    snap: &Snapshot,
    size: Option<&StreamSize>,
    rec: &mut StreamRecord,
    errors: Option<&ErrorLogs>,
) -> u64 {
    match size {
        None => 0,
        Some(StreamSize::Fixed(n)) => *n,
        Some(StreamSize::Value(value)) => {
            let mut text = std::mem::take(&mut rec.text);
            text.clear();
            shard.render_stream_value(snap, value, rec, &mut text);
            let value = String::from_utf8_lossy(&text);
            let n = crate::config::value::parse_size(&value).unwrap_or_else(|| {
                crate::log_in!(errors, Level::Error, "invalid size \"{value}\"");
                0
            });
            rec.text = text;
            n
        }
    }
}

/// What a stream try measured from `started` (its connect's start; `None`: not `least_time`, nothing timed).
fn stream_times(started: Option<Instant>, connect: u64, first_read: Option<Instant>) -> TryTimes {
    let Some(t) = started else {
        return TryTimes::None;
    };
    TryTimes::Stream {
        response: try_clock::ms_since(t),
        connect,
        first_byte: first_read.map(|at| u64::try_from(at.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)),
    }
}
