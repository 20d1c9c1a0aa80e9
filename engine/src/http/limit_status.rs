//! `$limit_req_status` and `$limit_conn_status`: what the preaccess phase's limits decided for a request, kept
//! for its internal redirects and its access log.

use std::cell::Cell;

/// What `limit_req` decided (nginx's `NGX_HTTP_LIMIT_REQ_*`; 0: not checked, the variable is not found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReqStatus {
    Passed = 1,
    Delayed = 2,
    Rejected = 3,
    DelayedDryRun = 4,
    RejectedDryRun = 5,
}

/// What `limit_conn` decided (nginx's `NGX_HTTP_LIMIT_CONN_*`; 0: not checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnStatus {
    Passed = 1,
    Rejected = 2,
    RejectedDryRun = 3,
}

const REQ_NAMES: [&[u8]; 5] = [
    b"PASSED",
    b"DELAYED",
    b"REJECTED",
    b"DELAYED_DRY_RUN",
    b"REJECTED_DRY_RUN",
];
const CONN_NAMES: [&[u8]; 3] = [b"PASSED", b"REJECTED", b"REJECTED_DRY_RUN"];

/// One request's two statuses (set once per request: nginx checks the limits of a request's first location
/// that has them, not again after an internal redirect).
#[derive(Debug, Default)]
pub struct LimitStatus {
    req: Cell<u8>,
    conn: Cell<u8>,
}

impl LimitStatus {
    /// A new request: neither limit checked.
    pub fn begin(&self) {
        self.req.set(0);
        self.conn.set(0);
    }

    /// Whether `limit_req` decided already.
    pub fn req_checked(&self) -> bool {
        self.req.get() != 0
    }

    /// Whether `limit_conn` decided already.
    pub fn conn_checked(&self) -> bool {
        self.conn.get() != 0
    }

    pub fn set_req(&self, s: ReqStatus) {
        self.req.set(s as u8);
    }

    pub fn set_conn(&self, s: ConnStatus) {
        self.conn.set(s as u8);
    }

    /// Appends `$limit_req_status` (nothing when not checked).
    pub fn append_req(&self, out: &mut Vec<u8>) {
        if let Some(name) = usize::from(self.req.get())
            .checked_sub(1)
            .and_then(|i| REQ_NAMES.get(i))
        {
            out.extend_from_slice(name);
        }
    }

    /// Appends `$limit_conn_status` (nothing when not checked).
    pub fn append_conn(&self, out: &mut Vec<u8>) {
        if let Some(name) = usize::from(self.conn.get())
            .checked_sub(1)
            .and_then(|i| CONN_NAMES.get(i))
        {
            out.extend_from_slice(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_nginx() {
        let s = LimitStatus::default();
        let (mut r, mut c) = (Vec::new(), Vec::new());
        s.append_req(&mut r);
        s.append_conn(&mut c);
        assert!(r.is_empty() && c.is_empty() && !s.req_checked());
        s.set_req(ReqStatus::DelayedDryRun);
        s.set_conn(ConnStatus::RejectedDryRun);
        s.append_req(&mut r);
        s.append_conn(&mut c);
        assert_eq!((&r[..], &c[..]), (&b"DELAYED_DRY_RUN"[..], &b"REJECTED_DRY_RUN"[..]));
        s.begin();
        assert!(!s.req_checked() && !s.conn_checked());
    }
}
