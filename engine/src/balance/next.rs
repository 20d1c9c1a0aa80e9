//! After one try: nginx's `proxy_next_upstream` decision (`ngx_http_upstream_test_next` and
//! `ngx_http_upstream_next` in `ngx_http_upstream.c`, `ngx_stream_proxy_next_upstream` in
//! `ngx_stream_proxy_module.c`). One pure function that the HTTP proxy, the stream proxy and the simulator call,
//! so that `corelb pick` follows the proxy's rules by construction. See docs/algorithms.md §12 and §13 (stream).

use super::Outcome;
use crate::config::model::NextUpstream;

/// How one try ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryEnd {
    /// The peer answered with this status.
    Status(u16),
    /// The try failed before a usable answer; `sent` says whether any of the request reached the peer.
    Failed {
        /// Which nginx condition the failure is.
        cause: FailCause,
        /// Some of the request reached the peer.
        sent: bool,
    },
}

/// nginx's failure conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailCause {
    /// Connect refused, connection reset or closed: `error`.
    Error,
    /// No connect, send or answer in time: `timeout`.
    Timeout,
    /// An answer nginx cannot parse: `invalid_header`.
    InvalidHeader,
}

/// Which proxy the try belongs to (a stream session has no status line: every give-up is 502).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// The HTTP proxy.
    Http,
    /// The TCP (`stream`) proxy.
    Stream,
}

/// What the request allows besides the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TryCx {
    /// The proxy the try belongs to.
    pub proto: Proto,
    /// Tries left *before* this try is reported (nginx's `u->peer.tries`).
    pub tries_left: usize,
    /// The whole request is held, so it can be sent again.
    pub replayable: bool,
    /// POST, LOCK or PATCH.
    pub non_idempotent: bool,
    /// `proxy_next_upstream_timeout` has not run out.
    pub in_time: bool,
}

/// What follows a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Pass the peer's answer to the client; report [`Outcome::Success`] when it is done.
    Deliver,
    /// Report `0` for this peer and try the next one.
    Retry(Outcome),
    /// Report [`Outcome::Failed`] and answer the client this status (502, or 504 after an http timeout).
    GiveUp(u16),
}

/// nginx's decision after a try that ended with `end`, under the conditions `rules`.
pub fn decide(rules: &NextUpstream, end: TryEnd, cx: TryCx) -> Step {
    let resend_ok = |sent: bool| !sent || !cx.non_idempotent || rules.non_idempotent;
    // nginx tests `tries > 1` before `free` spends one on a status, and `tries == 0` after it on a failure:
    // both mean "another try is left after this one".
    let another = cx.tries_left > 1 && cx.replayable && cx.in_time;
    match end {
        TryEnd::Status(status) => {
            if cx.proto == Proto::Http && rules.on_status(status) && another && resend_ok(true) {
                // A 403 or 404 is passed on without counting as a failure (`NGX_PEER_NEXT`).
                Step::Retry(if matches!(status, 403 | 404) {
                    Outcome::Next
                } else {
                    Outcome::Failed
                })
            } else {
                Step::Deliver
            }
        }
        TryEnd::Failed { cause, sent } => {
            let allowed = match cause {
                FailCause::Error => rules.error,
                FailCause::Timeout => rules.timeout,
                FailCause::InvalidHeader => rules.invalid_header,
            };
            if allowed && another && resend_ok(sent) {
                Step::Retry(Outcome::Failed)
            } else if cause == FailCause::Timeout && cx.proto == Proto::Http {
                Step::GiveUp(504)
            } else {
                Step::GiveUp(502)
            }
        }
    }
}

/// Stream's `proxy_next_upstream on|off` as conditions: `on` passes on an `error` or a `timeout` of the connect.
pub fn stream_rules(on: bool) -> NextUpstream {
    NextUpstream {
        error: on,
        timeout: on,
        ..NextUpstream::OFF
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(tries_left: usize) -> TryCx {
        TryCx {
            proto: Proto::Http,
            tries_left,
            replayable: true,
            non_idempotent: false,
            in_time: true,
        }
    }

    const ERROR: TryEnd = TryEnd::Failed {
        cause: FailCause::Error,
        sent: true,
    };
    const TIMEOUT: TryEnd = TryEnd::Failed {
        cause: FailCause::Timeout,
        sent: true,
    };

    #[test]
    fn defaults_pass_on_error_and_timeout_only() {
        let rules = NextUpstream::default();
        assert_eq!(decide(&rules, ERROR, cx(2)), Step::Retry(Outcome::Failed));
        assert_eq!(decide(&rules, TIMEOUT, cx(2)), Step::Retry(Outcome::Failed));
        assert_eq!(decide(&rules, TryEnd::Status(502), cx(2)), Step::Deliver);
        let bad_header = TryEnd::Failed {
            cause: FailCause::InvalidHeader,
            sent: true,
        };
        assert_eq!(decide(&rules, bad_header, cx(2)), Step::GiveUp(502));
    }

    #[test]
    fn the_last_try_gives_up_with_502_or_504() {
        let rules = NextUpstream::default();
        assert_eq!(decide(&rules, ERROR, cx(1)), Step::GiveUp(502));
        assert_eq!(decide(&rules, TIMEOUT, cx(1)), Step::GiveUp(504));
        let stream = TryCx {
            proto: Proto::Stream,
            ..cx(1)
        };
        assert_eq!(decide(&stream_rules(true), TIMEOUT, stream), Step::GiveUp(502));
        assert_eq!(
            decide(
                &stream_rules(false),
                ERROR,
                TryCx {
                    tries_left: 3,
                    ..stream
                }
            ),
            Step::GiveUp(502)
        );
    }

    #[test]
    fn statuses_pass_only_when_listed_and_a_try_is_left() {
        let rules = NextUpstream {
            http_502: true,
            http_404: true,
            ..NextUpstream::OFF
        };
        assert_eq!(decide(&rules, TryEnd::Status(502), cx(2)), Step::Retry(Outcome::Failed));
        assert_eq!(decide(&rules, TryEnd::Status(404), cx(2)), Step::Retry(Outcome::Next));
        assert_eq!(decide(&rules, TryEnd::Status(503), cx(2)), Step::Deliver);
        assert_eq!(
            decide(&rules, TryEnd::Status(502), cx(1)),
            Step::Deliver,
            "last try: passed through"
        );
        let stream = TryCx {
            proto: Proto::Stream,
            ..cx(2)
        };
        assert_eq!(decide(&rules, TryEnd::Status(502), stream), Step::Deliver);
    }

    #[test]
    fn non_idempotent_requests_are_resent_only_when_allowed() {
        let post = TryCx {
            non_idempotent: true,
            ..cx(3)
        };
        let rules = NextUpstream {
            http_502: true,
            ..NextUpstream::default()
        };
        assert_eq!(decide(&rules, ERROR, post), Step::GiveUp(502));
        assert_eq!(decide(&rules, TryEnd::Status(502), post), Step::Deliver);
        let unsent = TryEnd::Failed {
            cause: FailCause::Error,
            sent: false,
        };
        assert_eq!(
            decide(&rules, unsent, post),
            Step::Retry(Outcome::Failed),
            "nothing reached the peer"
        );
        let allowed = NextUpstream {
            non_idempotent: true,
            ..rules
        };
        assert_eq!(decide(&allowed, ERROR, post), Step::Retry(Outcome::Failed));
        assert_eq!(
            decide(&allowed, TryEnd::Status(502), post),
            Step::Retry(Outcome::Failed)
        );
    }

    #[test]
    fn a_streamed_body_or_the_timeout_stops_retries() {
        let rules = NextUpstream::default();
        let streamed = TryCx {
            replayable: false,
            ..cx(3)
        };
        assert_eq!(decide(&rules, ERROR, streamed), Step::GiveUp(502));
        let late = TryCx {
            in_time: false,
            ..cx(3)
        };
        assert_eq!(decide(&rules, TIMEOUT, late), Step::GiveUp(504));
    }
}
