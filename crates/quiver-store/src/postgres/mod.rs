//! [`PostgresStore`]: the [`Store`](crate::Store) and [`WorkflowStore`](crate::WorkflowStore)
//! on a PostgreSQL database, which several Quiver processes (on several machines) share.
//!
//! # Calling async code from a synchronous trait
//!
//! The store's traits are synchronous: the runtime calls them from blocking threads
//! (`spawn_blocking`, its own threads) and, here and there, straight from a tokio task. The
//! store therefore owns a **runtime of its own** (two worker threads named `quiver-pg`), on
//! which the connection pool, the connections' driver tasks and every query run. A method
//! spawns its query onto that runtime and waits for the answer on a plain
//! `std::sync::mpsc` channel. This can never deadlock a tokio worker:
//!
//! - the store's worker threads only ever run the store's own futures, which never block: no
//!   caller's code runs there, so a caller that blocks cannot hold up the query it waits for;
//! - the waiting caller blocks only its own thread (as the SQLite store does on a commit), and
//!   needs nothing from its own runtime to be woken;
//! - no `block_on` or `block_in_place` is involved, so nothing panics whether the caller is a
//!   plain thread, a blocking-pool thread or a worker of any runtime (current-thread included).
//!
//! Dropping the store shuts its runtime down in the background, which is allowed from
//! anywhere, async contexts included.
//!
//! # Consistency
//!
//! Every write is one transaction, committed before the method returns (PostgreSQL's default
//! `synchronous_commit = on` makes the commit durable), and retried from the start on a
//! serialization failure or a deadlock. Session mutations lock the session's row first
//! (`SELECT ... FOR UPDATE`), so two processes loading tools into one session take turns and
//! the loaded-tool LRU never passes its capacity. Approvals and answers are resolved by a
//! conditional `UPDATE ... WHERE status = 'pending'`: of two answers exactly one wins. The
//! audit table, partitioned by month, refuses `UPDATE`, `DELETE` and `TRUNCATE` by trigger on
//! every partition.

mod approvals;
mod audit;
mod instances;
mod listen;
mod operator_cards;
mod ops;
mod request_states;
mod schema;
mod store;
mod turns;
mod workflow;
mod workflow_ops;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use crate::changes::Hub;
use crate::error::{Result, StoreError};
use crate::notify::Notify;

pub use schema::PG_SCHEMA_VERSION;

/// How a [`PostgresStore`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Connections in the pool (at least 1; default 16).
    pub pool_size: usize,
    /// The schema the store's tables live in, created if missing (default: the connection's
    /// `search_path`, normally `public`). Several Quiver deployments (or tests) can share one
    /// database, each in its own schema.
    pub schema: Option<String>,
    /// How long a caller waits for a free pooled connection or a new one (default 30 s).
    pub connect_timeout: Duration,
    /// How often [`Store::wait_approval`](crate::Store::wait_approval) re-reads the database,
    /// to see answers written by another process (default 100 ms).
    pub poll_interval: Duration,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions {
            pool_size: 16,
            schema: None,
            connect_timeout: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
        }
    }
}

/// The [`Store`](crate::Store) and [`WorkflowStore`](crate::WorkflowStore) on PostgreSQL:
/// a pool of connections driven by a runtime of the store's own (see the module's doc).
pub struct PostgresStore {
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Pool,
    notify: Arc<Notify>,
    hub: Arc<Hub>,
    poll_interval: Duration,
    target: String,
    channel: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Makes this month's and the next month's audit tables hourly, for as long as the store is
/// open (its runtime ends the task); a failure is logged and tried again the next hour.
async fn audit_months_ahead(pool: Pool) {
    let mut hourly = tokio::time::interval(Duration::from_secs(3600));
    hourly.tick().await;
    loop {
        hourly.tick().await;
        let made = match pool.get().await {
            Ok(client) => audit::partitions_ahead(&client).await,
            Err(error) => Err(pool_error(error)),
        };
        if let Err(error) = made {
            tracing::warn!(%error, "could not make the audit tables of this month and the next");
        }
    }
}

/// Whether a URL names a PostgreSQL database (`postgres://`, `postgresql://`).
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/db`, or any libpq-style
    /// connection string) with default options, and migrates it to [`PG_SCHEMA_VERSION`].
    pub fn open(url: &str) -> Result<PostgresStore> {
        PostgresStore::open_with(url, &PostgresOptions::default())
    }

    /// Connects with `options`, creates the schema if one is named, and migrates it. A database
    /// migrated by a newer Quiver is refused ([`StoreError::SchemaTooNew`]).
    pub fn open_with(url: &str, options: &PostgresOptions) -> Result<PostgresStore> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|error| StoreError::Connect(format!("bad connection string: {error}")))?;
        if config.get_application_name().is_none() {
            config.application_name("quiver");
        }
        if let Some(schema) = &options.schema {
            valid_schema(schema)?;
            config.options(format!("-c search_path={schema}"));
        }
        let target = describe(&config);
        let channel = listen::channel(options.schema.as_deref());
        let mut listen_config = config.clone();
        listen_config.application_name(listen::APPLICATION);
        let listener = (listen_config, channel.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("quiver-pg")
            .enable_all()
            .build()
            .map_err(|error| StoreError::Connect(format!("cannot start its runtime: {error}")))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(pool_error)?;
        let store = PostgresStore {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool,
            notify: Arc::new(Notify::default()),
            hub: Arc::new(Hub::default()),
            poll_interval: options.poll_interval,
            target,
            channel,
        };
        let (pool, schema) = (store.pool.clone(), options.schema.clone());
        store.block(async move {
            let mut client = pool.get().await.map_err(pool_error)?;
            if let Some(schema) = schema {
                client
                    .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                    .await
                    .or_else(|error| {
                        // Two instances creating it at once: the loser's error is harmless.
                        if lost_create_race(&error) {
                            Ok(())
                        } else {
                            Err(error)
                        }
                    })?;
            }
            schema::migrate(&mut client).await?;
            audit::partitions_ahead(&client).await
        })?;
        let (config, channel) = listener;
        let listeners = listen::Listeners {
            hub: Arc::clone(&store.hub),
            waiters: Arc::clone(&store.notify),
        };
        store
            .handle
            .spawn(listen::listen(config, channel, listeners));
        store.handle.spawn(audit_months_ahead(store.pool.clone()));
        Ok(store)
    }

    /// Where the store is (host, port, database, schema; never a password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Runs `future` on the store's runtime and waits for its result on this thread (see the
    /// module's doc for why this cannot deadlock).
    fn block<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = sender.send(future.await);
        });
        receiver.recv().map_err(|_| StoreError::Closed)?
    }
}

/// A schema name the store will put in `search_path` and `CREATE SCHEMA`: lowercase letters,
/// digits and `_`, not starting with a digit.
fn valid_schema(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "schema name `{name}`: use lowercase letters, digits and `_`"
        )))
    }
}

fn describe(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("");
    format!("postgres {host}:{port}/{db}")
}

/// Whether a `CREATE ... IF NOT EXISTS` failed only because another session created the same
/// object at the same moment (PostgreSQL checks "if not exists" before it inserts into its
/// catalogs, so the loser of the race gets a duplicate error instead).
fn lost_create_race(error: &tokio_postgres::Error) -> bool {
    matches!(
        error.code(),
        Some(
            &SqlState::UNIQUE_VIOLATION
                | &SqlState::DUPLICATE_OBJECT
                | &SqlState::DUPLICATE_TABLE
                | &SqlState::DUPLICATE_SCHEMA
        )
    )
}

/// A pool's error with its causes (a refused connection says why: the pool's own message
/// only says that it could not connect).
pub(crate) fn pool_error<E: std::error::Error>(error: E) -> StoreError {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let text = inner.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = inner.source();
    }
    StoreError::Connect(message)
}

/// Whether a transaction failed only because it raced another (a serialization failure or a
/// deadlock), so running it again from the start is right.
fn retryable(error: &StoreError) -> bool {
    match error {
        StoreError::Postgres(error) => matches!(
            error.code(),
            Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
        ),
        _ => false,
    }
}

/// Whether the server could not be reached or dropped the connection (a restart, a failover):
/// a read, or a write that had not asked to commit yet, is safe to run again on a new
/// connection. A connection lost while committing is never retried: the commit may have
/// happened.
fn transient(error: &StoreError) -> bool {
    match error {
        StoreError::Connect(_) => true,
        StoreError::Postgres(error) => {
            error.is_closed()
                || matches!(
                    error.code(),
                    Some(
                        &SqlState::ADMIN_SHUTDOWN
                            | &SqlState::CANNOT_CONNECT_NOW
                            | &SqlState::CRASH_SHUTDOWN
                    )
                )
        }
        _ => false,
    }
}

/// How many times an operation that raced another transaction, or lost its connection
/// before committing, is run again before its error is returned.
const RETRIES: u32 = 8;

/// The pause before running again an operation that lost its connection (growing with each
/// try: about 3.6 s in all, what a server restart takes).
fn backoff(tries: u32) -> Duration {
    Duration::from_millis(100 * u64::from(tries))
}

/// Runs the write `$attempt` (a future, which sets `$committing` once what it sent may have
/// committed) on the store's runtime until it succeeds; run again from the start when it
/// raced another transaction, or lost its connection before `$committing`. Waiters are told
/// of a success.
macro_rules! retried {
    ($store:expr, |$committing:ident| $attempt:expr) => {{
        let notify = std::sync::Arc::clone(&$store.notify);
        $store.block(async move {
            let mut tries = 0;
            loop {
                let mut $committing = false;
                let outcome: $crate::error::Result<_> = $attempt.await;
                match outcome {
                    Ok(value) => {
                        notify.bump();
                        return Ok(value);
                    }
                    Err(error)
                        if tries < $crate::postgres::RETRIES
                            && ($crate::postgres::retryable(&error)
                                || (!$committing && $crate::postgres::transient(&error))) =>
                    {
                        tries += 1;
                        tracing::debug!(%error, tries, "a store write is run again");
                        if $crate::postgres::transient(&error) {
                            tokio::time::sleep($crate::postgres::backoff(tries)).await;
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
        })
    }};
}

/// Runs `$body` (an expression that may `.await` and uses the transaction `$tx`) in a
/// transaction on a pooled connection and commits it; run again from the start when it raced
/// another transaction or lost its connection before committing ([`retried!`]). Evaluates to
/// the body's `Result`, on the caller's thread.
macro_rules! write {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let pool = $store.pool.clone();
        $crate::postgres::retried!($store, |committing| async {
            let mut client = pool.get().await.map_err($crate::postgres::pool_error)?;
            let $tx = client.transaction().await?;
            let outcome: $crate::error::Result<_> = $body;
            match outcome {
                Ok(value) => {
                    committing = true;
                    $tx.commit().await?;
                    Ok(value)
                }
                Err(error) => {
                    let _ = $tx.rollback().await;
                    Err(error)
                }
            }
        })
    }};
}

/// Runs `$body` (an expression that may `.await` and uses the pooled connection `$c`) on a
/// pooled connection, outside any explicit transaction; run again on a new connection when
/// the server could not be reached.
macro_rules! read {
    ($store:expr, |$c:ident| $body:expr) => {{
        let pool = $store.pool.clone();
        $store.block(async move {
            let mut tries = 0;
            loop {
                let outcome: $crate::error::Result<_> = async {
                    let $c = pool.get().await.map_err($crate::postgres::pool_error)?;
                    $body
                }
                .await;
                match outcome {
                    Err(error)
                        if tries < $crate::postgres::RETRIES
                            && $crate::postgres::transient(&error) =>
                    {
                        tries += 1;
                        tracing::debug!(%error, tries, "a store read is run again");
                        tokio::time::sleep($crate::postgres::backoff(tries)).await;
                    }
                    outcome => return outcome,
                }
            }
        })
    }};
}

/// Runs `$body` (an expression that may `.await` and uses the transaction `$tx`) in a
/// read-only `REPEATABLE READ` transaction: every query of the body sees one snapshot.
macro_rules! snapshot {
    ($store:expr, |$tx:ident| $body:expr) => {{
        let pool = $store.pool.clone();
        $store.block(async move {
            let mut client = pool.get().await.map_err($crate::postgres::pool_error)?;
            let $tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let outcome: $crate::error::Result<_> = $body;
            let _ = $tx.rollback().await;
            outcome
        })
    }};
}

pub(crate) use {read, retried, snapshot, write};
