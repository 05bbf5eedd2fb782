//! The PostgreSQL SQL of sessions, the operator's switches, the per-session sets (loaded
//! tools, opened packages, active skills), consents, `once` approvals, kept outputs and the
//! perception cache. Writes run inside the caller's transaction.

use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::codec::{decode, encode, require};
use crate::error::{Result, StoreError};
pub(super) use crate::sets::SetTable;
use crate::sets::{loaded_last, next_seq};
use crate::types::{
    Consent, EndedSkill, NewSession, OnceApproval, PresenceStamp, Purged, Session, SessionFilter,
    SessionPresence, SessionStatus,
};

/// Parameters of a query.
pub(super) type Params<'a> = [&'a (dyn ToSql + Sync)];

/// A query's rows, through a cached prepared statement.
pub(super) async fn rows<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &Params<'_>,
) -> Result<Vec<Row>> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.query(&statement, params).await?)
}

/// A query's first row, if any.
pub(super) async fn row<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &Params<'_>,
) -> Result<Option<Row>> {
    Ok(rows(c, sql, params).await?.into_iter().next())
}

/// Runs a statement; the rows it changed.
pub(super) async fn exec<C: GenericClient>(c: &C, sql: &str, params: &Params<'_>) -> Result<u64> {
    let statement = c.prepare_cached(sql).await?;
    Ok(c.execute(&statement, params).await?)
}

/// Boxed parameters of a query built at run time, and their references.
#[derive(Default)]
pub(super) struct Args(Vec<Box<dyn ToSql + Sync + Send>>);

impl Args {
    /// Adds a parameter and returns its placeholder (`$n`).
    pub(super) fn push(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.0.push(Box::new(value));
        format!("${}", self.0.len())
    }

    /// The parameters, as a query takes them.
    pub(super) fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

pub(super) fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A JSON column of a row.
pub(super) fn json(
    row: &Row,
    index: usize,
    table: &'static str,
    column: &'static str,
) -> Result<Value> {
    let text: String = row.try_get(index)?;
    decode(&text, table, column)
}

fn no_session(id: &str) -> StoreError {
    StoreError::NotFound {
        what: "session",
        id: id.to_owned(),
    }
}

/// [`StoreError::NotFound`] unless the session exists.
pub(super) async fn ensure_session<C: GenericClient>(c: &C, id: &str) -> Result<()> {
    match row(c, "SELECT 1 FROM sessions WHERE id = $1", &[&id]).await? {
        Some(_) => Ok(()),
        None => Err(no_session(id)),
    }
}

/// Locks the session's row until the transaction ends, so the session's mutations take turns
/// across processes; [`StoreError::NotFound`] if there is no such session.
pub(super) async fn lock_session<C: GenericClient>(c: &C, id: &str) -> Result<()> {
    match row(c, "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", &[&id]).await? {
        Some(_) => Ok(()),
        None => Err(no_session(id)),
    }
}

/// Moves the session's presence stamp (its row is locked already).
async fn bump_presence<C: GenericClient>(c: &C, id: &str) -> Result<()> {
    exec(
        c,
        "UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

// --- sessions ---

const SESSION_COLUMNS: &str = "id, parent_id, created_at, updated_at, ended_at, origin, agent, \
     principal, catalog_version, prompt_versions, state";

fn session_row(row: &Row) -> Result<Session> {
    Ok(Session {
        id: row.try_get(0)?,
        parent: row.try_get(1)?,
        created_at: row.try_get(2)?,
        updated_at: row.try_get(3)?,
        ended_at: row.try_get(4)?,
        origin: json(row, 5, "sessions", "origin")?,
        agent: row.try_get(6)?,
        principal: json(row, 7, "sessions", "principal")?,
        catalog_version: row.try_get(8)?,
        prompt_versions: json(row, 9, "sessions", "prompt_versions")?,
        state: json(row, 10, "sessions", "state")?,
    })
}

pub(super) async fn create_session<C: GenericClient>(
    c: &C,
    new: &NewSession,
    now: i64,
) -> Result<Session> {
    require(&new.id, "session id")?;
    if let Some(parent) = &new.parent {
        ensure_session(c, parent).await?;
    }
    let inserted = exec(
        c,
        "INSERT INTO sessions (id, parent_id, created_at, updated_at, ended_at, origin, agent, \
         principal, catalog_version, prompt_versions, state) \
         VALUES ($1, $2, $3, $3, NULL, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
        &[
            &new.id,
            &new.parent,
            &now,
            &encode(&new.origin),
            &new.agent,
            &encode(&new.principal),
            &new.catalog_version,
            &encode(&new.prompt_versions),
            &encode(&new.state),
        ],
    )
    .await?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            what: "session",
            id: new.id.clone(),
        });
    }
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

pub(super) async fn session<C: GenericClient>(c: &C, id: &str) -> Result<Option<Session>> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
    row(c, &sql, &[&id])
        .await?
        .as_ref()
        .map(session_row)
        .transpose()
}

pub(super) async fn list_sessions<C: GenericClient>(
    c: &C,
    filter: &SessionFilter,
) -> Result<Vec<Session>> {
    let mut sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE true");
    match filter.status {
        SessionStatus::Any => {}
        SessionStatus::Active => sql.push_str(" AND ended_at IS NULL"),
        SessionStatus::Ended => sql.push_str(" AND ended_at IS NOT NULL"),
    }
    let mut args = Args::default();
    if let Some(agent) = &filter.agent {
        sql.push_str(&format!(" AND agent = {}", args.push(agent.clone())));
    }
    sql.push_str(" ORDER BY updated_at DESC, id");
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {}", args.push(to_i64(limit))));
    }
    rows(c, &sql, &args.refs())
        .await?
        .iter()
        .map(session_row)
        .collect()
}

/// Sets `column = $2` (with `updated_at` moved to now) on a session.
async fn update_session<C: GenericClient>(
    c: &C,
    id: &str,
    sql: &str,
    params: &Params<'_>,
) -> Result<()> {
    if exec(c, sql, params).await? == 0 {
        ensure_session(c, id).await?;
    }
    Ok(())
}

pub(super) async fn touch_session<C: GenericClient>(c: &C, id: &str, now: i64) -> Result<()> {
    let sql = "UPDATE sessions SET updated_at = greatest(updated_at, $2) WHERE id = $1";
    update_session(c, id, sql, &[&id, &now]).await
}

pub(super) async fn set_session_state<C: GenericClient>(
    c: &C,
    id: &str,
    state: &str,
    now: i64,
) -> Result<()> {
    let sql = "UPDATE sessions SET state = $2, updated_at = greatest(updated_at, $3) WHERE id = $1";
    update_session(c, id, sql, &[&id, &state, &now]).await
}

pub(super) async fn end_session<C: GenericClient>(c: &C, id: &str, now: i64) -> Result<bool> {
    let changed = exec(
        c,
        "UPDATE sessions SET ended_at = $2, updated_at = greatest(updated_at, $2) \
         WHERE id = $1 AND ended_at IS NULL",
        &[&id, &now],
    )
    .await?;
    if changed == 0 {
        ensure_session(c, id).await?;
    }
    Ok(changed > 0)
}

pub(super) async fn set_operator_value<C: GenericClient>(
    c: &C,
    key: &str,
    value: &str,
    by: &str,
    now: i64,
) -> Result<()> {
    require(key, "operator key")?;
    exec(
        c,
        "INSERT INTO operator_state (key, value, set_by, set_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, \
         set_at = excluded.set_at",
        &[&key, &value, &by, &now],
    )
    .await?;
    Ok(())
}

pub(super) async fn operator_values<C: GenericClient>(
    c: &C,
) -> Result<std::collections::BTreeMap<String, Value>> {
    rows(c, "SELECT key, value FROM operator_state", &[])
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, json(r, 1, "operator_state", "value")?)))
        .collect()
}

pub(super) async fn purge_idle_sessions<C: GenericClient>(
    c: &C,
    agent: &str,
    before: i64,
    limit: usize,
) -> Result<Purged> {
    let ids = rows(
        c,
        "SELECT id FROM sessions WHERE agent = $1 AND parent_id IS NULL AND updated_at < $2 \
         ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED",
        &[&agent, &before, &to_i64(limit)],
    )
    .await?
    .iter()
    .map(|r| r.try_get(0))
    .collect::<Result<Vec<String>, _>>()?;
    delete_sessions(c, &ids).await
}

/// Deletes the sessions `ids` (and their child sessions, with everything they hold).
pub(super) async fn delete_sessions<C: GenericClient>(c: &C, ids: &[String]) -> Result<Purged> {
    let mut ended = Vec::new();
    let mut deleted = 0;
    for id in ids {
        for r in rows(
            c,
            "SELECT session_id, skill FROM active_skills WHERE session_id = $1 OR session_id IN \
             (SELECT id FROM sessions WHERE parent_id = $1) ORDER BY seq",
            &[id],
        )
        .await?
        {
            ended.push(EndedSkill {
                session: r.try_get(0)?,
                skill: r.try_get(1)?,
            });
        }
        deleted += exec(c, "DELETE FROM sessions WHERE id = $1", &[id]).await?;
    }
    Ok(Purged {
        sessions: usize::try_from(deleted).unwrap_or(usize::MAX),
        ended_skills: ended,
    })
}

// --- loaded tools, opened packages, active skills ---

/// A session's items with their `seq`, oldest first.
async fn items<C: GenericClient>(
    c: &C,
    table: SetTable,
    session: &str,
) -> Result<Vec<(String, i64)>> {
    let (name, column) = table.names();
    let sql = format!("SELECT {column}, seq FROM {name} WHERE session_id = $1 ORDER BY seq");
    rows(c, &sql, &[&session])
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// A session's items, oldest first.
pub(super) async fn set_list<C: GenericClient>(
    c: &C,
    table: SetTable,
    session: &str,
) -> Result<Vec<String>> {
    Ok(items(c, table, session)
        .await?
        .into_iter()
        .map(|(n, _)| n)
        .collect())
}

pub(super) async fn load_tool<C: GenericClient>(
    c: &C,
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
    lock_session(c, session).await?;
    let mut others = items(c, SetTable::Tools, session).await?;
    let seq = next_seq(&others);
    exec(
        c,
        "INSERT INTO loaded_tools (session_id, tool, seq) VALUES ($1, $2, $3) \
         ON CONFLICT (session_id, tool) DO UPDATE SET seq = excluded.seq",
        &[&session, &tool, &seq],
    )
    .await?;
    others.retain(|(name, _)| name != tool);
    let evict = others.len().saturating_sub(capacity - 1);
    let evicted: Vec<String> = others.drain(..evict).map(|(name, _)| name).collect();
    for name in &evicted {
        exec(
            c,
            "DELETE FROM loaded_tools WHERE session_id = $1 AND tool = $2",
            &[&session, name],
        )
        .await?;
    }
    bump_presence(c, session).await?;
    Ok(evicted)
}

/// Whether loading `tool` into the session would change nothing (it is the most recently
/// used already, nothing to evict): read outside any transaction, so such a load costs one
/// query instead of a transaction on the session's row.
pub(super) async fn load_changes_nothing<C: GenericClient>(
    c: &C,
    session: &str,
    tool: &str,
    capacity: usize,
) -> Result<bool> {
    Ok(loaded_last(
        &items(c, SetTable::Tools, session).await?,
        tool,
        capacity,
    ))
}

/// The session's presence stamp and its three sets in one statement, so one snapshot: a
/// stamp that did not move later still describes these sets.
pub(super) async fn stamped_presence<C: GenericClient>(
    c: &C,
    session: &str,
) -> Result<(Option<PresenceStamp>, SessionPresence)> {
    let found = rows(
        c,
        "SELECT 0, NULL::text, created_at, presence_changes FROM sessions WHERE id = $1 \
         UNION ALL SELECT 1, package, seq, 0::bigint FROM opened_packages WHERE session_id = $1 \
         UNION ALL SELECT 2, tool, seq, 0::bigint FROM loaded_tools WHERE session_id = $1 \
         UNION ALL SELECT 3, skill, seq, 0::bigint FROM active_skills WHERE session_id = $1 \
         ORDER BY 1, 3",
        &[&session],
    )
    .await?;
    let (mut stamp, mut presence) = (None, SessionPresence::default());
    for r in &found {
        let set = match r.try_get::<_, i32>(0)? {
            0 => {
                stamp = Some(PresenceStamp {
                    created_at: r.try_get(2)?,
                    changes: r.try_get(3)?,
                });
                continue;
            }
            1 => &mut presence.opened,
            2 => &mut presence.loaded,
            _ => &mut presence.active_skills,
        };
        set.push(r.try_get(1)?);
    }
    // most recently used first
    presence.loaded.reverse();
    Ok((stamp, presence))
}

pub(super) async fn presence_stamp<C: GenericClient>(
    c: &C,
    session: &str,
) -> Result<Option<PresenceStamp>> {
    let found = row(
        c,
        "SELECT created_at, presence_changes FROM sessions WHERE id = $1",
        &[&session],
    )
    .await?;
    found
        .map(|r| {
            Ok(PresenceStamp {
                created_at: r.try_get(0)?,
                changes: r.try_get(1)?,
            })
        })
        .transpose()
}

/// The session's loaded tools, most recently used first.
pub(super) async fn loaded_tools<C: GenericClient>(c: &C, session: &str) -> Result<Vec<String>> {
    let mut tools = set_list(c, SetTable::Tools, session).await?;
    tools.reverse();
    Ok(tools)
}

pub(super) async fn touch_tool<C: GenericClient>(c: &C, session: &str, tool: &str) -> Result<bool> {
    lock_session(c, session).await?;
    let seq = next_seq(&items(c, SetTable::Tools, session).await?);
    let changed = exec(
        c,
        "UPDATE loaded_tools SET seq = $3 WHERE session_id = $1 AND tool = $2",
        &[&session, &tool, &seq],
    )
    .await?;
    if changed > 0 {
        bump_presence(c, session).await?;
    }
    Ok(changed > 0)
}

/// Adds an opened package or an active skill; `false` if it was already there.
pub(super) async fn set_add<C: GenericClient>(
    c: &C,
    table: SetTable,
    session: &str,
    item: &str,
    now: i64,
) -> Result<bool> {
    let (name, column) = table.names();
    let at = table.added_at()?;
    require(item, column)?;
    lock_session(c, session).await?;
    let seq = next_seq(&items(c, table, session).await?);
    let sql = format!(
        "INSERT INTO {name} (session_id, {column}, seq, {at}) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (session_id, {column}) DO NOTHING"
    );
    let changed = exec(c, &sql, &[&session, &item, &seq, &now]).await?;
    if changed > 0 {
        bump_presence(c, session).await?;
    }
    Ok(changed > 0)
}

pub(super) async fn set_remove<C: GenericClient>(
    c: &C,
    table: SetTable,
    session: &str,
    item: &str,
) -> Result<bool> {
    let (name, column) = table.names();
    lock_session(c, session).await?;
    let sql = format!("DELETE FROM {name} WHERE session_id = $1 AND {column} = $2");
    let changed = exec(c, &sql, &[&session, &item]).await?;
    if changed > 0 {
        bump_presence(c, session).await?;
    }
    Ok(changed > 0)
}

pub(super) async fn set_clear<C: GenericClient>(
    c: &C,
    table: SetTable,
    session: &str,
) -> Result<Vec<String>> {
    let (name, _) = table.names();
    lock_session(c, session).await?;
    let removed = set_list(c, table, session).await?;
    exec(
        c,
        &format!("DELETE FROM {name} WHERE session_id = $1"),
        &[&session],
    )
    .await?;
    if !removed.is_empty() {
        bump_presence(c, session).await?;
    }
    Ok(removed)
}

// --- consents and `once` approvals ---

fn consent_row(r: &Row) -> Result<Consent> {
    Ok(Consent {
        session: r.try_get(0)?,
        package: r.try_get(1)?,
        granted: r.try_get(2)?,
        by: r.try_get(3)?,
        at: r.try_get(4)?,
    })
}

const CONSENT_COLUMNS: &str = "session_id, package, granted, decided_by, decided_at";

pub(super) async fn set_consent<C: GenericClient>(
    c: &C,
    session: &str,
    package: &str,
    granted: bool,
    by: &str,
    now: i64,
) -> Result<Consent> {
    require(package, "package id")?;
    ensure_session(c, session).await?;
    exec(
        c,
        "INSERT INTO consents (session_id, package, granted, decided_by, decided_at) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (session_id, package) DO UPDATE SET granted = excluded.granted, \
         decided_by = excluded.decided_by, decided_at = excluded.decided_at",
        &[&session, &package, &granted, &by, &now],
    )
    .await?;
    Ok(Consent {
        session: session.to_owned(),
        package: package.to_owned(),
        granted,
        by: by.to_owned(),
        at: now,
    })
}

pub(super) async fn consent<C: GenericClient>(
    c: &C,
    session: &str,
    package: &str,
) -> Result<Option<Consent>> {
    let sql =
        format!("SELECT {CONSENT_COLUMNS} FROM consents WHERE session_id = $1 AND package = $2");
    row(c, &sql, &[&session, &package])
        .await?
        .as_ref()
        .map(consent_row)
        .transpose()
}

pub(super) async fn consents<C: GenericClient>(c: &C, session: &str) -> Result<Vec<Consent>> {
    let sql = format!(
        "SELECT {CONSENT_COLUMNS} FROM consents WHERE session_id = $1 ORDER BY package COLLATE \"C\""
    );
    rows(c, &sql, &[&session])
        .await?
        .iter()
        .map(consent_row)
        .collect()
}

fn once_row(r: &Row) -> Result<OnceApproval> {
    Ok(OnceApproval {
        session: r.try_get(0)?,
        tool: r.try_get(1)?,
        by: r.try_get(2)?,
        at: r.try_get(3)?,
    })
}

pub(super) async fn grant_once<C: GenericClient>(
    c: &C,
    session: &str,
    tool: &str,
    by: &str,
    now: i64,
) -> Result<OnceApproval> {
    require(tool, "tool name")?;
    ensure_session(c, session).await?;
    exec(
        c,
        "INSERT INTO once_approvals (session_id, tool, approved_by, approved_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, tool) DO NOTHING",
        &[&session, &tool, &by, &now],
    )
    .await?;
    once_approval(c, session, tool)
        .await?
        .ok_or_else(|| StoreError::Corrupt {
            table: "once_approvals",
            detail: format!("the approval of {tool} in {session} vanished"),
        })
}

pub(super) async fn once_approval<C: GenericClient>(
    c: &C,
    session: &str,
    tool: &str,
) -> Result<Option<OnceApproval>> {
    row(
        c,
        "SELECT session_id, tool, approved_by, approved_at FROM once_approvals \
         WHERE session_id = $1 AND tool = $2",
        &[&session, &tool],
    )
    .await?
    .as_ref()
    .map(once_row)
    .transpose()
}

pub(super) async fn once_approvals<C: GenericClient>(
    c: &C,
    session: &str,
) -> Result<Vec<OnceApproval>> {
    rows(
        c,
        "SELECT session_id, tool, approved_by, approved_at FROM once_approvals \
         WHERE session_id = $1 ORDER BY tool COLLATE \"C\"",
        &[&session],
    )
    .await?
    .iter()
    .map(once_row)
    .collect()
}

// --- kept outputs ---

pub(super) async fn keep_output<C: GenericClient>(
    c: &C,
    session: &str,
    call_id: &str,
    text: &str,
) -> Result<()> {
    require(call_id, "call id")?;
    lock_session(c, session).await?;
    exec(
        c,
        "INSERT INTO kept_outputs (session_id, call_id, seq, text) VALUES ($1, $2, \
         (SELECT coalesce(max(seq), 0) + 1 FROM kept_outputs WHERE session_id = $1), $3) \
         ON CONFLICT (session_id, call_id) DO UPDATE SET text = excluded.text, seq = excluded.seq",
        &[&session, &call_id, &text],
    )
    .await?;
    exec(
        c,
        "DELETE FROM kept_outputs WHERE session_id = $1 AND seq <= \
         (SELECT max(seq) FROM kept_outputs WHERE session_id = $1) - $2",
        &[&session, &to_i64(crate::KEPT_OUTPUTS)],
    )
    .await?;
    Ok(())
}

pub(super) async fn kept_output<C: GenericClient>(
    c: &C,
    session: &str,
    call_id: &str,
) -> Result<Option<String>> {
    let found = row(
        c,
        "SELECT text FROM kept_outputs WHERE session_id = $1 AND call_id = $2",
        &[&session, &call_id],
    )
    .await?;
    Ok(found.map(|r| r.try_get(0)).transpose()?)
}

// --- the perception cache ---

pub(super) async fn cached_result<C: GenericClient>(
    c: &C,
    key: &str,
    now: i64,
) -> Result<Option<Value>> {
    row(
        c,
        "SELECT result FROM perception_cache WHERE key = $1 AND expires_at > $2",
        &[&key, &now],
    )
    .await?
    .map(|r| json(&r, 0, "perception_cache", "result"))
    .transpose()
}

pub(super) async fn cache_result<C: GenericClient>(
    c: &C,
    key: &str,
    result: &str,
    now: i64,
    expires_at: i64,
) -> Result<()> {
    require(key, "cache key")?;
    exec(
        c,
        "INSERT INTO perception_cache (key, result, stored_at, expires_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (key) DO UPDATE SET id = nextval(pg_get_serial_sequence('perception_cache', 'id')), \
         result = excluded.result, stored_at = excluded.stored_at, expires_at = excluded.expires_at",
        &[&key, &result, &now, &expires_at],
    )
    .await?;
    exec(
        c,
        "DELETE FROM perception_cache WHERE expires_at <= $1",
        &[&now],
    )
    .await?;
    exec(
        c,
        "DELETE FROM perception_cache WHERE id <= \
         (SELECT id FROM perception_cache ORDER BY id DESC LIMIT 1 OFFSET $1)",
        &[&to_i64(crate::CACHED_RESULTS)],
    )
    .await?;
    Ok(())
}
