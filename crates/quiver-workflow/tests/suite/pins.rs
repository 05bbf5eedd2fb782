//! Package digests pinned by a run (issue 26): two or three engines on one SQLite file, each
//! with its own loaded packages. The one without the run's pinned digests never claims the
//! run, takes it over, wakes it or answers it (no epoch raised, no status changed, its runner
//! never called); the one with them does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use quiver_store::workflow::{AttemptStatus, RunStatus, WaitStatus};
use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::{Definition, Engine, WorkflowError};

use super::common::{Act, Fake, clock, crash, definition, start};

const V1: &str = "sha256:1111";
const V2: &str = "sha256:2222";
const OTHER: &str = "sha256:0000";

/// `pkg.mark` (re-run safe), a ten-minute pause, an approval, `other.note`.
const FLOW: &str = "description: d
steps:
  - id: mark
    tool: pkg.mark
  - id: pause
    wait: 10m
  - id: ok
    approval: {title: go?}
  - id: note
    tool: other.note
";

/// A runner that has loaded `pkg` at `pkg_digest` (and `other`), scripted by `script`.
fn runner(pkg_digest: &str, script: &[(&str, Act)]) -> Fake {
    let fake = Fake::with(script);
    *fake.loaded.lock().unwrap() = BTreeMap::from([
        ("pkg".to_owned(), pkg_digest.to_owned()),
        ("other".to_owned(), OTHER.to_owned()),
    ]);
    fake
}

fn pinned() -> Definition {
    definition(FLOW, &["mark"]).pinned(&|id| match id {
        "pkg" => Some(V1.to_owned()),
        "other" => Some(OTHER.to_owned()),
        _ => None,
    })
}

fn statuses(store: &dyn WorkflowStore, run: &str) -> Vec<(String, AttemptStatus)> {
    store
        .attempts(run)
        .unwrap()
        .into_iter()
        .map(|a| (a.step_id, a.status))
        .collect()
}

#[test]
fn a_definition_pins_each_package_its_steps_run() {
    let def = pinned();
    assert_eq!(
        def.packages,
        BTreeMap::from([
            ("other".to_owned(), OTHER.to_owned()),
            ("pkg".to_owned(), V1.to_owned()),
        ])
    );
    // Another version of a package is another definition; no pins keep the old digest.
    let other = definition(FLOW, &["mark"]).pinned(&|id| (id == "pkg").then(|| V2.to_owned()));
    assert_ne!(def.digest().unwrap(), other.digest().unwrap());
    let unpinned = definition(FLOW, &["mark"]);
    assert!(
        !unpinned
            .to_json()
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("packages")
    );
    assert_eq!(
        Definition::from_stored(&quiver_store::workflow::Definition {
            digest: "d".into(),
            workflow: "pkg.wf".into(),
            body: unpinned.to_json().unwrap(),
        })
        .unwrap()
        .packages,
        BTreeMap::new()
    );
}

#[test]
fn only_an_engine_with_the_pinned_digests_takes_over_wakes_and_answers_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let clock = clock();
    let lease = Duration::from_millis(50);
    // A (v1) starts the run; its step dies mid-call, leaving the attempt started under A's
    // lease.
    let a = runner(V1, &[("mark", Act::Crash)]);
    let b = runner(V2, &[]);
    let c = runner(V1, &[("mark", Act::Output(json!("v1")))]);
    let engine_a = Engine::new(&store, &a, &clock)
        .with_owner("a")
        .with_lease(lease);
    let engine_b = Engine::new(&store, &b, &clock)
        .with_owner("b")
        .with_lease(lease);
    let engine_c = Engine::new(&store, &c, &clock)
        .with_owner("c")
        .with_lease(lease);
    let digest = engine_a.pin(&pinned()).unwrap();
    let (run, _) = engine_a.start(&digest, &start(json!({}))).unwrap();
    crash(|| {
        let _ = engine_a.drive(&run.id);
    });
    std::thread::sleep(lease * 3);
    let before = store.run(&run.id).unwrap().unwrap();
    assert_eq!((before.status, before.epoch), (RunStatus::Running, 1));
    assert_eq!(
        store.expired_leases().unwrap(),
        std::slice::from_ref(&run.id)
    );

    // B (v2) is offered the run (its lease ran out) and leaves it alone.
    assert!(engine_b.wake().unwrap().contains(&run.id));
    let left = engine_b.drive(&run.id).unwrap();
    assert_eq!(left, before);
    engine_b.tick().unwrap();
    engine_b.resume().unwrap();
    assert_eq!(store.run(&run.id).unwrap().unwrap(), before);
    assert_eq!(
        statuses(&store, &run.id),
        [("mark".into(), AttemptStatus::Started)]
    );
    assert!(b.ledger.lock().unwrap().is_empty());
    assert_eq!(
        engine_b.waiting_for(&run.id).unwrap().as_deref(),
        Some("an instance that has loaded pkg@sha256:1111")
    );
    assert_eq!(engine_c.waiting_for(&run.id).unwrap(), None);

    // C (v1) takes it over: its step runs under the next epoch, then the run pauses.
    let run_c = engine_c.drive(&run.id).unwrap();
    assert_eq!((run_c.status, run_c.epoch), (RunStatus::Waiting, 2));
    assert_eq!(c.calls("mark").len(), 1);
    assert_eq!(
        statuses(&store, &run.id)[..2],
        [
            ("mark".into(), AttemptStatus::Crashed),
            ("mark".into(), AttemptStatus::Ok)
        ]
    );

    // The pause is due: B neither wakes it nor drives it; C does, and the run asks a person.
    clock.advance(Duration::from_secs(11 * 60));
    let waiting = store.run(&run.id).unwrap().unwrap();
    assert_eq!(engine_b.tick().unwrap(), []);
    assert_eq!(store.run(&run.id).unwrap().unwrap(), waiting);
    assert_eq!(
        store.pending_waits(None).unwrap()[0].status,
        WaitStatus::Pending
    );
    let woke = engine_c.tick().unwrap();
    assert_eq!(woke.len(), 1);
    assert_eq!((woke[0].status, woke[0].step), (RunStatus::Waiting, 2));

    // B refuses the person's answer, saying why; C takes it, and `other.note` runs on C.
    let asked = store.run(&run.id).unwrap().unwrap();
    match engine_b.answer(&run.id, true, "boss", None) {
        Err(WorkflowError::Refused(why)) => assert!(
            why.contains(&format!(
                "run {} needs pkg@sha256:1111 which this instance has not loaded (it has pkg@sha256:2222)",
                run.id
            )),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.run(&run.id).unwrap().unwrap(), asked);
    let done = engine_c.answer(&run.id, true, "boss", None).unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(c.calls("note").len(), 1);
    assert!(b.ledger.lock().unwrap().is_empty());
}

#[test]
fn a_run_without_pins_runs_anywhere_and_a_package_not_loaded_is_not_met() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let clock = clock();
    let flow = "description: d\nsteps:\n  - id: mark\n    tool: pkg.mark\n";
    // A definition stored before packages were pinned: any engine drives it.
    let bare = Fake::default();
    let engine = Engine::new(&store, &bare, &clock);
    let digest = engine.pin(&definition(flow, &[])).unwrap();
    let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
    assert_eq!(engine.drive(&run.id).unwrap().status, RunStatus::Completed);
    // Pinned to a package this runner has not loaded at all.
    let def = definition(flow, &[]).pinned(&|_| Some(V1.to_owned()));
    let digest = engine.pin(&def).unwrap();
    let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
    assert_eq!(engine.drive(&run.id).unwrap().status, RunStatus::Running);
    assert_eq!(store.run(&run.id).unwrap().unwrap().epoch, 0);
    assert_eq!(
        engine.waiting_for(&run.id).unwrap().as_deref(),
        Some("an instance that has loaded pkg@sha256:1111")
    );
    assert_eq!(
        bare.calls("mark").len(),
        1,
        "only the unpinned run's step ran"
    );
}

#[test]
fn a_reload_that_loads_the_pinned_digest_lets_the_engine_take_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let clock = clock();
    let lease = Duration::from_millis(50);
    let a = runner(V1, &[("mark", Act::Crash)]);
    let b = runner(V2, &[("mark", Act::Output(json!("ran")))]);
    let engine_a = Engine::new(&store, &a, &clock)
        .with_owner("a")
        .with_lease(lease);
    let engine_b = Engine::new(&store, &b, &clock)
        .with_owner("b")
        .with_lease(lease);
    let digest = engine_a.pin(&pinned()).unwrap();
    let (run, _) = engine_a.start(&digest, &start(json!({}))).unwrap();
    crash(|| {
        let _ = engine_a.drive(&run.id);
    });
    std::thread::sleep(lease * 3);
    assert_eq!(engine_b.drive(&run.id).unwrap().epoch, 1);
    assert!(b.ledger.lock().unwrap().is_empty());
    // B reloads and now has version 1: the next pass offers the run again and B takes it.
    b.loaded
        .lock()
        .unwrap()
        .insert("pkg".to_owned(), V1.to_owned());
    assert!(engine_b.wake().unwrap().contains(&run.id));
    let taken = engine_b.drive(&run.id).unwrap();
    assert_eq!((taken.status, taken.epoch), (RunStatus::Waiting, 2));
    assert_eq!(b.calls("mark").len(), 1);
}
