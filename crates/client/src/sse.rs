//! A Server-Sent Events parser for the bytes of `GET /events`, as the HTML standard describes
//! the format: lines end in CRLF, LF or CR; `event:` names the event, `data:` lines are joined;
//! a line starting with `:` is a comment (the server's keep-alives); a blank line dispatches.

/// The longest line accepted; the server's lines are a few dozen bytes.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// A line longer than [`MAX_LINE_BYTES`]: the stream is not the server's.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LineTooLong;

/// One dispatched event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub kind: String,
    pub data: String,
}

#[derive(Debug, Default)]
pub(crate) struct EventParser {
    line: Vec<u8>,
    /// The previous byte was a CR, so an LF right after it ends nothing.
    after_cr: bool,
    kind: String,
    data: String,
    /// Whether a `data:` field came since the last dispatch.
    has_data: bool,
}

impl EventParser {
    /// Feeds the next bytes of the stream; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, LineTooLong> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    events.extend(self.line_ended(&String::from_utf8_lossy(&line)));
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() >= MAX_LINE_BYTES {
                        return Err(LineTooLong);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    fn line_ended(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let kind = std::mem::take(&mut self.kind);
            let data = std::mem::take(&mut self.data);
            let dispatch = std::mem::take(&mut self.has_data);
            return dispatch.then(|| Event { kind: if kind.is_empty() { "message".into() } else { kind }, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => value.clone_into(&mut self.kind),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: &str) -> Event {
        Event { kind: kind.into(), data: data.into() }
    }

    #[test]
    fn events_comments_and_line_endings() {
        let mut parser = EventParser::default();
        let stream = b": keep-alive\n\nevent: catalog\ndata: {\"etag\":\"a\"}\n\nevent:catalog\r\ndata:{\"etag\":null}\r\n\r\ndata: x\rdata: y\r\r";
        let events = parser.feed(stream).unwrap();
        assert_eq!(
            events,
            [event("catalog", "{\"etag\":\"a\"}"), event("catalog", "{\"etag\":null}"), event("message", "x\ny")]
        );
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_events() {
        let stream = b"event: catalog\r\ndata: {\"etag\":\"\\\"0f\\\"\"}\r\n\r\n:\r\n\r\nevent: other\ndata: 1\n\n";
        let whole = EventParser::default().feed(stream).unwrap();
        assert_eq!(whole.len(), 2);
        for split in 0..=stream.len() {
            let mut parser = EventParser::default();
            let mut events = parser.feed(&stream[..split]).unwrap();
            events.extend(parser.feed(&stream[split..]).unwrap());
            assert_eq!(events, whole, "split at {split}");
        }
        // Byte by byte, too.
        let mut parser = EventParser::default();
        let events: Vec<Event> = stream.iter().flat_map(|byte| parser.feed(&[*byte]).unwrap()).collect();
        assert_eq!(events, whole);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_long_lines_are_refused() {
        let mut parser = EventParser::default();
        assert_eq!(parser.feed(b"event: catalog\n\ndata: z\n\n").unwrap(), [event("message", "z")]);
        let mut parser = EventParser::default();
        assert_eq!(parser.feed(&vec![b'x'; MAX_LINE_BYTES + 1]), Err(LineTooLong));
    }
}
