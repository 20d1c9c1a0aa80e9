//! Copying bytes both ways between two connections from one future that owns both (no split, no lock), with an
//! idle timeout, half-closes passed on, and each direction's reads paced at a rate when it has one (stream's
//! `proxy_upload_rate`/`proxy_download_rate`).

use super::limit_rate::{Pacer, RateLimit};
use crate::runtime::{timeout, Runtime};
use futures_lite::{AsyncRead, AsyncWrite};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Read/write rounds one direction may make in one poll before letting the other run.
const BUDGET: usize = 16;

/// One direction: read from a source, write to a sink, then shut the sink's write half down at end of stream.
#[derive(Debug)]
pub struct Half {
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    eof: bool,
    shut: bool,
    /// Bytes copied so far.
    pub bytes: u64,
    /// Bytes read from the source so far (more than `bytes` when the sink went away).
    pub read: u64,
    /// When the first byte was read.
    pub first_read: Option<std::time::Instant>,
    /// The direction's rate, counted over what it read (nginx's `limit_rate * (seconds + 1) - received`).
    pace: Option<Pacer>,
    /// No read before this: the rate's pause (nginx's `src->read->delayed` timer).
    paused: Option<Instant>,
}

impl Half {
    /// A direction with a buffer of `size` bytes.
    pub fn new(size: usize) -> Self {
        Half {
            buf: vec![0; size].into_boxed_slice(),
            pos: 0,
            len: 0,
            eof: false,
            shut: false,
            bytes: 0,
            read: 0,
            first_read: None,
            pace: None,
            paused: None,
        }
    }

    /// Paces this direction's reads at `rate` bytes per second from now (0: no limit), counting what was
    /// already read from its source (preloaded) against the rate, as nginx counts `received`.
    pub fn pace(&mut self, rate: u64) {
        self.pace = (rate > 0).then(|| {
            let mut p = Pacer::new(RateLimit { rate, after: 0 }, Instant::now());
            p.counted(self.read);
            p
        });
    }

    /// How long the direction's rate holds its next read, when it does.
    fn pause_left(&self, now: Instant) -> Option<Duration> {
        self.paused.map(|t| t.saturating_duration_since(now))
    }

    /// Queues `data` to be written before anything read (up to the buffer's room): bytes that came with a
    /// PROXY protocol header count as read from the source (`from_source`), a header corelb writes does not.
    pub fn preload(&mut self, data: &[u8], from_source: bool) {
        let end = (self.len + data.len()).min(self.buf.len());
        let n = end - self.len;
        if let (Some(to), Some(from)) = (self.buf.get_mut(self.len..end), data.get(..n)) {
            to.copy_from_slice(from);
            self.len = end;
            if from_source && n > 0 {
                self.read += n as u64;
                self.first_read.get_or_insert_with(std::time::Instant::now);
            }
        }
    }

    /// Whether the direction is finished (end of stream seen and passed on).
    pub fn done(&self) -> bool {
        self.shut
    }

    /// Whether the source ended and everything read from it was written.
    fn ended(&self) -> bool {
        self.eof && self.pos >= self.len
    }

    /// Moves what it can; `Ready(Ok(()))` when something happened, `Pending` when nothing could.
    fn poll_move<S, D>(&mut self, cx: &mut Context<'_>, src: &mut S, dst: &mut D) -> Poll<io::Result<()>>
    where
        S: AsyncRead + Unpin,
        D: AsyncWrite + Unpin,
    {
        let mut progressed = false;
        for _ in 0..BUDGET {
            let step = if self.pos < self.len {
                match Pin::new(&mut *dst).poll_write(cx, &self.buf[self.pos..self.len]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => {
                        self.pos += n;
                        self.bytes += n as u64;
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            } else if !self.eof {
                let mut room = self.buf.len();
                if let Some(pace) = &self.pace {
                    let now = Instant::now();
                    match pace.budget(now) {
                        Ok(n) => room = room.min(usize::try_from(n).unwrap_or(usize::MAX)),
                        Err(wait) => {
                            // the pump's timer wakes the direction (`pause_left`)
                            self.paused = Some(now + wait);
                            break;
                        }
                    }
                    self.paused = None;
                }
                match Pin::new(&mut *src).poll_read(cx, &mut self.buf[..room]) {
                    Poll::Ready(Ok(n)) => {
                        if let Some(pace) = &mut self.pace {
                            pace.wrote(n, Instant::now());
                        }
                        (self.pos, self.len, self.eof) = (0, n, n == 0);
                        self.read += n as u64;
                        if n > 0 && self.first_read.is_none() {
                            self.first_read = Some(std::time::Instant::now());
                        }
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            } else if !self.shut {
                match Pin::new(&mut *dst).poll_close(cx) {
                    // A peer already gone cannot take the half-close; the direction is finished either way.
                    Poll::Ready(_) => {
                        self.shut = true;
                        Poll::Ready(Ok(()))
                    }
                    Poll::Pending => Poll::Pending,
                }
            } else {
                break;
            };
            match step {
                Poll::Ready(Ok(())) => progressed = true,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        if progressed {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// How a two-way copy ended.
#[derive(Debug)]
pub enum PumpEnd {
    /// Both sides closed their write halves.
    Closed,
    /// Nothing moved for the idle timeout.
    Idle,
    /// A read or write failed.
    Failed(io::Error),
}

/// How a two-way copy treats an end of stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    /// The copy ends when either side has ended (nginx's default, `proxy_half_close off`).
    First,
    /// An end is passed on as a half-close; the copy ends when both have (`proxy_half_close on`).
    Both,
}

/// Copies `a → b` and `b → a` until the directions end as `ends` says, one fails, or nothing moves for `idle`.
pub async fn pump<R: Runtime, A, B>(
    a: &mut A,
    b: &mut B,
    (ab, ba): (&mut Half, &mut Half),
    idle: Duration,
    ends: Ends,
) -> PumpEnd
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    // When a direction is held by its rate, the wait is its pause (set as the step is polled, before the timer
    // is); meanwhile no idle timeout runs (nginx sets `proxy_timeout` only while neither read is delayed).
    let pause = std::cell::Cell::new(None);
    loop {
        pause.set(None);
        let step = poll_fn(|cx| {
            let r1 = if ab.done() {
                Poll::Pending
            } else {
                ab.poll_move(cx, a, b)
            };
            let r2 = if ba.done() {
                Poll::Pending
            } else {
                ba.poll_move(cx, b, a)
            };
            match (r1, r2) {
                (Poll::Ready(Err(e)), _) | (_, Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
                (Poll::Ready(Ok(())), _) | (_, Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
                _ => {
                    // only a paced direction reads the clock
                    if ab.paused.is_some() || ba.paused.is_some() {
                        let now = Instant::now();
                        pause.set([ab.pause_left(now), ba.pause_left(now)].into_iter().flatten().min());
                    }
                    Poll::Pending
                }
            }
        });
        // `or` polls the step first, so the timer below sees the pause that poll set
        let timer = async {
            match pause.get() {
                Some(d) => R::sleep(d).await,
                None => {
                    let _ = timeout::<R, _>(idle, std::future::pending::<()>()).await;
                }
            }
            None
        };
        match futures_lite::future::or(async { Some(step.await) }, timer).await {
            None if pause.get().is_some() => {}
            None => return PumpEnd::Idle,
            Some(Err(e)) => return PumpEnd::Failed(e),
            Some(Ok(())) if ab.done() && ba.done() => return PumpEnd::Closed,
            Some(Ok(())) if ends == Ends::First && (ab.ended() || ba.ended()) => return PumpEnd::Closed,
            Some(Ok(())) => {}
        }
    }
}
