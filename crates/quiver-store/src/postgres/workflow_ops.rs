//! The PostgreSQL SQL of the [`WorkflowStore`](crate::WorkflowStore). Writes run inside the
//! caller's transaction; every run move is one conditional `UPDATE`, so of two processes
//! advancing one run from the same place exactly one moves it.

use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;

use super::audit::append_audit;
use super::ops::{Args, exec, json, row, rows, to_i64};
use crate::codec::{EncodedAudit, decode, encode};
use crate::error::{Result, StoreError};
use crate::workflow::{
    Advance, Attempt, AttemptStatus, Definition, Event, Lease, NewRun, Run, RunFilter, RunStatus,
    Wait, WaitKind, WaitStatus,
};

fn corrupt(table: &'static str, detail: String) -> StoreError {
    StoreError::Corrupt { table, detail }
}

fn json_opt(r: &Row, i: usize, table: &'static str, column: &'static str) -> Result<Option<Value>> {
    let text: Option<String> = r.try_get(i)?;
    text.map(|t| decode(&t, table, column)).transpose()
}

pub(super) async fn put_definition<C: GenericClient>(
    c: &C,
    d: &Definition,
    now: i64,
) -> Result<bool> {
    let n = exec(
        c,
        "INSERT INTO wf_definitions (digest, workflow, body, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (digest) DO NOTHING",
        &[&d.digest, &d.workflow, &encode(&d.body), &now],
    )
    .await?;
    Ok(n == 1)
}

pub(super) async fn definition<C: GenericClient>(
    c: &C,
    digest: &str,
) -> Result<Option<Definition>> {
    let found = row(
        c,
        "SELECT digest, workflow, body FROM wf_definitions WHERE digest = $1",
        &[&digest],
    )
    .await?;
    found
        .map(|r| {
            Ok(Definition {
                digest: r.try_get(0)?,
                workflow: r.try_get(1)?,
                body: json(&r, 2, "wf_definitions", "body")?,
            })
        })
        .transpose()
}

const RUN_COLUMNS: &str = "id, workflow, digest, idempotency_key, status, step, attempt, crashes, \
     input, trigger, principal, started_by, attended, settings, concurrency_key, output, error, \
     created_at, updated_at, deadline, lease_owner, lease_until, epoch";

/// The database's clock in Unix ms: every instance compares leases and heartbeats with it,
/// never with its own clock. `clock_timestamp()`, not `now()`, which stands still for the
/// length of a transaction.
pub(super) const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

fn run_row(r: &Row) -> Result<Run> {
    const T: &str = "wf_runs";
    let status: String = r.try_get(4)?;
    let owner: Option<String> = r.try_get(20)?;
    let until: Option<i64> = r.try_get(21)?;
    Ok(Run {
        id: r.try_get(0)?,
        workflow: r.try_get(1)?,
        digest: r.try_get(2)?,
        idempotency_key: r.try_get(3)?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| corrupt(T, format!("status `{status}`")))?,
        step: r.try_get(5)?,
        attempt: r.try_get(6)?,
        crashes: r.try_get(7)?,
        input: json(r, 8, T, "input")?,
        trigger: json(r, 9, T, "trigger")?,
        principal: json(r, 10, T, "principal")?,
        started_by: r.try_get(11)?,
        attended: r.try_get(12)?,
        settings: json(r, 13, T, "settings")?,
        concurrency_key: r.try_get(14)?,
        output: json_opt(r, 15, T, "output")?,
        error: r.try_get(16)?,
        created_at: r.try_get(17)?,
        updated_at: r.try_get(18)?,
        deadline: r.try_get(19)?,
        lease: owner
            .zip(until)
            .map(|(owner, until)| Lease { owner, until }),
        epoch: r.try_get(22)?,
    })
}

pub(super) async fn run<C: GenericClient>(c: &C, id: &str) -> Result<Option<Run>> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM wf_runs WHERE id = $1");
    row(c, &sql, &[&id])
        .await?
        .as_ref()
        .map(run_row)
        .transpose()
}

async fn run_by_key<C: GenericClient>(c: &C, workflow: &str, key: &str) -> Result<Option<Run>> {
    let sql =
        format!("SELECT {RUN_COLUMNS} FROM wf_runs WHERE workflow = $1 AND idempotency_key = $2");
    row(c, &sql, &[&workflow, &key])
        .await?
        .as_ref()
        .map(run_row)
        .transpose()
}

pub(super) async fn runs<C: GenericClient>(c: &C, filter: &RunFilter) -> Result<Vec<Run>> {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM wf_runs WHERE true");
    let mut args = Args::default();
    if !filter.statuses.is_empty() {
        let statuses: Vec<String> = filter
            .statuses
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        sql.push_str(&format!(" AND status = ANY({})", args.push(statuses)));
    }
    if let Some(w) = &filter.workflow {
        sql.push_str(&format!(" AND workflow = {}", args.push(w.clone())));
    }
    if let Some(k) = &filter.concurrency_key {
        sql.push_str(&format!(" AND concurrency_key = {}", args.push(k.clone())));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {}", args.push(to_i64(limit))));
    }
    rows(c, &sql, &args.refs())
        .await?
        .iter()
        .map(run_row)
        .collect()
}

/// Creates the run unless one with its key exists: `(run, created)`.
pub(super) async fn create_run<C: GenericClient>(c: &C, new: &NewRun) -> Result<(Run, bool)> {
    if new.id.is_empty() || new.workflow.is_empty() {
        return Err(StoreError::Invalid(
            "a run needs an id and a workflow".into(),
        ));
    }
    if let Some(key) = &new.idempotency_key
        && let Some(existing) = run_by_key(c, &new.workflow, key).await?
    {
        return Ok((existing, false));
    }
    if row(
        c,
        "SELECT 1 FROM wf_definitions WHERE digest = $1",
        &[&new.digest],
    )
    .await?
    .is_none()
    {
        return Err(StoreError::NotFound {
            what: "workflow definition",
            id: new.digest.clone(),
        });
    }
    if let Some(limit) = new.active_limit {
        let package = new.workflow.split_once('.').map_or("", |(p, _)| p);
        let active: i64 = row(
            c,
            "SELECT count(*) FROM wf_runs WHERE status IN ('running', 'waiting', 'in_doubt') \
             AND workflow >= $1 AND workflow < $2",
            &[&format!("{package}."), &format!("{package}/")],
        )
        .await?
        .map(|r| r.try_get(0))
        .transpose()?
        .unwrap_or(0);
        if active >= limit {
            return Err(StoreError::Full(format!(
                "package `{package}` has {active} runs that have not ended (at most {limit}): {} is not started",
                new.workflow
            )));
        }
    }
    // No conflict target: a taken id and a taken idempotency key (another process's run,
    // committed meanwhile) both insert nothing.
    let inserted = exec(
        c,
        "INSERT INTO wf_runs (id, workflow, digest, idempotency_key, status, step, attempt, \
         crashes, input, trigger, principal, started_by, attended, settings, concurrency_key, \
         created_at, updated_at, deadline) \
         VALUES ($1, $2, $3, $4, 'running', 0, 0, 0, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13) \
         ON CONFLICT DO NOTHING",
        &[
            &new.id,
            &new.workflow,
            &new.digest,
            &new.idempotency_key,
            &encode(&new.input),
            &encode(&new.trigger),
            &encode(&new.principal),
            &new.started_by,
            &new.attended,
            &encode(&new.settings),
            &new.concurrency_key,
            &new.now,
            &new.deadline,
        ],
    )
    .await?;
    if inserted == 0 {
        if let Some(key) = &new.idempotency_key
            && let Some(existing) = run_by_key(c, &new.workflow, key).await?
        {
            return Ok((existing, false));
        }
        return Err(StoreError::AlreadyExists {
            what: "run",
            id: new.id.clone(),
        });
    }
    if let Some(session) = &new.session {
        match super::ops::create_session(c, session, new.now).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let created = run(c, &new.id).await?.ok_or_else(|| StoreError::NotFound {
        what: "run",
        id: new.id.clone(),
    })?;
    Ok((created, true))
}

/// The tables of keyed triggers.
#[derive(Clone, Copy)]
pub(super) enum KeyedTable {
    /// Schedule fires, keyed by fire time.
    Fires,
    /// Webhook deliveries, keyed by `Idempotency-Key`.
    Deliveries,
}

/// Claims a keyed trigger (a schedule's fire, a webhook's delivery) and creates its run, or
/// returns the run the key already started. The claim is inserted first: a second process
/// claiming the same key waits for the first one's transaction, then finds its run.
pub(super) async fn keyed_start<C: GenericClient>(
    c: &C,
    table: KeyedTable,
    scope: &str,
    key: &str,
    new: &NewRun,
) -> Result<(Run, bool)> {
    let (claim, select, settle) = match table {
        KeyedTable::Fires => (
            "INSERT INTO wf_schedule_fires (workflow, fire_at, run_id, created_at) \
             VALUES ($1, $2::text::bigint, $3, $4) ON CONFLICT DO NOTHING",
            "SELECT run_id FROM wf_schedule_fires WHERE workflow = $1 AND fire_at = $2::text::bigint",
            "UPDATE wf_schedule_fires SET run_id = $3 WHERE workflow = $1 AND fire_at = $2::text::bigint",
        ),
        KeyedTable::Deliveries => (
            "INSERT INTO wf_webhook_deliveries (hook, delivery_key, run_id, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            "SELECT run_id FROM wf_webhook_deliveries WHERE hook = $1 AND delivery_key = $2",
            "UPDATE wf_webhook_deliveries SET run_id = $3 WHERE hook = $1 AND delivery_key = $2",
        ),
    };
    if matches!(table, KeyedTable::Fires) && key.parse::<i64>().is_err() {
        return Err(StoreError::Invalid(format!(
            "fire time `{key}` is not a number"
        )));
    }
    if exec(c, claim, &[&scope, &key, &new.id, &new.now]).await? == 0 {
        let run_id: String = row(c, select, &[&scope, &key])
            .await?
            .ok_or_else(|| {
                corrupt(
                    "wf_schedule_fires",
                    format!("the claim of {scope} {key} vanished"),
                )
            })?
            .try_get(0)?;
        let found = run(c, &run_id).await?.ok_or_else(|| StoreError::NotFound {
            what: "run",
            id: run_id,
        })?;
        return Ok((found, false));
    }
    let (started, created) = create_run(c, new).await?;
    if started.id != new.id {
        exec(c, settle, &[&scope, &key, &started.id]).await?;
    }
    Ok((started, created))
}

const ATTEMPT_COLUMNS: &str = "run_id, step, attempt, step_id, idempotency_key, status, output, \
     error, started_at, finished_at, process";

pub(super) async fn attempts<C: GenericClient>(c: &C, run_id: &str) -> Result<Vec<Attempt>> {
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM wf_attempts WHERE run_id = $1 ORDER BY step, attempt"
    );
    rows(c, &sql, &[&run_id])
        .await?
        .iter()
        .map(|r| {
            let status: String = r.try_get(5)?;
            Ok(Attempt {
                run_id: r.try_get(0)?,
                step: r.try_get(1)?,
                attempt: r.try_get(2)?,
                step_id: r.try_get(3)?,
                idempotency_key: r.try_get(4)?,
                status: AttemptStatus::parse(&status)
                    .ok_or_else(|| corrupt("wf_attempts", format!("status `{status}`")))?,
                output: json_opt(r, 6, "wf_attempts", "output")?,
                error: r.try_get(7)?,
                started_at: r.try_get(8)?,
                finished_at: r.try_get(9)?,
                process: r.try_get(10)?,
            })
        })
        .collect()
}

pub(super) async fn set_attempt_process<C: GenericClient>(
    c: &C,
    run_id: &str,
    step: i64,
    attempt: i64,
    epoch: i64,
    process: Option<&str>,
) -> Result<bool> {
    let set = exec(
        c,
        "UPDATE wf_attempts SET process = $1 WHERE run_id = $2 AND step = $3 AND attempt = $4 \
         AND status = 'started' AND EXISTS (SELECT 1 FROM wf_runs WHERE id = $2 \
         AND status = 'running' AND step = $3 AND attempt = $4 AND epoch = $5)",
        &[&process, &run_id, &step, &attempt, &epoch],
    )
    .await?;
    Ok(set > 0)
}

/// The database's clock.
pub(super) async fn clock_ms<C: GenericClient>(c: &C) -> Result<i64> {
    scalar(c, &format!("SELECT {DB_NOW}"), &[])
        .await?
        .ok_or_else(|| corrupt("clock", "the database gave no time".to_owned()))
}

/// The holder's heartbeat: its lease moved to the database's clock plus `ms` while it still
/// holds it.
pub(super) async fn heartbeat_run<C: GenericClient>(
    c: &C,
    run_id: &str,
    epoch: i64,
    owner: &str,
    ms: i64,
) -> Result<bool> {
    let sql = format!(
        "UPDATE wf_runs SET lease_until = {DB_NOW} + $1 WHERE id = $2 AND status = 'running' \
         AND epoch = $3 AND lease_owner = $4 AND lease_until > {DB_NOW}"
    );
    Ok(exec(c, &sql, &[&ms, &run_id, &epoch, &owner]).await? > 0)
}

/// The running runs whose lease ran out by the database's clock, oldest first.
pub(super) async fn expired_leases<C: GenericClient>(c: &C) -> Result<Vec<String>> {
    let sql = format!(
        "SELECT id FROM wf_runs WHERE status = 'running' AND lease_until IS NOT NULL \
         AND lease_until <= {DB_NOW} ORDER BY created_at, id"
    );
    rows(c, &sql, &[])
        .await?
        .iter()
        .map(|r| Ok(r.try_get(0)?))
        .collect()
}

/// Writes one step of a run's progress if the run is still where the caller saw it.
pub(super) async fn advance<C: GenericClient>(
    c: &C,
    a: &Advance,
    audits: &[EncodedAudit],
) -> Result<bool> {
    if let Some(gate) = &a.gate {
        // The workflow's runs are locked first, so two processes starting runs of one
        // workflow count them in turn and never both pass a full gate.
        exec(
            c,
            "SELECT 1 FROM wf_runs WHERE workflow = $1 ORDER BY id FOR UPDATE",
            &[&gate.workflow],
        )
        .await?;
        let ahead: i64 = row(
            c,
            "SELECT count(*) FROM wf_runs AS o WHERE o.workflow = $1 \
             AND ($2::text IS NULL OR o.concurrency_key = $2) \
             AND o.status IN ('running', 'waiting', 'in_doubt') AND o.id != $3 \
             AND ((o.step > 0 OR o.attempt > 0) OR ($4 AND (o.created_at, o.id) < \
                  (SELECT created_at, id FROM wf_runs WHERE id = $3)))",
            &[&gate.workflow, &gate.key, &a.run_id, &gate.ordered],
        )
        .await?
        .map(|r| r.try_get(0))
        .transpose()?
        .unwrap_or(0);
        if ahead >= gate.limit {
            return Ok(false);
        }
    }
    if a.to.lease.is_some() {
        // A claim: of two instances claiming the run at once, the second skips the row the
        // first holds and claims nothing (the first's conditional update below wins).
        let sql = "SELECT 1 FROM wf_runs WHERE id = $1 FOR UPDATE SKIP LOCKED";
        if row(c, sql, &[&a.run_id]).await?.is_none() {
            return Ok(false);
        }
    }
    let sql = format!(
        "UPDATE wf_runs SET status = $1, step = $2, attempt = $3, crashes = $4, \
         output = coalesce($5, output), error = $6, updated_at = $7, \
         lease_owner = $12, lease_until = {DB_NOW} + $13, epoch = epoch + $14 \
         WHERE id = $8 AND status = $9 AND step = $10 AND attempt = $11 AND epoch = $15"
    );
    let moved = exec(
        c,
        &sql,
        &[
            &a.to.status.as_str(),
            &a.to.step,
            &a.to.attempt,
            &a.to.crashes,
            &a.to.output.as_ref().map(encode),
            &a.to.error,
            &a.now,
            &a.run_id,
            &a.expect.status.as_str(),
            &a.expect.step,
            &a.expect.attempt,
            &a.to.lease.as_ref().map(|l| l.owner.as_str()),
            &a.to.lease.as_ref().map(|l| l.ms),
            &i64::from(a.to.lease.is_some()),
            &a.expect.epoch,
        ],
    )
    .await?;
    if moved == 0 {
        return Ok(false);
    }
    for w in &a.attempts {
        let finished = (w.status != AttemptStatus::Started && w.status != AttemptStatus::Waiting)
            .then_some(a.now);
        exec(
            c,
            "INSERT INTO wf_attempts (run_id, step, attempt, step_id, idempotency_key, status, \
             output, error, started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (run_id, step, attempt) DO UPDATE SET status = excluded.status, \
             output = excluded.output, error = excluded.error, finished_at = excluded.finished_at",
            &[
                &a.run_id,
                &w.step,
                &w.attempt,
                &w.step_id,
                &w.idempotency_key,
                &w.status.as_str(),
                &w.output.as_ref().map(encode),
                &w.error,
                &a.now,
                &finished,
            ],
        )
        .await?;
    }
    if let Some(r) = &a.resolve {
        let resolved = exec(
            c,
            "UPDATE wf_waits SET status = 'resolved', resolution = $1, resolved_by = $2, \
             resolved_at = $3 WHERE id = $4 AND run_id = $5 AND status = 'pending'",
            &[&encode(&r.resolution), &r.by, &a.now, &r.wait_id, &a.run_id],
        )
        .await?;
        if resolved == 0 {
            return Err(StoreError::Conflict(format!(
                "wait {} of run {} is no longer pending",
                r.wait_id, a.run_id
            )));
        }
    }
    if a.withdraw_waits {
        exec(
            c,
            "UPDATE wf_waits SET status = 'withdrawn', resolved_at = $1 \
             WHERE run_id = $2 AND status = 'pending'",
            &[&a.now, &a.run_id],
        )
        .await?;
    }
    if let Some(w) = &a.wait {
        exec(
            c,
            "INSERT INTO wf_waits (run_id, step, attempt, kind, wake_at, event, after_event, \
             detail, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &a.run_id,
                &a.to.step,
                &a.to.attempt,
                &w.kind.as_str(),
                &w.wake_at,
                &w.event,
                &w.after_event,
                &encode(&w.detail),
                &a.now,
            ],
        )
        .await?;
    }
    for entry in audits {
        append_audit(c, entry).await?;
    }
    Ok(true)
}

const WAIT_COLUMNS: &str = "id, run_id, step, attempt, kind, wake_at, event, after_event, detail, \
     status, resolution, resolved_by, created_at";

async fn waits_where<C: GenericClient>(c: &C, clause: &str, args: &Args) -> Result<Vec<Wait>> {
    let sql = format!("SELECT {WAIT_COLUMNS} FROM wf_waits WHERE {clause}");
    const T: &str = "wf_waits";
    rows(c, &sql, &args.refs())
        .await?
        .iter()
        .map(|r| {
            let kind: String = r.try_get(4)?;
            let status: String = r.try_get(9)?;
            Ok(Wait {
                id: r.try_get(0)?,
                run_id: r.try_get(1)?,
                step: r.try_get(2)?,
                attempt: r.try_get(3)?,
                kind: WaitKind::parse(&kind).ok_or_else(|| corrupt(T, format!("kind `{kind}`")))?,
                wake_at: r.try_get(5)?,
                event: r.try_get(6)?,
                after_event: r.try_get(7)?,
                detail: json(r, 8, T, "detail")?,
                status: WaitStatus::parse(&status)
                    .ok_or_else(|| corrupt(T, format!("status `{status}`")))?,
                resolution: json_opt(r, 10, T, "resolution")?,
                resolved_by: r.try_get(11)?,
                created_at: r.try_get(12)?,
            })
        })
        .collect()
}

pub(super) async fn waits<C: GenericClient>(c: &C, run_id: &str) -> Result<Vec<Wait>> {
    let mut args = Args::default();
    let clause = format!("run_id = {} ORDER BY id", args.push(run_id.to_owned()));
    waits_where(c, &clause, &args).await
}

pub(super) async fn pending_waits<C: GenericClient>(
    c: &C,
    kind: Option<WaitKind>,
) -> Result<Vec<Wait>> {
    let mut args = Args::default();
    let clause = match kind {
        Some(k) => format!(
            "status = 'pending' AND kind = {} ORDER BY id",
            args.push(k.as_str().to_owned())
        ),
        None => "status = 'pending' ORDER BY id".to_owned(),
    };
    waits_where(c, &clause, &args).await
}

pub(super) async fn due_waits<C: GenericClient>(c: &C, now: i64) -> Result<Vec<Wait>> {
    let mut args = Args::default();
    let clause = format!(
        "status = 'pending' AND wake_at IS NOT NULL AND wake_at <= {} ORDER BY wake_at, id",
        args.push(now)
    );
    waits_where(c, &clause, &args).await
}

/// The first column of a one-row aggregate.
async fn scalar<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &super::ops::Params<'_>,
) -> Result<Option<i64>> {
    Ok(row(c, sql, params)
        .await?
        .map(|r| r.try_get::<_, Option<i64>>(0))
        .transpose()?
        .flatten())
}

pub(super) async fn next_wake_at<C: GenericClient>(c: &C) -> Result<Option<i64>> {
    scalar(
        c,
        "SELECT min(at) FROM (SELECT min(wake_at) AS at FROM wf_waits WHERE status = 'pending' \
         UNION ALL SELECT min(lease_until) FROM wf_runs WHERE status = 'running' \
         AND lease_until IS NOT NULL) AS soonest",
        &[],
    )
    .await
}

/// Stores an event under the next id of the counter, whose row stays locked until this
/// transaction ends: ids commit in order (see the schema's version 2).
pub(super) async fn emit_event<C: GenericClient>(
    c: &C,
    name: &str,
    source: &str,
    payload: &str,
    now: i64,
) -> Result<i64> {
    if name.is_empty() {
        return Err(StoreError::Invalid("an event needs a name".into()));
    }
    let id = scalar(
        c,
        "UPDATE wf_event_counter SET last = last + 1 RETURNING last",
        &[],
    )
    .await?
    .ok_or_else(|| corrupt("wf_event_counter", "the counter row is missing".to_owned()))?;
    exec(
        c,
        "INSERT INTO wf_events (id, name, source, payload, created_at) VALUES ($1, $2, $3, $4, $5)",
        &[&id, &name, &source, &payload, &now],
    )
    .await?;
    Ok(id)
}

fn event_row(r: &Row) -> Result<Event> {
    Ok(Event {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        source: r.try_get(2)?,
        payload: json(r, 3, "wf_events", "payload")?,
        created_at: r.try_get(4)?,
    })
}

pub(super) async fn events_after<C: GenericClient>(
    c: &C,
    name: &str,
    after: i64,
) -> Result<Vec<Event>> {
    rows(
        c,
        "SELECT id, name, source, payload, created_at FROM wf_events WHERE name = $1 AND id > $2 \
         ORDER BY id",
        &[&name, &after],
    )
    .await?
    .iter()
    .map(event_row)
    .collect()
}

pub(super) async fn events_since<C: GenericClient>(
    c: &C,
    after: i64,
    limit: usize,
) -> Result<Vec<Event>> {
    rows(
        c,
        "SELECT id, name, source, payload, created_at FROM wf_events WHERE id > $1 ORDER BY id \
         LIMIT $2",
        &[&after, &to_i64(limit)],
    )
    .await?
    .iter()
    .map(event_row)
    .collect()
}

pub(super) async fn last_event_id<C: GenericClient>(c: &C) -> Result<i64> {
    Ok(scalar(c, "SELECT coalesce(max(id), 0) FROM wf_events", &[])
        .await?
        .unwrap_or(0))
}

pub(super) async fn last_schedule_fire<C: GenericClient>(
    c: &C,
    workflow: &str,
) -> Result<Option<i64>> {
    scalar(
        c,
        "SELECT max(fire_at) FROM wf_schedule_fires WHERE workflow = $1",
        &[&workflow],
    )
    .await
}

pub(super) async fn schedule_fires<C: GenericClient>(
    c: &C,
    workflow: &str,
) -> Result<Vec<(i64, String)>> {
    rows(
        c,
        "SELECT fire_at, run_id FROM wf_schedule_fires WHERE workflow = $1 ORDER BY fire_at",
        &[&workflow],
    )
    .await?
    .iter()
    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
    .collect()
}

pub(super) async fn cursor<C: GenericClient>(c: &C, name: &str) -> Result<Option<i64>> {
    scalar(
        c,
        "SELECT position FROM wf_cursors WHERE name = $1",
        &[&name],
    )
    .await
}

/// Sets a cursor: inserted if absent; an existing one moves forward when `forward`, else
/// stays. Returns the stored position.
pub(super) async fn set_cursor<C: GenericClient>(
    c: &C,
    name: &str,
    position: i64,
    forward: bool,
    now: i64,
) -> Result<i64> {
    let sql = if forward {
        "INSERT INTO wf_cursors (name, position, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET position = greatest(wf_cursors.position, excluded.position), \
         updated_at = excluded.updated_at"
    } else {
        "INSERT INTO wf_cursors (name, position, updated_at) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO NOTHING"
    };
    exec(c, sql, &[&name, &position, &now]).await?;
    cursor(c, name)
        .await?
        .ok_or_else(|| corrupt("wf_cursors", format!("cursor `{name}` vanished")))
}
