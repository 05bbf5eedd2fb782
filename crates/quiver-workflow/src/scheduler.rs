//! The scheduler's pass, free of threads and sleeping: what a long-running front (`quiver
//! serve`) does each time it wakes. One [`pass`] hands the stored events after the fan-out's
//! cursor to the workflows they start, starts the due fires of every watched schedule, resolves
//! what is due now (timers, retries, timeouts, event waits, queued runs), and says when it must
//! wake next. It commits every start before it returns a run's id and drives nothing itself:
//! the caller drives the runs it returns (on its own threads). Everything it starts is keyed
//! (fire time, event id), so two processes passing over one file start each run once.
//!
//! Who an event reaches: every watched workflow whose `event` trigger names it (its `if` over
//! the payload and the settings decides); an event whose source is **another package** of the
//! catalog reaches a package's workflows only when that package subscribes to the event's name
//! in its `quiver.yaml` (`events:`). An event started run's input is the event's payload.

use std::collections::BTreeSet;
use std::time::Duration;

use quiver_package::workflow::Trigger;
use quiver_store::WorkflowStore;
use quiver_store::workflow::{Event, RunStatus};

use crate::definition::Definition;
use crate::engine::{Engine, Start};
use crate::error::Result;
use crate::schedule::Compiled;

/// The cursor of the event fan-out: the id of the last event handed to the workflows.
pub const EVENTS_CURSOR: &str = "events";

/// Events read from the store at a time.
pub const FAN_OUT_BATCH: usize = 500;

/// The longest a scheduler sleeps without looking at the store (events emitted by another
/// process, a catalog reload).
pub const POLL: Duration = Duration::from_secs(1);

/// Every this long a scheduler passes even when nothing seemed to change (a run of another
/// process that ended and frees a concurrency slot).
pub const REFRESH: Duration = Duration::from_secs(30);

/// The cursor of a workflow's schedules (Unix ms): since when they are watched, so a fire
/// missed while nothing ran follows `catchup` even before the first fire is recorded; moved
/// past each fire that `overlap: skip` skipped.
pub fn schedule_cursor(workflow: &str) -> String {
    format!("schedule:{workflow}")
}

/// A workflow the scheduler starts runs of: pinned, with its schedules compiled.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The qualified workflow.
    pub workflow: String,
    /// Its package.
    pub package: String,
    /// The pinned definition's digest.
    pub digest: String,
    /// Its schedules.
    pub schedules: Vec<Compiled>,
    /// The names its `event` triggers wait for.
    pub events: BTreeSet<String>,
    /// The event names and patterns its package subscribes to in `quiver.yaml`.
    pub subscriptions: BTreeSet<String>,
    /// Since when its schedules are watched (Unix ms; stored the first time, so it outlives
    /// restarts).
    pub since: i64,
    /// How its runs start: unattended, with the scheduler's principal and the package's
    /// non-secret settings (input and trigger are set per run).
    pub start: Start,
}

impl Watched {
    /// Watches `def` if it has a schedule or an event trigger: pins it and records (once)
    /// since when its schedules are watched. `None` for a workflow nothing here starts.
    pub fn new(
        engine: &Engine<'_>,
        def: &Definition,
        subscriptions: &[String],
        start: Start,
    ) -> Result<Option<Watched>> {
        let mut schedules = Vec::new();
        let mut events = BTreeSet::new();
        for trigger in &def.workflow.triggers {
            match trigger {
                Trigger::Schedule(s) => schedules.push(Compiled::new(s)?),
                Trigger::Event(e) => {
                    events.insert(e.name.clone());
                }
                Trigger::Manual | Trigger::Webhook(_) => {}
            }
        }
        if schedules.is_empty() && events.is_empty() {
            return Ok(None);
        }
        let digest = engine.pin(def)?;
        let workflow = def.qualified();
        let since = if schedules.is_empty() {
            0
        } else {
            engine
                .store
                .init_cursor(&schedule_cursor(&workflow), engine.clock.now_ms())?
        };
        Ok(Some(Watched {
            workflow,
            package: def.package.clone(),
            digest,
            schedules,
            events,
            subscriptions: subscriptions.iter().cloned().collect(),
            since,
            start,
        }))
    }

    /// Whether `event` may start this workflow: its triggers name the event, and an event
    /// from another package of the catalog (`packages`) needs the package's subscription.
    pub fn hears(&self, event: &Event, packages: &BTreeSet<String>) -> bool {
        if !self.events.contains(&event.name) {
            return false;
        }
        let foreign = event.source != self.package && packages.contains(&event.source);
        !foreign
            || self
                .subscriptions
                .iter()
                .any(|pattern| quiver_package::events::matches(pattern, &event.name))
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// The runs to drive now, oldest first: started by this pass, or woken.
    pub runs: Vec<String>,
    /// When the next schedule of the watched workflows fires (Unix ms), if ever.
    pub next_fire: Option<i64>,
    /// When the next schedule fires or the next stored wait is due (Unix ms), if ever.
    pub next_wake: Option<i64>,
    /// The id of the last event handed over.
    pub last_event: i64,
    /// What went wrong for one workflow or one event (the pass went on with the others).
    pub problems: Vec<String>,
}

/// One pass over `watched` (`packages`: the ids of the catalog's packages, to tell an event
/// from another package).
pub fn pass(engine: &Engine<'_>, watched: &[Watched], packages: &BTreeSet<String>) -> Result<Pass> {
    let store = engine.store;
    let mut out = Pass::default();
    out.last_event = fan_out(engine, store, watched, packages, &mut out)?;
    let now = engine.clock.now();
    for w in watched.iter().filter(|w| !w.schedules.is_empty()) {
        let start = Start {
            input: serde_json::json!({}),
            ..w.start.clone()
        };
        match engine.fire_due(&w.digest, w.since, &start) {
            Ok(fired) => out.runs.extend(
                fired
                    .into_iter()
                    .filter(|(_, created)| *created)
                    .map(|(run, _)| run.id),
            ),
            Err(e) => out.problems.push(format!("{}: schedule: {e}", w.workflow)),
        }
    }
    out.runs.extend(engine.wake()?);
    let mut seen = BTreeSet::new();
    out.runs.retain(|id| seen.insert(id.clone()));
    out.next_fire = watched
        .iter()
        .flat_map(|w| &w.schedules)
        .filter_map(|s| s.next_after(now))
        .map(|t| t.timestamp_millis())
        .min();
    out.next_wake = soonest(out.next_fire, store.next_wake_at()?);
    Ok(out)
}

/// Hands every stored event after the cursor to the workflows it starts, moving the cursor
/// after each batch (a crash before the move hands the batch over again, which starts nothing
/// twice). Returns the cursor.
fn fan_out(
    engine: &Engine<'_>,
    store: &dyn WorkflowStore,
    watched: &[Watched],
    packages: &BTreeSet<String>,
    out: &mut Pass,
) -> Result<i64> {
    let mut cursor = store.cursor(EVENTS_CURSOR)?.unwrap_or(0);
    loop {
        let batch = store.events_since(cursor, FAN_OUT_BATCH)?;
        let Some(last) = batch.last().map(|e| e.id) else {
            return Ok(cursor);
        };
        for event in &batch {
            for w in watched.iter().filter(|w| w.hears(event, packages)) {
                let start = Start {
                    input: event.payload.clone(),
                    ..w.start.clone()
                };
                match engine.on_event(&w.digest, event, &start) {
                    Ok(Some((run, created))) if created || run.status == RunStatus::Running => {
                        out.runs.push(run.id);
                    }
                    Ok(_) => {}
                    Err(e) => out.problems.push(format!(
                        "{}: event {} `{}`: {e}",
                        w.workflow, event.id, event.name
                    )),
                }
            }
        }
        cursor = store.advance_cursor(EVENTS_CURSOR, last)?;
    }
}

/// Whether a scheduler that woke now passes again: at its wake time, when told to (a run was
/// started or ended in this process), when the catalog changed, when an event was stored after
/// the last one handed over, or when [`REFRESH`] went by since the last pass.
pub fn should_pass(now: i64, woke: &Woke) -> bool {
    woke.kicked
        || woke.catalog_changed
        || woke.last_event > woke.handed_event
        || woke.next_wake.is_some_and(|at| at <= now)
        || now.saturating_sub(woke.last_pass) >= millis(REFRESH)
}

/// What a scheduler knows when it wakes (see [`should_pass`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Woke {
    /// When the last pass ran (Unix ms).
    pub last_pass: i64,
    /// The last pass's next wake time.
    pub next_wake: Option<i64>,
    /// The id of the last event the last pass handed over.
    pub handed_event: i64,
    /// The id of the last stored event now.
    pub last_event: i64,
    /// Whether someone asked for a pass.
    pub kicked: bool,
    /// Whether the catalog changed since the last pass.
    pub catalog_changed: bool,
}

/// The sooner of two moments.
pub fn soonest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How long to sleep from `now` until `next_wake`, at most [`POLL`].
pub fn sleep_for(now: i64, next_wake: Option<i64>) -> Duration {
    let poll = millis(POLL);
    let wait = next_wake.map_or(poll, |at| at.saturating_sub(now).clamp(0, poll));
    Duration::from_millis(u64::try_from(wait).unwrap_or(0))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_to_pass_and_how_long_to_sleep() {
        let base = Woke {
            last_pass: 10_000,
            next_wake: Some(20_000),
            handed_event: 5,
            last_event: 5,
            ..Woke::default()
        };
        let cases = [
            (base, 12_000, false),
            (base, 20_000, true),
            (
                Woke {
                    kicked: true,
                    ..base
                },
                12_000,
                true,
            ),
            (
                Woke {
                    catalog_changed: true,
                    ..base
                },
                12_000,
                true,
            ),
            (
                Woke {
                    last_event: 6,
                    ..base
                },
                12_000,
                true,
            ),
            (
                Woke {
                    next_wake: None,
                    ..base
                },
                39_999,
                false,
            ),
            (
                Woke {
                    next_wake: None,
                    ..base
                },
                40_000,
                true,
            ),
        ];
        for (woke, now, want) in cases {
            assert_eq!(should_pass(now, &woke), want, "{woke:?} at {now}");
        }
        let sleeps = [
            (1_000, Some(1_250), 250),
            (1_000, Some(900), 0),
            (1_000, Some(60_000), 1_000),
            (1_000, None, 1_000),
        ];
        for (now, next, want) in sleeps {
            assert_eq!(
                sleep_for(now, next),
                Duration::from_millis(want),
                "{now} {next:?}"
            );
        }
    }
}
