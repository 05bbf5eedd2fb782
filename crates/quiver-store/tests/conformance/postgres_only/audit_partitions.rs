//! The PostgreSQL audit log partitioned by month (schema version 6): rows of two months in
//! two partitions, every partition refusing changes, paging across a month boundary, the
//! tables made ahead at open, an insert that no month table takes, and the rows of a database
//! migrated before partitioning moved over with their ids.

use quiver_store::{AuditEntry, AuditKind, AuditQuery, Store};

use super::Schema;

/// 2020-01-31 23:59:00 UTC and 2020-02-01 00:00:00 UTC, in Unix milliseconds.
const JAN_31: i64 = 1_580_515_140_000;
const FEB_1: i64 = 1_580_515_200_000;

/// The audit table's partitions, by name.
fn partitions(schema: &Schema) -> Vec<String> {
    schema.strings(&format!(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = '{}.audit'::regclass ORDER BY 1",
        schema.name
    ))
}

/// The partition holding each audit record, in id order.
fn placed(schema: &Schema) -> Vec<String> {
    schema
        .strings("SELECT tableoid::regclass::text FROM audit ORDER BY id")
        .into_iter()
        .map(|name| name.rsplit('.').next().unwrap_or_default().to_owned())
        .collect()
}

fn entry(time: i64, session: &str) -> AuditEntry {
    AuditEntry {
        time,
        tool: Some("fs.read".to_owned()),
        ..AuditEntry::new(AuditKind::Call, session)
    }
}

/// The UTC month `YYYY_MM` of a Unix time in milliseconds, as PostgreSQL names it.
fn month_name(schema: &Schema, ms: i64) -> String {
    schema.strings(&format!(
        "SELECT to_char(to_timestamp({ms} / 1000.0) AT TIME ZONE 'UTC', 'YYYY_MM')"
    ))[0]
        .clone()
}

#[test]
fn this_month_and_the_next_are_made_at_open() {
    let Some(schema) = Schema::new("audit_ahead") else {
        return;
    };
    let _store = schema.open().unwrap();
    let now = quiver_store::now_ms();
    let this = month_name(&schema, now);
    let next = schema.strings(
        "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + INTERVAL '1 month', \
         'YYYY_MM')",
    )[0]
    .clone();
    assert_eq!(
        partitions(&schema),
        vec![
            format!("audit_{this}"),
            format!("audit_{next}"),
            "audit_default".to_owned()
        ]
    );
}

#[test]
fn records_of_two_months_land_in_two_partitions() {
    let Some(schema) = Schema::new("audit_months") else {
        return;
    };
    let store = schema.open().unwrap();
    store.append_audit(&entry(JAN_31, "s1")).unwrap();
    store.append_audit(&entry(FEB_1, "s1")).unwrap();
    store.append_audit(&entry(FEB_1 + 1, "s1")).unwrap();
    // beyond the calendar PostgreSQL knows: no month table, the default one takes it
    store.append_audit(&entry(i64::MAX, "s1")).unwrap();
    assert_eq!(
        placed(&schema),
        [
            "audit_2020_01",
            "audit_2020_02",
            "audit_2020_02",
            "audit_default"
        ]
    );
    assert!(partitions(&schema).contains(&"audit_2020_01".to_owned()));
    let read = store.query_audit(&AuditQuery::default()).unwrap();
    let times: Vec<i64> = read.iter().map(|r| r.entry.time).collect();
    assert_eq!(times, [i64::MAX, FEB_1 + 1, FEB_1, JAN_31]);
}

#[test]
fn a_month_already_in_the_default_partition_still_takes_inserts() {
    let Some(schema) = Schema::new("audit_default") else {
        return;
    };
    let store = schema.open().unwrap();
    // a row of March 2020 put straight into the default partition: no March table can be
    // made while it is there
    schema
        .sql(&format!(
            "INSERT INTO audit_default (id, time, kind, session_id, principal, origin, \
             decisions, status, duration_ms, cached) VALUES (1000, {}, 'call', 's0', '{{}}', '{{}}', '[]', 'ok', \
             0, false)",
            FEB_1 + 30 * 86_400_000
        ))
        .unwrap();
    store
        .append_audit(&entry(FEB_1 + 31 * 86_400_000, "s1"))
        .unwrap();
    assert_eq!(placed(&schema), ["audit_default", "audit_default"]);
    assert!(!partitions(&schema).contains(&"audit_2020_03".to_owned()));
}

#[test]
fn every_partition_refuses_changes() {
    let Some(schema) = Schema::new("audit_refuse") else {
        return;
    };
    let store = schema.open().unwrap();
    store.append_audit(&entry(JAN_31, "s1")).unwrap();
    store.append_audit(&entry(i64::MAX, "s1")).unwrap();
    store
        .append_audit(&AuditEntry::new(AuditKind::Call, "s1"))
        .unwrap();
    let this = format!("audit_{}", month_name(&schema, quiver_store::now_ms()));
    for table in ["audit_2020_01", "audit_default", this.as_str(), "audit"] {
        for change in [
            format!("UPDATE {table} SET status = 'error'"),
            format!("DELETE FROM {table}"),
            format!("TRUNCATE {table}"),
        ] {
            let refused = schema.sql(&change).unwrap_err();
            assert!(
                refused
                    .as_db_error()
                    .is_some_and(|e| e.message().contains("append-only")),
                "{change}: {refused:?}"
            );
        }
    }
    assert_eq!(store.query_audit(&AuditQuery::default()).unwrap().len(), 3);
}

#[test]
fn paging_across_a_month_boundary_is_complete_and_ordered() {
    let Some(schema) = Schema::new("audit_paging") else {
        return;
    };
    let store = schema.open().unwrap();
    // interleaved: ids do not follow the months, and pages must follow the ids
    let mut written = Vec::new();
    for i in 0..30 {
        let time = if i % 2 == 0 { JAN_31 + i } else { FEB_1 + i };
        written.push(store.append_audit(&entry(time, "s1")).unwrap());
    }
    let mut read = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .query_audit(&AuditQuery {
                session: Some("s1".to_owned()),
                before_id: before,
                limit: Some(7),
                ..AuditQuery::default()
            })
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        read.extend(page.iter().map(|r| r.id));
    }
    written.reverse();
    assert_eq!(read, written);
    let both: Vec<String> = placed(&schema).into_iter().take(2).collect();
    assert_eq!(both, ["audit_2020_01", "audit_2020_02"]);
    // a time window across the boundary
    let window = store
        .query_audit(&AuditQuery {
            since: Some(FEB_1 - 1),
            until: Some(FEB_1 + 4),
            ..AuditQuery::default()
        })
        .unwrap();
    let times: Vec<i64> = window.iter().map(|r| r.entry.time).collect();
    assert_eq!(times, [FEB_1 + 3, FEB_1 + 1]);
}

/// The audit table and its triggers as schema versions 1 to 5 had them (what versions 6 and
/// later made is undone, so the next open runs them again from version 5).
const UNPARTITIONED_AUDIT: &str = "
DROP TABLE request_states;
DROP TABLE held_turns;
DROP TABLE shared_questions;
DROP TABLE audit;
DROP FUNCTION quiver_audit_partitions_ahead(BIGINT);
DROP FUNCTION quiver_audit_partition(BIGINT);
DELETE FROM quiver_migrations WHERE version >= 6;
CREATE TABLE audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, time BIGINT NOT NULL,
    kind TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT, principal TEXT NOT NULL,
    origin TEXT NOT NULL, tool TEXT, skill TEXT, argument_digest TEXT, decisions TEXT NOT NULL,
    status TEXT NOT NULL, duration_ms BIGINT NOT NULL, cached BOOLEAN NOT NULL, detail TEXT
);
CREATE INDEX audit_by_session ON audit (session_id);
CREATE INDEX audit_by_tool ON audit (tool) WHERE tool IS NOT NULL;
CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION quiver_audit_append_only();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION quiver_audit_append_only();
";

#[test]
fn an_unpartitioned_audit_log_moves_over_with_its_ids() {
    let Some(schema) = Schema::new("audit_upgrade") else {
        return;
    };
    drop(schema.open().unwrap());
    schema.sql(UNPARTITIONED_AUDIT).unwrap();
    for (id, time) in [(3, JAN_31), (8, FEB_1), (9, i64::MAX), (12, FEB_1 + 5)] {
        schema
            .sql(&format!(
                "INSERT INTO audit (id, time, kind, session_id, principal, origin, decisions, \
                 status, duration_ms, cached) OVERRIDING SYSTEM VALUE VALUES ({id}, \
                 {time}, 'call', 's1', '{{}}', '{{}}', '[]', 'ok', 0, false)"
            ))
            .unwrap();
    }
    let store = schema.open().unwrap();
    assert_eq!(
        placed(&schema),
        [
            "audit_2020_01",
            "audit_2020_02",
            "audit_default",
            "audit_2020_02"
        ]
    );
    let next = store.append_audit(&entry(FEB_1 + 6, "s1")).unwrap();
    assert_eq!(next, 13, "ids continue after the moved rows");
    let ids: Vec<i64> = store
        .query_audit(&AuditQuery::default())
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, [13, 12, 9, 8, 3]);
    assert!(schema.sql("DELETE FROM audit_2020_01").is_err());
    assert!(schema.sql("TRUNCATE audit_2020_02").is_err());
}
