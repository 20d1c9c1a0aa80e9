//! nginx's lingering close of an http connection (`ngx_http_set_lingering_close`): once the last answer is sent,
//! a TLS session sends its `close_notify` and the socket's write side is shut; what the client still sends is read
//! and dropped until it closes, `lingering_timeout` passes without a byte, or `lingering_time` is over, and only
//! then is the socket closed. The client so reads the whole answer instead of a reset for its unread bytes.

use crate::config::model::{Lingering, LingeringClose};
use crate::runtime::{timeout, Runtime};
use crate::shard::Shard;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::time::Instant;

/// nginx's `NGX_HTTP_LINGERING_BUFFER_SIZE`: the bytes read and dropped at a time.
const DROP_BUFFER: usize = 4096;

/// Whether a connection that closes after its answer lingers: `always`, or `on` when the request had a body or
/// bytes came after what was read (`ngx_http_finalize_connection`); `unread` is asked only then.
pub fn wanted(conf: &Lingering, had_body: bool, unread: impl FnOnce() -> bool) -> bool {
    match conf.close {
        LingeringClose::Off => false,
        LingeringClose::On => had_body || unread(),
        LingeringClose::Always => true,
    }
}

/// Closes `sock` the lingering way under `conf`; a graceful stop of the shard ends the wait at once (nginx closes
/// its lingering connections on exit as idle ones).
pub async fn close<R: Runtime>(shard: &Shard<R>, sock: &mut R::Conn, conf: Lingering) {
    let until = Instant::now() + conf.time;
    // the `close_notify` of a TLS session, then `shutdown(SHUT_WR)`, within one `lingering_timeout`
    if !matches!(timeout::<R, _>(conf.timeout, sock.close()).await, Ok(Ok(()))) {
        return;
    }
    let mut drop = [0u8; DROP_BUFFER];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let wait = left.min(conf.timeout);
        let read = futures_lite::future::or(
            async { Some(timeout::<R, _>(wait, sock.read(&mut drop)).await) },
            async {
                shard.stopped().await;
                None
            },
        )
        .await;
        match read {
            Some(Ok(Ok(n))) if n > 0 => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn on_lingers_for_a_body_or_unread_bytes() {
        let mut conf = Lingering::default();
        assert!(!wanted(&conf, false, || false));
        assert!(wanted(&conf, true, || unreachable!()) && wanted(&conf, false, || true));
        conf.close = LingeringClose::Always;
        assert!(wanted(&conf, false, || false));
        conf.close = LingeringClose::Off;
        assert!(!wanted(&conf, true, || true));
        assert_eq!(Lingering::default().time, Duration::from_secs(30));
    }
}
