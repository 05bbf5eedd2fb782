//! The scheduler's pass on real SQLite files with time moved by hand (nothing sleeps): due
//! fires start once (two schedulers on one file included), missed fires follow `catchup`
//! after a restart, events reach the workflows they start (another package's events only
//! through a subscription), timers wake, `overlap: queue` holds fires in order, and the pass
//! says when to wake next.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use chrono::TimeZone;
use serde_json::json;

use quiver_store::workflow::{RunFilter, RunStatus};
use quiver_store::{SqliteStore, WorkflowStore};
use quiver_workflow::scheduler::{self, Watched};
use quiver_workflow::{Clock, Definition, Engine, ManualClock};

use super::common::{Fake, definition, start};

fn at(h: u32, m: u32, s: u32) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc.with_ymd_and_hms(2026, 5, 4, h, m, s).unwrap()
}

/// A definition of `pkg.<name>` from workflow YAML.
fn named(package: &str, name: &str, yaml: &str) -> Definition {
    let mut def = definition(yaml, &[]);
    def.package = package.into();
    def.workflow.name = name.parse().unwrap();
    def
}

fn watch(engine: &Engine<'_>, def: &Definition, subscriptions: &[&str]) -> Watched {
    let subscriptions: Vec<String> = subscriptions.iter().map(|s| (*s).to_owned()).collect();
    Watched::new(engine, def, &subscriptions, start(json!({})))
        .unwrap()
        .expect("the workflow has a schedule or an event trigger")
}

fn packages(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn runs_of(store: &SqliteStore, workflow: &str) -> Vec<quiver_store::workflow::Run> {
    let mut runs = store
        .runs(&RunFilter {
            workflow: Some(workflow.into()),
            ..Default::default()
        })
        .unwrap();
    runs.sort_by_key(|r| {
        (
            r.created_at,
            r.trigger["id"].as_i64(),
            r.trigger["fire_at"].to_string(),
        )
    });
    runs
}

const QUARTERLY: &str = "description: d\ntrigger: {schedule: {cron: '*/15 * * * *', catchup: all, overlap: allow}}\nsteps:\n  - id: a\n    tool: x.a\n";

#[test]
fn a_pass_fires_what_is_due_once_and_says_when_to_wake() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 0, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let manual = named(
        "pkg",
        "manual",
        "description: d\nsteps:\n  - id: a\n    tool: x.a\n",
    );
    assert!(
        Watched::new(&engine, &manual, &[], start(json!({})))
            .unwrap()
            .is_none(),
        "nothing starts a manual workflow on its own"
    );
    let watched = [watch(&engine, &named("pkg", "q", QUARTERLY), &[])];
    let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    assert!(pass.runs.is_empty(), "{pass:?}");
    assert_eq!(pass.next_wake, Some(at(9, 15, 0).timestamp_millis()));
    clock.set(at(9, 15, 2));
    let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    assert_eq!(pass.runs.len(), 1, "{pass:?}");
    assert_eq!(pass.next_wake, Some(at(9, 30, 0).timestamp_millis()));
    let runs = runs_of(&store, "pkg.q");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, pass.runs[0]);
    assert_eq!(runs[0].trigger["kind"], "schedule");
    assert_eq!(runs[0].trigger["overlap"], "allow");
    assert!(!runs[0].attended);
    // Passing again at once starts nothing more (the run, not yet driven, is handed over as
    // the queue of runs to drive only once it was created).
    let again = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    assert!(again.runs.is_empty(), "{again:?}");
    assert_eq!(runs_of(&store, "pkg.q").len(), 1);
}

#[test]
fn missed_fires_follow_catchup_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let yaml = |catchup: &str| {
        format!(
            "description: d\ntrigger: {{schedule: {{cron: '0 * * * *', catchup: {catchup}, overlap: allow}}}}\nsteps:\n  - id: a\n    tool: x.a\n"
        )
    };
    let defs: Vec<Definition> = ["none", "latest", "all"]
        .iter()
        .map(|c| named("pkg", c, &yaml(c)))
        .collect();
    {
        // First watched at 09:10; the process then stops.
        let store = SqliteStore::open(&db).unwrap();
        let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 10, 0)));
        let engine = Engine::new(&store, &fake, &clock);
        let watched: Vec<Watched> = defs.iter().map(|d| watch(&engine, d, &[])).collect();
        assert!(
            scheduler::pass(&engine, &watched, &packages(&["pkg"]))
                .unwrap()
                .runs
                .is_empty()
        );
    }
    // Back at 13:20: fires 10:00 … 13:00 were missed, none recorded yet.
    let store = SqliteStore::open(&db).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(13, 20, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let watched: Vec<Watched> = defs.iter().map(|d| watch(&engine, d, &[])).collect();
    assert_eq!(watched[0].since, at(9, 10, 0).timestamp_millis());
    scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    let fired = |name: &str| -> Vec<String> {
        runs_of(&store, &format!("pkg.{name}"))
            .iter()
            .map(|r| r.trigger["fire_at"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(fired("none").is_empty());
    assert_eq!(fired("latest"), ["2026-05-04T13:00:00+00:00"]);
    assert_eq!(fired("all").len(), 4, "{:?}", fired("all"));
}

#[test]
fn two_schedulers_on_one_file_fire_each_fire_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let defs = [
        named("pkg", "q", QUARTERLY),
        named(
            "pkg",
            "hourly",
            "description: d\ntrigger: {schedule: {cron: '0 * * * *', catchup: all, overlap: allow}}\nsteps:\n  - id: a\n    tool: x.a\n",
        ),
    ];
    // Both first watched at 09:00 and both pass at the same moments.
    let times = [at(9, 0, 0), at(9, 15, 1), at(10, 0, 3), at(10, 44, 0)];
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (db, defs, barrier) = (db.clone(), defs.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                let store = SqliteStore::open(&db).unwrap();
                let (fake, clock) = (Fake::default(), ManualClock::new(times[0]));
                let engine = Engine::new(&store, &fake, &clock);
                let watched: Vec<Watched> = defs.iter().map(|d| watch(&engine, d, &[])).collect();
                let mut started = Vec::new();
                for t in times {
                    clock.set(t);
                    barrier.wait();
                    started.extend(
                        scheduler::pass(&engine, &watched, &packages(&["pkg"]))
                            .unwrap()
                            .runs,
                    );
                }
                started
            })
        })
        .collect();
    let started: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let store = SqliteStore::open(&db).unwrap();
    // 09:15, 09:30, 09:45, 10:00, 10:15, 10:30 and 10:00: seven fires, one run each.
    let q = store.schedule_fires("pkg.q").unwrap();
    let hourly = store.schedule_fires("pkg.hourly").unwrap();
    assert_eq!(q.len(), 6, "{q:?}");
    assert_eq!(hourly.len(), 1, "{hourly:?}");
    let all = store.runs(&RunFilter::default()).unwrap();
    assert_eq!(all.len(), 7);
    // Each run was handed to exactly one of the two schedulers to drive.
    let mut handed = started.clone();
    handed.sort();
    handed.dedup();
    assert_eq!((handed.len(), started.len()), (7, 7), "{started:?}");
}

#[test]
fn events_reach_the_workflows_they_start_and_foreign_ones_need_a_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 0, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let yaml = "description: d\ntrigger:\n  - event: {name: order.paid, if: 'event.total > 10'}\ninput: {type: object, properties: {total: {type: number}}}\nsteps:\n  - id: a\n    tool: x.a\n    with: {total: '{{ input.total }}'}\n";
    let open = named("books", "book", yaml);
    let closed = named("audit", "check", yaml);
    let watched = [
        watch(&engine, &open, &["order.paid"]),
        watch(&engine, &closed, &[]),
    ];
    let catalog = packages(&["books", "audit", "shop"]);
    // Stored before the pass: the operator's, one whose `if` fails, and one from the `shop`
    // package (foreign to both).
    let emit = |source: &str, total: i64| {
        store
            .emit_event("order.paid", source, &json!({"total": total}), 0)
            .unwrap()
    };
    emit("operator", 20);
    emit("operator", 5);
    let from_shop = emit("shop", 30);
    store
        .emit_event("other", "operator", &json!({}), 0)
        .unwrap();
    let pass = scheduler::pass(&engine, &watched, &catalog).unwrap();
    assert!(pass.problems.is_empty(), "{:?}", pass.problems);
    assert_eq!(pass.last_event, store.last_event_id().unwrap());
    let inputs = |workflow: &str| -> Vec<serde_json::Value> {
        runs_of(&store, workflow)
            .into_iter()
            .map(|r| r.input)
            .collect()
    };
    // The operator's event starts both; the shop's only the subscribed one.
    assert_eq!(
        inputs("books.book"),
        [json!({"total": 20}), json!({"total": 30})]
    );
    assert_eq!(inputs("audit.check"), [json!({"total": 20})]);
    let shop_run = runs_of(&store, "books.book").pop().unwrap();
    assert_eq!(shop_run.trigger["id"], from_shop);
    assert_eq!(shop_run.trigger["source"], "shop");
    assert_eq!(pass.runs.len(), 3);
    // A package's own event needs no subscription.
    store
        .emit_event("order.paid", "audit", &json!({"total": 11}), 0)
        .unwrap();
    let pass = scheduler::pass(&engine, &watched, &catalog).unwrap();
    assert_eq!(pass.runs.len(), 2, "{pass:?}");
    assert_eq!(inputs("audit.check").len(), 2);
    // Handed over once: passing again starts nothing.
    assert!(
        scheduler::pass(&engine, &watched, &catalog)
            .unwrap()
            .runs
            .is_empty()
    );
    // An event its workflows cannot take (an `if` that cannot be evaluated, a payload that
    // does not fit the input) is a problem of each; the fan-out goes on past it.
    let odd = store
        .emit_event("order.paid", "operator", &json!({"total": "lots"}), 0)
        .unwrap();
    let mut misfit = named(
        "books",
        "strict",
        &yaml.replace("type: number", "type: string"),
    );
    misfit.workflow.triggers = open.workflow.triggers.clone();
    let watched = [
        watched[0].clone(),
        watched[1].clone(),
        watch(&engine, &misfit, &[]),
    ];
    emit("operator", 40);
    let pass = scheduler::pass(&engine, &watched, &catalog).unwrap();
    assert_eq!(pass.problems.len(), 4, "{:?}", pass.problems);
    assert!(
        pass.problems[..3]
            .iter()
            .all(|p| p.contains(&format!("event {odd} "))),
        "{:?}",
        pass.problems
    );
    assert!(
        pass.problems[3].starts_with("books.strict: ") && pass.problems[3].contains("does not fit"),
        "{:?}",
        pass.problems
    );
    assert_eq!(pass.runs.len(), 2);
}

#[test]
fn timers_wake_and_the_next_wake_is_the_soonest_wait() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 0, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let yaml = "description: d\ntrigger: {schedule: {cron: '0 10 * * *'}}\nsteps:\n  - id: nap\n    wait: 10m\n  - id: a\n    tool: x.a\n";
    let watched = [watch(&engine, &named("pkg", "nap", yaml), &[])];
    clock.set(at(10, 0, 1));
    let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    let run = engine.drive(&pass.runs[0]).unwrap();
    assert_eq!(run.status, RunStatus::Waiting);
    // The pass found the fire before the run parked; the next one sees the timer.
    let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    assert!(pass.runs.is_empty());
    let wake = at(10, 0, 1).timestamp_millis() + 600_000;
    assert_eq!(pass.next_wake, Some(wake));
    assert_eq!(
        scheduler::sleep_for(clock.now_ms(), pass.next_wake),
        scheduler::POLL
    );
    clock.advance(Duration::from_secs(600));
    let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
    assert_eq!(pass.runs, std::slice::from_ref(&run.id));
    assert_eq!(engine.drive(&run.id).unwrap().status, RunStatus::Completed);
    assert_eq!(fake.calls("a").len(), 1);
}

#[test]
fn overlap_queue_holds_each_fire_until_the_runs_before_it_end_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 30, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let yaml = "description: d\ntrigger: {schedule: {cron: '0 * * * *', overlap: queue, catchup: all}}\nsteps:\n  - id: nap\n    wait: 90m\n  - id: a\n    tool: x.a\n";
    let watched = [watch(&engine, &named("pkg", "slow", yaml), &[])];
    let pass_at = |t| {
        clock.set(t);
        let pass = scheduler::pass(&engine, &watched, &packages(&["pkg"])).unwrap();
        for id in &pass.runs {
            engine.drive(id).unwrap();
        }
        runs_of(&store, "pkg.slow")
            .into_iter()
            .map(|r| (r.status, r.step, r.attempt))
            .collect::<Vec<_>>()
    };
    let waiting = (RunStatus::Waiting, 0, 1);
    let held = (RunStatus::Running, 0, 0);
    assert_eq!(pass_at(at(10, 0, 1)), [waiting]);
    // 11:00: the second fire is held behind the first, which still naps.
    assert_eq!(pass_at(at(11, 0, 1)), [waiting, held]);
    // 11:30: the first wakes and completes; the second starts napping. 12:00: the third is
    // held behind the second.
    assert_eq!(
        pass_at(at(11, 30, 2)),
        [(RunStatus::Completed, 2, 0), waiting]
    );
    assert_eq!(
        pass_at(at(12, 0, 1)),
        [(RunStatus::Completed, 2, 0), waiting, held]
    );
    // The third fire's run is also held behind an older run that has not begun: started in
    // the order of their fires.
    assert_eq!(pass_at(at(13, 0, 1)).last(), Some(&held));
}

#[test]
fn a_subscription_pattern_lets_a_foreign_event_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("q.db")).unwrap();
    let (fake, clock) = (Fake::default(), ManualClock::new(at(9, 0, 0)));
    let engine = Engine::new(&store, &fake, &clock);
    let yaml =
        "description: d\ntrigger:\n  - event: order.paid\nsteps:\n  - id: a\n    tool: x.a\n";
    let watched = [
        watch(&engine, &named("one", "w", yaml), &["order.*"]),
        watch(&engine, &named("many", "w", yaml), &["**"]),
        watch(&engine, &named("deeper", "w", yaml), &["order.paid.*"]),
        watch(&engine, &named("elsewhere", "w", yaml), &["invoice.*"]),
    ];
    let catalog = packages(&["one", "many", "deeper", "elsewhere", "shop"]);
    store
        .emit_event("order.paid", "shop", &json!({}), 0)
        .unwrap();
    let pass = scheduler::pass(&engine, &watched, &catalog).unwrap();
    assert!(pass.problems.is_empty(), "{:?}", pass.problems);
    let started: Vec<usize> = ["one.w", "many.w", "deeper.w", "elsewhere.w"]
        .iter()
        .map(|w| runs_of(&store, w).len())
        .collect();
    assert_eq!(started, [1, 1, 0, 0]);
}
