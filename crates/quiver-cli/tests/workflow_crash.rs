//! `kill -9` at every commit point of a workflow run (issue 14), through the built binary, a
//! real SQLite file and the sandbox. The test-only switch `QUIVER_TEST_CRASH_AT=<point>[:<n>]`
//! (docs/workflows.md) makes `quiver run` kill itself with SIGKILL right after the `n`-th pass
//! of a commit point; a restart (`quiver runs wait`, and `retry` or `resolve --done` for an
//! action found in doubt, chosen by what its ledger shows) then brings the run to its end.
//! Checked each time: the run completed, each step has one recorded result and no attempt is
//! left started, the perception tools ran once per key outside the crash window and at most
//! twice inside it, the action ran once, and `PRAGMA integrity_check` is `ok`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A ledger tool: appends `<step> <idempotency key>` to `ledger` in its data folder.
const LEDGER: &str = r#"import json, os, sys
request = json.load(sys.stdin)
step = request["arguments"]["step"]
with open(os.path.join(os.environ["QUIVER_DATA_DIR"], "ledger"), "a") as f:
    f.write(step + " " + request["context"]["idempotency_key"] + "\n")
print(json.dumps({"step": step}))
"#;

/// The package `crashy`: a perception ledger tool `look`, an action ledger tool `pay` (not
/// idempotent), and the workflow `flow`: look, a skipped step, pay, a short timer, look.
fn crashy(root: &Path) {
    write(
        root,
        "crashy/quiver.yaml",
        "id: crashy\ndescription: Workflows of the crash test\n",
    );
    for (tool, category) in [("look", "perception"), ("pay", "action")] {
        write(
            root,
            &format!("crashy/tools/{tool}/tool.yaml"),
            &format!(
                "description: Writes its step and key to the ledger\ncategory: {category}\napproval: never\ninput: {{type: object, properties: {{step: {{type: string}}}}, required: [step]}}\nrun: {{command: [python3, main.py]}}\n"
            ),
        );
        write(root, &format!("crashy/tools/{tool}/main.py"), LEDGER);
    }
    write(
        root,
        "crashy/workflows/flow.yaml",
        "description: Looks, pays, naps, looks again\nsteps:\n  - id: see\n    tool: look\n    with: {step: see}\n  - id: never\n    if: 'false'\n    tool: look\n    with: {step: never}\n  - id: pay\n    tool: pay\n    with: {step: pay}\n  - id: nap\n    wait: 300ms\n  - id: check\n    tool: look\n    with: {step: check}\noutput: {paid: '{{ steps.pay.output.step }}', checked: '{{ steps.check.output.step }}'}\n",
    );
}

/// The tool steps, in order: (step id, re-run safe).
const TOOL_STEPS: [(&str, bool); 3] = [("see", true), ("pay", false), ("check", true)];
/// Every step of `flow`.
const STEPS: [&str; 5] = ["see", "never", "pay", "nap", "check"];

struct Env {
    home: tempfile::TempDir,
    packages: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let packages = tempfile::tempdir().unwrap();
        crashy(packages.path());
        Env {
            home: tempfile::tempdir().unwrap(),
            packages,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", self.packages.path().to_str().unwrap()])
            .args(args)
            .env("QUIVER_HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env_remove("QUIVER_CONFIG")
            .env_remove("QUIVER_TEST_CRASH_AT")
            .stdin(Stdio::null());
        command
    }

    fn quiver(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `args` with the crash switch set: the process must die of SIGKILL.
    fn crash(&self, switch: &str, args: &[&str]) {
        let out = self
            .command(args)
            .env("QUIVER_TEST_CRASH_AT", switch)
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{switch}: {args:?} did not die of SIGKILL: {:?}\n{}",
            out.status,
            stderr(&out)
        );
    }

    fn json(&self, args: &[&str]) -> Value {
        parse(&self.quiver(args))
    }

    /// The id of the only run.
    fn only_run(&self) -> String {
        let runs = self.json(&["runs", "list", "--json"]);
        let runs = runs.as_array().unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0]["id"].as_str().unwrap().to_owned()
    }

    /// The ledger's lines, as (step, key).
    fn ledger(&self) -> Vec<(String, String)> {
        let path = find(self.home.path(), "data/crashy").join("ledger");
        fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (step, key) = l.split_once(' ').unwrap();
                (step.to_owned(), key.to_owned())
            })
            .collect()
    }

    /// How many times the ledger tool ran for `step` of run `id`, with that step's key.
    fn ran(&self, id: &str, step: &str) -> usize {
        let key = format!("{id}:{step}");
        let ledger = self.ledger();
        assert!(
            ledger.iter().all(|(s, k)| k.ends_with(&format!(":{s}"))),
            "a tool ran with another step's key: {ledger:?}"
        );
        ledger
            .iter()
            .filter(|(s, k)| s == step && *k == key)
            .count()
    }

    /// The restart: drives the run on, and settles it the way the ledger says when it is
    /// found in doubt (retry if the action did not run, else done).
    fn restart(&self, id: &str) -> Value {
        let out = self.quiver(&["runs", "wait", id, "--timeout", "2", "--json"]);
        let run = parse(&out);
        if run["status"] != "in_doubt" {
            return run;
        }
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let step = STEPS[usize::try_from(run["step"].as_u64().unwrap()).unwrap()];
        assert_eq!(step, "pay", "only the action waits in doubt: {run}");
        let settled = if self.ran(id, step) == 0 {
            self.json(&["runs", "retry", id, "--json", "--as", "crashy:master"])
        } else {
            self.json(&[
                "runs",
                "resolve",
                id,
                "--done",
                "--output",
                r#"{"step": "pay"}"#,
                "--json",
            ])
        };
        // Settling drives the run until it waits (the timer) or ends.
        assert!(
            matches!(settled["status"].as_str(), Some("waiting" | "completed")),
            "{settled}"
        );
        self.json(&["runs", "wait", id, "--timeout", "10", "--json"])
    }

    fn integrity(&self) -> String {
        let db = rusqlite::Connection::open(find_file(self.home.path(), "state.db")).unwrap();
        db.query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap()
    }
}

/// The folder whose path ends with `tail` under `root`.
fn find(root: &Path, tail: &str) -> PathBuf {
    walk(root, &|p| p.is_dir() && p.ends_with(tail))
}

fn find_file(root: &Path, name: &str) -> PathBuf {
    walk(root, &|p| {
        p.is_file() && p.file_name().is_some_and(|n| n == name)
    })
}

fn walk(root: &Path, fits: &dyn Fn(&Path) -> bool) -> PathBuf {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if fits(&path) {
                return path;
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    panic!("nothing fits under {}", root.display());
}

fn parse(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Crashes a run of `crashy.flow` at `switch`, restarts it, and checks the invariants.
fn crash_and_recover(switch: &str, window: Window<'_>) {
    let env = Env::new();
    env.crash(switch, &["run", "crashy.flow", "--wait", "--json"]);
    let id = env.only_run();
    let run = env.restart(&id);
    check(&env, &id, &run, switch, window);
}

/// Where a run was killed, as far as the test knows.
#[derive(Clone, Copy)]
enum Window<'a> {
    /// Never inside a tool step's attempt.
    Outside,
    /// Inside the attempt of this tool step; whether its tool had run (the kill came between
    /// its exit and the commit of its result).
    Step(&'a str, bool),
    /// Wherever an outside `kill -9` of any process driving it came: the steps with an
    /// attempt recovered as crashed were inside the window, the others outside.
    Anywhere,
}

impl Window<'_> {
    /// How many times the ledger tool of `step` may have run, given the steps with a crashed
    /// attempt.
    fn runs(
        self,
        step: &str,
        rerun_safe: bool,
        crashed: &[&str],
    ) -> std::ops::RangeInclusive<usize> {
        match self {
            Window::Step(at, true) if at == step && rerun_safe => 2..=2,
            Window::Anywhere if rerun_safe && crashed.contains(&step) => 1..=2,
            _ => 1..=1,
        }
    }
}

fn check(env: &Env, id: &str, run: &Value, switch: &str, window: Window<'_>) {
    assert_eq!(run["status"], "completed", "{switch}: {run}");
    assert_eq!(run["error"], Value::Null, "{switch}: {run}");
    assert_eq!(
        run["output"],
        serde_json::json!({"paid": "pay", "checked": "check"}),
        "{switch}"
    );
    let shown = env.json(&["runs", "show", id, "--json"]);
    let attempts = shown["attempts"].as_array().unwrap();
    for step in STEPS {
        let of: Vec<&str> = attempts
            .iter()
            .filter(|a| a["step_id"] == step)
            .map(|a| a["status"].as_str().unwrap())
            .collect();
        let results = of
            .iter()
            .filter(|s| matches!(**s, "ok" | "skipped"))
            .count();
        assert_eq!(results, 1, "{switch}: step {step} has {of:?}");
        assert!(
            of.iter()
                .all(|s| matches!(*s, "ok" | "skipped" | "crashed")),
            "{switch}: step {step} has {of:?}"
        );
    }
    // Once per key outside the crash window; inside it a re-run safe tool ran again with the
    // same key (at most twice), the action never twice.
    let crashed: Vec<&str> = attempts
        .iter()
        .filter(|a| a["status"] == "crashed")
        .map(|a| a["step_id"].as_str().unwrap())
        .collect();
    for (step, rerun_safe) in TOOL_STEPS {
        let ran = env.ran(id, step);
        assert!(
            window.runs(step, rerun_safe, &crashed).contains(&ran),
            "{switch}: {step} ran {ran} times (crashed attempts: {crashed:?})"
        );
    }
    assert_eq!(env.ran(id, "never"), 0, "{switch}");
    assert_eq!(env.integrity(), "ok", "{switch}");
}

#[test]
fn kill_9_after_the_run_row_and_each_attempt_started() {
    crash_and_recover("run_created", Window::Outside);
    for (n, (step, _)) in TOOL_STEPS.iter().enumerate() {
        crash_and_recover(
            &format!("attempt_started:{}", n + 1),
            Window::Step(step, false),
        );
    }
}

#[test]
fn kill_9_between_each_tool_exit_and_the_commit_of_its_result() {
    for (n, (step, _)) in TOOL_STEPS.iter().enumerate() {
        crash_and_recover(&format!("tool_exited:{}", n + 1), Window::Step(step, true));
    }
}

#[test]
fn kill_9_after_each_result_skip_and_wait_commit() {
    // The third result is the run's completion, committed with it.
    for n in 1..=TOOL_STEPS.len() {
        crash_and_recover(&format!("result_committed:{n}"), Window::Outside);
    }
    crash_and_recover("step_committed", Window::Outside);
    crash_and_recover("wait_stored", Window::Outside);
    crash_and_recover("wait_resolved", Window::Outside);
}

#[test]
fn kill_9_after_an_operators_retry_and_done() {
    // The action is found in doubt; the operator's decision is committed and the process dies
    // before the step runs again; the next restart goes on from the decision.
    for (switch, tool_ran) in [("attempt_started:2", false), ("tool_exited:2", true)] {
        let env = Env::new();
        env.crash(switch, &["run", "crashy.flow", "--wait", "--json"]);
        let id = env.only_run();
        let out = env.quiver(&["runs", "wait", &id, "--timeout", "1", "--json"]);
        assert_eq!(parse(&out)["status"], "in_doubt", "{switch}");
        let args: &[&str] = if tool_ran {
            &[
                "runs",
                "resolve",
                &id,
                "--done",
                "--output",
                r#"{"step": "pay"}"#,
            ]
        } else {
            &["runs", "retry", &id, "--as", "crashy:master"]
        };
        env.crash("operator_committed", args);
        let run = env.restart(&id);
        check(&env, &id, &run, switch, Window::Step("pay", tool_ran));
    }
}

#[path = "workflow_crash/soak.rs"]
mod soak;

/// `quiver bench resume` kills a `quiver serve` in a step (the crash switch) with runs parked
/// beside it, restarts it and times the resumed step: the restarted server resumed and
/// completed the run each round (else the bench fails).
#[test]
fn bench_resume_restarts_serve_and_resumes_the_crashed_step() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args([
            "bench", "resume", "--parked", "20", "--rounds", "2", "--json",
        ])
        .env("QUIVER_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = parse(&out);
    assert_eq!(
        (report["parked"].as_u64(), report["rounds"].as_u64()),
        (Some(20), Some(2))
    );
    let (resumed, completed) = (
        report["resumed_p50_ms"].as_f64().unwrap(),
        report["completed_p50_ms"].as_f64().unwrap(),
    );
    assert!(resumed > 0.0 && completed >= resumed, "{report}");
}
