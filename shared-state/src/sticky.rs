//! `LearnTable`: `sticky learn`'s sessions (an MD5 of the session id -> the server id), a fixed-size table of
//! atomics every shard shares, kept by the zone across reloads.
//!
//! nginx keeps the sessions in a slab-allocated red-black tree in its `zone=NAME:SIZE` and, when the slab is full,
//! expires the least recently used session. Here the size gives a fixed number of 64-byte entries (one per 128
//! bytes of the zone, about nginx's "1m ~ 8000 sessions"), found by open addressing in a window of
//! [`WINDOW`] entries from the key's hash. An insert takes an empty or expired entry of the window, else the one
//! used longest ago (nginx's eviction of the oldest, within the window). Expiry is lazy: a session not used for
//! `timeout` is no longer found (nginx's timer removes it at about that time).
//!
//! Each entry is a seqlock: a writer moves its version from even to odd with a compare-and-swap (a writer that
//! loses the race skips its write: another request is writing the same session), writes, and makes it even again;
//! a reader retries while the version is odd or changed. No lock, no allocation.

use std::sync::atomic::{AtomicU64, Ordering};

/// The longest server id an entry holds (nginx's `NGX_HTTP_UPSTREAM_SID_LEN`: an MD5 in hex, or a `route=`).
pub const SID_MAX: usize = 32;

/// Entries probed from a key's home position.
pub const WINDOW: usize = 8;

/// Bytes of zone per entry.
pub const BYTES_PER_SESSION: u64 = 128;

/// An MD5 digest of a session id.
pub type SessionKey = [u8; 16];

/// A server id read from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sid {
    len: u8,
    bytes: [u8; SID_MAX],
}

impl Sid {
    /// The id (at most [`SID_MAX`] bytes; longer input is cut).
    pub fn new(id: &[u8]) -> Sid {
        let mut bytes = [0; SID_MAX];
        let n = id.len().min(SID_MAX);
        bytes[..n].copy_from_slice(&id[..n]);
        Sid {
            len: u8::try_from(n).unwrap_or(0),
            bytes,
        }
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// One session: version, key, `last` (ms) with the sid length in its top byte, the sid.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Entry {
    version: AtomicU64,
    key: [AtomicU64; 2],
    /// Milliseconds of the last use (low 56 bits) and the sid length (top 8 bits); 0 = empty.
    last_len: AtomicU64,
    sid: [AtomicU64; 4],
}

const LAST_MASK: u64 = (1 << 56) - 1;

/// What an entry held when read.
#[derive(Clone, Copy)]
struct Seen {
    key: [u64; 2],
    last: u64,
    sid: Sid,
}

impl Entry {
    /// A consistent read, or `None` while a writer holds it.
    fn read(&self) -> Option<Seen> {
        for _ in 0..4 {
            let v = self.version.load(Ordering::Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let key = [self.key[0].load(Ordering::Relaxed), self.key[1].load(Ordering::Relaxed)];
            let last_len = self.last_len.load(Ordering::Relaxed);
            let mut bytes = [0u8; SID_MAX];
            for (chunk, w) in bytes.chunks_exact_mut(8).zip(&self.sid) {
                chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
            std::sync::atomic::fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) != v {
                continue;
            }
            let len = u8::try_from((last_len >> 56).min(SID_MAX as u64)).unwrap_or(0);
            return Some(Seen {
                key,
                last: last_len & LAST_MASK,
                sid: Sid { len, bytes },
            });
        }
        None
    }

    /// Writes `key`, `sid` and `last` unless another writer holds the entry (then nothing is written).
    fn write(&self, key: [u64; 2], sid: Option<&Sid>, last: u64) -> bool {
        let v = self.version.load(Ordering::Relaxed);
        if v & 1 == 1
            || self
                .version
                .compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        std::sync::atomic::fence(Ordering::Release);
        self.key[0].store(key[0], Ordering::Relaxed);
        self.key[1].store(key[1], Ordering::Relaxed);
        let len = match sid {
            Some(s) => {
                for (chunk, w) in s.bytes.chunks_exact(8).zip(&self.sid) {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(chunk);
                    w.store(u64::from_le_bytes(b), Ordering::Relaxed);
                }
                u64::from(s.len)
            }
            None => self.last_len.load(Ordering::Relaxed) >> 56,
        };
        self.last_len.store((len << 56) | (last & LAST_MASK), Ordering::Relaxed);
        self.version.store(v + 2, Ordering::Release);
        true
    }
}

/// The sessions of one `sticky learn` zone.
#[derive(Debug)]
pub struct LearnTable {
    entries: Box<[Entry]>,
    /// The upstream whose `sticky learn` made it (nginx refuses a zone moved to another upstream).
    upstream: String,
    size: u64,
}

fn words(key: &SessionKey) -> [u64; 2] {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&key[..8]);
    b.copy_from_slice(&key[8..]);
    // an empty entry is told by its `last` of 0, so any key (all zeroes too) is a key
    [u64::from_le_bytes(a), u64::from_le_bytes(b)]
}

/// Whether a session last used at `last` is alive at `now` (nginx: `last + timeout - now > 0`).
fn alive(last: u64, now: u64, timeout: u64) -> bool {
    last != 0 && last.saturating_add(timeout) > now
}

impl LearnTable {
    /// A table for a zone of `size` bytes (at least [`WINDOW`] entries) owned by `upstream`.
    pub fn new(upstream: &str, size: u64) -> LearnTable {
        let n = usize::try_from(size / BYTES_PER_SESSION)
            .unwrap_or(usize::MAX)
            .max(WINDOW);
        LearnTable {
            entries: (0..n).map(|_| Entry::default()).collect(),
            upstream: upstream.to_string(),
            size,
        }
    }

    /// The upstream it belongs to.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The zone size it was made for.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many sessions it can hold.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    fn window(&self, key: &[u64; 2]) -> impl Iterator<Item = &Entry> {
        let n = self.entries.len();
        let home = usize::try_from(key[0] % n as u64).unwrap_or(0);
        (0..WINDOW.min(n)).filter_map(move |i| self.entries.get((home + i) % n))
    }

    /// The server id of the live session `key` at `now` (ms), sessions expiring `timeout` ms after their last use.
    pub fn lookup(&self, key: &SessionKey, now: u64, timeout: u64) -> Option<Sid> {
        let k = words(key);
        self.window(&k)
            .filter_map(Entry::read)
            .find(|s| s.key == k && alive(s.last, now, timeout))
            .map(|s| s.sid)
    }

    /// nginx's learn step: a live session `key` gets `sid` and `now` as its last use; a missing one is created
    /// when `create` (in an empty or expired entry of its window, else over the one used longest ago).
    pub fn learn(&self, key: &SessionKey, sid: &[u8], now: u64, timeout: u64, create: bool) {
        let k = words(key);
        let sid = Sid::new(sid);
        let now = now.max(1) & LAST_MASK;
        let mut victim: Option<(&Entry, u64)> = None;
        for e in self.window(&k) {
            let Some(s) = e.read() else { continue };
            if s.key == k && alive(s.last, now, timeout) {
                e.write(k, Some(&sid), now);
                return;
            }
            let age = if alive(s.last, now, timeout) { s.last } else { 0 };
            if victim.is_none_or(|(_, a)| age < a) {
                victim = Some((e, age));
            }
        }
        if let (true, Some((e, _))) = (create, victim) {
            e.write(k, Some(&sid), now);
        }
    }

    /// Live sessions at `now` (for tests and the API).
    pub fn live(&self, now: u64, timeout: u64) -> usize {
        self.entries
            .iter()
            .filter_map(Entry::read)
            .filter(|s| alive(s.last, now, timeout))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SessionKey {
        let mut k = [0; 16];
        k[0] = n;
        k[15] = 7;
        k
    }

    #[test]
    fn insert_lookup_update_and_expire() {
        let t = LearnTable::new("u", 32 * 1024);
        assert_eq!(t.capacity(), 256);
        assert_eq!(t.lookup(&key(1), 1000, 2000), None);
        // without `create` a missing session is not made
        t.learn(&key(1), b"a", 1000, 2000, false);
        assert_eq!(t.lookup(&key(1), 1000, 2000), None);
        t.learn(&key(1), b"a", 1000, 2000, true);
        assert_eq!(
            t.lookup(&key(1), 2999, 2000).map(|s| s.as_bytes().to_vec()),
            Some(b"a".to_vec())
        );
        // used again: a new sid and a new last use
        t.learn(&key(1), b"bb", 2500, 2000, false);
        assert_eq!(
            t.lookup(&key(1), 4499, 2000).map(|s| s.as_bytes().to_vec()),
            Some(b"bb".to_vec())
        );
        // expired exactly `timeout` after the last use, and then not prolonged by a learn without create
        assert_eq!(t.lookup(&key(1), 4500, 2000), None);
        t.learn(&key(1), b"bb", 4600, 2000, false);
        assert_eq!(t.lookup(&key(1), 4600, 2000), None);
        assert_eq!(t.live(4600, 2000), 0);
    }

    #[test]
    fn a_full_window_evicts_the_oldest() {
        // the smallest table: one window, so every key shares it
        let t = LearnTable::new("u", 0);
        assert_eq!(t.capacity(), WINDOW);
        for n in 0..WINDOW as u8 {
            t.learn(&key(n), &[b'a' + n], 100 + u64::from(n), 10_000, true);
        }
        assert_eq!(t.live(200, 10_000), WINDOW);
        // key 0 is used again, so key 1 is now the oldest
        t.learn(&key(0), b"a", 300, 10_000, false);
        t.learn(&key(100), b"z", 400, 10_000, true);
        assert_eq!(t.lookup(&key(1), 400, 10_000), None);
        for n in [0u8, 2, 3, 100] {
            assert!(t.lookup(&key(n), 400, 10_000).is_some(), "{n}");
        }
        assert_eq!(t.live(400, 10_000), WINDOW);
    }

    #[test]
    fn sids_are_cut_at_32_bytes_and_shared_across_threads() {
        let t = std::sync::Arc::new(LearnTable::new("u", 1 << 20));
        let long = [b'x'; 40];
        t.learn(&key(9), &long, 10, 1000, true);
        assert_eq!(t.lookup(&key(9), 10, 1000).map(|s| s.as_bytes().len()), Some(SID_MAX));
        let threads: Vec<_> = (0..4u8)
            .map(|n| {
                let t = std::sync::Arc::clone(&t);
                std::thread::spawn(move || {
                    for i in 0..200u8 {
                        t.learn(&key(i), &[n; 32], 10, 1000, true);
                        if let Some(s) = t.lookup(&key(i), 10, 1000) {
                            // a torn read would mix two writers' bytes
                            let b = s.as_bytes();
                            assert!(b.iter().all(|c| *c == b[0]), "{b:?}");
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().expect("thread");
        }
    }
}
