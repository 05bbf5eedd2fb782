//! Many threads against one file: no `SQLITE_BUSY`, no lost write, no session sees another's
//! state.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use serde_json::json;

use quiver_store::{
    ApprovalCard, ApprovalStatus, AuditEntry, AuditKind, AuditQuery, Decision, NewSession,
    SqliteStore, Store, StoreError,
};

const THREADS: usize = 64;
const WRITES: usize = 200;
const CAPACITY: usize = 5;

/// One thread's 200 writes, a mix of every kind, with reads in between.
fn work(store: &dyn Store, thread: usize, errors: &AtomicUsize) {
    let session = format!("s{thread}");
    let check = |result: Result<(), StoreError>| {
        if let Err(error) = result {
            errors.fetch_add(1, Ordering::Relaxed);
            panic!("thread {thread}: {error}");
        }
    };
    check(
        store
            .create_session(&NewSession::new(&session, "chat"))
            .map(drop),
    );
    for i in 1..WRITES {
        let tool = format!("pkg.tool{}", i % 9);
        let result = match i % 8 {
            0 => store.load_tool(&session, &tool, CAPACITY).map(drop),
            1 => store
                .set_consent(&session, &format!("pkg{}", (i / 8) % 4), i % 3 != 0, "u")
                .map(drop),
            2 => {
                let mut entry = AuditEntry::new(AuditKind::Call, &session);
                entry.tool = Some(tool);
                store.append_audit(&entry).map(drop)
            }
            3 => store
                .activate_skill(&session, &format!("skill{}", i % 5))
                .map(drop),
            4 => store.grant_once(&session, &tool, "u").map(drop),
            5 => store
                .enqueue_approval(&ApprovalCard {
                    id: format!("{session}-{i}"),
                    session: session.clone(),
                    package: "pkg".into(),
                    tool,
                    arguments: json!({"i": i}),
                    reason: "action".into(),
                    risk_category: None,
                    created_at: i64::try_from(i).unwrap(),
                    permissions: Vec::new(),
                    waiter: None,
                    question: Default::default(),
                })
                .map(drop),
            6 => store
                .answer_approval(
                    &format!("{session}-{}", i - 1),
                    Decision::Approve,
                    "op",
                    None,
                )
                .map(drop),
            _ => store
                .set_session_state(&session, &json!({"i": i}))
                .and_then(|()| store.touch_session(&session)),
        };
        check(result);
        if i % 10 == 0 {
            check(store.loaded_tools(&session).map(drop));
            check(store.consent(&session, "pkg1").map(drop));
        }
    }
}

#[test]
fn sixty_four_threads_of_mixed_writes_on_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("quiver.db")).unwrap());
    let errors = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let store = Arc::clone(&store);
            let errors = Arc::clone(&errors);
            thread::spawn(move || work(store.as_ref(), thread, &errors))
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(errors.load(Ordering::Relaxed), 0);

    let audits_per_thread = (1..WRITES).filter(|i| i % 8 == 2).count();
    let approvals_per_thread = (1..WRITES).filter(|i| i % 8 == 5).count();
    for thread in 0..THREADS {
        let session = format!("s{thread}");
        let loaded = store.loaded_tools(&session).unwrap();
        assert_eq!(loaded.len(), CAPACITY, "{session}");
        assert!(loaded.iter().all(|t| t.starts_with("pkg.tool")));
        assert_eq!(store.active_skills(&session).unwrap().len(), 5);
        assert_eq!(store.consents(&session).unwrap().len(), 4);
        let audit = store
            .query_audit(&AuditQuery {
                session: Some(session.clone()),
                ..AuditQuery::default()
            })
            .unwrap();
        assert_eq!(audit.len(), audits_per_thread, "{session}");
        assert!(audit.iter().all(|r| r.entry.session == session));
        assert!(store.pending_approvals(Some(&session)).unwrap().is_empty());
        let approved = (1..WRITES)
            .filter(|i| i % 8 == 5)
            .filter(|i| {
                store
                    .approval(&format!("{session}-{i}"))
                    .unwrap()
                    .is_some_and(|a| a.status == ApprovalStatus::Approved)
            })
            .count();
        assert_eq!(approved, approvals_per_thread, "{session}");
    }
    let total = store.query_audit(&AuditQuery::default()).unwrap().len();
    assert_eq!(total, THREADS * audits_per_thread);
}

#[test]
fn two_stores_on_one_file_share_it() {
    // Two opens stand for two processes (the server and `quiver session list`).
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("quiver.db");
    let a: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let b: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).unwrap());
    let handles: Vec<_> = [Arc::clone(&a), Arc::clone(&b)]
        .into_iter()
        .enumerate()
        .map(|(n, store)| {
            thread::spawn(move || {
                for i in 0..200 {
                    let id = format!("s{n}-{i}");
                    store.create_session(&NewSession::new(&id, "chat")).unwrap();
                    store.load_tool(&id, "t", 12).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(a.loaded_tools("s1-199").unwrap(), ["t"]);
    assert_eq!(b.loaded_tools("s0-199").unwrap(), ["t"]);
}

#[test]
fn a_failing_write_never_undoes_its_neighbours() {
    // Writes that fail (unknown session, second answer) are interleaved with good ones, so many
    // share a group commit with a failure; each failure is its own, each success is kept.
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("quiver.db")).unwrap());
    store.create_session(&NewSession::new("s", "chat")).unwrap();
    store
        .enqueue_approval(&ApprovalCard {
            id: "a".into(),
            session: "s".into(),
            package: "p".into(),
            tool: "p.t".into(),
            arguments: json!({}),
            reason: "r".into(),
            risk_category: None,
            created_at: 0,
            permissions: Vec::new(),
            waiter: None,
            question: Default::default(),
        })
        .unwrap();
    store
        .answer_approval("a", Decision::Deny, "op", None)
        .unwrap();
    let handles: Vec<_> = (0..32)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for i in 0..50 {
                    let good = store.append_audit(&AuditEntry::new(AuditKind::Call, "s"));
                    assert!(good.is_ok(), "{good:?}");
                    let bad = store.load_tool("missing", &format!("t{t}-{i}"), 12);
                    assert!(matches!(bad, Err(StoreError::NotFound { .. })), "{bad:?}");
                    let twice = store.answer_approval("a", Decision::Approve, "op", None);
                    assert!(
                        matches!(twice, Err(StoreError::AlreadyAnswered { .. })),
                        "{twice:?}"
                    );
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(
        store.query_audit(&AuditQuery::default()).unwrap().len(),
        32 * 50
    );
    assert_eq!(
        store.approval("a").unwrap().unwrap().status,
        ApprovalStatus::Denied
    );
}
