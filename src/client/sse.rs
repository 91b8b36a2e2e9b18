//! An incremental Server-Sent Events parser: bytes in, events out, no I/O.
//!
//! Follows the WHATWG event-stream rules that matter for inference servers:
//! LF, CRLF and lone CR line ends (split anywhere, even between CR and LF),
//! `:` comment lines (llama.cpp's `: ping`), multi-line `data:` joined with
//! LF, one optional space after the colon, and an event dispatched only at a
//! blank line. Buffers are reused, so steady-state parsing does not allocate,
//! and an event of one `data:` line (every inference server's) is handed out
//! as a slice of the receive buffer, without a copy.

/// One dispatched event; borrows the parser until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, empty when absent.
    pub event: &'a [u8],
    /// The joined `data:` lines.
    pub data: &'a [u8],
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    start: usize,
    data: Vec<u8>,
    event: Vec<u8>,
    has_data: bool,
    /// The value of the event's only `data:` line so far, as a range of `buf`.
    single: Option<(usize, usize)>,
    skip_lf: bool,
    dispatched: bool,
    /// Bytes after `start` already searched without a line end: a long line
    /// arriving in many pieces is scanned once, not once per piece.
    clean: usize,
}

impl SseParser {
    /// A parser with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            if !self.dispatched {
                self.spill();
            }
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes its buffers hold (their capacity): what it costs in memory.
    pub fn held(&self) -> usize {
        self.buf.capacity() + self.data.capacity() + self.event.capacity()
    }

    /// Bytes received but not yet part of a complete line.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete event, if the bytes fed so far hold one.
    pub fn next_event(&mut self) -> Option<SseEvent<'_>> {
        if self.dispatched {
            self.data.clear();
            self.event.clear();
            self.has_data = false;
            self.single = None;
            self.dispatched = false;
        }
        loop {
            if self.skip_lf && self.start < self.buf.len() {
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.start..];
            let from = self.clean.min(rest.len());
            let Some(end) = memchr::memchr2(b'\n', b'\r', &rest[from..]).map(|i| from + i) else {
                self.clean = rest.len();
                self.compact();
                return None;
            };
            self.clean = 0;
            let line_start = self.start;
            if rest[end] == b'\r' {
                self.skip_lf = true;
            }
            self.start += end + 1;
            if end == 0 {
                if self.has_data {
                    self.dispatched = true;
                    if self.data.last() == Some(&b'\n') {
                        self.data.pop();
                    }
                    return Some(self.current());
                }
                self.event.clear();
                continue;
            }
            self.field(line_start, line_start + end);
        }
    }

    /// At end of stream: an event whose blank line never came is dispatched
    /// anyway (servers that close right after the last `data:` line).
    pub fn finish(&mut self) -> Option<SseEvent<'_>> {
        if self.next_event().is_some() {
            return Some(self.current());
        }
        if self.start < self.buf.len() {
            let (s, e) = (self.start, self.buf.len());
            self.start = e;
            self.field(s, e);
        }
        if !self.has_data {
            return None;
        }
        self.dispatched = true;
        if self.data.last() == Some(&b'\n') {
            self.data.pop();
        }
        Some(self.current())
    }

    fn current(&self) -> SseEvent<'_> {
        let data = match self.single {
            Some((s, e)) => &self.buf[s..e],
            None => &self.data[..],
        };
        SseEvent {
            event: &self.event,
            data,
        }
    }

    fn field(&mut self, s: usize, e: usize) {
        let line = &self.buf[s..e];
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" if !self.has_data => {
                // Offsets of the value within `buf`: no copy yet.
                let from = e - value.len();
                self.single = Some((from, e));
                self.has_data = true;
            }
            b"data" => {
                let value_range = (e - value.len(), e);
                self.spill();
                self.data
                    .extend_from_slice(&self.buf[value_range.0..value_range.1]);
                self.data.push(b'\n');
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {}
        }
    }

    /// Moves a single `data:` value out of `buf` into `data`, before `buf`
    /// changes or a second line joins it.
    fn spill(&mut self) {
        if let Some((s, e)) = self.single.take() {
            self.data.extend_from_slice(&self.buf[s..e]);
            self.data.push(b'\n');
        }
    }

    fn compact(&mut self) {
        self.spill();
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn collect(parser: &mut SseParser, out: &mut Vec<(String, String)>) {
        while let Some(ev) = parser.next_event() {
            out.push((
                String::from_utf8_lossy(ev.event).into_owned(),
                String::from_utf8_lossy(ev.data).into_owned(),
            ));
        }
    }

    fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<(String, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts {
            p.feed(&input[last..c]);
            collect(&mut p, &mut out);
            last = c;
        }
        p.feed(&input[last..]);
        collect(&mut p, &mut out);
        if let Some(ev) = p.finish() {
            out.push((
                String::from_utf8_lossy(ev.event).into_owned(),
                String::from_utf8_lossy(ev.data).into_owned(),
            ));
        }
        out
    }

    const STREAM: &[u8] = b": ping\r\n\r\ndata: {\"a\":1}\r\n\r\ndata:x\ndata: y\n\nevent: error\ndata: {\"error\":\"boom\"}\r\rdata: [DONE]\n\n";

    fn expected() -> Vec<(String, String)> {
        vec![
            (String::new(), "{\"a\":1}".into()),
            (String::new(), "x\ny".into()),
            ("error".into(), "{\"error\":\"boom\"}".into()),
            (String::new(), "[DONE]".into()),
        ]
    }

    #[test]
    fn parses_whole_stream() {
        assert_eq!(parse_in_pieces(STREAM, &[]), expected());
    }

    #[test]
    fn byte_by_byte() {
        let cuts: Vec<usize> = (1..STREAM.len()).collect();
        assert_eq!(parse_in_pieces(STREAM, &cuts), expected());
    }

    #[test]
    fn last_event_without_blank_line_is_kept_at_eof() {
        assert_eq!(
            parse_in_pieces(b"data: a\n\ndata: b", &[]),
            vec![(String::new(), "a".into()), (String::new(), "b".into())]
        );
    }

    #[test]
    fn empty_and_fieldless_lines() {
        // `data` with no colon is a data line with an empty value.
        assert_eq!(
            parse_in_pieces(b"data\n\nid: 3\nretry: 5\n\n", &[]),
            vec![(String::new(), String::new())]
        );
    }

    #[test]
    fn feeding_twice_without_reading_keeps_a_pending_line() {
        let mut p = SseParser::new();
        p.feed(b"data: one\n");
        assert!(p.next_event().is_none());
        p.feed(b"data: two\n");
        p.feed(b"\n");
        assert_eq!(
            p.next_event().map(|e| e.data.to_vec()),
            Some(b"one\ntwo".to_vec())
        );
        let mut p = SseParser::new();
        p.feed(b"data: solo\n");
        p.feed(b"\n");
        assert_eq!(
            p.next_event().map(|e| e.data.to_vec()),
            Some(b"solo".to_vec())
        );
    }

    proptest! {
        #[test]
        fn any_chunk_split_gives_the_same_events(mut cuts in proptest::collection::vec(0..STREAM.len(), 0..12)) {
            cuts.sort_unstable();
            cuts.dedup();
            prop_assert_eq!(parse_in_pieces(STREAM, &cuts), expected());
        }

        #[test]
        fn arbitrary_events_survive_any_split(
            datas in proptest::collection::vec("[a-z{}\":, ]{0,12}", 1..6),
            crlf in any::<bool>(),
            mut cuts in proptest::collection::vec(0..400usize, 0..10),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut text = String::new();
            for d in &datas {
                text.push_str("data: ");
                text.push_str(d);
                text.push_str(nl);
                text.push_str(nl);
            }
            let bytes = text.as_bytes();
            cuts.retain(|c| *c < bytes.len());
            cuts.sort_unstable();
            cuts.dedup();
            let got: Vec<String> = parse_in_pieces(bytes, &cuts).into_iter().map(|(_, d)| d).collect();
            prop_assert_eq!(got, datas);
        }
    }
}
