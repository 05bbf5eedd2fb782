//! `quiver bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{IntoDiagnostic, miette};
use quiver_catalog::bench::{RetrievalReport, run_retrieval};
use quiver_catalog::load_bench;
use quiver_store::Synchronous;

/// Subcommands of `quiver bench`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Tool retrieval: rank a corpus's tools for each query and score the rankings.
    Retrieval(RetrievalArgs),
    /// Loading: generate many packages, then time scan + parse + index.
    Load(LoadArgs),
    /// The call pipeline: a built-in no-op tool called by concurrent sessions on one SQLite file.
    Pipeline(PipelineArgs),
    /// The sandbox: a sandboxed `command` call against a plain spawn of the same Python tool,
    /// and a `worker` round trip.
    Sandbox(super::sandbox_bench::SandboxBenchArgs),
    /// The MCP front: `tools/call` of a no-op tool over HTTP, against a Python MCP server.
    Mcp(super::mcp_bench::McpBenchArgs),
}

/// Arguments of `quiver bench pipeline`.
#[derive(Debug, clap::Args)]
pub struct PipelineArgs {
    /// Concurrent sessions (one thread each).
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Calls per session.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// SQLite durability: `full` (every audit record on disk before the answer) or `normal`.
    #[arg(long, default_value = "full", value_parser = ["full", "normal"])]
    sync: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `quiver bench load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// How many packages to generate (a manifest, a skill and two tools each).
    #[arg(long, default_value_t = 10_000)]
    packages: usize,
    /// Where to generate them (default: a fresh folder under the system temp folder, removed after).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `quiver bench retrieval`.
#[derive(Debug, clap::Args)]
pub struct RetrievalArgs {
    /// A corpus folder holding `tools.jsonl` and `queries.jsonl`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tools", "queries"])]
    corpus: Option<PathBuf>,
    /// The tools file (JSON Lines: id, name, description, parameters).
    #[arg(long, value_name = "PATH", requires = "queries")]
    tools: Option<PathBuf>,
    /// The queries file (JSON Lines: id, query, gold).
    #[arg(long, value_name = "PATH", requires = "tools")]
    queries: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `quiver bench`.
pub fn run(command: BenchCommand) -> miette::Result<ExitCode> {
    match command {
        BenchCommand::Retrieval(args) => retrieval(args),
        BenchCommand::Load(args) => load(args),
        BenchCommand::Pipeline(args) => pipeline(args),
        BenchCommand::Sandbox(args) => super::sandbox_bench::run(args),
        BenchCommand::Mcp(args) => super::mcp_bench::run(args),
    }
}

fn pipeline(args: PipelineArgs) -> miette::Result<ExitCode> {
    let dir = tempfile::tempdir().into_diagnostic()?;
    let sync = if args.sync == "normal" {
        Synchronous::Normal
    } else {
        Synchronous::Full
    };
    let report = quiver_runtime::bench::run_pipeline(dir.path(), args.sessions, args.calls, sync)
        .map_err(|e| miette!("{e}"))?;
    let text = if args.json {
        serde_json::to_string(&report).into_diagnostic()?
    } else {
        format!(
            "sessions      {}\ncalls each    {}\nsynchronous   {}\ncalls/s       {:.0}\np50           {:.1} µs\np99           {:.1} µs\nerrors        {}\nfdatasync p50 {:.1} µs (this disk, same run: the floor of a `full` commit)",
            report.sessions,
            report.calls_per_session,
            report.synchronous,
            report.calls_per_second,
            report.p50_us,
            report.p99_us,
            report.errors,
            report.fdatasync_p50_us
        )
    };
    crate::out(&text);
    Ok(if report.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn load(args: LoadArgs) -> miette::Result<ExitCode> {
    let (dir, remove) = match args.dir {
        Some(dir) => (dir, false),
        None => (load_bench::temp_dir(), true),
    };
    if dir.exists() && std::fs::read_dir(&dir).into_diagnostic()?.next().is_some() {
        return Err(miette!(
            help = "give an empty or new folder",
            "`{}` is not empty",
            dir.display()
        ));
    }
    let report = load_bench::run(&dir, args.packages);
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report =
        report.map_err(|e| miette!("cannot generate packages in `{}`: {e}", dir.display()))?;
    let text = if args.json {
        serde_json::to_string(&report).into_diagnostic()?
    } else {
        format!(
            "packages    {}\ntools       {}\nerrors      {}\ngenerate    {:.0} ms (not counted)\nload        {:.0} ms (scan + parse + index)",
            report.packages, report.tools, report.errors, report.generate_ms, report.load_ms
        )
    };
    crate::out(&text);
    Ok(ExitCode::SUCCESS)
}

fn retrieval(args: RetrievalArgs) -> miette::Result<ExitCode> {
    let (tools, queries) = match (args.corpus, args.tools, args.queries) {
        (Some(dir), _, _) => (dir.join("tools.jsonl"), dir.join("queries.jsonl")),
        (None, Some(tools), Some(queries)) => (tools, queries),
        _ => {
            return Err(miette!(
                "give --corpus DIR, or both --tools PATH and --queries PATH"
            ));
        }
    };
    let report = run_retrieval(&tools, &queries).map_err(|e| miette!("{e}"))?;
    let text = if args.json {
        serde_json::to_string(&report).into_diagnostic()?
    } else {
        table(&report)
    };
    crate::out(&text);
    Ok(ExitCode::SUCCESS)
}

/// The report as a small aligned table.
fn table(r: &RetrievalReport) -> String {
    let rows = [
        ("queries", r.queries.to_string()),
        ("Recall@1", format!("{:.3}", r.recall_at_1)),
        ("Recall@5", format!("{:.3}", r.recall_at_5)),
        ("MRR@10", format!("{:.3}", r.mrr_at_10)),
        ("nDCG@10", format!("{:.3}", r.ndcg_at_10)),
        ("latency mean", format!("{:.3} ms", r.latency_ms_mean)),
        ("latency p50", format!("{:.3} ms", r.latency_ms_p50)),
        ("latency p99", format!("{:.3} ms", r.latency_ms_p99)),
        ("index build", format!("{:.1} ms", r.build_ms)),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let value_width = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v:>value_width$}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_aligned() {
        let r = RetrievalReport {
            recall_at_1: 0.5,
            recall_at_5: 0.9,
            mrr_at_10: 0.6,
            ndcg_at_10: 0.7,
            latency_ms_mean: 0.1,
            latency_ms_p50: 0.1,
            latency_ms_p99: 1.25,
            build_ms: 12.0,
            queries: 200,
        };
        let t = table(&r);
        let widths: Vec<usize> = t.lines().map(|l| l.chars().count()).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{t}");
        assert!(t.contains("Recall@5"));
    }
}
