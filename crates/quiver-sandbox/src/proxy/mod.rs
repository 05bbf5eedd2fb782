//! The runtime's network proxy: a tool with `network: [host, ...]` reaches the outside only
//! through it. It listens on a Unix socket (the launcher relays `127.0.0.1:<port>` inside the
//! tool's network namespace to it) and speaks HTTP `CONNECT` (for HTTPS) and plain HTTP
//! forwarding in absolute form.
//!
//! It is bounded: every proxy's connections are tasks on one small runtime shared by the
//! process (no thread per connection), capped per proxy ([`ProxyConfig::max_connections`]) and
//! in all ([`TOTAL_CONNECTIONS`]); a request head must arrive within
//! [`ProxyConfig::header_timeout`] and a connection idle for [`ProxyConfig::idle_timeout`] is
//! closed. A request is parsed strictly ([`head`]) and its destination is checked after
//! resolution ([`destination`]): a refused host gets `403` and a recorded denial, "network
//! access to HOST denied: not in the package's permissions".

pub mod destination;
pub mod head;
pub mod tls;

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Semaphore;

use destination::{Refusal, decide, own_listeners, reaches_own};
pub use destination::{denial_message, host_allowed, register_own_listener};
use head::{Body, Head, Refused, Request, head_end, parse_head};

/// Connections all proxies of this process serve at once; more are answered `503`.
pub const TOTAL_CONNECTIONS: usize = 512;
/// Denials kept between two [`Proxy::take_denials`].
const MAX_DENIALS: usize = 64;
const BUFFER: usize = 16 * 1024;

static TOTAL: Semaphore = Semaphore::const_new(TOTAL_CONNECTIONS);

/// Resolves a name and port to addresses (`getaddrinfo` by default; tests inject their own).
pub type Resolver = Arc<dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync>;

/// A proxy's bounds and resolver.
#[derive(Clone)]
pub struct ProxyConfig {
    /// Connections one proxy (one call, or one worker) serves at once; more are answered `503`.
    pub max_connections: usize,
    /// Time a client has to send its request head (and, in a tunnel, its first bytes).
    pub header_timeout: Duration,
    /// A connection with no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// Time to connect upstream.
    pub connect_timeout: Duration,
    /// How names are resolved.
    pub resolver: Resolver,
}

impl Default for ProxyConfig {
    /// 32 connections, 10 s for a head, 60 s idle, 10 s to connect, the system resolver.
    fn default() -> Self {
        Self {
            max_connections: 32,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            resolver: Arc::new(|host, port| Ok((host, port).to_socket_addrs()?.collect())),
        }
    }
}

/// The runtime all proxies' connections run on: one worker thread, a few for resolving names.
fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .max_blocking_threads(4)
                .thread_name("quiver-proxy")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(e.clone()))
}

/// A running proxy for one allowlist. Dropping it stops it, closes its connections and
/// removes its socket.
pub struct Proxy {
    socket: PathBuf,
    denials: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

struct Shared {
    allow: Vec<String>,
    config: ProxyConfig,
    denials: Arc<Mutex<Vec<String>>>,
}

impl Shared {
    fn deny(&self, host: &str) -> String {
        let message = denial_message(host);
        if let Ok(mut d) = self.denials.lock()
            && d.len() < MAX_DENIALS
        {
            d.push(message.clone());
        }
        message
    }
}

impl Proxy {
    /// Starts a proxy for `allow` with the default bounds, its socket in `dir` (a folder only
    /// the runtime can enter).
    pub fn start(dir: &Path, allow: Vec<String>) -> io::Result<Proxy> {
        Self::start_with(dir, allow, ProxyConfig::default())
    }

    /// Starts a proxy for `allow` with `config`.
    pub fn start_with(dir: &Path, allow: Vec<String>, config: ProxyConfig) -> io::Result<Proxy> {
        let socket = dir.join(format!(
            "proxy-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&socket);
        let listener = std::os::unix::net::UnixListener::bind(&socket)?;
        listener.set_nonblocking(true)?;
        let rt = runtime()?;
        let listener = {
            let _guard = rt.enter();
            tokio::net::UnixListener::from_std(listener)?
        };
        let denials = Arc::new(Mutex::new(Vec::new()));
        let per_proxy = Arc::new(Semaphore::new(config.max_connections));
        let shared = Arc::new(Shared {
            allow,
            config,
            denials: denials.clone(),
        });
        let task = rt.spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                while connections.try_join_next().is_some() {}
                let Ok((mut client, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let permits = per_proxy
                    .clone()
                    .try_acquire_owned()
                    .ok()
                    .zip(TOTAL.try_acquire().ok());
                let Some((mine, all)) = permits else {
                    tracing::warn!("network proxy: too many connections; one refused");
                    connections.spawn(async move {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(1),
                            refuse(
                                &mut client,
                                "503 Service Unavailable",
                                "too many connections",
                            ),
                        )
                        .await;
                    });
                    continue;
                };
                let shared = shared.clone();
                connections.spawn(async move {
                    serve(client, &shared).await;
                    drop((mine, all));
                });
            }
        });
        Ok(Proxy {
            socket,
            denials,
            task,
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
        // Aborting the accept task drops its set of connections, which aborts each one.
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn refuse(stream: &mut UnixStream, status: &str, message: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{message}",
        message.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads a request head within the header timeout: the head and the bytes read past it.
async fn read_head(
    client: &mut UnixStream,
    mut buf: Vec<u8>,
    timeout: Duration,
) -> Result<(Head, Vec<u8>), Option<Refused>> {
    let read = async {
        let mut chunk = [0u8; 2048];
        loop {
            if let Some(end) = head_end(&buf).map_err(Some)? {
                let head = parse_head(&buf[..end]).map_err(Some)?;
                return Ok((head, buf[end..].to_vec()));
            }
            match client.read(&mut chunk).await {
                Ok(0) | Err(_) => return Err(None),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(Some(Refused::Malformed(
            "the request head did not arrive in time",
        ))))
}

async fn answer(client: &mut UnixStream, shared: &Shared, refused: Refused) {
    match refused {
        Refused::Malformed(why) => refuse(client, "400 Bad Request", why).await,
        Refused::Forged(host) => {
            let message = shared.deny(&host);
            refuse(client, "403 Forbidden", &message).await;
        }
    }
}

async fn serve(mut client: UnixStream, shared: &Shared) {
    let config = &shared.config;
    let (head, rest) = match read_head(&mut client, Vec::new(), config.header_timeout).await {
        Ok(pair) => pair,
        Err(Some(refused)) => return answer(&mut client, shared, refused).await,
        Err(None) => return,
    };
    let request = match head.request() {
        Ok(request) => request,
        Err(refused) => return answer(&mut client, shared, refused).await,
    };
    let (host, port) = match &request {
        Request::Connect { host, port } | Request::Forward { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    let mut upstream = match connect(&host, port, shared).await {
        Ok(upstream) => upstream,
        Err(status) => {
            let message = match status {
                Some(status) => return refuse(&mut client, status.0, &status.1).await,
                None => shared.deny(&host),
            };
            return refuse(&mut client, "403 Forbidden", &message).await;
        }
    };
    match request {
        Request::Forward { path, body, .. } => {
            let out = forward_head(&head, &path, &host, port);
            if upstream.write_all(out.as_bytes()).await.is_ok() {
                relay(client, upstream, rest, limit(body), config.idle_timeout).await;
            }
        }
        Request::Connect { .. } => {
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            tunnel(client, upstream, rest, &host, port, shared).await;
        }
    }
}

/// A tunnel carries TLS whose ClientHello names the tunnel's host (or no host), then relayed as
/// is; anything else must be one plain request to the tunnel's host, checked and forwarded like
/// a proxied one.
async fn tunnel(
    mut client: UnixStream,
    mut upstream: TcpStream,
    mut first: Vec<u8>,
    host: &str,
    port: u16,
    shared: &Shared,
) {
    let config = &shared.config;
    if first.is_empty() {
        let mut chunk = [0u8; 2048];
        match tokio::time::timeout(config.header_timeout, client.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => first.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    }
    // A TLS handshake record: its ClientHello may name no other server than the tunnel's.
    if first[0] == 0x16 {
        let read = async {
            let mut chunk = [0u8; 2048];
            loop {
                match tls::client_hello(&first) {
                    tls::Hello::Incomplete => {}
                    hello => return hello,
                }
                match client.read(&mut chunk).await {
                    Ok(n) if n > 0 => first.extend_from_slice(&chunk[..n]),
                    _ => return tls::Hello::Malformed,
                }
            }
        };
        let hello = tokio::time::timeout(config.header_timeout, read)
            .await
            .unwrap_or(tls::Hello::Malformed);
        match hello {
            tls::Hello::Server(Some(name))
                if !name
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(host.trim_end_matches('.')) =>
            {
                shared.deny(&name);
            }
            tls::Hello::Server(_) => {
                relay(client, upstream, first, None, config.idle_timeout).await;
            }
            _ => tracing::info!(
                host,
                "network proxy: a tunnel did not start with a ClientHello"
            ),
        }
        return;
    }
    let (head, rest) = match read_head(&mut client, first, config.header_timeout).await {
        Ok(pair) => pair,
        Err(Some(refused)) => return answer(&mut client, shared, refused).await,
        Err(None) => return,
    };
    let body = match head.tunneled(host, port) {
        Ok(body) => body,
        Err(refused) => return answer(&mut client, shared, refused).await,
    };
    let out = forward_head(&head, &head.target, host, port);
    if upstream.write_all(out.as_bytes()).await.is_ok() {
        relay(client, upstream, rest, limit(body), config.idle_timeout).await;
    }
}

/// How many bytes of the client's go upstream after the head (`None`: until it closes).
fn limit(body: Body) -> Option<u64> {
    match body {
        Body::Empty => Some(0),
        Body::Length(n) => Some(n),
        Body::Chunked => None,
    }
}

/// The head sent upstream: origin form, the client's headers without hop-by-hop ones, one
/// `Host`, `Connection: close`.
fn forward_head(head: &Head, path: &str, host: &str, port: u16) -> String {
    let mut out = format!("{} {} {}\r\n", head.method, path, head.version);
    match head.values("host").next() {
        Some(value) => out.push_str(&format!("Host: {value}\r\n")),
        None if host.contains(':') => out.push_str(&format!("Host: [{host}]:{port}\r\n")),
        None => out.push_str(&format!("Host: {host}:{port}\r\n")),
    }
    for (k, v) in &head.headers {
        let lower = k.to_ascii_lowercase();
        if lower.starts_with("proxy-")
            || ["connection", "keep-alive", "host", "upgrade", "te"].contains(&lower.as_str())
        {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// Whether `ip` is an address of this machine (binding to it succeeds).
fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind((ip, 0)).is_ok()
}

/// Resolves `host`, decides, and connects. `Err(None)`: refused by the allowlist (a denial);
/// `Err(Some((status, message)))`: another failure to report.
async fn connect(
    host: &str,
    port: u16,
    shared: &Shared,
) -> Result<TcpStream, Option<(&'static str, String)>> {
    let config = &shared.config;
    if !host_allowed(host, &shared.allow) {
        return Err(None);
    }
    let (name, resolver, allow) = (
        host.to_owned(),
        config.resolver.clone(),
        shared.allow.clone(),
    );
    let decided = tokio::task::spawn_blocking(move || {
        let resolved = resolver(&name, port).unwrap_or_default();
        let own = own_listeners();
        let verdict = decide(&name, &allow, &resolved, |a| reaches_own(a, &own, is_local));
        verdict.map(|()| resolved)
    });
    let unreachable = || Some(("502 Bad Gateway", format!("cannot reach {host}:{port}")));
    let addrs = match tokio::time::timeout(config.connect_timeout, decided).await {
        Ok(Ok(Ok(addrs))) => addrs,
        Ok(Ok(Err(Refusal::Unresolved))) | Ok(Err(_)) | Err(_) => return Err(unreachable()),
        Ok(Ok(Err(refusal))) => {
            tracing::info!(host, ?refusal, "network proxy: destination refused");
            return Err(None);
        }
    };
    for addr in addrs {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr)).await
        {
            return Ok(stream);
        }
    }
    Err(unreachable())
}

/// Copies both ways until the upstream closes or nothing moves for `idle`; at most `limit`
/// bytes of the client's (after `first`) go upstream.
async fn relay(
    client: UnixStream,
    upstream: TcpStream,
    first: Vec<u8>,
    limit: Option<u64>,
    idle: Duration,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let mut left = limit.unwrap_or(u64::MAX);
    let start = first.len().min(usize::try_from(left).unwrap_or(usize::MAX));
    left -= start as u64;
    if upstream_write.write_all(&first[..start]).await.is_err() {
        return;
    }
    let (mut up, mut down) = (vec![0u8; BUFFER], vec![0u8; BUFFER]);
    let mut client_open = left > 0;
    loop {
        let want = up.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        tokio::select! {
            read = client_read.read(&mut up[..want]), if client_open => match read {
                Ok(n) if n > 0 => {
                    left -= n as u64;
                    client_open = left > 0;
                    let wrote = tokio::time::timeout(idle, upstream_write.write_all(&up[..n])).await;
                    if !matches!(wrote, Ok(Ok(()))) {
                        return;
                    }
                }
                _ => {
                    client_open = false;
                    let _ = upstream_write.shutdown().await;
                }
            },
            read = upstream_read.read(&mut down) => match read {
                Ok(n) if n > 0 => {
                    let wrote = tokio::time::timeout(idle, client_write.write_all(&down[..n])).await;
                    if !matches!(wrote, Ok(Ok(()))) {
                        return;
                    }
                }
                _ => {
                    let _ = client_write.shutdown().await;
                    return;
                }
            },
            () = tokio::time::sleep(idle) => return,
        }
    }
}
