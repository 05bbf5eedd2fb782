//! The cards a person sees state what a yes lets run: the consent card the package's
//! permissions (its ceiling), the approval card the tool's, open-ended ones flagged; and an
//! open-ended read makes `on-risk` ask for a reading tool.

use quiver_runtime::RuntimeConfig;
use quiver_runtime::approver::{Answer, Question};
use serde_json::json;

use super::common::{build, cli_session, fixture, owner, write};

#[test]
fn consent_shows_the_package_and_approval_the_tool_with_open_ended_reads_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    fixture(&packages);
    write(
        &packages,
        "wide/quiver.yaml",
        "id: wide\ndescription: Reads widely\npermissions:\n  filesystem: {read: [/, /etc/hosts]}\n  env: [SECRET]\n",
    );
    let tool = |name: &str, read: &str| {
        write(
            &packages,
            &format!("wide/tools/{name}/tool.yaml"),
            &format!(
                "description: Look at files\ncategory: perception\nexpose: true\npermission:\n  filesystem: {{read: [{read}]}}\nrun: {{command: [a]}}\n"
            ),
        )
    };
    tool("peek", "/etc/hosts");
    tool("scan", "/");
    let db = dir.path().join("state.db");
    let h = build(dir, &packages, db, RuntimeConfig::default(), None);
    let s = cli_session(&h);
    h.person.answer(&[Answer::AllowForSession, Answer::Allow]);
    let mut turn = h.runtime.begin_turn(&s, owner(), "").unwrap();

    // A concrete read: consent only, and it names everything the package may do.
    turn.call("wide__peek", json!({})).unwrap();
    let cards = h.person.cards();
    assert_eq!(cards.len(), 1, "{cards:#?}");
    assert_eq!(cards[0].question, Question::Consent);
    let lines: Vec<String> = cards[0]
        .permissions
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "read `/` [open-ended: the whole file system]",
            "read `/etc/hosts`",
            "read the runtime's environment variable `SECRET`",
        ]
    );
    // Reading `/` is open-ended: `on-risk` asks, and the card names the tool's own read.
    h.person.clear();
    turn.call("wide__scan", json!({})).unwrap();
    let cards = h.person.cards();
    assert_eq!(cards.len(), 1, "{cards:#?}");
    assert_eq!(cards[0].question, Question::Approval);
    assert!(
        cards[0].reasons.iter().any(|r| r.contains("open-ended")),
        "{:?}",
        cards[0].reasons
    );
    let lines: Vec<String> = cards[0]
        .permissions
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(lines, ["read `/` [open-ended: the whole file system]"]);
}
