//! The framing of an HTTP/1.1 response body — chunked, a content length, or
//! until the connection closes — decoded in place over a read buffer, with
//! no I/O: the transport (`raw.rs`) owns the socket and the buffer, this
//! says which of its bytes are body. Public so that it can be fuzzed
//! (`fuzz/fuzz_targets/chunked.rs`).

use std::ops::Range;

/// What a response says its body is: the headers both transports (this
/// one and reqwest's) read, the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentHeaders {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Encoding`.
    pub content_encoding: Option<String>,
    /// `Location`, of a redirect.
    pub location: Option<String>,
}

/// A body that is not what its framing says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad chunked encoding: {0}")]
pub struct BadFraming(&'static str);

/// How a body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length`: the bytes still to come.
    Length(u64),
    /// Neither: the body ends with the connection.
    UntilClose,
}

/// Where the chunked decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// The longest line of the framing read (a chunk size with its extensions,
/// a trailer): a server cannot make the buffer grow without end.
const MAX_LINE: usize = 4096;

/// Decodes a body's framing as its bytes arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoder {
    framing: Framing,
    chunk: Chunk,
}

impl Decoder {
    /// A decoder for a body framed so.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            chunk: Chunk::Size,
        }
    }

    /// Its framing (a `Length` counts down as bytes are taken).
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Whether the body is complete; `eof`: the connection has closed.
    pub fn done(&self, eof: bool) -> bool {
        match self.framing {
            Framing::Chunked => self.chunk == Chunk::Done,
            Framing::Length(n) => n == 0,
            Framing::UntilClose => eof,
        }
    }

    /// The next body bytes among `buf[*pos..]`, advancing `pos` past them
    /// and past the framing read on the way; `Ok(None)` when it needs more
    /// bytes (or the body is complete).
    pub fn step(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
    ) -> Result<Option<Range<usize>>, BadFraming> {
        let avail = buf.len() - *pos;
        match self.framing {
            Framing::UntilClose => {
                if avail == 0 {
                    return Ok(None);
                }
                let r = *pos..buf.len();
                *pos = buf.len();
                Ok(Some(r))
            }
            Framing::Length(left) => {
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(avail);
                if n == 0 {
                    return Ok(None);
                }
                let r = *pos..*pos + n;
                *pos += n;
                self.framing = Framing::Length(left - n as u64);
                Ok(Some(r))
            }
            Framing::Chunked => self.step_chunked(buf, pos),
        }
    }

    fn step_chunked(
        &mut self,
        buf: &[u8],
        pos: &mut usize,
    ) -> Result<Option<Range<usize>>, BadFraming> {
        loop {
            match self.chunk {
                Chunk::Done => return Ok(None),
                Chunk::Size => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(None);
                    };
                    let text = std::str::from_utf8(line).map_err(|_| BadFraming("chunk size"))?;
                    let hex = text.split(';').next().unwrap_or("").trim();
                    let size =
                        u64::from_str_radix(hex, 16).map_err(|_| BadFraming("chunk size"))?;
                    self.chunk = if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let avail = buf.len() - *pos;
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(avail);
                    if n == 0 {
                        return Ok(None);
                    }
                    let r = *pos..*pos + n;
                    *pos += n;
                    let left = left - n as u64;
                    self.chunk = if left == 0 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left)
                    };
                    return Ok(Some(r));
                }
                Chunk::DataEnd => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(None);
                    };
                    if line.iter().any(|b| !b.is_ascii_whitespace()) {
                        return Err(BadFraming("data longer than its size"));
                    }
                    self.chunk = Chunk::Size;
                }
                Chunk::Trailer => {
                    let Some(line) = line(buf, pos)? else {
                        return Ok(None);
                    };
                    if line.iter().all(u8::is_ascii_whitespace) {
                        self.chunk = Chunk::Done;
                    }
                }
            }
        }
    }
}

/// The next line of `buf[*pos..]` (without its `\n`), `pos` moved past it;
/// `Ok(None)` until it is complete. A line longer than [`MAX_LINE`] is an
/// error whether or not its end has come, so the outcome does not depend on
/// how the bytes were split.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, BadFraming> {
    let rest = &buf[*pos..];
    match memchr::memchr(b'\n', rest) {
        Some(end) if end <= MAX_LINE => {
            *pos += end + 1;
            Ok(Some(&rest[..end]))
        }
        None if rest.len() <= MAX_LINE => Ok(None),
        _ => Err(BadFraming("a line of the framing is longer than 4 KiB")),
    }
}

/// Decodes a whole chunked `body` given in `pieces` as a transport would see
/// them arrive (each appended to one buffer, decoded as far as it goes): the
/// body's bytes and whether it was complete. For tests and fuzzing.
pub fn decode_chunked(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), BadFraming> {
    let mut d = Decoder::new(Framing::Chunked);
    let (mut buf, mut pos, mut out) = (Vec::new(), 0, Vec::new());
    for piece in pieces {
        buf.extend_from_slice(piece);
        while let Some(r) = d.step(&buf, &mut pos)? {
            out.extend_from_slice(&buf[r]);
        }
    }
    Ok((out, d.done(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_decode_wherever_they_are_split() {
        let body: &[u8] = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
        let whole = decode_chunked(&[body]).unwrap();
        assert_eq!(whole, (b"hello world".to_vec(), true));
        for at in 0..=body.len() {
            assert_eq!(
                decode_chunked(&[&body[..at], &body[at..]]).unwrap(),
                whole,
                "{at}"
            );
        }
        assert_eq!(
            decode_chunked(&[b"3\r\nabcdef\r\n"]),
            Err(BadFraming("data longer than its size"))
        );
        assert_eq!(decode_chunked(&[b"zz\r\n"]), Err(BadFraming("chunk size")));
        // A line past 4 KiB is refused, its end come or not: the same
        // outcome however the bytes are split (the check it replaces refused
        // only an unfinished line, so a split decided the outcome).
        let mut long = vec![b'0'; 5000];
        long.extend_from_slice(b"5\r\nhello\r\n0\r\n\r\n");
        let too_long = Err(BadFraming("a line of the framing is longer than 4 KiB"));
        assert_eq!(decode_chunked(&[&long]), too_long);
        assert_eq!(decode_chunked(&[&long[..4500], &long[4500..]]), too_long);
        let mut trailer = b"0\r\n".to_vec();
        trailer.extend_from_slice(&[b'x'; 5000]);
        assert_eq!(decode_chunked(&[&trailer]), too_long);
        // A size beyond what can be buffered is read as far as bytes come.
        assert_eq!(
            decode_chunked(&[b"ffffffffffffffff\r\nab"]).unwrap(),
            (b"ab".to_vec(), false)
        );
    }
}
