//! The brief's test: a three-step workflow with an approval, driven over a real SQLite file,
//! with restarts in the middle (the engine and the store dropped, the file opened again).

use std::time::Duration;

use serde_json::json;

use quiver_store::workflow::{AttemptStatus, RunStatus};
use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::Engine;
use quiver_workflow::decide::Operator;

use super::common::{Act, Fake, clock, crash, definition, start};

const REPORT: &str = "description: report
input: {type: object, properties: {day: {type: string}}}
steps:
  - id: fetch
    tool: notes.list
    with: {day: '{{ input.day }}', limit: 5}
  - id: confirm
    approval: {title: 'Publish {{ steps.fetch.output.count }} notes?', show: '{{ steps.fetch.output }}'}
  - id: publish
    tool: blog.post
    with: {notes: '{{ steps.fetch.output.notes }}', approved: '{{ steps.confirm.approved }}'}
output: {url: '{{ steps.publish.output.url }}', count: '{{ steps.fetch.output.count }}'}
";

fn outcomes(store: &dyn WorkflowStore, run: &str) -> Vec<(String, i64, AttemptStatus)> {
    store
        .attempts(run)
        .unwrap()
        .into_iter()
        .map(|a| (a.step_id, a.attempt, a.status))
        .collect()
}

#[test]
fn approval_restart_and_an_in_doubt_action() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let def = definition(REPORT, &["fetch"]);
    let fake = Fake::with(&[
        (
            "fetch",
            Act::Output(json!({"count": 2, "notes": ["a", "b"]})),
        ),
        ("publish", Act::Crash),
    ]);
    let clock = clock();

    // Process 1: start, run `fetch`, park on the approval; then the process ends.
    let run_id = {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
        let digest = engine.pin(&def).unwrap();
        let (run, created) = engine
            .start(&digest, &start(json!({"day": "2026-03-01"})))
            .unwrap();
        assert!(created);
        let run = engine.drive(&run.id).unwrap();
        assert_eq!((run.status, run.step), (RunStatus::Waiting, 1));
        let waits = store.pending_waits(None).unwrap();
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].detail["title"], json!("Publish 2 notes?"));
        assert_eq!(
            waits[0].detail["show"],
            json!({"count": 2, "notes": ["a", "b"]})
        );
        run.id
    };

    // Process 2: resuming changes nothing (the run waits); a person approves it, and `publish` kills the process between its run and its commit.
    {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
        assert!(engine.resume().unwrap().is_empty());
        crash(|| {
            let _ = engine.answer(&run_id, true, "boss", None);
        });
    }
    assert_eq!(fake.calls("publish").len(), 1);

    // Process 3: `publish` is an action that is not idempotent: it is not re-run silently.
    {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
        let runs = engine.resume().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, RunStatus::InDoubt);
        assert_eq!(
            fake.calls("publish").len(),
            1,
            "an in-doubt action never re-runs by itself"
        );
        // A second approval of the same step is refused: it was answered.
        assert!(engine.answer(&run_id, true, "boss", None).is_err());
        // The operator retries; the tool now works, with the same idempotency key.
        fake.set("publish", Act::Output(json!({"url": "https://blog/1"})));
        let run = engine.operate(&run_id, &Operator::Retry, "ops").unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{run:?}");
        assert_eq!(run.error, None, "a settled run drops its in-doubt error");
        assert_eq!(
            run.output,
            Some(json!({"url": "https://blog/1", "count": 2}))
        );
    }

    // What was recorded: one result per step, never a duplicate.
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(
        outcomes(&store, &run_id),
        [
            ("fetch".to_owned(), 1, AttemptStatus::Ok),
            ("confirm".to_owned(), 1, AttemptStatus::Approved),
            ("publish".to_owned(), 1, AttemptStatus::Crashed),
            ("publish".to_owned(), 2, AttemptStatus::Ok),
        ]
    );
    assert_eq!(
        fake.calls("fetch").len(),
        1,
        "a recorded output is never produced again"
    );
    let publish = fake.calls("publish");
    assert_eq!(publish.len(), 2);
    assert_eq!(
        publish[0].key, publish[1].key,
        "one idempotency key across retries and restarts"
    );
    assert_eq!(
        publish[1].arguments,
        json!({"notes": ["a", "b"], "approved": true})
    );
    let confirm = &store.waits(&run_id).unwrap()[0];
    assert_eq!(confirm.resolved_by.as_deref(), Some("boss"));
    // The step results were audited with them.
    let audit = quiver_store::Store::query_audit(&store, &Default::default()).unwrap();
    assert_eq!(audit.len(), 2, "fetch and the second publish");
}

#[test]
fn a_safe_step_is_re_run_after_a_crash_and_five_crashes_park_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let def = definition(REPORT, &["fetch"]);
    let fake = Fake::with(&[("fetch", Act::Crash)]);
    let clock = clock();
    let run_id = {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
        let digest = engine.pin(&def).unwrap();
        let (run, _) = engine.start(&digest, &start(json!({"day": "x"}))).unwrap();
        crash(|| {
            let _ = engine.drive(&run.id);
        });
        run.id
    };
    // Four more crashes at `fetch`, each after a restart that re-runs it (it only reads).
    for _ in 0..4 {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
        crash(|| {
            let _ = engine.resume();
        });
    }
    assert_eq!(fake.calls("fetch").len(), 5);
    let keys: std::collections::BTreeSet<_> =
        fake.calls("fetch").into_iter().map(|c| c.key).collect();
    assert_eq!(keys.len(), 1);
    // The fifth crash found at restart parks the run as failed; nothing runs again.
    let store = SqliteStore::open(&db).unwrap();
    let engine = Engine::new(&store, &fake, &clock).with_owner("host-1");
    let runs = engine.resume().unwrap();
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("crashed 5 times"),
        "{:?}",
        runs[0]
    );
    assert_eq!(fake.calls("fetch").len(), 5);
    assert_eq!(store.run(&run_id).unwrap().unwrap().crashes, 5);
}

#[test]
fn another_live_owners_attempt_is_left_alone_until_its_lease_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let def = definition(
        "description: d\nsteps:\n  - id: read\n    tool: x.read\n    timeout: 1m\n",
        &["read"],
    );
    let fake = Fake::with(&[("read", Act::Crash)]);
    let clock = clock();
    let run_id = {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &fake, &clock)
            .with_owner("host-a")
            .with_lease(Duration::from_millis(300));
        let digest = engine.pin(&def).unwrap();
        let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
        crash(|| {
            let _ = engine.drive(&run.id);
        });
        run.id
    };
    fake.set("read", Act::Output(json!("ok")));
    let store = SqliteStore::open(&db).unwrap();
    let lease = store.run(&run_id).unwrap().unwrap().lease.unwrap();
    assert_eq!(lease.owner, "host-a");
    let b = Engine::new(&store, &fake, &clock).with_owner("host-b");
    // host-a may still be running the step: host-b does nothing.
    assert_eq!(b.resume().unwrap()[0].status, RunStatus::Running);
    assert_eq!(fake.calls("read").len(), 1);
    // host-a stopped heartbeating: once its lease ran out (by the store's clock, whatever the
    // engines' clock says), host-b takes the attempt over under a higher epoch.
    let epoch = store.run(&run_id).unwrap().unwrap().epoch;
    std::thread::sleep(Duration::from_millis(
        u64::try_from(lease.until - quiver_store::now_ms() + 50).unwrap_or(0),
    ));
    assert_eq!(
        store.expired_leases().unwrap(),
        std::slice::from_ref(&run_id)
    );
    assert_eq!(b.resume().unwrap()[0].status, RunStatus::Completed);
    assert_eq!(store.run(&run_id).unwrap().unwrap().epoch, epoch + 1);
    assert_eq!(fake.calls("read").len(), 2);
    assert!(
        store.run(&run_id).unwrap().unwrap().lease.is_none(),
        "a result clears the lease"
    );
}

#[test]
fn a_lease_of_a_process_known_gone_holds_nothing_and_settle_is_for_runs_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let def = definition(
        "description: d\nsteps:\n  - id: pay\n    tool: x.pay\n    timeout: 1h\n",
        &[],
    );
    let fake = Fake::with(&[("pay", Act::Crash)]);
    let clock = clock();
    // A process that ran an engine and is gone now (`kill -9`): its name as a waiter.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let gone = quiver_store::waiter::of(child.id()).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let store = SqliteStore::open(&db).unwrap();
    let run_id = {
        let engine = Engine::new(&store, &fake, &clock).with_owner(format!("{gone}/0"));
        let digest = engine.pin(&def).unwrap();
        let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
        crash(|| {
            let _ = engine.drive(&run.id);
        });
        run.id
    };
    let run = store.run(&run_id).unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert!(run.lease.is_some());
    // Another engine (its own default owner) does not wait for the lease to run out: the
    // action is in doubt at once. Before that, settle refuses a run that is not in doubt.
    let engine = Engine::new(&store, &fake, &clock);
    let waiting = Engine::new(&store, &fake, &clock);
    let other = definition("description: d\nsteps:\n  - id: w\n    wait: 1h\n", &[]);
    let digest = waiting.pin(&other).unwrap();
    let (parked, _) = waiting.start(&digest, &start(json!({}))).unwrap();
    let parked = waiting.drive(&parked.id).unwrap();
    assert_eq!(parked.status, RunStatus::Waiting);
    let refused = engine
        .settle(&parked.id, &Operator::Retry, "ops")
        .unwrap_err();
    assert!(refused.to_string().contains("not in_doubt"), "{refused}");
    fake.set("pay", Act::Output(json!({"paid": true})));
    let run = engine.settle(&run_id, &Operator::Retry, "ops").unwrap();
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    assert_eq!(
        outcomes(&store, &run_id),
        [
            ("pay".to_owned(), 1, AttemptStatus::Crashed),
            ("pay".to_owned(), 2, AttemptStatus::Ok),
        ]
    );

    // A live owner's lease (this process, under another engine) is still respected.
    let fake = Fake::with(&[("pay", Act::Crash)]);
    let live = Engine::new(&store, &fake, &clock);
    let digest = live.pin(&def).unwrap();
    let (run, _) = live.start(&digest, &start(json!({}))).unwrap();
    crash(|| {
        let _ = live.drive(&run.id);
    });
    let engine = Engine::new(&store, &fake, &clock);
    assert_eq!(engine.drive(&run.id).unwrap().status, RunStatus::Running);
    assert!(engine.settle(&run.id, &Operator::Retry, "ops").is_err());
}
