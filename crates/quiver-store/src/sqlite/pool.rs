//! The connections: one writer thread committing queued writes in groups, and a pool of
//! read-only connections.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Result, StoreError};

/// A queued write: run on the writer connection inside the group's transaction, then told how
/// the commit went.
pub(crate) trait Job: Send {
    /// Runs the write in its own savepoint.
    fn run(&mut self, conn: &Connection);
    /// Answers the caller: the write's result if the group committed, an error otherwise.
    fn finish(self: Box<Self>, commit: Option<&str>);
}

/// The write behind a [`Job`] and the channel its caller waits on.
pub(crate) struct Write<T, F> {
    op: Option<F>,
    result: Option<Result<T>>,
    reply: mpsc::SyncSender<Result<T>>,
}

impl<T, F> Write<T, F> {
    /// A job for `op`, answering on `reply`.
    pub(crate) fn new(op: F, reply: mpsc::SyncSender<Result<T>>) -> Write<T, F> {
        Write {
            op: Some(op),
            result: None,
            reply,
        }
    }
}

impl<T, F> Job for Write<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> Result<T> + Send,
{
    fn run(&mut self, conn: &Connection) {
        if let Some(op) = self.op.take() {
            self.result = Some(in_savepoint(conn, op));
        }
    }

    fn finish(self: Box<Self>, commit: Option<&str>) {
        let result = match (self.result, commit) {
            // The write's own error stands: its savepoint was rolled back either way.
            (Some(Err(error)), _) => Err(error),
            (Some(Ok(value)), None) => Ok(value),
            (_, Some(message)) => Err(StoreError::CommitFailed(message.to_owned())),
            (None, None) => Err(StoreError::Closed),
        };
        // The caller may have gone away; nothing to do then.
        let _ = self.reply.send(result);
    }
}

fn in_savepoint<T>(conn: &Connection, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    conn.prepare_cached("SAVEPOINT write")?.execute([])?;
    let result = op(conn);
    if result.is_err() {
        conn.prepare_cached("ROLLBACK TO write")?.execute([])?;
    }
    conn.prepare_cached("RELEASE write")?.execute([])?;
    result
}

/// Wakes [`wait_approval`](crate::Store::wait_approval) callers after each commit.
#[derive(Default)]
pub(crate) struct Notify {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Notify {
    /// The current commit generation.
    pub(crate) fn generation(&self) -> u64 {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *generation = generation.wrapping_add(1);
        self.changed.notify_all();
    }

    /// Waits until the generation moves past `seen` or `timeout` passes.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) {
        let start = Instant::now();
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *generation == seen {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return;
            }
            generation = self
                .changed
                .wait_timeout(generation, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The writer thread's loop: take the first waiting write, then every write already queued (up
/// to `max_batch`), run them all in one `IMMEDIATE` transaction, commit, then answer each caller.
pub(crate) fn writer_loop(
    conn: Connection,
    jobs: Receiver<Box<dyn Job>>,
    notify: Arc<Notify>,
    max_batch: usize,
) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(max_batch);
    while let Ok(first) = jobs.recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let outcome = run_batch(&conn, &mut batch);
        let failure = outcome.err().map(|error| error.to_string());
        if failure.is_none() {
            notify.bump();
        }
        for job in batch.drain(..) {
            job.finish(failure.as_deref());
        }
    }
}

fn run_batch(conn: &Connection, batch: &mut [Box<dyn Job>]) -> rusqlite::Result<()> {
    if !conn.is_autocommit() {
        // A transaction left open by a failed rollback would fail every later batch.
        conn.execute_batch("ROLLBACK")?;
    }
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    for job in batch.iter_mut() {
        job.run(conn);
    }
    if let Err(error) = conn
        .prepare_cached("COMMIT")
        .and_then(|mut s| s.execute([]))
    {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(error);
    }
    Ok(())
}

/// Sends a write to the writer thread and waits for its answer.
pub(crate) fn submit<T, F>(jobs: Option<&Sender<Box<dyn Job>>>, op: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    let jobs = jobs.ok_or(StoreError::Closed)?;
    let (reply, answer) = mpsc::sync_channel(1);
    jobs.send(Box::new(Write::new(op, reply)))
        .map_err(|_| StoreError::Closed)?;
    answer.recv().map_err(|_| StoreError::Closed)?
}

/// Read-only connections handed out one caller at a time.
pub(crate) struct Readers {
    idle: Mutex<Vec<Connection>>,
    returned: Condvar,
}

impl Readers {
    /// A pool of these connections.
    pub(crate) fn new(conns: Vec<Connection>) -> Readers {
        Readers {
            idle: Mutex::new(conns),
            returned: Condvar::new(),
        }
    }

    /// Runs `read` on an idle connection, waiting for one if all are busy.
    pub(crate) fn with<T>(&self, read: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let lease = self.lease();
        read(lease.conn()?)
    }

    fn lease(&self) -> Lease<'_> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(conn) = idle.pop() {
                return Lease {
                    pool: self,
                    conn: Some(conn),
                };
            }
            idle = self
                .returned
                .wait(idle)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A connection taken from [`Readers`], given back on drop.
struct Lease<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl Lease<'_> {
    fn conn(&self) -> Result<&Connection> {
        self.conn.as_ref().ok_or(StoreError::Closed)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
            self.pool.returned.notify_one();
        }
    }
}
