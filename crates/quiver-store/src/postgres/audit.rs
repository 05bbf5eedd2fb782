//! The PostgreSQL SQL of the audit log and of calls in flight. The audit table is partitioned
//! by month of its time (schema version 6): this month's and the next month's tables are made
//! ahead ([`partitions_ahead`], when the store opens and hourly), and a record of any other
//! month makes its month's table first, in the caller's transaction.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::ops::{Args, exec, json, row, rows, to_i64};
use crate::codec::{EncodedAudit, decisions, decode, require};
use crate::error::{Result, StoreError};
use crate::types::{AuditEntry, AuditKind, AuditQuery, AuditRecord, AuditStatus, now_ms};

/// Makes this month's and the next month's audit tables if they are missing.
pub(super) async fn partitions_ahead<C: GenericClient>(c: &C) -> Result<()> {
    exec(c, "SELECT quiver_audit_partitions_ahead($1)", &[&now_ms()]).await?;
    Ok(())
}

/// The month of a Unix time in milliseconds (UTC), counted from year 0: `year * 12 + month - 1`.
fn month_of(ms: i64) -> i64 {
    // Howard Hinnant's civil_from_days.
    let days = ms.div_euclid(86_400_000) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    year * 12 + month - 1
}

/// Whether a record of `time` falls in a month whose table is made ahead (this month or the
/// next, at `now`).
fn made_ahead(time: i64, now: i64) -> bool {
    let (month, current) = (month_of(time), month_of(now));
    month == current || month == current + 1
}

/// Appends an audit record (in the caller's transaction). A call's start goes to `calls_in_flight` instead (replacing an earlier
/// start of the same call), and a call's record removes its start in the same statement.
pub(super) async fn append_audit<C: GenericClient>(c: &C, entry: &EncodedAudit) -> Result<i64> {
    let started = entry.kind == AuditKind::CallStarted.as_str();
    if started {
        require(entry.call_id.as_deref().unwrap_or(""), "call id")?;
    }
    let ends_start = (started || entry.kind == AuditKind::Call.as_str()) && entry.call_id.is_some();
    let table = if started { "calls_in_flight" } else { "audit" };
    if !started && !made_ahead(entry.time, now_ms()) {
        exec(c, "SELECT quiver_audit_partition($1)", &[&entry.time]).await?;
    }
    // The start is deleted by the statement's snapshot, so a start inserted by the same
    // statement stays.
    let removing = if ends_start {
        "WITH ended AS (DELETE FROM calls_in_flight WHERE call_id = $4) "
    } else {
        ""
    };
    let sql = format!(
        "{removing}INSERT INTO {table} (time, kind, session_id, call_id, principal, origin, tool, \
         skill, argument_digest, decisions, status, duration_ms, cached, detail) \
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

#[cfg(test)]
mod tests {
    use super::{made_ahead, month_of};

    #[test]
    fn months_of_unix_times() {
        let cases = [
            (0, 1970 * 12),                        // 1970-01-01
            (-1, 1969 * 12 + 11),                  // 1969-12-31 23:59:59.999
            (2_678_399_999, 1970 * 12),            // 1970-01-31 23:59:59.999
            (2_678_400_000, 1970 * 12 + 1),        // 1970-02-01
            (951_782_400_000, 2000 * 12 + 1),      // 2000-02-29
            (951_868_800_000, 2000 * 12 + 2),      // 2000-03-01
            (1_798_761_599_999, 2026 * 12 + 11),   // 2026-12-31 23:59:59.999
            (1_798_761_600_000, 2027 * 12),        // 2027-01-01
            (-62_135_596_800_000, 12),             // 0001-01-01
            (253_402_300_799_999, 9999 * 12 + 11), // 9999-12-31 23:59:59.999
        ];
        for (ms, month) in cases {
            assert_eq!(month_of(ms), month, "{ms}");
        }
    }

    #[test]
    fn this_and_the_next_month_are_made_ahead() {
        let now = 1_796_083_200_000; // 2026-12-01
        let cases = [
            (now, true),
            (1_798_761_599_999, true),  // 2026-12-31
            (1_798_761_600_000, true),  // 2027-01-01
            (1_801_439_999_999, true),  // 2027-01-31 23:59:59.999
            (1_801_440_000_000, false), // 2027-02-01
            (now - 1, false),           // 2026-11-30 23:59:59.999
            (0, false),
        ];
        for (time, ahead) in cases {
            assert_eq!(made_ahead(time, now), ahead, "{time}");
        }
    }
}
