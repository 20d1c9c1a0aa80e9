//! The values `set` gives a request's variables (`ngx_http_rewrite_module`'s `r->variables`), in the connection's
//! reused buffers: one slot per user variable of the config, grown at the first `set` of a connection, cleared
//! (not freed) for each request; and the request's `$limit_rate`.

use std::cell::{Cell, RefCell};

/// One user variable's value in this request.
#[derive(Debug, Default)]
struct Slot {
    set: bool,
    value: Vec<u8>,
}

/// The user variables of one connection's current request.
#[derive(Debug, Default)]
pub struct UserVars {
    slots: RefCell<Vec<Slot>>,
    /// Whether a slot is set in this request (so a request of a config without `set` clears nothing).
    any: Cell<bool>,
    /// `set $limit_rate`: bytes per second, for this request.
    limit_rate: Cell<Option<u64>>,
}

impl UserVars {
    /// Starts a request: every variable unset again.
    pub fn begin(&self) {
        self.limit_rate.set(None);
        if self.any.replace(false) {
            for s in self.slots.borrow_mut().iter_mut() {
                s.set = false;
            }
        }
    }

    /// `set $name VALUE` of user variable `index`.
    pub fn set(&self, index: usize, value: &[u8]) {
        let mut slots = self.slots.borrow_mut();
        if slots.len() <= index {
            slots.resize_with(index + 1, Slot::default);
        }
        if let Some(s) = slots.get_mut(index) {
            s.set = true;
            s.value.clear();
            s.value.extend_from_slice(value);
            self.any.set(true);
        }
    }

    /// Appends the value of user variable `index`: empty while no `set` gave it one (nginx's "using uninitialized
    /// variable").
    pub fn append(&self, index: usize, out: &mut Vec<u8>) {
        if let Some(s) = self.slots.borrow().get(index).filter(|s| s.set) {
            out.extend_from_slice(&s.value);
        }
    }

    /// `set $limit_rate VALUE`: nginx's `ngx_parse_size` of the value; one that is not a size changes nothing
    /// (nginx logs `invalid $limit_rate`). Returns whether it was a size.
    pub fn set_limit_rate(&self, value: &[u8]) -> bool {
        match parse_size(value) {
            Some(n) => {
                self.limit_rate.set(Some(n));
                true
            }
            None => false,
        }
    }

    /// The rate `set $limit_rate` gave this request, if it did.
    pub fn limit_rate(&self) -> Option<u64> {
        self.limit_rate.get()
    }

    /// `$limit_rate`: the rate set for this request, else 0 (nginx's value before the answer is written).
    pub fn append_limit_rate(&self, out: &mut Vec<u8>) {
        crate::http::pages::append_decimal(out, self.limit_rate.get().unwrap_or(0));
    }
}

/// nginx's `ngx_parse_size` of a value (`40k`, `2m`, `100`); `None` for anything else, an empty value included.
pub fn parse_size(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok().and_then(crate::config::value::parse_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_hold_for_one_request() {
        let u = UserVars::default();
        u.begin();
        let mut out = Vec::new();
        u.append(3, &mut out);
        assert_eq!(out, b"", "an unset variable is empty");
        u.set(3, b"abc");
        u.set(0, b"x");
        u.append(3, &mut out);
        u.append(0, &mut out);
        u.append(1, &mut out);
        assert_eq!(out, b"abcx");
        u.set(3, b"d");
        out.clear();
        u.append(3, &mut out);
        assert_eq!(out, b"d", "a second set replaces the value");
        u.begin();
        out.clear();
        u.append(3, &mut out);
        assert_eq!(out, b"", "a new request starts unset");
    }

    #[test]
    fn limit_rate_reads_sizes_as_nginx() {
        assert_eq!(parse_size(b"40k"), Some(40960));
        assert_eq!(parse_size(b"2M"), Some(2 << 20));
        assert_eq!(parse_size(b"123"), Some(123));
        assert_eq!(parse_size(b""), None);
        assert_eq!(parse_size(b"k"), None);
        assert_eq!(parse_size(b"1.5k"), None);
        assert_eq!(parse_size(b"-1"), None);
        let u = UserVars::default();
        let mut out = Vec::new();
        u.append_limit_rate(&mut out);
        assert_eq!(out, b"0");
        assert!(u.set_limit_rate(b"40k"));
        assert!(!u.set_limit_rate(b"x"));
        out.clear();
        u.append_limit_rate(&mut out);
        assert_eq!(out, b"40960");
        u.begin();
        assert_eq!(u.limit_rate(), None);
    }
}
