//! A restart keeps every session's state: after the store is dropped, and after the process
//! that wrote it dies without closing anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::json;

use quiver_store::{
    ApprovalCard, ApprovalStatus, AuditEntry, AuditKind, AuditQuery, Decision, NewSession,
    SqliteStore, Store,
};

/// Set by the parent test to make [`child_writes_then_aborts`] do its work.
const CHILD_DB: &str = "QUIVER_STORE_CHILD_DB";

/// Everything a session can hold, written through the trait.
fn write_state(store: &dyn Store, id: &str) {
    let mut new = NewSession::new(id, "chat");
    new.origin = json!({"platform": "qq", "scope": "group", "channel": "42"});
    new.principal = json!({"user": "u1", "role": "trusted"});
    new.catalog_version = "3".into();
    new.prompt_versions = json!({"persona": 2});
    store.create_session(&new).unwrap();
    store
        .set_session_state(id, &json!({"turns": 5, "muted": false}))
        .unwrap();
    for tool in ["weather.forecast", "mail.send", "notes.add"] {
        store.load_tool(id, tool, 12).unwrap();
    }
    store.open_package(id, "weather").unwrap();
    store.activate_skill(id, "weather").unwrap();
    store.set_consent(id, "mail", true, "u1").unwrap();
    store.set_consent(id, "bank", false, "u1").unwrap();
    store.grant_once(id, "mail.send", "u1").unwrap();
    let card = |approval: &str| ApprovalCard {
        id: format!("{id}-{approval}"),
        session: id.into(),
        package: "qq".into(),
        tool: "qq.group_kick".into(),
        arguments: json!({"user": 7}),
        reason: "dangerous".into(),
        risk_category: Some("member".into()),
        created_at: 1,
        permissions: Vec::new(),
        waiter: None,
        question: Default::default(),
    };
    store.enqueue_approval(&card("answered")).unwrap();
    store.enqueue_approval(&card("pending")).unwrap();
    store
        .answer_approval(&format!("{id}-answered"), Decision::Approve, "op", None)
        .unwrap();
    let mut audit = AuditEntry::new(AuditKind::Call, id);
    audit.tool = Some("weather.forecast".into());
    store.append_audit(&audit).unwrap();
}

fn check_state(store: &dyn Store, id: &str) {
    let session = store.session(id).unwrap().expect("the session survives");
    assert_eq!(session.state, json!({"turns": 5, "muted": false}));
    assert_eq!(session.origin["channel"], "42");
    assert_eq!(session.catalog_version, "3");
    assert_eq!(
        store.loaded_tools(id).unwrap(),
        ["notes.add", "mail.send", "weather.forecast"]
    );
    assert_eq!(store.opened_packages(id).unwrap(), ["weather"]);
    assert_eq!(store.active_skills(id).unwrap(), ["weather"]);
    assert!(store.consent(id, "mail").unwrap().unwrap().granted);
    assert!(!store.consent(id, "bank").unwrap().unwrap().granted);
    assert!(store.once_approval(id, "mail.send").unwrap().is_some());
    assert_eq!(
        store
            .approval(&format!("{id}-answered"))
            .unwrap()
            .unwrap()
            .status,
        ApprovalStatus::Approved
    );
    assert_eq!(store.pending_approvals(Some(id)).unwrap().len(), 1);
    let audit = AuditQuery {
        session: Some(id.into()),
        ..AuditQuery::default()
    };
    assert_eq!(store.query_audit(&audit).unwrap().len(), 1);
}

#[test]
fn state_survives_dropping_and_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/folder/quiver.db");
    {
        let store = SqliteStore::open(&db).unwrap();
        for id in ["s1", "s2"] {
            write_state(&store, id);
        }
    }
    let store = SqliteStore::open(&db).unwrap();
    for id in ["s1", "s2"] {
        check_state(&store, id);
    }
}

/// Run only as the child of [`a_killed_writer_loses_nothing_it_was_told`]: writes, then aborts
/// the process, so no destructor runs, no connection is closed and the WAL is not checkpointed.
#[test]
fn child_writes_then_aborts() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return;
    };
    let store = SqliteStore::open(Path::new(&db)).unwrap();
    write_state(&store, "child");
    std::process::abort();
}

#[cfg(unix)]
#[test]
fn a_killed_writer_loses_nothing_it_was_told() {
    use std::os::unix::process::ExitStatusExt;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["child_writes_then_aborts", "--exact", "--test-threads=1"])
        .env(CHILD_DB, &db)
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(6),
        "the child must reach its abort; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        dir.path().join("quiver.db-wal").exists(),
        "the child left its write-ahead log behind"
    );
    let store = SqliteStore::open(&db).unwrap();
    check_state(&store, "child");
}
