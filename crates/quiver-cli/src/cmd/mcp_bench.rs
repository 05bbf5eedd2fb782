//! `quiver bench mcp`: `tools/call` of a no-op tool over Streamable HTTP on loopback, Quiver's
//! front (the whole pipeline: conversation handle, admission, consent already given, audit on
//! SQLite) against a Python MCP server with the same tool (the `mcp` SDK's FastMCP server,
//! `scripts/bench-mcp-server.py`), with the same load generator in the same run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use miette::{IntoDiagnostic, miette};
use quiver_host::{Host, HostOptions, State};
use quiver_mcp::front::Caller;
use quiver_mcp::{Front, McpConfig};
use quiver_policy::Principal;
use quiver_runtime::ApproverSet;
use quiver_runtime::executor::BuiltinExecutor;
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::mcp_load::{Call, load};

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

/// The no-op call, in `handle`'s conversation when given.
fn noop_call(tool: &str, handle: Option<&str>) -> Call {
    Call {
        tool: tool.to_owned(),
        arguments: json!({"n": 1}),
        handle: handle.map(str::to_owned),
        headers: Vec::new(),
    }
}

fn measure(name: &str, addr: &str, call: &Call, args: &McpBenchArgs) -> Figures {
    let addrs = [addr.to_owned()];
    let _ = load(&addrs, call, 200, args.concurrency);
    let measured = load(&addrs, call, args.requests, args.concurrency);
    Figures {
        server: name.to_owned(),
        calls_per_second: measured.rate,
        p50_us: measured.percentile(0.50),
        p99_us: measured.percentile(0.99),
        errors: measured.errors,
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
        &noop_call("bench__noop", Some(&handle)),
        &args,
    );
    let fastmcp = measure(
        "python mcp 2.3.0 (FastMCP)",
        &python_addr,
        &noop_call("noop", None),
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
