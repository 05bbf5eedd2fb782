//! Schedule fires through the engine: keyed by fire time across two stores on one file, a DST
//! change in the schedule's zone, catch-up after downtime, and `overlap: skip`.

use std::sync::{Arc, Barrier};
use std::thread;

use chrono::TimeZone;
use serde_json::json;

use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::{Engine, ManualClock};

use super::common::{Fake, definition, start};

fn utc(d: u32, h: u32, m: u32) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).unwrap()
}

const DAILY: &str = "description: d\ntrigger:\n  - schedule: {cron: '0 8 * * *', timezone: Europe/Berlin, overlap: allow, catchup: all}\nsteps:\n  - id: a\n    tool: x.a\n";

#[test]
fn two_stores_fire_each_fire_once_across_a_dst_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let def = definition(DAILY, &[]);
    let digest = {
        let store = SqliteStore::open(&db).unwrap();
        let fake = Fake::default();
        let clock = ManualClock::new(utc(1, 0, 0));
        Engine::new(&store, &fake, &clock).pin(&def).unwrap()
    };
    // Down since 27 March; both processes wake on 30 March at 12:00 UTC.
    let since = utc(27, 12, 0).timestamp_millis();
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (db, digest, barrier) = (db.clone(), digest.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                let store = SqliteStore::open(&db).unwrap();
                let fake = Fake::default();
                let clock = ManualClock::new(utc(30, 12, 0));
                let engine = Engine::new(&store, &fake, &clock);
                barrier.wait();
                engine.fire_due(&digest, since, &start(json!({}))).unwrap()
            })
        })
        .collect();
    let fired: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(
        fired.iter().filter(|(_, created)| *created).count(),
        3,
        "{fired:?}"
    );
    let store = SqliteStore::open(&db).unwrap();
    let fires: Vec<i64> = store
        .schedule_fires("pkg.wf")
        .unwrap()
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    // 08:00 in Berlin: 07:00 UTC on the 28th (winter time), 06:00 UTC on the 29th and 30th.
    let want: Vec<i64> = [utc(28, 7, 0), utc(29, 6, 0), utc(30, 6, 0)]
        .iter()
        .map(|t| t.timestamp_millis())
        .collect();
    assert_eq!(fires, want);
    let run = store.run(&fired[0].0.id).unwrap().unwrap();
    assert_eq!(run.trigger["kind"], json!("schedule"));
    // Asking again later the same day starts nothing.
    let fake = Fake::default();
    let clock = ManualClock::new(utc(30, 13, 0));
    let engine = Engine::new(&store, &fake, &clock);
    assert!(
        engine
            .fire_due(&digest, since, &start(json!({})))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn catchup_none_and_overlap_skip() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let fake = Fake::default();
    let clock = ManualClock::new(utc(2, 10, 30));
    let engine = Engine::new(&store, &fake, &clock);
    let yaml = "description: d\ntrigger: {schedule: {cron: '0 * * * *', catchup: none, overlap: skip}}\nsteps:\n  - id: a\n    wait: 2h\n";
    let digest = engine.pin(&definition(yaml, &[])).unwrap();
    // Missed fires (08:00 … 10:00 seen at 10:30) are dropped.
    let since = utc(2, 7, 30).timestamp_millis();
    assert!(
        engine
            .fire_due(&digest, since, &start(json!({})))
            .unwrap()
            .is_empty()
    );
    // On time: 11:00 seen at 11:00:20 starts a run, which waits two hours.
    clock.set(utc(2, 11, 0) + chrono::Duration::seconds(20));
    let fired = engine.fire_due(&digest, since, &start(json!({}))).unwrap();
    assert_eq!(fired.len(), 1);
    engine.drive(&fired[0].0.id).unwrap();
    // At 12:00 the run still goes: `overlap: skip` starts nothing.
    clock.set(utc(2, 12, 0) + chrono::Duration::seconds(5));
    assert!(
        engine
            .fire_due(&digest, since, &start(json!({})))
            .unwrap()
            .is_empty()
    );
}
