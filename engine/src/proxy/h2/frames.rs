//! nginx's checks of the frame headers a client sends, in front of the h2 crate: a frame of the wrong length for
//! its type (`FRAME_SIZE_ERROR`), a client's PUSH_PROMISE or a connection frame on a stream (`PROTOCOL_ERROR`) end
//! the connection with nginx's GOAWAY code, where h2 would answer with its own or wait for a payload that never
//! comes. The adapter reads each 9-byte header as the bytes pass to h2 (no copy of payloads, no allocation) and
//! withholds a bad frame from h2; the connection's loop then sends the GOAWAY through h2.

use h2::Reason;
use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The connection preface h2 reads itself before the first frame.
const PREFACE_LEN: usize = 24;
const HEADER_LEN: usize = 9;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;

const ACK: u8 = 0x1;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// What the connection's loop learns from the frames read: the connection error nginx answers with.
#[derive(Default)]
pub(super) struct Watch {
    error: Cell<Option<Reason>>,
}

impl Watch {
    /// Waits until a frame calls for a connection error (polled next to h2's accept, on the same task).
    pub(super) async fn failed(&self) -> Reason {
        std::future::poll_fn(|_| match self.error.get() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        })
        .await
    }
}

/// The error nginx answers a frame header with, or `None` when the frame may go on to h2 (`head`: the 9 bytes).
pub(super) fn check(head: &[u8; HEADER_LEN]) -> Option<Reason> {
    let len = (u32::from(head[0]) << 16) | (u32::from(head[1]) << 8) | u32::from(head[2]);
    let (kind, flags) = (head[3], head[4]);
    let sid = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let size = Reason::FRAME_SIZE_ERROR;
    let protocol = Reason::PROTOCOL_ERROR;
    match kind {
        DATA if flags & PADDED != 0 && len == 0 => Some(size),
        HEADERS => {
            let fixed = u32::from(flags & PADDED != 0) + if flags & PRIORITY_FLAG != 0 { 5 } else { 0 };
            (len <= fixed).then_some(size)
        }
        PRIORITY if len != 5 => Some(size),
        PRIORITY if sid == 0 => Some(protocol),
        RST_STREAM if len != 4 => Some(size),
        RST_STREAM if sid == 0 => Some(protocol),
        SETTINGS if sid != 0 => Some(protocol),
        SETTINGS if (flags == ACK && len != 0) || len % 6 != 0 => Some(size),
        PUSH_PROMISE => Some(protocol),
        PING if len != 8 => Some(size),
        GOAWAY if len < 8 => Some(size),
        GOAWAY if sid != 0 => Some(protocol),
        WINDOW_UPDATE if len != 4 => Some(size),
        _ => None,
    }
}

/// Where the reading is in the client's byte stream.
struct Position {
    /// Bytes of the preface still to pass.
    preface: usize,
    /// The frame header read so far.
    head: [u8; HEADER_LEN],
    have: usize,
    /// Payload bytes of the current frame still to pass.
    payload: u32,
}

impl Position {
    fn new() -> Self {
        Position {
            preface: PREFACE_LEN,
            head: [0; HEADER_LEN],
            have: 0,
            payload: 0,
        }
    }

    /// Walks `bytes` (just read); where a frame nginx refuses starts in them (`Some(0)` when it started in an
    /// earlier read) and why.
    fn scan(&mut self, bytes: &[u8]) -> Option<(usize, Reason)> {
        let mut at = 0;
        while at < bytes.len() {
            let rest = bytes.len() - at;
            if self.preface > 0 {
                let n = self.preface.min(rest);
                self.preface -= n;
                at += n;
            } else if self.payload > 0 {
                let n = usize::try_from(self.payload).map_or(rest, |p| p.min(rest));
                self.payload -= n as u32;
                at += n;
            } else {
                let n = (HEADER_LEN - self.have).min(rest);
                self.head[self.have..self.have + n].copy_from_slice(&bytes[at..at + n]);
                self.have += n;
                at += n;
                if self.have < HEADER_LEN {
                    continue;
                }
                self.have = 0;
                if let Some(reason) = check(&self.head) {
                    return Some((at.saturating_sub(HEADER_LEN), reason));
                }
                self.payload =
                    (u32::from(self.head[0]) << 16) | (u32::from(self.head[1]) << 8) | u32::from(self.head[2]);
            }
        }
        None
    }
}

/// `io` with the frame headers it reads checked as nginx checks them.
pub(super) struct Checked<T> {
    io: T,
    at: Position,
    watch: Rc<Watch>,
}

impl<T> Checked<T> {
    pub(super) fn new(io: T, watch: Rc<Watch>) -> Self {
        Checked {
            io,
            at: Position::new(),
            watch,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Checked<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.watch.error.get().is_some() {
            // nothing more is read: the connection's loop closes it
            return Poll::Pending;
        }
        let start = buf.filled().len();
        std::task::ready!(Pin::new(&mut me.io).poll_read(cx, buf))?;
        let Some((bad, reason)) = me.at.scan(&buf.filled()[start..]) else {
            return Poll::Ready(Ok(()));
        };
        me.watch.error.set(Some(reason));
        buf.set_filled(start + bad);
        if bad > 0 {
            return Poll::Ready(Ok(()));
        }
        // no byte for h2 now (an empty read would be the end of the stream to it): the loop is woken instead
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Checked<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(len: u32, kind: u8, flags: u8, sid: u32) -> [u8; HEADER_LEN] {
        let l = len.to_be_bytes();
        let s = sid.to_be_bytes();
        [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
    }

    #[test]
    fn lengths_and_kinds_nginx_refuses() {
        let size = Some(Reason::FRAME_SIZE_ERROR);
        let protocol = Some(Reason::PROTOCOL_ERROR);
        assert_eq!(check(&head(0, GOAWAY, 0, 0)), size);
        assert_eq!(check(&head(7, GOAWAY, 0, 0)), size);
        assert_eq!(check(&head(8, GOAWAY, 0, 1)), protocol);
        assert_eq!(check(&head(14, GOAWAY, 0, 0)), None);
        assert_eq!(check(&head(4, PUSH_PROMISE, 0, 1)), protocol);
        assert_eq!(check(&head(3, WINDOW_UPDATE, 0, 0)), size);
        assert_eq!(check(&head(4, WINDOW_UPDATE, 0, 1)), None);
        assert_eq!(check(&head(4, PRIORITY, 0, 1)), size);
        assert_eq!(check(&head(5, PRIORITY, 0, 0)), protocol);
        assert_eq!(check(&head(5, RST_STREAM, 0, 1)), size);
        assert_eq!(check(&head(4, RST_STREAM, 0, 0)), protocol);
        assert_eq!(check(&head(6, SETTINGS, ACK, 0)), size);
        assert_eq!(check(&head(7, SETTINGS, 0, 0)), size);
        assert_eq!(check(&head(6, SETTINGS, 0, 1)), protocol);
        assert_eq!(check(&head(12, SETTINGS, 0, 0)), None);
        assert_eq!(check(&head(9, PING, 0, 0)), size);
        assert_eq!(check(&head(0, DATA, PADDED, 1)), size);
        assert_eq!(check(&head(0, DATA, 0, 1)), None);
        assert_eq!(check(&head(6, HEADERS, PADDED | PRIORITY_FLAG, 1)), size);
        assert_eq!(check(&head(7, HEADERS, PADDED | PRIORITY_FLAG, 1)), None);
        assert_eq!(check(&head(0, HEADERS, 0, 1)), size);
        assert_eq!(check(&head(3, 0xfa, 0, 0)), None, "unknown types are skipped");
    }

    #[test]
    fn headers_are_found_across_reads_and_payloads_skipped() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend_from_slice(&head(6, SETTINGS, 0, 0));
        bytes.extend_from_slice(&[0, 3, 0, 0, 0, 100]);
        bytes.extend_from_slice(&head(8, PING, 0, 0));
        // a payload that looks like a bad header is not one
        bytes.extend_from_slice(&head(0, GOAWAY, 0, 0)[..8]);
        let bad_at = bytes.len();
        bytes.extend_from_slice(&head(0, GOAWAY, 0, 0));
        for split in 1..bytes.len() {
            let mut p = Position::new();
            let (a, b) = bytes.split_at(split);
            let found = p.scan(a).or_else(|| p.scan(b).map(|(at, r)| (at + split, r)));
            let want_at = if split > bad_at && split < bad_at + HEADER_LEN {
                split
            } else {
                bad_at
            };
            assert_eq!(found, Some((want_at, Reason::FRAME_SIZE_ERROR)), "split at {split}");
        }
    }

    #[test]
    fn any_bytes_are_walked_without_panic() {
        let mut p = Position::new();
        let mut seed = 7u32;
        let mut buf = [0u8; 4096];
        for _ in 0..200 {
            for b in buf.iter_mut() {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *b = (seed >> 16) as u8;
            }
            if let Some((at, _)) = p.scan(&buf) {
                assert!(at <= buf.len());
                p = Position::new();
            }
        }
        let mut p = Position::new();
        let mut big = vec![0u8; PREFACE_LEN];
        big.extend_from_slice(&head(0xff_ffff, DATA, 0, 1));
        assert_eq!(p.scan(&big), None);
        assert_eq!(p.payload, 0xff_ffff);
    }
}
