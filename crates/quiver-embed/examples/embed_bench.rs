//! Embedding speed of USE multilingual v3 on one core: model load time, then per-query latency
//! (one text at a time, as `tool_search` embeds a query) and batch throughput (as a catalog's
//! tools are embedded).
//!
//! ```sh
//! cargo run --release -p quiver-embed --example embed_bench -- ~/.local/share/quiver/models/usem3
//! ```

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::time::Instant;

use quiver_embed::Usem3;

const QUERIES: &[&str] = &[
    "北京明天多少度",
    "What will the weather be in Beijing tomorrow?",
    "帮我 send 一封 email 给老板",
    "Find flights from Tokyo to San Francisco next Friday and book the cheapest one.",
    "把这段话翻译成英文",
    "what's AAPL trading at?",
    "设置一个明早七点的闹钟",
    "Calculate the area of a circle with radius 5.",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: embed_bench MODEL_DIR (a folder with weights.npz and sp.model)")?;
    // One core, as the target says.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()?;
    let start = Instant::now();
    let model = Usem3::load(&dir)?;
    println!(
        "load           {:8.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    for q in QUERIES {
        let _ = model.embed(q);
    }
    let mut times = Vec::new();
    for _ in 0..50 {
        for q in QUERIES {
            let start = Instant::now();
            let v = model.embed(q);
            times.push(start.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(v);
        }
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((p * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
    println!("query p50      {:8.3} ms", pct(0.50));
    println!("query p99      {:8.3} ms", pct(0.99));
    let tokens: usize = QUERIES.iter().map(|q| model.token_ids(q).len()).sum();
    println!(
        "tokens/query   {:8.1}",
        tokens as f64 / QUERIES.len() as f64
    );

    let docs: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "tool_{i}: {} Returns the result for parameter {i} with details about the request.",
                QUERIES[i % QUERIES.len()]
            )
        })
        .collect();
    let start = Instant::now();
    let vectors = model.embed_batch(&docs);
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(vectors);
    println!(
        "batch          {:8.1} texts/s ({} texts in {:.2} s, one thread)",
        docs.len() as f64 / secs,
        docs.len(),
        secs
    );
    Ok(())
}
