//! Run leases on the store's clock with a fencing epoch, as several instances use them: of two
//! claimers of one attempt exactly one wins; a lease whose holder stopped heartbeating runs
//! out and is taken over under a higher epoch; every write of the old holder (its result, its
//! process, its heartbeat) then changes nothing; a heartbeat extends only the current
//! holder's lease.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use serde_json::json;

use quiver_store::workflow::{AttemptStatus, AttemptWrite, Claim, RunStatus};

use crate::backend::Fixture;
use crate::workflow_cases::{definition, finish, new_run, start};

/// The move that claims attempt `attempt` of step 0 for `owner`, seen at `prev` under `epoch`.
fn claim(
    owner: &str,
    ms: i64,
    attempt: i64,
    prev: i64,
    epoch: i64,
) -> quiver_store::workflow::Advance {
    let mut a = start("r", 0, attempt, prev);
    a.expect.epoch = epoch;
    a.to.lease = Some(Claim {
        owner: owner.into(),
        ms,
    });
    a
}

pub fn of_two_claimers_of_one_attempt_one_wins(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    let other = f.reopen();
    let barrier = Arc::new(Barrier::new(2));
    let claimers: Vec<_> = [("a", store.clone()), ("b", other)]
        .into_iter()
        .map(|(owner, store)| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                (
                    owner,
                    store.advance(&claim(owner, 60_000, 1, 0, 0)).unwrap(),
                )
            })
        })
        .collect();
    let won: Vec<_> = claimers
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|(_, won)| *won)
        .map(|(owner, _)| owner)
        .collect();
    assert_eq!(won.len(), 1, "{won:?}");
    let before = store.clock_ms().unwrap();
    let run = store.run("r").unwrap().unwrap();
    assert_eq!(run.epoch, 1, "a claim raises the epoch once");
    let lease = run.lease.unwrap();
    assert_eq!(lease.owner, won[0]);
    // The expiry is the store's clock plus the lease's length.
    assert!(
        lease.until > before && lease.until <= before + 60_000,
        "{lease:?} at {before}"
    );
    assert_eq!(store.attempts("r").unwrap().len(), 1);
    // A running run's lease expiry is a moment to wake at.
    assert_eq!(store.next_wake_at().unwrap(), Some(lease.until));
    // The store's clock is the machine's here (one machine runs the test and the database).
    let system = quiver_store::now_ms();
    assert!((before - system).abs() < 5_000, "{before} vs {system}");
}

pub fn an_expired_lease_is_taken_over_with_a_higher_epoch(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    assert!(store.advance(&claim("a", 300, 1, 0, 0)).unwrap());
    assert!(store.expired_leases().unwrap().is_empty());
    assert!(store.heartbeat_run("r", 1, "a", 300).unwrap());
    // `a` stops heartbeating (killed, stopped, cut off).
    thread::sleep(Duration::from_millis(450));
    assert_eq!(store.expired_leases().unwrap(), ["r"]);
    // A lease that ran out is lost even before anyone takes the run over.
    assert!(!store.heartbeat_run("r", 1, "a", 300).unwrap());
    // `b` takes over: the attempt crashed, the next one is claimed under epoch 2.
    let mut takeover = claim("b", 60_000, 2, 1, 1);
    let crashed = AttemptWrite {
        status: AttemptStatus::Crashed,
        attempt: 1,
        ..takeover.attempts[0].clone()
    };
    takeover.attempts.insert(0, crashed);
    assert!(store.advance(&takeover).unwrap());
    // A second taker that saw the same state loses.
    assert!(!store.advance(&claim("c", 60_000, 2, 1, 1)).unwrap());
    let run = store.run("r").unwrap().unwrap();
    assert_eq!((run.epoch, run.attempt), (2, 2));
    assert_eq!(run.lease.unwrap().owner, "b");
    assert!(store.expired_leases().unwrap().is_empty());
}

pub fn a_stale_epoch_write_changes_nothing(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    assert!(store.advance(&claim("a", 60_000, 1, 0, 0)).unwrap());
    assert!(
        store
            .set_attempt_process("r", 0, 1, 1, Some("b:n:40:7"))
            .unwrap()
    );
    // `b` claims the same attempt again (an operator's retry of a step in doubt keeps the
    // numbers; only the epoch tells the holders apart).
    let mut again = claim("b", 60_000, 1, 1, 1);
    again.attempts.clear();
    assert!(store.advance(&again).unwrap());
    let seen = (
        store.run("r").unwrap().unwrap(),
        store.attempts("r").unwrap(),
    );
    assert_eq!(seen.0.epoch, 2);
    // Every write of `a`, under epoch 1, is refused and writes nothing.
    let mut late = finish("r", 0, 1, json!("late"));
    late.expect.epoch = 1;
    assert!(!store.advance(&late).unwrap());
    assert!(
        !store
            .set_attempt_process("r", 0, 1, 1, Some("b:n:41:7"))
            .unwrap()
    );
    assert!(!store.heartbeat_run("r", 1, "a", 60_000).unwrap());
    assert_eq!(
        (
            store.run("r").unwrap().unwrap(),
            store.attempts("r").unwrap()
        ),
        seen
    );
    // The holder's own writes, under epoch 2, go through.
    assert!(
        store
            .set_attempt_process("r", 0, 1, 2, Some("b:n:42:7"))
            .unwrap()
    );
    late.expect.epoch = 2;
    assert!(store.advance(&late).unwrap());
    let run = store.run("r").unwrap().unwrap();
    assert_eq!((run.step, run.epoch, run.lease), (1, 2, None));
    assert_eq!(store.attempts("r").unwrap()[0].status, AttemptStatus::Ok);
}

pub fn a_heartbeat_extends_only_the_current_holders_lease(f: &Fixture) {
    let store = f.shared();
    definition(&*store);
    store.create_run(&new_run("r", None)).unwrap();
    assert!(store.advance(&claim("a", 1_000, 1, 0, 0)).unwrap());
    let first = store.run("r").unwrap().unwrap().lease.unwrap().until;
    thread::sleep(Duration::from_millis(20));
    assert!(store.heartbeat_run("r", 1, "a", 60_000).unwrap());
    let moved = store.run("r").unwrap().unwrap().lease.unwrap();
    assert_eq!(moved.owner, "a");
    assert!(moved.until >= first + 59_000, "{first} → {}", moved.until);
    // Another owner, or the holder under another epoch, extends nothing.
    assert!(!store.heartbeat_run("r", 1, "b", 60_000).unwrap());
    assert!(!store.heartbeat_run("r", 0, "a", 60_000).unwrap());
    assert!(!store.heartbeat_run("r", 2, "a", 60_000).unwrap());
    assert!(!store.heartbeat_run("nope", 1, "a", 60_000).unwrap());
    assert_eq!(store.run("r").unwrap().unwrap().lease.unwrap(), moved);
    // Cancelled while the step runs: the holder's next heartbeat tells it to stop.
    let mut cancel = start("r", 0, 1, 1);
    cancel.expect.epoch = 1;
    cancel.attempts.clear();
    cancel.to.status = RunStatus::Cancelled;
    assert!(store.advance(&cancel).unwrap());
    assert!(!store.heartbeat_run("r", 1, "a", 60_000).unwrap());
    let run = store.run("r").unwrap().unwrap();
    assert_eq!(
        (run.status, run.epoch, run.lease),
        (RunStatus::Cancelled, 1, None)
    );
}
