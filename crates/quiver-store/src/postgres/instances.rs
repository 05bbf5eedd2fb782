//! The instance registry and the closing of calls in flight on PostgreSQL, on the database's
//! clock.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::audit::append_audit;
use super::ops::{exec, row, rows};
use super::workflow_ops::DB_NOW;
use crate::codec::EncodedAudit;
use crate::error::{Result, StoreError};
use crate::instances::{Instance, NewInstance};

const COLUMNS: &str = "id, host, pid, process, started_at, heartbeat_at, reaped_at, reaped_by";

fn instance_row(r: &Row) -> Result<Instance> {
    Ok(Instance {
        id: r.try_get(0)?,
        host: r.try_get(1)?,
        pid: r.try_get(2)?,
        process: r.try_get(3)?,
        started_at: r.try_get(4)?,
        heartbeat_at: r.try_get(5)?,
        reaped_at: r.try_get(6)?,
        reaped_by: r.try_get(7)?,
    })
}

pub(super) async fn register<C: GenericClient>(c: &C, new: &NewInstance) -> Result<Instance> {
    if new.id.is_empty() {
        return Err(StoreError::Invalid("an instance needs an id".into()));
    }
    let sql = format!(
        "INSERT INTO instances (id, host, pid, process, started_at, heartbeat_at) \
         VALUES ($1, $2, $3, $4, {DB_NOW}, {DB_NOW}) ON CONFLICT (id) DO UPDATE SET \
         host = excluded.host, pid = excluded.pid, process = excluded.process, \
         started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
         reaped_at = NULL, reaped_by = NULL RETURNING {COLUMNS}"
    );
    let found = row(c, &sql, &[&new.id, &new.host, &new.pid, &new.process]).await?;
    found
        .as_ref()
        .map(instance_row)
        .transpose()?
        .ok_or_else(|| StoreError::Corrupt {
            table: "instances",
            detail: format!("the row of {} vanished", new.id),
        })
}

pub(super) async fn heartbeat<C: GenericClient>(c: &C, id: &str) -> Result<bool> {
    let sql = format!(
        "UPDATE instances SET heartbeat_at = greatest(heartbeat_at, {DB_NOW}) \
         WHERE id = $1 AND reaped_at IS NULL"
    );
    Ok(exec(c, &sql, &[&id]).await? > 0)
}

pub(super) async fn list<C: GenericClient>(c: &C) -> Result<Vec<Instance>> {
    let sql = format!("SELECT {COLUMNS} FROM instances ORDER BY started_at, id");
    rows(c, &sql, &[]).await?.iter().map(instance_row).collect()
}

pub(super) async fn reap<C: GenericClient>(
    c: &C,
    stale_ms: i64,
    by: &str,
) -> Result<Vec<Instance>> {
    let sql = format!(
        "UPDATE instances SET reaped_at = {DB_NOW}, reaped_by = $1 \
         WHERE reaped_at IS NULL AND heartbeat_at < {DB_NOW} - $2 AND id != $1 \
         RETURNING {COLUMNS}"
    );
    let mut reaped = rows(c, &sql, &[&by, &stale_ms])
        .await?
        .iter()
        .map(instance_row)
        .collect::<Result<Vec<_>>>()?;
    reaped.sort_by(|a, b| (a.started_at, &a.id).cmp(&(b.started_at, &b.id)));
    Ok(reaped)
}

/// Writes a call's end record if its start is still in flight; the start's row is locked
/// first, so of two closers the second finds it gone.
pub(super) async fn close_call<C: GenericClient>(c: &C, entry: &EncodedAudit) -> Result<bool> {
    let Some(call) = entry.call_id.as_deref() else {
        return Err(StoreError::Invalid(
            "closing a call needs its call id".into(),
        ));
    };
    let open = row(
        c,
        "SELECT 1 FROM calls_in_flight WHERE call_id = $1 FOR UPDATE",
        &[&call],
    )
    .await?;
    if open.is_none() {
        return Ok(false);
    }
    append_audit(c, entry).await?;
    Ok(true)
}
