//! The config file's `runtime:` section (agent profiles, limits) and the console's approval
//! queue (`quiver call --console` answered by `quiver approvals` from another process), through
//! the built binary and a real SQLite file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::json;

fn quiver_command(home: &Path, config: Option<&Path>, args: &[&str]) -> Command {
    let packages = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
    let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
    command
        .args(["--root", packages.to_str().unwrap()])
        .args(args)
        .env("QUIVER_HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("QUIVER_CONFIG")
        .stdin(Stdio::null());
    match config {
        Some(path) => command.env("QUIVER_CONFIG", path),
        // A config file in the test's HOME would otherwise be read.
        None => command.env("HOME", home),
    };
    command
}

fn quiver(home: &Path, config: Option<&Path>, args: &[&str]) -> Output {
    quiver_command(home, config, args).output().unwrap()
}

#[test]
fn agent_profiles_from_the_config_file_decide_the_meta_tools() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    std::fs::write(
        &config,
        "# 客服只能搜索，不能读技能\nruntime:\n  agents:\n    support:\n      meta_tools: [tool_search]\n  search_results: 2\n",
    )
    .unwrap();
    let read = |agent: &str| {
        json(&quiver(
            home.path(),
            Some(&config),
            &[
                "call",
                "read_skill",
                "--args",
                r#"{"id": "weather"}"#,
                "--agent",
                agent,
            ],
        ))
    };
    assert_eq!(read("support")["outcome"]["status"], "unknown");
    assert_eq!(read("chat")["outcome"]["status"], "ok");
    // A profile listed nowhere has no meta-tools at all.
    assert_eq!(read("nobody")["outcome"]["status"], "unknown");
    let search = json(&quiver(
        home.path(),
        Some(&config),
        &[
            "call",
            "tool_search",
            "--args",
            r#"{"query": "天气 笔记 群"}"#,
            "--agent",
            "support",
        ],
    ));
    assert_eq!(search["outcome"]["status"], "ok", "{search}");
    let results = search["outcome"]["content"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "search_results: 2 caps the results");
}

#[test]
fn a_config_file_that_says_something_impossible_is_refused_with_its_path() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    std::fs::write(
        &config,
        "runtime:\n  agents:\n    chat: {meta_tools: [read_skil]}\n",
    )
    .unwrap();
    let out = quiver(
        home.path(),
        Some(&config),
        &["call", "read_skill", "--args", r#"{"id": "weather"}"#],
    );
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("config.yaml"), "{stderr}");
    assert!(
        stderr.contains("`read_skil`, which is not a meta-tool"),
        "{stderr}"
    );
    std::fs::write(&config, "runtime:\n  max_loded: 3\n").unwrap();
    let out = quiver(
        home.path(),
        Some(&config),
        &["call", "read_skill", "--args", r#"{"id": "weather"}"#],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_loded"), "{stderr}");
}

#[test]
fn console_answers_a_waiting_call_from_another_process() {
    let home = tempfile::tempdir().unwrap();
    let mut call = quiver_command(
        home.path(),
        None,
        &[
            "call",
            "group-admin.kick_member",
            "--args",
            r#"{"user_id": "10006", "reason": "发广告"}"#,
            "--console",
            "60",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let started = Instant::now();
    let mut answered = Vec::new();
    while call.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "the call never finished"
        );
        let pending = json(&quiver(home.path(), None, &["approvals", "list", "--json"]));
        for approval in pending.as_array().unwrap() {
            let id = approval["id"].as_str().unwrap().to_owned();
            let out = quiver(home.path(), None, &["approvals", "approve", &id]);
            assert!(out.status.success(), "{out:?}");
            // An approval is answered exactly once.
            let again = quiver(home.path(), None, &["approvals", "deny", &id]);
            assert_eq!(again.status.code(), Some(1));
            answered.push(approval.clone());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = call.wait_with_output().unwrap();
    let v = json(&out);
    // Consent for the package, then the dangerous tool's own approval, both from the console.
    assert_eq!(answered.len(), 2, "{answered:#?}");
    assert_eq!(answered[1]["tool"], "group-admin.kick_member");
    assert_eq!(answered[1]["risk_category"], "member");
    assert_ne!(v["outcome"]["status"], "refused", "{v}");
    let session = v["session"].as_str().unwrap();
    let audit = json(&quiver(
        home.path(),
        None,
        &["audit", "--json", "--session", session],
    ));
    let decisions = audit[0]["decisions"].to_string();
    assert!(decisions.contains("console"), "{decisions}");
}

#[test]
fn without_an_answer_the_console_times_out_and_the_call_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = quiver(
        home.path(),
        None,
        &[
            "call",
            "group-admin.kick_member",
            "--args",
            r#"{"user_id": "10006"}"#,
            "--console",
            "1",
        ],
    );
    let v = json(&out);
    assert_eq!(v["outcome"]["status"], "refused", "{v}");
    // Nothing is left pending: the unanswered card expired.
    let pending = json(&quiver(home.path(), None, &["approvals", "list", "--json"]));
    assert_eq!(pending, serde_json::json!([]));
}

#[test]
fn operator_switches_persist_between_commands() {
    let home = tempfile::tempdir().unwrap();
    let call = |tool: &str, args: &str| {
        json(&quiver(
            home.path(),
            None,
            &["call", tool, "--args", args, "--yes"],
        ))["outcome"]["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let weather = r#"{"city": "北京"}"#;
    assert!(
        quiver(home.path(), None, &["disable", "weather"])
            .status
            .success()
    );
    assert_eq!(call("weather__forecast", weather), "unknown");
    let out = quiver(home.path(), None, &["control", "read-only"]);
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(shown.contains("control: read-only"), "{shown}");
    assert!(shown.contains("packages off: weather"), "{shown}");
    assert_eq!(call("notes.add_note", r#"{"text": "x"}"#), "refused");
    assert!(
        quiver(home.path(), None, &["enable", "weather"])
            .status
            .success()
    );
    assert!(
        quiver(home.path(), None, &["control", "normal"])
            .status
            .success()
    );
    assert_ne!(call("weather__forecast", weather), "unknown");
    assert_ne!(call("notes.add_note", r#"{"text": "x"}"#), "refused");
}

/// Every command reads the config file once, through the host (issue 12: `serve` read it up to
/// eight times, `call` three). The host logs each read at debug level.
#[test]
fn the_config_file_is_read_once_per_command() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    std::fs::write(
        &config,
        "runtime:\n  search_results: 3\n  agents:\n    support: {meta_tools: [tool_search]}\nsearch:\n  dense_weight: 0.6\nmcp:\n  stdio: {user: local}\n",
    )
    .unwrap();
    let cases: [&[&str]; 6] = [
        &[
            "call",
            "weather.forecast",
            "--args",
            r#"{"city": "北京"}"#,
            "--yes",
        ],
        &["call", "tool_search", "--args", r#"{"query": "天气"}"#],
        &["search", "天气"],
        &["list"],
        &["inspect", "--cost"],
        &["serve", "--stdio"],
    ];
    for args in cases {
        let out = quiver_command(home.path(), Some(&config), args)
            .env("QUIVER_LOG", "quiver_host=debug")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reads = stderr.matches("reading the config file").count();
        assert_eq!(reads, 1, "{args:?}: {stderr}");
    }
}

/// A section's error names the config file and the line the section starts on.
#[test]
fn config_errors_carry_the_file_and_the_line() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    std::fs::write(&config, "# limits\nruntime:\n  max_loaded: 0\n").unwrap();
    let out = quiver(home.path(), Some(&config), &["list"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2: `runtime`", config.display())),
        "{stderr}"
    );
}

/// Issue 12 item 5: without an embedding model, "search is BM25 only" is said once where
/// search matters (`search`, `serve` start-up), not on every `call`; and the libraries'
/// warnings reach stderr (`QUIVER_LOG`, default `warn`).
#[test]
fn the_bm25_note_appears_where_search_matters_only() {
    let home = tempfile::tempdir().unwrap();
    let cases: [(&[&str], usize); 5] = [
        (&["search", "天气"], 1),
        (&["serve", "--stdio"], 1),
        (
            &["call", "tool_search", "--args", r#"{"query": "天气"}"#],
            0,
        ),
        (
            &[
                "call",
                "weather.forecast",
                "--args",
                r#"{"city": "北京"}"#,
                "--yes",
            ],
            0,
        ),
        (&["list"], 0),
    ];
    for (args, notes) in cases {
        let out = quiver(home.path(), None, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("search is BM25 only").count(),
            notes,
            "{args:?}: {stderr}"
        );
    }
}
