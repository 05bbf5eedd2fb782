//! Server-sent events read from a byte stream: `event:` and `data:` lines up to a blank line.

use std::io::BufRead;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its `event:` name (empty when none was given).
    pub name: String,
    /// Its `data:` lines, joined with newlines.
    pub data: String,
}

/// Reads events from `reader` until it ends.
pub struct Events<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> Events<R> {
    /// Events from `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }
}

impl<R: BufRead> Iterator for Events<R> {
    type Item = std::io::Result<Event>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut name = String::new();
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            match self.reader.read_until(b'\n', &mut self.line) {
                Err(e) => return Some(Err(e)),
                Ok(0) => {
                    // The stream ended: a last event without its blank line still counts.
                    return data.map(|data| Ok(Event { name, data }));
                }
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&self.line);
            let line = text.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(data) = data.take() {
                    return Some(Ok(Event { name, data }));
                }
                name.clear();
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => value.clone_into(&mut name),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_in_every_spelling() {
        let text = ": keep-alive\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\ndata: x\ndata: y\n\n\n\ndata: [DONE]";
        let events: Vec<Event> = Events::new(text.as_bytes()).map(Result::unwrap).collect();
        let want = [
            ("message_start", "{\"a\":1}"),
            ("", "{\"b\":2}"),
            ("", "x\ny"),
            ("", "[DONE]"),
        ];
        assert_eq!(events.len(), want.len(), "{events:?}");
        for (e, (n, d)) in events.iter().zip(want) {
            assert_eq!((e.name.as_str(), e.data.as_str()), (n, d));
        }
    }
}
