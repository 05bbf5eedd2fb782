//! The MCP load generator of `quiver bench mcp` and `quiver bench calls`: threads with a
//! keep-alive HTTP/1.1 connection each (no TLS stack, no async runtime: as light as a client
//! can be, since it shares the machine with the servers it measures), sending stateless
//! `tools/call` requests (MCP 2026-07-28) and timing each.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A minimal HTTP/1.1 client on one keep-alive connection (Content-Length and chunked
/// bodies), so the load generator costs the same for every server.
pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    /// Connects to `addr` (`host:port`).
    pub fn open(addr: &str) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Connection {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends one POST (`head`: the request line and headers, each ending in CRLF, without
    /// `Content-Length`) and returns the status and body.
    pub fn post(&mut self, head: &str, body: &str) -> std::io::Result<(u16, Vec<u8>)> {
        self.writer
            .write_all(format!("{head}Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let header = line.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if let Some(v) = header.strip_prefix("content-length:") {
                length = v.trim().parse::<usize>().ok();
            } else if header.starts_with("transfer-encoding:") && header.contains("chunked") {
                chunked = true;
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        Ok((status, body))
    }
}

/// One stateless `tools/call` to send again and again: the tool, its arguments, and headers
/// to add (an `Authorization`, say).
pub struct Call {
    /// The tool's wire name.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
    /// The conversation handle (`io.quiver/conversation`), if any.
    pub handle: Option<String>,
    /// Further request headers, `(name, value)`.
    pub headers: Vec<(String, String)>,
}

impl Call {
    /// The request's body.
    fn body(&self) -> String {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "quiver-bench", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(handle) = &self.handle {
            meta["io.quiver/conversation"] = Value::String(handle.clone());
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": self.tool, "arguments": self.arguments, "_meta": meta}})
        .to_string()
    }

    /// The request line and headers for the server at `addr`.
    fn head(&self, addr: &str) -> String {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {}\r\n",
            self.tool
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head
    }
}

/// What one load measured.
pub struct Load {
    /// Calls per second over the whole load.
    pub rate: f64,
    /// Each call's latency in µs, sorted.
    pub latencies: Vec<u64>,
    /// Calls that failed (no result, an error result, or a broken connection).
    pub errors: usize,
    /// What the first failed call got (its status and the start of its body, or the I/O
    /// error), to say why.
    pub first_error: Option<String>,
}

impl Load {
    /// The latency (µs) at quantile `p` (0 to 1).
    pub fn percentile(&self, p: f64) -> f64 {
        let Some(last) = self.latencies.len().checked_sub(1) else {
            return 0.0;
        };
        let index = ((last as f64 * p).round() as usize).min(last);
        self.latencies[index] as f64
    }
}

/// Sends `requests` calls from `concurrency` threads, thread `i` on a keep-alive connection
/// to `addrs[i % addrs.len()]`; every answer must be a result that is not an error.
pub fn load(addrs: &[String], call: &Call, requests: usize, concurrency: usize) -> Load {
    let concurrency = concurrency.max(1);
    let body = call.body();
    let per_thread = requests.div_ceil(concurrency);
    let started = Instant::now();
    let results: Vec<(Vec<u64>, usize, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..concurrency)
            .filter_map(|thread| addrs.get(thread % addrs.len().max(1)))
            .map(|addr| {
                let (head, body) = (call.head(addr), &body);
                scope.spawn(move || {
                    let mut latencies = Vec::with_capacity(per_thread);
                    let (mut errors, mut first) = (0, None);
                    let mut connection = Connection::open(addr);
                    for _ in 0..per_thread {
                        let t = Instant::now();
                        let failed = match connection.as_mut().map(|c| c.post(&head, body)) {
                            Ok(Ok((status, bytes))) => failure(status, &bytes),
                            Ok(Err(e)) => Some(e.to_string()),
                            Err(e) => Some(e.to_string()),
                        };
                        if let Some(failed) = failed {
                            errors += 1;
                            first.get_or_insert(failed);
                            connection = Connection::open(addr);
                        }
                        latencies.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                    }
                    (latencies, errors, first)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies: Vec<u64> = results
        .iter()
        .flat_map(|(l, _, _)| l.iter().copied())
        .collect();
    latencies.sort_unstable();
    Load {
        rate: latencies.len() as f64 / elapsed,
        errors: results.iter().map(|(_, e, _)| e).sum(),
        first_error: results.into_iter().find_map(|(_, _, first)| first),
        latencies,
    }
}

/// Why an answer is not a successful call: `None` for a 200 carrying a result that is not an
/// error, else its status and the start of its body.
fn failure(status: u16, body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let ok = status == 200 && text.contains("\"result\"") && !text.contains("\"isError\":true");
    (!ok).then(|| {
        format!(
            "HTTP {status}: {}",
            text.chars().take(300).collect::<String>()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::Load;

    #[test]
    fn percentiles_of_sorted_latencies() {
        let load = |latencies: Vec<u64>| Load {
            rate: 0.0,
            latencies,
            errors: 0,
            first_error: None,
        };
        // (latencies, quantile, value)
        let cases: [(Vec<u64>, f64, f64); 5] = [
            (vec![], 0.5, 0.0),
            (vec![7], 0.99, 7.0),
            (vec![1, 2, 3], 0.5, 2.0),
            ((1..=100).collect(), 0.99, 99.0),
            ((1..=100).collect(), 1.0, 100.0),
        ];
        for (latencies, p, value) in cases {
            assert_eq!(
                load(latencies.clone()).percentile(p),
                value,
                "{latencies:?} {p}"
            );
        }
    }

    #[test]
    fn only_a_result_that_is_no_error_is_a_success() {
        // (status, body, a success)
        let cases = [
            (
                200,
                r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#,
                true,
            ),
            (
                200,
                r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#,
                false,
            ),
            (
                200,
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}"#,
                false,
            ),
            (401, r#"{"result":1}"#, false),
        ];
        for (status, body, success) in cases {
            let failed = super::failure(status, body.as_bytes());
            assert_eq!(failed.is_none(), success, "{status} {body}");
            if let Some(why) = failed {
                assert!(why.starts_with(&format!("HTTP {status}: ")), "{why}");
            }
        }
    }
}
