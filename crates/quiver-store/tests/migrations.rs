//! Versioned migrations at open: a fresh file, an idempotent reopen, and the files the store
//! must refuse without touching them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

use rusqlite::Connection;

use quiver_store::{NewSession, SCHEMA_VERSION, SqliteStore, Store, StoreError};

const QUIVER_APPLICATION_ID: i64 = 0x5156_5352;

fn pragma(db: &Path, name: &str) -> i64 {
    let conn = Connection::open(db).unwrap();
    conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
        .unwrap()
}

fn tables(db: &Path) -> Vec<String> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_fresh_file_gets_the_whole_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    drop(SqliteStore::open(&db).unwrap());
    assert_eq!(pragma(&db, "user_version"), SCHEMA_VERSION);
    assert_eq!(pragma(&db, "application_id"), QUIVER_APPLICATION_ID);
    assert_eq!(
        tables(&db),
        [
            "active_skills",
            "approvals",
            "audit",
            "calls_in_flight",
            "consents",
            "held_turns",
            "instances",
            "kept_outputs",
            "loaded_tools",
            "once_approvals",
            "opened_packages",
            "operator_cards",
            "operator_state",
            "perception_cache",
            "request_states",
            "sessions",
            "shared_questions",
            "wf_attempts",
            "wf_cursors",
            "wf_definitions",
            "wf_events",
            "wf_runs",
            "wf_schedule_fires",
            "wf_waits",
            "wf_webhook_deliveries"
        ]
    );
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "WAL is persistent in the file");
}

#[test]
fn reopening_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    {
        let store = SqliteStore::open(&db).unwrap();
        store
            .create_session(&NewSession::new("s1", "chat"))
            .unwrap();
    }
    for _ in 0..3 {
        let store = SqliteStore::open(&db).unwrap();
        assert!(store.session("s1").unwrap().is_some());
        drop(store);
        assert_eq!(pragma(&db, "user_version"), SCHEMA_VERSION);
    }
}

#[test]
fn many_openers_of_one_fresh_file_migrate_it_once() {
    const OPENERS: usize = 16;
    // A race shows only sometimes: run it on several fresh files.
    for _ in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(dir.path().join("quiver.db"));
        // All start together, so the migration and the switch to WAL really race.
        let start = Arc::new(Barrier::new(OPENERS));
        let handles: Vec<_> = (0..OPENERS)
            .map(|i| {
                let (db, start) = (Arc::clone(&db), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    let store = SqliteStore::open(db.as_path()).unwrap();
                    store
                        .create_session(&NewSession::new(format!("s{i}"), "chat"))
                        .unwrap();
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(pragma(&db, "user_version"), SCHEMA_VERSION);
        let store = SqliteStore::open(db.as_path()).unwrap();
        for i in 0..OPENERS {
            assert!(store.session(&format!("s{i}")).unwrap().is_some());
        }
    }
}

/// How to spoil a database file before the store opens it.
type Spoil = fn(&Path);
/// Whether an error is the one expected.
type Expect = fn(&StoreError) -> bool;

#[test]
fn files_the_store_refuses_untouched() {
    let cases: [(&str, Spoil, Expect); 5] = [
        (
            "a newer schema version",
            |db| {
                drop(SqliteStore::open(db).unwrap());
                let conn = Connection::open(db).unwrap();
                conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                    .unwrap();
            },
            |e| {
                matches!(e, StoreError::SchemaTooNew { found, known }
                    if *found == SCHEMA_VERSION + 1 && *known == SCHEMA_VERSION)
            },
        ),
        (
            "another application's database",
            |db| {
                let conn = Connection::open(db).unwrap();
                conn.execute_batch("CREATE TABLE songs (title TEXT)")
                    .unwrap();
            },
            |e| matches!(e, StoreError::NotQuiver { found: 0, .. }),
        ),
        (
            "a foreign application id",
            |db| {
                let conn = Connection::open(db).unwrap();
                conn.pragma_update(None, "application_id", 0x1234).unwrap();
            },
            |e| matches!(e, StoreError::NotQuiver { found: 0x1234, .. }),
        ),
        (
            "a failing migration is rolled back whole",
            |db| {
                let conn = Connection::open(db).unwrap();
                conn.pragma_update(None, "application_id", QUIVER_APPLICATION_ID)
                    .unwrap();
                conn.execute_batch("CREATE TABLE audit (x TEXT)").unwrap();
            },
            |e| matches!(e, StoreError::Migration { version: 1, .. }),
        ),
        (
            "not a database at all",
            |db| {
                std::fs::write(db, b"this is a text file, not SQLite, and long enough to matter....................................................").unwrap()
            },
            |e| matches!(e, StoreError::Open { .. }),
        ),
    ];
    for (name, spoil, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("quiver.db");
        spoil(&db);
        let before = std::fs::read(&db).unwrap();
        let error = SqliteStore::open(&db).expect_err(name);
        assert!(expected(&error), "{name}: {error:?}");
        assert!(!error.to_string().is_empty());
        assert_eq!(std::fs::read(&db).unwrap(), before, "{name}: file changed");
    }
}

#[test]
fn a_too_new_schema_says_what_to_do() {
    let error = StoreError::SchemaTooNew { found: 9, known: 1 };
    assert_eq!(
        error.to_string(),
        "the store's schema version is 9, newer than this Quiver knows (1); upgrade Quiver"
    );
}

/// The version-1 schema, as the released migration wrote it (read from the source, which never
/// edits a released migration).
fn v1_schema() -> &'static str {
    let source = include_str!("../src/sqlite/schema.rs");
    let start = source.find("const V1: &str = r#\"").unwrap() + "const V1: &str = r#\"".len();
    let end = start + source[start..].find("\"#;").unwrap();
    &source[start..end]
}

#[test]
fn a_version_1_file_migrates_keeping_its_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(v1_schema()).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA user_version = 1; PRAGMA application_id = {QUIVER_APPLICATION_ID};"
        ))
        .unwrap();
        for (time, tool) in [(1, "notes.add_note"), (2, "weather.forecast")] {
            conn.execute(
                "INSERT INTO audit (time, kind, session_id, principal, origin, tool, decisions, \
                 status, duration_ms, cached) VALUES (?1, 'call', 's1', '{}', '{}', ?2, '[]', 'ok', 3, 0)",
                rusqlite::params![time, tool],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(pragma(&db, "user_version"), SCHEMA_VERSION);
    let records = store
        .query_audit(&quiver_store::AuditQuery::default())
        .unwrap();
    let tools: Vec<_> = records
        .iter()
        .map(|r| r.entry.tool.clone().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["weather.forecast", "notes.add_note"],
        "newest first, none lost"
    );
    // Appends continue after the old ids, and the log is still append-only.
    let id = store
        .append_audit(&quiver_store::AuditEntry::new(
            quiver_store::AuditKind::Call,
            "s1",
        ))
        .unwrap();
    assert!(id > records[0].id);
    let conn = Connection::open(&db).unwrap();
    assert!(conn.execute("DELETE FROM audit", []).is_err());
    assert!(conn.execute("UPDATE audit SET status = 'x'", []).is_err());
}

#[test]
fn a_version_1_file_migrates_keeping_its_approval_cards() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(v1_schema()).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA user_version = 1; PRAGMA application_id = {QUIVER_APPLICATION_ID};"
        ))
        .unwrap();
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('s1', NULL, 1, 1, NULL, '{}', 'chat', '{}', 'v', '{}', '{}');
             INSERT INTO approvals (id, session_id, package, tool, arguments, reason, created_at)
                 VALUES ('apr-1', 's1', 'qq', 'qq.group_kick', '{\"user\":2}', 'dangerous', 5);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&db).unwrap();
    let pending = store.pending_approvals(None).unwrap();
    assert_eq!(pending.len(), 1);
    let card = &pending[0].card;
    assert_eq!((card.id.as_str(), card.created_at), ("apr-1", 5));
    assert!(card.permissions.is_empty() && card.waiter.is_none());
    // A card of an older build names no waiter: it is never withdrawn for one.
    assert!(store.withdraw_orphaned_approvals().unwrap().is_empty());
    let conn = Connection::open(&db).unwrap();
    assert!(
        conn.execute(
            "UPDATE approvals SET status = 'bogus' WHERE id = 'apr-1'",
            []
        )
        .is_err(),
        "the status check survives the migration"
    );
}

#[test]
fn starts_recorded_in_the_log_move_to_calls_in_flight_only_while_unfinished() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(v1_schema()).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA user_version = 1; PRAGMA application_id = {QUIVER_APPLICATION_ID};"
        ))
        .unwrap();
        // (kind, call): c1 started and never ended, c2 started and ended.
        for (time, kind, call) in [
            (1, "call_started", "c1"),
            (2, "call_started", "c2"),
            (3, "call", "c2"),
        ] {
            conn.execute(
                "INSERT INTO audit (time, kind, session_id, call_id, principal, origin, tool, \
                 decisions, status, duration_ms, cached) \
                 VALUES (?1, ?2, 's1', ?3, '{}', '{}', 'notes.add_note', '[]', 'started', 0, 0)",
                rusqlite::params![time, kind, call],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&db).unwrap();
    let unfinished: Vec<_> = store
        .unfinished_calls()
        .unwrap()
        .into_iter()
        .map(|r| r.entry.call_id.unwrap())
        .collect();
    assert_eq!(unfinished, ["c1"]);
    // Its end, when written, takes it out of flight.
    let mut end = quiver_store::AuditEntry::new(quiver_store::AuditKind::Call, "s1");
    end.call_id = Some("c1".into());
    store.append_audit(&end).unwrap();
    assert!(store.unfinished_calls().unwrap().is_empty());
}
