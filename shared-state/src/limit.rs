//! `limit_req_zone` and `limit_conn_zone` state: fixed-size tables of 128-bit atomic entries every shard shares,
//! each entry a key's 64-bit hash and its state, changed only by compare-and-swap of the whole entry.
//!
//! nginx keeps a zone's keys in a slab-allocated red-black tree under the zone's mutex. Here a zone of SIZE bytes
//! has a fixed number of entries (`limit_req`: one per 64 bytes, `limit_conn`: one per 32 bytes, the "states" per
//! megabyte nginx's documentation gives: 16 thousand and 32 thousand), and a key lives in one of the [`WINDOW`]
//! entries from its hash's home position. Because the hash and the state change together in one CAS, a check and
//! its update are one atomic step, as under nginx's lock: the limit is exact across shards.
//!
//! When a key's window has no free entry, `limit_req` takes the one of the window used longest ago (nginx frees
//! its zone's oldest node when the slab is full); `limit_conn` can free only entries with no connection, so a
//! full window answers as limited, as nginx's "could not allocate node".

use portable_atomic::AtomicU128;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Entries probed from a key's home position.
pub const WINDOW: usize = 8;

/// Bytes of zone per `limit_req` entry (nginx: "one megabyte zone can keep about 16 thousand 64-byte states").
pub const REQ_BYTES_PER_ENTRY: u64 = 64;

/// Bytes of zone per `limit_conn` entry (nginx: "about 32 thousand 32-byte states").
pub const CONN_BYTES_PER_ENTRY: u64 = 32;

/// Bits of an entry's state holding the excess (milli-requests).
const EXCESS_BITS: u32 = 28;

/// The largest excess an entry holds: `burst=` above `MAX_EXCESS / 1000` is refused at load.
pub const MAX_EXCESS: u64 = (1 << EXCESS_BITS) - 1;

/// Bits of an entry's state holding the last time (milliseconds since the table was made, modulo 2^36: about
/// 795 days).
const LAST_BITS: u32 = 36;
const LAST_MASK: u64 = (1 << LAST_BITS) - 1;

/// CAS attempts before a request gives up (never reached but under extreme contention on one entry).
const TRIES: usize = 64;

/// A key's hash as the tables keep it (0 marks a free entry, so a hash of 0 is kept as 1).
fn stored(hash: u64) -> u64 {
    hash.max(1)
}

fn pack(hash: u64, state: u64) -> u128 {
    (u128::from(hash) << 64) | u128::from(state)
}

fn unpack(e: u128) -> (u64, u64) {
    // the high and the low half: each fits a u64
    ((e >> 64) as u64, e as u64)
}

fn home(hash: u64, len: usize) -> usize {
    // the table's length fits a u64 and the remainder fits a usize
    (hash % len.max(1) as u64) as usize
}

/// A `limit_req` entry's state: the excess (milli-requests) and when it was last accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Milli-requests over the rate.
    pub excess: u64,
    /// Milliseconds (of the table's clock, modulo 2^36).
    pub last: u64,
}

impl Bucket {
    fn pack(self) -> u64 {
        ((self.last & LAST_MASK) << EXCESS_BITS) | self.excess.min(MAX_EXCESS)
    }

    fn unpack(state: u64) -> Bucket {
        Bucket {
            excess: state & MAX_EXCESS,
            last: (state >> EXCESS_BITS) & LAST_MASK,
        }
    }

    /// nginx's elapsed time: `now - last` as a signed number, a time more than a minute in the future read as 1
    /// and one less than that as 0.
    fn elapsed(self, now: u64) -> u64 {
        let diff = now.wrapping_sub(self.last) & LAST_MASK;
        if diff < 1 << (LAST_BITS - 1) {
            return diff;
        }
        let behind = (1 << LAST_BITS) - diff;
        u64::from(behind > 60_000)
    }

    /// The excess after one more request at `now` (nginx's `excess - rate * ms / 1000 + 1000`, at least 0), and
    /// the elapsed milliseconds.
    pub fn next(self, rate: u64, now: u64) -> (u64, u64) {
        let ms = self.elapsed(now);
        let drained = rate.saturating_mul(ms) / 1000;
        ((self.excess + 1000).saturating_sub(drained), ms)
    }
}

/// What a `limit_req` lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqVerdict {
    /// Over the burst: nothing is stored (nginx's `NGX_BUSY`), with the excess it would have had.
    Busy(u64),
    /// Within the burst, stored (the last zone of a request, nginx's `NGX_OK`), with its excess.
    Passed(u64),
    /// Within the burst, not stored yet: [`ReqTable::account`] stores it once every zone passed (nginx's
    /// `NGX_AGAIN`); the entry's index and the excess.
    Pending(usize, u64),
    /// No entry could be had (nginx's "could not allocate node").
    NoEntry,
}

/// What a zone decided, as nginx Plus's API counts it (`limit_reqs`: all five; `limit_conns`: `Passed`,
/// `Rejected`, `RejectedDryRun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Went on at once.
    Passed = 0,
    /// Went on after a delay.
    Delayed = 1,
    /// Answered with the limit's status (or closed, in stream).
    Rejected = 2,
    /// Would have been delayed (dry run).
    DelayedDryRun = 3,
    /// Would have been rejected (dry run).
    RejectedDryRun = 4,
}

/// A zone's counters of [`Decided`], on a cache line of their own.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Decisions([AtomicU64; 5]);

impl Decisions {
    /// Counts one decision.
    pub fn count(&self, d: Decided) {
        self.0[d as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts, by [`Decided`] order.
    pub fn get(&self) -> [u64; 5] {
        let mut out = [0; 5];
        for (o, c) in out.iter_mut().zip(&self.0) {
            *o = c.load(Ordering::Relaxed);
        }
        out
    }
}

/// One `limit_req_zone`: its key text, size and entries.
#[derive(Debug)]
pub struct ReqTable {
    key: String,
    size: u64,
    epoch: Instant,
    entries: Box<[AtomicU128]>,
    /// What requests were told, for the API.
    pub decisions: Decisions,
}

impl ReqTable {
    /// A table for a zone of `size` bytes keyed by `key` (at least [`WINDOW`] entries).
    pub fn new(key: &str, size: u64) -> ReqTable {
        ReqTable {
            key: key.to_string(),
            size,
            epoch: Instant::now(),
            entries: entries(size / REQ_BYTES_PER_ENTRY),
            decisions: Decisions::default(),
        }
    }

    /// The zone's key as written.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The zone's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many keys it holds at most.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The table's clock: milliseconds since it was made.
    pub fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// nginx's `ngx_http_limit_req_lookup` for the key of `hash` at `now`, with the zone's `rate`
    /// (milli-requests per second) and the limit's `burst` (milli-requests): a known key's excess checked against
    /// the burst and, when `account` (the request's last zone), stored with its time; a new key starts at 0.
    pub fn lookup(&self, hash: u64, rate: u64, burst: u64, now: u64, account: bool) -> ReqVerdict {
        let hash = stored(hash);
        for _ in 0..TRIES {
            let Some((index, seen)) = self.find(hash) else {
                match self.insert(hash, rate, now, account) {
                    Some(Some(index)) if !account => return ReqVerdict::Pending(index, 0),
                    Some(_) => return ReqVerdict::Passed(0),
                    None => continue,
                }
            };
            let bucket = Bucket::unpack(unpack(seen).1);
            let (excess, ms) = bucket.next(rate, now);
            if excess > burst {
                return ReqVerdict::Busy(excess);
            }
            if !account {
                return ReqVerdict::Pending(index, excess);
            }
            let last = if ms != 0 { now } else { bucket.last };
            let new = pack(hash, Bucket { excess, last }.pack());
            if self.entries[index]
                .compare_exchange(seen, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return ReqVerdict::Passed(excess);
            }
        }
        ReqVerdict::NoEntry
    }

    /// nginx's `ngx_http_limit_req_account` for one earlier zone of a request: the entry at `index` (if it still
    /// holds the key) takes one more request at `now`; the excess stored.
    pub fn account(&self, index: usize, hash: u64, rate: u64, now: u64) -> u64 {
        let hash = stored(hash);
        let Some(entry) = self.entries.get(index) else {
            return 0;
        };
        for _ in 0..TRIES {
            let seen = entry.load(Ordering::Acquire);
            let (h, state) = unpack(seen);
            if h != hash {
                return 0;
            }
            let bucket = Bucket::unpack(state);
            let (excess, ms) = bucket.next(rate, now);
            let last = if ms != 0 { now } else { bucket.last };
            let new = pack(hash, Bucket { excess, last }.pack());
            if entry
                .compare_exchange(seen, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return excess;
            }
        }
        0
    }

    /// The state of the key of `hash`, if the table holds it.
    pub fn bucket(&self, hash: u64) -> Option<Bucket> {
        self.find(stored(hash)).map(|(_, e)| Bucket::unpack(unpack(e).1))
    }

    fn find(&self, hash: u64) -> Option<(usize, u128)> {
        let len = self.entries.len();
        let start = home(hash, len);
        (0..WINDOW.min(len)).find_map(|i| {
            let index = (start + i) % len;
            let e = self.entries[index].load(Ordering::Acquire);
            (unpack(e).0 == hash).then_some((index, e))
        })
    }

    /// Puts a new key in its window: a free entry, else one drained for a minute (nginx's expiry of idle
    /// nodes), else the one used longest ago (nginx's forced free of its oldest node). A new key of the request's
    /// last zone starts at excess 0 at `now`; of an earlier zone, long ago (nginx's `last = 0`: its account gives
    /// 0). `None` when another shard changed the entry first (the caller looks again); else the entry's index.
    fn insert(&self, hash: u64, rate: u64, now: u64, account: bool) -> Option<Option<usize>> {
        let len = self.entries.len();
        let start = home(hash, len);
        let mut victim: Option<(usize, u128, u64)> = None;
        for i in 0..WINDOW.min(len) {
            let index = (start + i) % len;
            let e = self.entries[index].load(Ordering::Acquire);
            let (h, state) = unpack(e);
            if h == 0 {
                victim = Some((index, e, u64::MAX));
                break;
            }
            let b = Bucket::unpack(state);
            let idle = b.elapsed(now);
            let drained = idle >= 60_000 && b.excess <= rate.saturating_mul(idle) / 1000;
            let age = if drained { u64::MAX - 1 } else { idle };
            if victim.is_none_or(|v| age > v.2) {
                victim = Some((index, e, age));
            }
        }
        let (index, seen, _) = victim?;
        let last = if account {
            now
        } else {
            now.wrapping_sub(1 << (LAST_BITS - 2))
        };
        let new = pack(hash, Bucket { excess: 0, last }.pack());
        self.entries[index]
            .compare_exchange(seen, new, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Some(index))
    }
}

/// One `limit_conn_zone`: its key text, size and entries (a key's hash and its connections).
#[derive(Debug)]
pub struct ConnTable {
    key: String,
    size: u64,
    entries: Box<[AtomicU128]>,
    /// What requests (sessions) were told, for the API.
    pub decisions: Decisions,
}

impl ConnTable {
    /// A table for a zone of `size` bytes keyed by `key` (at least [`WINDOW`] entries).
    pub fn new(key: &str, size: u64) -> ConnTable {
        ConnTable {
            key: key.to_string(),
            size,
            entries: entries(size / CONN_BYTES_PER_ENTRY),
            decisions: Decisions::default(),
        }
    }

    /// The zone's key as written.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The zone's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many keys it holds at most.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Counts one more connection for the key of `hash` if it has fewer than `limit`: `Ok(index)` of its entry
    /// (give it back to [`ConnTable::release`]), `Err(true)` at the limit, `Err(false)` when the key's window has
    /// no free entry (nginx's "could not allocate node").
    pub fn acquire(&self, hash: u64, limit: u64) -> Result<usize, bool> {
        let hash = stored(hash);
        let len = self.entries.len();
        let start = home(hash, len);
        for _ in 0..TRIES {
            let mut free = None;
            let mut found = None;
            for i in 0..WINDOW.min(len) {
                let index = (start + i) % len;
                let e = self.entries[index].load(Ordering::Acquire);
                match unpack(e).0 {
                    h if h == hash => {
                        found = Some((index, e));
                        break;
                    }
                    0 if free.is_none() => free = Some((index, e)),
                    _ => {}
                }
            }
            if let Some((index, seen)) = found {
                let count = unpack(seen).1;
                if count >= limit {
                    return Err(true);
                }
                if self.entries[index]
                    .compare_exchange(seen, pack(hash, count + 1), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(index);
                }
                continue;
            }
            let Some((index, seen)) = free else {
                return Err(false);
            };
            if limit == 0 {
                return Err(true);
            }
            if self.entries[index]
                .compare_exchange(seen, pack(hash, 1), Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // another shard may have put the key in an earlier free entry of the window at the same moment:
            // the entry nearer home keeps the key, this one gives its unit back and counts there
            if self.earlier(hash, start, index) {
                self.release(index, hash);
                continue;
            }
            return Ok(index);
        }
        Err(false)
    }

    /// Whether the key of `hash` is also in an entry of its window before `index`.
    fn earlier(&self, hash: u64, start: usize, index: usize) -> bool {
        let len = self.entries.len();
        (0..WINDOW.min(len))
            .map(|i| (start + i) % len)
            .take_while(|&i| i != index)
            .any(|i| unpack(self.entries[i].load(Ordering::Acquire)).0 == hash)
    }

    /// Gives back one connection of the key of `hash` counted at `index`; the entry is free again at 0 (nginx
    /// deletes the node).
    pub fn release(&self, index: usize, hash: u64) {
        let hash = stored(hash);
        let Some(entry) = self.entries.get(index) else {
            return;
        };
        let mut seen = entry.load(Ordering::Acquire);
        loop {
            let (h, count) = unpack(seen);
            if h != hash || count == 0 {
                return;
            }
            let new = if count == 1 { 0 } else { pack(hash, count - 1) };
            match entry.compare_exchange(seen, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }

    /// The connections the key of `hash` has.
    pub fn count(&self, hash: u64) -> u64 {
        let hash = stored(hash);
        let len = self.entries.len();
        let start = home(hash, len);
        (0..WINDOW.min(len))
            .map(|i| unpack(self.entries[(start + i) % len].load(Ordering::Acquire)))
            .filter(|(h, _)| *h == hash)
            .map(|(_, c)| c)
            .sum()
    }
}

fn entries(n: u64) -> Box<[AtomicU128]> {
    let n = usize::try_from(n).unwrap_or(usize::MAX).max(WINDOW);
    (0..n).map(|_| AtomicU128::new(0)).collect()
}

/// A connection counted in a [`ConnTable`], given back when dropped (whatever ends the connection or request).
#[derive(Debug)]
pub struct ConnUnit {
    table: std::sync::Arc<ConnTable>,
    index: usize,
    hash: u64,
}

impl ConnUnit {
    /// Counts one connection for the key of `hash` in `table` (as [`ConnTable::acquire`]).
    pub fn take(table: &std::sync::Arc<ConnTable>, hash: u64, limit: u64) -> Result<ConnUnit, bool> {
        table.acquire(hash, limit).map(|index| ConnUnit {
            table: std::sync::Arc::clone(table),
            index,
            hash,
        })
    }
}

impl Drop for ConnUnit {
    fn drop(&mut self) {
        self.table.release(self.index, self.hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_entries_are_lock_free() {
        assert!(AtomicU128::is_lock_free());
    }

    #[test]
    fn sizes_give_nginx_state_counts() {
        assert_eq!(ReqTable::new("$k", 1 << 20).capacity(), 16384);
        assert_eq!(ConnTable::new("$k", 1 << 20).capacity(), 32768);
        assert_eq!(ReqTable::new("$k", 10).capacity(), WINDOW);
    }

    #[test]
    fn leaky_bucket_as_nginx() {
        // rate=2r/s, burst=1: 2000 milli-requests per second, burst 1000
        let t = ReqTable::new("$k", 1 << 16);
        assert_eq!(t.lookup(7, 2000, 1000, 10_000, true), ReqVerdict::Passed(0));
        // 1 ms later: 0 - 2*1/1000... + 1000 = 1000 (within the burst)
        assert_eq!(t.lookup(7, 2000, 1000, 10_001, true), ReqVerdict::Passed(998));
        // right away: 998 + 1000 = 1998 > 1000: busy, nothing stored
        assert_eq!(t.lookup(7, 2000, 1000, 10_001, true), ReqVerdict::Busy(1998));
        assert_eq!(
            t.bucket(7),
            Some(Bucket {
                excess: 998,
                last: 10_001
            })
        );
        // 250 ms drain 500: 998 - 500 + 1000 = 1498, busy; 500 ms drain 1000: 998
        assert_eq!(t.lookup(7, 2000, 1000, 10_251, true), ReqVerdict::Busy(1498));
        assert_eq!(t.lookup(7, 2000, 1000, 10_501, true), ReqVerdict::Passed(998));
        // a long pause drains it all
        assert_eq!(t.lookup(7, 2000, 1000, 20_000, true), ReqVerdict::Passed(0));
        assert_eq!(t.lookup(7, 2000, 1000, 20_000, true), ReqVerdict::Passed(1000));
        // r/m: rate=30r/m is 500 milli-requests per second
        assert_eq!(t.lookup(8, 500, 0, 0, true), ReqVerdict::Passed(0));
        assert_eq!(t.lookup(8, 500, 0, 1_999, true), ReqVerdict::Busy(1));
        assert_eq!(t.lookup(8, 500, 0, 2_000, true), ReqVerdict::Passed(0));
    }

    #[test]
    fn same_millisecond_keeps_last_and_clock_skew_as_nginx() {
        let b = Bucket {
            excess: 500,
            last: 1000,
        };
        assert_eq!(b.next(1000, 1000), (1500, 0));
        // a time a little behind counts as no time, far behind as 1 ms
        assert_eq!(b.next(1000, 990), (1500, 0));
        assert_eq!(b.next(1_000_000, 1000u64.wrapping_sub(70_000) & LAST_MASK), (500, 1));
        // the 36-bit clock wraps
        let late = Bucket {
            excess: 1000,
            last: LAST_MASK - 9,
        };
        assert_eq!(late.next(1000, 10), (1980, 20));
    }

    #[test]
    fn earlier_zones_are_accounted_after_every_zone_passed() {
        let t = ReqTable::new("$k", 1 << 16);
        // a new key of an earlier zone: pending at 0, accounted as nginx's last = 0 (excess 0)
        let ReqVerdict::Pending(i, 0) = t.lookup(5, 1000, 0, 100, false) else {
            panic!("pending");
        };
        assert_eq!(t.account(i, 5, 1000, 100), 0);
        // then one more right away: 1000 > burst 0, busy; with burst 1000, pending at 1000
        assert_eq!(t.lookup(5, 1000, 0, 100, false), ReqVerdict::Busy(1000));
        assert_eq!(t.lookup(5, 1000, 1000, 100, false), ReqVerdict::Pending(i, 1000));
        // the pending lookup stored nothing
        assert_eq!(t.bucket(5).map(|b| b.excess), Some(0));
        assert_eq!(t.account(i, 5, 1000, 100), 1000);
        // an entry taken by another key is not accounted
        assert_eq!(t.account(i, 6, 1000, 100), 0);
    }

    #[test]
    fn a_full_window_gives_up_its_oldest_key() {
        // WINDOW entries: every key shares one window
        let t = ReqTable::new("$k", 1);
        for k in 1..=WINDOW as u64 {
            assert_eq!(t.lookup(k, 1000, 0, k, true), ReqVerdict::Passed(0));
        }
        assert_eq!(t.lookup(1, 1000, 0, 20, true), ReqVerdict::Busy(1000 - 19));
        // one more key: key 1 goes (stored last at 1: its busy request at 20 stored nothing)
        assert_eq!(t.lookup(100, 1000, 0, 30, true), ReqVerdict::Passed(0));
        assert_eq!(t.bucket(1).map(|b| b.last), None);
        assert!(t.bucket(2).is_some());
    }

    #[test]
    fn connections_are_counted_up_to_the_limit_and_freed() {
        let t = Arc::new(ConnTable::new("$k", 1 << 12));
        let a = ConnUnit::take(&t, 9, 2).expect("first");
        let b = ConnUnit::take(&t, 9, 2).expect("second");
        assert_eq!(ConnUnit::take(&t, 9, 2).err(), Some(true));
        assert_eq!(t.count(9), 2);
        drop(a);
        let c = ConnUnit::take(&t, 9, 2).expect("again");
        drop((b, c));
        assert_eq!(t.count(9), 0);
        assert_eq!(ConnUnit::take(&t, 9, 0).err(), Some(true));
    }

    #[test]
    fn a_full_conn_window_refuses() {
        let t = Arc::new(ConnTable::new("$k", 1));
        let held: Vec<_> = (1..=WINDOW as u64)
            .map(|k| ConnUnit::take(&t, k, 1).expect("room"))
            .collect();
        assert_eq!(ConnUnit::take(&t, 1000, 1).err(), Some(false));
        drop(held);
        assert!(ConnUnit::take(&t, 1000, 1).is_ok());
    }

    #[test]
    fn the_limit_holds_across_threads() {
        let t = Arc::new(ConnTable::new("$k", 1 << 10));
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (t, peak) = (Arc::clone(&t), Arc::clone(&peak));
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Ok(u) = ConnUnit::take(&t, 3, 3) {
                            peak.fetch_max(t.count(3), Ordering::Relaxed);
                            drop(u);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().expect("thread");
        }
        assert!(peak.load(Ordering::Relaxed) <= 3);
        assert_eq!(t.count(3), 0);
    }

    #[test]
    fn requests_admitted_across_threads_match_the_rate() {
        // burst 4, a frozen clock: exactly 5 requests pass, whatever the threads
        let t = Arc::new(ReqTable::new("$k", 1 << 12));
        let passed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (t, passed) = (Arc::clone(&t), Arc::clone(&passed));
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        if let ReqVerdict::Passed(_) = t.lookup(11, 1000, 4000, 50, true) {
                            passed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().expect("thread");
        }
        assert_eq!(passed.load(Ordering::Relaxed), 5);
    }
}
