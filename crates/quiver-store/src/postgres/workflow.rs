//! [`WorkflowStore`] on the [`PostgresStore`]: each write one transaction, committed before
//! the method returns.

use serde_json::Value;

use super::instances;
use super::workflow_ops::{self as ops, KeyedTable};
use super::{PostgresStore, audit, listen, read, snapshot, write};
use crate::changes::{Change, ChangeKind};
use crate::codec::{EncodedAudit, encode};
use crate::error::Result;
use crate::instances::{Instance, NewInstance};
use crate::types::{AuditEntry, now_ms};
use crate::workflow::{
    Advance, Attempt, Definition, Event, NewRun, Run, RunFilter, RunState, Wait, WaitKind,
    WorkflowStore,
};

impl WorkflowStore for PostgresStore {
    fn put_definition(&self, definition: &Definition) -> Result<bool> {
        let definition = definition.clone();
        write!(self, |tx| ops::put_definition(&tx, &definition, now_ms())
            .await)
    }

    fn definition(&self, digest: &str) -> Result<Option<Definition>> {
        let digest = digest.to_owned();
        read!(self, |c| ops::definition(&c, &digest).await)
    }

    fn create_run(&self, new: &NewRun) -> Result<(Run, bool)> {
        let (new, channel) = (new.clone(), self.channel.clone());
        write!(self, |tx| {
            let made = ops::create_run(&tx, &new).await?;
            started(&tx, &channel, &made).await?;
            Ok(made)
        })
    }

    fn fire_schedule(&self, workflow: &str, fire_at: i64, new: &NewRun) -> Result<(Run, bool)> {
        let (workflow, key, new) = (workflow.to_owned(), fire_at.to_string(), new.clone());
        let channel = self.channel.clone();
        write!(self, |tx| {
            let made = ops::keyed_start(&tx, KeyedTable::Fires, &workflow, &key, &new).await?;
            started(&tx, &channel, &made).await?;
            Ok(made)
        })
    }

    fn deliver_webhook(&self, hook: &str, delivery_key: &str, new: &NewRun) -> Result<(Run, bool)> {
        let (hook, key, new) = (hook.to_owned(), delivery_key.to_owned(), new.clone());
        let channel = self.channel.clone();
        write!(self, |tx| {
            let made = ops::keyed_start(&tx, KeyedTable::Deliveries, &hook, &key, &new).await?;
            started(&tx, &channel, &made).await?;
            Ok(made)
        })
    }

    fn run(&self, id: &str) -> Result<Option<Run>> {
        let id = id.to_owned();
        read!(self, |c| ops::run(&c, &id).await)
    }

    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        let filter = filter.clone();
        read!(self, |c| ops::runs(&c, &filter).await)
    }

    fn run_state(&self, id: &str) -> Result<Option<RunState>> {
        let id = id.to_owned();
        snapshot!(self, |tx| {
            match ops::run(&tx, &id).await? {
                None => Ok(None),
                Some(run) => Ok(Some(RunState {
                    attempts: ops::attempts(&tx, &id).await?,
                    waits: ops::waits(&tx, &id).await?,
                    last_event: ops::last_event_id(&tx).await?,
                    now: ops::clock_ms(&tx).await?,
                    run,
                })),
            }
        })
    }

    fn attempts(&self, run_id: &str) -> Result<Vec<Attempt>> {
        let run_id = run_id.to_owned();
        read!(self, |c| ops::attempts(&c, &run_id).await)
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
        write!(self, |tx| {
            ops::set_attempt_process(&tx, &run_id, step, attempt, epoch, process.as_deref()).await
        })
    }

    fn heartbeat_run(&self, run_id: &str, epoch: i64, owner: &str, ms: i64) -> Result<bool> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        write!(self, |tx| {
            ops::heartbeat_run(&tx, &run_id, epoch, &owner, ms).await
        })
    }

    fn expired_leases(&self) -> Result<Vec<String>> {
        read!(self, |c| ops::expired_leases(&c).await)
    }

    fn clock_ms(&self) -> Result<i64> {
        read!(self, |c| ops::clock_ms(&c).await)
    }

    fn advance(&self, advance: &Advance) -> Result<bool> {
        let audits = [&advance.call_audit, &advance.audit]
            .into_iter()
            .flatten()
            .map(EncodedAudit::new)
            .collect::<Result<Vec<_>>>()?;
        let (advance, wakes) = (advance.clone(), crate::changes::advance_wakes(advance));
        let channel = self.channel.clone();
        write!(self, |tx| {
            let moved = ops::advance(&tx, &advance, &audits).await?;
            if moved && wakes {
                let change = Change::new(ChangeKind::Run, &advance.run_id);
                listen::notify(&tx, &channel, &change).await?;
            }
            Ok(moved)
        })
    }

    fn append_step_audit(&self, entry: &AuditEntry) -> Result<()> {
        let entry = EncodedAudit::new(entry)?;
        write!(self, |tx| audit::append_audit(&tx, &entry)
            .await
            .map(|_| ()))
    }

    fn waits(&self, run_id: &str) -> Result<Vec<Wait>> {
        let run_id = run_id.to_owned();
        read!(self, |c| ops::waits(&c, &run_id).await)
    }

    fn pending_waits(&self, kind: Option<WaitKind>) -> Result<Vec<Wait>> {
        read!(self, |c| ops::pending_waits(&c, kind).await)
    }

    fn due_waits(&self, now: i64) -> Result<Vec<Wait>> {
        read!(self, |c| ops::due_waits(&c, now).await)
    }

    fn next_wake_at(&self) -> Result<Option<i64>> {
        read!(self, |c| ops::next_wake_at(&c).await)
    }

    fn emit_event(&self, name: &str, source: &str, payload: &Value, now: i64) -> Result<i64> {
        let (name, source, payload) = (name.to_owned(), source.to_owned(), encode(payload));
        let channel = self.channel.clone();
        write!(self, |tx| {
            let id = ops::emit_event(&tx, &name, &source, &payload, now).await?;
            let change = Change::new(ChangeKind::Event, id.to_string());
            listen::notify(&tx, &channel, &change).await?;
            Ok(id)
        })
    }

    fn events_after(&self, name: &str, after: i64) -> Result<Vec<Event>> {
        let name = name.to_owned();
        read!(self, |c| ops::events_after(&c, &name, after).await)
    }

    fn last_event_id(&self) -> Result<i64> {
        read!(self, |c| ops::last_event_id(&c).await)
    }

    fn schedule_fires(&self, workflow: &str) -> Result<Vec<(i64, String)>> {
        let workflow = workflow.to_owned();
        read!(self, |c| ops::schedule_fires(&c, &workflow).await)
    }

    fn last_schedule_fire(&self, workflow: &str) -> Result<Option<i64>> {
        let workflow = workflow.to_owned();
        read!(self, |c| ops::last_schedule_fire(&c, &workflow).await)
    }

    fn events_since(&self, after: i64, limit: usize) -> Result<Vec<Event>> {
        read!(self, |c| ops::events_since(&c, after, limit).await)
    }

    fn cursor(&self, name: &str) -> Result<Option<i64>> {
        let name = name.to_owned();
        read!(self, |c| ops::cursor(&c, &name).await)
    }

    fn init_cursor(&self, name: &str, position: i64) -> Result<i64> {
        let name = name.to_owned();
        write!(self, |tx| {
            ops::set_cursor(&tx, &name, position, false, now_ms()).await
        })
    }

    fn advance_cursor(&self, name: &str, position: i64) -> Result<i64> {
        let name = name.to_owned();
        write!(self, |tx| {
            ops::set_cursor(&tx, &name, position, true, now_ms()).await
        })
    }

    fn register_instance(&self, new: &NewInstance) -> Result<Instance> {
        let new = new.clone();
        write!(self, |tx| instances::register(&tx, &new).await)
    }

    fn heartbeat_instance(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        write!(self, |tx| instances::heartbeat(&tx, &id).await)
    }

    fn instances(&self) -> Result<Vec<Instance>> {
        read!(self, |c| instances::list(&c).await)
    }

    fn reap_instances(&self, stale_ms: i64, by: &str) -> Result<Vec<Instance>> {
        let by = by.to_owned();
        write!(self, |tx| instances::reap(&tx, stale_ms, &by).await)
    }

    fn close_call(&self, entry: &AuditEntry) -> Result<bool> {
        let entry = EncodedAudit::new(entry)?;
        write!(self, |tx| instances::close_call(&tx, &entry).await)
    }
}

/// Announces, from the transaction `tx`, a run it created (not one that existed).
async fn started<C: deadpool_postgres::GenericClient>(
    tx: &C,
    channel: &str,
    (run, created): &(Run, bool),
) -> Result<()> {
    if *created {
        listen::notify(tx, channel, &Change::new(ChangeKind::Run, &run.id)).await?;
    }
    Ok(())
}
