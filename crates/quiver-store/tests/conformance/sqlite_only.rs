//! What only the SQLite file shows: rows counted and written behind the store's back.

use serde_json::json;

use quiver_store::{
    AuditQuery, AuditStatus, AuditStep, SessionFilter, SqliteStore, Store, StoreError,
    argument_digest,
};

use crate::store_cases::{call, card, session};

fn open() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("quiver.db")).unwrap();
    (dir, store)
}

#[test]
fn a_stored_step_this_build_has_no_name_for_never_fails_a_query() {
    let (dir, store) = open();
    store
        .append_audit(&call("s1", "w.f", 1, AuditStatus::Ok))
        .unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("quiver.db")).unwrap();
    raw.execute(
        "INSERT INTO audit (time, kind, session_id, principal, origin, decisions, status, \
         duration_ms, cached) VALUES (2, 'call', 's1', '{}', '{}', ?1, 'ok', 0, 0)",
        [json!([
            {"step": "dangerousgate", "decision": "ask", "reason": "an older Quiver"},
            {"step": "rule(\"role(master)\")", "decision": "allow", "reason": "r"},
            {"step": "approvalmode", "decision": "ask", "reason": "m"},
            {"step": "from-the-future", "decision": "allow", "reason": "a newer Quiver"},
        ])
        .to_string()],
    )
    .unwrap();
    let records = store.query_audit(&AuditQuery::default()).unwrap();
    assert_eq!(records.len(), 2, "the other record is read too");
    let read: Vec<(AuditStep, &str)> = records[0]
        .entry
        .decisions
        .iter()
        .map(|d| (d.step, d.reason.as_str()))
        .collect();
    assert_eq!(
        read,
        [
            (AuditStep::DangerousGate, "an older Quiver"),
            (AuditStep::Rule, "r"),
            (AuditStep::ApprovalMode, "m"),
            (
                AuditStep::Unrecognized,
                "recorded as step `from-the-future`: a newer Quiver"
            ),
        ]
    );
    // Outside the store a spelling that names no step is an error, never a guess.
    assert!(serde_json::from_value::<AuditStep>(json!("from-the-future")).is_err());
    assert_eq!(
        "from-the-future"
            .parse::<AuditStep>()
            .unwrap_err()
            .to_string(),
        "unknown audit step `from-the-future`"
    );
}

#[test]
fn audit_is_append_only() {
    let (dir, store) = open();
    store
        .append_audit(&call("s1", "t", 1, AuditStatus::Ok))
        .unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("quiver.db")).unwrap();
    for sql in ["UPDATE audit SET status = 'ok'", "DELETE FROM audit"] {
        let error = raw.execute(sql, []).unwrap_err();
        assert!(error.to_string().contains("append-only"), "{sql}: {error}");
    }
}

#[test]
fn corrupt_rows_are_errors_not_panics() {
    let (dir, store) = open();
    session(&store, "s1");
    store.enqueue_approval(&card("a1", "s1", 1)).unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("quiver.db")).unwrap();
    raw.execute_batch(
        "UPDATE sessions SET state = '{not json' WHERE id = 's1';
         UPDATE approvals SET arguments = '[' WHERE id = 'a1';",
    )
    .unwrap();
    let cases: [(&str, StoreError, &str); 3] = [
        (
            "session",
            store.session("s1").unwrap_err(),
            "corrupt JSON in sessions.state",
        ),
        (
            "session list",
            store.list_sessions(&SessionFilter::default()).unwrap_err(),
            "corrupt JSON in sessions.state",
        ),
        (
            "approval",
            store.approval("a1").unwrap_err(),
            "corrupt JSON in approvals.arguments",
        ),
    ];
    for (name, error, want) in cases {
        assert!(error.to_string().contains(want), "{name}: {error}");
    }
}

#[test]
fn digests_ignore_key_order_and_secret_fields() {
    let base = json!({"city": "北京", "days": 3, "auth": {"token": "s3cret", "user": "u"}});
    let secrets = ["token", "api_key"];
    let want = argument_digest(&base, &secrets);
    assert_eq!(want.len(), 64);
    assert!(
        want.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    let same = [
        (
            "key order",
            json!({"days": 3, "auth": {"user": "u", "token": "s3cret"}, "city": "北京"}),
        ),
        (
            "another secret value",
            json!({"city": "北京", "days": 3, "auth": {"token": "other", "user": "u"}}),
        ),
        (
            "secret absent",
            json!({"city": "北京", "days": 3, "auth": {"user": "u"}}),
        ),
        (
            "an extra top-level secret",
            json!({"api_key": "k", "city": "北京", "days": 3, "auth": {"user": "u"}}),
        ),
    ];
    for (name, args) in same {
        assert_eq!(argument_digest(&args, &secrets), want, "{name}");
    }
    let different = [
        (
            "another value",
            json!({"city": "上海", "days": 3, "auth": {"user": "u"}}),
        ),
        (
            "a number as a string",
            json!({"city": "北京", "days": "3", "auth": {"user": "u"}}),
        ),
        (
            "a missing field",
            json!({"city": "北京", "auth": {"user": "u"}}),
        ),
    ];
    for (name, args) in different {
        assert_ne!(argument_digest(&args, &secrets), want, "{name}");
    }
    assert_ne!(
        argument_digest(&base, &[]),
        want,
        "without the secret list the secret counts"
    );
    // Secrets inside arrays of objects are removed too.
    assert_eq!(
        argument_digest(&json!([{"token": "a", "x": 1}]), &secrets),
        argument_digest(&json!([{"x": 1, "token": "b"}]), &secrets)
    );
}
