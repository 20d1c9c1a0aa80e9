//! One request's attempt: the `tried` set, the tries budget, per-method hash state, and the `conns` guard.

use super::least_time::{FreeCx, Phase, TryTimes};
use super::{Choice, ListKind, Peer, PickCx, ShardState, UpstreamPlan};
use corelb_shared_state::ConnGuard;

/// How an attempt on a peer ended, as nginx's `free` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response was passed on (including a 5xx passed through on the last try).
    Success,
    /// Connect error, timeout, invalid header, or a retried 5xx/429: counts toward `max_fails`.
    Failed,
    /// A retried 403/404: not a failure.
    Next,
}

/// nginx's limit on candidates a hash-style method may reject in one request before falling back to round robin.
pub const MAX_MISSES: u32 = 20;

/// The tried peers of one list, as a bitset (inline up to 128 peers).
#[derive(Debug, Clone, Default)]
pub struct Tried {
    inline: [u64; 2],
    spill: Vec<u64>,
}

impl Tried {
    /// Whether peer `i` was tried.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        let (w, b) = (i / 64, i % 64);
        let word = if w < 2 {
            self.inline[w]
        } else {
            self.spill.get(w - 2).copied().unwrap_or(0)
        };
        word & (1 << b) != 0
    }

    /// Marks peer `i` tried.
    #[inline]
    pub fn insert(&mut self, i: usize) {
        let (w, b) = (i / 64, i % 64);
        if w < 2 {
            self.inline[w] |= 1 << b;
        } else {
            if self.spill.len() <= w - 2 {
                self.spill.resize(w - 1, 0);
            }
            self.spill[w - 2] |= 1 << b;
        }
    }

    /// Forgets every tried peer (nginx clears the bitmap when it switches to the backup list).
    pub fn clear(&mut self) {
        self.inline = [0; 2];
        self.spill.iter_mut().for_each(|w| *w = 0);
    }
}

/// The per-request state balancers read and change. Separate from [`Attempt`] so that a balancer can borrow it
/// mutably while the plan is borrowed shared.
#[derive(Debug, Clone)]
pub struct AttemptState {
    /// The list this request is on (it moves to backup once, and stays there).
    pub list: ListKind,
    /// Tried peers of the current list.
    pub tried: Tried,
    /// Tries left (nginx's `tries`).
    pub tries: usize,
    /// `hash`: the accumulator; `hash consistent`: the ring position (`pos`).
    pub hash: u64,
    /// `hash`: the re-hash counter.
    pub rehash: u32,
    /// ip_hash/hash/consistent hash/random: misses so far (after 20, round robin takes over).
    pub misses: u32,
    /// ip_hash: the running hash, seeded with 89 and stored only on success.
    pub iphash: u32,
    /// least_time: the current try's in-flight unit and whether `notify` recorded its average.
    pub least_time: FreeCx,
    /// sticky: the index of the peer the request is bound to, on the primary and on the backup list.
    pub bound: [Option<u32>; 2],
}

impl AttemptState {
    /// Fresh state with `tries` tries.
    pub fn new(tries: usize) -> Self {
        AttemptState {
            list: ListKind::Primary,
            tried: Tried::default(),
            tries,
            hash: 0,
            rehash: 0,
            misses: 0,
            iphash: 89,
            least_time: FreeCx::default(),
            bound: [None; 2],
        }
    }

    /// Whether the hash-style methods (ip_hash, hash, consistent hash, random) have missed more than nginx's 20
    /// times in this request, after which round robin takes over.
    pub fn misses_exhausted(&self) -> bool {
        self.misses > MAX_MISSES
    }

    /// Counts one miss (a tried or unusable candidate); `true` once the budget of 20 is exceeded.
    pub fn miss(&mut self) -> bool {
        self.misses += 1;
        self.misses_exhausted()
    }

    /// Moves the request to the backup list, clearing `tried` (nginx's backup switch).
    pub fn switch_to_backup(&mut self) {
        self.list = ListKind::Backup;
        self.tried.clear();
    }
}

/// One request's walk over an upstream's peers. Borrowing the plan (held by the request through an
/// `Arc<Snapshot>`) lets the `conns` guard borrow the slot: no reference counting per pick. Dropped without a
/// report (a client gone, a panic), it only gives `conns` back: no failure is counted.
#[derive(Debug)]
pub struct Attempt<'p> {
    plan: &'p UpstreamPlan,
    state: AttemptState,
    current: Option<Choice>,
    guard: Option<ConnGuard<'p>>,
}

impl<'p> Attempt<'p> {
    /// Starts an attempt on `plan` for a request whose key bytes are `key` (see [`super::KeySpec`]).
    pub fn new(plan: &'p UpstreamPlan, next_upstream_tries: usize, key: &[u8]) -> Self {
        let mut state = AttemptState::new(plan.initial_tries(next_upstream_tries));
        plan.balancer.start(&mut state, key);
        Attempt {
            plan,
            state,
            current: None,
            guard: None,
        }
    }

    /// The plan this attempt walks.
    pub fn plan(&self) -> &'p UpstreamPlan {
        self.plan
    }

    /// Tries left.
    pub fn tries_left(&self) -> usize {
        self.state.tries
    }

    /// The per-request state (for tests and diagnostics).
    pub fn state(&self) -> &AttemptState {
        &self.state
    }

    /// Binds the request to the peers whose server id is `sid` (`sticky`; nothing without it).
    pub fn bind(&mut self, sid: &[u8]) {
        if let Some(s) = self.plan.sticky.as_deref() {
            self.state.bound = s.resolve(sid);
        }
    }

    /// The list and index of the peer picked last, if its attempt has not been reported yet.
    pub fn current_choice(&self) -> Option<Choice> {
        self.current
    }

    /// The peer picked last, if its attempt has not been reported yet.
    pub fn current(&self) -> Option<&'p Peer> {
        self.current.map(|c| self.plan.peer(c))
    }

    /// Picks the next peer and takes one of its `conns` (nginx's `get` with its on-select step). `None` means no
    /// peer is usable: answer 502. A peer that another shard filled up between the check and the take (only
    /// possible with `max_conns` and several shards) is marked tried and the pick runs again.
    pub fn pick(&mut self, shard: &mut ShardState, key: &[u8], now: u64) -> Option<&'p Peer> {
        self.pick_at(shard, key, now, now.saturating_mul(1000))
    }

    /// [`pick`](Self::pick) with the millisecond clock too (`now_ms`, read with `now`), for `least_time`.
    pub fn pick_at(&mut self, shard: &mut ShardState, key: &[u8], now: u64, now_ms: u64) -> Option<&'p Peer> {
        debug_assert!(self.guard.is_none(), "report the previous outcome before picking again");
        self.guard = None;
        if self.plan.primary.is_empty() {
            // Only an upstream kept in a state file can have no primary peer (see `UpstreamPlan::build_with`).
            return None;
        }
        loop {
            let plan = self.plan;
            let mut cx = PickCx {
                plan,
                shard: &mut *shard,
                attempt: &mut self.state,
                key,
                now,
                now_ms,
            };
            let bound = plan.sticky.as_deref().and_then(|s| s.choose_bound(&mut cx));
            let choice = match bound {
                Some(c) => c,
                None => plan.balancer.choose(&mut cx)?,
            };
            let peer = plan.peer(choice);
            let single = plan.single && choice.list == ListKind::Primary;
            match peer.slot.try_acquire(peer.max_conns) {
                Some(g) => {
                    if !single {
                        self.state.tried.insert(choice.index);
                        peer.slot
                            .note_selected_recovering(now, peer.max_fails, peer.fail_timeout);
                        if let Some(lt) = plan.least_time {
                            let holding = lt.on_pick(peer.slot.times(), now_ms);
                            self.state.least_time = FreeCx {
                                holding,
                                notified: false,
                            };
                        }
                    }
                    self.guard = Some(g);
                    self.current = Some(choice);
                    return Some(peer);
                }
                None if single => return None,
                None => self.state.tried.insert(choice.index),
            }
        }
    }

    /// Reports how the attempt on the current peer ended (nginx's `free`): updates `fails`/`checked`/`accessed` in
    /// the zone and the shard's `effective_weight`, gives the `conns` unit back, and spends one try.
    pub fn report(&mut self, outcome: Outcome, shard: &mut ShardState, now: u64) {
        self.report_timed(outcome, shard, now, TryTimes::None, now.saturating_mul(1000));
    }

    /// `least_time`'s `notify`: the current try reached `phase` after `ms` (at `now_ms`).
    pub fn notify(&mut self, phase: Phase, ms: u64, now_ms: u64) {
        let (Some(lt), Some(peer)) = (self.plan.least_time, self.current()) else {
            return;
        };
        let cx = &mut self.state.least_time;
        if lt.notify(peer.slot.times(), phase, ms, now_ms, cx.holding) {
            *cx = FreeCx {
                holding: false,
                notified: true,
            };
        }
    }

    /// [`report`](Self::report) with what the try measured (`least_time` averages them; others ignore it).
    pub fn report_timed(&mut self, outcome: Outcome, shard: &mut ShardState, now: u64, times: TryTimes, now_ms: u64) {
        let Some(choice) = self.current.take() else { return };
        let peer = self.plan.peer(choice);
        if let Some(lt) = self.plan.least_time {
            let cx = std::mem::take(&mut self.state.least_time);
            lt.on_free(peer.slot.times(), outcome, times, now_ms, cx);
        }
        if self.plan.ewma {
            super::peak_ewma::on_free(peer, outcome, times, now_ms);
        }
        if self.plan.single && choice.list == ListKind::Primary {
            self.guard = None;
            self.state.tries = 0;
            return;
        }
        if outcome == Outcome::Failed {
            peer.slot.record_failure_within(now, peer.max_fails, peer.fail_timeout);
            let ew = &mut shard.weights(choice.list).effective[choice.index];
            if let Some(step) = peer.weight.checked_div(peer.max_fails) {
                *ew -= i64::from(step);
            }
            if *ew < 0 {
                *ew = 0;
            }
        } else {
            peer.slot.record_success();
        }
        self.guard = None;
        self.state.tries = self.state.tries.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::Tried;

    #[test]
    fn tried_bitset_spills_past_128() {
        let mut t = Tried::default();
        for i in [0, 63, 64, 127, 128, 500] {
            assert!(!t.contains(i));
            t.insert(i);
            assert!(t.contains(i));
        }
        assert!(!t.contains(1) && !t.contains(129) && !t.contains(10_000));
        t.clear();
        assert!(!t.contains(500) && !t.contains(0));
    }
}
