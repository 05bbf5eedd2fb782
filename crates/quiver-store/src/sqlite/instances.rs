//! The instance registry and the closing of calls in flight on SQLite, on the machine's clock.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::ops::append_audit;
use crate::codec::EncodedAudit;
use crate::error::{Result, StoreError};
use crate::instances::{Instance, NewInstance};

const COLUMNS: &str = "id, host, pid, process, started_at, heartbeat_at, reaped_at, reaped_by";

fn instance_row(r: &Row<'_>) -> rusqlite::Result<Instance> {
    Ok(Instance {
        id: r.get(0)?,
        host: r.get(1)?,
        pid: r.get(2)?,
        process: r.get(3)?,
        started_at: r.get(4)?,
        heartbeat_at: r.get(5)?,
        reaped_at: r.get(6)?,
        reaped_by: r.get(7)?,
    })
}

pub(crate) fn register(conn: &Connection, new: &NewInstance, now: i64) -> Result<Instance> {
    if new.id.is_empty() {
        return Err(StoreError::Invalid("an instance needs an id".into()));
    }
    conn.prepare_cached(&format!(
        "INSERT INTO instances (id, host, pid, process, started_at, heartbeat_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (id) DO UPDATE SET host = excluded.host, \
         pid = excluded.pid, process = excluded.process, started_at = excluded.started_at, \
         heartbeat_at = excluded.heartbeat_at, reaped_at = NULL, reaped_by = NULL \
         RETURNING {COLUMNS}"
    ))?
    .query_row(
        params![new.id, new.host, new.pid, new.process, now],
        instance_row,
    )
    .map_err(Into::into)
}

pub(crate) fn heartbeat(conn: &Connection, id: &str, now: i64) -> Result<bool> {
    let set = conn
        .prepare_cached(
            "UPDATE instances SET heartbeat_at = max(heartbeat_at, ?1) \
             WHERE id = ?2 AND reaped_at IS NULL",
        )?
        .execute(params![now, id])?;
    Ok(set > 0)
}

pub(crate) fn list(conn: &Connection) -> Result<Vec<Instance>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM instances ORDER BY started_at, id"
    ))?
    .query_map([], instance_row)?
    .collect::<rusqlite::Result<Vec<_>>>()
    .map_err(Into::into)
}

pub(crate) fn reap(conn: &Connection, stale_ms: i64, by: &str, now: i64) -> Result<Vec<Instance>> {
    let mut reaped = conn
        .prepare_cached(&format!(
            "UPDATE instances SET reaped_at = ?1, reaped_by = ?2 \
             WHERE reaped_at IS NULL AND heartbeat_at < ?1 - ?3 AND id != ?2 RETURNING {COLUMNS}"
        ))?
        .query_map(params![now, by, stale_ms], instance_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    reaped.sort_by(|a, b| (a.started_at, &a.id).cmp(&(b.started_at, &b.id)));
    Ok(reaped)
}

/// Writes a call's end record if its start is still in flight.
pub(crate) fn close_call(conn: &Connection, entry: &EncodedAudit) -> Result<bool> {
    let Some(call) = entry.call_id.as_deref() else {
        return Err(StoreError::Invalid(
            "closing a call needs its call id".into(),
        ));
    };
    let open = conn
        .prepare_cached("SELECT 1 FROM calls_in_flight WHERE call_id = ?1")?
        .query_row([call], |_| Ok(()))
        .optional()?;
    if open.is_none() {
        return Ok(false);
    }
    append_audit(conn, entry)?;
    Ok(true)
}
