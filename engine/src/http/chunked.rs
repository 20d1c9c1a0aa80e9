//! A streaming decoder for `Transfer-Encoding: chunked` bodies: validates the framing byte by byte, reports the
//! data spans, and says where the body (last chunk and trailers) ends, so a body can be forwarded verbatim or
//! de-chunked without ever being held whole.

/// Why a chunked body is malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("invalid chunk size")]
    BadSize,
    #[error("chunk size too large")]
    SizeOverflow,
    #[error("missing CRLF after chunk data")]
    BadDataEnd,
    #[error("invalid chunk line")]
    BadLine,
    #[error("trailer section too large")]
    TrailerTooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits; `digits` seen so far.
    Size {
        digits: u8,
    },
    /// After the size: optional whitespace and `;ext` up to CR.
    Ext,
    /// CR seen after the size line, LF expected.
    SizeLf,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Data done, CR expected.
    DataCr,
    /// Data done, LF expected.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer line.
    TrailerLine,
    /// CR of a trailer line seen.
    TrailerLf,
    /// CR of the final empty line seen.
    FinalLf,
    Done,
}

/// The most trailer bytes accepted after the last chunk.
const MAX_TRAILER: usize = 16 * 1024;

/// A chunked-body decoder; one per body, reusable with [`ChunkedDecoder::reset`].
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    trailer: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            trailer: 0,
        }
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts over for a new body.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Whether the whole body (last chunk and trailers) has been seen.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds `input`; calls `on_data` with each span of chunk data. Returns how many bytes belong to the body:
    /// all of `input`, or less when the body ends inside it (the rest is the next message).
    pub fn feed(&mut self, input: &[u8], mut on_data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            if let State::Data(left) = self.state {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len() - i);
                on_data(&input[i..i + n]);
                i += n;
                let left = left - n as u64;
                self.state = if left == 0 { State::DataCr } else { State::Data(left) };
                continue;
            }
            if self.state == State::Done {
                return Ok(i);
            }
            self.step(input[i])?;
            i += 1;
        }
        Ok(i)
    }

    fn step(&mut self, b: u8) -> Result<(), ChunkError> {
        self.state = match self.state {
            State::Size { digits } => match hex_value(b) {
                Some(v) => {
                    // nginx's bound: leading zeros are fine, a value past its off_t is not.
                    if self.size > super::MAX_LENGTH / 16 {
                        return Err(ChunkError::SizeOverflow);
                    }
                    self.size = self.size * 16 + u64::from(v);
                    State::Size {
                        digits: digits.saturating_add(1),
                    }
                }
                None if digits == 0 => return Err(ChunkError::BadSize),
                None => return self.after_size(b),
            },
            State::Ext => match b {
                b'\r' => State::SizeLf,
                b'\n' => return Err(ChunkError::BadLine),
                _ => State::Ext,
            },
            State::SizeLf if b == b'\n' => self.start_data(),
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataLf if b == b'\n' => State::Size { digits: 0 },
            State::DataCr | State::DataLf => return Err(ChunkError::BadDataEnd),
            State::TrailerStart if b == b'\r' => State::FinalLf,
            State::TrailerStart | State::TrailerLine => self.trailer_byte(b)?,
            State::TrailerLf if b == b'\n' => State::TrailerStart,
            State::FinalLf if b == b'\n' => State::Done,
            State::SizeLf | State::TrailerLf | State::FinalLf => return Err(ChunkError::BadLine),
            State::Data(_) | State::Done => self.state,
        };
        Ok(())
    }

    fn after_size(&mut self, b: u8) -> Result<(), ChunkError> {
        self.state = match b {
            b'\r' => State::SizeLf,
            b';' | b' ' | b'\t' => State::Ext,
            _ => return Err(ChunkError::BadSize),
        };
        Ok(())
    }

    fn start_data(&mut self) -> State {
        let size = std::mem::take(&mut self.size);
        if size == 0 {
            State::TrailerStart
        } else {
            State::Data(size)
        }
    }

    fn trailer_byte(&mut self, b: u8) -> Result<State, ChunkError> {
        self.trailer += 1;
        if self.trailer > MAX_TRAILER {
            return Err(ChunkError::TrailerTooLarge);
        }
        Ok(match b {
            b'\r' => State::TrailerLf,
            b'\n' => return Err(ChunkError::BadLine),
            _ => State::TrailerLine,
        })
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], step: usize) -> Result<(Vec<u8>, usize, bool), ChunkError> {
        let mut d = ChunkedDecoder::new();
        let mut data = Vec::new();
        let mut used = 0;
        for piece in input.chunks(step) {
            used += d.feed(piece, |s| data.extend_from_slice(s))?;
            if d.is_done() {
                break;
            }
        }
        Ok((data, used, d.is_done()))
    }

    #[test]
    fn decodes_in_any_split() {
        let body = b"5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in [1, 2, 3, 7, 100] {
            let (data, used, done) = decode_all(body, step).unwrap();
            assert_eq!(data, b"hello0123456789");
            assert!(done);
            assert_eq!(used, body.len() - 4, "step {step}");
        }
    }

    #[test]
    fn incomplete_body_is_not_done() {
        let (data, used, done) = decode_all(b"5\r\nhel", 100).unwrap();
        assert_eq!((data.as_slice(), used, done), (&b"hel"[..], 6, false));
    }

    #[test]
    fn rejects_bad_framing() {
        assert_eq!(decode_all(b"x\r\n", 1).unwrap_err(), ChunkError::BadSize);
        assert_eq!(decode_all(b"\r\n", 1).unwrap_err(), ChunkError::BadSize);
        assert_eq!(decode_all(b"3\r\nabcX", 1).unwrap_err(), ChunkError::BadDataEnd);
        assert_eq!(decode_all(b"3\nabc", 1).unwrap_err(), ChunkError::BadSize);
        assert_eq!(
            decode_all(b"fffffffffffffffff\r\n", 1).unwrap_err(),
            ChunkError::SizeOverflow
        );
        assert_eq!(decode_all(b"0\r\n\rX", 1).unwrap_err(), ChunkError::BadLine);
        assert_eq!(decode_all(b"-1\r\n", 1).unwrap_err(), ChunkError::BadSize);
        assert_eq!(decode_all(b"0x5\r\n", 1).unwrap_err(), ChunkError::BadSize);
        assert_eq!(
            decode_all(b"5\r\nhello\n0\r\n\r\n", 1).unwrap_err(),
            ChunkError::BadDataEnd
        );
        assert_eq!(decode_all(b"5\rhello", 1).unwrap_err(), ChunkError::BadLine);
        assert_eq!(
            decode_all(b"80000000000000000\r\n", 1).unwrap_err(),
            ChunkError::SizeOverflow
        );
    }

    #[test]
    fn sizes_are_bounded_by_value_not_digits() {
        // nginx accepts leading zeros (its bound is the off_t value); so does corelb.
        let (data, _, done) = decode_all(b"000000000000000000005\r\nhello\r\n0\r\n\r\n", 3).unwrap();
        assert_eq!((data.as_slice(), done), (&b"hello"[..], true));
        let mut d = ChunkedDecoder::new();
        assert_eq!(d.feed(b"7fffffffffffffff\r\n", |_| {}), Ok(18));
        assert_eq!(d.state, State::Data(i64::MAX as u64));
    }
}
