//! The workflow engine's own cost: runs of a three-step workflow whose steps call a built-in
//! no-op tool through the whole call pipeline, started and driven one after another on one
//! SQLite file (every commit of docs/workflows.md's order included).

use std::path::Path;
use std::time::Instant;

use quiver_policy::Principal;
use quiver_store::Synchronous;
use quiver_store::workflow::RunStatus;
use quiver_workflow::{Engine, SystemClock, WorkflowError};
use serde::Serialize;
use serde_json::json;

use super::percentile;
use crate::{RuntimeError, WorkflowSteps};

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

/// Starts and drives `runs` runs of a three-step no-op workflow, one after another, against a
/// SQLite file in `dir`.
pub fn run_workflows(
    dir: &Path,
    runs: usize,
    synchronous: Synchronous,
) -> Result<WorkflowReport, RuntimeError> {
    let steps: String = (0..STEPS)
        .map(|i| format!("  - id: s{i}\n    tool: noop\n    with: {{n: {i}}}\n"))
        .collect();
    let workflow = format!("description: Three no-op steps.\nsteps:\n{steps}");
    let (runtime, store) =
        super::bench_runtime(dir, synchronous, &[("workflows/three.yaml", workflow)])?;
    runtime.set_workflow_store(store.clone());
    let definition = runtime
        .workflow_definition("bench.three")
        .ok_or_else(|| WorkflowError::Refused("the benchmark's workflow did not load".into()))?;
    let steps = WorkflowSteps::new(&runtime);
    let engine = Engine::new(store.as_ref(), &steps, &SystemClock);
    let digest = engine.pin(&definition)?;
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
        let (run, _) = engine.start(&digest, &start)?;
        let run = engine.drive(&run.id)?;
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
