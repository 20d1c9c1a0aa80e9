//! An in-memory byte pipe between two tasks of one shard: each end reads what the other wrote, through a bounded
//! buffer per direction (a full buffer makes the writer wait, as a socket's send buffer does). An HTTP/2 stream
//! runs the HTTP/1.1 request flow over one end ([`super::tls_stream::MaybeTls::Bridge`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One direction of the pipe.
#[derive(Debug, Default)]
struct Lane {
    bytes: VecDeque<u8>,
    /// The writer shut its side down: the reader sees the end of the stream once the bytes are read.
    shut: bool,
    /// The reader is gone: writes fail.
    dropped: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Lane {
    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }

    fn wake_writer(&mut self) {
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }
}

#[derive(Debug)]
struct Lanes {
    /// Written by end 0, read by end 1; and the other way.
    lanes: [Lane; 2],
    cap: usize,
}

/// One end of a pipe; dropping it ends both of its directions.
#[derive(Debug)]
pub struct PipeEnd {
    shared: Rc<RefCell<Lanes>>,
    /// Which end: it writes `lanes[side]` and reads `lanes[1 - side]`.
    side: usize,
    /// The address `local_addr` reports (the real connection's).
    local: SocketAddr,
}

/// Lane buffers a thread keeps from pipes that ended, for the next ones (each at most its pipe's `cap`): an HTTP/2
/// stream's pipe then grows no buffer.
const SPARE_LANES: usize = 32;

/// Lane buffers kept however long they stay unused.
const RESERVE: usize = 4;

/// A thread's spare lane buffers, and the fewest the list held since the last [`trim`].
struct Spares {
    free: Vec<VecDeque<u8>>,
    low: usize,
}

thread_local! {
    static SPARES: RefCell<Spares> = const { RefCell::new(Spares { free: Vec::new(), low: 0 }) };
}

fn spare_lane() -> Lane {
    let bytes = SPARES.with(|s| {
        let mut s = s.borrow_mut();
        let b = s.free.pop();
        s.low = s.low.min(s.free.len());
        b
    });
    Lane {
        bytes: bytes.unwrap_or_default(),
        ..Lane::default()
    }
}

/// Frees this thread's spare lane buffers that stayed unused since the last call (all but [`RESERVE`]): what a
/// peak of HTTP/2 streams needed, once it has passed; called on the shard's tick. The bytes freed.
pub fn trim() -> usize {
    SPARES
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let unused = s.low.min(s.free.len()).saturating_sub(RESERVE);
            // the unused ones are at the bottom (taken and given at the top)
            let bytes = s.free.drain(..unused).map(|b| b.capacity()).sum();
            s.low = s.free.len();
            bytes
        })
        .unwrap_or(0)
}

impl Drop for Lanes {
    fn drop(&mut self) {
        SPARES.with(|s| {
            let mut s = s.borrow_mut();
            for lane in &mut self.lanes {
                if s.free.len() < SPARE_LANES && lane.bytes.capacity() > 0 && lane.bytes.capacity() <= self.cap {
                    let mut bytes = std::mem::take(&mut lane.bytes);
                    bytes.clear();
                    s.free.push(bytes);
                }
            }
        });
    }
}

/// A pipe holding at most `cap` bytes each way; both ends report `local` as their local address.
pub fn pipe(cap: usize, local: SocketAddr) -> (PipeEnd, PipeEnd) {
    let shared = Rc::new(RefCell::new(Lanes {
        lanes: [spare_lane(), spare_lane()],
        cap: cap.max(1),
    }));
    let a = PipeEnd {
        shared: Rc::clone(&shared),
        side: 0,
        local,
    };
    (a, PipeEnd { shared, side: 1, local })
}

impl PipeEnd {
    /// The address the connection under the pipe has.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Reads what the other end wrote (0: it shut its side down and everything was read).
    pub fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut s = self.shared.borrow_mut();
        let lane = &mut s.lanes[1 - self.side];
        if lane.bytes.is_empty() {
            if lane.shut || buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            lane.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(lane.bytes.len());
        let (front, back) = lane.bytes.as_slices();
        let first = n.min(front.len());
        buf[..first].copy_from_slice(&front[..first]);
        buf[first..n].copy_from_slice(&back[..n - first]);
        lane.bytes.drain(..n);
        lane.wake_writer();
        Poll::Ready(Ok(n))
    }

    /// Appends what the other end wrote (at most `max` bytes) to `out` (0: it shut its side down and everything
    /// was read): a read that needs no zeroed buffer.
    pub fn poll_read_append(&self, cx: &mut Context<'_>, out: &mut Vec<u8>, max: usize) -> Poll<io::Result<usize>> {
        let mut s = self.shared.borrow_mut();
        let lane = &mut s.lanes[1 - self.side];
        if lane.bytes.is_empty() {
            if lane.shut || max == 0 {
                return Poll::Ready(Ok(0));
            }
            lane.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = max.min(lane.bytes.len());
        let (front, back) = lane.bytes.as_slices();
        let first = n.min(front.len());
        out.extend_from_slice(&front[..first]);
        out.extend_from_slice(&back[..n - first]);
        lane.bytes.drain(..n);
        lane.wake_writer();
        Poll::Ready(Ok(n))
    }

    /// Writes as much of `buf` as there is room for; waits while the other end has not read enough.
    pub fn poll_write_from(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut s = self.shared.borrow_mut();
        let cap = s.cap;
        let lane = &mut s.lanes[self.side];
        if lane.dropped || lane.shut {
            return Poll::Ready(Err(io::Error::from(io::ErrorKind::BrokenPipe)));
        }
        let room = cap.saturating_sub(lane.bytes.len());
        if room == 0 {
            lane.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        lane.bytes.extend(&buf[..n]);
        lane.wake_reader();
        Poll::Ready(Ok(n))
    }

    /// Ends this end's writing: the other end reads the end of the stream after the bytes written.
    pub fn shutdown(&self) {
        let mut s = self.shared.borrow_mut();
        let lane = &mut s.lanes[self.side];
        lane.shut = true;
        lane.wake_reader();
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_from(cx, buf)).await?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Appends at most `max` bytes to `out` (0: the end of the stream).
    pub async fn read_append(&self, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read_append(cx, out, max)).await
    }

    /// Reads into `buf` (0: the end of the stream).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read_into(cx, buf)).await
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let mut s = self.shared.borrow_mut();
        let side = self.side;
        let out = &mut s.lanes[side];
        out.shut = true;
        out.wake_reader();
        let inbound = &mut s.lanes[1 - side];
        inbound.dropped = true;
        inbound.bytes.clear();
        inbound.wake_writer();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_and_the_end_is_seen() {
        let (a, b) = pipe(4, "127.0.0.1:1".parse().unwrap());
        futures_lite::future::block_on(async {
            let writer = async {
                a.write_all(b"hello world").await.unwrap();
                a.shutdown();
            };
            let reader = async {
                let mut got = Vec::new();
                let mut buf = [0u8; 3];
                loop {
                    let n = b.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break got;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
            };
            let ((), got) = futures_lite::future::zip(writer, reader).await;
            assert_eq!(got, b"hello world");
        });
    }

    #[test]
    fn appended_reads_take_at_most_max_and_see_the_end() {
        let (a, b) = pipe(64, "127.0.0.1:1".parse().unwrap());
        futures_lite::future::block_on(async {
            a.write_all(b"hello world").await.unwrap();
            a.shutdown();
            let mut out = b"> ".to_vec();
            assert_eq!(b.read_append(&mut out, 5).await.unwrap(), 5);
            assert_eq!(out, b"> hello");
            assert_eq!(b.read_append(&mut out, 100).await.unwrap(), 6);
            assert_eq!(out, b"> hello world");
            assert_eq!(b.read_append(&mut out, 100).await.unwrap(), 0);
        });
    }

    #[test]
    fn an_ended_pipe_leaves_its_lanes_for_the_next() {
        let before = SPARES.with(|s| s.borrow().free.len());
        let (a, b) = pipe(64, "127.0.0.1:1".parse().unwrap());
        futures_lite::future::block_on(a.write_all(b"x")).unwrap();
        drop((a, b));
        assert_eq!(SPARES.with(|s| s.borrow().free.len()), before + 1);
        let (a, _b) = pipe(64, "127.0.0.1:1".parse().unwrap());
        assert_eq!(SPARES.with(|s| s.borrow().free.len()), before.saturating_sub(1));
        assert!(a
            .shared
            .borrow()
            .lanes
            .iter()
            .any(|l| l.bytes.capacity() > 0 && l.bytes.is_empty()));
    }

    #[test]
    fn lanes_unused_since_the_last_trim_are_freed_but_a_reserve() {
        let pipes: Vec<_> = (0..10).map(|_| pipe(64, "127.0.0.1:1".parse().unwrap())).collect();
        for (a, _) in &pipes {
            futures_lite::future::block_on(a.write_all(b"x")).unwrap();
        }
        drop(pipes);
        assert_eq!(SPARES.with(|s| s.borrow().free.len()), 10);
        // the first trim sees them all taken since the last one (the low mark starts at 0): none freed
        assert_eq!(trim(), 0);
        // then unused for a whole tick: all but the reserve go
        assert!(trim() > 0);
        assert_eq!(SPARES.with(|s| s.borrow().free.len()), RESERVE);
        // one taken and given back: the low mark is below the reserve, nothing more goes
        drop(pipe(64, "127.0.0.1:1".parse().unwrap()));
        assert_eq!(trim(), 0);
    }

    #[test]
    fn a_dropped_reader_fails_the_writer() {
        let (a, b) = pipe(4, "127.0.0.1:1".parse().unwrap());
        drop(b);
        let r = futures_lite::future::block_on(a.write_all(b"x"));
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        let mut buf = [0u8; 1];
        assert_eq!(futures_lite::future::block_on(a.read(&mut buf)).unwrap(), 0);
    }
}
