//! The schema and its versioned migrations (`PRAGMA user_version`).

use std::path::Path;

use rusqlite::Connection;

use crate::error::{Result, StoreError};

/// `PRAGMA application_id` of a Quiver store: "QVSR".
pub(crate) const APPLICATION_ID: i64 = 0x5156_5352;

/// The migrations, in order: entry `i` takes the schema from version `i` to version `i + 1`.
/// Never edit a released entry; append a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18,
];

/// The schema version this build writes (the number of migrations).
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const V1: &str = r#"
CREATE TABLE sessions (
    id              TEXT PRIMARY KEY NOT NULL,
    parent_id       TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    origin          TEXT NOT NULL,      -- JSON: platform, scope, channel
    agent           TEXT NOT NULL,
    principal       TEXT NOT NULL,      -- JSON: the creator
    catalog_version TEXT NOT NULL,
    prompt_versions TEXT NOT NULL,      -- JSON: section id -> version
    state           TEXT NOT NULL       -- JSON: the runtime's
) STRICT;
CREATE INDEX sessions_by_update ON sessions (updated_at DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE loaded_tools (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool       TEXT NOT NULL,
    seq        INTEGER NOT NULL,        -- larger = more recently used
    PRIMARY KEY (session_id, tool)
) STRICT, WITHOUT ROWID;

CREATE TABLE opened_packages (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package    TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    opened_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, package)
) STRICT, WITHOUT ROWID;

CREATE TABLE active_skills (
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    skill        TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    activated_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, skill)
) STRICT, WITHOUT ROWID;

CREATE TABLE consents (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package    TEXT NOT NULL,
    granted    INTEGER NOT NULL CHECK (granted IN (0, 1)),
    decided_by TEXT NOT NULL,
    decided_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, package)
) STRICT, WITHOUT ROWID;

CREATE TABLE once_approvals (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool)
) STRICT, WITHOUT ROWID;

CREATE TABLE approvals (
    id            TEXT PRIMARY KEY NOT NULL,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    arguments     TEXT NOT NULL,        -- JSON: the exact arguments
    reason        TEXT NOT NULL,
    risk_category TEXT,
    created_at    INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    answered_by   TEXT,
    answered_at   INTEGER,
    note          TEXT
) STRICT;
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_by_session ON approvals (session_id, created_at);

CREATE TABLE audit (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    time            INTEGER NOT NULL,
    kind            TEXT NOT NULL,      -- call, skill_activated, skill_ended, ...
    session_id      TEXT NOT NULL,      -- no foreign key: the log outlives sessions
    call_id         TEXT,
    principal       TEXT NOT NULL,      -- JSON
    origin          TEXT NOT NULL,      -- JSON
    tool            TEXT,
    skill           TEXT,
    argument_digest TEXT,               -- sha256 hex of the canonical arguments, secrets removed
    decisions       TEXT NOT NULL,      -- JSON: [{step, decision, reason}]
    status          TEXT NOT NULL,      -- ok, error, refused, timed_out, invalid, ...
    duration_ms     INTEGER NOT NULL,
    cached          INTEGER NOT NULL CHECK (cached IN (0, 1)),
    detail          TEXT                -- JSON
) STRICT;
CREATE INDEX audit_by_time ON audit (time, id);
CREATE INDEX audit_by_session ON audit (session_id, time, id);
CREATE INDEX audit_by_tool ON audit (tool, time, id) WHERE tool IS NOT NULL;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
"#;

/// Version 2: the audit table without `AUTOINCREMENT`. Records are never deleted (a trigger
/// refuses it), so plain rowids never repeat either, and each append no longer rewrites the
/// `sqlite_sequence` page (one page fewer per commit on the call pipeline's path).
const V2: &str = r#"
DROP TRIGGER audit_no_update;
DROP TRIGGER audit_no_delete;
CREATE TABLE audit_v2 (
    id              INTEGER PRIMARY KEY,
    time            INTEGER NOT NULL,
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
    duration_ms     INTEGER NOT NULL,
    cached          INTEGER NOT NULL CHECK (cached IN (0, 1)),
    detail          TEXT
) STRICT;
INSERT INTO audit_v2 SELECT * FROM audit;
DROP TABLE audit;
ALTER TABLE audit_v2 RENAME TO audit;
CREATE INDEX audit_by_time ON audit (time, id);
CREATE INDEX audit_by_session ON audit (session_id, time, id);
CREATE INDEX audit_by_tool ON audit (tool, time, id) WHERE tool IS NOT NULL;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
"#;

/// Version 3: the operator's runtime-wide switches (control plane, packages switched off), so
/// they outlive a restart and every process on the file sees them.
const V3: &str = r#"
CREATE TABLE operator_state (
    key     TEXT PRIMARY KEY NOT NULL,
    value   TEXT NOT NULL,              -- JSON
    set_by  TEXT NOT NULL,
    set_at  INTEGER NOT NULL
) STRICT;
"#;

/// Version 4: approval cards state the package's permissions and name the process waiting for
/// the answer, and a card whose waiter is gone is `withdrawn`.
const V4: &str = r#"
CREATE TABLE approvals_v4 (
    id            TEXT PRIMARY KEY NOT NULL,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    package       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    arguments     TEXT NOT NULL,        -- JSON: the exact arguments
    reason        TEXT NOT NULL,
    risk_category TEXT,
    created_at    INTEGER NOT NULL,
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'withdrawn')),
    answered_by   TEXT,
    answered_at   INTEGER,
    note          TEXT,
    permissions   TEXT NOT NULL DEFAULT '[]',  -- JSON: the permissions in words
    waiter        TEXT                  -- boot id, pid and start time of the waiting process
) STRICT;
INSERT INTO approvals_v4 (id, session_id, package, tool, arguments, reason, risk_category,
    created_at, status, answered_by, answered_at, note)
    SELECT id, session_id, package, tool, arguments, reason, risk_category,
    created_at, status, answered_by, answered_at, note FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_v4 RENAME TO approvals;
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_by_session ON approvals (session_id, created_at);
"#;

/// Version 5: trimmed results kept for `tool_output` (in the session, so every process of it
/// reads them), and the index that finds calls recorded as started and never ended.
const V5: &str = r#"
CREATE TABLE kept_outputs (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    call_id    TEXT NOT NULL,
    seq        INTEGER NOT NULL,        -- larger = kept later
    text       TEXT NOT NULL,
    PRIMARY KEY (session_id, call_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX audit_by_call ON audit (call_id, kind) WHERE call_id IS NOT NULL;
"#;

/// Version 6: workflow runs (issue 14): pinned definitions, runs, step attempts, waits,
/// events, schedule fires and webhook deliveries. See docs/workflows.md for the order in which
/// the engine commits to them.
const V6: &str = r#"
CREATE TABLE wf_definitions (
    digest     TEXT PRIMARY KEY NOT NULL,   -- sha256 of the canonical body
    workflow   TEXT NOT NULL,               -- pkg.workflow
    body       TEXT NOT NULL,               -- JSON
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE wf_runs (
    id              TEXT PRIMARY KEY NOT NULL,
    workflow        TEXT NOT NULL,
    digest          TEXT NOT NULL REFERENCES wf_definitions(digest),
    idempotency_key TEXT,
    status          TEXT NOT NULL CHECK (status IN
                    ('running', 'waiting', 'in_doubt', 'completed', 'failed', 'cancelled')),
    step            INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    crashes         INTEGER NOT NULL,
    input           TEXT NOT NULL,      -- JSON
    trigger         TEXT NOT NULL,      -- JSON
    principal       TEXT NOT NULL,      -- JSON
    started_by      TEXT NOT NULL,
    attended        INTEGER NOT NULL CHECK (attended IN (0, 1)),
    settings        TEXT NOT NULL,      -- JSON, secrets never
    concurrency_key TEXT,
    output          TEXT,               -- JSON
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    deadline        INTEGER,
    lease_owner     TEXT,               -- the engine running its current attempt
    lease_until     INTEGER             -- until when that engine is taken to be alive
) STRICT;
CREATE UNIQUE INDEX wf_runs_by_key ON wf_runs (workflow, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX wf_runs_by_status ON wf_runs (status, created_at);
CREATE INDEX wf_runs_by_workflow ON wf_runs (workflow, created_at);

CREATE TABLE wf_attempts (
    run_id          TEXT NOT NULL REFERENCES wf_runs(id),
    step            INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    step_id         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('started', 'ok', 'failed', 'skipped',
                    'crashed', 'waiting', 'approved', 'rejected', 'timed_out')),
    output          TEXT,               -- JSON
    error           TEXT,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    PRIMARY KEY (run_id, step, attempt)
) STRICT, WITHOUT ROWID;

CREATE TABLE wf_waits (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES wf_runs(id),
    step        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('approval', 'timer', 'event', 'retry')),
    wake_at     INTEGER,                -- absolute Unix ms
    event       TEXT,
    after_event INTEGER NOT NULL,
    detail      TEXT NOT NULL,          -- JSON
    status      TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'resolved', 'withdrawn')),
    resolution  TEXT,                   -- JSON
    resolved_by TEXT,
    resolved_at INTEGER,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX wf_waits_due ON wf_waits (wake_at) WHERE status = 'pending';
CREATE INDEX wf_waits_by_run ON wf_waits (run_id, id);

CREATE TABLE wf_events (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    source     TEXT NOT NULL,
    payload    TEXT NOT NULL,           -- JSON
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX wf_events_by_name ON wf_events (name, id);

CREATE TABLE wf_schedule_fires (
    workflow   TEXT NOT NULL,
    fire_at    INTEGER NOT NULL,        -- the fire time (Unix ms), its key
    run_id     TEXT NOT NULL REFERENCES wf_runs(id),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (workflow, fire_at)
) STRICT, WITHOUT ROWID;

CREATE TABLE wf_webhook_deliveries (
    hook         TEXT NOT NULL,         -- pkg/name
    delivery_key TEXT NOT NULL,         -- the Idempotency-Key header
    run_id       TEXT NOT NULL REFERENCES wf_runs(id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (hook, delivery_key)
) STRICT, WITHOUT ROWID;
"#;

/// Version 7: the process group running a workflow step's attempt (named as a waiter is:
/// boot id, PID namespace, pid, start time), so a cancel from another process can kill it.
const V7: &str = r#"
ALTER TABLE wf_attempts ADD COLUMN process TEXT;
"#;

/// Version 8: calls in flight. A call's start is one small row here (the audit's columns, no
/// index), written before its tool runs and removed in the transaction that appends the call's
/// audit record, instead of a second audit record with four index entries per call. What a
/// crash leaves here is closed as `interrupted` at the next start. Starts recorded in the
/// audit by version 5 and never ended move here; `audit_by_call` served only them.
const V8: &str = r#"
CREATE TABLE calls_in_flight (
    id              INTEGER PRIMARY KEY,
    time            INTEGER NOT NULL,
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
    duration_ms     INTEGER NOT NULL,
    cached          INTEGER NOT NULL CHECK (cached IN (0, 1)),
    detail          TEXT
) STRICT;
INSERT INTO calls_in_flight (time, kind, session_id, call_id, principal, origin, tool, skill,
    argument_digest, decisions, status, duration_ms, cached, detail)
SELECT time, kind, session_id, call_id, principal, origin, tool, skill, argument_digest,
    decisions, status, duration_ms, cached, detail
FROM audit AS a WHERE kind = 'call_started' AND call_id IS NOT NULL AND NOT EXISTS
    (SELECT 1 FROM audit AS b WHERE b.call_id = a.call_id AND b.kind = 'call');
DROP INDEX audit_by_call;
"#;

/// Version 9: the workflow scheduler's durable positions (issue 14): how far the event
/// fan-out got (`events`) and since when each workflow's schedules are watched
/// (`schedule:<pkg>.<workflow>`), so a fan-out interrupted by a crash goes on where it was and a
/// fire missed while nothing ran follows `catchup`.
const V9: &str = r#"
CREATE TABLE wf_cursors (
    name       TEXT PRIMARY KEY NOT NULL,
    position   INTEGER NOT NULL,        -- an event id, or a time in Unix ms
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
"#;

/// Brings the database to [`SCHEMA_VERSION`] in one `IMMEDIATE` transaction (so two processes
/// opening a fresh file at once migrate it once). A newer version, or a foreign
/// `application_id`, is refused without changing anything.
pub(crate) fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let outcome = migrate_in_transaction(conn, path);
    match outcome {
        Ok(()) => {
            if let Err(error) = conn.execute_batch("COMMIT") {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(error.into());
            }
            Ok(())
        }
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}

fn migrate_in_transaction(conn: &Connection, path: &Path) -> Result<()> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let application_id: i64 = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let foreign = if version == 0 {
        application_id != 0 && application_id != APPLICATION_ID
            || (application_id == 0 && has_tables(conn)?)
    } else {
        application_id != APPLICATION_ID
    };
    if foreign {
        return Err(StoreError::NotQuiver {
            path: path.to_path_buf(),
            found: application_id,
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    if version < 0 {
        return Err(StoreError::Corrupt {
            table: "schema",
            detail: format!("negative user_version {version}"),
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let target = index as i64 + 1;
        conn.execute_batch(sql)
            .and_then(|()| conn.pragma_update(None, "user_version", target))
            .map_err(|source| StoreError::Migration {
                version: target,
                source,
            })?;
    }
    if application_id != APPLICATION_ID {
        conn.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    Ok(())
}

/// Whether a database with no version already holds tables (someone else's file).
fn has_tables(conn: &Connection) -> Result<bool> {
    let count: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
        [],
        |row| row.get(0),
    )?;
    Ok(count > 0)
}

/// Version 10: a session's presence stamp. `presence_changes` counts every change of its loaded
/// tools, opened packages and active skills, bumped by triggers in the transaction of the change
/// (whichever process or method writes it), so a turn re-reads the three sets only when this one
/// integer moved.
const V10: &str = r#"
ALTER TABLE sessions ADD COLUMN presence_changes INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER loaded_tools_insert_presence AFTER INSERT ON loaded_tools BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER loaded_tools_update_presence AFTER UPDATE ON loaded_tools BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER loaded_tools_delete_presence AFTER DELETE ON loaded_tools BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = OLD.session_id;
END;
CREATE TRIGGER opened_packages_insert_presence AFTER INSERT ON opened_packages BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER opened_packages_update_presence AFTER UPDATE ON opened_packages BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER opened_packages_delete_presence AFTER DELETE ON opened_packages BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = OLD.session_id;
END;
CREATE TRIGGER active_skills_insert_presence AFTER INSERT ON active_skills BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER active_skills_update_presence AFTER UPDATE ON active_skills BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = NEW.session_id;
END;
CREATE TRIGGER active_skills_delete_presence AFTER DELETE ON active_skills BEGIN
    UPDATE sessions SET presence_changes = presence_changes + 1 WHERE id = OLD.session_id;
END;
"#;

/// Version 11: the audit log in commit order. Records are listed by id (the order they were
/// committed in, which `before_id` pages by) rather than by their clock time, so
/// `audit_by_time` goes, and the session and tool indexes key on the column alone (SQLite
/// appends the id to every index entry). A call's record writes two index entries instead of
/// three, with shorter keys.
const V11: &str = r#"
DROP INDEX audit_by_time;
DROP INDEX audit_by_session;
DROP INDEX audit_by_tool;
CREATE INDEX audit_by_session ON audit (session_id);
CREATE INDEX audit_by_tool ON audit (tool) WHERE tool IS NOT NULL;
"#;

/// Version 12: the perception cache (issue 22), in the store so every process on the file
/// shares it (`quiver call`, several `quiver serve`s). A row is one result of a `perception`
/// tool with `cache: N`, under the digest of everything it depends on (tool, canonical
/// arguments, principal, origin), fresh until `expires_at`. Rows are ordered by `id` (larger =
/// stored later); the store keeps at most `CACHED_RESULTS`, dropping expired rows first and then
/// the oldest.
const V12: &str = r#"
CREATE TABLE perception_cache (
    id         INTEGER PRIMARY KEY,     -- larger = stored later
    key        TEXT NOT NULL UNIQUE,    -- sha256 hex of tool, arguments, principal and origin
    result     TEXT NOT NULL,           -- JSON: the tool's result
    stored_at  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX perception_cache_by_expiry ON perception_cache (expires_at);
"#;

/// Version 13: an approval card says what it asks (consent or approval), carries the digest of
/// its call's arguments, and when its answer was used: a client that cannot ask retries the
/// call, and the retry finds the answered card and uses it exactly once.
const V13: &str = r#"
ALTER TABLE approvals ADD COLUMN question TEXT NOT NULL DEFAULT 'approval';
ALTER TABLE approvals ADD COLUMN arguments_digest TEXT;
ALTER TABLE approvals ADD COLUMN used_at INTEGER;
CREATE INDEX approvals_by_call ON approvals (session_id, tool, arguments_digest)
    WHERE used_at IS NULL;
"#;

/// Version 14: operator cards, a person's approval given ahead for one exact call (tool and
/// the digest of its canonical arguments, optionally one session), used at most once before it
/// expires; the use records the session and call that took it.
const V14: &str = r#"
CREATE TABLE operator_cards (
    id               TEXT PRIMARY KEY NOT NULL,
    tool             TEXT NOT NULL,
    arguments        TEXT NOT NULL,     -- JSON, as given
    arguments_digest TEXT NOT NULL,     -- sha256 hex of the canonical arguments
    session_id       TEXT,              -- NULL: any session
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER,
    used_session     TEXT,
    used_call        TEXT
) STRICT;
CREATE INDEX operator_cards_by_call ON operator_cards (tool, arguments_digest)
    WHERE used_at IS NULL;
"#;

/// Version 15: an operator card can be revoked before it expires: when, and by whom. A revoked
/// card matches no call.
const V15: &str = r#"
ALTER TABLE operator_cards ADD COLUMN revoked_at INTEGER;
ALTER TABLE operator_cards ADD COLUMN revoked_by TEXT;
"#;

/// Version 16: several instances on one database. A run's fencing epoch, raised by every claim
/// of an attempt, so a write of a holder that lost its lease changes nothing; the registry of
/// the `quiver serve` instances, each heartbeating its row, and reaped once (by one instance)
/// when its heartbeat stops.
const V16: &str = r#"
ALTER TABLE wf_runs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
CREATE INDEX wf_runs_by_lease ON wf_runs (lease_until)
    WHERE status = 'running' AND lease_until IS NOT NULL;
CREATE TABLE instances (
    id           TEXT PRIMARY KEY NOT NULL,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    process      TEXT,              -- its waiter string (quiver_store::waiter), as its calls record it
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,  -- the store's clock
    reaped_at    INTEGER,
    reaped_by    TEXT
) STRICT;
"#;

/// Version 17: the spent one-time nonces of MCP request states, shared by every process on the
/// file, with the result of the call each resumed (`NULL` while it runs), kept until
/// `expires_at` (crate::request_states).
const V17: &str = r#"
CREATE TABLE request_states (
    nonce      TEXT PRIMARY KEY NOT NULL,
    spent_at   INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    result     TEXT               -- the stored result, JSON; NULL while the call runs
) STRICT;
CREATE INDEX request_states_by_expiry ON request_states (expires_at);
"#;

/// Version 18: what an MCP conversation's requests share on every process (crate::turns): its
/// held turns, one JSON document per session under a version for conditional writes, and the
/// questions of a session asked once for all its requests (a package's consent), one row per
/// session and question. Both go with their session.
const V18: &str = r#"
CREATE TABLE held_turns (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turns      TEXT NOT NULL,     -- JSON, the front's document
    version    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE shared_questions (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    key        TEXT NOT NULL,     -- consent:<package>
    asker      TEXT NOT NULL,     -- the id of the request that asks it
    asked_at   INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    answer     TEXT,              -- NULL until answered
    PRIMARY KEY (session_id, key)
) STRICT;
"#;
