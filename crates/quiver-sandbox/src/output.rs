//! Reading what a tool prints with fixed bounds, so the runtime's memory never grows with it:
//! stderr is read in fixed 32 KiB chunks, each line logged up to [`STDERR_LINE`] bytes (the rest cut
//! with a note), at most [`STDERR_LOGGED`] bytes logged a minute, and only its last
//! [`STDERR_TAIL`] bytes kept; an MCP server's stdout is cut off at a line longer than the
//! stdout limit ([`LineCap`]).

use std::io::{BufRead, ErrorKind, Read};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

/// Bytes of one stderr line that are logged; the rest of the line is cut with a note.
pub const STDERR_LINE: usize = 4096;
/// Bytes of stderr logged per process and minute; past them lines are counted, not logged.
pub const STDERR_LOGGED: usize = 1 << 20;
/// Bytes of the end of stderr kept for error messages.
pub const STDERR_TAIL: usize = 4096;
const CHUNK: usize = 32 * 1024;
const WINDOW: Duration = Duration::from_secs(60);
const PUBLISH_EVERY: usize = 64 * 1024;

/// Logs the lines of one process's stderr (target `quiver_sandbox::tool`) and keeps its end
/// in `tail`, until it closes.
pub(crate) fn drain_stderr(mut stderr: impl Read, package: &str, tail: &Mutex<String>) {
    let mut chunk = [0u8; CHUNK];
    let mut log = LineLog::new(package);
    let mut recent: Vec<u8> = Vec::with_capacity(2 * STDERR_TAIL);
    let mut unpublished = 0;
    loop {
        let n = match stderr.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        log.feed(&chunk[..n]);
        recent.extend_from_slice(&chunk[..n]);
        if recent.len() > 2 * STDERR_TAIL {
            recent.drain(..recent.len() - STDERR_TAIL);
        }
        unpublished += n;
        // Under a flood the tail is refreshed every 64 KiB; when the tool pauses, at once.
        if unpublished >= PUBLISH_EVERY || n < CHUNK {
            publish(&recent, tail);
            unpublished = 0;
        }
    }
    log.finish();
    publish(&recent, tail);
}

fn publish(recent: &[u8], tail: &Mutex<String>) {
    let end = &recent[recent.len().saturating_sub(STDERR_TAIL)..];
    let text = String::from_utf8_lossy(end);
    if let Ok(mut tail) = tail.lock() {
        // A character cut at the start shows as U+FFFD: drop it.
        tail.clear();
        tail.push_str(text.trim_start_matches('\u{FFFD}'));
    }
}

/// Splits a byte stream into lines of at most [`STDERR_LINE`] bytes and logs them within the
/// per-minute budget.
struct LineLog<'a> {
    package: &'a str,
    line: Vec<u8>,
    cut: u64,
    window: Instant,
    logged: usize,
    dropped: u64,
}

impl<'a> LineLog<'a> {
    fn new(package: &'a str) -> Self {
        Self {
            package,
            line: Vec::with_capacity(STDERR_LINE),
            cut: 0,
            window: Instant::now(),
            logged: 0,
            dropped: 0,
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let start = bytes;
            // `skip_until` finds the newline with the standard library's (optimized) memchr.
            let n = BufRead::skip_until(&mut bytes, b'\n').unwrap_or(start.len());
            let piece = &start[..n];
            let ends = piece.ends_with(b"\n");
            let body = if ends {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            let room = STDERR_LINE - self.line.len();
            let kept = body.len().min(room);
            self.line.extend_from_slice(&body[..kept]);
            self.cut += (body.len() - kept) as u64;
            if ends {
                self.emit();
            }
        }
    }

    fn finish(&mut self) {
        if !self.line.is_empty() || self.cut > 0 {
            self.emit();
        }
        if self.dropped > 0 {
            tracing::warn!(target: "quiver_sandbox::tool", package = %self.package, "{} more lines of stderr were not logged", self.dropped);
        }
    }

    fn emit(&mut self) {
        let cut = std::mem::take(&mut self.cut);
        if self.window.elapsed() >= WINDOW {
            if self.dropped > 0 {
                tracing::warn!(target: "quiver_sandbox::tool", package = %self.package, "{} lines of stderr were not logged", self.dropped);
            }
            (self.window, self.logged, self.dropped) = (Instant::now(), 0, 0);
        }
        // A line costs its bytes and one for the line itself, so empty lines count too.
        let cost = self.line.len() + 1;
        if self.logged + cost > STDERR_LOGGED {
            if self.dropped == 0 {
                tracing::warn!(target: "quiver_sandbox::tool", package = %self.package, "the tool wrote more than {STDERR_LOGGED} bytes to stderr within a minute; further lines are counted, not logged");
            }
            self.dropped += 1;
        } else {
            self.logged += cost;
            let text = String::from_utf8_lossy(&self.line);
            let text = text.trim_end();
            if cut > 0 {
                tracing::info!(target: "quiver_sandbox::tool", package = %self.package, "{text} [line cut: {cut} more bytes]");
            } else {
                tracing::info!(target: "quiver_sandbox::tool", package = %self.package, "{text}");
            }
        }
        self.line.clear();
    }
}

/// An async reader that fails once a line runs past `max` bytes, so a line-based decoder
/// reading through it (rmcp's) never buffers more.
pub struct LineCap<R> {
    inner: R,
    max: usize,
    run: usize,
}

impl<R> LineCap<R> {
    /// `inner`, with lines of at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        Self { inner, max, run: 0 }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            for b in &buf.filled()[before..] {
                this.run = if *b == b'\n' { 0 } else { this.run + 1 };
                if this.run > this.max {
                    buf.set_filled(before);
                    return Poll::Ready(Err(std::io::Error::new(
                        ErrorKind::InvalidData,
                        format!("the server wrote a line longer than {} bytes", this.max),
                    )));
                }
            }
        }
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_end_and_bounded() {
        let cases: [(Vec<u8>, &str); 3] = [
            (b"one\ntwo\n".to_vec(), "one\ntwo\n"),
            ([vec![b'x'; 100_000], b"\nEND".to_vec()].concat(), "\nEND"),
            ("é".repeat(5000).into_bytes(), ""),
        ];
        for (input, end) in cases {
            let tail = Mutex::new(String::new());
            drain_stderr(&input[..], "demo", &tail);
            let tail = tail.into_inner().unwrap();
            assert!(tail.len() <= STDERR_TAIL, "{}", tail.len());
            assert!(tail.ends_with(end), "{tail:?}");
            assert!(!tail.starts_with('\u{FFFD}'));
        }
    }

    #[test]
    fn long_lines_are_cut() {
        let mut log = LineLog::new("demo");
        log.feed(&vec![b'a'; STDERR_LINE + 10]);
        assert_eq!((log.line.len(), log.cut), (STDERR_LINE, 10));
        log.feed(b"aa\nb");
        assert_eq!((log.line.as_slice(), log.cut), (&b"b"[..], 0));
        assert_eq!(log.logged, STDERR_LINE + 1);
    }

    #[test]
    fn past_the_budget_lines_are_counted_not_logged() {
        let mut log = LineLog::new("demo");
        log.feed(&b"xxx\n".repeat(STDERR_LOGGED / 2));
        assert!(log.logged <= STDERR_LOGGED, "{}", log.logged);
        assert_eq!(log.dropped, (STDERR_LOGGED / 2 - STDERR_LOGGED / 4) as u64);
    }

    #[tokio::test]
    async fn a_line_past_the_cap_fails_the_reader() {
        use tokio::io::AsyncReadExt;
        let cases: [(&[u8], bool); 3] = [
            (b"12345\n12345\n", true),
            (b"123456\n", false),
            (b"1234\n123456", false),
        ];
        for (input, ok) in cases {
            let mut out = Vec::new();
            let read = LineCap::new(input, 5).read_to_end(&mut out).await;
            assert_eq!(read.is_ok(), ok, "{input:?}");
        }
    }
}
