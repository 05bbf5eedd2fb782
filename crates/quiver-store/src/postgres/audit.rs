//! The PostgreSQL SQL of the audit log and of calls in flight.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::ops::{Args, exec, json, row, rows, to_i64};
use crate::codec::{EncodedAudit, decisions, decode, require};
use crate::error::{Result, StoreError};
use crate::types::{AuditEntry, AuditKind, AuditQuery, AuditRecord, AuditStatus};

/// Appends an audit record (in the caller's transaction). A call's start goes to
/// `calls_in_flight` instead (replacing an earlier start of the same call), and a call's
/// record removes its start in the same transaction.
pub(super) async fn append_audit<C: GenericClient>(c: &C, entry: &EncodedAudit) -> Result<i64> {
    let started = entry.kind == AuditKind::CallStarted.as_str();
    if started {
        require(entry.call_id.as_deref().unwrap_or(""), "call id")?;
    }
    if (started || entry.kind == AuditKind::Call.as_str())
        && let Some(call) = &entry.call_id
    {
        exec(c, "DELETE FROM calls_in_flight WHERE call_id = $1", &[call]).await?;
    }
    let table = if started { "calls_in_flight" } else { "audit" };
    let sql = format!(
        "INSERT INTO {table} (time, kind, session_id, call_id, principal, origin, tool, skill, \
         argument_digest, decisions, status, duration_ms, cached, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id"
    );
    let inserted = row(
        c,
        &sql,
        &[
            &entry.time,
            &entry.kind,
            &entry.session,
            &entry.call_id,
            &entry.principal,
            &entry.origin,
            &entry.tool,
            &entry.skill,
            &entry.argument_digest,
            &entry.decisions,
            &entry.status,
            &entry.duration_ms,
            &entry.cached,
            &entry.detail,
        ],
    )
    .await?
    .ok_or_else(|| StoreError::Corrupt {
        table: "audit",
        detail: "an insert returned no id".to_owned(),
    })?;
    Ok(inserted.try_get(0)?)
}

const AUDIT_COLUMNS: &str = "id, time, kind, session_id, call_id, principal, origin, tool, skill, \
     argument_digest, decisions, status, duration_ms, cached, detail";

fn audit_row(r: &Row) -> Result<AuditRecord> {
    let decisions_text: String = r.try_get(10)?;
    let detail: Option<String> = r.try_get(14)?;
    let duration: i64 = r.try_get(12)?;
    Ok(AuditRecord {
        id: r.try_get(0)?,
        entry: AuditEntry {
            time: r.try_get(1)?,
            kind: AuditKind::from(r.try_get::<_, String>(2)?),
            session: r.try_get(3)?,
            call_id: r.try_get(4)?,
            principal: json(r, 5, "audit", "principal")?,
            origin: json(r, 6, "audit", "origin")?,
            tool: r.try_get(7)?,
            skill: r.try_get(8)?,
            argument_digest: r.try_get(9)?,
            decisions: decisions(&decisions_text)?,
            status: AuditStatus::from(r.try_get::<_, String>(11)?),
            duration_ms: u64::try_from(duration).map_err(|_| StoreError::Corrupt {
                table: "audit",
                detail: format!("negative duration_ms {duration}"),
            })?,
            cached: r.try_get(13)?,
            detail: detail
                .map(|text| decode(&text, "audit", "detail"))
                .transpose()?,
        },
    })
}

pub(super) async fn query_audit<C: GenericClient>(
    c: &C,
    query: &AuditQuery,
) -> Result<Vec<AuditRecord>> {
    let table = if query.kind == Some(AuditKind::CallStarted) {
        "calls_in_flight"
    } else {
        "audit"
    };
    let mut sql = format!("SELECT {AUDIT_COLUMNS} FROM {table} WHERE true");
    let mut args = Args::default();
    if let Some(session) = &query.session {
        sql.push_str(&format!(" AND session_id = {}", args.push(session.clone())));
    }
    if let Some(tool) = &query.tool {
        sql.push_str(&format!(" AND tool = {}", args.push(tool.clone())));
    }
    match &query.kind {
        Some(kind) => sql.push_str(&format!(
            " AND kind = {}",
            args.push(kind.as_str().to_owned())
        )),
        None => sql.push_str(" AND kind != 'call_started'"),
    }
    if let Some(since) = query.since {
        sql.push_str(&format!(" AND time >= {}", args.push(since)));
    }
    if let Some(until) = query.until {
        sql.push_str(&format!(" AND time < {}", args.push(until)));
    }
    if let Some(before) = query.before_id {
        sql.push_str(&format!(" AND id < {}", args.push(before)));
    }
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = query.limit {
        sql.push_str(&format!(" LIMIT {}", args.push(to_i64(limit))));
    }
    rows(c, &sql, &args.refs())
        .await?
        .iter()
        .map(audit_row)
        .collect()
}

pub(super) async fn unfinished_calls<C: GenericClient>(c: &C) -> Result<Vec<AuditRecord>> {
    let sql = format!("SELECT {AUDIT_COLUMNS} FROM calls_in_flight ORDER BY time, id");
    rows(c, &sql, &[]).await?.iter().map(audit_row).collect()
}
