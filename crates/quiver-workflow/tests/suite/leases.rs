//! The engine's lease on the step it runs, over a real SQLite file: heartbeats keep a step
//! that outlasts its lease held (nobody may take it over), and an engine whose heartbeat is
//! refused (another engine took the run over) stops its step at once, and its result is
//! refused.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use quiver_store::workflow::{
    Advance, AttemptStatus, AttemptWrite, Claim, Expect, RunMove, RunStatus,
};
use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::{Engine, StepCall, StepOutcome, StepRunner, lease};

use super::common::{clock, definition, start};

/// A step that runs until it is stopped (its lease lost) or `runs` passed.
struct Slow {
    runs: Duration,
    stop: Mutex<Option<mpsc::Sender<()>>>,
    stopped: Mutex<Option<mpsc::Receiver<()>>>,
    lost: Mutex<Vec<i64>>,
}

impl Slow {
    fn new(runs: Duration) -> Slow {
        let (stop, stopped) = mpsc::channel();
        Slow {
            runs,
            stop: Mutex::new(Some(stop)),
            stopped: Mutex::new(Some(stopped)),
            lost: Mutex::new(Vec::new()),
        }
    }
}

impl StepRunner for Slow {
    fn run(&self, _call: &StepCall) -> StepOutcome {
        let stopped = self.stopped.lock().unwrap().take().unwrap();
        match stopped.recv_timeout(self.runs) {
            Ok(()) => StepOutcome::Failed("killed".into()),
            Err(_) => StepOutcome::Output(json!("done")),
        }
    }

    fn lease_lost(&self, call: &StepCall) {
        self.lost.lock().unwrap().push(call.epoch);
        if let Some(stop) = self.stop.lock().unwrap().take() {
            let _ = stop.send(());
        }
    }
}

const FLOW: &str = "description: d\nsteps:\n  - id: read\n    tool: x.read\n";

#[test]
fn heartbeats_keep_a_step_that_outlasts_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("q.db")).unwrap());
    let slow = Slow::new(Duration::from_millis(1_200));
    let clock = clock();
    let engine = Engine::new(store.as_ref(), &slow, &clock)
        .with_owner("host-a")
        .with_lease(Duration::from_millis(300));
    let digest = engine.pin(&definition(FLOW, &["read"])).unwrap();
    let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
    let watched = {
        let (store, id) = (store.clone(), run.id.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(100));
                if let Some(lease) = store.run(&id).unwrap().unwrap().lease {
                    seen.push((lease.until, store.expired_leases().unwrap().is_empty()));
                }
            }
            seen
        })
    };
    let run = engine.drive(&run.id).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let seen = watched.join().unwrap();
    // Four times the lease went by; it never ran out, and it moved forward.
    assert!(seen.iter().all(|(_, held)| *held), "{seen:?}");
    assert!(seen.last().unwrap().0 >= seen[0].0 + 300, "{seen:?}");
    assert!(slow.lost.lock().unwrap().is_empty());
    assert_eq!(store.attempts(&run.id).unwrap().len(), 1);
}

#[test]
fn an_engine_whose_run_was_taken_over_stops_its_step_and_its_result_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("q.db")).unwrap());
    let slow = Slow::new(Duration::from_secs(10));
    let clock = clock();
    let engine = Engine::new(store.as_ref(), &slow, &clock)
        .with_owner("host-a")
        .with_lease(Duration::from_millis(300));
    let digest = engine.pin(&definition(FLOW, &["read"])).unwrap();
    let (run, _) = engine.start(&digest, &start(json!({}))).unwrap();
    let refused = lease::refused_results();
    let taker = {
        let (store, id) = (store.clone(), run.id.clone());
        std::thread::spawn(move || {
            while store.attempts(&id).unwrap().is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Another instance takes the run over (as after the lease ran out): attempt 1
            // crashed, attempt 2 claimed under the next epoch.
            let write = |attempt, status| AttemptWrite {
                step: 0,
                attempt,
                step_id: "read".into(),
                idempotency_key: format!("{id}:read"),
                status,
                output: None,
                error: None,
            };
            let takeover = Advance {
                run_id: id.clone(),
                expect: Expect {
                    status: RunStatus::Running,
                    step: 0,
                    attempt: 1,
                    epoch: 1,
                },
                attempts: vec![
                    write(1, AttemptStatus::Crashed),
                    write(2, AttemptStatus::Started),
                ],
                to: RunMove {
                    status: RunStatus::Running,
                    step: 0,
                    attempt: 2,
                    crashes: 1,
                    output: None,
                    error: None,
                    lease: Some(Claim {
                        owner: "host-b".into(),
                        ms: 60_000,
                    }),
                },
                wait: None,
                resolve: None,
                withdraw_waits: false,
                audit: None,
                call_audit: None,
                gate: None,
                now: 0,
            };
            assert!(store.advance(&takeover).unwrap());
        })
    };
    let started = std::time::Instant::now();
    let run = engine.drive(&run.id).unwrap();
    taker.join().unwrap();
    // Stopped at its next heartbeat, long before the step's 10 s, and nothing of it written.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(*slow.lost.lock().unwrap(), [1]);
    assert!(lease::refused_results() > refused);
    assert_eq!(
        (run.status, run.attempt, run.epoch),
        (RunStatus::Running, 2, 2)
    );
    assert_eq!(run.lease.unwrap().owner, "host-b");
    let attempts: Vec<_> = store
        .attempts(&run.id)
        .unwrap()
        .into_iter()
        .map(|a| (a.attempt, a.status))
        .collect();
    assert_eq!(
        attempts,
        [(1, AttemptStatus::Crashed), (2, AttemptStatus::Started)]
    );
}
