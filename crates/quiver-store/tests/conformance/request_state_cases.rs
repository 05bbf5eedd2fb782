//! Spent request states ([`quiver_store::request_states`]): of spenders of one nonce on two
//! stores (two instances) exactly one is first; the others read "running" until the call's
//! result is stored, then that result; expired nonces are pruned.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use serde_json::json;

use quiver_store::{Spend, Store};

use crate::backend::Fixture;

const TTL_MS: i64 = 60_000;

pub fn of_spenders_on_two_stores_exactly_one_is_first(f: &Fixture) {
    const THREADS: usize = 8;
    let stores: [Arc<dyn Store>; 2] = [f.shared(), f.reopen()];
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, barrier) = (Arc::clone(&stores[t % 2]), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                store.spend_request_state("n-race", TTL_MS).unwrap()
            })
        })
        .collect();
    let spends: Vec<Spend> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let first = spends.iter().filter(|s| **s == Spend::First).count();
    assert_eq!(first, 1, "{spends:?}");
    assert!(
        spends
            .iter()
            .all(|s| matches!(s, Spend::First | Spend::Running)),
        "{spends:?}"
    );
    assert_eq!(f.rows("request_states"), 1);
}

pub fn a_spent_state_replays_its_stored_result_once_stored(f: &Fixture) {
    let (a, b) = (f.shared(), f.reopen());
    assert_eq!(a.spend_request_state("n1", TTL_MS).unwrap(), Spend::First);
    assert_eq!(b.spend_request_state("n1", TTL_MS).unwrap(), Spend::Running);
    let result = json!({"done": {"content": {"sent": true}, "status": "ok"}});
    assert!(a.finish_request_state("n1", &result).unwrap());
    // Stored once: a second result changes nothing.
    assert!(!b.finish_request_state("n1", &json!({"other": 1})).unwrap());
    for store in [&a, &b] {
        assert_eq!(
            store.spend_request_state("n1", TTL_MS).unwrap(),
            Spend::Finished(result.clone())
        );
    }
    // Another nonce is its own.
    assert_eq!(b.spend_request_state("n2", TTL_MS).unwrap(), Spend::First);
    // A nonce never spent has nowhere to store a result.
    assert!(!a.finish_request_state("n-unknown", &result).unwrap());
    assert!(a.spend_request_state("", TTL_MS).is_err());
}

pub fn expired_spent_states_are_pruned(f: &Fixture) {
    let store = f.store();
    assert_eq!(store.spend_request_state("short", 1).unwrap(), Spend::First);
    assert_eq!(
        store.spend_request_state("long", TTL_MS).unwrap(),
        Spend::First
    );
    thread::sleep(Duration::from_millis(20));
    // The next spend prunes the expired row: its nonce is spendable again (its sealed state
    // has expired long before, so no client can bring it), the live one is kept.
    assert_eq!(
        store.spend_request_state("other", TTL_MS).unwrap(),
        Spend::First
    );
    assert_eq!(f.rows("request_states"), 2);
    assert!(!store.finish_request_state("short", &json!(1)).unwrap());
    assert_eq!(
        store.spend_request_state("long", TTL_MS).unwrap(),
        Spend::Running
    );
}
