//! The workflow engine's own cost: runs of a three-step workflow whose steps call a built-in
//! no-op tool through the whole call pipeline, started and driven one after another on one
//! SQLite file (every commit of docs/workflows.md's order included).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use quiver_catalog::Catalog;
use quiver_policy::Principal;
use quiver_store::workflow::RunStatus;
use quiver_store::{SqliteStore, StoreOptions, Synchronous};
use quiver_workflow::{Engine, SystemClock};
use serde::Serialize;
use serde_json::json;

use super::percentile;
use crate::executor::BuiltinExecutor;
use crate::{ApproverSet, Runtime, RuntimeConfig, RuntimeError, WorkflowSteps};

/// Steps of the benchmark's workflow.
pub const STEPS: usize = 3;

/// Figures of one workflow run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkflowReport {
    /// Runs started and driven to their end.
    pub runs: usize,
    /// SQLite `synchronous` setting.
    pub synchronous: String,
    /// Runs per second over the whole run (one thread).
    pub runs_per_second: f64,
    /// Median time of one run (start to completed), in microseconds.
    pub run_p50_us: f64,
    /// 99th percentile of a run, in microseconds.
    pub run_p99_us: f64,
    /// The median run divided by its steps: the engine's and pipeline's cost per step, the
    /// no-op tool itself costing nothing.
    pub step_p50_us: f64,
    /// Runs that did not complete.
    pub errors: usize,
}

fn write_package(dir: &Path) -> std::io::Result<()> {
    let tool = dir.join("bench/tools/noop");
    std::fs::create_dir_all(&tool)?;
    std::fs::create_dir_all(dir.join("bench/workflows"))?;
    std::fs::write(
        dir.join("bench/quiver.yaml"),
        "id: bench\ndescription: Workflow benchmark\n",
    )?;
    std::fs::write(
        tool.join("tool.yaml"),
        "description: Does nothing.\ncategory: decision\napproval: never\ninput: {type: object, properties: {n: {type: integer}}}\nrun: {command: [none]}\n",
    )?;
    let steps: String = (0..STEPS)
        .map(|i| format!("  - id: s{i}\n    tool: noop\n    with: {{n: {i}}}\n"))
        .collect();
    std::fs::write(
        dir.join("bench/workflows/three.yaml"),
        format!("description: Three no-op steps.\nsteps:\n{steps}"),
    )
}

/// Starts and drives `runs` runs of a three-step no-op workflow, one after another, against a
/// SQLite file in `dir`.
pub fn run_workflows(
    dir: &Path,
    runs: usize,
    synchronous: Synchronous,
) -> Result<WorkflowReport, RuntimeError> {
    let io = |source| RuntimeError::Io {
        path: dir.to_path_buf(),
        source,
    };
    write_package(dir).map_err(io)?;
    let options = StoreOptions {
        synchronous,
        ..StoreOptions::default()
    };
    let store = Arc::new(SqliteStore::open_with(dir.join("bench.db"), &options)?);
    let mut executor = BuiltinExecutor::new();
    executor.register("bench.noop", Arc::new(|_, _| Ok(json!({"ok": true}))));
    let runtime = Runtime::new(
        Catalog::load_dirs(&[dir]),
        store.clone(),
        Arc::new(executor),
        ApproverSet::default(),
        RuntimeConfig::default(),
    );
    runtime.set_workflow_store(store.clone());
    let definition =
        runtime
            .workflow_definition("bench.three")
            .ok_or_else(|| RuntimeError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::other("the benchmark's workflow did not load"),
            })?;
    let steps = WorkflowSteps::new(&runtime);
    let engine = Engine::new(store.as_ref(), &steps, &SystemClock);
    let workflow_error = |e: quiver_workflow::WorkflowError| RuntimeError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    };
    let digest = engine.pin(&definition).map_err(workflow_error)?;
    let sender = Principal::user("bench", quiver_package::rules::Role::Master);
    let mut times = Vec::with_capacity(runs);
    let mut errors = 0;
    let started = Instant::now();
    for _ in 0..runs {
        let t = Instant::now();
        let start = runtime.run_start(
            "bench",
            &sender,
            json!({}),
            json!({"kind": "manual"}),
            true,
            None,
        );
        let (run, _) = engine.start(&digest, &start).map_err(workflow_error)?;
        let run = engine.drive(&run.id).map_err(workflow_error)?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
        errors += usize::from(run.status != RunStatus::Completed);
    }
    let elapsed = started.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    let p50 = percentile(&times, 0.5);
    Ok(WorkflowReport {
        runs,
        synchronous: format!("{synchronous:?}").to_lowercase(),
        runs_per_second: runs as f64 / elapsed,
        run_p50_us: p50,
        run_p99_us: percentile(&times, 0.99),
        step_p50_us: p50 / STEPS as f64,
        errors,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_small_run_completes_every_run() {
        let dir = tempfile::tempdir().unwrap();
        let report =
            super::run_workflows(dir.path(), 5, quiver_store::Synchronous::Normal).unwrap();
        assert_eq!((report.runs, report.errors), (5, 0));
        assert!(report.run_p50_us > 0.0 && report.runs_per_second > 0.0);
    }
}
