//! `quiver bench mcp`: `tools/call` of a no-op tool over Streamable HTTP on loopback, Quiver's
//! front (the whole pipeline: conversation handle, admission, consent already given, audit on
//! SQLite) against a Python MCP server with the same tool (the `mcp` SDK's FastMCP server,
//! `scripts/bench-mcp-server.py`), with the same load generator in the same run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use miette::{IntoDiagnostic, miette};
use quiver_host::{Host, HostOptions, State};
use quiver_mcp::front::Caller;
use quiver_mcp::{Front, McpConfig};
use quiver_policy::Principal;
use quiver_runtime::ApproverSet;
use quiver_runtime::executor::BuiltinExecutor;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Arguments of `quiver bench mcp`.
#[derive(Debug, clap::Args)]
pub struct McpBenchArgs {
    /// Calls per server (after 200 warm-up calls).
    #[arg(long, default_value_t = 4000)]
    requests: usize,
    /// Concurrent connections of the load generator.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// The Python with the `mcp` SDK (default: the test virtualenv's, `$QUIVER_TEST_VENV` or
    /// `.venv-test`).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// One server's figures.
#[derive(Debug, Serialize)]
struct Figures {
    server: String,
    calls_per_second: f64,
    p50_us: f64,
    p99_us: f64,
    errors: usize,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write_package(dir: &Path) -> std::io::Result<()> {
    let tool = dir.join("bench/tools/noop");
    std::fs::create_dir_all(&tool)?;
    std::fs::write(
        dir.join("bench/quiver.yaml"),
        "id: bench\ndescription: MCP benchmark\n",
    )?;
    std::fs::write(
        tool.join("tool.yaml"),
        "description: Does nothing.\ncategory: decision\napproval: never\nexpose: true\nalways_loaded: true\ninput: {type: object, properties: {n: {type: integer}}}\nrun: {command: [none]}\n",
    )
}

fn request_body(tool: &str, handle: Option<&str>) -> String {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "quiver-bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(handle) = handle {
        meta["io.quiver/conversation"] = Value::String(handle.to_owned());
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {"n": 1}, "_meta": meta}})
    .to_string()
}

/// A minimal HTTP/1.1 client on one keep-alive connection (Content-Length and chunked
/// bodies), so the load generator costs the same for both servers and needs no TLS stack.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    fn open(addr: &str) -> std::io::Result<Connection> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Connection {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends one POST and returns the status and body.
    fn post(&mut self, head: &str, body: &str) -> std::io::Result<(u16, Vec<u8>)> {
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

/// The load generator: `concurrency` threads with their own keep-alive connection, each
/// sending its share of stateless `tools/call` requests; every answer must be a result that is
/// not an error.
fn load(
    addr: &str,
    tool: &str,
    body: &str,
    requests: usize,
    concurrency: usize,
) -> (f64, Vec<u64>, usize) {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
    );
    let per_thread = requests.div_ceil(concurrency.max(1));
    let started = Instant::now();
    let results: Vec<(Vec<u64>, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..concurrency.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut latencies = Vec::with_capacity(per_thread);
                    let mut errors = 0;
                    let mut connection = Connection::open(addr).ok();
                    for _ in 0..per_thread {
                        let t = Instant::now();
                        let ok = connection
                            .as_mut()
                            .and_then(|c| c.post(&head, body).ok())
                            .is_some_and(|(status, bytes)| {
                                let text = String::from_utf8_lossy(&bytes);
                                status == 200
                                    && text.contains("\"result\"")
                                    && !text.contains("\"isError\":true")
                            });
                        if !ok {
                            errors += 1;
                            connection = Connection::open(addr).ok();
                        }
                        latencies.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                    }
                    (latencies, errors)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies: Vec<u64> = results
        .iter()
        .flat_map(|(l, _)| l.iter().copied())
        .collect();
    let errors = results.iter().map(|(_, e)| e).sum();
    latencies.sort_unstable();
    let calls = latencies.len() as f64;
    (calls / elapsed, latencies, errors)
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)] as f64
}

fn measure(name: &str, addr: &str, tool: &str, body: &str, args: &McpBenchArgs) -> Figures {
    let _ = load(addr, tool, body, 200, args.concurrency);
    let (rate, latencies, errors) = load(addr, tool, body, args.requests, args.concurrency);
    Figures {
        server: name.to_owned(),
        calls_per_second: rate,
        p50_us: percentile(&latencies, 0.50),
        p99_us: percentile(&latencies, 0.99),
        errors,
    }
}

struct PythonServer(Child);

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> miette::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .into_diagnostic()?
        .local_addr()
        .into_diagnostic()?
        .port())
}

fn start_python(python: &Path, port: u16) -> miette::Result<PythonServer> {
    let script = repo_root().join("scripts/bench-mcp-server.py");
    let child = Command::new(python)
        .arg(&script)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| miette!("cannot start `{}`: {e}", python.display()))?;
    let server = PythonServer(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(miette!(
        help = "install the Python MCP SDK with scripts/install-test-deps.sh, or pass --python",
        "the Python MCP server did not start on port {port}"
    ))
}

/// Runs `quiver bench mcp`.
pub fn run(args: McpBenchArgs) -> miette::Result<ExitCode> {
    // The virtualenv scripts/install-test-deps.sh fills: `$QUIVER_TEST_VENV`, else the repo's.
    let python = args.python.clone().unwrap_or_else(|| {
        std::env::var_os("QUIVER_TEST_VENV")
            .map_or_else(|| repo_root().join(".venv-test"), PathBuf::from)
            .join("bin/python")
    });
    let progress = crate::progress::Progress::spinner(format!(
        "bench mcp: {} requests to each server",
        args.requests
    ));
    let dir = tempfile::tempdir().into_diagnostic()?;
    write_package(dir.path()).into_diagnostic()?;
    let mut executor = BuiltinExecutor::new();
    executor.register("bench.noop", Arc::new(|_, _| Ok(json!({"ok": true}))));
    // The bench's own package and defaults, whatever the config file says.
    let host = Host::open_with_executor(
        quiver_host::Config::default(),
        HostOptions {
            roots: vec![dir.path().to_owned()],
            state: State::in_dir(dir.path(), Some(&dir.path().join("bench.db")))
                .map_err(|e| miette!("{e}"))?,
            search: None,
            approvers: ApproverSet::default(),
            launcher: crate::roots::launcher()?,
            reload: false,
        },
        Arc::new(executor),
    )
    .map_err(|e| miette!("{e}"))?;
    let runtime = host.runtime().clone();
    let front = Arc::new(Front::new(
        runtime.clone(),
        McpConfig {
            allow_anonymous: true,
            ..McpConfig::default()
        },
        vec![7; 32],
    ));
    // One conversation in which the user already allowed the package, as after the first call.
    let caller = Caller::local(Principal::anonymous());
    let (session, handle) = front
        .open_conversation(&caller)
        .map_err(|e| miette!("{e}"))?;
    runtime
        .grant_consent(&session, "bench", "bench")
        .map_err(|e| miette!("{e}"))?;

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .into_diagnostic()?;
    let listener = tokio
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .into_diagnostic()?;
    let quiver_addr = listener.local_addr().into_diagnostic()?.to_string();
    let shutdown = CancellationToken::new();
    let server = tokio.spawn(quiver_mcp::serve_http(front, listener, shutdown.clone()));

    let port = free_port()?;
    let python_server = start_python(&python, port)?;
    let python_addr = format!("127.0.0.1:{port}");

    let quiver = measure(
        "quiver serve",
        &quiver_addr,
        "bench__noop",
        &request_body("bench__noop", Some(&handle)),
        &args,
    );
    let fastmcp = measure(
        "python mcp 2.3.0 (FastMCP)",
        &python_addr,
        "noop",
        &request_body("noop", None),
        &args,
    );
    drop(python_server);
    shutdown.cancel();
    let _ = tokio.block_on(server);

    drop(progress);
    let ratio = json!({
        "throughput": quiver.calls_per_second / fastmcp.calls_per_second.max(f64::MIN_POSITIVE),
        "p50_latency": quiver.p50_us / fastmcp.p50_us.max(f64::MIN_POSITIVE),
    });
    if args.json {
        crate::out(&json!({"requests": args.requests, "concurrency": args.concurrency, "servers": [quiver, fastmcp], "quiver_over_python": ratio}).to_string());
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "tools/call of a no-op tool over Streamable HTTP (2026-07-28, stateless), loopback, {} calls, {} connections",
            args.requests, args.concurrency
        );
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>10} {:>10} {:>7}",
            "server", "calls/s", "p50 µs", "p99 µs", "errors"
        );
        for f in [&quiver, &fastmcp] {
            let _ = writeln!(
                out,
                "{:<28} {:>10.0} {:>10.0} {:>10.0} {:>7}",
                f.server, f.calls_per_second, f.p50_us, f.p99_us, f.errors
            );
        }
        let _ = writeln!(
            out,
            "quiver / python: {:.2}x throughput, {:.2}x p50 latency",
            ratio["throughput"].as_f64().unwrap_or(0.0),
            ratio["p50_latency"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(if quiver.errors + fastmcp.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
