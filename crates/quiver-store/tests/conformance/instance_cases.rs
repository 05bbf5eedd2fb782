//! The registry of `quiver serve` instances on one database: registered and heartbeated on the
//! store's clock; an instance whose heartbeat stopped is reaped by exactly one of the others
//! (never by itself); a reaped instance's heartbeat is refused until it registers again; and a
//! dead instance's call in flight is ended `interrupted` once, however many reapers try.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use quiver_store::instances::NewInstance;
use quiver_store::{AuditEntry, AuditKind, AuditStatus};

use crate::backend::Fixture;

fn instance(id: &str, pid: i64) -> NewInstance {
    NewInstance {
        id: id.into(),
        host: "h1".into(),
        pid,
        process: Some(format!("boot:ns:{pid}:99")),
    }
}

pub fn instances_heartbeat_and_a_dead_one_is_reaped_by_exactly_one_other(f: &Fixture) {
    let store = f.shared();
    let before = store.clock_ms().unwrap();
    let a = store.register_instance(&instance("a", 10)).unwrap();
    assert_eq!((a.host.as_str(), a.pid, a.reaped_at), ("h1", 10, None));
    assert!(
        a.started_at >= before && a.heartbeat_at == a.started_at,
        "{a:?}"
    );
    store.register_instance(&instance("b", 11)).unwrap();
    store.register_instance(&instance("c", 12)).unwrap();
    assert!(store.heartbeat_instance("a").unwrap());
    assert!(!store.heartbeat_instance("nobody").unwrap());
    // Nobody is stale yet.
    assert!(store.reap_instances(5_000, "b").unwrap().is_empty());
    // `a` stops heartbeating; `b` and `c` go on, and both try to reap at once.
    thread::sleep(Duration::from_millis(400));
    assert!(store.heartbeat_instance("b").unwrap());
    assert!(store.heartbeat_instance("c").unwrap());
    let other = f.reopen();
    let barrier = Arc::new(Barrier::new(2));
    let reapers: Vec<_> = [("b", store.clone()), ("c", other)]
        .into_iter()
        .map(|(me, store)| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                store.reap_instances(300, me).unwrap()
            })
        })
        .collect();
    let reaped: Vec<_> = reapers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(reaped[0].id, "a");
    let listed = store.instances().unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    let dead = &listed[0];
    assert!(dead.reaped_at.is_some());
    assert!(matches!(dead.reaped_by.as_deref(), Some("b" | "c")));
    // Nobody reaps itself, however stale it looks.
    assert!(
        store
            .reap_instances(-60_000, "b")
            .unwrap()
            .iter()
            .all(|i| i.id != "b")
    );
    // A reaped instance that was only slow learns it at its next heartbeat, and registers
    // again.
    assert!(!store.heartbeat_instance("a").unwrap());
    let again = store.register_instance(&instance("a", 10)).unwrap();
    assert_eq!((again.reaped_at, again.reaped_by), (None, None));
    assert!(store.heartbeat_instance("a").unwrap());
}

pub fn a_dead_instances_call_in_flight_is_closed_interrupted_once(f: &Fixture) {
    let store = f.shared();
    crate::store_cases::session(store.as_ref(), "s1");
    let mut started = AuditEntry::new(AuditKind::CallStarted, "s1");
    started.call_id = Some("c1".into());
    started.status = AuditStatus::Started;
    store.append_audit(&started).unwrap();
    let mut end = started.clone();
    end.kind = AuditKind::Call;
    end.status = AuditStatus::Interrupted;
    let other = f.reopen();
    let barrier = Arc::new(Barrier::new(2));
    let closers: Vec<_> = [store.clone(), other]
        .into_iter()
        .map(|store| {
            let (barrier, end) = (barrier.clone(), end.clone());
            thread::spawn(move || {
                barrier.wait();
                store.close_call(&end).unwrap()
            })
        })
        .collect();
    let closed: Vec<bool> = closers.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(closed.iter().filter(|c| **c).count(), 1, "{closed:?}");
    assert!(store.unfinished_calls().unwrap().is_empty());
    assert_eq!(
        store
            .query_audit(&quiver_store::AuditQuery::default())
            .unwrap()
            .iter()
            .filter(|r| r.entry.call_id.as_deref() == Some("c1"))
            .map(|r| r.entry.status.clone())
            .collect::<Vec<_>>(),
        [AuditStatus::Interrupted]
    );
    // A call that ended already is not closed again.
    assert!(!store.close_call(&end).unwrap());
    let mut nameless = end.clone();
    nameless.call_id = None;
    assert!(store.close_call(&nameless).is_err());
}
