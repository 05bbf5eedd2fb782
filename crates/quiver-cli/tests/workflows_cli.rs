//! `quiver run` and `quiver runs` through the built binary, a real SQLite file and the
//! sandbox: a small package of the test's own whose workflows call its private tool, another
//! package's tool (which needs consent) and wait for an approval.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// The package `flows`: a private tool that returns its text and the call's idempotency key,
/// and three workflows.
fn flows(root: &Path) {
    write(
        root,
        "flows/quiver.yaml",
        "id: flows\ndescription: Workflows of the CLI test\nrequires:\n  packages: [weather]\n",
    );
    write(
        root,
        "flows/tools/stamp/tool.yaml",
        "description: Stamps the text with the call's idempotency key\ncategory: perception\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "flows/tools/stamp/main.py",
        "import json, sys\nrequest = json.load(sys.stdin)\nprint(json.dumps({\"text\": request[\"arguments\"][\"text\"], \"key\": request[\"context\"][\"idempotency_key\"]}))\n",
    );
    write(
        root,
        "flows/workflows/stamped.yaml",
        "description: Stamps a text with the package's private tool\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: s\n    tool: stamp\n    with: {text: '{{ input.text }}'}\noutput: '{{ steps.s.output }}'\n",
    );
    write(
        root,
        "flows/workflows/forecast.yaml",
        "description: Another package's tool\nsteps:\n  - id: f\n    tool: weather.forecast\n    with: {city: 北京}\n",
    );
    write(
        root,
        "flows/workflows/review.yaml",
        "description: Waits for a review\nsteps:\n  - id: ok\n    approval: Go on?\n",
    );
}

struct Env {
    home: tempfile::TempDir,
    packages: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let packages = tempfile::tempdir().unwrap();
        flows(packages.path());
        Env {
            home: tempfile::tempdir().unwrap(),
            packages,
        }
    }

    fn quiver(&self, args: &[&str]) -> Output {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["--root", self.packages.path().to_str().unwrap()])
            .args(["--root", examples.to_str().unwrap()])
            .args(args)
            .env("QUIVER_HOME", self.home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.quiver(args);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

#[test]
fn run_drives_a_workflow_through_its_private_tool_and_one_key_is_one_run() {
    let env = Env::new();
    let args = [
        "run",
        "flows.stamped",
        "--input",
        r#"{"text": "hi"}"#,
        "--key",
        "k1",
        "--json",
    ];
    let run = env.json(&args);
    assert_eq!(run["status"], "completed", "{run}");
    let id = run["id"].as_str().unwrap();
    assert_eq!(run["output"]["text"], "hi");
    // The tool read the step's idempotency key in its call context.
    assert_eq!(run["output"]["key"], format!("{id}:s"));
    // The same key is the same run.
    assert_eq!(env.json(&args)["id"], id);
    let listed = env.json(&["runs", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let shown = env.json(&["runs", "show", id, "--json"]);
    assert_eq!(shown["attempts"][0]["step_id"], "s");
    assert_eq!(shown["attempts"][0]["status"], "ok");
}

#[test]
fn an_unattended_run_parks_on_another_packages_consent_and_on_an_approval() {
    let env = Env::new();
    let run = env.json(&["run", "flows.forecast", "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let shown = env.json(&["runs", "show", run["id"].as_str().unwrap(), "--json"]);
    let card = &shown["waits"][0]["detail"]["card"];
    assert_eq!(card["tool"], "weather.forecast");
    assert_eq!(card["consent"], true);
    assert_eq!(card["arguments"]["city"], "北京");
    let run = env.json(&["run", "flows.review", "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let out = env.quiver(&["runs", "show", "run-nothing"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn run_refuses_an_unknown_workflow_and_an_input_that_misfits() {
    let env = Env::new();
    let out = env.quiver(&["run", "flows.nothing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no workflow `flows.nothing`"));
    let out = env.quiver(&["run", "flows.stamped", "--input", r#"{"text": 1}"#]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not fit its schema"));
}
