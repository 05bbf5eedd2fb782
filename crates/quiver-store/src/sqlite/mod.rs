//! [`SqliteStore`]: the [`Store`] on one SQLite file.

mod approvals;
mod instances;
mod operator_cards;
mod ops;
mod pool;
mod request_states;
mod schema;
mod turns;
mod workflow;
mod workflow_ops;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::config::DbConfig;
use serde_json::Value;

use crate::Store;
use crate::digest::argument_digest;
use crate::error::{Result, StoreError};
use crate::types::{
    Approval, ApprovalCard, ApprovalStatus, AuditEntry, AuditQuery, AuditRecord, Consent, Decision,
    NewSession, OnceApproval, OperatorCard, PresenceStamp, Purged, Session, SessionFilter,
    SessionPresence, now_ms,
};

use crate::changes::{Change, ChangeKind, Changes, Heard, Hub};
use crate::notify::Notify;
use ops::SetTable;
use pool::{Readers, Writer};

pub use schema::SCHEMA_VERSION;

/// How hard SQLite syncs a commit to disk (`PRAGMA synchronous`, in WAL mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Every commit is synced before the write returns: it survives a power loss. The default,
    /// and what DESIGN.md §7 asks of writes that matter.
    #[default]
    Full,
    /// Commits survive a crash of the process but the last ones may be lost on a power loss.
    /// For benchmarks and throwaway stores.
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// How a [`SqliteStore`] is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Read-only connections in the pool (at least 1; default 4).
    pub readers: usize,
    /// How long a connection waits for a lock held by another process (default 5 s).
    pub busy_timeout: Duration,
    /// Sync level of commits (default [`Synchronous::Full`]).
    pub synchronous: Synchronous,
    /// At most this many queued writes share one transaction (default 512).
    pub max_batch: usize,
    /// How often [`Store::wait_approval`] re-reads the database, to see answers written by
    /// another process (default 100 ms).
    pub poll_interval: Duration,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            readers: 4,
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
            max_batch: 512,
            poll_interval: Duration::from_millis(100),
        }
    }
}

/// The [`Store`] on one SQLite file, in WAL mode: one writer connection on which callers'
/// writes commit in groups, and a pool of read-only connections. Several processes may open the same file; they
/// wait for each other's locks up to the busy timeout.
pub struct SqliteStore {
    path: PathBuf,
    writer: Writer,
    readers: Readers,
    notify: Arc<Notify>,
    hub: Arc<Hub>,
    poll_interval: Duration,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` with default options, and migrates it to
    /// [`SCHEMA_VERSION`].
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::open_with(path, &StoreOptions::default())
    }

    /// Opens (creating if needed) the store at `path`, creating its folder too, and migrates it
    /// to [`SCHEMA_VERSION`] in one transaction. A file written by a newer Quiver is refused
    /// ([`StoreError::SchemaTooNew`]) and a foreign database is not touched
    /// ([`StoreError::NotQuiver`]).
    pub fn open_with(path: impl AsRef<Path>, options: &StoreOptions) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        create_private(&path)?;
        let writer = connect(&path, options, Role::Writer)?;
        // Migrate before switching to WAL, so a refused or failed open leaves the file as it was.
        schema::migrate(&writer, &path)?;
        tighten(&path);
        enable_wal(&writer, &path, options)?;
        let readers = (0..options.readers.max(1))
            .map(|_| connect(&path, options, Role::Reader))
            .collect::<Result<Vec<_>>>()?;
        let notify = Arc::new(Notify::default());
        let writer = Writer::new(writer, Arc::clone(&notify), options.max_batch);
        Ok(SqliteStore {
            path,
            writer,
            readers: Readers::new(readers),
            notify,
            hub: Arc::new(Hub::default()),
            poll_interval: options.poll_interval,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.writer.submit(op)
    }

    fn read<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.readers.with(op)
    }
}

/// Creates the database's file private before SQLite opens it, wherever it lives: its folder
/// `0700` where missing, the file `0600` (SQLite gives its `-wal`, `-shm` and `-journal` the
/// database's mode).
fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(|source| StoreError::Io {
                path: folder.to_path_buf(),
                source,
            })?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Makes a Quiver database that an older version left readable by others (and its `-wal`,
/// `-shm`, `-journal`) `0600`, where this user may.
fn tighten(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = Path::new(&name);
        if std::fs::metadata(file).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
}

fn connect(path: &Path, options: &StoreOptions, role: Role) -> Result<Connection> {
    let open_error = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(open_error)?;
    let setup = || -> rusqlite::Result<()> {
        conn.busy_timeout(options.busy_timeout)?;
        conn.set_prepared_statement_cache_capacity(64);
        // The query planner stability guarantee: a plan never depends on a bound value, so a
        // cached statement is not prepared again each time its parameters change (without it
        // SQLite re-planned the run-id queries of every workflow step, a tenth of a step's
        // cost). Every query names its constant filters (`status = 'pending'`) literally.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        if role == Role::Reader {
            conn.pragma_update(None, "query_only", true)?;
        }
        // Reads the header: a file that is not a database fails here.
        conn.query_row("PRAGMA user_version", [], |_| Ok(()))
    };
    setup().map_err(open_error)?;
    Ok(conn)
}

/// Puts the writer connection in WAL mode (persistent in the file) with the chosen sync level.
fn enable_wal(conn: &Connection, path: &Path, options: &StoreOptions) -> Result<()> {
    let setup = || -> rusqlite::Result<String> {
        let mode = switch_to_wal(conn, options.busy_timeout)?;
        conn.pragma_update(None, "synchronous", options.synchronous.pragma())?;
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        Ok(mode)
    };
    let mode = setup().map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Invalid(format!(
            "{} cannot use WAL journaling (journal mode {mode})",
            path.display()
        )));
    }
    Ok(())
}

/// `PRAGMA journal_mode = WAL`, retried while another connection holds the file: the switch
/// needs an exclusive lock and SQLite answers `SQLITE_BUSY` at once instead of calling the busy
/// handler, so several processes opening a fresh file together would otherwise fail.
fn switch_to_wal(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<String> {
    let deadline = Instant::now() + busy_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            outcome => return outcome,
        }
    }
}

impl Store for SqliteStore {
    fn create_session(&self, new: &NewSession) -> Result<Session> {
        let new = new.clone();
        self.write(move |c| ops::create_session(c, &new, now_ms()))
    }

    fn session(&self, id: &str) -> Result<Option<Session>> {
        self.read(|c| ops::session(c, id))
    }

    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        self.read(|c| ops::list_sessions(c, filter))
    }

    fn touch_session(&self, id: &str) -> Result<()> {
        let id = id.to_owned();
        self.write(move |c| ops::touch_session(c, &id, now_ms()))
    }

    fn set_session_state(&self, id: &str, state: &Value) -> Result<()> {
        let (id, state) = (id.to_owned(), crate::codec::encode(state));
        self.write(move |c| ops::set_session_state(c, &id, &state, now_ms()))
    }

    fn set_operator_value(&self, key: &str, value: &Value, by: &str) -> Result<()> {
        let (key, value, by) = (key.to_owned(), crate::codec::encode(value), by.to_owned());
        let told = key.clone();
        self.write(move |c| ops::set_operator_value(c, &key, &value, &by, now_ms()))?;
        self.hub.change(ChangeKind::Control, told);
        Ok(())
    }

    fn operator_values(&self) -> Result<std::collections::BTreeMap<String, Value>> {
        self.read(ops::operator_values)
    }

    fn end_session(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |c| ops::end_session(c, &id, now_ms()))
    }

    fn purge_idle_sessions(&self, agent: &str, before: i64, limit: usize) -> Result<Purged> {
        let agent = agent.to_owned();
        self.write(move |c| ops::purge_idle_sessions(c, &agent, before, limit))
    }

    fn delete_session(&self, id: &str) -> Result<Purged> {
        let ids = vec![id.to_owned()];
        self.write(move |c| ops::delete_sessions(c, &ids))
    }

    fn load_tool(&self, session: &str, tool: &str, capacity: usize) -> Result<Vec<String>> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        self.write(move |c| ops::load_tool(c, &session, &tool, capacity))
    }

    fn loaded_tools(&self, session: &str) -> Result<Vec<String>> {
        self.read(|c| ops::loaded_tools(c, session))
    }

    fn touch_tool(&self, session: &str, tool: &str) -> Result<bool> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        self.write(move |c| ops::touch_tool(c, &session, &tool))
    }

    fn unload_tool(&self, session: &str, tool: &str) -> Result<bool> {
        let (session, tool) = (session.to_owned(), tool.to_owned());
        self.write(move |c| ops::unload_tool(c, &session, &tool))
    }

    fn open_package(&self, session: &str, package: &str) -> Result<bool> {
        let (session, package) = (session.to_owned(), package.to_owned());
        self.write(move |c| ops::set_add(c, SetTable::Packages, &session, &package, now_ms()))
    }

    fn close_package(&self, session: &str, package: &str) -> Result<bool> {
        let (session, package) = (session.to_owned(), package.to_owned());
        self.write(move |c| ops::set_remove(c, SetTable::Packages, &session, &package))
    }

    fn opened_packages(&self, session: &str) -> Result<Vec<String>> {
        self.read(|c| ops::set_list(c, SetTable::Packages, session))
    }

    fn activate_skill(&self, session: &str, skill: &str) -> Result<bool> {
        let (session, skill) = (session.to_owned(), skill.to_owned());
        self.write(move |c| ops::set_add(c, SetTable::Skills, &session, &skill, now_ms()))
    }

    fn end_skill(&self, session: &str, skill: &str) -> Result<bool> {
        let (session, skill) = (session.to_owned(), skill.to_owned());
        self.write(move |c| ops::set_remove(c, SetTable::Skills, &session, &skill))
    }

    fn end_all_skills(&self, session: &str) -> Result<Vec<String>> {
        let session = session.to_owned();
        self.write(move |c| ops::set_clear(c, SetTable::Skills, &session))
    }

    fn active_skills(&self, session: &str) -> Result<Vec<String>> {
        self.read(|c| ops::set_list(c, SetTable::Skills, session))
    }

    fn presence_stamp(&self, session: &str) -> Result<Option<PresenceStamp>> {
        self.read(|c| ops::presence_stamp(c, session))
    }

    fn presence(&self, session: &str) -> Result<SessionPresence> {
        self.read(|c| {
            Ok(SessionPresence {
                opened: ops::set_list(c, SetTable::Packages, session)?,
                loaded: ops::loaded_tools(c, session)?,
                active_skills: ops::set_list(c, SetTable::Skills, session)?,
            })
        })
    }

    fn set_consent(
        &self,
        session: &str,
        package: &str,
        granted: bool,
        by: &str,
    ) -> Result<Consent> {
        let (session, package, by) = (session.to_owned(), package.to_owned(), by.to_owned());
        self.write(move |c| ops::set_consent(c, &session, &package, granted, &by, now_ms()))
    }

    fn consent(&self, session: &str, package: &str) -> Result<Option<Consent>> {
        self.read(|c| ops::consent(c, session, package))
    }

    fn consents(&self, session: &str) -> Result<Vec<Consent>> {
        self.read(|c| ops::consents(c, session))
    }

    fn grant_once(&self, session: &str, tool: &str, by: &str) -> Result<OnceApproval> {
        let (session, tool, by) = (session.to_owned(), tool.to_owned(), by.to_owned());
        self.write(move |c| ops::grant_once(c, &session, &tool, &by, now_ms()))
    }

    fn once_approval(&self, session: &str, tool: &str) -> Result<Option<OnceApproval>> {
        self.read(|c| ops::once_approval(c, session, tool))
    }

    fn once_approvals(&self, session: &str) -> Result<Vec<OnceApproval>> {
        self.read(|c| ops::once_approvals(c, session))
    }

    fn keep_output(&self, session: &str, call_id: &str, text: &str) -> Result<()> {
        let (session, call_id, text) = (session.to_owned(), call_id.to_owned(), text.to_owned());
        self.write(move |c| ops::keep_output(c, &session, &call_id, &text))
    }

    fn kept_output(&self, session: &str, call_id: &str) -> Result<Option<String>> {
        self.read(|c| ops::kept_output(c, session, call_id))
    }

    fn cached_result(&self, key: &str, now: i64) -> Result<Option<Value>> {
        self.read(|c| ops::cached_result(c, key, now))
    }

    fn cache_result(&self, key: &str, result: &Value, now: i64, expires_at: i64) -> Result<()> {
        let (key, result) = (key.to_owned(), crate::codec::encode(result));
        self.write(move |c| ops::cache_result(c, &key, &result, now, expires_at))
    }

    fn enqueue_approval(&self, card: &ApprovalCard) -> Result<Approval> {
        let card = card.clone();
        let approval = self.write(move |c| approvals::enqueue_approval(c, &card))?;
        self.hub
            .change(ChangeKind::Approval, approval.card.id.clone());
        Ok(approval)
    }

    fn approval(&self, id: &str) -> Result<Option<Approval>> {
        self.read(|c| approvals::approval(c, id))
    }

    fn pending_approvals(&self, session: Option<&str>) -> Result<Vec<Approval>> {
        self.read(|c| approvals::pending_approvals(c, session))
    }

    fn answer_approval(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        note: Option<&str>,
    ) -> Result<Approval> {
        let (id, by, note) = (id.to_owned(), by.to_owned(), note.map(str::to_owned));
        let approval = self.write(move |c| {
            let status = approvals::decided(decision);
            approvals::resolve_approval(c, &id, status, Some(&by), note.as_deref(), now_ms())
        })?;
        self.hub
            .change(ChangeKind::Approval, approval.card.id.clone());
        Ok(approval)
    }

    fn expire_approval(&self, id: &str) -> Result<Approval> {
        let id = id.to_owned();
        let approval = self.write(move |c| {
            approvals::resolve_approval(c, &id, ApprovalStatus::Expired, None, None, now_ms())
        })?;
        self.hub
            .change(ChangeKind::Approval, approval.card.id.clone());
        Ok(approval)
    }

    fn withdraw_orphaned_approvals(&self) -> Result<Vec<Approval>> {
        let orphaned = self.pending_approvals(None)?.into_iter().any(|a| {
            a.card
                .waiter
                .as_deref()
                .is_some_and(|w| !crate::waiter::alive(w))
        });
        if !orphaned {
            // Listing must not wait for the writer when there is nothing to withdraw.
            return Ok(Vec::new());
        }
        let withdrawn = self.write(move |c| {
            approvals::withdraw_orphaned_approvals(c, &crate::waiter::alive, now_ms())
        })?;
        for approval in &withdrawn {
            self.hub
                .change(ChangeKind::Approval, approval.card.id.clone());
        }
        Ok(withdrawn)
    }

    fn card_for_call(&self, card: &ApprovalCard) -> Result<Option<Approval>> {
        self.read(|c| approvals::card_for_call(c, card))
    }

    fn use_answer(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |c| approvals::use_answer(c, &id, now_ms()))
    }

    fn create_operator_card(&self, card: &OperatorCard) -> Result<OperatorCard> {
        let card = card.clone();
        self.write(move |c| operator_cards::create(c, &card))
    }

    fn operator_cards(&self, now: i64) -> Result<Vec<OperatorCard>> {
        self.read(|c| operator_cards::list(c, now))
    }

    fn use_operator_card(
        &self,
        tool: &str,
        arguments: &Value,
        session: &str,
        call_id: &str,
        now: i64,
    ) -> Result<Option<OperatorCard>> {
        let (tool, digest) = (tool.to_owned(), argument_digest(arguments, &[]));
        let (session, call_id) = (session.to_owned(), call_id.to_owned());
        self.write(move |c| operator_cards::use_card(c, &tool, &digest, &session, &call_id, now))
    }

    fn revoke_operator_card(&self, id: &str, by: &str, now: i64) -> Result<OperatorCard> {
        let (id, by) = (id.to_owned(), by.to_owned());
        self.write(move |c| operator_cards::revoke(c, &id, &by, now))
    }

    fn changes(&self) -> Changes {
        self.hub.subscribe()
    }

    fn announce(&self, change: &Change) -> Result<()> {
        self.hub.publish(Heard::Change(change.clone()));
        Ok(())
    }

    fn wait_approval(&self, id: &str, timeout: Duration) -> Result<Approval> {
        crate::notify::wait_approval(self, &self.notify, self.poll_interval, id, timeout)
    }

    fn append_audit(&self, entry: &AuditEntry) -> Result<i64> {
        let entry = crate::codec::EncodedAudit::new(entry)?;
        let id = self.write(move |c| ops::append_audit(c, &entry))?;
        self.hub.change(ChangeKind::Audit, id.to_string());
        Ok(id)
    }

    fn query_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        self.read(|c| ops::query_audit(c, query))
    }

    fn unfinished_calls(&self) -> Result<Vec<AuditRecord>> {
        self.read(ops::unfinished_calls)
    }

    fn spend_request_state(&self, nonce: &str, ttl_ms: i64) -> Result<crate::Spend> {
        let nonce = nonce.to_owned();
        self.write(move |c| request_states::spend(c, &nonce, ttl_ms, now_ms()))
    }

    fn finish_request_state(&self, nonce: &str, result: &Value) -> Result<bool> {
        let (nonce, result) = (nonce.to_owned(), crate::codec::encode(result));
        self.write(move |c| request_states::finish(c, &nonce, &result))
    }

    fn held_turns(&self, session: &str) -> Result<Option<crate::HeldTurns>> {
        self.read(|c| turns::held_turns(c, session))
    }

    fn put_held_turns(&self, session: &str, expected: Option<i64>, held: &Value) -> Result<bool> {
        let (session, held) = (session.to_owned(), crate::codec::encode(held));
        self.write(move |c| turns::put_held_turns(c, &session, expected, &held, now_ms()))
    }

    fn claim_question(
        &self,
        session: &str,
        key: &str,
        id: &str,
        ttl_ms: i64,
    ) -> Result<crate::Claim> {
        let (session, key, id) = (session.to_owned(), key.to_owned(), id.to_owned());
        self.write(move |c| turns::claim_question(c, &session, &key, &id, ttl_ms, now_ms()))
    }

    fn answer_question(&self, session: &str, key: &str, answer: &str) -> Result<bool> {
        let (session, key, answer) = (session.to_owned(), key.to_owned(), answer.to_owned());
        self.write(move |c| turns::answer_question(c, &session, &key, &answer))
    }

    fn question(&self, session: &str, key: &str) -> Result<Option<crate::SharedQuestion>> {
        self.read(|c| turns::question(c, session, key))
    }

    fn release_question(&self, session: &str, key: &str, id: &str) -> Result<bool> {
        let (session, key, id) = (session.to_owned(), key.to_owned(), id.to_owned());
        self.write(move |c| turns::release_question(c, &session, &key, &id))
    }
}
