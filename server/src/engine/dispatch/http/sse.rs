//! A Server-Sent Events reader for streamed provider answers (the `text/event-stream` format
//! of the WHATWG HTML standard, the part providers use): bytes in, whole events out.
//!
//! Lines end with `\n`, `\r\n` or `\r` (also when a chunk boundary splits `\r\n`); a line
//! starting with `:` is a comment (Anthropic and proxies send them as keep-alives); `event:`
//! names the event, `data:` lines are joined with `\n`; a blank line ends the event. `id:` and
//! `retry:` are read and ignored (a one-shot call never reconnects). One space after the colon
//! is dropped. The reader holds at most `max_event_bytes` of an unfinished event, so a
//! provider (or anything in between) cannot make it grow without bound. [`Assembler`] is what
//! each API style gives the reader's events to, to assemble the streamed answer.

use memchr::memchr2;
use serde_json::Value;

/// One event as the provider sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// The `event:` name (Anthropic names every event; OpenAI sends none).
    pub(super) event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub(super) data: String,
}

impl SseEvent {
    /// The event as text again (`event:` when named, one `data:` line per line of its data, the
    /// blank line): what a client reading the stream parses back into the same event.
    pub(super) fn encode(&self) -> String {
        let mut out = String::with_capacity(self.data.len() + 32);
        if let Some(name) = &self.event {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out
    }
}

/// An event grew past the bound before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EventTooLarge;

/// Splits a byte stream into events.
#[derive(Debug)]
pub(super) struct SseReader {
    /// The unfinished line.
    line: Vec<u8>,
    /// The last byte fed was `\r`: a `\n` that follows belongs to the same line end.
    after_cr: bool,
    event: Option<String>,
    data: String,
    /// Whether a `data:` field came (an event with no data is not dispatched).
    has_data: bool,
    max_event_bytes: usize,
}

impl SseReader {
    pub(super) fn new(max_event_bytes: usize) -> SseReader {
        SseReader {
            line: Vec::new(),
            after_cr: false,
            event: None,
            data: String::new(),
            has_data: false,
            max_event_bytes,
        }
    }

    /// Feeds the next bytes; pushes every event they complete onto `out`.
    pub(super) fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr2(b'\r', b'\n', bytes) {
            self.push_line_bytes(&bytes[..end])?;
            self.end_line(out);
            let crlf = bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n');
            if bytes[end] == b'\r' && end + 1 == bytes.len() {
                self.after_cr = true;
            }
            bytes = &bytes[end + if crlf { 2 } else { 1 }..];
        }
        self.push_line_bytes(bytes)
    }

    /// Whether the stream stopped inside an event (bytes or fields not yet ended by a blank
    /// line). Such an event is never dispatched, as the standard says.
    pub(super) fn has_unfinished_event(&self) -> bool {
        !self.line.is_empty() || self.has_data || self.event.is_some()
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), EventTooLarge> {
        if self.line.len() + self.data.len() + bytes.len() > self.max_event_bytes {
            return Err(EventTooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event = None;
            self.data.clear();
            self.has_data = false;
            return;
        }
        // A line end never falls inside a UTF-8 sequence, so each line decodes on its own.
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
    }
}

/// Assembles a streamed answer into the message the non-streaming call returns.
pub(super) trait Assembler: Send {
    /// Takes one event.
    fn push(&mut self, event: SseEvent) -> Frame;
    /// Whether result content has arrived.
    fn has_content(&self) -> bool;
    /// Bytes of result content kept so far.
    fn kept_bytes(&self) -> usize;
    /// How the stream says it is complete (for evidence).
    fn end_marker(&self) -> &'static str;
    fn finish(self: Box<Self>) -> Value;
}

/// What one event means for the stream.
pub(super) enum Frame {
    More,
    /// The end marker: the answer is complete.
    End,
    /// A mid-stream error; the event's data as the provider sent it.
    Error(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_in_chunks(input: &str, chunk: usize) -> (Vec<SseEvent>, bool) {
        let mut r = SseReader::new(1 << 20);
        let mut out = Vec::new();
        for part in input.as_bytes().chunks(chunk) {
            r.feed(part, &mut out).unwrap();
        }
        (out, r.has_unfinished_event())
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_are_the_same_whatever_the_chunking_and_line_endings() {
        let text = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: ping\ndata: {}\n\ndata: one\ndata: two\n\n";
        let want = vec![
            ev(Some("message_start"), "{\"a\":1}"),
            ev(Some("ping"), "{}"),
            ev(None, "one\ntwo"),
        ];
        for ending in ["\n", "\r\n", "\r"] {
            let input = text.replace('\n', ending);
            for chunk in 1..=input.len() {
                let (got, unfinished) = read_in_chunks(&input, chunk);
                assert_eq!(got, want, "ending {ending:?}, chunk {chunk}");
                assert!(!unfinished);
            }
        }
    }

    #[test]
    fn a_stream_cut_inside_an_event_dispatches_nothing_and_says_so() {
        let (got, unfinished) = read_in_chunks("data: {\"choices\":[]}\n\ndata: {\"cho", 7);
        assert_eq!(got, vec![ev(None, "{\"choices\":[]}")]);
        assert!(unfinished);
        let (_, unfinished) = read_in_chunks("data: x\n", 3);
        assert!(unfinished, "fields without the blank line are unfinished");
    }

    #[test]
    fn no_space_after_the_colon_and_unknown_fields_are_fine() {
        let (got, _) = read_in_chunks("id: 7\nretry: 10\nevent:error\ndata:{}\n\ndata\n\n", 4);
        assert_eq!(got, vec![ev(Some("error"), "{}"), ev(None, "")]);
    }

    #[test]
    fn an_encoded_event_reads_back_as_itself() {
        for e in [
            ev(Some("message_start"), "{\"a\":1}"),
            ev(None, "one\ntwo"),
            ev(None, ""),
        ] {
            let (got, unfinished) = read_in_chunks(&e.encode(), 3);
            assert_eq!(got, vec![e]);
            assert!(!unfinished);
        }
    }

    #[test]
    fn an_event_past_the_bound_is_refused() {
        let mut r = SseReader::new(16);
        let mut out = Vec::new();
        assert_eq!(r.feed(b"data: 0123456789abcdef", &mut out), Err(EventTooLarge));
        let mut r = SseReader::new(16);
        r.feed(b"data: 0123456789\n", &mut out).unwrap();
        assert_eq!(r.feed(b"data: 0123456789\n", &mut out), Err(EventTooLarge));
    }
}
