//! A fixed-size read buffer with a window of unread bytes, filled from a runtime connection.

use super::{io_timeout, Conn, Runtime};
use futures_lite::AsyncReadExt;
use std::io;
use std::time::Duration;

/// A fixed-size read buffer with a window of unread bytes.
#[derive(Debug)]
pub struct IoBuf {
    data: Box<[u8]>,
    start: usize,
    end: usize,
}

impl IoBuf {
    /// A buffer of `size` bytes.
    pub fn new(size: usize) -> Self {
        IoBuf {
            data: vec![0; size].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// The size of the buffer.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// The unread bytes.
    pub fn readable(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Where the unread bytes start in the buffer (for [`IoBuf::bytes_at`]).
    pub fn start(&self) -> usize {
        self.start
    }

    /// The `len` bytes from `at`, read or not: bytes consumed since `at` was [`IoBuf::start`] are still there
    /// until the next fill moves or overwrites them.
    pub fn bytes_at(&self, at: usize, len: usize) -> Option<&[u8]> {
        self.data.get(at..at.checked_add(len)?)
    }

    /// Marks `n` unread bytes as used (`usize::MAX`: all of them).
    pub fn consume(&mut self, n: usize) {
        // Saturating: a wrapped sum would leave stale bytes behind for the buffer's next connection.
        self.start = self.start.saturating_add(n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Whether no byte is left to read or room to read into without moving data.
    pub fn is_full(&self) -> bool {
        self.start == 0 && self.end == self.data.len()
    }

    /// Reads more bytes after the unread ones (moving them to the front if needed), giving up after `timeout`.
    /// `Ok(0)` is end of stream; a full buffer is an `InvalidData` error.
    pub async fn fill<R: Runtime>(&mut self, conn: &mut R::Conn, timeout: Duration) -> io::Result<usize> {
        io_timeout::<R, _>(timeout, self.fill_untimed(conn)).await
    }

    /// The room after the unread bytes (moving them to the front if needed; empty when the buffer is full), for a
    /// read that [`IoBuf::commit`]s what it got.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.end == self.data.len() && self.start != 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.data[self.end..]
    }

    /// Counts `n` bytes read into [`IoBuf::spare`] as readable.
    pub fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.data.len());
    }

    /// [`IoBuf::fill`] without a time limit (the caller sets one).
    pub async fn fill_untimed(&mut self, conn: &mut impl Conn) -> io::Result<usize> {
        if self.end == self.data.len() {
            if self.start == 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "buffer full"));
            }
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = conn.read(&mut self.data[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::IoBuf;

    #[test]
    fn consuming_everything_after_a_partial_consume_empties_the_buffer() {
        let mut b = IoBuf::new(16);
        b.data[..10].copy_from_slice(b"0123456789");
        b.end = 10;
        b.consume(4);
        assert_eq!(b.readable(), b"456789");
        b.consume(usize::MAX);
        assert!(b.readable().is_empty(), "no stale bytes for the buffer's next user");
        assert_eq!((b.start, b.end), (0, 0));
    }

    #[test]
    fn spare_moves_unread_bytes_to_the_front_and_commit_counts_them() {
        let mut b = IoBuf::new(8);
        b.spare()[..8].copy_from_slice(b"abcdefgh");
        b.commit(8);
        assert!(b.is_full() && b.spare().is_empty());
        b.consume(5);
        let room = b.spare();
        assert_eq!(room.len(), 5);
        room[..2].copy_from_slice(b"ij");
        b.commit(2);
        assert_eq!(b.readable(), b"fghij");
    }

    #[test]
    fn consumed_bytes_stay_until_the_next_fill() {
        let mut b = IoBuf::new(16);
        b.data[..10].copy_from_slice(b"GET /\r\n\r\nX");
        b.end = 10;
        let at = b.start();
        b.consume(9);
        assert_eq!(b.bytes_at(at, 9), Some(&b"GET /\r\n\r\n"[..]));
        assert_eq!(b.readable(), b"X");
        assert_eq!(b.bytes_at(12, 5), None, "past the end");
        assert_eq!(b.bytes_at(usize::MAX, 2), None);
    }
}
