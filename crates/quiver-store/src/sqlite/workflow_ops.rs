//! The SQL of the [`WorkflowStore`](crate::WorkflowStore), as functions of a connection.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde_json::Value;

use super::ops::append_audit;
use crate::codec::{EncodedAudit, decode, encode};
use crate::error::{Result, StoreError};
use crate::types::now_ms;
use crate::workflow::{
    Advance, Attempt, AttemptStatus, Definition, Event, Lease, NewRun, Run, RunFilter, RunState,
    RunStatus, Wait, WaitKind, WaitStatus,
};

fn corrupt(table: &'static str, detail: String) -> StoreError {
    StoreError::Corrupt { table, detail }
}

fn json_opt(
    text: Option<String>,
    table: &'static str,
    column: &'static str,
) -> Result<Option<Value>> {
    text.map(|t| decode(&t, table, column)).transpose()
}

pub(crate) fn put_definition(conn: &Connection, d: &Definition, now: i64) -> Result<bool> {
    let n = conn
        .prepare_cached(
            "INSERT INTO wf_definitions (digest, workflow, body, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (digest) DO NOTHING",
        )?
        .execute(params![d.digest, d.workflow, encode(&d.body), now])?;
    Ok(n == 1)
}

pub(crate) fn definition(conn: &Connection, digest: &str) -> Result<Option<Definition>> {
    let row = conn
        .prepare_cached("SELECT digest, workflow, body FROM wf_definitions WHERE digest = ?1")?
        .query_row([digest], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .optional()?;
    row.map(|(digest, workflow, body)| {
        Ok(Definition {
            digest,
            workflow,
            body: decode(&body, "wf_definitions", "body")?,
        })
    })
    .transpose()
}

const RUN_COLUMNS: &str = "id, workflow, digest, idempotency_key, status, step, attempt, crashes, \
     input, trigger, principal, started_by, attended, settings, concurrency_key, output, error, \
     created_at, updated_at, deadline, lease_owner, lease_until, epoch";

fn run_row(r: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        id: r.get(0)?,
        workflow: r.get(1)?,
        digest: r.get(2)?,
        idempotency_key: r.get(3)?,
        status: r.get(4)?,
        step: r.get(5)?,
        attempt: r.get(6)?,
        crashes: r.get(7)?,
        input: r.get(8)?,
        trigger: r.get(9)?,
        principal: r.get(10)?,
        started_by: r.get(11)?,
        attended: r.get(12)?,
        settings: r.get(13)?,
        concurrency_key: r.get(14)?,
        output: r.get(15)?,
        error: r.get(16)?,
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
        deadline: r.get(19)?,
        lease_owner: r.get(20)?,
        lease_until: r.get(21)?,
        epoch: r.get(22)?,
    })
}

struct RawRun {
    id: String,
    workflow: String,
    digest: String,
    idempotency_key: Option<String>,
    status: String,
    step: i64,
    attempt: i64,
    crashes: i64,
    input: String,
    trigger: String,
    principal: String,
    started_by: String,
    attended: bool,
    settings: String,
    concurrency_key: Option<String>,
    output: Option<String>,
    error: Option<String>,
    created_at: i64,
    updated_at: i64,
    deadline: Option<i64>,
    lease_owner: Option<String>,
    lease_until: Option<i64>,
    epoch: i64,
}

impl RawRun {
    fn decode(self) -> Result<Run> {
        const T: &str = "wf_runs";
        Ok(Run {
            status: RunStatus::parse(&self.status)
                .ok_or_else(|| corrupt(T, format!("status `{}`", self.status)))?,
            input: decode(&self.input, T, "input")?,
            trigger: decode(&self.trigger, T, "trigger")?,
            principal: decode(&self.principal, T, "principal")?,
            settings: decode(&self.settings, T, "settings")?,
            output: json_opt(self.output, T, "output")?,
            id: self.id,
            workflow: self.workflow,
            digest: self.digest,
            idempotency_key: self.idempotency_key,
            step: self.step,
            attempt: self.attempt,
            crashes: self.crashes,
            started_by: self.started_by,
            attended: self.attended,
            concurrency_key: self.concurrency_key,
            error: self.error,
            created_at: self.created_at,
            updated_at: self.updated_at,
            deadline: self.deadline,
            lease: self
                .lease_owner
                .zip(self.lease_until)
                .map(|(owner, until)| Lease { owner, until }),
            epoch: self.epoch,
        })
    }
}

/// A run and what its next move depends on, in one read transaction.
pub(crate) fn run_state(conn: &Connection, id: &str) -> Result<Option<RunState>> {
    // Dropped without a commit, the read transaction ends (a rollback of nothing).
    let snapshot = conn.unchecked_transaction()?;
    let Some(run) = run(&snapshot, id)? else {
        return Ok(None);
    };
    Ok(Some(RunState {
        attempts: attempts(&snapshot, id)?,
        waits: waits(&snapshot, id)?,
        last_event: last_event_id(&snapshot)?,
        run,
        now: now_ms(),
    }))
}

pub(crate) fn run(conn: &Connection, id: &str) -> Result<Option<Run>> {
    conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM wf_runs WHERE id = ?1"))?
        .query_row([id], run_row)
        .optional()?
        .map(RawRun::decode)
        .transpose()
}

fn run_by_key(conn: &Connection, workflow: &str, key: &str) -> Result<Option<Run>> {
    conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM wf_runs WHERE workflow = ?1 AND idempotency_key = ?2"
    ))?
    .query_row([workflow, key], run_row)
    .optional()?
    .map(RawRun::decode)
    .transpose()
}

pub(crate) fn runs(conn: &Connection, filter: &RunFilter) -> Result<Vec<Run>> {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM wf_runs WHERE 1 = 1");
    let mut args: Vec<SqlValue> = Vec::new();
    if !filter.statuses.is_empty() {
        let marks: Vec<&str> = filter.statuses.iter().map(|_| "?").collect();
        sql.push_str(&format!(" AND status IN ({})", marks.join(", ")));
        args.extend(
            filter
                .statuses
                .iter()
                .map(|s| SqlValue::Text(s.as_str().to_owned())),
        );
    }
    if let Some(w) = &filter.workflow {
        sql.push_str(" AND workflow = ?");
        args.push(SqlValue::Text(w.clone()));
    }
    if let Some(k) = &filter.concurrency_key {
        sql.push_str(" AND concurrency_key = ?");
        args.push(SqlValue::Text(k.clone()));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT ?");
    args.push(SqlValue::Integer(
        filter
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX)),
    ));
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params_from_iter(args), run_row)?;
    rows.map(|r| r.map_err(StoreError::from).and_then(RawRun::decode))
        .collect()
}

/// Creates the run unless one with its key exists: `(run, created)`.
pub(crate) fn create_run(conn: &Connection, new: &NewRun) -> Result<(Run, bool)> {
    if new.id.is_empty() || new.workflow.is_empty() {
        return Err(StoreError::Invalid(
            "a run needs an id and a workflow".into(),
        ));
    }
    if let Some(key) = &new.idempotency_key
        && let Some(existing) = run_by_key(conn, &new.workflow, key)?
    {
        return Ok((existing, false));
    }
    let known = conn
        .prepare_cached("SELECT 1 FROM wf_definitions WHERE digest = ?1")?
        .exists([&new.digest])?;
    if !known {
        return Err(StoreError::NotFound {
            what: "workflow definition",
            id: new.digest.clone(),
        });
    }
    if let Some(limit) = new.active_limit {
        let package = new.workflow.split_once('.').map_or("", |(p, _)| p);
        // Workflows of `package` sort from `package.` to `package/` ('/' follows '.').
        let active: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM wf_runs WHERE status IN ('running', 'waiting', 'in_doubt') \
                 AND workflow >= ?1 AND workflow < ?2",
            )?
            .query_row(params![format!("{package}."), format!("{package}/")], |r| {
                r.get(0)
            })?;
        if active >= limit {
            return Err(StoreError::Full(format!(
                "package `{package}` has {active} runs that have not ended (at most {limit}): {} is not started",
                new.workflow
            )));
        }
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO wf_runs (id, workflow, digest, idempotency_key, status, step, attempt, \
             crashes, input, trigger, principal, started_by, attended, settings, concurrency_key, \
             created_at, updated_at, deadline) \
             VALUES (?1, ?2, ?3, ?4, 'running', 0, 0, 0, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13) \
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            new.id,
            new.workflow,
            new.digest,
            new.idempotency_key,
            encode(&new.input),
            encode(&new.trigger),
            encode(&new.principal),
            new.started_by,
            new.attended,
            encode(&new.settings),
            new.concurrency_key,
            new.now,
            new.deadline,
        ])?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists {
            what: "run",
            id: new.id.clone(),
        });
    }
    if let Some(session) = &new.session {
        match super::ops::create_session(conn, session, new.now) {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let created = run(conn, &new.id)?.ok_or_else(|| StoreError::NotFound {
        what: "run",
        id: new.id.clone(),
    })?;
    Ok((created, true))
}

/// Records a keyed trigger (a schedule's fire, a webhook's delivery) in `table` and creates its
/// run, or returns the run the key already started.
pub(crate) fn keyed_start(
    conn: &Connection,
    table: KeyedTable,
    scope: &str,
    key: &str,
    new: &NewRun,
) -> Result<(Run, bool)> {
    let (select, insert) = match table {
        KeyedTable::Fires => (
            "SELECT run_id FROM wf_schedule_fires WHERE workflow = ?1 AND fire_at = ?2",
            "INSERT INTO wf_schedule_fires (workflow, fire_at, run_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        ),
        KeyedTable::Deliveries => (
            "SELECT run_id FROM wf_webhook_deliveries WHERE hook = ?1 AND delivery_key = ?2",
            "INSERT INTO wf_webhook_deliveries (hook, delivery_key, run_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        ),
    };
    let key_value: SqlValue = match table {
        KeyedTable::Fires => SqlValue::Integer(
            key.parse()
                .map_err(|_| StoreError::Invalid(format!("fire time `{key}` is not a number")))?,
        ),
        KeyedTable::Deliveries => SqlValue::Text(key.to_owned()),
    };
    let existing: Option<String> = conn
        .prepare_cached(select)?
        .query_row(params![scope, key_value], |r| r.get(0))
        .optional()?;
    if let Some(run_id) = existing {
        let found = run(conn, &run_id)?.ok_or_else(|| StoreError::NotFound {
            what: "run",
            id: run_id,
        })?;
        return Ok((found, false));
    }
    let (started, created) = create_run(conn, new)?;
    conn.prepare_cached(insert)?
        .execute(params![scope, key_value, started.id, new.now])?;
    Ok((started, created))
}

/// The tables of keyed triggers.
#[derive(Clone, Copy)]
pub(crate) enum KeyedTable {
    /// Schedule fires, keyed by fire time.
    Fires,
    /// Webhook deliveries, keyed by `Idempotency-Key`.
    Deliveries,
}

const ATTEMPT_COLUMNS: &str = "run_id, step, attempt, step_id, idempotency_key, status, output, \
     error, started_at, finished_at, process";

pub(crate) fn attempts(conn: &Connection, run_id: &str) -> Result<Vec<Attempt>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLUMNS} FROM wf_attempts WHERE run_id = ?1 ORDER BY step, attempt"
    ))?;
    let rows = stmt.query_map([run_id], |r| {
        Ok((
            (
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ),
            (
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ),
            (
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
            ),
            (r.get::<_, i64>(8)?, r.get::<_, Option<i64>>(9)?),
            r.get::<_, Option<String>>(10)?,
        ))
    })?;
    rows.map(|row| {
        let (
            (run_id, step, attempt),
            (step_id, idempotency_key, status),
            (output, error),
            (started_at, finished_at),
            process,
        ) = row?;
        Ok(Attempt {
            run_id,
            step,
            attempt,
            step_id,
            idempotency_key,
            status: AttemptStatus::parse(&status)
                .ok_or_else(|| corrupt("wf_attempts", format!("status `{status}`")))?,
            output: json_opt(output, "wf_attempts", "output")?,
            error,
            started_at,
            finished_at,
            process,
        })
    })
    .collect()
}

/// Records the process group running an attempt, if the run still runs that attempt under
/// `epoch` and the attempt has no result yet.
pub(crate) fn set_attempt_process(
    conn: &Connection,
    run_id: &str,
    step: i64,
    attempt: i64,
    epoch: i64,
    process: Option<&str>,
) -> Result<bool> {
    let set = conn
        .prepare_cached(
            "UPDATE wf_attempts SET process = ?1 WHERE run_id = ?2 AND step = ?3 AND attempt = ?4 \
             AND status = 'started' AND EXISTS (SELECT 1 FROM wf_runs WHERE id = ?2 \
             AND status = 'running' AND step = ?3 AND attempt = ?4 AND epoch = ?5)",
        )?
        .execute(params![process, run_id, step, attempt, epoch])?;
    Ok(set > 0)
}

/// The holder's heartbeat: its lease moved to `now + ms` while it still holds it.
pub(crate) fn heartbeat_run(
    conn: &Connection,
    run_id: &str,
    epoch: i64,
    owner: &str,
    ms: i64,
    now: i64,
) -> Result<bool> {
    let set = conn
        .prepare_cached(
            "UPDATE wf_runs SET lease_until = ?1 + ?2 WHERE id = ?3 AND status = 'running' \
             AND epoch = ?4 AND lease_owner = ?5 AND lease_until > ?1",
        )?
        .execute(params![now, ms, run_id, epoch, owner])?;
    Ok(set > 0)
}

/// The running runs whose lease ran out by `now`, oldest first.
pub(crate) fn expired_leases(conn: &Connection, now: i64) -> Result<Vec<String>> {
    conn.prepare_cached(
        "SELECT id FROM wf_runs WHERE status = 'running' AND lease_until IS NOT NULL \
         AND lease_until <= ?1 ORDER BY created_at, id",
    )?
    .query_map([now], |r| r.get(0))?
    .collect::<rusqlite::Result<Vec<String>>>()
    .map_err(Into::into)
}

/// Writes one step of a run's progress if the run is still where the caller saw it.
pub(crate) fn advance(conn: &Connection, a: &Advance, audits: &[EncodedAudit]) -> Result<bool> {
    if let Some(gate) = &a.gate {
        // Runs of the workflow (with the key) that have begun and not ended; for an ordered
        // gate, also the ones created before this run that have not ended, begun or not.
        let ahead: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM wf_runs AS o WHERE o.workflow = ?1 \
                 AND (?2 IS NULL OR o.concurrency_key = ?2) \
                 AND o.status IN ('running', 'waiting', 'in_doubt') AND o.id != ?3 \
                 AND ((o.step > 0 OR o.attempt > 0) OR (?4 AND (o.created_at, o.id) < \
                      (SELECT created_at, id FROM wf_runs WHERE id = ?3)))",
            )?
            .query_row(
                params![gate.workflow, gate.key, a.run_id, gate.ordered],
                |r| r.get(0),
            )?;
        if ahead >= gate.limit {
            return Ok(false);
        }
    }
    let moved = conn
        .prepare_cached(
            "UPDATE wf_runs SET status = ?1, step = ?2, attempt = ?3, crashes = ?4, \
             output = coalesce(?5, output), error = ?6, updated_at = ?7, \
             lease_owner = ?12, lease_until = ?13 + ?14, epoch = epoch + ?15 \
             WHERE id = ?8 AND status = ?9 AND step = ?10 AND attempt = ?11 AND epoch = ?16",
        )?
        .execute(params![
            a.to.status.as_str(),
            a.to.step,
            a.to.attempt,
            a.to.crashes,
            a.to.output.as_ref().map(encode),
            a.to.error,
            a.now,
            a.run_id,
            a.expect.status.as_str(),
            a.expect.step,
            a.expect.attempt,
            a.to.lease.as_ref().map(|l| l.owner.as_str()),
            a.to.lease.as_ref().map(|_| now_ms()),
            a.to.lease.as_ref().map(|l| l.ms),
            i64::from(a.to.lease.is_some()),
            a.expect.epoch,
        ])?;
    if moved == 0 {
        return Ok(false);
    }
    for w in &a.attempts {
        let finished = (w.status != AttemptStatus::Started && w.status != AttemptStatus::Waiting)
            .then_some(a.now);
        conn.prepare_cached(
            "INSERT INTO wf_attempts (run_id, step, attempt, step_id, idempotency_key, status, \
             output, error, started_at, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
             ON CONFLICT (run_id, step, attempt) DO UPDATE SET status = excluded.status, \
             output = excluded.output, error = excluded.error, finished_at = excluded.finished_at",
        )?
        .execute(params![
            a.run_id,
            w.step,
            w.attempt,
            w.step_id,
            w.idempotency_key,
            w.status.as_str(),
            w.output.as_ref().map(encode),
            w.error,
            a.now,
            finished,
        ])?;
    }
    if let Some(r) = &a.resolve {
        let resolved = conn
            .prepare_cached(
                "UPDATE wf_waits SET status = 'resolved', resolution = ?1, resolved_by = ?2, \
                 resolved_at = ?3 WHERE id = ?4 AND run_id = ?5 AND status = 'pending'",
            )?
            .execute(params![
                encode(&r.resolution),
                r.by,
                a.now,
                r.wait_id,
                a.run_id
            ])?;
        if resolved == 0 {
            return Err(StoreError::Conflict(format!(
                "wait {} of run {} is no longer pending",
                r.wait_id, a.run_id
            )));
        }
    }
    if a.withdraw_waits {
        conn.prepare_cached(
            "UPDATE wf_waits SET status = 'withdrawn', resolved_at = ?1 \
             WHERE run_id = ?2 AND status = 'pending'",
        )?
        .execute(params![a.now, a.run_id])?;
    }
    if let Some(w) = &a.wait {
        conn.prepare_cached(
            "INSERT INTO wf_waits (run_id, step, attempt, kind, wake_at, event, after_event, \
             detail, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            a.run_id,
            a.to.step,
            a.to.attempt,
            w.kind.as_str(),
            w.wake_at,
            w.event,
            w.after_event,
            encode(&w.detail),
            a.now,
        ])?;
    }
    for entry in audits {
        append_audit(conn, entry)?;
    }
    Ok(true)
}

const WAIT_COLUMNS: &str = "id, run_id, step, attempt, kind, wake_at, event, after_event, detail, \
     status, resolution, resolved_by, created_at";

fn waits_where(conn: &Connection, clause: &str, args: &[SqlValue]) -> Result<Vec<Wait>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {WAIT_COLUMNS} FROM wf_waits WHERE {clause}"
    ))?;
    let rows = stmt.query_map(params_from_iter(args.iter()), |r| {
        Ok((
            (
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ),
            (
                r.get::<_, String>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, i64>(7)?,
            ),
            (
                r.get::<_, String>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, Option<String>>(10)?,
            ),
            (r.get::<_, Option<String>>(11)?, r.get::<_, i64>(12)?),
        ))
    })?;
    rows.map(|row| {
        let (
            (id, run_id, step, attempt),
            (kind, wake_at, event, after_event),
            (detail, status, resolution),
            (resolved_by, created_at),
        ) = row?;
        const T: &str = "wf_waits";
        Ok(Wait {
            id,
            run_id,
            step,
            attempt,
            kind: WaitKind::parse(&kind).ok_or_else(|| corrupt(T, format!("kind `{kind}`")))?,
            wake_at,
            event,
            after_event,
            detail: decode(&detail, T, "detail")?,
            status: WaitStatus::parse(&status)
                .ok_or_else(|| corrupt(T, format!("status `{status}`")))?,
            resolution: json_opt(resolution, T, "resolution")?,
            resolved_by,
            created_at,
        })
    })
    .collect()
}

pub(crate) fn waits(conn: &Connection, run_id: &str) -> Result<Vec<Wait>> {
    waits_where(
        conn,
        "run_id = ?1 ORDER BY id",
        &[SqlValue::Text(run_id.to_owned())],
    )
}

pub(crate) fn pending_waits(conn: &Connection, kind: Option<WaitKind>) -> Result<Vec<Wait>> {
    match kind {
        Some(k) => waits_where(
            conn,
            "status = 'pending' AND kind = ?1 ORDER BY id",
            &[SqlValue::Text(k.as_str().to_owned())],
        ),
        None => waits_where(conn, "status = 'pending' ORDER BY id", &[]),
    }
}

pub(crate) fn due_waits(conn: &Connection, now: i64) -> Result<Vec<Wait>> {
    waits_where(
        conn,
        "status = 'pending' AND wake_at IS NOT NULL AND wake_at <= ?1 ORDER BY wake_at, id",
        &[SqlValue::Integer(now)],
    )
}

pub(crate) fn next_wake_at(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT min(at) FROM (SELECT min(wake_at) AS at FROM wf_waits WHERE status = 'pending' \
             UNION ALL SELECT min(lease_until) FROM wf_runs WHERE status = 'running' \
             AND lease_until IS NOT NULL)",
        )?
        .query_row([], |r| r.get(0))?)
}

pub(crate) fn emit_event(
    conn: &Connection,
    name: &str,
    source: &str,
    payload: &str,
    now: i64,
) -> Result<i64> {
    if name.is_empty() {
        return Err(StoreError::Invalid("an event needs a name".into()));
    }
    conn.prepare_cached(
        "INSERT INTO wf_events (name, source, payload, created_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![name, source, payload, now])?;
    Ok(conn.last_insert_rowid())
}

pub(crate) fn events_after(conn: &Connection, name: &str, after: i64) -> Result<Vec<Event>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, name, source, payload, created_at FROM wf_events WHERE name = ?1 AND id > ?2 ORDER BY id",
    )?;
    events(stmt.query_map(params![name, after], event_row)?)
}

pub(crate) fn events_since(conn: &Connection, after: i64, limit: usize) -> Result<Vec<Event>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, name, source, payload, created_at FROM wf_events WHERE id > ?1 ORDER BY id LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    events(stmt.query_map(params![after, limit], event_row)?)
}

type EventRow = (i64, String, String, String, i64);

fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn events(rows: impl Iterator<Item = rusqlite::Result<EventRow>>) -> Result<Vec<Event>> {
    rows.map(|row| {
        let (id, name, source, payload, created_at) = row?;
        Ok(Event {
            id,
            name,
            source,
            payload: decode(&payload, "wf_events", "payload")?,
            created_at,
        })
    })
    .collect()
}

pub(crate) fn last_event_id(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT coalesce(max(id), 0) FROM wf_events")?
        .query_row([], |r| r.get(0))?)
}

pub(crate) fn last_schedule_fire(conn: &Connection, workflow: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT max(fire_at) FROM wf_schedule_fires WHERE workflow = ?1")?
        .query_row([workflow], |r| r.get(0))?)
}

pub(crate) fn cursor(conn: &Connection, name: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT position FROM wf_cursors WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?)
}

/// Sets a cursor: inserted if absent; an existing one moves forward when `forward`, else
/// stays. Returns the stored position.
pub(crate) fn set_cursor(
    conn: &Connection,
    name: &str,
    position: i64,
    forward: bool,
    now: i64,
) -> Result<i64> {
    let sql = if forward {
        "INSERT INTO wf_cursors (name, position, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (name) DO UPDATE SET position = max(position, excluded.position), \
         updated_at = excluded.updated_at"
    } else {
        "INSERT INTO wf_cursors (name, position, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (name) DO NOTHING"
    };
    conn.prepare_cached(sql)?
        .execute(params![name, position, now])?;
    cursor(conn, name)?.ok_or_else(|| corrupt("wf_cursors", format!("cursor `{name}` vanished")))
}

pub(crate) fn schedule_fires(conn: &Connection, workflow: &str) -> Result<Vec<(i64, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT fire_at, run_id FROM wf_schedule_fires WHERE workflow = ?1 ORDER BY fire_at",
    )?;
    let rows = stmt.query_map([workflow], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.map(|r| r.map_err(StoreError::from)).collect()
}
