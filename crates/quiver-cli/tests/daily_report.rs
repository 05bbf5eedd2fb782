//! The `daily-report` example as a real workflow, through the `quiver` binary: its notes step,
//! two agent steps on a scripted model (a fake OpenAI server on 127.0.0.1), a person's approval,
//! then the private, dangerous `publish` step, which needs a person of its own and writes the
//! report into the package's data folder.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use quiver_agent::fake::{Api, FakeServer, Move};
use serde_json::Value;

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
    fn packages(&self) -> PathBuf {
        self.dir.path().join("packages")
    }

    fn quiver(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_quiver"))
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
    let started = env.json(&[
        "run",
        "daily-report.compile",
        "--input",
        r#"{"date": "2026-12-02"}"#,
        "--json",
    ]);
    let id = started["id"].as_str().unwrap().to_owned();
    // Whatever the notes step needed (consent to another package, asked of nobody), the run
    // parks on a person; answer each question as bob until it reaches the report's approval.
    let mut answered = Vec::new();
    let mut run = started;
    for _ in 0..4 {
        if run["status"] == "completed" {
            break;
        }
        let listed = env.json(&["approvals", "list", "--json"]);
        let parked = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["kind"] == "run" && p["id"] == id.as_str())
            .unwrap_or_else(|| panic!("run {id} is {run} and not parked: {listed}"))
            .clone();
        answered.push(parked.clone());
        // The one who started the run never approves it.
        let own = env.quiver(&["approvals", "approve", &id]);
        assert_eq!(own.status.code(), Some(1), "{parked}");
        let out = env.json(&["approvals", "approve", &id, "--as", "bob:trusted", "--json"]);
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
    let outbox = env.dir.path().join("home/data/daily-report/outbox");
    let files: Vec<_> = std::fs::read_dir(&outbox).unwrap().collect();
    assert_eq!(files.len(), 1, "{outbox:?}");
    let report = std::fs::read_to_string(files[0].as_ref().unwrap().path()).unwrap();
    assert!(report.starts_with("# 2026-12-02") && report.contains("完成发布前检查"));
    assert_eq!(
        run["output"]["report"],
        "【日报】2026-12-02：完成发布前检查。"
    );
    assert_eq!(run["output"]["published"]["published"], true);
    // Both agent steps asked the model.
    assert_eq!(server.requests().len(), 2);
}
