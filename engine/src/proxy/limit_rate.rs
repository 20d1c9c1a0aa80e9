//! `limit_rate` and `limit_rate_after` (`ngx_http_write_filter_module`): an answer goes out at most `rate` bytes
//! per second once `after` bytes are sent, counted as nginx's write filter counts it: a budget of `rate` per whole
//! second of the clock since the answer began, one second's worth at once, and after each write a pause of as long
//! as its paced bytes take at `rate`. Writes are cut to what the budget allows and the rest waits on a timer, no
//! busy loop.

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
    /// The part of a second the wall clock had reached at `start` (nginx counts whole seconds of `ngx_time()`).
    start_frac: Duration,
    sent: u64,
    /// No write before this: the pause after the last one (nginx's `c->write->delayed` timer).
    wake: Option<Instant>,
}

impl Pacer {
    /// An answer starting at `start` (now).
    pub fn new(limit: RateLimit, start: Instant) -> Pacer {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Pacer::at(limit, start, wall)
    }

    /// An answer starting at `start`, when the wall clock was `wall` past the epoch.
    pub fn at(limit: RateLimit, start: Instant, wall: Duration) -> Pacer {
        Pacer {
            limit,
            start,
            start_frac: Duration::from_nanos(u64::from(wall.subsec_nanos())),
            sent: 0,
            wake: None,
        }
    }

    /// How many bytes may go now, or how long to wait before any may: until the pause after the last write
    /// ends, then nginx's `limit_rate * (whole seconds since the start + 1) - (sent - limit_rate_after)`, and when
    /// that is not positive, nginx's `-limit * 1000 / limit_rate + 1` ms.
    pub fn budget(&self, now: Instant) -> Result<u64, Duration> {
        if let Some(wake) = self.wake.filter(|w| *w > now) {
            return Err(wake - now);
        }
        let RateLimit { rate, after } = self.limit;
        let seconds = (now.saturating_duration_since(self.start) + self.start_frac).as_secs();
        let allowed = i128::from(rate) * (i128::from(seconds) + 1) - (i128::from(self.sent) - i128::from(after));
        if allowed > 0 {
            return Ok(u64::try_from(allowed).unwrap_or(u64::MAX));
        }
        let ms = (-allowed * 1000)
            .checked_div(i128::from(rate))
            .unwrap_or(0)
            .saturating_add(1);
        Err(Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX)))
    }

    /// Counts `n` bytes as already sent, with no pause (what came before the pacing began).
    pub fn counted(&mut self, n: u64) {
        self.sent = self.sent.saturating_add(n);
    }

    /// Counts `n` bytes written at `now`, and the pause they earn: nginx's `(nsent - sent) * 1000 / limit_rate` ms
    /// over the bytes past `limit_rate_after`.
    pub fn wrote(&mut self, n: usize, now: Instant) {
        let before = self.sent.saturating_sub(self.limit.after);
        self.sent = self.sent.saturating_add(n as u64);
        let paced = self.sent.saturating_sub(self.limit.after) - before;
        let ms = paced.saturating_mul(1000).checked_div(self.limit.rate).unwrap_or(0);
        self.wake = (ms > 0).then(|| now + Duration::from_millis(ms));
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
                pacer.wrote(k, Instant::now());
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

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn budget_as_nginx_counts_it() {
        let t0 = Instant::now();
        // the answer starts at a whole second of the wall clock
        let mut p = Pacer::at(RateLimit { rate: 1000, after: 500 }, t0, Duration::from_secs(1_000));
        // one second's worth plus `after` at once
        assert_eq!(p.budget(t0), Ok(1500));
        p.wrote(1500, t0);
        // the paced 1000 bytes earn a pause of 1000 ms
        assert_eq!(p.budget(t0), Err(MS(1000)));
        assert_eq!(p.budget(t0 + MS(250)), Err(MS(750)));
        // then the next whole second's worth
        assert_eq!(p.budget(t0 + MS(1000)), Ok(1000));
        p.wrote(300, t0 + MS(1000));
        assert_eq!(p.budget(t0 + MS(1300)), Ok(700));
        // a write past the budget pays with its pause: 1,200 bytes, 1,200 ms
        p.wrote(1200, t0 + MS(1300));
        assert_eq!(p.budget(t0 + MS(2499)), Err(MS(1)));
        assert_eq!(p.budget(t0 + MS(2500)), Ok(500));
    }

    #[test]
    fn whole_seconds_of_the_wall_clock() {
        // nginx's 2,280 bytes at 500 B/s: 500 at once, then 500 a second; the last 280 go at 4 s, whatever part
        // of a second the answer started at (nginx's `ngx_time() - r->start_sec`)
        for frac in [0, 300, 999] {
            let t0 = Instant::now();
            let mut p = Pacer::at(RateLimit { rate: 500, after: 0 }, t0, Duration::from_secs(7) + MS(frac));
            let (mut left, mut at) = (2280u64, t0);
            let mut writes = Vec::new();
            while left > 0 {
                match p.budget(at) {
                    Ok(n) => {
                        let k = n.min(left);
                        writes.push((at - t0).as_millis());
                        p.wrote(k as usize, at);
                        left -= k;
                    }
                    Err(wait) => at += wait,
                }
            }
            assert_eq!(writes, [0, 1000, 2000, 3000, 4000], "started {frac} ms into a second");
        }
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
