//! One shard's resolved names, per `resolver` (each has its own, as each of nginx's resolvers has): each answer (its addresses, or why there are none) kept until its TTL, `valid=`
//! or, for an error, 10 seconds have passed, as nginx's resolver keeps its nodes. The table is bounded: when it
//! holds [`MAX_NAMES`] names, the expired ones go; if none has expired, the whole table is emptied.

use super::dns::DnsError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The most names one shard keeps.
pub const MAX_NAMES: usize = 4096;

/// How long an error answer is kept without `valid=` (nginx: 10 seconds).
pub const ERROR_VALID: Duration = Duration::from_secs(10);

/// A name's lookup result: its addresses (never empty), or why there are none.
pub type Lookup = Result<Rc<[IpAddr]>, DnsError>;

#[derive(Debug)]
struct Entry {
    result: Lookup,
    until: Instant,
}

/// The names one shard has resolved.
#[derive(Debug, Default)]
pub struct Cache {
    entries: HashMap<(u64, Box<[u8]>), Entry>,
}

impl Cache {
    /// The kept result of resolver `by` for `name` (lower case) while it is valid at `now`.
    pub fn get(&self, by: u64, name: &[u8], now: Instant) -> Option<Lookup> {
        self.entries
            .get(&(by, Box::from(name)))
            .filter(|e| now < e.until)
            .map(|e| e.result.clone())
    }

    /// Keeps resolver `by`'s `result` for `name` during `valid`.
    pub fn put(&mut self, by: u64, name: &[u8], result: Lookup, valid: Duration, now: Instant) {
        let key = (by, Box::from(name));
        if self.entries.len() >= MAX_NAMES && !self.entries.contains_key(&key) {
            self.entries.retain(|_, e| now < e.until);
            if self.entries.len() >= MAX_NAMES {
                self.entries.clear();
            }
        }
        let until = now + valid;
        self.entries.insert(key, Entry { result, until });
    }

    /// How many names are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no name is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_until_valid_then_gone() {
        let mut c = Cache::default();
        let t0 = Instant::now();
        let addrs: Rc<[IpAddr]> = Rc::from(vec!["10.0.0.1".parse().unwrap()]);
        c.put(1, b"a", Ok(addrs.clone()), Duration::from_secs(5), t0);
        c.put(1, b"b", Err(DnsError::NotFound), ERROR_VALID, t0);
        assert_eq!(c.get(1, b"a", t0 + Duration::from_secs(4)), Some(Ok(addrs)));
        assert_eq!(c.get(1, b"a", t0 + Duration::from_secs(5)), None);
        assert_eq!(
            c.get(1, b"b", t0 + Duration::from_secs(9)),
            Some(Err(DnsError::NotFound))
        );
        assert_eq!(c.get(1, b"c", t0), None);
        assert_eq!(c.get(2, b"a", t0), None, "another resolver's names are its own");
    }

    #[test]
    fn bounded() {
        let mut c = Cache::default();
        let t0 = Instant::now();
        for i in 0..MAX_NAMES {
            let valid = if i % 2 == 0 { 1 } else { 100 };
            c.put(
                1,
                i.to_string().as_bytes(),
                Err(DnsError::ServFail),
                Duration::from_secs(valid),
                t0,
            );
        }
        assert_eq!(c.len(), MAX_NAMES);
        // full: the expired half goes
        c.put(
            1,
            b"new",
            Err(DnsError::ServFail),
            ERROR_VALID,
            t0 + Duration::from_secs(2),
        );
        assert_eq!(c.len(), MAX_NAMES / 2 + 1);
        // full with nothing expired: emptied, at the 2,048th new name (2,049 + 2,047 fill it)
        for i in 0..MAX_NAMES {
            c.put(1, format!("x{i}").as_bytes(), Err(DnsError::ServFail), ERROR_VALID, t0);
        }
        assert_eq!(c.len(), 1 + (MAX_NAMES - 2048));
        assert_eq!(c.get(1, b"new", t0 + Duration::from_secs(3)), None);
        assert!(c.get(1, format!("x{}", MAX_NAMES - 1).as_bytes(), t0).is_some());
    }
}
