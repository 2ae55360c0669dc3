//! A parser of server-sent events, fed the body bytes as they arrive: the model's streamed
//! answers and the answers of MCP servers over HTTP are both event streams.
//!
//! It follows the event-stream rules: lines end in CRLF, LF or a lone CR (a CRLF split across
//! two reads is still one line end); `field:value` with one optional space after the colon; a line
//! starting with `:` is a comment; consecutive `data` lines join with `\n`; an empty line ends the
//! event. Only `data` and `event` matter here; `id`, `retry` and unknown fields are ignored.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event` field; empty means the default type (`message`).
    pub event: String,
    pub data: String,
}

/// A line longer than this is not an event stream (or a server gone wrong): refuse it rather than
/// buffer without bound.
const MAX_LINE: usize = 16 << 20;

/// The line was longer than the parser accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineTooLong {
    /// The start of the line.
    pub start: String,
}

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    /// The previous byte was a CR, so an LF right after it ends nothing more.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: String,
}

impl SseParser {
    pub(crate) fn new() -> SseParser {
        SseParser::default()
    }

    /// Parses `bytes`, appending the events they complete to `out`.
    pub(crate) fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<SseEvent>,
    ) -> Result<(), LineTooLong> {
        // Each piece ends with its line's terminator, but for the last when that is unfinished.
        for piece in bytes.split_inclusive(|&b| b == b'\n' || b == b'\r') {
            if self.after_cr && piece == b"\n" {
                self.after_cr = false;
                continue;
            }
            self.after_cr = false;
            match piece.split_last() {
                Some((&end @ (b'\n' | b'\r'), line)) => {
                    self.line.extend_from_slice(line);
                    self.after_cr = end == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_complete(&line, out);
                }
                _ => self.line.extend_from_slice(piece),
            }
            if self.line.len() > MAX_LINE {
                let first = self.line.chunks(200).next().unwrap_or_default();
                let start = String::from_utf8_lossy(first).into_owned();
                return Err(LineTooLong { start });
            }
        }
        Ok(())
    }

    /// The stream ended: completes a last line and a last event that lacked their terminators.
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_complete(&line, &mut out);
        }
        self.dispatch(&mut out);
        out.pop()
    }

    fn line_complete(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(b":") {
            return;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_owned(),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            parser.push(piece, &mut out).expect("short lines");
        }
        out.extend(parser.finish());
        out
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    const STREAM: &str = ": keep-alive\r\n\
        data: {\"a\":1}\r\n\r\n\
        data:{\"b\":2}\n\n\
        event: error\n\
        data: first\n\
        data:  second\n\
        id: 7\n\
        retry: 10\n\n\
        data: é ü\r\r\
        data: [DONE]\n\n";

    #[test]
    fn parses_crlf_lf_and_cr_comments_and_multi_line_data() {
        let events = parse_in_pieces(&[STREAM.as_bytes()]);
        assert_eq!(
            data(&events),
            ["{\"a\":1}", "{\"b\":2}", "first\n second", "é ü", "[DONE]"]
        );
        assert_eq!(events[2].event, "error");
        assert_eq!(
            events[3].event, "",
            "the event type does not leak into the next event"
        );
    }

    #[test]
    fn any_split_point_gives_the_same_events() {
        let whole = parse_in_pieces(&[STREAM.as_bytes()]);
        let bytes = STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(parse_in_pieces(&[a, b]), whole, "split at byte {cut}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_in_pieces(&singles), whole, "one byte at a time");
    }

    #[test]
    fn a_crlf_split_between_reads_is_one_line_end() {
        let events = parse_in_pieces(&[b"data: x\r", b"\ndata: y\r", b"\n\r", b"\n"]);
        assert_eq!(data(&events), ["x\ny"]);
    }

    #[test]
    fn a_line_without_colon_is_a_field_with_an_empty_value() {
        let events = parse_in_pieces(&[b"data\n\ndata:\n\n"]);
        assert_eq!(data(&events), ["", ""]);
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        let events = parse_in_pieces(&[b"\n\n: only a comment\n\nevent: ping\n\n"]);
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn an_unterminated_last_event_is_completed_at_the_end() {
        assert_eq!(data(&parse_in_pieces(&[b"data: [DONE]"])), ["[DONE]"]);
        assert_eq!(data(&parse_in_pieces(&[b"data: [DONE]\n"])), ["[DONE]"]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 1 << 20];
        let mut result = Ok(());
        for _ in 0..17 {
            result = parser.push(&chunk, &mut out);
            if result.is_err() {
                break;
            }
        }
        let err = result.expect_err("refused");
        assert_eq!(err.start.len(), 200);
    }
}
