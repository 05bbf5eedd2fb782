//! Starting runs from triggers: a schedule's fires, a stored event, a webhook delivery. Each
//! start is keyed (by the fire time, the event's id, the delivery's `Idempotency-Key`) and
//! committed with its key in one transaction, so it starts once across crashes and across
//! processes on one file.

use serde_json::json;

use quiver_package::workflow::{Overlap, Trigger};
use quiver_store::workflow::{self as store, Run, RunStatus};

use crate::crash;
use crate::engine::{Engine, Start, check_input};
use crate::error::{Result, WorkflowError};
use crate::{eval, schedule};
use quiver_store::StoreError;

impl Engine<'_> {
    /// Starts the run of one schedule fire (keyed by its fire time): once across crashes and
    /// processes.
    pub fn fire(&self, digest: &str, fire_at: i64, start: &Start) -> Result<(Run, bool)> {
        let def = self.definition(digest)?;
        let new = self.new_run(digest, &def, start)?;
        let started = self.store.fire_schedule(&def.qualified(), fire_at, &new)?;
        crash::point("run_created");
        Ok(started)
    }

    /// Starts the runs of every schedule fire of the definition that is due now: the fires
    /// after the last one recorded (or after `since`, when none is), as each schedule's
    /// `catchup` says. Each fire is keyed by its fire time, so it starts one run however many
    /// processes call this; a fire recorded already returns its run with `false`. With
    /// `overlap: skip`, no fire starts while a run of the workflow is still going (and a fire
    /// so skipped is passed for good: the workflow's schedule cursor moves past it); with
    /// `queue`, its run is held at its first step until the runs of the workflow created
    /// before it have ended; with `allow`, it starts at once. A fire that finds the package at
    /// its bound of active runs ([`MAX_ACTIVE_RUNS_PER_PACKAGE`](crate::MAX_ACTIVE_RUNS_PER_PACKAGE))
    /// is passed for good too.
    pub fn fire_due(&self, digest: &str, since: i64, start: &Start) -> Result<Vec<(Run, bool)>> {
        let def = self.definition(digest)?;
        let workflow = def.qualified();
        let now = self.clock.now();
        // After the last fire recorded, the last one skipped, and `since`.
        let cursor = crate::scheduler::schedule_cursor(&workflow);
        let last = [
            Some(since),
            self.store.last_schedule_fire(&workflow)?,
            self.store.cursor(&cursor)?,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(since);
        let mut out = Vec::new();
        for trigger in &def.workflow.triggers {
            let Trigger::Schedule(schedule) = trigger else {
                continue;
            };
            let compiled = schedule::Compiled::new(schedule)?;
            for fire in compiled.due(crate::clock::from_ms(last), now) {
                if schedule.overlap == Overlap::Skip && self.going(&workflow)? {
                    // Skipped for good: catch-up never brings it back.
                    self.store
                        .advance_cursor(&cursor, schedule::fire_key(fire))?;
                    continue;
                }
                let overlap = match schedule.overlap {
                    Overlap::Skip => "skip",
                    Overlap::Queue => "queue",
                    Overlap::Allow => "allow",
                };
                let start = Start {
                    trigger: json!({"kind": "schedule", "cron": schedule.cron,
                                    "timezone": schedule.timezone, "overlap": overlap,
                                    "fire_at": fire.to_rfc3339()}),
                    key: None,
                    ..start.clone()
                };
                match self.fire(digest, schedule::fire_key(fire), &start) {
                    Ok(started) => out.push(started),
                    // The package is at its bound of active runs: the fire is passed for good,
                    // as `overlap: skip` passes one.
                    Err(WorkflowError::Store(StoreError::Full(_))) => {
                        self.store
                            .advance_cursor(&cursor, schedule::fire_key(fire))?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }

    /// Starts the run an event asks for, if one of the definition's `event` triggers names it
    /// and its `if` holds over `event` (the payload) and `settings`. The run is keyed by the
    /// event's id, so handing the same stored event over again (after a crash, by a second
    /// process) returns the same run with `false`.
    pub fn on_event(
        &self,
        digest: &str,
        event: &store::Event,
        start: &Start,
    ) -> Result<Option<(Run, bool)>> {
        let def = self.definition(digest)?;
        let ctx = json!({"event": event.payload, "settings": start.settings, "trigger": {}});
        for trigger in &def.workflow.triggers {
            let Trigger::Event(t) = trigger else { continue };
            if t.name != event.name {
                continue;
            }
            if let Some(condition) = &t.condition
                && !eval::condition(condition, &ctx)?
            {
                continue;
            }
            let start = Start {
                trigger: json!({"kind": "event", "name": event.name, "id": event.id,
                                "source": event.source, "payload": event.payload}),
                key: Some(format!("event:{}", event.id)),
                ..start.clone()
            };
            return self.start(digest, &start).map(Some);
        }
        Ok(None)
    }

    /// Starts the run of one webhook delivery to `hook` (`pkg/name`), keyed by
    /// `delivery_key` (its `Idempotency-Key`): the delivery and the run are committed together
    /// before this returns, and the same key again returns the same run with `false`. An input
    /// its `input` schema does not accept starts nothing
    /// ([`WorkflowError::Refused`](crate::WorkflowError::Refused)).
    pub fn deliver(
        &self,
        digest: &str,
        hook: &str,
        delivery_key: &str,
        start: &Start,
    ) -> Result<(Run, bool)> {
        let def = self.definition(digest)?;
        check_input(&def, &start.input)?;
        let new = self.new_run(digest, &def, start)?;
        let started = self.store.deliver_webhook(hook, delivery_key, &new)?;
        crash::point("run_created");
        Ok(started)
    }

    /// Whether a run of the workflow has not ended.
    fn going(&self, workflow: &str) -> Result<bool> {
        Ok(!self
            .store
            .runs(&store::RunFilter {
                statuses: vec![RunStatus::Running, RunStatus::Waiting, RunStatus::InDoubt],
                workflow: Some(workflow.to_owned()),
                limit: Some(1),
                ..Default::default()
            })?
            .is_empty())
    }
}
