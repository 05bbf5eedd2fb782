// TEMPORARY tuning harness (to be deleted).
#![allow(clippy::unwrap_used, clippy::print_stdout)]
use quiver_catalog::bench::*;
use quiver_catalog::search::*;
use std::path::Path;

fn main() {
    let root = Path::new("/work/shared/bench/retrieval");
    let show = std::env::var("SHOW").ok();
    let mut line = String::new();
    for corpus in ["bfcl", "metatool", "zh"] {
        let tools = load_tools(&root.join(corpus).join("tools.jsonl")).unwrap();
        let queries = load_queries(&root.join(corpus).join("queries.jsonl")).unwrap();
        if show.as_deref() == Some(corpus) {
            let ids: Vec<String> = tools.iter().map(|t| t.id.clone()).collect();
            let index = SearchIndex::build(tools.iter().map(|t| t.doc.clone()).collect());
            for q in &queries {
                let hits = index.search(&q.query, 10, &|_| true);
                let rank = hits.iter().position(|h| ids[h.doc] == q.gold[0]);
                if rank != Some(0) {
                    let top: Vec<&str> = hits.iter().take(3).map(|h| ids[h.doc].as_str()).collect();
                    println!("{:?}\t{}\tgold={}\ttop={:?}", rank.map(|r| r + 1), q.query.replace('\n', " "), q.gold[0], top);
                }
            }
        }
        let r = evaluate(tools, &queries);
        line += &format!("{corpus}: r1 {:.3} r5 {:.3} mrr {:.3} ndcg {:.3} p50 {:.3}ms | ", r.recall_at_1, r.recall_at_5, r.mrr_at_10, r.ndcg_at_10, r.latency_ms_p50);
    }
    println!("{line}");
}
