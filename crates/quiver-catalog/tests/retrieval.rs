//! The retrieval benchmark on the visible corpora of `shared/bench/retrieval`: Recall@5 must stay
//! above the best BM25 baselines of its README, so that a regression of the search fails CI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use quiver_catalog::bench::{evaluate, load_queries, load_tools, run_retrieval};

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/bench/retrieval")
        .join(name)
}

fn recall_at_5_beats(name: &str, baseline: f64) {
    let dir = corpus(name);
    let report = match run_retrieval(&dir.join("tools.jsonl"), &dir.join("queries.jsonl")) {
        Ok(report) => report,
        Err(e) => panic!("{name}: {e}"),
    };
    assert!(report.queries > 0, "{name}: no queries");
    assert!(
        report.recall_at_5 > baseline,
        "{name}: Recall@5 {:.3} is not above the baseline {baseline:.3} ({report:?})",
        report.recall_at_5
    );
    assert!(report.recall_at_1 <= report.recall_at_5);
    assert!(report.mrr_at_10 >= report.recall_at_1);
}

#[test]
fn bfcl_beats_bm25s() {
    recall_at_5_beats("bfcl", 0.915);
}

#[test]
fn metatool_beats_bm25s() {
    recall_at_5_beats("metatool", 0.462);
}

#[test]
fn zh_beats_rank_bm25_with_ngrams() {
    recall_at_5_beats("zh", 0.850);
}

#[test]
fn zh_no_tool_queries_do_not_panic() {
    let dir = corpus("zh");
    let tools = match load_tools(&dir.join("tools.jsonl")) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let queries = match load_queries(&dir.join("none.jsonl")) {
        Ok(q) => q,
        Err(e) => panic!("{e}"),
    };
    assert!(!queries.is_empty());
    assert!(queries.iter().all(|q| q.gold.is_empty()));
    let report = evaluate(tools, &queries);
    assert_eq!(report.queries, queries.len());
    // No gold tool: the quality averages are defined as 0.
    assert_eq!(report.recall_at_5, 0.0);
}
