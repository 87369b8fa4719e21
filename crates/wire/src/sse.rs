//! Server-sent events: cut at event boundaries on the way in, written
//! one way on the way out.
//!
//! The relay forwards whole events only: bytes of an event still arriving
//! are held here until its blank line comes, however the upstream split
//! them. So whatever weir adds to a stream (a keep-alive, an in-band
//! error) always lands between two events, never inside one — and an event
//! a cut upstream left unfinished is never passed on half-written. An event
//! is small (one delta), so holding its bytes costs nothing measurable.

use bytes::{Bytes, BytesMut};

/// Splits a byte stream into complete SSE events.
#[derive(Debug, Default)]
pub struct Framer {
    buf: BytesMut,
    /// Where the search for the next boundary resumes.
    scanned: usize,
}

impl Framer {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete event, blank line included.
    pub fn next_event(&mut self) -> Option<Bytes> {
        match boundary(&self.buf[..], self.scanned) {
            Some(end) => {
                self.scanned = 0;
                Some(self.buf.split_to(end).freeze())
            }
            None => {
                // Searched to the end: resume just before it next time.
                self.scanned = self.buf.len().saturating_sub(2);
                None
            }
        }
    }

    /// Bytes of an event not yet complete.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// The end of the first event in `buf`: just past a blank line (`\n\n` or
/// `\n\r\n`, covering LF and CRLF line endings), searching from `from`.
fn boundary(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            match buf.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// One event as every API weir writes it: `event: <name>` and one line of
/// JSON data.
pub fn event(name: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// One event with no name (Chat Completions chunks).
pub fn data(data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// The `event:` name and the joined `data:` of one complete event.
pub fn fields(event: &[u8]) -> (Option<&str>, String) {
    let text = std::str::from_utf8(event).unwrap_or("");
    let mut name = None;
    let mut data = String::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(v) = line.strip_prefix("event:") {
            name = Some(v.trim());
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    (name, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_whole_however_the_bytes_are_split() {
        let stream = b"event: a\ndata: 1\n\nevent: b\r\ndata: 2\r\n\r\n: comment\n\n";
        for split in 1..stream.len() {
            let mut f = Framer::default();
            let mut events = Vec::new();
            for part in [&stream[..split], &stream[split..]] {
                f.push(part);
                while let Some(e) = f.next_event() {
                    events.push(e);
                }
            }
            assert_eq!(events.len(), 3, "split at {split}");
            assert_eq!(&events[0][..], b"event: a\ndata: 1\n\n");
            assert_eq!(&events[1][..], b"event: b\r\ndata: 2\r\n\r\n");
            assert_eq!(f.pending(), 0);
        }
    }

    #[test]
    fn fields_are_read() {
        let (name, data) = fields(b"event: message_start\ndata: {\"a\":1}\n\n");
        assert_eq!(name, Some("message_start"));
        assert_eq!(data, "{\"a\":1}");
        let (name, data) = fields(b": keepalive\n\n");
        assert_eq!((name, data.as_str()), (None, ""));
    }
}
