//! The SQL of every operation, as functions of a connection. Writes run on the writer
//! connection inside the group transaction; reads on a pooled read-only connection.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde_json::Value;

use crate::codec::{EncodedAudit, decode, encode, require};
use crate::error::{Result, StoreError};
pub(crate) use crate::sets::SetTable;
use crate::sets::{loaded_last, next_seq};
use crate::types::{
    AuditEntry, AuditKind, AuditQuery, AuditRecord, AuditStatus, Consent, EndedSkill, NewSession,
    OnceApproval, PresenceStamp, Purged, Session, SessionFilter, SessionStatus,
};

// --- helpers ---

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn limit_of(limit: Option<usize>) -> i64 {
    limit.map_or(-1, to_i64)
}

/// [`StoreError::NotFound`] unless the session exists.
pub(super) fn ensure_session(conn: &Connection, id: &str) -> Result<()> {
    let found = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .exists([id])?;
    if found {
        Ok(())
    } else {
        Err(StoreError::NotFound {
            what: "session",
            id: id.to_owned(),
        })
    }
}

/// Collects a query's rows through a fallible conversion.
pub(super) fn collect<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    convert: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(convert(row)?);
    }
    Ok(out)
}

// --- sessions ---

const SESSION_COLUMNS: &str = "id, parent_id, created_at, updated_at, ended_at, origin, agent, \
     principal, catalog_version, prompt_versions, state";

fn session_row(row: &Row<'_>) -> Result<Session> {
    let json = |index: usize, column: &'static str| -> Result<Value> {
        let text: String = row.get(index)?;
        decode(&text, "sessions", column)
    };
    Ok(Session {
        id: row.get(0)?,
        parent: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        ended_at: row.get(4)?,
        origin: json(5, "origin")?,
        agent: row.get(6)?,
        principal: json(7, "principal")?,
        catalog_version: row.get(8)?,
        prompt_versions: json(9, "prompt_versions")?,
        state: json(10, "state")?,
    })
}

pub(crate) fn create_session(conn: &Connection, new: &NewSession, now: i64) -> Result<Session> {
    require(&new.id, "session id")?;
    let taken = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .exists([&new.id])?;
    if taken {
        return Err(StoreError::AlreadyExists {
            what: "session",
            id: new.id.clone(),
        });
    }
    if let Some(parent) = &new.parent {
        ensure_session(conn, parent)?;
    }
    conn.prepare_cached(
        "INSERT INTO sessions (id, parent_id, created_at, updated_at, ended_at, origin, agent, \
         principal, catalog_version, prompt_versions, state) \
         VALUES (?1, ?2, ?3, ?3, NULL, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        new.id,
        new.parent,
        now,
        encode(&new.origin),
        new.agent,
        encode(&new.principal),
        new.catalog_version,
        encode(&new.prompt_versions),
        encode(&new.state),
    ])?;
    Ok(Session {
        id: new.id.clone(),
        parent: new.parent.clone(),
        created_at: now,
        updated_at: now,
        ended_at: None,
        origin: new.origin.clone(),
        agent: new.agent.clone(),
        principal: new.principal.clone(),
        catalog_version: new.catalog_version.clone(),
        prompt_versions: new.prompt_versions.clone(),
        state: new.state.clone(),
    })
}

pub(crate) fn session(conn: &Connection, id: &str) -> Result<Option<Session>> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1");
    Ok(collect(conn, &sql, [id], session_row)?.into_iter().next())
}

pub(crate) fn list_sessions(conn: &Connection, filter: &SessionFilter) -> Result<Vec<Session>> {
    let mut sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE 1");
    match filter.status {
        SessionStatus::Any => {}
        SessionStatus::Active => sql.push_str(" AND ended_at IS NULL"),
        SessionStatus::Ended => sql.push_str(" AND ended_at IS NOT NULL"),
    }
    let mut args: Vec<SqlValue> = Vec::new();
    if let Some(agent) = &filter.agent {
        sql.push_str(" AND agent = ?");
        args.push(SqlValue::Text(agent.clone()));
    }
    sql.push_str(" ORDER BY updated_at DESC, id LIMIT ?");
    args.push(SqlValue::Integer(limit_of(filter.limit)));
    collect(conn, &sql, params_from_iter(args), session_row)
}

pub(crate) fn touch_session(conn: &Connection, id: &str, now: i64) -> Result<()> {
    let changed = conn
        .prepare_cached("UPDATE sessions SET updated_at = max(updated_at, ?2) WHERE id = ?1")?
        .execute(params![id, now])?;
    if changed == 0 {
        ensure_session(conn, id)?;
    }
    Ok(())
}

/// Replaces a session's state with `state`, already encoded as JSON text.
pub(crate) fn set_session_state(conn: &Connection, id: &str, state: &str, now: i64) -> Result<()> {
    let changed = conn
        .prepare_cached(
            "UPDATE sessions SET state = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1",
        )?
        .execute(params![id, state, now])?;
    if changed == 0 {
        ensure_session(conn, id)?;
    }
    Ok(())
}

pub(crate) fn set_operator_value(
    conn: &Connection,
    key: &str,
    value: &str,
    by: &str,
    now: i64,
) -> Result<()> {
    require(key, "operator key")?;
    conn.prepare_cached(
        "INSERT INTO operator_state (key, value, set_by, set_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, \
         set_at = excluded.set_at",
    )?
    .execute(params![key, value, by, now])?;
    Ok(())
}

pub(crate) fn operator_values(
    conn: &Connection,
) -> Result<std::collections::BTreeMap<String, Value>> {
    let rows = collect(conn, "SELECT key, value FROM operator_state", [], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
    })?;
    rows.into_iter()
        .map(|(key, text)| {
            let value = decode(&text, "operator_state", "value")?;
            Ok((key, value))
        })
        .collect()
}

pub(crate) fn end_session(conn: &Connection, id: &str, now: i64) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE sessions SET ended_at = ?2, updated_at = max(updated_at, ?2) \
             WHERE id = ?1 AND ended_at IS NULL",
        )?
        .execute(params![id, now])?;
    if changed == 0 {
        ensure_session(conn, id)?;
    }
    Ok(changed > 0)
}

pub(crate) fn purge_idle_sessions(
    conn: &Connection,
    agent: &str,
    before: i64,
    limit: usize,
) -> Result<Purged> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let ids = collect(
        conn,
        "SELECT id FROM sessions WHERE agent = ?1 AND parent_id IS NULL AND updated_at < ?2 \
         LIMIT ?3",
        params![agent, before, limit],
        |row| row.get::<_, String>(0).map_err(Into::into),
    )?;
    delete_sessions(conn, &ids)
}

/// Deletes the sessions `ids` (and their child sessions, with everything they hold), and
/// returns how many existed and the skills still active in them.
pub(crate) fn delete_sessions(conn: &Connection, ids: &[String]) -> Result<Purged> {
    let mut ended = Vec::new();
    let mut deleted = 0;
    for id in ids {
        // The skills still active in it and in its child sessions end with it.
        ended.extend(collect(
            conn,
            "SELECT session_id, skill FROM active_skills WHERE session_id = ?1 OR session_id IN \
             (SELECT id FROM sessions WHERE parent_id = ?1) ORDER BY seq",
            [id],
            |row| {
                Ok(EndedSkill {
                    session: row.get(0)?,
                    skill: row.get(1)?,
                })
            },
        )?);
        deleted += conn
            .prepare_cached("DELETE FROM sessions WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(Purged {
        sessions: deleted,
        ended_skills: ended,
    })
}

// --- loaded tools, opened packages, active skills: per-session ordered sets ---

/// A session's items with their `seq`, oldest first.
///
/// The order (and the largest `seq`) is computed here rather than with `ORDER BY` or `max()`
/// on purpose: SQLite re-prepares a statement that sorts or aggregates rows filtered by a bound
/// parameter each time that parameter's value changes, which cost the writer a third of its
/// time. A session's sets are small (12 tools by default).
fn items(conn: &Connection, table: SetTable, session: &str) -> Result<Vec<(String, i64)>> {
    let (name, column) = table.names();
    let mut rows = collect(
        conn,
        &format!("SELECT {column}, seq FROM {name} WHERE session_id = ?1"),
        [session],
        |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
    )?;
    rows.sort_by_key(|(_, seq)| *seq);
    Ok(rows)
}

pub(crate) fn load_tool(
    conn: &Connection,
    session: &str,
    tool: &str,
    capacity: usize,
) -> Result<Vec<String>> {
    if capacity == 0 {
        return Err(StoreError::Invalid(
            "the loaded-tool capacity must be at least 1".to_owned(),
        ));
    }
    require(tool, "tool name")?;
    ensure_session(conn, session)?;
    let mut others = items(conn, SetTable::Tools, session)?;
    if loaded_last(&others, tool, capacity) {
        return Ok(Vec::new());
    }
    let seq = next_seq(&others);
    conn.prepare_cached(
        "INSERT INTO loaded_tools (session_id, tool, seq) VALUES (?1, ?2, ?3) \
         ON CONFLICT (session_id, tool) DO UPDATE SET seq = excluded.seq",
    )?
    .execute(params![session, tool, seq])?;
    // The other tools, least recently used first; `tool` takes one of the slots.
    others.retain(|(name, _)| name != tool);
    let evict = others.len().saturating_sub(capacity - 1);
    let evicted: Vec<String> = others.drain(..evict).map(|(name, _)| name).collect();
    let mut delete =
        conn.prepare_cached("DELETE FROM loaded_tools WHERE session_id = ?1 AND tool = ?2")?;
    for name in &evicted {
        delete.execute(params![session, name])?;
    }
    Ok(evicted)
}

/// The session's presence stamp, `None` if there is no such session.
pub(crate) fn presence_stamp(conn: &Connection, session: &str) -> Result<Option<PresenceStamp>> {
    Ok(conn
        .prepare_cached("SELECT created_at, presence_changes FROM sessions WHERE id = ?1")?
        .query_row([session], |row| {
            Ok(PresenceStamp {
                created_at: row.get(0)?,
                changes: row.get(1)?,
            })
        })
        .optional()?)
}

/// The session's loaded tools, most recently used first.
pub(crate) fn loaded_tools(conn: &Connection, session: &str) -> Result<Vec<String>> {
    let mut tools = set_list(conn, SetTable::Tools, session)?;
    tools.reverse();
    Ok(tools)
}

pub(crate) fn touch_tool(conn: &Connection, session: &str, tool: &str) -> Result<bool> {
    ensure_session(conn, session)?;
    let seq = next_seq(&items(conn, SetTable::Tools, session)?);
    let changed = conn
        .prepare_cached("UPDATE loaded_tools SET seq = ?3 WHERE session_id = ?1 AND tool = ?2")?
        .execute(params![session, tool, seq])?;
    Ok(changed > 0)
}

pub(crate) fn unload_tool(conn: &Connection, session: &str, tool: &str) -> Result<bool> {
    set_remove(conn, SetTable::Tools, session, tool)
}

/// Adds an opened package or an active skill; `false` if it was already there.
pub(crate) fn set_add(
    conn: &Connection,
    table: SetTable,
    session: &str,
    item: &str,
    now: i64,
) -> Result<bool> {
    let (name, column) = table.names();
    let at = table.added_at()?;
    require(item, column)?;
    ensure_session(conn, session)?;
    let seq = next_seq(&items(conn, table, session)?);
    let changed = conn
        .prepare_cached(&format!(
            "INSERT INTO {name} (session_id, {column}, seq, {at}) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (session_id, {column}) DO NOTHING"
        ))?
        .execute(params![session, item, seq, now])?;
    Ok(changed > 0)
}

pub(crate) fn set_remove(
    conn: &Connection,
    table: SetTable,
    session: &str,
    item: &str,
) -> Result<bool> {
    let (name, column) = table.names();
    ensure_session(conn, session)?;
    let changed = conn
        .prepare_cached(&format!(
            "DELETE FROM {name} WHERE session_id = ?1 AND {column} = ?2"
        ))?
        .execute(params![session, item])?;
    Ok(changed > 0)
}

pub(crate) fn set_clear(conn: &Connection, table: SetTable, session: &str) -> Result<Vec<String>> {
    let (name, _) = table.names();
    ensure_session(conn, session)?;
    let removed = set_list(conn, table, session)?;
    conn.prepare_cached(&format!("DELETE FROM {name} WHERE session_id = ?1"))?
        .execute([session])?;
    Ok(removed)
}

/// A session's items, oldest (least recently used) first.
pub(crate) fn set_list(conn: &Connection, table: SetTable, session: &str) -> Result<Vec<String>> {
    Ok(items(conn, table, session)?
        .into_iter()
        .map(|(name, _)| name)
        .collect())
}

// --- consents and `once` approvals ---

fn consent_row(row: &Row<'_>) -> Result<Consent> {
    Ok(Consent {
        session: row.get(0)?,
        package: row.get(1)?,
        granted: row.get(2)?,
        by: row.get(3)?,
        at: row.get(4)?,
    })
}

pub(crate) fn set_consent(
    conn: &Connection,
    session: &str,
    package: &str,
    granted: bool,
    by: &str,
    now: i64,
) -> Result<Consent> {
    require(package, "package id")?;
    ensure_session(conn, session)?;
    conn.prepare_cached(
        "INSERT INTO consents (session_id, package, granted, decided_by, decided_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (session_id, package) DO UPDATE SET granted = excluded.granted, \
         decided_by = excluded.decided_by, decided_at = excluded.decided_at",
    )?
    .execute(params![session, package, granted, by, now])?;
    Ok(Consent {
        session: session.to_owned(),
        package: package.to_owned(),
        granted,
        by: by.to_owned(),
        at: now,
    })
}

const CONSENT_COLUMNS: &str = "session_id, package, granted, decided_by, decided_at";

pub(crate) fn consent(conn: &Connection, session: &str, package: &str) -> Result<Option<Consent>> {
    let sql =
        format!("SELECT {CONSENT_COLUMNS} FROM consents WHERE session_id = ?1 AND package = ?2");
    Ok(collect(conn, &sql, [session, package], consent_row)?
        .into_iter()
        .next())
}

pub(crate) fn consents(conn: &Connection, session: &str) -> Result<Vec<Consent>> {
    // Sorted here, not by `ORDER BY`: see `items`.
    let sql = format!("SELECT {CONSENT_COLUMNS} FROM consents WHERE session_id = ?1");
    let mut consents = collect(conn, &sql, [session], consent_row)?;
    consents.sort_by(|a, b| a.package.cmp(&b.package));
    Ok(consents)
}

fn once_row(row: &Row<'_>) -> Result<OnceApproval> {
    Ok(OnceApproval {
        session: row.get(0)?,
        tool: row.get(1)?,
        by: row.get(2)?,
        at: row.get(3)?,
    })
}

const ONCE_SELECT: &str = "SELECT session_id, tool, approved_by, approved_at FROM once_approvals \
     WHERE session_id = ?1 AND tool = ?2";

pub(crate) fn grant_once(
    conn: &Connection,
    session: &str,
    tool: &str,
    by: &str,
    now: i64,
) -> Result<OnceApproval> {
    require(tool, "tool name")?;
    ensure_session(conn, session)?;
    conn.prepare_cached(
        "INSERT INTO once_approvals (session_id, tool, approved_by, approved_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (session_id, tool) DO NOTHING",
    )?
    .execute(params![session, tool, by, now])?;
    once_approval(conn, session, tool)?.ok_or_else(|| StoreError::Corrupt {
        table: "once_approvals",
        detail: format!("the approval of {tool} in {session} vanished"),
    })
}

pub(crate) fn once_approval(
    conn: &Connection,
    session: &str,
    tool: &str,
) -> Result<Option<OnceApproval>> {
    Ok(collect(conn, ONCE_SELECT, [session, tool], once_row)?
        .into_iter()
        .next())
}

pub(crate) fn once_approvals(conn: &Connection, session: &str) -> Result<Vec<OnceApproval>> {
    let sql = "SELECT session_id, tool, approved_by, approved_at FROM once_approvals \
         WHERE session_id = ?1";
    let mut approvals = collect(conn, sql, [session], once_row)?;
    approvals.sort_by(|a, b| a.tool.cmp(&b.tool));
    Ok(approvals)
}

// --- trimmed results ---

pub(crate) fn keep_output(
    conn: &Connection,
    session: &str,
    call_id: &str,
    text: &str,
) -> Result<()> {
    require(call_id, "call id")?;
    ensure_session(conn, session)?;
    conn.prepare_cached(
        "INSERT INTO kept_outputs (session_id, call_id, seq, text) \
         VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM kept_outputs WHERE session_id = ?1), ?3) \
         ON CONFLICT (session_id, call_id) DO UPDATE SET text = excluded.text, seq = excluded.seq",
    )?
    .execute(params![session, call_id, text])?;
    conn.prepare_cached(
        "DELETE FROM kept_outputs WHERE session_id = ?1 AND seq <= \
         (SELECT MAX(seq) FROM kept_outputs WHERE session_id = ?1) - ?2",
    )?
    .execute(params![
        session,
        i64::try_from(crate::KEPT_OUTPUTS).unwrap_or(i64::MAX)
    ])?;
    Ok(())
}

pub(crate) fn kept_output(
    conn: &Connection,
    session: &str,
    call_id: &str,
) -> Result<Option<String>> {
    let mut statement = conn
        .prepare_cached("SELECT text FROM kept_outputs WHERE session_id = ?1 AND call_id = ?2")?;
    let mut rows = statement.query(params![session, call_id])?;
    Ok(match rows.next()? {
        Some(row) => Some(row.get(0)?),
        None => None,
    })
}

// --- the perception cache ---

pub(crate) fn cached_result(conn: &Connection, key: &str, now: i64) -> Result<Option<Value>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT result FROM perception_cache WHERE key = ?1 AND expires_at > ?2")?
        .query_row(params![key, now], |row| row.get(0))
        .optional()?;
    text.map(|text| decode(&text, "perception_cache", "result"))
        .transpose()
}

/// Stores a result (replacing the key's earlier one, which gets a new, larger id), then drops
/// the expired rows and, past [`crate::CACHED_RESULTS`], the oldest.
pub(crate) fn cache_result(
    conn: &Connection,
    key: &str,
    result: &str,
    now: i64,
    expires_at: i64,
) -> Result<()> {
    require(key, "cache key")?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO perception_cache (key, result, stored_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![key, result, now, expires_at])?;
    conn.prepare_cached("DELETE FROM perception_cache WHERE expires_at <= ?1")?
        .execute(params![now])?;
    conn.prepare_cached(
        "DELETE FROM perception_cache WHERE id <= \
         (SELECT id FROM perception_cache ORDER BY id DESC LIMIT 1 OFFSET ?1)",
    )?
    .execute(params![to_i64(crate::CACHED_RESULTS)])?;
    Ok(())
}

// --- audit ---

/// Appends an audit record. A call's start goes to `calls_in_flight` instead (replacing an
/// earlier start of the same call: one recorded before its questions, then before it runs),
/// and a call's record removes its start in the same transaction.
pub(crate) fn append_audit(conn: &Connection, entry: &EncodedAudit) -> Result<i64> {
    let started = entry.kind == AuditKind::CallStarted.as_str();
    if started {
        require(entry.call_id.as_deref().unwrap_or(""), "call id")?;
    }
    if (started || entry.kind == AuditKind::Call.as_str())
        && let Some(call) = &entry.call_id
    {
        conn.prepare_cached("DELETE FROM calls_in_flight WHERE call_id = ?1")?
            .execute(params![call])?;
    }
    let table = if started { "calls_in_flight" } else { "audit" };
    conn.prepare_cached(&format!(
        "INSERT INTO {table} (time, kind, session_id, call_id, principal, origin, tool, skill, \
         argument_digest, decisions, status, duration_ms, cached, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    ))?
    .execute(params![
        entry.time,
        entry.kind,
        entry.session,
        entry.call_id,
        entry.principal,
        entry.origin,
        entry.tool,
        entry.skill,
        entry.argument_digest,
        entry.decisions,
        entry.status,
        entry.duration_ms,
        entry.cached,
        entry.detail,
    ])?;
    Ok(conn.last_insert_rowid())
}

const AUDIT_COLUMNS: &str = "id, time, kind, session_id, call_id, principal, origin, tool, skill, \
     argument_digest, decisions, status, duration_ms, cached, detail";

fn audit_row(row: &Row<'_>) -> Result<AuditRecord> {
    let json = |index: usize, column: &'static str| -> Result<Value> {
        let text: String = row.get(index)?;
        decode(&text, "audit", column)
    };
    let decisions: String = row.get(10)?;
    let decisions = crate::codec::decisions(&decisions)?;
    let detail: Option<String> = row.get(14)?;
    let duration: i64 = row.get(12)?;
    Ok(AuditRecord {
        id: row.get(0)?,
        entry: AuditEntry {
            time: row.get(1)?,
            kind: AuditKind::from(row.get::<_, String>(2)?),
            session: row.get(3)?,
            call_id: row.get(4)?,
            principal: json(5, "principal")?,
            origin: json(6, "origin")?,
            tool: row.get(7)?,
            skill: row.get(8)?,
            argument_digest: row.get(9)?,
            decisions,
            status: AuditStatus::from(row.get::<_, String>(11)?),
            duration_ms: u64::try_from(duration).map_err(|_| StoreError::Corrupt {
                table: "audit",
                detail: format!("negative duration_ms {duration}"),
            })?,
            cached: row.get(13)?,
            detail: detail
                .map(|text| decode(&text, "audit", "detail"))
                .transpose()?,
        },
    })
}

pub(crate) fn query_audit(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    // Calls in flight are listed when asked for by kind; the log proper holds none.
    let table = if query.kind == Some(AuditKind::CallStarted) {
        "calls_in_flight"
    } else {
        "audit"
    };
    let mut sql = format!("SELECT {AUDIT_COLUMNS} FROM {table} WHERE 1");
    let mut args: Vec<SqlValue> = Vec::new();
    let mut filter = |clause: &str, value: SqlValue| {
        sql.push_str(clause);
        args.push(value);
    };
    if let Some(session) = &query.session {
        filter(" AND session_id = ?", SqlValue::Text(session.clone()));
    }
    if let Some(tool) = &query.tool {
        filter(" AND tool = ?", SqlValue::Text(tool.clone()));
    }
    match &query.kind {
        Some(kind) => filter(" AND kind = ?", SqlValue::Text(kind.as_str().to_owned())),
        // Starts recorded in the log by schema version 5 are bookkeeping: listed when asked.
        None => filter(" AND kind != ?", SqlValue::Text("call_started".to_owned())),
    }
    if let Some(since) = query.since {
        filter(" AND time >= ?", SqlValue::Integer(since));
    }
    if let Some(until) = query.until {
        filter(" AND time < ?", SqlValue::Integer(until));
    }
    if let Some(before) = query.before_id {
        filter(" AND id < ?", SqlValue::Integer(before));
    }
    filter(
        " ORDER BY id DESC LIMIT ?",
        SqlValue::Integer(limit_of(query.limit)),
    );
    collect(conn, &sql, params_from_iter(args), audit_row)
}

pub(crate) fn unfinished_calls(conn: &Connection) -> Result<Vec<AuditRecord>> {
    let sql = format!("SELECT {AUDIT_COLUMNS} FROM calls_in_flight ORDER BY time, id");
    collect(conn, &sql, [], audit_row)
}
