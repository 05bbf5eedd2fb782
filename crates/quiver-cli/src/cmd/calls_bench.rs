//! `quiver bench calls`: stateless `tools/call` requests over Streamable HTTP to running MCP
//! servers (one `quiver serve --http`, or several instances on one database, the connections
//! spread over them), with the light load generator of `quiver bench mcp`; calls per second,
//! p50 and p99 latency, and the machine's load average over the run.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use miette::{IntoDiagnostic, miette};
use serde_json::{Value, json};

use super::mcp_load::{Call, load};

/// Arguments of `quiver bench calls`.
#[derive(Debug, clap::Args)]
pub struct CallsBenchArgs {
    /// A server's MCP endpoint (`http://127.0.0.1:8931/mcp`); repeat it to spread the
    /// connections over several instances (connection `i` goes to URL `i mod n`).
    #[arg(long = "url", required = true)]
    urls: Vec<String>,
    /// The tool called.
    #[arg(long)]
    tool: String,
    /// Its arguments, as JSON.
    #[arg(long, default_value = "{}")]
    arguments: String,
    /// The conversation handle the calls carry (`io.quiver/conversation`).
    #[arg(long)]
    conversation: Option<String>,
    /// A file holding the bearer token (`$QUIVER_HOME/mcp-token`).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Calls measured (after `--warmup` calls).
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Calls sent first and not measured.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

/// `host:port` of an `http://host:port/...` URL.
fn address(url: &str) -> miette::Result<String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        miette!("`{url}`: only plain http:// URLs are loaded (the bench has no TLS)")
    })?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(miette!("`{url}` names no host"));
    }
    Ok(if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:80")
    })
}

/// The 1-minute load average, where the system tells it.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Runs `quiver bench calls`.
pub fn run(args: CallsBenchArgs) -> miette::Result<ExitCode> {
    let addrs = args
        .urls
        .iter()
        .map(|u| address(u))
        .collect::<miette::Result<Vec<_>>>()?;
    let arguments: Value = serde_json::from_str(&args.arguments)
        .map_err(|e| miette!("--arguments is not JSON: {e}"))?;
    let mut headers = Vec::new();
    if let Some(file) = &args.token_file {
        let token = std::fs::read_to_string(file)
            .map_err(|e| miette!("cannot read the token in `{}`: {e}", file.display()))?;
        headers.push((
            "Authorization".to_owned(),
            format!("Bearer {}", token.trim()),
        ));
    }
    let call = Call {
        tool: args.tool.clone(),
        arguments,
        handle: args.conversation.clone(),
        headers,
    };
    if args.warmup > 0 {
        let _ = load(&addrs, &call, args.warmup, args.concurrency);
    }
    let before = load_average();
    let measured = load(&addrs, &call, args.requests, args.concurrency);
    let after = load_average();
    let figures = json!({
        "tool": args.tool,
        "instances": addrs.len(),
        "concurrency": args.concurrency,
        "calls": measured.latencies.len(),
        "calls_per_second": measured.rate,
        "p50_ms": measured.percentile(0.50) / 1000.0,
        "p99_ms": measured.percentile(0.99) / 1000.0,
        "errors": measured.errors,
        "first_error": measured.first_error,
        "load_average": {"before": before, "after": after},
    });
    if args.json {
        crate::out(&figures.to_string());
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{} on {} instance(s), {} connections: {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms, {} errors, load average {} -> {}",
            args.tool,
            addrs.len(),
            args.concurrency,
            measured.rate,
            measured.percentile(0.50) / 1000.0,
            measured.percentile(0.99) / 1000.0,
            measured.errors,
            before.map_or("?".to_owned(), |l| format!("{l:.2}")),
            after.map_or("?".to_owned(), |l| format!("{l:.2}")),
        )
        .into_diagnostic()?;
        if let Some(why) = &measured.first_error {
            writeln!(out, "first failed call: {why}").into_diagnostic()?;
        }
    }
    Ok(if measured.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::address;

    #[test]
    fn addresses_of_urls() {
        // (url, address or None for an error)
        let cases = [
            ("http://127.0.0.1:8931/mcp", Some("127.0.0.1:8931")),
            ("http://localhost/mcp", Some("localhost:80")),
            ("http://[::1]:9000/mcp", Some("[::1]:9000")),
            ("https://example.com/mcp", None),
            ("http:///mcp", None),
        ];
        for (url, want) in cases {
            assert_eq!(address(url).ok().as_deref(), want, "{url}");
        }
    }
}
