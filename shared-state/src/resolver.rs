//! A resolver's `status_zone=` counters (nginx Plus's `/resolvers/` object): queries sent by kind and answers by
//! code, counted by every shard and by the upstream name thread with relaxed atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a query asked for (nginx Plus's `requests` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// A name's addresses (`A`, `AAAA`).
    Name,
    /// A service's records (`SRV`).
    Srv,
    /// An address's name (`PTR`).
    Addr,
}

/// How a query ended (nginx Plus's `responses` fields, in their order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// `NOERROR`.
    NoError,
    /// `FORMERR`.
    FormErr,
    /// `SERVFAIL`.
    ServFail,
    /// `NXDOMAIN`.
    NxDomain,
    /// `NOTIMP`.
    NotImp,
    /// `REFUSED`.
    Refused,
    /// No answer before the resolver's timeout.
    TimedOut,
    /// Any other code.
    Unknown,
}

impl Asked {
    /// The field names of [`ResolverStats::requests`], in its order.
    pub const NAMES: [&'static str; 3] = ["name", "srv", "addr"];
}

impl Answered {
    /// The field names of [`ResolverStats::responses`], in its order.
    pub const NAMES: [&'static str; 8] = [
        "noerror", "formerr", "servfail", "nxdomain", "notimp", "refused", "timedout", "unknown",
    ];
}

/// One resolver status zone's counters; a reload keeps the zone of a name it still uses.
#[derive(Debug, Default)]
pub struct ResolverStats {
    requests: [AtomicU64; 3],
    responses: [AtomicU64; 8],
}

impl ResolverStats {
    /// Counts a query sent.
    pub fn asked(&self, what: Asked) {
        self.requests[what as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts how a query ended.
    pub fn answered(&self, how: Answered) {
        self.responses[how as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The queries sent so far, by [`Asked::NAMES`].
    pub fn requests(&self) -> [u64; 3] {
        self.requests.each_ref().map(|c| c.load(Ordering::Relaxed))
    }

    /// The answers so far, by [`Answered::NAMES`].
    pub fn responses(&self) -> [u64; 8] {
        self.responses.each_ref().map(|c| c.load(Ordering::Relaxed))
    }

    /// Sets every counter back to zero (the API's `DELETE`).
    pub fn reset(&self) {
        for c in self.requests.iter().chain(&self.responses) {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_and_code_and_resets() {
        let s = ResolverStats::default();
        s.asked(Asked::Name);
        s.asked(Asked::Name);
        s.asked(Asked::Srv);
        s.answered(Answered::NoError);
        s.answered(Answered::TimedOut);
        s.answered(Answered::Unknown);
        assert_eq!(s.requests(), [2, 1, 0]);
        assert_eq!(s.responses(), [1, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(Answered::NAMES[Answered::TimedOut as usize], "timedout");
        s.reset();
        assert_eq!(s.requests(), [0; 3]);
        assert_eq!(s.responses(), [0; 8]);
    }
}
