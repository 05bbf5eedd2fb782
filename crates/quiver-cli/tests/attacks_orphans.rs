//! Issue 13, class 14 (a killed call vanishes), the approval part: a console card whose caller
//! was killed with SIGKILL is withdrawn at the next start of a runtime with a console and when
//! the queue is listed, and `quiver approvals approve` on it says it was withdrawn and records
//! nothing as approved; and a call killed mid-run is closed as `interrupted` at the next start.
//! Through the built binary and a real SQLite state folder.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use quiver_store::{ApprovalStatus, SqliteStore, Store};

mod support;

use support::json;

fn quiver_command(home: &Path, args: &[&str]) -> Command {
    let packages = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
    let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
    command
        .args(["--root", packages.to_str().unwrap()])
        .args(args)
        .env("QUIVER_HOME", home)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("QUIVER_CONFIG")
        .stdin(Stdio::null());
    command
}

fn quiver(home: &Path, args: &[&str]) -> Output {
    quiver_command(home, args).output().unwrap()
}

/// Starts a call whose consent card waits in the console.
fn waiting_call(home: &Path) -> Child {
    quiver_command(
        home,
        &[
            "call",
            "group-admin.kick_member",
            "--args",
            r#"{"user_id": "10006"}"#,
            "--console",
            "120",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
}

/// The id of the first pending card not in `skip`, once there is one.
fn pending_card(home: &Path, skip: &[String]) -> String {
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no card appeared"
        );
        let pending = json(&quiver(home, &["approvals", "list", "--json"]));
        let id = pending
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["id"].as_str())
            .find(|id| !skip.iter().any(|s| s == id));
        if let Some(id) = id {
            return id.to_owned();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status(home: &Path, id: &str) -> (ApprovalStatus, Option<String>) {
    let store = SqliteStore::open(home.join("state.db")).unwrap();
    let approval = store.approval(id).unwrap().unwrap();
    (approval.status, approval.answered_by)
}

#[test]
fn a_card_whose_caller_was_killed_is_withdrawn_and_approving_it_records_nothing() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    // The card states what the package may do, in words.
    let mut first = waiting_call(home);
    let first_id = pending_card(home, &[]);
    let listed = quiver(home, &["approvals", "list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains(&first_id) && text.contains(" may:"), "{text}");
    let (live, _) = status(home, &first_id);
    assert_eq!(live, ApprovalStatus::Pending, "a live caller's card stays");

    // 1. Killed, then another runtime with a console starts: the card is withdrawn.
    first.kill().unwrap();
    first.wait().unwrap();
    let next = quiver(
        home,
        &[
            "call",
            "group-admin.kick_member",
            "--args",
            r#"{"user_id": "10007"}"#,
            "--console",
            "1",
        ],
    );
    assert_eq!(json(&next)["outcome"]["status"], "refused");
    assert_eq!(status(home, &first_id), (ApprovalStatus::Withdrawn, None));

    // 2. Killed, then the queue is listed: withdrawn, and said so.
    let mut second = waiting_call(home);
    let second_id = pending_card(home, std::slice::from_ref(&first_id));
    second.kill().unwrap();
    second.wait().unwrap();
    let listed = quiver(home, &["approvals", "list"]);
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).trim(),
        "no pending approvals"
    );
    let said = String::from_utf8_lossy(&listed.stderr);
    assert!(said.contains(&format!("{second_id} withdrawn")), "{said}");

    // Answering either says it was withdrawn, and nothing is recorded as approved.
    for id in [&first_id, &second_id] {
        let out = quiver(home, &["approvals", "approve", id]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("was withdrawn") && said.contains("nothing was approved"),
            "{said}"
        );
        assert_eq!(status(home, id), (ApprovalStatus::Withdrawn, None), "{id}");
    }
}

/// A package whose tool sleeps a minute, in `root`.
fn sleepy_package(root: &Path) {
    let tool = root.join("sleepy/tools/nap");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(
        root.join("sleepy/quiver.yaml"),
        "id: sleepy\ndescription: Naps\n",
    )
    .unwrap();
    std::fs::write(
        tool.join("tool.yaml"),
        "description: Naps a minute\ncategory: perception\napproval: never\nexpose: true\ntimeout: 120\nrun: {command: [python3, nap.py]}\n",
    )
    .unwrap();
    std::fs::write(tool.join("nap.py"), "import time\ntime.sleep(60)\n").unwrap();
}

fn records(home: &Path, kind: Option<quiver_store::AuditKind>) -> Vec<quiver_store::AuditRecord> {
    let store = SqliteStore::open(home.join("state.db")).unwrap();
    store
        .query_audit(&quiver_store::AuditQuery {
            kind,
            ..Default::default()
        })
        .unwrap()
}

#[test]
fn a_call_killed_mid_run_is_recorded_as_started_and_closed_as_interrupted_at_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let packages = tempfile::tempdir().unwrap();
    sleepy_package(packages.path());
    let command = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .args(["--root", packages.path().to_str().unwrap()])
            .args(args)
            .env("QUIVER_HOME", home)
            .env("HOME", home)
            .env_remove("QUIVER_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    };
    let mut call = command(&["call", "sleepy.nap", "--yes"]).spawn().unwrap();
    let started = Instant::now();
    let call_id = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the call was never recorded as started"
        );
        if let Some(id) = records(home, Some(quiver_store::AuditKind::CallStarted))
            .first()
            .and_then(|r| r.entry.call_id.clone())
        {
            break id;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // SIGKILL mid-call: nothing of the process can write an end.
    call.kill().unwrap();
    call.wait().unwrap();
    assert!(
        records(home, None)
            .iter()
            .all(|r| r.entry.call_id.as_deref() != Some(&call_id)),
        "no end was written by the killed process"
    );
    // The next start of any command that opens the runtime closes it.
    let next = command(&["call", "tool_search", "--args", r#"{"query": "nap"}"#])
        .status()
        .unwrap();
    assert!(next.success());
    let ended: Vec<_> = records(home, None)
        .into_iter()
        .filter(|r| r.entry.call_id.as_deref() == Some(&call_id))
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(
        ended[0].entry.status,
        quiver_store::AuditStatus::Interrupted
    );
    assert_eq!(ended[0].entry.tool.as_deref(), Some("sleepy.nap"));
    // `quiver audit` shows it so.
    let audit = quiver_command(home, &["audit", "--json"]).output().unwrap();
    let listed = json(&audit);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["call_id"] == call_id.as_str() && r["status"] == "interrupted"),
        "{listed}"
    );
}
