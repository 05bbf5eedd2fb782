//! Held turns and shared questions ([`quiver_store::turns`]): writers of one conversation's
//! turns on two stores (two instances) never lose each other's lockouts, because every write
//! is conditional on the version it read; of requests claiming one question at once, exactly
//! one asks it and the others share it and its answer.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use quiver_store::{Claim, Store, StoreError};

use crate::backend::Fixture;
use crate::store_cases::session;

const TTL_MS: i64 = 60_000;

/// What a front does with its turn: read, add its lockout to what it read, write under the
/// version read; read again and merge when another writer came first.
fn add_lockout(store: &dyn Store, session: &str, tool: &str) -> u32 {
    let mut tries = 0;
    loop {
        tries += 1;
        let held = store.held_turns(session).unwrap();
        let mut locked: Vec<Value> = held
            .as_ref()
            .and_then(|h| h.turns["locked"].as_array().cloned())
            .unwrap_or_default();
        locked.push(json!(tool));
        let expected = held.map(|h| h.version);
        if store
            .put_held_turns(session, expected, &json!({ "locked": locked }))
            .unwrap()
        {
            return tries;
        }
    }
}

pub fn turn_writers_on_two_stores_never_lose_a_lockout(f: &Fixture) {
    const THREADS: usize = 8;
    session(f.store(), "s1");
    let stores: [Arc<dyn Store>; 2] = [f.shared(), f.reopen()];
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(&stores[t % 2]), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                add_lockout(store.as_ref(), "s1", &format!("pkg.tool{t}"))
            })
        })
        .collect();
    let tries: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let held = stores[1].held_turns("s1").unwrap().unwrap();
    let mut locked: Vec<String> = held.turns["locked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    locked.sort();
    let expected: Vec<String> = (0..THREADS).map(|t| format!("pkg.tool{t}")).collect();
    assert_eq!(
        locked, expected,
        "a lockout was lost ({tries} writes tried)"
    );
    // One version per successful write: every losing write changed nothing.
    assert_eq!(held.version, THREADS as i64);
    assert_eq!(f.rows("held_turns"), 1);
}

pub fn held_turns_are_written_only_at_the_version_read(f: &Fixture) {
    let (a, b) = (f.shared(), f.reopen());
    session(a.as_ref(), "s1");
    assert_eq!(a.held_turns("s1").unwrap(), None);
    assert_eq!(a.held_turns("nobody").unwrap(), None);
    assert!(a.put_held_turns("s1", None, &json!({"n": 1})).unwrap());
    // A second first write lost: nothing changed.
    assert!(!b.put_held_turns("s1", None, &json!({"n": 2})).unwrap());
    let held = b.held_turns("s1").unwrap().unwrap();
    assert_eq!((held.turns.clone(), held.version), (json!({"n": 1}), 1));
    assert!(b.put_held_turns("s1", Some(1), &json!({"n": 3})).unwrap());
    // A write at a version moved on is refused.
    assert!(!a.put_held_turns("s1", Some(1), &json!({"n": 4})).unwrap());
    let held = a.held_turns("s1").unwrap().unwrap();
    assert_eq!((held.turns, held.version), (json!({"n": 3}), 2));
    assert!(matches!(
        a.put_held_turns("nobody", None, &json!({})),
        Err(StoreError::NotFound { .. })
    ));
    // The row goes with its session.
    a.delete_session("s1").unwrap();
    assert_eq!(f.rows("held_turns"), 0);
}

pub fn of_claimants_on_two_stores_exactly_one_asks(f: &Fixture) {
    const THREADS: usize = 8;
    session(f.store(), "s1");
    let stores: [Arc<dyn Store>; 2] = [f.shared(), f.reopen()];
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(&stores[t % 2]), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let id = format!("req-{t}");
                let claim = store
                    .claim_question("s1", "consent:travel", &id, TTL_MS)
                    .unwrap();
                (id, claim)
            })
        })
        .collect();
    let claims: Vec<(String, Claim)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let askers: Vec<&String> = claims
        .iter()
        .filter(|(_, c)| *c == Claim::Asks)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(askers.len(), 1, "{claims:?}");
    for (_, claim) in &claims {
        if let Claim::Shares(shared) = claim {
            assert_eq!(
                &shared.id, askers[0],
                "a loser shares the winner's question"
            );
            assert_eq!(shared.answer, None);
        }
    }
    assert_eq!(f.rows("shared_questions"), 1);
    // An answer brought by any request resolves it for all, once.
    assert!(
        stores[1]
            .answer_question("s1", "consent:travel", "granted")
            .unwrap()
    );
    assert!(
        !stores[0]
            .answer_question("s1", "consent:travel", "denied")
            .unwrap()
    );
    for store in &stores {
        let stood = store.question("s1", "consent:travel").unwrap().unwrap();
        assert_eq!(stood.answer.as_deref(), Some("granted"));
    }
}

pub fn a_question_released_expired_or_answered_is_asked_anew(f: &Fixture) {
    let (a, b) = (f.shared(), f.reopen());
    session(a.as_ref(), "s1");
    let key = "consent:travel";
    assert_eq!(
        a.claim_question("s1", key, "r1", TTL_MS).unwrap(),
        Claim::Asks
    );
    // Claiming again as the asker (a retry of the winner) still asks.
    assert_eq!(
        a.claim_question("s1", key, "r1", TTL_MS).unwrap(),
        Claim::Asks
    );
    // Only its asker withdraws an unanswered question.
    assert!(!b.release_question("s1", key, "r2").unwrap());
    assert!(matches!(
        b.claim_question("s1", key, "r2", TTL_MS).unwrap(),
        Claim::Shares(q) if q.id == "r1"
    ));
    assert!(a.release_question("s1", key, "r1").unwrap());
    assert_eq!(a.question("s1", key).unwrap(), None);
    assert_eq!(
        b.claim_question("s1", key, "r2", TTL_MS).unwrap(),
        Claim::Asks
    );
    // Answered: nothing to withdraw; the next claim asks anew (the answer was given).
    assert!(a.answer_question("s1", key, "denied").unwrap());
    assert!(!b.release_question("s1", key, "r2").unwrap());
    assert_eq!(
        a.claim_question("s1", key, "r3", TTL_MS).unwrap(),
        Claim::Asks
    );
    assert_eq!(a.question("s1", key).unwrap().unwrap().answer, None);
    // Expired: asked anew.
    assert_eq!(
        a.claim_question("s1", "consent:other", "r4", 1).unwrap(),
        Claim::Asks
    );
    thread::sleep(Duration::from_millis(20));
    assert_eq!(
        b.claim_question("s1", "consent:other", "r5", TTL_MS)
            .unwrap(),
        Claim::Asks
    );
    // Other sessions' questions are their own; an unknown session has none.
    session(a.as_ref(), "s2");
    assert_eq!(
        b.claim_question("s2", key, "r6", TTL_MS).unwrap(),
        Claim::Asks
    );
    assert!(matches!(
        a.claim_question("nobody", key, "r7", TTL_MS),
        Err(StoreError::NotFound { .. })
    ));
    assert!(a.claim_question("s1", "", "r8", TTL_MS).is_err());
    assert!(!a.answer_question("nobody", key, "granted").unwrap());
    a.delete_session("s1").unwrap();
    assert_eq!(f.rows("shared_questions"), 1);
}
