//! What the model tests share: the pinned wheels (one copy, quiver-embed's) and a run of the
//! retrieval benchmark on a corpus of `shared/bench/retrieval`.

use std::path::{Path, PathBuf};

use quiver_catalog::bench::{BenchModels, MethodReport, run_methods};
use quiver_catalog::search::Method;

#[path = "../../../quiver-embed/tests/support/wheel.rs"]
mod wheel;

pub use wheel::pinned_wheel;

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Ranks the queries of the benchmark corpus `corpus` with each of `methods` and prints the
/// figures of each.
pub fn run_corpus(corpus: &str, methods: &[Method], models: &BenchModels) -> Vec<MethodReport> {
    let dir = repo().join("../shared/bench/retrieval").join(corpus);
    let reports = run_methods(
        &dir.join("tools.jsonl"),
        &dir.join("queries.jsonl"),
        methods,
        models,
    )
    .unwrap();
    for r in &reports {
        eprintln!(
            "{corpus} {}: R@5 {:.3}, p50 {:.2} ms, build {:.0} ms",
            r.method, r.report.recall_at_5, r.report.latency_ms_p50, r.report.build_ms
        );
    }
    reports
}

/// The Recall@5 of `method` among `reports`.
pub fn recall_at_5(reports: &[MethodReport], method: Method) -> f64 {
    reports
        .iter()
        .find(|r| r.method == method)
        .map(|r| r.report.recall_at_5)
        .unwrap()
}
