//! The `daily-report` example as a real workflow, through the `quiver` binary: its notes step,
//! two agent steps on a scripted model (a fake OpenAI server on 127.0.0.1), a person's approval,
//! then the private, dangerous `publish` step, which needs a person of its own and writes the
//! report into the package's data folder. Started by hand (`quiver run`) or by the model in
//! `quiver chat`; either way its owner answers its questions in `quiver approvals`, and a
//! question asked once nobody waits on the run parks it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use quiver_agent::fake::{Api, FakeServer, Move};
use serde_json::{Value, json};

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// The example packages `daily-report` and `notes`, the scripted model as the configured
    /// provider, and the sandbox required.
    fn new(server: &FakeServer) -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
        for package in ["daily-report", "notes"] {
            copy(&examples.join(package), &env.packages().join(package));
        }
        std::fs::write(
            env.dir.path().join("agent.yaml"),
            format!(
                "default: fake\nproviders:\n  fake:\n    kind: openai\n    base_url: {}\n    model: fake-model\n    retry_backoff_ms: 1\n",
                server.url()
            ),
        )
        .unwrap();
        // Tools run in the sandbox, as in production.
        std::fs::write(
            env.dir.path().join("config.yaml"),
            "runtime:\n  allow_unsandboxed: false\n",
        )
        .unwrap();
        env
    }

    /// The run parked on a person, as `quiver approvals list` shows it.
    fn parked(&self, id: &str) -> Value {
        let listed = self.json(&["approvals", "list", "--json"]);
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["kind"] == "run" && p["id"] == id)
            .unwrap_or_else(|| panic!("run {id} is not parked: {listed}"))
            .clone()
    }

    /// The one report published into the package's data folder.
    fn published(&self) -> String {
        let outbox = self.dir.path().join("home/data/daily-report/outbox");
        let files: Vec<_> = std::fs::read_dir(&outbox).unwrap().collect();
        assert_eq!(files.len(), 1, "{outbox:?}");
        std::fs::read_to_string(files[0].as_ref().unwrap().path()).unwrap()
    }

    fn packages(&self) -> PathBuf {
        self.dir.path().join("packages")
    }

    fn quiver(&self, args: &[&str]) -> Output {
        self.quiver_with(&[], args)
    }

    /// `quiver` with `vars` set in its environment too.
    fn quiver_with(&self, vars: &[(&str, &str)], args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .envs(vars.iter().copied())
            .args(["--root", self.packages().to_str().unwrap()])
            .args(args)
            .env("QUIVER_HOME", self.dir.path().join("home"))
            .env("HOME", self.dir.path().join("home"))
            .env("QUIVER_CONFIG", self.dir.path().join("config.yaml"))
            .env("QUIVER_AGENT_CONFIG", self.dir.path().join("agent.yaml"))
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_PROVIDER")
            .env_remove("QUIVER_BASE_URL")
            .env_remove("QUIVER_MODEL")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.quiver(args);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

#[test]
fn the_daily_report_is_drafted_polished_approved_and_published() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    // The reporter's draft, then the editor's polish.
    server.push([
        Move::text("日报 2026-12-02：完成了发布前检查。"),
        Move::text("【日报】2026-12-02：完成发布前检查。"),
    ]);
    let env = Env::new(&server);
    let started = env.json(&[
        "run",
        "daily-report.compile",
        "--input",
        r#"{"date": "2026-12-02"}"#,
        "--json",
    ]);
    let id = started["id"].as_str().unwrap().to_owned();
    // Whatever the notes step needed (consent to another package, asked of nobody), the run
    // parks on a person; its owner, who started it, answers each question until it ends.
    let mut answered = Vec::new();
    let mut run = started;
    for _ in 0..4 {
        if run["status"] == "completed" {
            break;
        }
        answered.push(env.parked(&id));
        let out = env.json(&["approvals", "approve", &id, "--json"]);
        run = out.get("run").cloned().unwrap_or(out);
    }
    assert_eq!(run["status"], "completed", "{run}");
    let text = answered
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    // A person approved the polished report, then the dangerous publish call itself.
    assert!(text.contains("完成发布前检查"), "{text}");
    assert!(
        answered
            .iter()
            .any(|p| p.to_string().contains("daily-report.publish")),
        "{text}"
    );
    // Published once, into the package's own data folder.
    let report = env.published();
    assert!(report.starts_with("# 2026-12-02") && report.contains("完成发布前检查"));
    assert_eq!(
        run["output"]["report"],
        "【日报】2026-12-02：完成发布前检查。"
    );
    assert_eq!(run["output"]["published"]["published"], true);
    // Both agent steps asked the model.
    assert_eq!(server.requests().len(), 2);
}

/// Issue 22 item 5: the model starts the run in `quiver chat`; once the chat is over, its
/// owner approves the report in `quiver approvals`, and the dangerous publish step, which needs
/// a person and finds none, parks the run for them instead of failing it ("nobody is
/// available…").
#[test]
fn a_run_the_model_started_in_chat_parks_its_publish_step_for_its_owner() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([
        Move::call("daily-report__compile", json!({"date": "2026-12-02"})),
        Move::text("日报 2026-12-02：完成了发布前检查。"),
        Move::text("【日报】2026-12-02：完成发布前检查。"),
        Move::text("日报写好了，等你确认后发布。"),
    ]);
    let env = Env::new(&server);
    let chat = env.json(&["chat", "-m", "写今天的日报", "--json", "--yes"]);
    let call = &chat["calls"][0];
    assert_eq!(call["name"], "daily-report__compile", "{chat}");
    assert_eq!(call["result"]["status"], "waiting", "{chat}");
    let id = call["result"]["run_id"].as_str().unwrap().to_owned();
    // Issue 22 item 7: in a later chat the model reads the run it started with `get_run`,
    // offered in the chat as wherever runs can be started.
    server.push([
        Move::call("get_run", json!({"run_id": id})),
        Move::text("日报在等你确认。"),
    ]);
    let read = env.json(&["chat", "-m", "日报怎么样了？", "--json"]);
    let offered = quiver_agent::fake::offered_tools(&server.requests()[4].body);
    assert!(offered.iter().any(|t| t == "get_run"), "{offered:?}");
    let got = &read["calls"][0];
    assert_eq!(
        (&got["name"], &got["status"]),
        (&json!("get_run"), &json!("ok")),
        "{read}"
    );
    assert_eq!(got["result"]["status"], "waiting", "{read}");
    assert_eq!(
        got["result"]["waiting_for"][0]["kind"], "approval",
        "{read}"
    );
    // Someone else's model does not see it.
    server.push([
        Move::call("get_run", json!({"run_id": id})),
        Move::text("没有这个运行。"),
    ]);
    let other = env.json(&["chat", "-m", "那个运行呢？", "--json", "--as", "eve:user"]);
    assert_eq!(other["calls"][0]["status"], "error", "{other}");
    assert!(
        other["calls"][0]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("that you may read"),
        "{other}"
    );
    // The report waits for its owner's approval: the local owner, who started the chat.
    let parked = env.parked(&id);
    assert_eq!(parked["question"], "step", "{parked}");
    assert!(parked.to_string().contains("完成发布前检查"), "{parked}");
    let out = env.json(&["approvals", "approve", &id, "--json"]);
    let run = out.get("run").cloned().unwrap_or(out);
    // Nobody is there to answer the dangerous publish call: the run parks, it does not fail.
    assert_eq!(run["status"], "waiting", "{run}");
    let parked = env.parked(&id);
    assert_eq!(parked["question"], "call", "{parked}");
    assert_eq!(parked["card"]["tool"], "daily-report.publish", "{parked}");
    let out = env.json(&["approvals", "approve", &id, "--json"]);
    let run = out.get("run").cloned().unwrap_or(out);
    assert_eq!(run["status"], "completed", "{run}");
    assert!(env.published().contains("完成发布前检查"));
    assert_eq!(server.requests().len(), 8);
}

/// Issue 22 item 6: `quiver call` of the workflow runs its two agent steps on the configured
/// models (it failed the run: "needs Quiver's agent loop"), then waits for the report's
/// approval.
#[test]
fn quiver_call_runs_the_workflows_agent_steps() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([
        Move::text("日报 2026-12-02：完成了发布前检查。"),
        Move::text("【日报】2026-12-02：完成发布前检查。"),
    ]);
    let env = Env::new(&server);
    let out = env.json(&[
        "call",
        "daily-report__compile",
        "--args",
        r#"{"date": "2026-12-02"}"#,
        "--yes",
    ]);
    let outcome = &out["outcome"];
    assert_eq!(outcome["status"], "ok", "{out}");
    assert_eq!(outcome["content"]["status"], "waiting", "{out}");
    assert_eq!(server.requests().len(), 2);
    let id = outcome["content"]["run_id"].as_str().unwrap();
    let parked = env.parked(id);
    assert!(parked.to_string().contains("完成发布前检查"), "{parked}");
}

/// Issue 22 item 5: the process dies while an attended step's question is out (here `quiver
/// chat`, killed right after the question is marked on its attempt; the same holds for `quiver
/// serve` and its MCP client). The step's action tool never started, so the next driver asks
/// again (it parks: nobody waits on the run now) instead of leaving the step in doubt.
#[test]
fn a_process_killed_during_a_steps_question_leaves_no_step_in_doubt() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([Move::call("outbox__send", json!({"text": "hi"}))]);
    let env = Env::new(&server);
    let root = env.packages();
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "outbox/quiver.yaml",
        "id: outbox\ndescription: Sends a text after a person approves each send\n",
    );
    write(
        "outbox/tools/post/tool.yaml",
        "description: Posts a text (asks a person every time)\ncategory: action\napproval: always\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [python3, main.py]}\n",
    );
    write(
        "outbox/tools/post/main.py",
        "import json, os, sys\nrequest = json.load(sys.stdin)\nopen(os.path.join(os.environ['QUIVER_DATA_DIR'], 'posted'), 'a').write('x')\nprint(json.dumps({'posted': True}))\n",
    );
    write(
        "outbox/workflows/send.yaml",
        "description: Sends a text\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nsteps:\n  - id: post\n    tool: post\n    with: {text: '{{ input.text }}'}\n",
    );
    let killed = env.quiver_with(
        &[("QUIVER_TEST_CRASH_AT", "question_asked")],
        &["chat", "-m", "发一下", "--json", "--yes"],
    );
    assert!(!killed.status.success(), "{killed:?}");
    let runs = env.json(&["runs", "list", "--json"]);
    let id = runs[0]["id"].as_str().unwrap().to_owned();
    let run = env.json(&["runs", "wait", &id, "--timeout", "1", "--json"]);
    assert_eq!(run["status"], "waiting", "{run}");
    let shown = env.json(&["runs", "show", &id, "--json"]);
    let statuses: Vec<_> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["crashed", "waiting"], "{shown}");
    assert_eq!(env.parked(&id)["card"]["tool"], "outbox.post");
    // The tool never ran; its owner's answer runs it once.
    let posted = env.dir.path().join("home/data/outbox/posted");
    assert!(!posted.exists());
    let done = env.json(&["approvals", "approve", &id, "--json"]);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(std::fs::read_to_string(posted).unwrap(), "x");
}
