//! Races between two stores on one database, as two processes (two Quiver instances) run
//! them: the loaded-tool cap holds under concurrent loads into one session, and of two answers
//! to one approval (or two uses of one answer) exactly one wins.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use quiver_store::{ApprovalCard, ApprovalStatus, Decision, NewSession, Store, StoreError, now_ms};

use crate::backend::Fixture;

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

pub fn concurrent_loads_into_one_session_never_pass_the_cap(f: &Fixture) {
    const CAP: usize = 3;
    const THREADS: usize = 4;
    const LOADS: usize = 20;
    let stores: [Arc<dyn Store>; 2] = [f.shared(), f.reopen()];
    stores[0]
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(&stores[t % 2]), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut evicted = Vec::new();
                for i in 0..LOADS {
                    evicted.extend(store.load_tool("s1", &format!("t{t}.n{i}"), CAP).unwrap());
                    let loaded = store.loaded_tools("s1").unwrap();
                    assert!(loaded.len() <= CAP, "{loaded:?}");
                }
                evicted
            })
        })
        .collect();
    let evicted: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let loaded = stores[1].loaded_tools("s1").unwrap();
    assert_eq!(loaded.len(), CAP, "{loaded:?}");
    // Every tool was loaded once: each is evicted at most once, and the evicted ones and the
    // loaded ones are all of them.
    let unique: BTreeSet<&String> = evicted.iter().collect();
    assert_eq!(unique.len(), evicted.len(), "evicted twice: {evicted:?}");
    assert_eq!(evicted.len() + CAP, THREADS * LOADS);
    assert!(loaded.iter().all(|t| !unique.contains(t)));
}

pub fn two_answers_to_one_approval_from_two_stores_one_wins(f: &Fixture) {
    let stores: [Arc<dyn Store>; 2] = [f.shared(), f.reopen()];
    stores[0]
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    for round in 0..10 {
        let id = format!("a{round}");
        stores[0].enqueue_approval(&card(&id)).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let decisions = [Decision::Approve, Decision::Deny];
        let outcomes: Vec<_> = (0..2)
            .map(|i| {
                let (store, barrier, id) =
                    (Arc::clone(&stores[i]), Arc::clone(&barrier), id.clone());
                thread::spawn(move || {
                    barrier.wait();
                    store.answer_approval(&id, decisions[i], &format!("u{i}"), None)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        let won = winners[0].status;
        let lost = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
        assert!(
            matches!(lost, StoreError::AlreadyAnswered { status, .. } if *status == won),
            "round {round}: {lost:?}"
        );
        assert_eq!(stores[1].approval(&id).unwrap().unwrap().status, won);
        // The answer is used once, however many retries race for it.
        let barrier = Arc::new(Barrier::new(2));
        let uses: Vec<bool> = (0..2)
            .map(|i| {
                let (store, barrier, id) =
                    (Arc::clone(&stores[i]), Arc::clone(&barrier), id.clone());
                thread::spawn(move || {
                    barrier.wait();
                    store.use_answer(&id).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(uses.iter().filter(|u| **u).count(), 1, "round {round}");
    }
}

pub fn a_wait_sees_an_answer_written_by_another_store(f: &Fixture) {
    let (a, b) = (f.shared(), f.reopen());
    a.create_session(&NewSession::new("s1", "chat")).unwrap();
    a.enqueue_approval(&card("w1")).unwrap();
    let answer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        b.answer_approval("w1", Decision::Approve, "u", None)
            .unwrap()
    });
    let start = Instant::now();
    let seen = a.wait_approval("w1", Duration::from_secs(10)).unwrap();
    answer.join().unwrap();
    assert_eq!(seen.status, ApprovalStatus::Approved);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}
