//! The backends the suite runs on, each case on a fresh store: a new SQLite file, or a new
//! schema of the PostgreSQL database named by `QUIVER_TEST_POSTGRES` (dropped afterwards).
//! Without that variable the PostgreSQL cases say why and skip, unless
//! `QUIVER_REQUIRE_POSTGRES=1`, when they fail (CI starts a cluster: scripts/pg-cluster.sh).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use quiver_store::{PostgresOptions, PostgresStore, SqliteStore, Store, WorkflowStore};

/// Both traits of one store.
pub trait Both: Store + WorkflowStore {}

impl<T: Store + WorkflowStore> Both for T {}

/// Which backend a case runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A file in a temporary folder.
    Sqlite,
    /// A schema of its own in the test database.
    Postgres,
}

/// A fresh store for one case, and the means to open a second one on the same database (what
/// another process would see).
pub struct Fixture {
    store: Arc<dyn Both>,
    dir: Option<tempfile::TempDir>,
    postgres: Option<(String, String)>,
}

impl Fixture {
    /// The store.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The store, to share with threads.
    pub fn shared(&self) -> Arc<dyn Both> {
        Arc::clone(&self.store)
    }

    /// How many rows `table` holds, read behind the store's back.
    pub fn rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        match (&self.dir, &self.postgres) {
            (Some(dir), _) => rusqlite::Connection::open(dir.path().join("quiver.db"))
                .unwrap()
                .query_row(&sql, [], |r| r.get(0))
                .unwrap(),
            (_, Some((url, schema))) => on_postgres(url, |client| async move {
                client
                    .query_one(&format!("SELECT count(*) FROM {schema}.{table}"), &[])
                    .await
                    .unwrap()
                    .get(0)
            }),
            _ => unreachable!("a fixture has a file or a schema"),
        }
    }

    /// Which backend the store is on.
    pub fn backend(&self) -> Backend {
        if self.postgres.is_some() {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }

    /// Runs `sql` (with `{schema}` replaced by the fixture's schema) on a raw connection of the
    /// PostgreSQL database and returns how many rows it returned; `None` on SQLite.
    pub fn postgres_rows(&self, sql: &str) -> Option<usize> {
        let (url, schema) = self.postgres.as_ref()?;
        let sql = sql.replace("{schema}", schema);
        Some(on_postgres(url, |client| async move {
            client.query(&sql, &[]).await.unwrap().len()
        }))
    }

    /// Another store on the same database, as a second process opens it.
    pub fn reopen(&self) -> Arc<dyn Both> {
        match (&self.dir, &self.postgres) {
            (Some(dir), _) => Arc::new(SqliteStore::open(dir.path().join("quiver.db")).unwrap()),
            (_, Some((url, schema))) => Arc::new(postgres(url, schema)),
            _ => unreachable!("a fixture has a file or a schema"),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.postgres {
            drop_schema(url, schema);
        }
    }
}

fn postgres(url: &str, schema: &str) -> PostgresStore {
    let options = PostgresOptions {
        pool_size: 8,
        schema: Some(schema.to_owned()),
        ..PostgresOptions::default()
    };
    PostgresStore::open_with(url, &options).unwrap()
}

/// Runs `work` with a raw client of the test database.
fn on_postgres<T, F>(url: &str, work: impl FnOnce(tokio_postgres::Client) -> F) -> T
where
    F: std::future::Future<Output = T>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        work(client).await
    })
}

fn drop_schema(url: &str, schema: &str) {
    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
    on_postgres(url, |client| async move {
        let _ = client.batch_execute(&sql).await;
    });
}

/// The test database's URL, or why the PostgreSQL cases skip (`None`); panics when
/// `QUIVER_REQUIRE_POSTGRES=1` and there is none.
pub fn postgres_url() -> Option<String> {
    match std::env::var("QUIVER_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("QUIVER_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "QUIVER_REQUIRE_POSTGRES=1 but QUIVER_TEST_POSTGRES is not set \
                 (start a cluster with scripts/pg-cluster.sh start DIR)"
            );
            eprintln!(
                "skipped: QUIVER_TEST_POSTGRES is not set (a PostgreSQL URL; \
                 scripts/pg-cluster.sh start DIR prints one)"
            );
            None
        }
    }
}

/// A fresh store on `backend`; `None` when that backend is not available here.
pub fn fixture(backend: Backend) -> Option<Fixture> {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(dir.path().join("quiver.db")).unwrap();
            Some(Fixture {
                store: Arc::new(store),
                dir: Some(dir),
                postgres: None,
            })
        }
        Backend::Postgres => {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let url = postgres_url()?;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            let schema = format!(
                "t_{}_{}_{nanos}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let store = postgres(&url, &schema);
            Some(Fixture {
                store: Arc::new(store),
                dir: None,
                postgres: Some((url, schema)),
            })
        }
    }
}

/// Runs one case on a fresh store of `backend` (or says why it skips).
pub fn run(backend: Backend, case: fn(&Fixture)) {
    if let Some(fixture) = fixture(backend) {
        case(&fixture);
    }
}
