//! The connections: one writer connection on which queued writes commit in groups, and a pool
//! of read-only connections.
//!
//! Writes commit on the callers' own threads (the scheme of LevelDB's writer queue): a caller
//! queues its write; if no caller is leading, it leads: it takes every queued write, runs them
//! in one transaction, commits, answers each caller, then hands the lead to the oldest write
//! still queued (or stops leading when none is). An idle store thus commits a write with no
//! thread hand-off, and a busy one shares each commit (and its sync) among every write waiting
//! for it, waking each caller once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rusqlite::Connection;

use crate::error::{Result, StoreError};
use crate::notify::Notify;

/// A queued write: run on the writer connection inside the group's transaction, then told how
/// the commit went.
trait Job: Send {
    /// Runs the write in its own savepoint.
    fn run(&mut self, conn: &Connection);
    /// Answers the caller: the write's result if the group committed, an error otherwise.
    fn finish(self: Box<Self>, commit: Option<&str>);
    /// Tells the caller, still waiting, that it now leads.
    fn lead(&self);
}

/// Where a write's caller waits.
enum Slot<T> {
    /// Queued.
    Waiting,
    /// The previous leader handed over: the caller commits the queue now.
    Lead,
    /// Committed (or failed).
    Done(Result<T>),
}

/// A caller's slot and the signal it waits on.
type Reply<T> = Arc<(Mutex<Slot<T>>, Condvar)>;

fn set<T>(reply: &Reply<T>, slot: Slot<T>) {
    *reply.0.lock().unwrap_or_else(PoisonError::into_inner) = slot;
    reply.1.notify_one();
}

/// The write behind a [`Job`] and the slot its caller reads.
struct Write<T, F> {
    op: Option<F>,
    result: Option<Result<T>>,
    reply: Reply<T>,
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
        set(&self.reply, Slot::Done(result));
    }

    fn lead(&self) {
        set(&self.reply, Slot::Lead);
    }
}

/// The queued writes and whether a caller is committing them.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Box<dyn Job>>,
    leading: bool,
}

/// The writer connection and the writes waiting for it.
pub(crate) struct Writer {
    conn: Mutex<Connection>,
    queue: Mutex<Queue>,
    notify: Arc<Notify>,
    max_batch: usize,
}

impl Writer {
    /// A writer on `conn`, committing at most `max_batch` writes per transaction and bumping
    /// `notify` after each commit.
    pub(crate) fn new(conn: Connection, notify: Arc<Notify>, max_batch: usize) -> Writer {
        Writer {
            conn: Mutex::new(conn),
            queue: Mutex::new(Queue::default()),
            notify,
            max_batch: max_batch.max(1),
        }
    }

    /// Runs `op` in a committed transaction, possibly together with other callers' writes, and
    /// returns once its commit is durable (or failed).
    pub(crate) fn submit<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let reply: Reply<T> = Arc::new((Mutex::new(Slot::Waiting), Condvar::new()));
        let job = Box::new(Write {
            op: Some(op),
            result: None,
            reply: Arc::clone(&reply),
        });
        let lead_now = {
            let mut queue = self.lock_queue();
            queue.jobs.push_back(job);
            !std::mem::replace(&mut queue.leading, true)
        };
        if !lead_now {
            let mut slot = reply.0.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match std::mem::replace(&mut *slot, Slot::Waiting) {
                    Slot::Done(answer) => return answer,
                    Slot::Lead => break,
                    Slot::Waiting => {
                        slot = reply.1.wait(slot).unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
        }
        loop {
            self.commit_batch();
            let answer = match std::mem::replace(
                &mut *reply.0.lock().unwrap_or_else(PoisonError::into_inner),
                Slot::Waiting,
            ) {
                Slot::Done(answer) => answer,
                // Our write was beyond this batch: lead the next one too.
                Slot::Waiting | Slot::Lead => continue,
            };
            let mut queue = self.lock_queue();
            match queue.jobs.front() {
                Some(next) => next.lead(),
                None => queue.leading = false,
            }
            return answer;
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits the oldest queued writes (up to `max_batch`) in one transaction and answers
    /// their callers.
    fn commit_batch(&self) {
        let mut batch: Vec<Box<dyn Job>> = {
            let mut queue = self.lock_queue();
            let n = queue.jobs.len().min(self.max_batch);
            queue.jobs.drain(..n).collect()
        };
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let outcome = run_batch(&conn, &mut batch);
        drop(conn);
        let failure = outcome.err().map(|error| error.to_string());
        if failure.is_none() {
            self.notify.bump();
        }
        for job in batch {
            job.finish(failure.as_deref());
        }
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
