//! The workflow tables: idempotent run creation under 50 threads, conditional progress (a late
//! result is discarded), schedule fires and webhook deliveries once each across two store
//! instances, waits resolved once, events after a point.

use std::sync::{Arc, Barrier};
use std::thread;

use serde_json::json;

use quiver_store::workflow::{
    Advance, AttemptStatus, AttemptWrite, Definition, Expect, NewRun, NewWait, RunFilter, RunMove,
    RunStatus, WaitKind, WaitResolution, WaitStatus,
};
use quiver_store::{StoreError, WorkflowStore};

use crate::backend::Fixture;

pub(crate) fn definition(store: &dyn WorkflowStore) -> String {
    let digest = "d1".to_owned();
    store
        .put_definition(&Definition {
            digest: digest.clone(),
            workflow: "pkg.wf".into(),
            body: json!({"steps": 2}),
        })
        .unwrap();
    digest
}

pub(crate) fn new_run(id: &str, key: Option<&str>) -> NewRun {
    NewRun {
        id: id.into(),
        workflow: "pkg.wf".into(),
        digest: "d1".into(),
        idempotency_key: key.map(str::to_owned),
        input: json!({"a": 1}),
        trigger: json!({"kind": "manual"}),
        principal: json!({"user": "u"}),
        started_by: "u".into(),
        attended: false,
        settings: json!({}),
        concurrency_key: None,
        deadline: None,
        now: 1000,
        session: None,
        active_limit: None,
    }
}

pub(crate) fn start(run: &str, step: i64, attempt: i64, prev: i64) -> Advance {
    Advance {
        run_id: run.into(),
        expect: Expect {
            status: RunStatus::Running,
            step,
            attempt: prev,
            epoch: 0,
        },
        attempts: vec![AttemptWrite {
            step,
            attempt,
            step_id: format!("s{step}"),
            idempotency_key: format!("{run}-s{step}"),
            status: AttemptStatus::Started,
            output: None,
            error: None,
        }],
        to: RunMove {
            status: RunStatus::Running,
            step,
            attempt,
            crashes: 0,
            output: None,
            error: None,
            lease: None,
        },
        wait: None,
        resolve: None,
        withdraw_waits: false,
        audit: None,
        call_audit: None,
        gate: None,
        now: 2000,
    }
}

pub(crate) fn finish(run: &str, step: i64, attempt: i64, output: serde_json::Value) -> Advance {
    let mut a = start(run, step, attempt, attempt);
    a.attempts[0].status = AttemptStatus::Ok;
    a.attempts[0].output = Some(output);
    a.to = RunMove {
        status: RunStatus::Running,
        step: step + 1,
        attempt: 0,
        crashes: 0,
        output: None,
        error: None,
        lease: None,
    };
    a
}

pub fn fifty_threads_with_one_key_make_one_run(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    let barrier = Arc::new(Barrier::new(50));
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                store
                    .create_run(&new_run(&format!("r{i}"), Some("k")))
                    .unwrap()
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|(_, created)| *created).count(), 1);
    let ids: std::collections::BTreeSet<_> = results.iter().map(|(r, _)| r.id.clone()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(store.runs(&RunFilter::default()).unwrap().len(), 1);
    // Without a key, each call is a run of its own; an id taken is refused.
    assert!(store.create_run(&new_run("x1", None)).unwrap().1);
    assert!(store.create_run(&new_run("x2", None)).unwrap().1);
    assert!(matches!(
        store.create_run(&new_run("x2", None)),
        Err(StoreError::AlreadyExists { .. })
    ));
    let mut orphan = new_run("x3", None);
    orphan.digest = "nope".into();
    assert!(matches!(
        store.create_run(&orphan),
        Err(StoreError::NotFound { .. })
    ));
}

pub fn progress_is_conditional_and_late_results_are_discarded(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    assert!(store.advance(&start("r", 0, 1, 0)).unwrap());
    // A second start of the same attempt (another process saw the same state) loses.
    assert!(!store.advance(&start("r", 0, 1, 0)).unwrap());
    // Cancelled while the step runs: the late result is discarded, nothing written.
    let mut cancel = start("r", 0, 1, 1);
    cancel.attempts.clear();
    cancel.to.status = RunStatus::Cancelled;
    cancel.to.error = Some("cancelled by u".into());
    cancel.withdraw_waits = true;
    assert!(store.advance(&cancel).unwrap());
    assert!(!store.advance(&finish("r", 0, 1, json!("late"))).unwrap());
    let attempts = store.attempts("r").unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (attempts[0].status, attempts[0].output.clone()),
        (AttemptStatus::Started, None)
    );
    let run = store.run("r").unwrap().unwrap();
    assert_eq!(
        (run.status, run.error.as_deref()),
        (RunStatus::Cancelled, Some("cancelled by u"))
    );
}

pub fn an_attempts_process_is_recorded_only_while_the_run_runs_it(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    // No attempt started yet.
    assert!(
        !store
            .set_attempt_process("r", 0, 1, 0, Some("b:n:40:7"))
            .unwrap()
    );
    assert!(store.advance(&start("r", 0, 1, 0)).unwrap());
    assert!(
        store
            .set_attempt_process("r", 0, 1, 0, Some("b:n:40:7"))
            .unwrap()
    );
    assert!(
        !store
            .set_attempt_process("r", 0, 2, 0, Some("b:n:41:7"))
            .unwrap()
    );
    assert_eq!(
        store.attempts("r").unwrap()[0].process.as_deref(),
        Some("b:n:40:7")
    );
    // Cleared while the run still runs the attempt.
    assert!(store.set_attempt_process("r", 0, 1, 0, None).unwrap());
    assert_eq!(store.attempts("r").unwrap()[0].process, None);
    assert!(
        store
            .set_attempt_process("r", 0, 1, 0, Some("b:n:40:7"))
            .unwrap()
    );
    // Cancelled: a process that starts now is not recorded (its caller stops it).
    let mut cancel = start("r", 0, 1, 1);
    cancel.attempts.clear();
    cancel.to.status = RunStatus::Cancelled;
    assert!(store.advance(&cancel).unwrap());
    assert!(
        !store
            .set_attempt_process("r", 0, 1, 0, Some("b:n:42:7"))
            .unwrap()
    );
    assert_eq!(
        store.attempts("r").unwrap()[0].process.as_deref(),
        Some("b:n:40:7")
    );
}

pub fn a_step_result_its_move_and_its_audit_commit_together(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    assert!(store.advance(&start("r", 0, 1, 0)).unwrap());
    let mut done = finish("r", 0, 1, json!({"n": 3}));
    done.audit = Some(quiver_store::AuditEntry {
        time: 2000,
        kind: quiver_store::AuditKind::Call,
        session: "run:r".into(),
        call_id: Some("r-s0".into()),
        principal: json!({}),
        origin: json!({}),
        tool: Some("pkg.t".into()),
        skill: None,
        argument_digest: None,
        decisions: vec![],
        status: quiver_store::AuditStatus::Ok,
        duration_ms: 1,
        cached: false,
        detail: None,
    });
    assert!(store.advance(&done).unwrap());
    drop(store);
    // After a reopen everything is there.
    let store = f.reopen();
    let run = store.run("r").unwrap().unwrap();
    assert_eq!(
        (run.status, run.step, run.attempt),
        (RunStatus::Running, 1, 0)
    );
    let attempts = store.attempts("r").unwrap();
    assert_eq!(attempts[0].output, Some(json!({"n": 3})));
    assert!(attempts[0].finished_at.is_some());
    let audit =
        quiver_store::Store::query_audit(&*store, &quiver_store::AuditQuery::default()).unwrap();
    assert_eq!(audit.len(), 1);
}

pub fn waits_are_stored_then_resolved_once(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    let mut park = start("r", 0, 1, 0);
    park.attempts[0].status = AttemptStatus::Waiting;
    park.to.status = RunStatus::Waiting;
    park.wait = Some(NewWait {
        kind: WaitKind::Approval,
        wake_at: Some(5000),
        event: None,
        after_event: 0,
        detail: json!({"title": "Send?"}),
    });
    assert!(store.advance(&park).unwrap());
    let waits = store.pending_waits(Some(WaitKind::Approval)).unwrap();
    assert_eq!(waits.len(), 1);
    assert!(store.due_waits(4999).unwrap().is_empty());
    assert_eq!(store.due_waits(5000).unwrap().len(), 1);
    assert_eq!(store.next_wake_at().unwrap(), Some(5000));
    let answer = |by: &str| Advance {
        expect: Expect {
            status: RunStatus::Waiting,
            step: 0,
            attempt: 1,
            epoch: 0,
        },
        resolve: Some(WaitResolution {
            wait_id: waits[0].id,
            resolution: json!({"approved": true}),
            by: by.into(),
        }),
        ..finish("r", 0, 1, json!({"approved": true}))
    };
    assert!(store.advance(&answer("boss")).unwrap());
    assert_eq!(
        store.next_wake_at().unwrap(),
        None,
        "a resolved wait wakes nothing"
    );
    // A second answer finds the run moved on; one that raced with the run unchanged (another
    // run position is impossible here) would get a conflict.
    assert!(!store.advance(&answer("other")).unwrap());
    let w = &store.waits("r").unwrap()[0];
    assert_eq!(
        (w.status, w.resolved_by.as_deref()),
        (WaitStatus::Resolved, Some("boss"))
    );
    // A resolution of a wait no longer pending, with the run where the caller saw it, is a
    // conflict and writes nothing.
    let mut stale = start("r", 1, 1, 0);
    stale.resolve = Some(WaitResolution {
        wait_id: waits[0].id,
        resolution: json!(null),
        by: "x".into(),
    });
    assert!(matches!(
        store.advance(&stale),
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.run("r").unwrap().unwrap().attempt, 0);
}

pub fn fires_and_deliveries_start_once_across_two_stores(f: &Fixture) {
    let a = f.shared();
    let b = f.reopen();
    definition(&*a);
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [Arc::clone(&a), Arc::clone(&b)]
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let fire = s
                    .fire_schedule("pkg.wf", 60_000, &new_run(&format!("f{i}"), None))
                    .unwrap();
                let hook = s
                    .deliver_webhook("pkg/gh", "abc", &new_run(&format!("h{i}"), None))
                    .unwrap();
                (fire, hook)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|((_, c), _)| *c).count(), 1);
    assert_eq!(results.iter().filter(|(_, (_, c))| *c).count(), 1);
    assert_eq!(results[0].0.0.id, results[1].0.0.id);
    assert_eq!(results[0].1.0.id, results[1].1.0.id);
    let fires = a.schedule_fires("pkg.wf").unwrap();
    assert_eq!(fires, [(60_000, results[0].0.0.id.clone())]);
    // Another fire time is another run.
    assert!(
        b.fire_schedule("pkg.wf", 120_000, &new_run("f9", None))
            .unwrap()
            .1
    );
    assert_eq!(a.runs(&RunFilter::default()).unwrap().len(), 3);
}

pub fn events_are_read_after_a_point(f: &Fixture) {
    let store = f.shared();
    assert_eq!(store.last_event_id().unwrap(), 0);
    let first = store
        .emit_event("paid", "shop", &json!({"id": 1}), 10)
        .unwrap();
    store.emit_event("other", "shop", &json!({}), 11).unwrap();
    let third = store
        .emit_event("paid", "shop", &json!({"id": 2}), 12)
        .unwrap();
    let after: Vec<i64> = store
        .events_after("paid", 0)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(after, [first, third]);
    let later = store.events_after("paid", first).unwrap();
    assert_eq!(later[0].payload, json!({"id": 2}));
    assert_eq!(store.last_event_id().unwrap(), third);
    assert!(matches!(
        store.emit_event("", "x", &json!({}), 1),
        Err(StoreError::Invalid(_))
    ));
}

pub fn the_fan_out_reads_every_event_after_a_point_and_the_last_fire(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    let ids: Vec<i64> = ["a", "b", "a", "c"]
        .iter()
        .map(|name| store.emit_event(name, "shop", &json!({}), 10).unwrap())
        .collect();
    let names = |after, limit| -> Vec<String> {
        store
            .events_since(after, limit)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect()
    };
    assert_eq!(names(0, 10), ["a", "b", "a", "c"]);
    assert_eq!(names(ids[1], 10), ["a", "c"]);
    assert_eq!(names(0, 2), ["a", "b"]);
    assert!(names(ids[3], 10).is_empty());
    assert_eq!(store.last_schedule_fire("pkg.wf").unwrap(), None);
    store
        .fire_schedule("pkg.wf", 120_000, &new_run("f2", None))
        .unwrap();
    store
        .fire_schedule("pkg.wf", 60_000, &new_run("f1", None))
        .unwrap();
    assert_eq!(store.last_schedule_fire("pkg.wf").unwrap(), Some(120_000));
}

pub fn cursors_start_once_and_only_move_forward_across_two_stores(f: &Fixture) {
    let (a, b) = (f.shared(), f.reopen());
    assert_eq!(a.cursor("events").unwrap(), None);
    // The first writer's start stays.
    assert_eq!(a.init_cursor("schedule:pkg.wf", 500).unwrap(), 500);
    assert_eq!(b.init_cursor("schedule:pkg.wf", 900).unwrap(), 500);
    // Forward only.
    assert_eq!(a.advance_cursor("events", 7).unwrap(), 7);
    assert_eq!(b.advance_cursor("events", 3).unwrap(), 7);
    assert_eq!(b.advance_cursor("events", 9).unwrap(), 9);
    assert_eq!(a.cursor("events").unwrap(), Some(9));
    assert_eq!(a.cursor("schedule:pkg.wf").unwrap(), Some(500));
}

/// A run's first move behind an ordered gate over the whole workflow (a schedule's
/// `overlap: queue`): held while a run has begun, and while an older run waits.
pub fn an_ordered_gate_holds_a_run_behind_older_and_begun_runs(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    let run = |id: &str, now: i64, key: Option<&str>| {
        let mut new = new_run(id, None);
        new.now = now;
        new.concurrency_key = key.map(str::to_owned);
        store.create_run(&new).unwrap();
    };
    run("a", 1000, Some("k"));
    run("b", 1001, None);
    run("c", 1002, None);
    let queued = |id: &str| {
        let mut first = start(id, 0, 1, 0);
        first.gate = Some(quiver_store::workflow::Gate {
            workflow: "pkg.wf".into(),
            key: None,
            limit: 1,
            ordered: true,
        });
        first
    };
    // `c` waits behind the older `a` and `b`, though neither has begun.
    assert!(!store.advance(&queued("c")).unwrap());
    // `a` is the oldest: it starts; then `b` waits behind it, begun.
    assert!(store.advance(&queued("a")).unwrap());
    assert!(!store.advance(&queued("b")).unwrap());
    // `a` ends: `b` goes, and `c` still waits behind `b`.
    let mut done = finish("a", 0, 1, json!(1));
    done.to.status = RunStatus::Completed;
    assert!(store.advance(&done).unwrap());
    assert!(store.advance(&queued("b")).unwrap());
    assert!(!store.advance(&queued("c")).unwrap());
    // An unordered gate with a key counts only begun runs with that key.
    let mut keyed = start("c", 0, 1, 0);
    keyed.gate = Some(quiver_store::workflow::Gate {
        workflow: "pkg.wf".into(),
        key: Some("k".into()),
        limit: 1,
        ordered: false,
    });
    assert!(store.advance(&keyed).unwrap());
}

pub fn a_runs_session_is_stored_with_its_row_and_an_existing_one_is_kept(f: &Fixture) {
    use quiver_store::NewSession;
    let store = f.shared();
    definition(&*store);
    let mut new = new_run("r1", None);
    new.session = Some(NewSession::new("ses-r1", "workflow"));
    store.create_run(&new).unwrap();
    assert_eq!(store.session("ses-r1").unwrap().unwrap().agent, "workflow");
    // A session of that id made before (by a step of an older build) is kept as it is.
    store
        .create_session(&NewSession::new("ses-r2", "other"))
        .unwrap();
    let mut new = new_run("r2", None);
    new.session = Some(NewSession::new("ses-r2", "workflow"));
    assert!(store.create_run(&new).unwrap().1);
    assert_eq!(store.session("ses-r2").unwrap().unwrap().agent, "other");
}

pub fn a_package_starts_no_run_beyond_its_bound_of_active_runs(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    let bounded = |id: &str| NewRun {
        active_limit: Some(2),
        ..new_run(id, None)
    };
    assert!(store.create_run(&bounded("r1")).unwrap().1);
    assert!(store.create_run(&bounded("r2")).unwrap().1);
    let err = store.create_run(&bounded("r3")).unwrap_err();
    assert!(matches!(err, StoreError::Full(_)), "{err:?}");
    assert!(
        err.to_string().contains("package `pkg` has 2 runs"),
        "{err}"
    );
    assert!(store.run("r3").unwrap().is_none(), "nothing written");
    // Another package's runs do not count; an ended run frees its place.
    let other = NewRun {
        workflow: "pkg-two.wf".into(),
        ..bounded("o1")
    };
    assert!(store.create_run(&other).unwrap().1);
    let mut end = start("r1", 0, 1, 0);
    end.attempts.clear();
    end.to.status = RunStatus::Cancelled;
    assert!(store.advance(&end).unwrap());
    assert!(store.create_run(&bounded("r3")).unwrap().1);
}
