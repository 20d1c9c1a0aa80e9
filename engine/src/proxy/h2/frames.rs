//! nginx's checks of the frame headers a client sends, in front of the h2 crate: a frame of the wrong length for
//! its type (`FRAME_SIZE_ERROR`), a client's PUSH_PROMISE or a connection frame on a stream (`PROTOCOL_ERROR`) end
//! the connection with nginx's GOAWAY code, where h2 would answer with its own or wait for a payload that never
//! comes. The adapter reads each 9-byte header as the bytes pass to h2 (no copy of payloads, no allocation) and
//! withholds a bad frame from h2; the connection's loop then sends the GOAWAY through h2. It also tells the loop
//! which header block is incomplete (nginx's `client_header_timeout` runs on it, h2 sees only whole frames), and
//! writes the two frames nginx sends that h2 has no call for: RST_STREAM of a stream h2 does not know yet (its
//! header block timed out) and GOAWAY with the last stream taken (a reload), each between two of h2's frames.
//! And it holds h2's SETTINGS acknowledgement back until h2 flushes what it wrote with it, so that DATA h2 queued
//! before the client's SETTINGS goes out ahead of the acknowledgement, as nginx queues its acknowledgement after
//! the DATA already queued.

use super::unsent::Unsent;
use h2::Reason;
use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;
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

const CONTINUATION: u8 = 9;

const ACK: u8 = 0x1;
/// A SETTINGS acknowledgement: an empty SETTINGS frame with ACK on stream 0.
const SETTINGS_ACK: [u8; HEADER_LEN] = [0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0];
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// What the connection's loop learns from the frames read: the connection error nginx answers with.
#[derive(Default)]
pub(super) struct Watch {
    error: Cell<Option<Reason>>,
    /// The stream whose header block has begun and not ended, since when.
    header_block: Cell<Option<(u32, Instant)>>,
    /// The stream whose header block timed out (reset by the adapter; h2's stream of it is dropped).
    timed_out: Cell<u32>,
    /// The stream refused with REFUSED_STREAM: its body began before the client acknowledged the SETTINGS whose
    /// window is smaller than the default (nginx's rule when `http2_body_preread_size` is under 64k).
    refused: Cell<u32>,
    /// A RST_STREAM to write for this stream, with this code.
    reset: Cell<Option<(u32, Reason)>>,
    /// A GOAWAY (`NO_ERROR`) to write with this last stream.
    goaway: Cell<Option<u32>>,
    /// The connection ends after its GOAWAY with no stream left: its close lingers (not after an error).
    lingering: Cell<bool>,
    /// Since when a write waits for the socket (nginx's `send_timeout` of the connection runs on it).
    stalled: Cell<Option<Instant>>,
}

impl Watch {
    /// Since when h2's writing has waited for the socket without a byte going out.
    pub(super) fn stalled(&self) -> Option<Instant> {
        self.stalled.get()
    }

    /// Notes how a write (or flush) to the socket went: a wait starts the stall, a byte written ends it.
    fn wrote<T>(&self, result: &Poll<io::Result<T>>, progressed: impl FnOnce(&T) -> bool) {
        match result {
            Poll::Pending if self.stalled.get().is_none() => self.stalled.set(Some(Instant::now())),
            Poll::Ready(Ok(v)) if progressed(v) => self.stalled.set(None),
            _ => {}
        }
    }

    /// The stream whose header block is incomplete, and since when.
    pub(super) fn header_block(&self) -> Option<(u32, Instant)> {
        self.header_block.get()
    }

    /// Resets `sid`, whose header block did not end in time (h2 does not know the stream yet).
    pub(super) fn time_out(&self, sid: u32) {
        self.timed_out.set(sid);
        self.header_block.set(None);
        self.reset.set(Some((sid, Reason::PROTOCOL_ERROR)));
    }

    /// Refuses `sid` (REFUSED_STREAM) before h2 takes it.
    fn refuse(&self, sid: u32) {
        self.refused.set(sid);
        self.reset.set(Some((sid, Reason::REFUSED_STREAM)));
    }

    /// Whether `sid` was reset here (its header block timed out, or it was refused): h2's stream of it is not
    /// served.
    pub(super) fn skipped(&self, sid: u32) -> bool {
        sid != 0 && (self.timed_out.get() == sid || self.refused.get() == sid)
    }

    /// The close that comes lingers, as nginx's close of a connection that said GOAWAY and has no stream left.
    pub(super) fn linger(&self) {
        self.lingering.set(true);
    }

    /// Sends GOAWAY (`NO_ERROR`) with `last_sid`, as nginx on a reload.
    pub(super) fn go_away(&self, last_sid: u32) {
        self.goaway.set(Some(last_sid));
    }

    /// The next frame to write between h2's, into `out`; its length.
    fn take_frame(&self, out: &mut [u8; 17]) -> usize {
        let (kind, sid, payload): (u8, u32, [u8; 8]) = if let Some((sid, reason)) = self.reset.take() {
            let c = u32::from(reason).to_be_bytes();
            (RST_STREAM, sid, [c[0], c[1], c[2], c[3], 0, 0, 0, 0])
        } else if let Some(last) = self.goaway.take() {
            let l = last.to_be_bytes();
            (GOAWAY, 0, [l[0], l[1], l[2], l[3], 0, 0, 0, 0])
        } else {
            return 0;
        };
        let len: u8 = if kind == RST_STREAM { 4 } else { 8 };
        out[..3].copy_from_slice(&[0, 0, len]);
        out[3] = kind;
        out[4] = 0;
        out[5..9].copy_from_slice(&sid.to_be_bytes());
        out[9..9 + usize::from(len)].copy_from_slice(&payload[..usize::from(len)]);
        9 + usize::from(len)
    }

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
    /// The stream of a header block that has begun and not ended (0: none).
    block: u32,
    /// The current frame ends the header block.
    ends_block: bool,
    /// A stream whose body begins before the client acknowledged the server's SETTINGS is refused (the server's
    /// window is smaller than the default the client may still count on).
    refuse_early_bodies: bool,
    /// The client acknowledged the server's SETTINGS.
    acked: bool,
    /// A stream to refuse (0: none), taken by the adapter after each read.
    refused: u32,
}

impl Position {
    fn new() -> Self {
        Position {
            preface: PREFACE_LEN,
            head: [0; HEADER_LEN],
            have: 0,
            payload: 0,
            block: 0,
            ends_block: false,
            refuse_early_bodies: false,
            acked: false,
            refused: 0,
        }
    }

    /// The position of the bytes the server writes (h2's frames, from the first).
    fn outgoing() -> Self {
        Position {
            preface: 0,
            ..Position::new()
        }
    }

    /// Between two frames.
    fn at_boundary(&self) -> bool {
        self.preface == 0 && self.have == 0 && self.payload == 0
    }

    /// A frame's payload has passed.
    fn frame_done(&mut self) {
        if self.ends_block {
            self.block = 0;
            self.ends_block = false;
        }
    }

    /// A frame header that may go on: where its header block is.
    fn frame_begins(&mut self) {
        let head = &self.head;
        self.payload = (u32::from(head[0]) << 16) | (u32::from(head[1]) << 8) | u32::from(head[2]);
        let sid = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if head[3] == SETTINGS && head[4] & ACK != 0 {
            self.acked = true;
        }
        if head[3] == HEADERS && head[4] & END_STREAM == 0 && self.refuse_early_bodies && !self.acked {
            self.refused = sid;
        }
        if head[3] == HEADERS || (head[3] == CONTINUATION && self.block == sid) {
            self.block = sid;
            self.ends_block = head[4] & END_HEADERS != 0;
        }
        if self.payload == 0 {
            self.frame_done();
        }
    }

    /// Walks `bytes` the server wrote (h2's own frames: nothing to check); `data` is told each DATA frame's
    /// stream and length as its header passes.
    fn advance(&mut self, bytes: &[u8], mut data: impl FnMut(u32, u32)) {
        let _ = self.walk(bytes, false, &mut data);
    }

    /// Where in `bytes` (the server's, from this position on) a SETTINGS acknowledgement begins, if one does:
    /// the frames are walked without moving the position.
    fn ack_at(&self, bytes: &[u8]) -> Option<usize> {
        if self.preface > 0 || self.have > 0 {
            return None;
        }
        let mut at = usize::try_from(self.payload).ok()?;
        while let Some(head) = bytes.get(at..at + HEADER_LEN) {
            if head == SETTINGS_ACK {
                return Some(at);
            }
            let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            at += HEADER_LEN + len;
        }
        None
    }

    /// Walks `bytes` (just read); where a frame nginx refuses starts in them (`Some(0)` when it started in an
    /// earlier read) and why.
    fn scan(&mut self, bytes: &[u8]) -> Option<(usize, Reason)> {
        self.walk(bytes, true, &mut |_, _| {})
    }

    fn walk(&mut self, bytes: &[u8], checked: bool, data: &mut impl FnMut(u32, u32)) -> Option<(usize, Reason)> {
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
                if self.payload == 0 {
                    self.frame_done();
                }
            } else {
                let n = (HEADER_LEN - self.have).min(rest);
                self.head[self.have..self.have + n].copy_from_slice(&bytes[at..at + n]);
                self.have += n;
                at += n;
                if self.have < HEADER_LEN {
                    continue;
                }
                self.have = 0;
                if let Some(reason) = check(&self.head).filter(|_| checked) {
                    return Some((at.saturating_sub(HEADER_LEN), reason));
                }
                self.frame_begins();
                if self.head[3] == DATA {
                    let sid = u32::from_be_bytes([self.head[5], self.head[6], self.head[7], self.head[8]]);
                    data(sid & 0x7fff_ffff, self.payload);
                }
            }
        }
        None
    }
}

/// `io` with the frame headers it reads checked as nginx checks them, and nginx's own frames written between h2's.
pub(super) struct Checked<T> {
    io: T,
    at: Position,
    /// Where h2's writing is (our frames go in only between two of its frames).
    out: Position,
    /// A frame of ours being written: its bytes, length, and how many are out.
    own: [u8; 17],
    own_len: usize,
    own_sent: usize,
    /// Ours went out after h2's last flush.
    flush: bool,
    /// h2's SETTINGS acknowledgements held back until its next flush, and those due (written as our frames).
    acks_held: u8,
    acks_due: u8,
    watch: Rc<Watch>,
    /// Where the DATA h2 writes is counted.
    unsent: Rc<Unsent>,
    /// The close may linger (`lingering_close` not `off`; it does after [`Watch::linger`]): after the half-close,
    /// what the client still sends is read and dropped until it closes, so that a close with its bytes unread (a
    /// TCP reset) does not cut the answer it has not read yet (nginx's `ngx_http_v2_lingering_close`; bounded by
    /// the close's own timeout).
    linger: bool,
    /// The write side is shut.
    half_closed: bool,
}

impl<T> Checked<T> {
    /// `refuse_early_bodies`: `http2_body_preread_size` is under the default window (64k - 1).
    pub(super) fn new(io: T, watch: Rc<Watch>, unsent: Rc<Unsent>, refuse_early_bodies: bool, linger: bool) -> Self {
        Checked {
            io,
            at: Position {
                refuse_early_bodies,
                ..Position::new()
            },
            out: Position::outgoing(),
            own: [0; 17],
            own_len: 0,
            own_sent: 0,
            flush: false,
            acks_held: 0,
            acks_due: 0,
            watch,
            unsent,
            linger,
            half_closed: false,
        }
    }

    /// Reports the header block left open by the bytes read so far (for `client_header_timeout`).
    fn note_header_block(&self) {
        let sid = self.at.block;
        match self.watch.header_block.get() {
            _ if sid == 0 || self.watch.timed_out.get() == sid => self.watch.header_block.set(None),
            Some((open, _)) if open == sid => {}
            _ => self.watch.header_block.set(Some((sid, Instant::now()))),
        }
    }
}

impl<T: AsyncWrite + Unpin> Checked<T> {
    /// Writes our frames, if any wait, when h2's writing is between two frames (`Pending`: the socket is full).
    fn write_own(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.own_sent == self.own_len {
                if !self.out.at_boundary() {
                    return Poll::Ready(Ok(()));
                }
                self.own_len = if self.acks_due > 0 {
                    self.acks_due -= 1;
                    self.own[..HEADER_LEN].copy_from_slice(&SETTINGS_ACK);
                    HEADER_LEN
                } else {
                    self.watch.take_frame(&mut self.own)
                };
                self.own_sent = 0;
                if self.own_len == 0 {
                    return Poll::Ready(Ok(()));
                }
            }
            let written = Pin::new(&mut self.io).poll_write(cx, &self.own[self.own_sent..self.own_len]);
            self.watch.wrote(&written, |n| *n > 0);
            let n = std::task::ready!(written)?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.own_sent = (self.own_sent + n).min(self.own_len);
            self.flush = true;
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Checked<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        // h2 reads whenever its connection is polled: our frames go out from here when h2 writes nothing
        if let Poll::Ready(Ok(())) = me.write_own(cx) {
            if me.flush && Pin::new(&mut me.io).poll_flush(cx).is_ready() {
                me.flush = false;
            }
        }
        if me.watch.error.get().is_some() {
            // nothing more is read: the connection's loop closes it
            return Poll::Pending;
        }
        let start = buf.filled().len();
        std::task::ready!(Pin::new(&mut me.io).poll_read(cx, buf))?;
        let found = me.at.scan(&buf.filled()[start..]);
        me.note_header_block();
        if me.at.refused != 0 {
            me.watch.refuse(std::mem::take(&mut me.at.refused));
        }
        let Some((bad, reason)) = found else {
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

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Checked<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        std::task::ready!(me.write_own(cx))?;
        // a SETTINGS acknowledgement waits for h2's flush: the frames h2 writes with it (the DATA it had queued,
        // cut at the new frame size) go first
        let buf = match me.out.ack_at(buf) {
            Some(0) => {
                me.acks_held = me.acks_held.saturating_add(1);
                return Poll::Ready(Ok(HEADER_LEN));
            }
            Some(at) => &buf[..at],
            None => buf,
        };
        let written = Pin::new(&mut me.io).poll_write(cx, buf);
        me.watch.wrote(&written, |n| *n > 0);
        let n = std::task::ready!(written)?;
        let unsent = &me.unsent;
        me.out
            .advance(&buf[..n.min(buf.len())], |sid, len| unsent.written(sid, len));
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.acks_due = me.acks_due.saturating_add(std::mem::take(&mut me.acks_held));
        std::task::ready!(me.write_own(cx))?;
        let flushed = Pin::new(&mut me.io).poll_flush(cx);
        me.watch.wrote(&flushed, |_| false);
        std::task::ready!(flushed)?;
        me.flush = false;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.half_closed {
            std::task::ready!(Pin::new(&mut me.io).poll_shutdown(cx))?;
            me.half_closed = true;
        }
        if !me.linger || !me.watch.lingering.get() {
            return Poll::Ready(Ok(()));
        }
        let mut scratch = [0u8; 1024];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match std::task::ready!(Pin::new(&mut me.io).poll_read(cx, &mut buf)) {
                Ok(()) if !buf.filled().is_empty() => continue,
                // the client's end (or a broken connection): nothing more to wait for
                _ => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Position {
        fn advance_all(&mut self, bytes: &[u8]) {
            self.advance(bytes, |_, _| {});
        }
    }

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

    #[test]
    fn header_blocks_open_until_end_headers() {
        let mut p = Position::new();
        let mut bytes = vec![0u8; PREFACE_LEN];
        bytes.extend_from_slice(&head(3, HEADERS, 0, 5));
        bytes.extend_from_slice(&[0x82, 0x86, 0x84]);
        assert_eq!(p.scan(&bytes), None);
        assert_eq!(p.block, 5, "HEADERS without END_HEADERS leaves the block open");
        let mut more = head(2, CONTINUATION, END_HEADERS, 5).to_vec();
        more.push(0x41);
        assert_eq!(p.scan(&more), None);
        assert_eq!(p.block, 5, "the CONTINUATION's payload is still to come");
        assert_eq!(p.scan(&[0x01]), None);
        assert_eq!(p.block, 0);
        let mut whole = head(1, HEADERS, END_HEADERS, 7).to_vec();
        whole.push(0x82);
        assert_eq!(p.scan(&whole[..10]), None);
        assert_eq!(p.block, 0);
    }

    #[test]
    fn own_frames_wait_for_a_boundary_in_h2s_writing() {
        let w = Watch::default();
        let mut out = [0u8; 17];
        assert_eq!(w.take_frame(&mut out), 0);
        w.time_out(3);
        w.go_away(9);
        assert_eq!(w.take_frame(&mut out), 13);
        assert_eq!(&out[..13], &[0, 0, 4, RST_STREAM, 0, 0, 0, 0, 3, 0, 0, 0, 1]);
        assert!(w.skipped(3) && !w.skipped(0) && !w.skipped(5));
        assert_eq!(w.take_frame(&mut out), 17);
        assert_eq!(&out[..17], &[0, 0, 8, GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0]);
        let mut p = Position::outgoing();
        assert!(p.at_boundary());
        let data = head(4, DATA, 0, 1);
        p.advance_all(&data[..5]);
        assert!(!p.at_boundary());
        p.advance_all(&data[5..]);
        assert!(!p.at_boundary(), "its payload is still to come");
        p.advance_all(&[1, 2, 3]);
        assert!(!p.at_boundary());
        p.advance_all(&[4]);
        assert!(p.at_boundary());
    }

    #[test]
    fn acknowledgements_are_found_between_frames_only() {
        let mut bytes = head(3, DATA, 0, 1).to_vec();
        // a payload that holds the acknowledgement's bytes is not one
        bytes.extend_from_slice(&SETTINGS_ACK[..3]);
        let at = bytes.len();
        bytes.extend_from_slice(&SETTINGS_ACK);
        bytes.extend_from_slice(&head(0, DATA, END_STREAM, 1));
        let p = Position::outgoing();
        assert_eq!(p.ack_at(&bytes), Some(at));
        assert_eq!(p.ack_at(&bytes[..at + HEADER_LEN - 1]), None, "a part of it is not one");
        let mut mid = Position::outgoing();
        mid.advance_all(&bytes[..HEADER_LEN + 1]);
        assert_eq!(mid.ack_at(&bytes[HEADER_LEN + 1..]), Some(at - HEADER_LEN - 1));
        let mut in_head = Position::outgoing();
        in_head.advance_all(&bytes[..4]);
        assert_eq!(in_head.ack_at(&bytes[4..]), None);
        let settings = head(0, SETTINGS, 0, 0);
        assert_eq!(p.ack_at(&settings), None, "SETTINGS without ACK");
    }
}
