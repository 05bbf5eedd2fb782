//! `quiver bench resume`: how long a `quiver serve` started after a `kill -9` takes to resume
//! the step it was killed in, with many runs parked in the same database.
//!
//! Each round: a run of a one-step workflow is started (committed `running`), then a `quiver
//! serve --stdio` of this binary starts with the test crash switch
//! (`QUIVER_TEST_CRASH_AT=attempt_started`): its scheduler drives the run, commits the step's
//! attempt as started and the process kills itself with SIGKILL, as a crash between that commit
//! and the tool's run would. Then a second `quiver serve --stdio` starts on the same database,
//! timed from its spawn to the resumed attempt committed started and to the run completed (the
//! tool, a sandboxed `sh`, is re-run safe: `perception`). Before the rounds, `--parked` runs of
//! another workflow are parked on an approval each, so recovery finds them beside the crashed
//! one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use miette::{IntoDiagnostic, miette};
use quiver_host::{Host, HostOptions, State};
use quiver_runtime::admin::Admin;
use quiver_runtime::{ApproverSet, RunError, RunOps, Runtime};
use quiver_store::workflow::RunStatus;
use serde::Serialize;
use serde_json::json;

/// Arguments of `quiver bench resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeBenchArgs {
    /// Runs parked on an approval in the database while the server restarts.
    #[arg(long, default_value_t = 1000)]
    parked: usize,
    /// Kill-and-restart rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// What `quiver bench resume` measured.
#[derive(Debug, Serialize)]
struct ResumeReport {
    parked: usize,
    rounds: usize,
    /// Spawn of the restarted server → the resumed attempt committed started, p50 and max.
    resumed_p50_ms: f64,
    resumed_max_ms: f64,
    /// Spawn of the restarted server → the run completed (the tool ran), p50 and max.
    completed_p50_ms: f64,
    completed_max_ms: f64,
    /// Spawn → exit of the server that crashed itself (start-up, recovery, the step started).
    crashed_p50_ms: f64,
}

/// How long a round may take before the bench gives up.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

const MANIFEST: &str = "id: resume\ndescription: The packages of the resume benchmark\n";
const TOOL: &str = "description: Returns an empty object\ncategory: perception\ninput: {type: object}\nrun: {command: [sh, -c, 'cat > /dev/null; echo {}']}\n";
const PARKED: &str =
    "description: Parks on an approval\nsteps:\n  - id: ok\n    approval: Go on?\n";
const RESUMED: &str =
    "description: One step, resumed after a crash\nsteps:\n  - id: s\n    tool: noop\n";

fn write(root: &Path, rel: &str, text: &str) -> miette::Result<()> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).into_diagnostic()?;
    }
    std::fs::write(path, text).into_diagnostic()
}

/// The package's folder and an empty config file under `dir`.
fn fixture(dir: &Path) -> miette::Result<(PathBuf, PathBuf)> {
    let packages = dir.join("packages");
    write(&packages, "resume/quiver.yaml", MANIFEST)?;
    write(&packages, "resume/tools/noop/tool.yaml", TOOL)?;
    write(&packages, "resume/workflows/parked.yaml", PARKED)?;
    write(&packages, "resume/workflows/resumed.yaml", RESUMED)?;
    let config = dir.join("config.yaml");
    write(dir, "config.yaml", "{}\n")?;
    Ok((packages, config))
}

/// Starts a run of `workflow` for the local operator, unattended; driven only when `drive`.
fn start(runtime: &Runtime, workflow: &str, drive: bool) -> miette::Result<String> {
    let fail = |e: RunError| miette!("{e}");
    let ops = RunOps::new(runtime).map_err(fail)?;
    let (run, _) = ops
        .start(
            workflow,
            &quiver_policy::Principal::user("bench", quiver_package::rules::Role::Master),
            json!({}),
            json!({"kind": "manual", "front": "bench"}),
            false,
            None,
        )
        .map_err(fail)?;
    if drive {
        ops.drive(&run.id).map_err(fail)?;
    }
    Ok(run.id)
}

/// `quiver serve --stdio` of this binary over the bench's packages and database, its stdin
/// kept open (the server ends when it closes).
fn serve(packages: &Path, home: &Path, config: &Path, crash: bool) -> miette::Result<Child> {
    let exe = std::env::current_exe().into_diagnostic()?;
    let mut command = Command::new(exe);
    command
        .args(["--root", &packages.to_string_lossy(), "serve", "--stdio"])
        .env("QUIVER_HOME", home)
        .env("QUIVER_CONFIG", config)
        .env_remove("QUIVER_TEST_CRASH_AT")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if crash {
        command.env("QUIVER_TEST_CRASH_AT", "attempt_started");
    }
    command.spawn().into_diagnostic()
}

/// Waits until `done` holds, looking every millisecond; the time it took.
fn until(
    began: Instant,
    mut done: impl FnMut() -> miette::Result<bool>,
) -> miette::Result<Duration> {
    while !done()? {
        if began.elapsed() > ROUND_LIMIT {
            return Err(miette!(
                "the restarted server did not resume the run within {} s",
                ROUND_LIMIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(began.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    quiver_runtime::bench::percentile(&v, 0.5)
}

/// One round: a run started, a server crashed in its step, a server restarted and timed.
fn round(
    runtime: &Runtime,
    db: &Admin,
    (packages, home, config): (&Path, &Path, &Path),
) -> miette::Result<(f64, f64, f64)> {
    let fail = |e: &dyn std::fmt::Display| miette!("{e}");
    let id = start(runtime, "resume.resumed", false)?;
    let began = Instant::now();
    let mut crashing = serve(packages, home, config, true)?;
    let status = crashing.wait().into_diagnostic()?;
    let crashed = ms(began.elapsed());
    let attempts = |db: &Admin| -> miette::Result<usize> {
        Ok(db
            .run(&id)
            .map_err(|e| fail(&e))?
            .map_or(0, |view| view.attempts.len()))
    };
    let tried = attempts(db)?;
    if status.success() || tried != 1 {
        return Err(miette!(
            "the crashing server did not stop in the step ({status}, {tried} attempts)"
        ));
    }
    let began = Instant::now();
    let mut server = serve(packages, home, config, false)?;
    let resumed = until(began, || {
        Ok(attempts(db)? > 1
            || db
                .run(&id)
                .map_err(|e| fail(&e))?
                .is_some_and(|view| view.run.status.is_final()))
    });
    let completed = resumed.and_then(|resumed| {
        let completed = until(began, || {
            Ok(db
                .run(&id)
                .map_err(|e| fail(&e))?
                .is_some_and(|view| view.run.status == RunStatus::Completed))
        })?;
        Ok((resumed, completed))
    });
    let _ = server.kill();
    let _ = server.wait();
    let (resumed, completed) = completed?;
    Ok((ms(resumed), ms(completed), crashed))
}

/// Runs `quiver bench resume`.
pub fn run(args: ResumeBenchArgs) -> miette::Result<ExitCode> {
    let progress = crate::progress::Progress::spinner(format!(
        "bench resume: {} parked runs, {} round(s)",
        args.parked, args.rounds
    ));
    let dir = tempfile::tempdir().into_diagnostic()?;
    let (packages, config) = fixture(dir.path())?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).into_diagnostic()?;
    let state = State::in_dir(&home, None).map_err(crate::roots::fail)?;
    let host = Host::open(
        quiver_host::Config::default(),
        HostOptions {
            roots: vec![packages.clone()],
            state,
            search: None,
            approvers: ApproverSet::default(),
            launcher: crate::roots::launcher()?,
            reload: false,
        },
    )
    .map_err(crate::roots::fail)?;
    let runtime = host.runtime();
    for _ in 0..args.parked {
        start(runtime, "resume.parked", true)?;
    }
    // The state as the operator sees it, beside the servers that write it.
    let db = State::in_dir(&home, None)
        .map_err(crate::roots::fail)?
        .admin();
    let (mut resumed, mut completed, mut crashed) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.rounds.max(1) {
        let (r, c, k) = round(runtime, &db, (&packages, &home, &config))?;
        resumed.push(r);
        completed.push(c);
        crashed.push(k);
    }
    drop(progress);
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let report = ResumeReport {
        parked: args.parked,
        rounds: resumed.len(),
        resumed_max_ms: max(&resumed),
        completed_max_ms: max(&completed),
        resumed_p50_ms: p50(resumed),
        completed_p50_ms: p50(completed),
        crashed_p50_ms: p50(crashed),
    };
    let text = if args.json {
        serde_json::to_string(&report).into_diagnostic()?
    } else {
        format!(
            "parked runs        {}\nrounds             {}\nresumed p50        {:.1} ms (spawn of the restarted serve → the step's attempt committed started; max {:.1})\ncompleted p50      {:.1} ms (→ the sandboxed tool ran and the run completed; max {:.1})\ncrash p50          {:.1} ms (spawn → SIGKILL of the server that crashed in the step)",
            report.parked,
            report.rounds,
            report.resumed_p50_ms,
            report.resumed_max_ms,
            report.completed_p50_ms,
            report.completed_max_ms,
            report.crashed_p50_ms
        )
    };
    crate::out(&text);
    Ok(ExitCode::SUCCESS)
}
