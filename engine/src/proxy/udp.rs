//! UDP sessions of a stream server (`listen ... udp`), as nginx's `ngx_event_udp` binds them and the UDP side of
//! `ngx_stream_proxy_module` proxies them: the first datagram from a client address and port starts a session on
//! the shard the kernel gave it to (`SO_REUSEPORT` keeps a client's address on one socket); later ones from that
//! address join it. A session picks a peer with the upstream's balancer, sends the datagrams over a connected
//! socket and relays each answer back from the listening socket, until `proxy_responses` answers per datagram came
//! (after `proxy_requests` datagrams, when set), or nothing moved for `proxy_timeout`.

use super::limit_rate::{Pacer, RateLimit};
use super::stream::{session_rate, Admission};
use super::stream_pass::{self, PassTarget};
use super::try_clock;
use crate::access_log::record::TryPeer;
use crate::access_log::stream::{StreamRecord, BAD_GATEWAY, OK};
use crate::balance::least_time::TryTimes;
use crate::balance::next::{self, FailCause, Proto, Step, TryCx, TryEnd};
use crate::balance::{Attempt, Outcome};
use crate::config::model::StreamServer;
use crate::http::var_cache::VarCache;
use crate::http::vars::{ConnVars, ProxyVars, StreamVars};
use crate::log::{ErrorLogs, Level};
use crate::runtime::{timeout, Datagram, DatagramListener, Runtime};
use crate::shard::Shard;
use crate::snapshot::Snapshot;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

/// The largest datagram read from a client (nginx reads into 65,535 bytes).
pub const MAX_DATAGRAM: usize = 65_535;
/// The buffer an upstream's answer is read into (nginx's `proxy_buffer_size`, 16k): a longer one is cut.
const ANSWER_BUF: usize = 16 * 1024;
/// Datagrams waiting for a session to take them; more are dropped (as a full socket buffer drops them).
const INBOX: usize = 64;
/// Spare datagram buffers kept per listening socket.
const SPARES: usize = 64;

/// Who a datagram is from and, on a wildcard socket, the local address it was sent to: what a session is bound
/// to (nginx's rbtree of UDP connections by client and local address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client {
    pub remote: SocketAddr,
    pub local: Option<std::net::IpAddr>,
}

/// One shard's listening UDP socket and the sessions bound to it, by client.
pub struct Endpoint<R: Runtime> {
    pub sock: R::UdpListener,
    pub listen: SocketAddr,
    /// The bound address (with the port the kernel chose for port 0), read once.
    bound: SocketAddr,
    sessions: RefCell<HashMap<Client, Rc<Inbox>>>,
    spare: RefCell<Vec<Vec<u8>>>,
    /// Answer buffers of ended tries, for the next ones (a try does not zero 16 KiB of its own).
    answers: RefCell<Vec<Box<[u8]>>>,
}

/// The datagrams of a client waiting for its session, and the session's waker.
#[derive(Default)]
pub struct Inbox {
    queue: RefCell<VecDeque<Vec<u8>>>,
    waker: Cell<Option<Waker>>,
    /// Datagrams the binding took, and `proxy_requests` (0: no limit): at the limit the binding is dropped as the
    /// datagram arrives, so the client's next one starts a new session (nginx decides it as each datagram is
    /// read, before the next one is).
    taken: Cell<u64>,
    limit: u64,
}

impl Inbox {
    fn push(&self, datagram: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut q = self.queue.borrow_mut();
        if q.len() >= INBOX {
            return Err(datagram);
        }
        q.push_back(datagram);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
        Ok(())
    }

    /// The next datagram of the client.
    async fn next(&self) -> Vec<u8> {
        poll_fn(|cx| match self.queue.borrow_mut().pop_front() {
            Some(d) => Poll::Ready(d),
            None => {
                self.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await
    }
}

impl<R: Runtime> Endpoint<R> {
    pub fn new(sock: R::UdpListener, listen: SocketAddr) -> Self {
        let bound = sock.local_addr().unwrap_or(listen);
        Endpoint {
            sock,
            listen,
            bound,
            sessions: RefCell::new(HashMap::new()),
            spare: RefCell::new(Vec::new()),
            answers: RefCell::new(Vec::new()),
        }
    }

    /// A datagram from `from`: given to its session, or the first of a new one (returned, for the caller to run).
    /// `room` says whether a new session may start (`worker_connections`); a datagram that finds no room, or a
    /// session with a full inbox, is dropped.
    /// `requests` is the `proxy_requests` of the server the running snapshot has on this address.
    pub fn arrived(&self, from: Client, data: &[u8], room: bool, requests: u64) -> Option<Rc<Inbox>> {
        let mut datagram = self.spare.borrow_mut().pop().unwrap_or_default();
        datagram.clear();
        datagram.extend_from_slice(data);
        let bound = self.sessions.borrow().get(&from).cloned();
        if let Some(inbox) = bound {
            match inbox.push(datagram) {
                Ok(()) => self.took(from, &inbox),
                Err(d) => self.give_back(d),
            }
            return None;
        }
        if !room {
            self.give_back(datagram);
            return None;
        }
        let inbox = Rc::new(Inbox {
            limit: requests,
            ..Inbox::default()
        });
        let _ = inbox.push(datagram);
        self.sessions.borrow_mut().insert(from, Rc::clone(&inbox));
        self.took(from, &inbox);
        Some(inbox)
    }

    /// Counts a datagram the binding of `from` took; at `proxy_requests` the binding goes.
    fn took(&self, from: Client, inbox: &Rc<Inbox>) {
        inbox.taken.set(inbox.taken.get() + 1);
        if inbox.limit > 0 && inbox.taken.get() >= inbox.limit {
            self.unbind(from, inbox);
        }
    }

    fn give_back(&self, d: Vec<u8>) {
        let mut spare = self.spare.borrow_mut();
        if spare.len() < SPARES && d.capacity() <= MAX_DATAGRAM {
            spare.push(d);
        }
    }

    /// Lets the client's next datagram start a new session (nginx's `ngx_delete_udp_connection`), when `inbox`
    /// is still the one bound to it.
    fn unbind(&self, remote: Client, inbox: &Rc<Inbox>) {
        let mut sessions = self.sessions.borrow_mut();
        if sessions.get(&remote).is_some_and(|i| Rc::ptr_eq(i, inbox)) {
            sessions.remove(&remote);
        }
    }
}

/// What a session has moved so far (nginx's `u->requests`, `u->responses` and byte counts).
#[derive(Debug, Default)]
struct Moved {
    requests: u64,
    responses: u64,
    from_client: u64,
    to_client: u64,
    to_upstream: u64,
    from_upstream: u64,
    first_answer: Option<Instant>,
    /// `proxy_upload_rate` and `proxy_download_rate`: a datagram is never cut, but after one the direction
    /// pauses for as long as its bytes take (nginx's `delayed` read).
    upload: Option<Pacer>,
    download: Option<Pacer>,
}

impl Moved {
    /// nginx's `ngx_stream_proxy_test_finalize` for UDP: every expected answer came (after `proxy_requests`
    /// datagrams, when set).
    fn done(&self, srv: &StreamServer) -> bool {
        if srv.udp_requests > 0 && self.requests < srv.udp_requests {
            return false;
        }
        srv.udp_responses
            .is_some_and(|per| self.responses >= per.saturating_mul(self.requests))
    }
}

/// How one try ended.
enum Relayed {
    /// The session is over (answers in, or idle with nothing more expected); `failed` when the upstream's socket
    /// reported an error (an ICMP port unreachable), which marks the peer failed as nginx's `read->error` does.
    Done { failed: bool },
    /// `proxy_timeout` passed with answers still expected: nginx's `upstream timed out`, the next peer tried.
    TimedOut,
    /// Sending to the upstream failed.
    SendFailed(std::io::Error),
    /// The shard is stopping.
    Stopped,
}

/// One UDP session.
struct Session<'a, R: Runtime> {
    shard: &'a Rc<Shard<R>>,
    ep: &'a Endpoint<R>,
    srv: &'a StreamServer,
    client: Client,
    remote: SocketAddr,
    inbox: &'a Rc<Inbox>,
    errors: Option<&'a ErrorLogs>,
}

/// Serves the session of `remote` whose first datagram is in `inbox`, on the snapshot running when it began.
pub async fn serve<R: Runtime>(shard: Rc<Shard<R>>, ep: Rc<Endpoint<R>>, client: Client, inbox: Rc<Inbox>) {
    let remote = client.remote;
    let snap = shard.snapshot();
    let server = snap.udp_server_of(ep.listen);
    let Some((index, srv)) = server.and_then(|i| Some((i, snap.config.stream.as_ref()?.servers.get(i)?))) else {
        ep.unbind(client, &inbox);
        return;
    };
    let bound = ep.bound;
    let local = client.local.map_or(bound, |ip| SocketAddr::new(ip, bound.port()));
    let mut rec = shard.stream_record();
    let plan = snap.stream_servers.get(index);
    rec.begin(plan.map_or(0, |p| p.log_set), shard.next_connection_id(), remote, local);
    rec.udp = true;
    let conn = ConnVars::new(remote, local);
    let errors = plan.and_then(|p| p.errors.as_deref());
    let session = Session {
        shard: &shard,
        ep: &ep,
        srv,
        client,
        remote,
        inbox: &inbox,
        errors,
    };
    let mut units = Vec::new();
    let admission = Admission {
        snap: &snap,
        srv,
        plan,
        conn,
        proxy: None,
    };
    if admission.admit(&mut rec, &mut units) {
        session.run(&snap, conn, &mut rec).await;
    }
    ep.unbind(client, &inbox);
    // what the session did not take goes back to the listener's spares
    for d in inbox.queue.borrow_mut().drain(..) {
        ep.give_back(d);
    }
    drop(units);
    shard.log_session(&snap, rec);
}

impl<R: Runtime> Session<'_, R> {
    /// `return` or proxying, after the access phases let the session in.
    async fn run(&self, snap: &Snapshot, conn: ConnVars, rec: &mut StreamRecord) {
        let first = self.inbox.queue.borrow_mut().pop_front().unwrap_or_default();
        rec.bytes_received = first.len() as u64;
        if let Some(value) = &self.srv.ret {
            // nginx's stream `return` over UDP: one datagram with the value
            let mut text = std::mem::take(&mut rec.text);
            text.clear();
            match value.fixed() {
                Some(fixed) => text.extend_from_slice(fixed),
                None => self.shard.render_stream_value(snap, value, rec, &mut text),
            }
            rec.status = OK;
            if let Ok(n) = self.ep.sock.send_to(&text, self.remote, self.client.local).await {
                rec.bytes_sent = n as u64;
            }
            rec.text = text;
            self.ep.give_back(first);
            return;
        }
        let maps = snap.config.stream.as_ref().map_or(&[][..], |s| s.maps.as_slice());
        let mut cache = VarCache::default();
        cache.begin(maps.len());
        let vars = StreamVars {
            conn,
            proxy: ProxyVars { addrs: None, tlvs: &[] },
            maps,
            cache: &cache,
            tls: None,
            preread: None,
        };
        rec.status = BAD_GATEWAY;
        let target = match (self.srv.upstream, &self.srv.pass) {
            (Some(upstream), _) => Some(PassTarget::Upstream(upstream)),
            (None, Some(pass)) => {
                let mut value = Vec::new();
                pass.eval_into(&vars, &mut value);
                let target = stream_pass::target(snap, &value);
                if target.is_none() {
                    stream_pass::log_unreachable(self.errors, &value);
                }
                target
            }
            (None, None) => None,
        };
        let pacer = |rate: u64| (rate > 0).then(|| Pacer::new(RateLimit { rate, after: 0 }, Instant::now()));
        let up_rate = session_rate(self.shard, snap, self.srv.upload_rate.as_ref(), rec, self.errors);
        let down_rate = session_rate(self.shard, snap, self.srv.download_rate.as_ref(), rec, self.errors);
        let mut moved = Moved {
            from_client: first.len() as u64,
            upload: pacer(up_rate),
            download: pacer(down_rate),
            ..Moved::default()
        };
        if let Some(p) = &mut moved.upload {
            p.wrote(first.len(), Instant::now());
        }
        match target {
            Some(PassTarget::Upstream(upstream)) => self.proxy(snap, upstream, &vars, &first, &mut moved, rec).await,
            Some(PassTarget::Addr(addr)) => {
                rec.try_start(TryPeer::Addr(addr));
                if let Ok(up) = R::udp_connect(addr) {
                    rec.try_connected();
                    if let Relayed::Done { .. } | Relayed::Stopped = self.relay(&up, &first, &mut moved).await {
                        rec.status = OK;
                    }
                }
            }
            None => {}
        }
        rec.bytes_sent = moved.to_client;
        rec.bytes_received = moved.from_client;
        if let Some(t) = rec.tries.last_mut() {
            (t.bytes_sent, t.bytes_received) = (moved.to_upstream, moved.from_upstream);
            t.first_byte = moved.first_answer.map(|at| at.saturating_duration_since(t.started));
        }
        self.ep.give_back(first);
    }

    /// Picks peers of `upstream` until a try ends the session (a timed-out try moves on to the next peer, the
    /// first datagram sent again, as nginx resends its client buffer).
    async fn proxy(
        &self,
        snap: &Snapshot,
        upstream: usize,
        vars: &StreamVars<'_>,
        first: &[u8],
        moved: &mut Moved,
        rec: &mut StreamRecord,
    ) {
        let shard = self.shard;
        let Some(plan) = snap.stream_plans.get(upstream) else {
            return;
        };
        let mut key = Vec::new();
        plan.key
            .eval_into(vars, crate::config::unix_addr::client_ip(&vars.conn.remote), &mut key);
        let mut attempt = Attempt::new(plan, self.srv.next_upstream_tries, &key);
        let rules = next::stream_rules(self.srv.next_upstream);
        let timed = plan.timed();
        loop {
            let (now, now_ms) = try_clock::pick_time(timed);
            let picked = shard
                .with_stream_state(snap, upstream, |st| attempt.pick_at(st, &key, now, now_ms))
                .flatten();
            let Some(peer) = picked else {
                crate::log_in!(
                    self.errors,
                    Level::Error,
                    "no live upstreams while connecting to upstream \"{}\"",
                    plan.name
                );
                rec.no_live(upstream);
                return;
            };
            rec.try_start(TryPeer::Addr(peer.addr));
            let end = match R::udp_connect(peer.addr) {
                Ok(up) => {
                    rec.try_connected();
                    peer.slot.count_request();
                    let end = self.relay(&up, first, moved).await;
                    peer.slot.count_bytes(moved.to_upstream, moved.from_upstream);
                    end
                }
                Err(e) => Relayed::SendFailed(e),
            };
            let (outcome, cause) = match end {
                Relayed::Done { failed: false } | Relayed::Stopped => (Outcome::Success, None),
                Relayed::Done { failed: true } => (Outcome::Failed, None),
                Relayed::TimedOut => {
                    crate::log_in!(
                        self.errors,
                        Level::Error,
                        "upstream timed out (110: Connection timed out) while proxying connection, udp client: {}, \
                         upstream: \"{}\"",
                        self.remote,
                        peer.addr
                    );
                    (Outcome::Failed, Some(FailCause::Timeout))
                }
                Relayed::SendFailed(e) => {
                    crate::log_in!(
                        self.errors,
                        Level::Error,
                        "send() to {} failed ({e}) while proxying connection",
                        peer.addr
                    );
                    (Outcome::Failed, Some(FailCause::Error))
                }
            };
            if outcome == Outcome::Success {
                peer.slot.record_success();
            }
            let (now, now_ms) = try_clock::pick_time(timed);
            shard.with_stream_state(snap, upstream, |st| {
                attempt.report_timed(outcome, st, now, TryTimes::None, now_ms)
            });
            let Some(cause) = cause else {
                rec.status = OK;
                return;
            };
            let cx = TryCx {
                proto: Proto::Stream,
                tries_left: attempt.tries_left(),
                replayable: true,
                non_idempotent: false,
                in_time: true,
            };
            if !matches!(
                next::decide(&rules, TryEnd::Failed { cause, sent: true }, cx),
                Step::Retry(_)
            ) {
                return;
            }
        }
    }

    /// One try over the connected socket `up`: `first` sent, then the client's datagrams and the upstream's
    /// answers moved until the session is done, idle for `proxy_timeout`, or the shard stops.
    async fn relay(&self, up: &R::Udp, first: &[u8], moved: &mut Moved) -> Relayed {
        if let Err(e) = up.send(first).await {
            return Relayed::SendFailed(e);
        }
        moved.requests = moved.requests.max(1);
        moved.to_upstream += first.len() as u64;
        let mut answer = self
            .ep
            .answers
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0u8; ANSWER_BUF].into());
        let end = self.relay_with(up, moved, &mut answer).await;
        let mut spare = self.ep.answers.borrow_mut();
        if spare.len() < SPARES {
            spare.push(answer);
        }
        end
    }

    /// [`Session::relay`] after the first datagram went, reading answers into `answer`.
    async fn relay_with(&self, up: &R::Udp, moved: &mut Moved, answer: &mut [u8]) -> Relayed {
        let srv = self.srv;
        // nginx's `read->eof` after an error on the upstream's socket: no more reads, the peer failed
        let mut upstream_failed = false;
        loop {
            if moved.done(srv) {
                return Relayed::Done {
                    failed: upstream_failed,
                };
            }
            enum Event {
                Resume,
                Client(Vec<u8>),
                Answer(std::io::Result<usize>),
                Idle,
                Stop,
            }
            let paced = moved.upload.is_some() || moved.download.is_some();
            let now = if paced { Some(Instant::now()) } else { None };
            let wait = |p: &Option<Pacer>| p.as_ref().zip(now).and_then(|(p, now)| p.budget(now).err());
            let (up_wait, down_wait) = (wait(&moved.upload), wait(&moved.download));
            let answer_buf = &mut *answer;
            let event = futures_lite::future::or(
                futures_lite::future::or(
                    async {
                        match up_wait {
                            Some(w) => {
                                R::sleep(w).await;
                                Event::Resume
                            }
                            None => Event::Client(self.inbox.next().await),
                        }
                    },
                    async {
                        if upstream_failed {
                            std::future::pending::<()>().await;
                        }
                        match down_wait {
                            Some(w) => {
                                R::sleep(w).await;
                                Event::Resume
                            }
                            None => Event::Answer(up.recv(answer_buf).await),
                        }
                    },
                ),
                futures_lite::future::or(
                    async {
                        // no idle timer while a direction is paused (nginx's `delayed`)
                        if up_wait.is_some() || down_wait.is_some() {
                            std::future::pending::<()>().await;
                        }
                        let _ = timeout::<R, _>(srv.timeout, std::future::pending::<()>()).await;
                        Event::Idle
                    },
                    async {
                        self.shard.stopped().await;
                        Event::Stop
                    },
                ),
            )
            .await;
            match event {
                Event::Resume => {}
                Event::Client(d) => {
                    if let Some(p) = &mut moved.upload {
                        p.wrote(d.len(), Instant::now());
                    }
                    let sent = up.send(&d).await;
                    moved.requests += 1;
                    moved.from_client += d.len() as u64;
                    self.ep.give_back(d);
                    match sent {
                        Ok(n) => moved.to_upstream += n as u64,
                        Err(e) => return Relayed::SendFailed(e),
                    }
                }
                Event::Answer(Ok(n)) => {
                    if let Some(p) = &mut moved.download {
                        p.wrote(n, Instant::now());
                    }
                    moved.responses += 1;
                    moved.from_upstream += n as u64;
                    moved.first_answer.get_or_insert_with(Instant::now);
                    let data = answer.get(..n).unwrap_or_default();
                    if let Ok(k) = self.ep.sock.send_to(data, self.remote, self.client.local).await {
                        moved.to_client += k as u64;
                    }
                }
                Event::Answer(Err(e)) => {
                    // nginx reads an error as the end of the upstream's stream (a zero-length answer counted)
                    crate::log_in!(
                        self.errors,
                        Level::Error,
                        "recv() failed ({e}) while proxying and reading from upstream, udp client: {}",
                        self.remote
                    );
                    upstream_failed = true;
                    moved.responses += 1;
                }
                Event::Idle => {
                    let expected = srv.udp_responses.map(|per| per.saturating_mul(moved.requests));
                    if expected.is_some_and(|e| moved.responses < e) {
                        return Relayed::TimedOut;
                    }
                    crate::log_in!(
                        self.errors,
                        Level::Info,
                        "udp timed out, packets from/to client:{}/{}, bytes from/to client:{}/{}, bytes from/to \
                         upstream:{}/{}",
                        moved.requests,
                        moved.responses,
                        moved.from_client,
                        moved.to_client,
                        moved.from_upstream,
                        moved.to_upstream
                    );
                    return Relayed::Done {
                        failed: upstream_failed,
                    };
                }
                Event::Stop => return Relayed::Stopped,
            }
        }
    }
}
