//! [`WorkflowStore`] on the [`SqliteStore`]: every write through the same group-committing
//! writer (`BEGIN IMMEDIATE`, `synchronous=FULL` by default), each in its own savepoint.

use serde_json::Value;

use super::SqliteStore;
use super::workflow_ops::{self as ops, KeyedTable};
use crate::changes::ChangeKind;
use crate::codec::{EncodedAudit, encode};
use crate::error::Result;
use crate::instances::{Instance, NewInstance};
use crate::types::{AuditEntry, now_ms};
use crate::workflow::{
    Advance, Attempt, Definition, Event, NewRun, Run, RunFilter, RunState, Wait, WaitKind,
    WorkflowStore,
};

impl WorkflowStore for SqliteStore {
    fn put_definition(&self, definition: &Definition) -> Result<bool> {
        let definition = definition.clone();
        self.write(move |c| ops::put_definition(c, &definition, now_ms()))
    }

    fn definition(&self, digest: &str) -> Result<Option<Definition>> {
        self.read(|c| ops::definition(c, digest))
    }

    fn create_run(&self, new: &NewRun) -> Result<(Run, bool)> {
        let new = new.clone();
        let made = self.write(move |c| ops::create_run(c, &new))?;
        self.started(&made);
        Ok(made)
    }

    fn fire_schedule(&self, workflow: &str, fire_at: i64, new: &NewRun) -> Result<(Run, bool)> {
        let (workflow, new) = (workflow.to_owned(), new.clone());
        let made = self.write(move |c| {
            ops::keyed_start(c, KeyedTable::Fires, &workflow, &fire_at.to_string(), &new)
        })?;
        self.started(&made);
        Ok(made)
    }

    fn deliver_webhook(&self, hook: &str, delivery_key: &str, new: &NewRun) -> Result<(Run, bool)> {
        let (hook, key, new) = (hook.to_owned(), delivery_key.to_owned(), new.clone());
        let made =
            self.write(move |c| ops::keyed_start(c, KeyedTable::Deliveries, &hook, &key, &new))?;
        self.started(&made);
        Ok(made)
    }

    fn run(&self, id: &str) -> Result<Option<Run>> {
        self.read(|c| ops::run(c, id))
    }

    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        self.read(|c| ops::runs(c, filter))
    }

    fn run_state(&self, id: &str) -> Result<Option<RunState>> {
        self.read(|c| ops::run_state(c, id))
    }

    fn attempts(&self, run_id: &str) -> Result<Vec<Attempt>> {
        self.read(|c| ops::attempts(c, run_id))
    }

    fn set_attempt_process(
        &self,
        run_id: &str,
        step: i64,
        attempt: i64,
        epoch: i64,
        process: Option<&str>,
    ) -> Result<bool> {
        let (run_id, process) = (run_id.to_owned(), process.map(str::to_owned));
        self.write(move |c| {
            ops::set_attempt_process(c, &run_id, step, attempt, epoch, process.as_deref())
        })
    }

    fn heartbeat_run(&self, run_id: &str, epoch: i64, owner: &str, ms: i64) -> Result<bool> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        self.write(move |c| ops::heartbeat_run(c, &run_id, epoch, &owner, ms, now_ms()))
    }

    fn expired_leases(&self) -> Result<Vec<String>> {
        self.read(|c| ops::expired_leases(c, now_ms()))
    }

    fn clock_ms(&self) -> Result<i64> {
        Ok(now_ms())
    }

    fn advance(&self, advance: &Advance) -> Result<bool> {
        let audits = [&advance.call_audit, &advance.audit]
            .into_iter()
            .flatten()
            .map(EncodedAudit::new)
            .collect::<Result<Vec<_>>>()?;
        let (advance, wakes) = (advance.clone(), crate::changes::advance_wakes(advance));
        let run = advance.run_id.clone();
        let moved = self.write(move |c| ops::advance(c, &advance, &audits))?;
        if moved && wakes {
            self.hub.change(ChangeKind::Run, run);
        }
        Ok(moved)
    }

    fn append_step_audit(&self, entry: &AuditEntry) -> Result<()> {
        let entry = EncodedAudit::new(entry)?;
        self.write(move |c| super::ops::append_audit(c, &entry).map(|_| ()))
    }

    fn waits(&self, run_id: &str) -> Result<Vec<Wait>> {
        self.read(|c| ops::waits(c, run_id))
    }

    fn pending_waits(&self, kind: Option<WaitKind>) -> Result<Vec<Wait>> {
        self.read(|c| ops::pending_waits(c, kind))
    }

    fn due_waits(&self, now: i64) -> Result<Vec<Wait>> {
        self.read(|c| ops::due_waits(c, now))
    }

    fn next_wake_at(&self) -> Result<Option<i64>> {
        self.read(ops::next_wake_at)
    }

    fn emit_event(&self, name: &str, source: &str, payload: &Value, now: i64) -> Result<i64> {
        let (name, source, payload) = (name.to_owned(), source.to_owned(), encode(payload));
        let id = self.write(move |c| ops::emit_event(c, &name, &source, &payload, now))?;
        self.hub.change(ChangeKind::Event, id.to_string());
        Ok(id)
    }

    fn events_after(&self, name: &str, after: i64) -> Result<Vec<Event>> {
        self.read(|c| ops::events_after(c, name, after))
    }

    fn last_event_id(&self) -> Result<i64> {
        self.read(ops::last_event_id)
    }

    fn schedule_fires(&self, workflow: &str) -> Result<Vec<(i64, String)>> {
        self.read(|c| ops::schedule_fires(c, workflow))
    }

    fn last_schedule_fire(&self, workflow: &str) -> Result<Option<i64>> {
        self.read(|c| ops::last_schedule_fire(c, workflow))
    }

    fn events_since(&self, after: i64, limit: usize) -> Result<Vec<Event>> {
        self.read(|c| ops::events_since(c, after, limit))
    }

    fn cursor(&self, name: &str) -> Result<Option<i64>> {
        self.read(|c| ops::cursor(c, name))
    }

    fn init_cursor(&self, name: &str, position: i64) -> Result<i64> {
        let name = name.to_owned();
        self.write(move |c| ops::set_cursor(c, &name, position, false, now_ms()))
    }

    fn advance_cursor(&self, name: &str, position: i64) -> Result<i64> {
        let name = name.to_owned();
        self.write(move |c| ops::set_cursor(c, &name, position, true, now_ms()))
    }

    fn register_instance(&self, new: &NewInstance) -> Result<Instance> {
        let new = new.clone();
        self.write(move |c| super::instances::register(c, &new, now_ms()))
    }

    fn heartbeat_instance(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |c| super::instances::heartbeat(c, &id, now_ms()))
    }

    fn instances(&self) -> Result<Vec<Instance>> {
        self.read(super::instances::list)
    }

    fn reap_instances(&self, stale_ms: i64, by: &str) -> Result<Vec<Instance>> {
        let by = by.to_owned();
        self.write(move |c| super::instances::reap(c, stale_ms, &by, now_ms()))
    }

    fn close_call(&self, entry: &AuditEntry) -> Result<bool> {
        let entry = EncodedAudit::new(entry)?;
        self.write(move |c| super::instances::close_call(c, &entry))
    }
}

impl SqliteStore {
    /// Tells this process's subscribers of a run just created (not of one that existed).
    fn started(&self, (run, created): &(Run, bool)) {
        if *created {
            self.hub.change(ChangeKind::Run, run.id.clone());
        }
    }
}
