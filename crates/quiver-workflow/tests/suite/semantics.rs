//! What each kind of step and outcome does, on a real SQLite file, with time moved by hand.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use quiver_store::workflow::{AttemptStatus, RunStatus, WaitKind};
use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::decide::Operator;
use quiver_workflow::{Clock, Engine, StepCall};

use super::common::{Act, Fake, clock, definition, start};

struct World {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    fake: Fake,
    clock: quiver_workflow::ManualClock,
}

impl World {
    fn new(script: &[(&str, Act)]) -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
        World {
            _dir: dir,
            store,
            fake: Fake::with(script),
            clock: clock(),
        }
    }

    fn engine(&self) -> Engine<'_> {
        Engine::new(&self.store, &self.fake, &self.clock)
    }

    fn run(&self, yaml: &str, input: serde_json::Value) -> quiver_store::workflow::Run {
        let engine = self.engine();
        let digest = engine.pin(&definition(yaml, &[])).unwrap();
        let (run, _) = engine.start(&digest, &start(input)).unwrap();
        engine.drive(&run.id).unwrap()
    }

    fn statuses(&self, run: &str) -> Vec<(String, AttemptStatus)> {
        self.store
            .attempts(run)
            .unwrap()
            .into_iter()
            .map(|a| (a.step_id, a.status))
            .collect()
    }
}

#[test]
fn if_false_skips_and_later_steps_see_the_status() {
    let w = World::new(&[]);
    let run = w.run(
        "description: d\nsteps:\n  - id: a\n    if: input.go\n    tool: x.a\n  - id: b\n    if: \"steps.a.status == 'skipped'\"\n    tool: x.b\n    with: {n: '{{ input.n }}'}\noutput: '{{ steps.b.output.echo.n }}'\n",
        json!({"go": false, "n": 7}),
    );
    assert_eq!(
        (run.status, run.output),
        (RunStatus::Completed, Some(json!(7)))
    );
    assert_eq!(
        w.statuses(&run.id),
        [
            ("a".into(), AttemptStatus::Skipped),
            ("b".into(), AttemptStatus::Ok)
        ]
    );
}

#[test]
fn failures_retry_after_their_backoff_then_fail_the_run() {
    let w = World::new(&[("a", Act::FailTimes(2, json!("ok")))]);
    let yaml = "description: d\nsteps:\n  - id: a\n    tool: x.a\n    retry: {max_attempts: 3, backoff: exponential, initial: 10s, max: 1m}\n";
    let run = w.run(yaml, json!({}));
    assert_eq!(run.status, RunStatus::Waiting);
    let wait = &w.store.pending_waits(Some(WaitKind::Retry)).unwrap()[0];
    assert_eq!(wait.wake_at, Some(w.clock.now_ms() + 10_000));
    let engine = w.engine();
    // Not yet due: nothing moves.
    w.clock.advance(Duration::from_secs(9));
    assert!(engine.tick().unwrap().is_empty());
    w.clock.advance(Duration::from_secs(1));
    let moved = engine.tick().unwrap();
    assert_eq!(moved[0].status, RunStatus::Waiting);
    // The second pause doubles.
    let wait = &w.store.pending_waits(Some(WaitKind::Retry)).unwrap()[0];
    assert_eq!(wait.wake_at, Some(w.clock.now_ms() + 20_000));
    w.clock.advance(Duration::from_secs(20));
    let moved = engine.tick().unwrap();
    assert_eq!(
        (moved[0].status, moved[0].output.clone()),
        (RunStatus::Completed, Some(json!("ok")))
    );
    let keys: Vec<String> = w.fake.calls("a").into_iter().map(|c| c.key).collect();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| *k == keys[0]));

    // Out of attempts: the run fails.
    let w = World::new(&[("a", Act::FailTimes(9, json!("never")))]);
    let run = w.run("description: d\nsteps:\n  - id: a\n    tool: x.a\n    retry: {max_attempts: 2, backoff: fixed, initial: 1s}\n", json!({}));
    w.clock.advance(Duration::from_secs(1));
    let moved = w.engine().tick().unwrap();
    assert_eq!(moved[0].status, RunStatus::Failed);
    assert!(
        moved[0]
            .error
            .as_deref()
            .unwrap()
            .contains("attempt 2 failed"),
        "{:?}",
        moved[0]
    );
    assert_eq!(w.fake.calls("a").len(), 2);
    let _ = run;
}

#[test]
fn a_refused_call_fails_its_step_without_retry() {
    let w = World::new(&[("a", Act::Refuse("the dangerous gate said no".into()))]);
    let run = w.run(
        "description: d\nsteps:\n  - id: a\n    tool: x.a\n    retry: {max_attempts: 5}\n",
        json!({}),
    );
    assert_eq!(run.status, RunStatus::Failed);
    assert!(run.error.unwrap().contains("refused"));
    assert_eq!(w.fake.calls("a").len(), 1);
}

#[test]
fn a_call_that_needs_a_person_parks_the_unattended_run() {
    let w = World::new(&[("a", Act::NeedsPerson)]);
    let run = w.run(
        "description: d\nsteps:\n  - id: a\n    tool: x.a\n    with: {amount: 5}\n",
        json!({}),
    );
    assert_eq!(run.status, RunStatus::Waiting);
    let card = &w.store.pending_waits(Some(WaitKind::Approval)).unwrap()[0];
    assert_eq!(card.detail["card"]["arguments"], json!({"amount": 5}));
    let engine = w.engine();
    // Who may answer is the front's to check (the runtime's `RunOps::answer`): the engine
    // takes the starter's own answer.
    let run = engine.answer(&run.id, true, "alice", None).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let calls = w.fake.calls("a");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].approved_by.as_deref(), Some("alice"));
    // Denied: the run ends failed.
    let w = World::new(&[("a", Act::NeedsPerson)]);
    let run = w.run(
        "description: d\nsteps:\n  - id: a\n    tool: x.a\n",
        json!({}),
    );
    let run = w
        .engine()
        .answer(&run.id, false, "boss", Some("no"))
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
}

#[test]
fn approval_timeouts_follow_on_timeout() {
    let cases = [
        ("fail", RunStatus::Failed, AttemptStatus::TimedOut),
        ("reject", RunStatus::Failed, AttemptStatus::Rejected),
        ("continue", RunStatus::Completed, AttemptStatus::TimedOut),
    ];
    for (on_timeout, run_status, attempt_status) in cases {
        let w = World::new(&[]);
        let yaml = format!(
            "description: d\nsteps:\n  - id: ok\n    approval: {{title: go?, timeout: 1h, on_timeout: {on_timeout}}}\n  - id: after\n    if: '!steps.ok.approved'\n    tool: x.b\n"
        );
        let run = w.run(&yaml, json!({}));
        assert_eq!(run.status, RunStatus::Waiting);
        w.clock.advance(Duration::from_secs(3599));
        assert!(w.engine().tick().unwrap().is_empty());
        w.clock.advance(Duration::from_secs(1));
        let moved = w.engine().tick().unwrap();
        assert_eq!(moved[0].status, run_status, "{on_timeout}: {:?}", moved[0]);
        assert_eq!(w.statuses(&run.id)[0].1, attempt_status, "{on_timeout}");
        let ran = w.fake.calls("after").len();
        assert_eq!(ran, usize::from(on_timeout == "continue"), "{on_timeout}");
        // A late answer finds nothing to answer.
        assert!(w.engine().answer(&run.id, true, "boss", None).is_err());
    }
}

#[test]
fn timers_and_events() {
    let w = World::new(&[]);
    let yaml = "description: d\nsteps:\n  - id: pause\n    wait: 10m\n  - id: paid\n    wait: {event: paid, match: 'event.order == input.order', timeout: 2h}\noutput: '{{ steps.paid.output.amount }}'\n";
    let run = w.run(yaml, json!({"order": 7}));
    let timer = &w.store.pending_waits(Some(WaitKind::Timer)).unwrap()[0];
    assert_eq!(
        timer.wake_at,
        Some(w.clock.now_ms() + 600_000),
        "the absolute wake time is stored"
    );
    let engine = w.engine();
    w.clock.advance(Duration::from_secs(600));
    assert_eq!(engine.tick().unwrap()[0].status, RunStatus::Waiting);
    // An event for another order does not match; the right one does, and its payload is the
    // step's output.
    engine
        .emit("paid", "shop", &json!({"order": 8, "amount": 1}))
        .unwrap();
    assert_eq!(
        w.store.run(&run.id).unwrap().unwrap().status,
        RunStatus::Waiting
    );
    engine
        .emit("paid", "shop", &json!({"order": 7, "amount": 42}))
        .unwrap();
    let run = w.store.run(&run.id).unwrap().unwrap();
    assert_eq!(
        (run.status, run.output),
        (RunStatus::Completed, Some(json!(42)))
    );

    // An event stored after the step started but before anyone looked still matches; one
    // stored before the step started does not.
    let w = World::new(&[]);
    let yaml = "description: d\nsteps:\n  - id: paid\n    wait: {event: paid}\n";
    w.store
        .emit_event("paid", "shop", &json!({"early": true}), 0)
        .unwrap();
    let run = w.run(yaml, json!({}));
    w.store
        .emit_event("paid", "shop", &json!({"late": true}), 0)
        .unwrap();
    let moved = w.engine().tick().unwrap();
    assert_eq!(moved[0].output, Some(json!({"late": true})));
    let _ = run;

    // An event wait times out.
    let w = World::new(&[]);
    let run = w.run(
        "description: d\nsteps:\n  - id: paid\n    wait: {event: paid, timeout: 1h}\n",
        json!({}),
    );
    w.clock.advance(Duration::from_secs(3600));
    assert_eq!(w.engine().tick().unwrap()[0].status, RunStatus::Failed);
    let _ = run;
}

#[test]
fn cancel_during_a_tool_discards_its_late_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let store = Arc::new(SqliteStore::open(&db).unwrap());
    let clock = Arc::new(clock());
    let other = Arc::clone(&store);
    let other_clock = Arc::clone(&clock);
    let hook = Arc::new(move |call: &StepCall| {
        // Another front cancels the run while the tool runs.
        let idle = Fake::default();
        let engine = Engine::new(&*other, &idle, &*other_clock);
        engine
            .operate(&call.run_id, &Operator::Cancel, "ops")
            .unwrap();
    });
    let fake = Fake::with(&[("a", Act::Hook(hook, json!("late")))]);
    let engine = Engine::new(&*store, &fake, &*clock);
    let digest = engine
        .pin(&definition(
            "description: d\nsteps:\n  - id: a\n    tool: x.a\n  - id: b\n    tool: x.b\n",
            &[],
        ))
        .unwrap();
    let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
    let run = engine.drive(&run.id).unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.error.as_deref(), Some("cancelled by ops"));
    let attempts = store.attempts(&run.id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (attempts[0].status, attempts[0].output.clone()),
        (AttemptStatus::Started, None)
    );
    assert!(fake.calls("b").is_empty());
}

#[test]
fn one_key_one_run_and_the_run_timeout() {
    let w = World::new(&[]);
    let engine = w.engine();
    let def = definition(
        "description: d\nidempotency_key: 'day-{{ input.day }}'\ntimeout: 1h\nsteps:\n  - id: a\n    wait: 2h\n",
        &[],
    );
    let digest = engine.pin(&def).unwrap();
    let (first, created) = engine.start(&digest, &start(json!({"day": 1}))).unwrap();
    assert!(created);
    assert_eq!(first.idempotency_key.as_deref(), Some("day-1"));
    let (again, created) = engine.start(&digest, &start(json!({"day": 1}))).unwrap();
    assert_eq!((again.id.as_str(), created), (first.id.as_str(), false));
    let (other, created) = engine.start(&digest, &start(json!({"day": 2}))).unwrap();
    assert!(created && other.id != first.id);
    // The run times out before its timer.
    engine.drive(&first.id).unwrap();
    w.clock.advance(Duration::from_secs(3600));
    let run = engine.operate(&first.id, &Operator::Fail("timeout check".into()), "ops");
    assert!(run.is_ok());
    let (third, _) = engine.start(&digest, &start(json!({"day": 3}))).unwrap();
    w.clock.advance(Duration::from_secs(3600));
    let run = engine.drive(&third.id).unwrap();
    assert_eq!(
        (run.status, run.error.as_deref()),
        (RunStatus::Failed, Some("the run timed out"))
    );
}

#[test]
fn an_in_doubt_step_can_be_marked_done_or_failed() {
    for (op, want) in [
        (
            Operator::Done(json!({"url": "by-hand"})),
            RunStatus::Completed,
        ),
        (Operator::Fail("gave up".into()), RunStatus::Failed),
    ] {
        let w = World::new(&[("a", Act::Crash)]);
        let engine = w.engine();
        let digest = engine
            .pin(&definition(
                "description: d\nsteps:\n  - id: a\n    tool: x.a\n",
                &[],
            ))
            .unwrap();
        let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
        super::common::crash(|| {
            let _ = engine.drive(&run.id);
        });
        let runs = engine.resume().unwrap();
        assert_eq!(runs[0].status, RunStatus::InDoubt);
        let done = engine.operate(&run.id, &op, "ops").unwrap();
        assert_eq!(done.status, want, "{op:?}");
        if let Operator::Done(v) = op {
            assert_eq!(done.output, Some(v));
            assert_eq!(done.error, None, "a settled run drops its in-doubt error");
        } else {
            assert_eq!(done.error.as_deref(), Some("failed by ops: gave up"));
        }
        assert_eq!(w.fake.calls("a").len(), 1);
        // Retry of a run that is no longer in doubt does not apply.
        assert!(engine.operate(&run.id, &Operator::Retry, "ops").is_err());
    }
}

#[test]
fn events_start_runs_once_when_their_condition_holds() {
    let w = World::new(&[]);
    let engine = w.engine();
    let yaml = "description: d\ntrigger:\n  - event: {name: note-added, if: \"event.tag == 'work'\"}\nsteps:\n  - id: a\n    tool: x.a\n    with: {note: '{{ trigger.payload.text }}'}\n";
    let digest = engine.pin(&definition(yaml, &[])).unwrap();
    let stored = |payload: serde_json::Value| {
        let id = w
            .store
            .emit_event("note-added", "notes", &payload, 0)
            .unwrap();
        w.store
            .events_after("note-added", id - 1)
            .unwrap()
            .remove(0)
    };
    let home = stored(json!({"tag": "home", "text": "milk"}));
    assert!(
        engine
            .on_event(&digest, &home, &start(json!({})))
            .unwrap()
            .is_none()
    );
    let work = stored(json!({"tag": "work", "text": "ship it"}));
    let (run, created) = engine
        .on_event(&digest, &work, &start(json!({})))
        .unwrap()
        .unwrap();
    assert!(created);
    let (again, created) = engine
        .on_event(&digest, &work, &start(json!({})))
        .unwrap()
        .unwrap();
    assert_eq!((again.id.as_str(), created), (run.id.as_str(), false));
    let done = engine.drive(&run.id).unwrap();
    assert_eq!(done.output, Some(json!({"echo": {"note": "ship it"}})));
    let other = w.store.emit_event("other", "notes", &json!({}), 0).unwrap();
    let other = w.store.events_after("other", other - 1).unwrap().remove(0);
    assert!(
        engine
            .on_event(&digest, &other, &start(json!({})))
            .unwrap()
            .is_none()
    );
}

/// Counts calls in flight at once, across threads.
#[derive(Default)]
struct Counting {
    now: std::sync::atomic::AtomicUsize,
    max: std::sync::atomic::AtomicUsize,
}

impl quiver_workflow::StepRunner for Counting {
    fn run(&self, _call: &StepCall) -> quiver_workflow::StepOutcome {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.now.fetch_add(1, SeqCst) + 1;
        self.max.fetch_max(n, SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        self.now.fetch_sub(1, SeqCst);
        quiver_workflow::StepOutcome::Output(json!(n))
    }
}

#[test]
fn a_concurrency_limit_of_one_is_never_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let counting = Arc::new(Counting::default());
    let clock = Arc::new(clock());
    let yaml = "description: d\nconcurrency: {key: '{{ input.account }}', limit: 1}\nsteps:\n  - id: a\n    tool: x.a\n  - id: b\n    tool: x.b\n";
    let (digest, runs) = {
        let store = SqliteStore::open(&db).unwrap();
        let engine = Engine::new(&store, &*counting, &*clock);
        let digest = engine.pin(&definition(yaml, &[])).unwrap();
        let runs: Vec<String> = (0..4)
            .map(|_| {
                engine
                    .start(&digest, &start(json!({"account": "acme"})))
                    .unwrap()
                    .0
                    .id
            })
            .collect();
        (digest, runs)
    };
    let _ = digest;
    // Four "processes" drive one run each at once, then tick until every run is done.
    let handles: Vec<_> = runs
        .iter()
        .cloned()
        .map(|id| {
            let (db, counting, clock) = (db.clone(), Arc::clone(&counting), Arc::clone(&clock));
            std::thread::spawn(move || {
                let store = SqliteStore::open(&db).unwrap();
                let engine = Engine::new(&store, &*counting, &*clock);
                engine.drive(&id).unwrap();
                for _ in 0..50 {
                    if store.run(&id).unwrap().unwrap().status == RunStatus::Completed {
                        return;
                    }
                    engine.tick().unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let store = SqliteStore::open(&db).unwrap();
    for id in &runs {
        assert_eq!(
            store.run(id).unwrap().unwrap().status,
            RunStatus::Completed,
            "{id}"
        );
    }
    assert_eq!(counting.max.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Another key is not held back.
    let other = Engine::new(&store, &*counting, &*clock);
    let (run, _) = other
        .start(&runs_digest(&store), &start(json!({"account": "other"})))
        .unwrap();
    assert_eq!(other.drive(&run.id).unwrap().status, RunStatus::Completed);
}

fn runs_digest(store: &SqliteStore) -> String {
    store.runs(&Default::default()).unwrap()[0].digest.clone()
}

#[test]
fn an_input_the_schema_refuses_starts_nothing() {
    let w = World::new(&[]);
    let engine = w.engine();
    let yaml = "description: d\ninput: {type: object, properties: {n: {type: integer}}, required: [n]}\nsteps:\n  - id: a\n    tool: x.a\n";
    let digest = engine.pin(&definition(yaml, &[])).unwrap();
    for bad in [json!({}), json!({"n": "three"})] {
        let err = engine.start(&digest, &start(bad.clone())).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{bad}: {err}");
    }
    assert!(w.store.runs(&Default::default()).unwrap().is_empty());
    assert!(engine.start(&digest, &start(json!({"n": 3}))).unwrap().1);
}

#[test]
fn an_event_stored_before_the_timeout_wins_over_it() {
    let w = World::new(&[]);
    let run = w.run(
        "description: d\nsteps:\n  - id: paid\n    wait: {event: paid, timeout: 1h}\n",
        json!({}),
    );
    let deadline = w.clock.now_ms() + 3_600_000;
    // Stored just in time; nobody looked before the timeout passed.
    w.store
        .emit_event("paid", "shop", &json!({"ok": 1}), deadline)
        .unwrap();
    w.clock.advance(Duration::from_secs(7200));
    let moved = w.engine().tick().unwrap();
    assert_eq!(moved[0].status, RunStatus::Completed, "{:?}", moved[0]);
    // One stored after the timeout does not.
    let w = World::new(&[]);
    let run2 = w.run(
        "description: d\nsteps:\n  - id: paid\n    wait: {event: paid, timeout: 1h}\n",
        json!({}),
    );
    let deadline = w.clock.now_ms() + 3_600_000;
    w.store
        .emit_event("paid", "shop", &json!({"ok": 1}), deadline + 1)
        .unwrap();
    w.clock.advance(Duration::from_secs(7200));
    assert_eq!(w.engine().tick().unwrap()[0].status, RunStatus::Failed);
    let _ = (run, run2);
}
