//! Benchmarks of the pipeline: its own overhead for a built-in no-op call, and many concurrent
//! sessions against one SQLite file; [`workflow`]: runs of a no-op workflow.

pub mod workflow;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use quiver_catalog::Catalog;
use quiver_policy::{Origin, Principal};
use quiver_store::{SqliteStore, StoreOptions, Synchronous};
use serde::Serialize;
use serde_json::json;

use crate::executor::BuiltinExecutor;
use crate::{
    ApproverSet, CallStatus, Profile, Runtime, RuntimeConfig, RuntimeError, SessionRequest,
};

/// Figures of one pipeline run.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineReport {
    /// Sessions run at once.
    pub sessions: usize,
    /// Calls per session.
    pub calls_per_session: usize,
    /// SQLite `synchronous` setting (`full` makes every audit record durable before answering).
    pub synchronous: String,
    /// Calls per second over the whole run.
    pub calls_per_second: f64,
    /// Median time of one call through the whole pipeline, in microseconds.
    pub p50_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
    /// Median time of computing a turn's offer (its tools, skills and resources, as a front
    /// lists them each turn), in microseconds, measured in the same sessions.
    pub offer_p50_us: f64,
    /// Calls that did not end `ok`.
    pub errors: usize,
    /// Median time of one `fdatasync` of a small write in the benchmark's folder, measured in
    /// the same run: the floor a `synchronous = full` commit cannot go below.
    pub fdatasync_p50_us: f64,
}

/// Writes the benchmark's package `bench` into `dir`: one `decision` tool `noop` that needs no
/// approval, plus `files` (path under the package, text), and returns a runtime over it with a
/// built-in `bench.noop` and a SQLite store in `dir` (the store too, for a workflow engine).
fn bench_runtime(
    dir: &Path,
    synchronous: Synchronous,
    files: &[(&str, String)],
) -> Result<(Runtime, Arc<SqliteStore>), RuntimeError> {
    let io = |source| RuntimeError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let package = dir.join("bench");
    let noop = "description: Does nothing.\ncategory: decision\napproval: never\nexpose: true\ninput: {type: object, properties: {n: {type: integer}}}\nrun: {command: [none]}\n";
    let manifest = "id: bench\ndescription: Benchmark\n";
    for (path, text) in [("quiver.yaml", manifest), ("tools/noop/tool.yaml", noop)]
        .into_iter()
        .chain(files.iter().map(|(path, text)| (*path, text.as_str())))
    {
        let path = package.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(path, text).map_err(io)?;
    }
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
    Ok((runtime, store))
}

/// Runs `sessions` threads, each a session making `calls` calls of a built-in no-op tool,
/// against a SQLite file in `dir`.
pub fn run_pipeline(
    dir: &Path,
    sessions: usize,
    calls: usize,
    synchronous: Synchronous,
) -> Result<PipelineReport, RuntimeError> {
    let (runtime, _) = bench_runtime(dir, synchronous, &[])?;
    let mut ids = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let id = runtime.create_session(&SessionRequest {
            origin: Origin::default(),
            agent: "chat".into(),
            principal: Principal::user("bench", quiver_package::rules::Role::Master),
            profile: Profile::Interactive,
        })?;
        runtime.store().set_consent(&id, "bench", true, "bench")?;
        ids.push(id);
    }
    let calls_done = std::sync::Barrier::new(sessions);
    let calls_ended = std::sync::OnceLock::new();
    let started = Instant::now();
    type Timed = (Vec<f64>, Vec<f64>, usize);
    let results: Vec<Result<Timed, RuntimeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (runtime, calls_done, calls_ended) = (&runtime, &calls_done, &calls_ended);
                scope.spawn(move || {
                    let mut times = Vec::with_capacity(calls);
                    let mut offers = Vec::with_capacity(calls);
                    let mut errors = 0;
                    let mut turn = runtime.begin_turn(
                        id,
                        Principal::user("bench", quiver_package::rules::Role::Master),
                        "",
                    );
                    let mut failed = None;
                    if let Ok(turn) = &mut turn {
                        for n in 0..calls {
                            let t = Instant::now();
                            match turn.call("bench__noop", json!({ "n": n })) {
                                Ok(out) => errors += usize::from(out.status != CallStatus::Ok),
                                Err(e) => {
                                    failed = Some(e);
                                    break;
                                }
                            }
                            times.push(t.elapsed().as_secs_f64() * 1e6);
                        }
                    }
                    // Every session's calls are done before any offer is timed (a session
                    // that could not begin still passes, so none waits forever).
                    if calls_done.wait().is_leader() {
                        let _ = calls_ended.set(Instant::now());
                    }
                    let turn = turn?;
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    for _ in 0..calls {
                        let t = Instant::now();
                        std::hint::black_box(turn.offer()?);
                        offers.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok((times, offers, errors))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(RuntimeError::ThreadPanicked))
            })
            .collect()
    });
    let elapsed = calls_ended
        .get()
        .map_or_else(|| started.elapsed(), |end| end.duration_since(started))
        .as_secs_f64();
    let mut times = Vec::new();
    let mut offers = Vec::new();
    let mut errors = 0;
    for result in results {
        let (t, o, e) = result?;
        times.extend(t);
        offers.extend(o);
        errors += e;
    }
    times.sort_by(f64::total_cmp);
    offers.sort_by(f64::total_cmp);
    let fdatasync = fdatasync_p50(dir).map_err(|source| RuntimeError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let pct = |p: f64| percentile(&times, p);
    Ok(PipelineReport {
        sessions,
        calls_per_session: calls,
        synchronous: format!("{synchronous:?}").to_lowercase(),
        calls_per_second: times.len() as f64 / elapsed,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        offer_p50_us: percentile(&offers, 0.5),
        errors,
        fdatasync_p50_us: fdatasync,
    })
}

/// The `p` quantile (nearest rank) of sorted `times`; 0 when empty.
pub fn percentile(times: &[f64], p: f64) -> f64 {
    times
        .get(((times.len() as f64 * p).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0)
}

/// Median of 200 `fdatasync` calls, each after a 200-byte append, on a file in `dir`.
fn fdatasync_p50(dir: &Path) -> std::io::Result<f64> {
    use std::io::Write;
    let path = dir.join("fdatasync.probe");
    let mut file = std::fs::File::create(&path)?;
    let mut times = Vec::with_capacity(200);
    for _ in 0..200 {
        file.write_all(&[b'x'; 200])?;
        let t = Instant::now();
        file.sync_data()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(file);
    std::fs::remove_file(&path)?;
    times.sort_by(f64::total_cmp);
    Ok(percentile(&times, 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_has_no_errors() {
        let dir = tempfile::tempdir().unwrap();
        let report = run_pipeline(dir.path(), 4, 10, Synchronous::Normal).unwrap();
        assert_eq!(report.errors, 0);
        assert!(report.p50_us > 0.0);
    }
}
