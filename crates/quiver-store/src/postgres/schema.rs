//! The PostgreSQL schema and its migration runner: ordered, numbered migrations, each applied
//! in its own transaction and recorded in `quiver_migrations` in that transaction, under a lock
//! of that table, so several instances starting together on a fresh database migrate it once.
//!
//! The schema is the SQLite store's at its version 13, in PostgreSQL's types: times are Unix
//! milliseconds in `BIGINT`, JSON is kept as `TEXT` (as written: `jsonb` would reorder object
//! keys, which the runtime keeps in order), flags are `BOOLEAN`.

use deadpool_postgres::Client;

use crate::error::{Result, StoreError};

/// One numbered step of the schema.
struct Migration {
    /// Its number: migrations apply in this order, each once.
    version: i64,
    /// What it does, recorded with it.
    name: &'static str,
    /// Its statements.
    sql: &'static str,
}

/// The migrations, in order. Never edit a released entry; append a new one.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "the store as of SQLite schema 13",
        sql: V1,
    },
    Migration {
        version: 2,
        name: "commit-ordered event ids",
        sql: V2,
    },
    Migration {
        version: 3,
        name: "operator cards (SQLite schema 14)",
        sql: V3,
    },
    Migration {
        version: 4,
        name: "revoked operator cards (SQLite schema 15)",
        sql: V4,
    },
    Migration {
        version: 5,
        name: "run fencing epochs and the instance registry (SQLite schema 16)",
        sql: V5,
    },
    Migration {
        version: 6,
        name: "the audit log partitioned by month",
        sql: V6,
    },
    Migration {
        version: 7,
        name: "spent request states (SQLite schema 17)",
        sql: V7,
    },
    Migration {
        version: 8,
        name: "held turns and shared questions (SQLite schema 18)",
        sql: V8,
    },
];

/// The newest schema version this build knows.
pub const PG_SCHEMA_VERSION: i64 = 8;

/// Brings the database (the connection's `search_path` schema) to [`PG_SCHEMA_VERSION`]. A
/// database migrated by a newer Quiver is refused untouched ([`StoreError::SchemaTooNew`]).
pub(crate) async fn migrate(client: &mut Client) -> Result<()> {
    // Two instances creating the table at once: the loser's error is harmless.
    let created = client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS quiver_migrations (
                version    BIGINT PRIMARY KEY,
                name       TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )",
        )
        .await;
    if let Err(error) = created
        && !super::lost_create_race(&error)
    {
        return Err(error.into());
    }
    loop {
        let tx = client.transaction().await?;
        tx.batch_execute("LOCK TABLE quiver_migrations IN EXCLUSIVE MODE")
            .await?;
        let current: i64 = tx
            .query_one(
                "SELECT coalesce(max(version), 0) FROM quiver_migrations",
                &[],
            )
            .await?
            .try_get(0)?;
        if current > PG_SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: current,
                known: PG_SCHEMA_VERSION,
            });
        }
        let Some(next) = MIGRATIONS.iter().find(|m| m.version > current) else {
            tx.commit().await?;
            return Ok(());
        };
        if let Err(error) = tx.batch_execute(next.sql).await {
            tracing::error!(
                version = next.version,
                name = next.name,
                "a store migration failed"
            );
            return Err(error.into());
        }
        tx.execute(
            "INSERT INTO quiver_migrations (version, name) VALUES ($1, $2)",
            &[&next.version, &next.name],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(
            version = next.version,
            name = next.name,
            "migrated the store"
        );
    }
}

const V1: &str = r#"
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    parent_id        TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    ended_at         BIGINT,
    origin           TEXT NOT NULL,
    agent            TEXT NOT NULL,
    principal        TEXT NOT NULL,
    catalog_version  TEXT NOT NULL,
    prompt_versions  TEXT NOT NULL,
    state            TEXT NOT NULL,
    -- bumped by every change of the session's loaded tools, opened packages, active skills,
    -- in the transaction of the change, which locks this row first (one writer per session)
    presence_changes BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_update ON sessions (updated_at DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE loaded_tools (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool       TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    PRIMARY KEY (session_id, tool)
);
CREATE TABLE opened_packages (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package    TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    opened_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, package)
);
CREATE TABLE active_skills (
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    skill        TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    activated_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, skill)
);
CREATE TABLE consents (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package    TEXT NOT NULL,
    granted    BOOLEAN NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, package)
);
CREATE TABLE once_approvals (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, tool)
);
CREATE TABLE approvals (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    reason           TEXT NOT NULL,
    risk_category    TEXT,
    created_at       BIGINT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'withdrawn')),
    answered_by      TEXT,
    answered_at      BIGINT,
    note             TEXT,
    permissions      TEXT NOT NULL DEFAULT '[]',
    waiter           TEXT,
    question         TEXT NOT NULL DEFAULT 'approval',
    arguments_digest TEXT,
    used_at          BIGINT
);
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_by_session ON approvals (session_id, created_at);
CREATE INDEX approvals_by_call ON approvals (session_id, tool, arguments_digest)
    WHERE used_at IS NULL;

CREATE TABLE audit (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time            BIGINT NOT NULL,
    kind            TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    call_id         TEXT,
    principal       TEXT NOT NULL,
    origin          TEXT NOT NULL,
    tool            TEXT,
    skill           TEXT,
    argument_digest TEXT,
    decisions       TEXT NOT NULL,
    status          TEXT NOT NULL,
    duration_ms     BIGINT NOT NULL,
    cached          BOOLEAN NOT NULL,
    detail          TEXT
);
CREATE INDEX audit_by_session ON audit (session_id);
CREATE INDEX audit_by_tool ON audit (tool) WHERE tool IS NOT NULL;
CREATE FUNCTION quiver_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only';
END;
$$;
CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION quiver_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION quiver_audit_append_only();

CREATE TABLE calls_in_flight (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time            BIGINT NOT NULL,
    kind            TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    principal       TEXT NOT NULL,
    origin          TEXT NOT NULL,
    tool            TEXT,
    skill           TEXT,
    argument_digest TEXT,
    decisions       TEXT NOT NULL,
    status          TEXT NOT NULL,
    duration_ms     BIGINT NOT NULL,
    cached          BOOLEAN NOT NULL,
    detail          TEXT
);
CREATE INDEX calls_in_flight_by_call ON calls_in_flight (call_id);

CREATE TABLE operator_state (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at BIGINT NOT NULL
);

CREATE TABLE kept_outputs (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    call_id    TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    text       TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
);

CREATE TABLE perception_cache (
    id         BIGSERIAL PRIMARY KEY,
    key        TEXT NOT NULL UNIQUE,
    result     TEXT NOT NULL,
    stored_at  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX perception_cache_by_expiry ON perception_cache (expires_at);

CREATE TABLE wf_definitions (
    digest     TEXT PRIMARY KEY,
    workflow   TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE wf_runs (
    id              TEXT PRIMARY KEY,
    workflow        TEXT NOT NULL,
    digest          TEXT NOT NULL REFERENCES wf_definitions(digest),
    idempotency_key TEXT,
    status          TEXT NOT NULL CHECK (status IN
                    ('running', 'waiting', 'in_doubt', 'completed', 'failed', 'cancelled')),
    step            BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    crashes         BIGINT NOT NULL,
    input           TEXT NOT NULL,
    trigger         TEXT NOT NULL,
    principal       TEXT NOT NULL,
    started_by      TEXT NOT NULL,
    attended        BOOLEAN NOT NULL,
    settings        TEXT NOT NULL,
    concurrency_key TEXT,
    output          TEXT,
    error           TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    deadline        BIGINT,
    lease_owner     TEXT,
    lease_until     BIGINT
);
CREATE UNIQUE INDEX wf_runs_by_key ON wf_runs (workflow, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX wf_runs_by_status ON wf_runs (status, created_at);
CREATE INDEX wf_runs_by_workflow ON wf_runs (workflow, created_at);
CREATE TABLE wf_attempts (
    run_id          TEXT NOT NULL REFERENCES wf_runs(id),
    step            BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    step_id         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'ok', 'failed', 'skipped',
                    'crashed', 'waiting', 'approved', 'rejected', 'timed_out')),
    output          TEXT,
    error           TEXT,
    started_at      BIGINT NOT NULL,
    finished_at     BIGINT,
    process         TEXT,
    PRIMARY KEY (run_id, step, attempt)
);
CREATE TABLE wf_waits (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES wf_runs(id),
    step        BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('approval', 'timer', 'event', 'retry')),
    wake_at     BIGINT,
    event       TEXT,
    after_event BIGINT NOT NULL,
    detail      TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'resolved', 'withdrawn')),
    resolution  TEXT,
    resolved_by TEXT,
    resolved_at BIGINT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX wf_waits_due ON wf_waits (wake_at) WHERE status = 'pending';
CREATE INDEX wf_waits_by_run ON wf_waits (run_id, id);
CREATE TABLE wf_events (
    id         BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    source     TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX wf_events_by_name ON wf_events (name, id);
CREATE TABLE wf_schedule_fires (
    workflow   TEXT NOT NULL,
    fire_at    BIGINT NOT NULL,
    -- deferred: the fire is claimed (inserted) before its run is created, so of two processes
    -- firing at once the loser waits for the winner and creates nothing
    run_id     TEXT NOT NULL REFERENCES wf_runs(id) DEFERRABLE INITIALLY DEFERRED,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workflow, fire_at)
);
CREATE TABLE wf_webhook_deliveries (
    hook         TEXT NOT NULL,
    delivery_key TEXT NOT NULL,
    run_id       TEXT NOT NULL REFERENCES wf_runs(id) DEFERRABLE INITIALLY DEFERRED,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (hook, delivery_key)
);
CREATE TABLE wf_cursors (
    name       TEXT PRIMARY KEY,
    position   BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
"#;

/// Version 2: event ids in commit order. A sequence hands out ids in the order transactions
/// ask, not the order they commit, so a reader of `id > cursor` could pass over an event whose
/// smaller id commits late. Ids come from this one-row counter instead, whose row lock is held
/// until the emitting transaction ends: the next emitter waits, and ids commit in order.
const V2: &str = r#"
CREATE TABLE wf_event_counter (
    one  BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    last BIGINT NOT NULL
);
INSERT INTO wf_event_counter (last) SELECT coalesce(max(id), 0) FROM wf_events;
"#;

/// Version 3: operator cards, as SQLite's version 14: a person's approval given ahead for one
/// exact call, used at most once before it expires.
const V3: &str = r#"
CREATE TABLE operator_cards (
    id               TEXT PRIMARY KEY NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    session_id       TEXT,
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    used_at          BIGINT,
    used_session     TEXT,
    used_call        TEXT
);
CREATE INDEX operator_cards_by_call ON operator_cards (tool, arguments_digest)
    WHERE used_at IS NULL;
"#;

/// Version 4: as SQLite's version 15, an operator card revoked before it expires (when, and by
/// whom) matches no call.
const V4: &str = r#"
ALTER TABLE operator_cards ADD COLUMN revoked_at BIGINT;
ALTER TABLE operator_cards ADD COLUMN revoked_by TEXT;
"#;

/// Version 5: several instances on one database, as SQLite's version 16. A run's fencing epoch,
/// raised by every claim of an attempt, so a write of a holder that lost its lease changes
/// nothing; the registry of the `quiver serve` instances, each heartbeating its row on the
/// database's clock, and reaped once (by one instance) when its heartbeat stops.
const V5: &str = r#"
ALTER TABLE wf_runs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX wf_runs_by_lease ON wf_runs (lease_until)
    WHERE status = 'running' AND lease_until IS NOT NULL;
CREATE TABLE instances (
    id           TEXT PRIMARY KEY NOT NULL,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    process      TEXT,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    reaped_at    BIGINT,
    reaped_by    TEXT
);
"#;

/// Version 6: the audit log partitioned by month of its `time` (UTC), each month a table
/// `audit_YYYY_MM`, and `audit_default` for a row no month table takes, so an insert never
/// fails. The existing rows move over with their ids (the id sequence continues after them);
/// the row triggers refusing `UPDATE` and `DELETE` are the parent's, which every partition
/// inherits; `TRUNCATE` of a partition is refused by a trigger on each, made with it.
/// `quiver_audit_partition(ms)` makes the month table of a time if it is missing (never
/// failing: a month whose rows already sit in `audit_default` stays there); the store calls
/// `quiver_audit_partitions_ahead(now)` (this month and the next) when it opens and hourly.
const V6: &str = r#"
ALTER TABLE audit RENAME TO audit_unpartitioned;
CREATE TABLE audit (
    id              BIGINT GENERATED ALWAYS AS IDENTITY,
    time            BIGINT NOT NULL,
    kind            TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    call_id         TEXT,
    principal       TEXT NOT NULL,
    origin          TEXT NOT NULL,
    tool            TEXT,
    skill           TEXT,
    argument_digest TEXT,
    decisions       TEXT NOT NULL,
    status          TEXT NOT NULL,
    duration_ms     BIGINT NOT NULL,
    cached          BOOLEAN NOT NULL,
    detail          TEXT
) PARTITION BY RANGE (time);

CREATE FUNCTION quiver_audit_partition(at_ms BIGINT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    month TIMESTAMP;
    name  TEXT;
BEGIN
    -- year 1 to 9999: a time beyond goes to the default partition
    IF at_ms NOT BETWEEN -62135596800000 AND 253402300799999 THEN
        RETURN;
    END IF;
    month := date_trunc('month', to_timestamp(at_ms / 1000.0) AT TIME ZONE 'UTC');
    name := 'audit_' || to_char(month, 'YYYY_MM');
    IF to_regclass(format('%I.%I', current_schema(), name)) IS NOT NULL THEN
        RETURN;
    END IF;
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF audit FOR VALUES FROM (%s) TO (%s)', name,
            (extract(epoch FROM month) * 1000)::BIGINT,
            (extract(epoch FROM month + INTERVAL '1 month') * 1000)::BIGINT);
        EXECUTE format('CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON %I '
            'FOR EACH STATEMENT EXECUTE FUNCTION quiver_audit_append_only()', name);
    EXCEPTION WHEN OTHERS THEN
        -- another instance made it at the same moment, or rows of that month already sit in
        -- the default partition: the row goes there
        RAISE NOTICE 'no audit partition %: %', name, SQLERRM;
    END;
END;
$$;

CREATE FUNCTION quiver_audit_partitions_ahead(now_ms BIGINT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM quiver_audit_partition(now_ms);
    PERFORM quiver_audit_partition((extract(epoch FROM date_trunc('month',
        to_timestamp(now_ms / 1000.0) AT TIME ZONE 'UTC') + INTERVAL '1 month') * 1000)::BIGINT);
END;
$$;

CREATE TABLE audit_default PARTITION OF audit DEFAULT;
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit_default
    FOR EACH STATEMENT EXECUTE FUNCTION quiver_audit_append_only();
SELECT quiver_audit_partition(min(time)) FROM audit_unpartitioned
    WHERE time BETWEEN -62135596800000 AND 253402300799999
    GROUP BY date_trunc('month', to_timestamp(time / 1000.0) AT TIME ZONE 'UTC');
INSERT INTO audit OVERRIDING SYSTEM VALUE SELECT * FROM audit_unpartitioned ORDER BY id;
DO $$
BEGIN
    EXECUTE format('ALTER TABLE audit ALTER COLUMN id RESTART WITH %s',
        (SELECT coalesce(max(id), 0) + 1 FROM audit));
END;
$$;
DROP TABLE audit_unpartitioned;

ALTER TABLE audit ADD PRIMARY KEY (id, time);
CREATE INDEX audit_by_session ON audit (session_id);
CREATE INDEX audit_by_tool ON audit (tool) WHERE tool IS NOT NULL;
CREATE INDEX audit_by_time ON audit (time);
CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION quiver_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION quiver_audit_append_only();
"#;

/// Version 7: as SQLite's version 17, the spent one-time nonces of MCP request states, shared
/// by every instance, with the result of the call each resumed (`NULL` while it runs), kept
/// until `expires_at` on the database's clock.
const V7: &str = r#"
CREATE TABLE request_states (
    nonce      TEXT PRIMARY KEY NOT NULL,
    spent_at   BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    result     TEXT
);
CREATE INDEX request_states_by_expiry ON request_states (expires_at);
"#;

/// Version 8: as SQLite's version 18, an MCP conversation's held turns (one JSON document per
/// session under a version for conditional writes) and the questions of a session asked once
/// for all its requests (a package's consent); `expires_at` on the database's clock.
const V8: &str = r#"
CREATE TABLE held_turns (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turns      TEXT NOT NULL,
    version    BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE shared_questions (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    asker      TEXT NOT NULL,
    asked_at   BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    answer     TEXT,
    PRIMARY KEY (session_id, key)
);
"#;
