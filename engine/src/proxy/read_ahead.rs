//! `proxy_buffering on`: a response body read from the upstream ahead of a slow client, into at most
//! `proxy_buffers` of memory (the connection's output buffer), so that a response that fits is read whole and its
//! upstream connection freed (back to the keepalive pool) while the client is still taking it. A larger one is
//! read as fast as the client takes it once that memory is full: nginx with `proxy_max_temp_file_size 0`.
//!
//! While the client takes every write at once the copy is the plain loop of [`super::body::forward_body`] (read,
//! write, read): a write is first tried without waiting, and only one that would wait races the next upstream
//! read, each direction with its own time limit (`proxy_read_timeout` between two reads, `send_timeout` between
//! two writes).

use super::body::{BodyCopy, BodyError, Relay};
use crate::http::chunked::ChunkedDecoder;
use crate::http::BodyFraming;
use crate::runtime::iobuf::IoBuf;
use crate::runtime::Runtime;
use futures_lite::AsyncWriteExt;
use std::io;
use std::time::{Duration, Instant};

/// The output buffer's capacity kept after a read-ahead (one that grew past it is given up, so that the buffers a
/// shard keeps for its connections stay small).
pub const KEPT_OUT: usize = 64 * 1024;

/// Where a read-ahead copy stands once the upstream's body has been read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWhole {
    /// Body bytes read from the upstream.
    pub read: u64,
    /// Where the bytes not yet sent to the client start in the output buffer (they run to its end).
    pub sent_to: usize,
}

/// The body's framing as it is read: what is left of a length, and whether the end was seen.
struct Framing<'d> {
    framing: BodyFraming,
    relay: Relay,
    decoder: &'d mut ChunkedDecoder,
    left: u64,
    read: u64,
}

impl Framing<'_> {
    /// Moves at most `room` bytes of the body from `buf` to `out` (a chunked body decoded as `relay` says).
    fn take(&mut self, buf: &mut IoBuf, out: &mut Vec<u8>, room: usize) -> Result<(), BodyError> {
        let avail = buf.readable();
        let avail = avail.get(..avail.len().min(room)).unwrap_or_default();
        let used = match self.framing {
            BodyFraming::None => 0,
            BodyFraming::Length(_) => usize::try_from(self.left).unwrap_or(usize::MAX).min(avail.len()),
            BodyFraming::UntilClose => avail.len(),
            BodyFraming::Chunked if self.relay == Relay::Dechunk => {
                self.decoder.feed(avail, |d| out.extend_from_slice(d))?
            }
            BodyFraming::Chunked => self.decoder.feed(avail, |_| {})?,
        };
        if !(self.framing == BodyFraming::Chunked && self.relay == Relay::Dechunk) {
            out.extend_from_slice(avail.get(..used).unwrap_or_default());
        }
        buf.consume(used);
        self.read += used as u64;
        if let BodyFraming::Length(_) = self.framing {
            self.left -= used as u64;
        }
        Ok(())
    }

    fn done(&self) -> bool {
        match self.framing {
            BodyFraming::None => true,
            BodyFraming::Length(_) => self.left == 0,
            BodyFraming::Chunked => self.decoder.is_done(),
            BodyFraming::UntilClose => false,
        }
    }
}

/// What one step of the race gave.
enum Step {
    Read(io::Result<usize>),
    Wrote(io::Result<usize>),
    TimedOut,
}

/// The copy's two directions and their deadlines once it waits on the client.
struct Waits {
    read: Duration,
    write: Duration,
    read_since: Instant,
    wrote_since: Instant,
}

/// Copies a body framed as `copy.framing` from `src` (whose read bytes are in `buf`) to `dst` through `out`
/// (which holds the head, or what must go out first), reading ahead of the client while at most `budget` bytes
/// wait in `out`. Returns once the upstream's body is read whole; the bytes from [`ReadWhole::sent_to`] on are
/// still to be sent ([`finish`]). Bytes after the body stay in `buf`.
pub async fn read_ahead<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    decoder: &mut ChunkedDecoder,
    dst: &mut R::Conn,
    out: &mut Vec<u8>,
    copy: BodyCopy,
    budget: usize,
) -> Result<ReadWhole, BodyError> {
    decoder.reset();
    let mut body = Framing {
        framing: copy.framing,
        relay: copy.relay,
        decoder,
        left: match copy.framing {
            BodyFraming::Length(n) => n,
            _ => u64::MAX,
        },
        read: 0,
    };
    let budget = budget.max(1);
    let mut sent = 0usize;
    let mut waits: Option<Waits> = None;
    loop {
        let waiting = out.len() - sent;
        if waiting < budget {
            body.take(buf, out, budget - waiting)?;
        }
        if body.done() {
            return Ok(ReadWhole {
                read: body.read,
                sent_to: sent,
            });
        }
        let can_read = out.len() - sent < budget;
        let can_write = sent < out.len();
        let step = if !can_write {
            // nothing waits for the client: its session's buffered bytes go before the next upstream read waits
            dst.flush().await.map_err(BodyError::Write)?;
            let limit = waits.as_ref().map_or(copy.limits.read, |w| left(w.read_since, w.read));
            Step::Read(crate::runtime::io_timeout::<R, _>(limit, buf.fill_untimed(src)).await)
        } else {
            let pending = out.get(sent..).unwrap_or_default();
            match futures_lite::future::poll_once(dst.write(pending)).await {
                Some(wrote) => Step::Wrote(wrote),
                None => {
                    let now = Instant::now();
                    let w = waits.get_or_insert(Waits {
                        read: copy.limits.read,
                        write: copy.limits.write,
                        read_since: now,
                        wrote_since: now,
                    });
                    race::<R>(src, buf, dst, pending, can_read, w).await
                }
            }
        };
        match step {
            Step::Read(Ok(0)) if body.framing == BodyFraming::UntilClose => {
                return Ok(ReadWhole {
                    read: body.read,
                    sent_to: sent,
                })
            }
            Step::Read(Ok(0)) => return Err(BodyError::Truncated),
            Step::Read(Ok(_)) => {
                if let Some(w) = waits.as_mut() {
                    w.read_since = Instant::now();
                }
            }
            Step::Read(Err(e)) => return Err(BodyError::Read(e)),
            Step::Wrote(Ok(0)) => return Err(BodyError::Write(io::ErrorKind::WriteZero.into())),
            Step::Wrote(Ok(n)) => {
                sent += n;
                if let Some(w) = waits.as_mut() {
                    w.wrote_since = Instant::now();
                }
                if sent == out.len() {
                    out.clear();
                    sent = 0;
                } else if sent >= out.len() / 2 {
                    // what was sent goes (the waiting bytes move to the front): `out` stays within twice the budget
                    out.drain(..sent);
                    sent = 0;
                }
            }
            Step::Wrote(Err(e)) => return Err(BodyError::Write(e)),
            Step::TimedOut => {
                let w = waits.as_ref();
                let read_late = w.is_some_and(|w| can_read && left(w.read_since, w.read).is_zero());
                let timed_out = io::Error::from(io::ErrorKind::TimedOut);
                return Err(if read_late {
                    BodyError::Read(timed_out)
                } else {
                    BodyError::Write(timed_out)
                });
            }
        }
    }
}

/// The time left of `limit` since `since`.
fn left(since: Instant, limit: Duration) -> Duration {
    limit.saturating_sub(since.elapsed())
}

/// Waits for the client to take some of `pending` or (with `can_read`) the upstream to send more, whichever comes
/// first, until the sooner of the two directions' deadlines.
async fn race<R: Runtime>(
    src: &mut R::Conn,
    buf: &mut IoBuf,
    dst: &mut R::Conn,
    pending: &[u8],
    can_read: bool,
    w: &Waits,
) -> Step {
    let write_left = left(w.wrote_since, w.write);
    let read_left = if can_read {
        left(w.read_since, w.read)
    } else {
        write_left
    };
    let limit = write_left.min(read_left);
    let write = async { Step::Wrote(dst.write(pending).await) };
    let read = async {
        if can_read {
            Step::Read(buf.fill_untimed(src).await)
        } else {
            std::future::pending().await
        }
    };
    crate::runtime::timeout::<R, _>(limit, futures_lite::future::or(write, read))
        .await
        .unwrap_or(Step::TimedOut)
}

/// Sends what [`read_ahead`] left in `out` from `sent_to` on (the upstream connection already given back).
pub async fn finish<R: Runtime>(dst: &mut R::Conn, out: &[u8], sent_to: usize, timeout: Duration) -> io::Result<()> {
    super::body::send::<R>(dst, out.get(sent_to..).unwrap_or_default(), timeout).await
}

/// Whether a response head's `X-Accel-Buffering` turns buffering off (`no`) or on (`yes`), as nginx reads it.
pub fn accel_buffering(headers: &[httparse::Header<'_>]) -> Option<bool> {
    let h = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("x-accel-buffering"))?;
    if h.value.eq_ignore_ascii_case(b"yes") {
        Some(true)
    } else if h.value.eq_ignore_ascii_case(b"no") {
        Some(false)
    } else {
        None
    }
}
