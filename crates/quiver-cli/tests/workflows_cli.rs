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

/// The package `flows`: a private tool (1 s timeout) that sleeps `sleep` seconds and returns
/// its text and the call's idempotency key, and the workflows the tests run.
fn flows(root: &Path) {
    write(
        root,
        "flows/quiver.yaml",
        "id: flows\ndescription: Workflows of the CLI test\nrequires:\n  packages: [weather]\n",
    );
    write(
        root,
        "flows/tools/stamp/tool.yaml",
        "description: Stamps the text with the call's idempotency key\ncategory: perception\ninput: {type: object, properties: {text: {type: string}, sleep: {type: number}}, required: [text]}\ntimeout: 1s\nrun: {command: [python3, main.py]}\n",
    );
    write(
        root,
        "flows/tools/stamp/main.py",
        "import json, sys, time\nrequest = json.load(sys.stdin)\ntime.sleep(request[\"arguments\"].get(\"sleep\", 0))\nprint(json.dumps({\"text\": request[\"arguments\"][\"text\"], \"key\": request[\"context\"][\"idempotency_key\"]}))\n",
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
        "flows/workflows/timed.yaml",
        "description: A step's own timeout, longer than the tool's 1 s\ninput: {type: object, properties: {sleep: {type: number}}, required: [sleep]}\nsteps:\n  - id: long\n    tool: stamp\n    with: {text: long, sleep: '{{ input.sleep }}'}\n    timeout: 4s\n    retry: {max_attempts: 1}\n",
    );
    write(
        root,
        "flows/workflows/hurried.yaml",
        "description: A step whose timeout is shorter than its tool's work\nsteps:\n  - id: s\n    tool: stamp\n    with: {text: late, sleep: 10}\n    timeout: 500ms\n    retry: {max_attempts: 1}\n",
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
    // Issue 22 item 11: one record of the step, committed with its result: the pipeline's
    // record of the call, in the run's session, carrying the engine's facts of the attempt.
    let audit = env.json(&["audit", "--json"]);
    let records: Vec<&Value> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["tool"] == "flows.stamp")
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        (&records[0]["kind"], &records[0]["session"]),
        (&Value::from("call"), &Value::from(format!("ses-{id}")))
    );
    let step = &records[0]["detail"]["workflow_step"];
    assert_eq!(step["origin"]["step"], "s", "{step}");
    assert_eq!(step["attempt"], format!("{id}:s#1"), "{step}");
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

#[test]
fn a_steps_own_timeout_replaces_its_tools() {
    let env = Env::new();
    // 2 s of work: past the tool's own 1 s, within the step's 4 s.
    let run = env.json(&["run", "flows.timed", "--input", r#"{"sleep": 2}"#, "--json"]);
    assert_eq!(run["status"], "completed", "{run}");
    // Past the step's own 500 ms (shorter than the tool's 1 s): stopped long before its
    // 10 s of work, not retried.
    let started = std::time::Instant::now();
    let run = env.json(&["run", "flows.hurried", "--json"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        run["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 0.5 s"),
        "{run}"
    );
    let shown = env.json(&["runs", "show", run["id"].as_str().unwrap(), "--json"]);
    assert_eq!(shown["attempts"].as_array().unwrap().len(), 1, "{shown}");
}

/// Issue 22 item 16: two exposed workflows of two packages that call each other. Through
/// `quiver call` the nesting overflowed the stack and aborted the process, leaving runs
/// `in_doubt`; now a run started by a run nested 8 deep is refused with a clear
/// error, each run of the chain fails, and the process exits normally.
#[test]
fn workflows_that_call_each_other_stop_at_the_nesting_bound() {
    let env = Env::new();
    let root = env.packages.path();
    for (me, other) in [("ping", "pong"), ("pong", "ping")] {
        write(
            root,
            &format!("{me}/quiver.yaml"),
            &format!("id: {me}\ndescription: Calls {other}\nrequires:\n  packages: [{other}]\n"),
        );
        write(
            root,
            &format!("{me}/workflows/go.yaml"),
            &format!(
                "description: Calls {other}.go\nexpose: true\nsteps:\n  - id: call\n    tool: {other}.go\n"
            ),
        );
    }
    let out = env.quiver(&["call", "ping__go", "--args", "{}", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["outcome"]["content"]["error"].as_str().unwrap();
    assert!(error.contains("nest at most 8 deep"), "{v}");
    let runs = env.json(&["runs", "list", "--json"]);
    let runs = runs.as_array().unwrap();
    // The first run and eight nested in it: the ninth call is refused.
    assert_eq!(runs.len(), 9, "{runs:?}");
    for run in runs {
        assert_eq!(run["status"], "failed", "{run}");
    }
}
