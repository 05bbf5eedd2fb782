//! What only PostgreSQL shows: the migration runner (once, recorded, a newer schema refused),
//! the audit table refusing changes behind the store's back, and the synchronous store called
//! from inside tokio runtimes of every kind without a panic or a deadlock; the audit log's
//! monthly partitions are in [`audit_partitions`]. Each case on a schema of its own
//! ([`Schema`]).

mod audit_partitions;

use std::sync::Arc;
use std::time::Duration;

use quiver_store::{
    AuditEntry, AuditKind, AuditQuery, NewSession, PG_SCHEMA_VERSION, PostgresOptions,
    PostgresStore, Store, StoreError,
};

use crate::backend::postgres_url;

/// A fresh schema of the test database, dropped afterwards, and a raw client on it.
struct Schema {
    url: String,
    name: String,
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Schema {
    fn new(tag: &str) -> Option<Schema> {
        let url = postgres_url()?;
        let name = format!("p_{tag}_{}", std::process::id());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}; SET search_path = {name}"
                ))
                .await
                .unwrap();
            client
        });
        Some(Schema {
            url,
            name,
            runtime,
            client,
        })
    }

    fn open(&self) -> Result<PostgresStore, StoreError> {
        let options = PostgresOptions {
            pool_size: 4,
            schema: Some(self.name.clone()),
            ..PostgresOptions::default()
        };
        PostgresStore::open_with(&self.url, &options)
    }

    fn sql(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.runtime.block_on(self.client.batch_execute(sql))
    }

    /// The first column of each row, as text.
    fn strings(&self, sql: &str) -> Vec<String> {
        self.runtime
            .block_on(self.client.query(sql, &[]))
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    fn count(&self, sql: &str) -> i64 {
        self.runtime
            .block_on(self.client.query_one(sql, &[]))
            .unwrap()
            .get(0)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = self.runtime.block_on(
            self.client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name)),
        );
    }
}

#[test]
fn migrations_run_once_each_recorded_and_a_newer_schema_is_refused() {
    let Some(schema) = Schema::new("migrate") else {
        return;
    };
    // Eight instances starting together on a fresh database.
    let opened: Vec<_> = (0..8)
        .map(|_| {
            let (url, name) = (schema.url.clone(), schema.name.clone());
            std::thread::spawn(move || {
                let options = PostgresOptions {
                    pool_size: 2,
                    schema: Some(name),
                    ..PostgresOptions::default()
                };
                PostgresStore::open_with(&url, &options).map(drop)
            })
        })
        .collect();
    for handle in opened {
        handle.join().unwrap().unwrap();
    }
    assert_eq!(
        schema.count("SELECT count(*) FROM quiver_migrations"),
        PG_SCHEMA_VERSION
    );
    assert_eq!(
        schema.count("SELECT max(version) FROM quiver_migrations"),
        PG_SCHEMA_VERSION
    );
    // A database a newer Quiver migrated is refused, and left as it was.
    schema
        .sql("INSERT INTO quiver_migrations (version, name) VALUES (999, 'from the future')")
        .unwrap();
    assert!(matches!(
        schema.open(),
        Err(StoreError::SchemaTooNew { found: 999, known }) if known == PG_SCHEMA_VERSION
    ));
    assert_eq!(
        schema.count("SELECT count(*) FROM quiver_migrations"),
        PG_SCHEMA_VERSION + 1
    );
}

#[test]
fn audit_records_cannot_be_changed_or_deleted_behind_the_store() {
    let Some(schema) = Schema::new("audit") else {
        return;
    };
    let store = schema.open().unwrap();
    store
        .append_audit(&AuditEntry::new(AuditKind::Call, "s1"))
        .unwrap();
    for change in [
        "UPDATE audit SET status = 'ok'",
        "DELETE FROM audit",
        "TRUNCATE audit",
    ] {
        let refused = schema.sql(change).unwrap_err();
        assert!(
            refused
                .as_db_error()
                .is_some_and(|e| e.message().contains("append-only")),
            "{change}: {refused:?}"
        );
    }
    assert_eq!(store.query_audit(&AuditQuery::default()).unwrap().len(), 1);
}

/// The store is synchronous over an async driver: called from a plain thread, a tokio
/// worker of a multi-thread runtime, a current-thread runtime (where `block_on` or
/// `block_in_place` would panic) and many tasks at once, it answers and never hangs.
#[test]
fn the_store_answers_from_inside_any_tokio_runtime() {
    let Some(schema) = Schema::new("tokio") else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(schema.open().unwrap());
    store
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let from_current = Arc::clone(&store);
    current.block_on(async move {
        from_current.load_tool("s1", "a.t", 3).unwrap();
    });
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let store = Arc::clone(&store);
            multi.spawn(async move {
                store.load_tool("s1", &format!("t{i}.x"), 3).unwrap();
                store.loaded_tools("s1").unwrap().len()
            })
        })
        .collect();
    let lens = multi.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            let mut lens = Vec::new();
            for task in tasks {
                lens.push(task.await.unwrap());
            }
            lens
        })
        .await
        .expect("the store hung inside a runtime")
    });
    assert!(lens.iter().all(|n| *n <= 3), "{lens:?}");
    // Dropped inside a runtime, the store shuts its own down without a panic.
    let last = Arc::clone(&store);
    drop(store);
    multi.block_on(async move { drop(last) });
}

/// An answer given through one store wakes a wait on another at once, by `NOTIFY`: the
/// waiting store polls only every 10 s, so each wake-up well under that came by notification.
/// Prints the wake-ups' p50 and p99 (the issue's cross-instance approval figure).
#[test]
#[allow(clippy::print_stderr)]
fn an_answer_from_another_store_wakes_a_wait_by_notification() {
    let Some(schema) = Schema::new("notify") else {
        return;
    };
    let answering = schema.open().unwrap();
    let waiting = PostgresStore::open_with(
        &schema.url,
        &PostgresOptions {
            pool_size: 2,
            schema: Some(schema.name.clone()),
            poll_interval: Duration::from_secs(10),
            ..PostgresOptions::default()
        },
    )
    .unwrap();
    answering
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    let waiting = Arc::new(waiting);
    let mut wakeups = Vec::new();
    for round in 0..30 {
        let id = format!("a{round}");
        let card = quiver_store::ApprovalCard {
            id: id.clone(),
            session: "s1".into(),
            package: "p".into(),
            tool: "p.t".into(),
            arguments: serde_json::json!({}),
            reason: "r".into(),
            risk_category: None,
            created_at: round,
            permissions: Vec::new(),
            waiter: None,
            question: Default::default(),
        };
        answering.enqueue_approval(&card).unwrap();
        let waiter = Arc::clone(&waiting);
        let wait = std::thread::spawn(move || {
            let seen = waiter.wait_approval(&id, Duration::from_secs(20)).unwrap();
            (seen.status, std::time::Instant::now())
        });
        std::thread::sleep(Duration::from_millis(30));
        let answered = std::time::Instant::now();
        answering
            .answer_approval(
                &format!("a{round}"),
                quiver_store::Decision::Approve,
                "u",
                None,
            )
            .unwrap();
        let (status, woke) = wait.join().unwrap();
        assert_eq!(status, quiver_store::ApprovalStatus::Approved);
        wakeups.push(woke.saturating_duration_since(answered));
    }
    wakeups.sort_unstable();
    let (p50, p99) = (wakeups[wakeups.len() / 2], wakeups[wakeups.len() - 1]);
    eprintln!("cross-store approval wake-up: p50 {p50:.2?}, p99 {p99:.2?} (30 rounds)");
    assert!(p99 < Duration::from_secs(2), "{wakeups:?}");
}

/// A cluster of this test's own (scripts/pg-cluster.sh), stopped and removed on drop.
struct Cluster {
    dir: tempfile::TempDir,
    url: String,
}

impl Cluster {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-cluster.sh")
    }

    fn run(command: &str, dir: &std::path::Path) -> String {
        let out = std::process::Command::new(Cluster::script())
            .args([command, dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg-cluster.sh {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("quiver-pg-restart")
            .tempdir_in("/tmp")
            .unwrap();
        let url = Cluster::run("start", dir.path());
        Cluster { dir, url }
    }

    fn restart(&self) {
        Cluster::run("restart", self.dir.path());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(Cluster::script())
            .args(["stop", self.dir.path().to_str().unwrap_or_default()])
            .output();
    }
}

/// The server restarts under a running store (issue 26's fault list): the pooled connections
/// it closed are replaced, the next calls answer, and a wait started before the restart
/// still sees an answer given after it.
#[test]
fn a_restarted_server_is_reconnected() {
    if postgres_url().is_none() {
        return;
    }
    let cluster = Cluster::start();
    let store = Arc::new(PostgresStore::open(&cluster.url).unwrap());
    store
        .create_session(&NewSession::new("s1", "chat"))
        .unwrap();
    store.load_tool("s1", "a.t", 3).unwrap();
    let card = quiver_store::ApprovalCard {
        id: "a1".into(),
        session: "s1".into(),
        package: "p".into(),
        tool: "p.t".into(),
        arguments: serde_json::json!({}),
        reason: "r".into(),
        risk_category: None,
        created_at: 1,
        permissions: Vec::new(),
        waiter: None,
        question: Default::default(),
    };
    store.enqueue_approval(&card).unwrap();
    let waiter = Arc::clone(&store);
    let wait = std::thread::spawn(move || waiter.wait_approval("a1", Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(200));
    cluster.restart();
    // A connection the restart closed may fail one call; the next ones get new connections.
    let mut loaded = Err(StoreError::Closed);
    for _ in 0..5 {
        loaded = store.load_tool("s1", "b.t", 3);
        if loaded.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    loaded.unwrap();
    assert_eq!(store.loaded_tools("s1").unwrap(), ["b.t", "a.t"]);
    // Another process (a second store) answers; the wait from before the restart sees it.
    let other = PostgresStore::open(&cluster.url).unwrap();
    other
        .answer_approval("a1", quiver_store::Decision::Deny, "u", None)
        .unwrap();
    let seen = wait.join().unwrap().unwrap();
    assert_eq!(seen.status, quiver_store::ApprovalStatus::Denied);
}
