//! Issue 22: what a turn is over MCP (docs/mcp.md "Turns"), and the answers a card accepts.

use std::path::Path;

use quiver_mcp::McpConfig;
use rmcp::model::ProtocolVersion;
use serde_json::json;

use super::harness::{Scripted, body, call, connect, front, front_over};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `notes`, whose skill pre-approves its `approval: always` tool.
fn notes(root: &Path) {
    write(root, "notes/quiver.yaml", "id: notes\ndescription: Notes\n");
    write(
        root,
        "notes/SKILL.md",
        "---\nname: notes\ndescription: Take notes\nallowed-tools: add_note\n---\nSave notes with add_note.\n",
    );
    write(
        root,
        "notes/tools/add_note/tool.yaml",
        "description: Save a note\ncategory: action\napproval: always\nexpose: true\ninput: {type: object, properties: {text: {type: string}}, required: [text]}\nrun: {command: [a]}\n",
    );
}

/// Item 3: without a turn id, a skill's `allowed-tools` pre-approval serves at most the next
/// call: the second call of an `approval: always` tool is asked about again.
#[tokio::test(flavor = "multi_thread")]
async fn a_pre_approval_without_a_turn_id_ends_with_the_next_call() {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("packages");
        notes(&root);
        let script = Scripted::era(version.clone());
        let client = connect(
            front_over(&[root], dir.path(), McpConfig::default()),
            script.clone(),
        )
        .await;
        let read = call(&client, "read_skill", json!({"id": "notes"})).await;
        assert_eq!(body(&read)["status"], "activated", "{version}");
        let add = |text: &str| json!({"name": "notes__add_note", "arguments": {"text": text}});
        // The next call: consent is asked (pre-approval never grants it), the approval is not.
        script.answer("accept", Some("allow_conversation"));
        let first = call(&client, "call_tool", add("milk")).await;
        assert_eq!(
            body(&first)["saved"],
            "milk",
            "{version}: {:?}",
            body(&first)
        );
        assert_eq!(script.asked().len(), 1, "{version}: {:?}", script.asked());
        // The call after it: the widening has ended, so `always` asks again.
        script.answer("decline", None);
        let second = call(&client, "call_tool", add("eggs")).await;
        assert!(
            body(&second)["error"]
                .as_str()
                .unwrap()
                .starts_with("refused"),
            "{version}: {:?}",
            body(&second)
        );
        let asked = script.asked();
        assert_eq!(asked.len(), 2, "{version}: {asked:?}");
        assert!(
            asked[1].starts_with("Run `notes.add_note`?"),
            "{}",
            asked[1]
        );
    }
}

/// Item 14: a dangerous card offers only "allow once" and "deny"; a client that answers
/// "allow for this conversation" anyway has not said yes.
#[tokio::test(flavor = "multi_thread")]
async fn a_dangerous_card_takes_no_conversation_wide_yes() {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let dir = tempfile::tempdir().unwrap();
        let script = Scripted::era(version.clone());
        let client = connect(front(dir.path()), script.clone()).await;
        script.answer("accept", Some("allow_conversation"));
        script.answer("accept", Some("allow_conversation"));
        let kick = json!({"name": "group-admin__kick_member", "arguments": {"user_id": "10006"}});
        let refused = call(&client, "call_tool", kick).await;
        assert!(
            body(&refused)["error"]
                .as_str()
                .unwrap()
                .starts_with("refused"),
            "{version}: {:?}",
            body(&refused)
        );
        assert_eq!(script.asked().len(), 2, "{version}: consent, then approval");
    }
}
