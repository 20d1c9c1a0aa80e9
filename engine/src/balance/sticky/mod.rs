//! `sticky` as nginx 1.29.6+ does it: each peer's server id (its `route=`, else the MD5 in hex of its address),
//! the request's binding to the peer its cookie, route variable or learned session names, and the pick that
//! prefers that peer while it is usable (a draining peer too), else leaves the choice to the balancer.
//!
//! Built at load into [`StickyPlan`] (an upstream without `sticky` has none: its picks test one `None`). Per
//! request: [`StickyPlan::prepare`] when routed (the lookup value, the cookie's attributes), [`StickyPlan::bind`]
//! when the attempt starts, [`StickyPlan::on_try`] for each peer picked, [`StickyPlan::answer`] and
//! [`StickyPlan::learn`] with the answer.

pub mod cookie;
pub mod md5;

use super::{Choice, ListKind, Peer, PeerList, PickCx};
use crate::config::key::{Var, VarSource};
use crate::config::sticky::StickyConf;
use corelb_shared_state::{LearnTable, PeerFlags, Sid};
use std::sync::Arc;

/// The flags that keep a bound peer out: every [`PeerFlags::NOT_SELECTABLE`] bit but the draining kinds
/// (`DRAINING`, and the agent's `drain` and weight 0).
const BOUND_BLOCKED: u32 = PeerFlags::NOT_SELECTABLE.bits() & !PeerFlags::DRAIN_KINDS.bits();

/// An upstream's `sticky`, compiled at load.
#[derive(Debug)]
pub struct StickyPlan {
    /// The directive as read.
    pub conf: StickyConf,
    /// Each primary peer's server id.
    primary: ServerIds,
    /// Each backup peer's server id.
    backup: ServerIds,
    /// The method is round robin: a bound pick moves the SWRR weights as nginx's does.
    round_robin: bool,
    /// `learn`: the zone's sessions, and their timeout in ms.
    table: Option<Arc<LearnTable>>,
    timeout_ms: u64,
    /// Per `create=` variable: whether it reads the answer (`$upstream_*`), so it is read with the answer.
    create_reads_answer: Vec<bool>,
}

/// The request's sticky values, in the connection's reused buffers.
#[derive(Debug, Default)]
pub struct StickyBufs {
    /// The lookup value (a server id, or a session id for `learn`); empty: none.
    pub id: Vec<u8>,
    /// The cookie's attributes after its value (`; expires=...; path=/`).
    pub suffix: Vec<u8>,
    /// The `create=` values read from the request, one after another, and where each ends.
    create: Vec<u8>,
    create_ends: Vec<usize>,
    /// The `Set-Cookie` line for the current try.
    pub line: Vec<u8>,
    /// The server id of the current try's peer.
    pub sid: Vec<u8>,
    /// The session id to learn, chosen when the answer's head is read.
    session: Vec<u8>,
    /// Whether `session` came from `create=` (a new session may be made) rather than the lookup value.
    create_now: bool,
    scratch: Vec<u8>,
}

/// The server ids of each list's peers, in config order.
pub type ServerIds = Vec<Box<[u8]>>;

/// nginx's server id of a peer: its `route=`, else the MD5 in hex of its printed address.
pub fn server_id(addr: std::net::SocketAddr, route: Option<&str>) -> Box<[u8]> {
    match route {
        Some(r) => r.as_bytes().into(),
        None => md5::hex(crate::config::unix_addr::to_text(&addr).as_bytes()).into(),
    }
}

/// Whether `var` is known only once the answer is in.
fn reads_answer(var: &Var) -> bool {
    matches!(var, Var::UpstreamHttp(_) | Var::UpstreamCookie(_) | Var::Status) || var.is_upstream_try()
}

impl StickyPlan {
    /// The plan of `conf` over the peers' server ids (config order per list), with the learn `table`.
    pub fn new(
        conf: StickyConf,
        ids: (ServerIds, ServerIds),
        round_robin: bool,
        table: Option<Arc<LearnTable>>,
    ) -> StickyPlan {
        let learn = conf.learn.as_ref();
        let timeout_ms = learn.map_or(0, |l| u64::try_from(l.timeout.as_millis()).unwrap_or(u64::MAX));
        let create_reads_answer = learn.map_or(Vec::new(), |l| {
            l.create
                .iter()
                .map(|t| {
                    t.parts()
                        .iter()
                        .any(|p| matches!(p, crate::config::key::Part::Var(v) if reads_answer(v)))
                })
                .collect()
        });
        StickyPlan {
            conf,
            primary: ids.0,
            backup: ids.1,
            round_robin,
            table,
            timeout_ms,
            create_reads_answer,
        }
    }

    /// The learn table, if any.
    pub fn table(&self) -> Option<&Arc<LearnTable>> {
        self.table.as_ref()
    }

    fn ids(&self, list: ListKind) -> &[Box<[u8]>] {
        match list {
            ListKind::Primary => &self.primary,
            ListKind::Backup => &self.backup,
        }
    }

    /// The server id of a chosen peer.
    pub fn sid(&self, c: Choice) -> &[u8] {
        self.ids(c.list).get(c.index).map_or(&[][..], |b| &b[..])
    }

    /// When the request is routed: the lookup value (first non-empty variable), the `create=` values the request
    /// holds, and the cookie's attributes at `now` (seconds).
    #[inline(never)]
    pub fn prepare(&self, vars: &dyn VarSource, now: u64, b: &mut StickyBufs) {
        b.id.clear();
        for t in &self.conf.lookup {
            t.eval_into(vars, &mut b.id);
            if !b.id.is_empty() {
                break;
            }
        }
        b.create.clear();
        b.create_ends.clear();
        if let Some(l) = &self.conf.learn {
            for (t, answer) in l.create.iter().zip(&self.create_reads_answer) {
                if !answer {
                    t.eval_into(vars, &mut b.scratch);
                    b.create.extend_from_slice(&b.scratch);
                }
                b.create_ends.push(b.create.len());
            }
        }
        if let Some(c) = &self.conf.cookie {
            cookie::attributes(c, vars, now, &mut b.scratch, &mut b.suffix);
        }
    }

    /// The server id the request is bound to: the lookup value itself, or with `learn` the server of its live
    /// session at `now_ms`. Empty: none.
    #[inline(never)]
    pub fn bound_sid(&self, b: &StickyBufs, now_ms: u64) -> Option<Sid> {
        if b.id.is_empty() {
            return None;
        }
        match &self.table {
            Some(t) => t.lookup(&md5::digest(&b.id), now_ms, self.timeout_ms),
            None => Some(Sid::new(&b.id)),
        }
    }

    /// The peers whose server id is `sid`, per list (the first of each, as nginx walks its list).
    pub fn resolve(&self, sid: &[u8]) -> [Option<u32>; 2] {
        let find = |ids: &[Box<[u8]>]| {
            ids.iter()
                .position(|s| &s[..] == sid)
                .and_then(|i| u32::try_from(i).ok())
        };
        [find(&self.primary), find(&self.backup)]
    }

    /// nginx's `get_rr_peer_by_sid` and the pick around it: the bound peer of the request's current list when it
    /// is untried and usable (down, failed and full peers are not; a draining one is), else `None` and the
    /// balancer picks. With round robin, the bound peer's pick moves the weights as nginx's does: not at all once
    /// its `current` is at or below `-(total - weight)`, else one SWRR pass whose winner is the bound peer.
    #[inline(never)]
    pub fn choose_bound(&self, cx: &mut PickCx<'_>) -> Option<Choice> {
        let list = cx.attempt.list;
        let slot = match list {
            ListKind::Primary => 0,
            ListKind::Backup => 1,
        };
        let index = usize::try_from(cx.attempt.bound[slot]?).ok()?;
        let peers = cx.plan.list(list);
        if cx.attempt.tried.contains(index) {
            return None;
        }
        let peer = peers.peers.get(index)?;
        if !bound_usable(peer, cx.now) {
            return None;
        }
        let choice = Choice { list, index };
        if self.round_robin && !(list == ListKind::Primary && cx.plan.single) {
            rr_bound(peers, cx, index);
        }
        Some(choice)
    }

    /// After a pick: the `Set-Cookie` line (cookie mode) and the server id to learn.
    #[inline(never)]
    pub fn on_try(&self, c: Choice, b: &mut StickyBufs) {
        let sid = self.sid(c);
        b.sid.clear();
        b.sid.extend_from_slice(sid);
        if let Some(conf) = &self.conf.cookie {
            cookie::line(&conf.name, sid, &b.suffix, &mut b.line);
        }
    }

    /// The answer's head is written in `out` (ending in its blank line): adds the cookie, and picks the session to
    /// learn from the `create=` values (the answer's, read through `answer`) or the lookup value.
    #[inline(never)]
    pub fn answer(&self, out: &mut Vec<u8>, answer: &dyn VarSource, b: &mut StickyBufs) {
        if self.conf.cookie.is_some() && out.ends_with(b"\r\n\r\n") {
            let at = out.len() - 2;
            out.splice(at..at, b.line.iter().copied());
        }
        let Some(l) = &self.conf.learn else { return };
        b.session.clear();
        b.create_now = false;
        let mut start = 0;
        for ((t, reads), end) in l.create.iter().zip(&self.create_reads_answer).zip(&b.create_ends) {
            if *reads {
                t.eval_into(answer, &mut b.scratch);
                if !b.scratch.is_empty() {
                    b.session.extend_from_slice(&b.scratch);
                }
            } else if let Some(v) = b.create.get(start..*end).filter(|v| !v.is_empty()) {
                b.session.extend_from_slice(v);
            }
            start = *end;
            if !b.session.is_empty() {
                b.create_now = true;
                return;
            }
        }
        b.session.extend_from_slice(&b.id);
    }

    /// Whether the session is learned when the head is read (`header`) rather than when the request ends.
    pub fn learns_at_header(&self) -> bool {
        self.conf.learn.as_ref().is_some_and(|l| l.header)
    }

    /// nginx's learn step at `now_ms`: the session chosen by [`answer`](Self::answer) now names the peer that
    /// answered; a new one is made only from a `create=` value.
    #[inline(never)]
    pub fn learn(&self, b: &StickyBufs, now_ms: u64) {
        let Some(t) = &self.table else { return };
        if b.session.is_empty() || b.sid.is_empty() {
            return;
        }
        t.learn(&md5::digest(&b.session), &b.sid, now_ms, self.timeout_ms, b.create_now);
    }
}

/// A bound peer's test: nginx's usual one, but a draining peer takes its bound requests.
fn bound_usable(peer: &Peer, now: u64) -> bool {
    !peer.down
        && peer.slot.flags().bits() & BOUND_BLOCKED == 0
        && !peer.slot.is_failed(now, peer.max_fails, peer.fail_timeout)
        && peer.slot.has_room(peer.max_conns)
}

/// Round robin's weights for a bound pick of `index` (nginx's `ngx_http_upstream_get_peer` with a sticky peer).
fn rr_bound(peers: &PeerList, cx: &mut PickCx<'_>, index: usize) {
    let Some(bound) = peers.peers.get(index) else { return };
    let total_weight = i64::try_from(peers.total_weight).unwrap_or(i64::MAX);
    let low_limit = -(total_weight - i64::from(bound.weight));
    let weights = cx.shard.weights(cx.attempt.list);
    if weights.current.get(index).is_some_and(|cw| *cw <= low_limit) {
        return;
    }
    let mut total: i64 = 0;
    for (i, peer) in peers.peers.iter().enumerate() {
        if peers.candidate(i, &cx.attempt.tried, cx.now).is_none() {
            continue;
        }
        let (Some(cw), Some(ew)) = (weights.current.get_mut(i), weights.effective.get_mut(i)) else {
            continue;
        };
        let used = if peer.slow_start == 0 {
            *ew
        } else {
            (*ew).min(peer.ramp_weight(cx.now))
        };
        *cw += used;
        total += used;
        if *ew < i64::from(peer.weight) {
            *ew += 1;
        }
    }
    if let Some(cw) = weights.current.get_mut(index) {
        *cw -= total;
    }
}

/// The sticky plan of `conf` (none without `sticky`), its server ids in the order `plan`'s lists were built, and
/// the learn table (`None`: a fresh one, for plans built without a zone).
pub fn build(
    conf: &crate::config::model::UpstreamConf,
    plan: &super::UpstreamPlan,
    table: Option<Arc<LearnTable>>,
) -> Option<Box<StickyPlan>> {
    let sticky = conf.sticky.as_deref()?;
    let (mut primary, mut backup) = (Vec::new(), Vec::new());
    for line in &conf.servers {
        for addr in &line.addrs {
            let id = server_id(*addr, line.route.as_deref());
            if line.backup {
                backup.push(id);
            } else {
                primary.push(id);
            }
        }
    }
    debug_assert_eq!((primary.len(), backup.len()), (plan.primary.len(), plan.backup.len()));
    let table = match (&sticky.learn, table) {
        (None, _) => None,
        (Some(_), Some(t)) => Some(t),
        (Some(l), None) => Some(Arc::new(LearnTable::new(&conf.name, l.size))),
    };
    let round_robin = matches!(conf.method, crate::config::model::Method::RoundRobin);
    Some(Box::new(StickyPlan::new(
        sticky.clone(),
        (primary, backup),
        round_robin,
        table,
    )))
}

#[cfg(test)]
mod tests;
