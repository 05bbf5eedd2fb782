//! The runtime's network proxy: a tool with `network: [host, ...]` reaches the outside only
//! through it. It listens on a Unix socket (the launcher relays `127.0.0.1:<port>` inside the
//! tool's network namespace to it) and speaks HTTP `CONNECT` (for HTTPS) and plain HTTP
//! forwarding in absolute form. A host outside the allowlist, or a plain request whose `Host`
//! header names another host than its URL, gets `403` and a recorded denial:
//! "network access to HOST denied: not in the package's permissions".

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_HEAD: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The message a refused connection is reported with, to the model and to the audit.
pub fn denial_message(host: &str) -> String {
    format!("network access to {host} denied: not in the package's permissions")
}

/// Whether `host` matches one of `allow` (`api.example.com`, `*.example.com`, or `*`).
pub fn host_allowed(host: &str, allow: &[String]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allow.iter().any(|pattern| {
        let pattern = pattern.to_ascii_lowercase();
        if pattern == "*" || pattern == host {
            return true;
        }
        pattern.strip_prefix("*.").is_some_and(|suffix| {
            host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}"))
        })
    })
}

/// A running proxy for one allowlist. Dropping it stops it and removes its socket.
pub struct Proxy {
    socket: PathBuf,
    denials: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Proxy {
    /// Starts a proxy for `allow` whose socket is created in `dir` (a folder only the runtime
    /// can enter).
    pub fn start(dir: &Path, allow: Vec<String>) -> io::Result<Proxy> {
        let socket = dir.join(format!(
            "proxy-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        let denials = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, s) = (denials.clone(), stop.clone());
        let allow = Arc::new(allow);
        std::thread::Builder::new()
            .name("quiver-proxy".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (allow, denials) = (allow.clone(), d.clone());
                    std::thread::spawn(move || serve(stream, &allow, &denials));
                }
            })?;
        Ok(Proxy {
            socket,
            denials,
            stop,
        })
    }

    /// The proxy's Unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The denials recorded since the last call, oldest first.
    pub fn take_denials(&self) -> Vec<String> {
        self.denials
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees `stop`.
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The head of a request: the request line, the headers, and bytes read past them.
struct Head {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
    rest: Vec<u8>,
}

fn read_head(stream: &mut UnixStream) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let rest = buf[end + 4..].to_vec();
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let (method, target, version) = (
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or_default().to_owned(),
        first.next().unwrap_or("HTTP/1.1").to_owned(),
    );
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Ok(Head {
        method,
        target,
        version,
        headers,
        rest,
    })
}

/// Splits `host[:port]` (`[v6]:port` too) with `default` as the port.
fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, tail) = v6.split_once(']')?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

fn refuse(stream: &mut UnixStream, status: &str, message: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{message}",
        message.len()
    );
}

fn serve(mut client: UnixStream, allow: &[String], denials: &Mutex<Vec<String>>) {
    let Ok(head) = read_head(&mut client) else {
        return;
    };
    let deny = |client: &mut UnixStream, host: &str| {
        let message = denial_message(host);
        if let Ok(mut d) = denials.lock() {
            d.push(message.clone());
        }
        refuse(client, "403 Forbidden", &message);
    };
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let Some((host, port)) = split_authority(&head.target, 443) else {
            refuse(&mut client, "400 Bad Request", "bad CONNECT target");
            return;
        };
        if !host_allowed(&host, allow) {
            deny(&mut client, &host);
            return;
        }
        let Some(upstream) = connect(&host, port) else {
            refuse(
                &mut client,
                "502 Bad Gateway",
                &format!("cannot reach {host}:{port}"),
            );
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
        {
            return;
        }
        relay(client, upstream, &head.rest);
        return;
    }
    // Plain HTTP: the target must be absolute (`http://host[:port]/path`).
    let Some(after) = head.target.strip_prefix("http://") else {
        refuse(
            &mut client,
            "400 Bad Request",
            "only absolute http:// requests and CONNECT are proxied",
        );
        return;
    };
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let Some((host, port)) = split_authority(authority, 80) else {
        refuse(&mut client, "400 Bad Request", "bad request target");
        return;
    };
    if !host_allowed(&host, allow) {
        deny(&mut client, &host);
        return;
    }
    let host_header = head
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone());
    if let Some(value) = &host_header {
        let named = split_authority(value, port)
            .map(|(h, _)| h)
            .unwrap_or_default();
        if !named.eq_ignore_ascii_case(&host) {
            deny(&mut client, &named);
            return;
        }
    }
    let Some(mut upstream) = connect(&host, port) else {
        refuse(
            &mut client,
            "502 Bad Gateway",
            &format!("cannot reach {host}:{port}"),
        );
        return;
    };
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    if host_header.is_none() {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in &head.headers {
        let lower = k.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(out.as_bytes()).is_err() {
        return;
    }
    relay(client, upstream, &head.rest);
}

fn connect(host: &str, port: u16) -> Option<TcpStream> {
    let addrs = (host, port).to_socket_addrs().ok()?;
    addrs
        .into_iter()
        .find_map(|addr| TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).ok())
}

fn relay(client: UnixStream, mut upstream: TcpStream, already: &[u8]) {
    if !already.is_empty() && upstream.write_all(already).is_err() {
        return;
    }
    let (Ok(mut client_read), Ok(mut upstream_write)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut client_read, &mut upstream_write);
        let _ = upstream_write.shutdown(Shutdown::Write);
    });
    let mut client_write = client;
    let _ = io::copy(&mut upstream, &mut client_write);
    let _ = client_write.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist() {
        let allow = vec!["example.com".to_owned(), "*.wikipedia.org".to_owned()];
        let cases = [
            ("example.com", true),
            ("EXAMPLE.com.", true),
            ("www.example.com", false),
            ("zh.wikipedia.org", true),
            ("wikipedia.org", false),
            ("evilwikipedia.org", false),
            ("127.0.0.1", false),
        ];
        for (host, want) in cases {
            assert_eq!(host_allowed(host, &allow), want, "{host}");
        }
        assert!(host_allowed("anything", &["*".to_owned()]));
    }

    #[test]
    fn authorities() {
        let cases = [
            ("example.com", Some(("example.com", 443))),
            ("example.com:8443", Some(("example.com", 8443))),
            ("[::1]:80", Some(("::1", 80))),
            ("[::1]", Some(("::1", 443))),
            ("host:notaport", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                split_authority(text, 443),
                want.map(|(h, p)| (h.to_owned(), p)),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_and_records_a_host_outside_the_allowlist() {
        let dir = tempfile::tempdir().unwrap();
        let proxy = Proxy::start(dir.path(), vec!["localhost".into()]).unwrap();
        let mut client = UnixStream::connect(proxy.socket()).unwrap();
        client
            .write_all(b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(
            answer.ends_with(&denial_message("evil.example")),
            "{answer}"
        );
        assert_eq!(proxy.take_denials(), [denial_message("evil.example")]);
        assert!(proxy.take_denials().is_empty());
    }
}
