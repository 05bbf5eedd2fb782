//! Wake-ups (`Store::changes`): a write that others should look at is heard with its kind and
//! id, on PostgreSQL by a second store on the database (what another instance hears through
//! its `LISTEN` connection), on SQLite by the writing store's own subscribers; a step that only
//! moves on is not announced; and on PostgreSQL a killed listener reconnects and resyncs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use quiver_store::workflow::{NewWait, RunStatus, WaitKind};
use quiver_store::{
    ApprovalCard, Change, ChangeKind, Changes, Decision, Heard, NewSession, now_ms,
};

use crate::backend::{Backend, Both, Fixture};
use crate::workflow_cases::{definition, finish, new_run, start};

/// How long a change may take to be heard here (far more than it takes).
const PATIENCE: Duration = Duration::from_secs(10);

fn card(id: &str) -> ApprovalCard {
    ApprovalCard {
        id: id.into(),
        session: "s1".into(),
        package: "mail".into(),
        tool: "mail.send".into(),
        arguments: json!({"to": "a@b"}),
        reason: "sends mail".into(),
        risk_category: None,
        created_at: now_ms(),
        permissions: Vec::new(),
        waiter: None,
        question: Default::default(),
    }
}

/// The store that hears the fixture's writes, subscribed and (on PostgreSQL) listening: a second
/// store on the database, or on SQLite the writing store itself.
fn listener(f: &Fixture) -> (Arc<dyn Both>, Changes) {
    let store = match f.backend() {
        Backend::Postgres => f.reopen(),
        Backend::Sqlite => f.shared(),
    };
    let mut changes = store.changes();
    if f.backend() == Backend::Postgres {
        // Its LISTEN is in place once it resyncs for the first time.
        wait_for(&mut changes, |h| *h == Heard::Resync);
    }
    (store, changes)
}

/// Reads `changes` until `want` holds for one heard; returns everything heard until then.
fn wait_for(changes: &mut Changes, want: impl Fn(&Heard) -> bool) -> Vec<Heard> {
    let started = Instant::now();
    let mut heard = Vec::new();
    while !heard.iter().any(&want) {
        let left = PATIENCE.saturating_sub(started.elapsed());
        assert!(
            !left.is_zero(),
            "not heard in {PATIENCE:?}; heard {heard:?}"
        );
        heard.extend(changes.wait(left));
    }
    heard
}

fn change(kind: ChangeKind, id: &str) -> Heard {
    Heard::Change(Change::new(kind, id))
}

pub fn writes_are_heard_with_their_kind_and_id(f: &Fixture) {
    let (_other, mut changes) = listener(f);
    let store = f.shared();
    store
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    definition(&*store);
    // A run created is announced; a step that only moves on is its holder's business.
    let (quiet, _) = store.create_run(&new_run("quiet", None)).unwrap();
    wait_for(&mut changes, |h| *h == change(ChangeKind::Run, "quiet"));
    assert!(store.advance(&start(&quiet.id, 0, 0, 0)).unwrap());
    assert!(store.advance(&finish(&quiet.id, 0, 0, json!(1))).unwrap());

    store.enqueue_approval(&card("ap-1")).unwrap();
    store
        .answer_approval("ap-1", Decision::Approve, "alice", None)
        .unwrap();
    store
        .set_operator_value("control", &json!("read_only"), "alice")
        .unwrap();
    let (run, created) = store.create_run(&new_run("r-1", None)).unwrap();
    assert!(created);
    let mut parked = start(&run.id, 0, 0, 0);
    parked.to.status = RunStatus::Waiting;
    parked.wait = Some(NewWait {
        kind: WaitKind::Timer,
        wake_at: Some(now_ms() + 60_000),
        event: None,
        after_event: 0,
        detail: json!({}),
    });
    assert!(store.advance(&parked).unwrap());
    let event = store
        .emit_event("invoice.paid", "billing", &json!({"n": 1}), now_ms())
        .unwrap();
    store
        .announce(&Change::new(ChangeKind::Catalog, "serve-0@test"))
        .unwrap();

    let want = [
        change(ChangeKind::Approval, "ap-1"),
        change(ChangeKind::Control, "control"),
        change(ChangeKind::Run, "r-1"),
        change(ChangeKind::Event, &event.to_string()),
        change(ChangeKind::Catalog, "serve-0@test"),
    ];
    let last = want[4].clone();
    let heard = wait_for(&mut changes, |h| *h == last);
    let heard: BTreeSet<String> = heard.iter().map(|h| format!("{h:?}")).collect();
    for w in &want {
        assert!(heard.contains(&format!("{w:?}")), "{w:?} not in {heard:?}");
    }
    // Changes arrive in commit order: the plain steps, written before, would have come.
    assert!(
        !heard.iter().any(|h| h.contains("\"quiet\"")),
        "a plain step was announced: {heard:?}"
    );
}

/// A listener whose connection is killed connects again and tells its subscribers to look at
/// everything; changes written after that are heard again.
#[test]
fn a_killed_listener_reconnects_and_resyncs() {
    let Some(f) = crate::backend::fixture(Backend::Postgres) else {
        return;
    };
    let (_other, mut changes) = listener(&f);
    let listeners = "FROM pg_stat_activity WHERE application_name = 'quiver-listen' \
                     AND query = 'LISTEN quiver_changes_{schema}'";
    // One listener per store, two stores (the first may still be subscribing).
    let started = Instant::now();
    while f.postgres_rows(&format!("SELECT pid {listeners}")) != Some(2) {
        assert!(started.elapsed() < PATIENCE, "two listeners never showed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = f.postgres_rows(&format!("SELECT pg_terminate_backend(pid) {listeners}"));
    assert_eq!(killed, Some(2));
    let started = Instant::now();
    wait_for(&mut changes, |h| *h == Heard::Resync);
    let resynced = started.elapsed();
    f.store()
        .set_operator_value("disabled:notes", &json!(true), "alice")
        .unwrap();
    wait_for(&mut changes, |h| {
        *h == change(ChangeKind::Control, "disabled:notes")
    });
    eprintln!("listener killed: resynced after {resynced:?}");
}
