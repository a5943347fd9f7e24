//! The runner's protocol stream cut into lines, none longer than [`MAX_FRAME_BYTES`].
//!
//! A line is collected from what the buffered reader has at hand, so the host never holds
//! more of one line than the limit: at the limit the reader stops and says so, and the
//! kernel that sent it is killed (`kernel/connection.rs`). The runner never sends a frame that large
//! (it splits long stream output and replaces an oversized bundle with a notice, see
//! `channel.py`), so only bytes a cell wrote to the protocol pipe itself can reach it.
//! The splitting core, [`LineBuffer`], is synchronous, so it can be tested on any bytes.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest protocol line the host reads, newline excluded. A display of a 40 MB PNG
/// (53 MB as base64) fits; a kernel holds at most this much of the host's memory while a
/// line is read. The runner's `MAX_FRAME_BYTES` in `channel.py` is the same number.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// The buffer keeps this much capacity between lines: a 20 MB frame must not keep 20 MB
/// of the host's memory for good, and small frames should not reallocate each time.
const KEPT_CAPACITY: usize = 256 * 1024;

/// One line being collected, never longer than its limit.
pub struct LineBuffer {
    line: Vec<u8>,
    limit: usize,
    kept: usize,
}

/// What [`LineBuffer::feed`] did with the bytes it was offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// Took this many bytes from the front; `complete` when they ended the line (the
    /// newline is taken but not kept).
    Took { bytes: usize, complete: bool },
    /// The line would grow past the limit; nothing was taken.
    TooLong,
}

impl LineBuffer {
    pub fn new(limit: usize) -> Self {
        Self::keeping(limit, KEPT_CAPACITY)
    }

    /// A buffer that keeps `kept` bytes of capacity between lines (tests make it small,
    /// so that lines of a few bytes already grow it).
    pub fn keeping(limit: usize, kept: usize) -> Self {
        let kept = kept.min(limit);
        LineBuffer {
            line: Vec::with_capacity(kept),
            limit,
            kept,
        }
    }

    /// Takes bytes from the front of `available` up to and including the first newline.
    pub fn feed(&mut self, available: &[u8]) -> Fed {
        let (content, taken, complete) = match memchr::memchr(b'\n', available) {
            Some(at) => (at, at + 1, true),
            None => (available.len(), available.len(), false),
        };
        if self.line.len() + content > self.limit {
            return Fed::TooLong;
        }
        self.reserve(content);
        self.line.extend_from_slice(&available[..content]);
        Fed::Took {
            bytes: taken,
            complete,
        }
    }

    /// Grows by doubling as a `Vec` does, but never past the limit.
    fn reserve(&mut self, more: usize) {
        let needed = self.line.len() + more;
        if needed > self.line.capacity() {
            let target = needed.max(self.line.capacity() * 2).min(self.limit);
            self.line.reserve_exact(target - self.line.len());
        }
    }

    /// The line collected so far, without its newline.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    pub fn is_empty(&self) -> bool {
        self.line.is_empty()
    }

    /// Bytes held now (what the limit bounds).
    pub fn capacity(&self) -> usize {
        self.line.capacity()
    }

    /// Starts the next line.
    pub fn clear(&mut self) {
        self.line.clear();
        self.line.shrink_to(self.kept);
    }
}

/// One step of [`FrameReader::next_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// A line without its newline (the last one of the stream may have none).
    Line(&'a [u8]),
    /// A line longer than the limit: the stream cannot be trusted any further.
    TooLong,
    /// The stream ended (or failed, which for a pipe means the same).
    End,
}

/// Lines from a buffered reader, bounded as [`LineBuffer`] is.
pub struct FrameReader<R> {
    reader: R,
    buffer: LineBuffer,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub fn new(reader: R, limit: usize) -> Self {
        FrameReader {
            reader,
            buffer: LineBuffer::new(limit),
        }
    }

    /// The next line. Cancel safety: bytes read are kept in the buffer before they are
    /// consumed from the reader, so dropping the future loses nothing.
    pub async fn next_line(&mut self) -> Next<'_> {
        self.buffer.clear();
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(_) => return Next::End,
            };
            if available.is_empty() {
                return if self.buffer.is_empty() {
                    Next::End
                } else {
                    Next::Line(self.buffer.line())
                };
            }
            match self.buffer.feed(available) {
                Fed::TooLong => return Next::TooLong,
                Fed::Took { bytes, complete } => {
                    self.reader.consume(bytes);
                    if complete {
                        return Next::Line(self.buffer.line());
                    }
                }
            }
        }
    }

    /// Bytes the line buffer holds now.
    pub fn held(&self) -> usize {
        self.buffer.capacity()
    }
}

/// Test helper: runs a [`FrameReader`] over `input`, read `read_size` bytes at a time, and
/// checks at every line that it never holds more than `limit`.
#[cfg(test)]
pub(crate) fn read_all(input: &[u8], read_size: usize, limit: usize) -> (Vec<Vec<u8>>, bool) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let reader = tokio::io::BufReader::with_capacity(read_size, input);
        let mut frames = FrameReader::new(reader, limit);
        let mut lines = Vec::new();
        loop {
            let step = match frames.next_line().await {
                Next::Line(line) => Some(line.to_vec()),
                Next::TooLong => return (lines, true),
                Next::End => None,
            };
            assert!(frames.held() <= limit, "holds {} > {limit}", frames.held());
            match step {
                Some(line) => lines.push(line),
                None => return (lines, false),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_across_reads_and_keeps_an_unterminated_last_one() {
        let (lines, too_long) = read_all(b"one\ntwo\n\nthree", 2, 16);
        assert!(!too_long);
        assert_eq!(lines, [&b"one"[..], b"two", b"", b"three"]);
    }

    #[test]
    fn stops_at_a_line_over_the_limit_without_holding_it() {
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend(b"\nafter\n");
        let (lines, too_long) = read_all(&input, 7, 100);
        assert!(too_long);
        assert_eq!(lines, [b"ok"]);
        // A line of exactly the limit is fine.
        let (lines, too_long) = read_all(&[b'y'; 100], 7, 100);
        assert!(!too_long);
        assert_eq!(lines[0].len(), 100);
    }

    #[test]
    fn capacity_never_passes_the_limit() {
        let mut buffer = LineBuffer::new(1000);
        for _ in 0..99 {
            assert!(matches!(
                buffer.feed(b"0123456789"),
                Fed::Took { bytes: 10, .. }
            ));
            assert!(buffer.capacity() <= 1000, "{}", buffer.capacity());
        }
        assert_eq!(
            buffer.feed(b"0123456789\n"),
            Fed::Took {
                bytes: 11,
                complete: true
            }
        );
        assert_eq!(buffer.line().len(), 1000);
        assert!(buffer.capacity() <= 1000);
        buffer.clear();
        assert_eq!(buffer.feed(&[b'z'; 1001]), Fed::TooLong);
    }

    /// The runner's copy of the limit must be the same number, or a frame the runner
    /// thinks fine could get its kernel killed.
    #[test]
    fn the_runner_uses_the_same_limit() {
        let channel = include_str!("../../runner/pykernel_runner/channel.py");
        let wanted = format!("MAX_FRAME_BYTES = {} << 20", MAX_FRAME_BYTES >> 20);
        assert!(channel.contains(&wanted), "channel.py lacks `{wanted}`");
    }
}
