//! `limit_rate` and `limit_rate_after` (`ngx_http_write_filter_module`): an answer goes out at most `rate` bytes
//! per second once `after` bytes are sent, with nginx's allowance of one second's worth at the start. Writes are
//! cut to what the budget allows and the rest waits on a timer for as long as the budget needs, no busy loop.

use super::body::send;
use crate::config::model::ClientConf;
use crate::runtime::{Conn, Runtime};
use std::io;
use std::time::{Duration, Instant};

/// A request's rate: bytes per second after the first `after` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub rate: u64,
    pub after: u64,
}

impl RateLimit {
    /// The rate of a request under `client`'s settings, `set $limit_rate` (`set`) overriding `limit_rate`; `None`
    /// when it is 0 (no limit).
    pub fn of(client: &ClientConf, set: Option<u64>) -> Option<RateLimit> {
        let rate = set.unwrap_or(client.limit_rate);
        (rate > 0).then_some(RateLimit {
            rate,
            after: client.limit_rate_after,
        })
    }
}

/// One answer's progress against its rate.
#[derive(Debug)]
pub struct Pacer {
    limit: RateLimit,
    start: Instant,
    sent: u64,
}

impl Pacer {
    /// An answer starting at `start`.
    pub fn new(limit: RateLimit, start: Instant) -> Pacer {
        Pacer { limit, start, sent: 0 }
    }

    /// How many bytes may go now, or how long to wait before any may: nginx's `limit_rate * (elapsed + 1) -
    /// (sent - limit_rate_after)`, with the elapsed time in milliseconds rather than whole seconds.
    pub fn budget(&self, now: Instant) -> Result<u64, Duration> {
        let RateLimit { rate, after } = self.limit;
        let elapsed = u64::try_from(now.saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX);
        let allowed = rate
            .saturating_mul(elapsed.saturating_add(1000))
            .checked_div(1000)
            .unwrap_or(u64::MAX)
            .saturating_add(after);
        if self.sent < allowed {
            return Ok(allowed - self.sent);
        }
        let over = self.sent - allowed + 1;
        let ms = over
            .saturating_mul(1000)
            .checked_div(rate)
            .unwrap_or(0)
            .saturating_add(1);
        Err(Duration::from_millis(ms))
    }

    /// Counts `n` bytes sent.
    pub fn sent(&mut self, n: usize) {
        self.sent = self.sent.saturating_add(n as u64);
    }
}

/// [`send`], paced by `pacer` when the answer has a rate.
pub async fn send_paced<R: Runtime>(
    conn: &mut impl Conn,
    mut bytes: &[u8],
    timeout: Duration,
    pacer: Option<&mut Pacer>,
) -> io::Result<()> {
    let Some(pacer) = pacer else {
        return send::<R>(conn, bytes, timeout).await;
    };
    while !bytes.is_empty() {
        match pacer.budget(Instant::now()) {
            Ok(n) => {
                let k = usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
                let (now, rest) = bytes.split_at(k);
                send::<R>(conn, now, timeout).await?;
                pacer.sent(k);
                bytes = rest;
            }
            Err(wait) => R::sleep(wait).await,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_as_nginx_counts_it() {
        let t0 = Instant::now();
        let mut p = Pacer::new(RateLimit { rate: 1000, after: 500 }, t0);
        // one second's worth plus `after` at once
        assert_eq!(p.budget(t0), Ok(1500));
        p.sent(1500);
        // then nothing until the budget grows: 1 byte over is 1 ms, +1
        assert_eq!(p.budget(t0), Err(Duration::from_millis(2)));
        assert_eq!(p.budget(t0 + Duration::from_millis(250)), Ok(250));
        p.sent(250);
        p.sent(1000);
        assert_eq!(
            p.budget(t0 + Duration::from_millis(250)),
            Err(Duration::from_millis(1002))
        );
    }

    #[test]
    fn set_overrides_the_location() {
        let mut c = ClientConf::default();
        assert_eq!(RateLimit::of(&c, None), None);
        c.limit_rate = 15;
        c.limit_rate_after = 7;
        assert_eq!(RateLimit::of(&c, None), Some(RateLimit { rate: 15, after: 7 }));
        assert_eq!(RateLimit::of(&c, Some(0)), None);
        assert_eq!(
            RateLimit::of(&c, Some(40960)),
            Some(RateLimit { rate: 40960, after: 7 })
        );
    }
}
