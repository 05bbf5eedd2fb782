//! Quiver's state store: sessions, loaded tools, opened packages, active skills, consents,
//! approvals and the audit log, behind the object-safe [`Store`] trait, with [`SqliteStore`] as
//! the embedded implementation and [`PostgresStore`] for several Quiver instances sharing one
//! PostgreSQL database. Workflow runs are kept behind a trait of their own, [`WorkflowStore`]
//! (module [`workflow`]), which both implement on the same database. One conformance suite
//! (`tests/conformance`) runs every case on both.
//!
//! ```no_run
//! use quiver_store::{NewSession, SqliteStore, Store, DEFAULT_LOADED_TOOLS};
//! # fn main() -> Result<(), quiver_store::StoreError> {
//! let store = SqliteStore::open("quiver.db")?;
//! store.create_session(&NewSession::new("s1", "chat"))?;
//! let evicted = store.load_tool("s1", "weather.forecast", DEFAULT_LOADED_TOOLS)?;
//! assert!(evicted.is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! # Decisions
//!
//! - **Synchronous.** Every method blocks; the runtime calls the store from
//!   `tokio::task::spawn_blocking` or its own threads. Methods take `&self` and the store is
//!   `Send + Sync`, so one `Arc<dyn Store>` serves every session.
//! - **Durability.** A write method returns only after its transaction is committed with
//!   `synchronous=FULL` in WAL mode, so what the caller was told survives a process crash and a
//!   power loss (DESIGN.md §7: an approval, an audit record). Writes go through one writer thread
//!   that commits whatever writes are waiting in one transaction (group commit): one `fsync`
//!   covers many callers, each write in its own savepoint so a failing write never undoes its
//!   neighbours. Reads use a small pool of read-only connections and never wait for writers.
//! - **Loaded tools** are an LRU set per session with a capacity the caller passes (the runtime's
//!   configured 12, [`DEFAULT_LOADED_TOOLS`]); loading returns what it evicted, as a list
//!   because a capacity lowered by the configuration evicts several at once.
//! - **Reads of an unknown session** return nothing (an empty list, `None`); writes to one
//!   return [`StoreError::NotFound`]. Ending a session only stamps `ended_at`: its state stays
//!   readable, and the runtime ends (and audits) its active skills itself.
//! - **Approvals** are resolved exactly once: approved, denied, expired or withdrawn (the
//!   process that asked is gone, [`Store::withdraw_orphaned_approvals`]); any second
//!   resolution is [`StoreError::AlreadyAnswered`], so a late answer after a timeout is never
//!   honoured by mistake, and an answer that raced the timeout is seen by whoever lost. A card
//!   keeps the call's exact arguments, because the approver must see them: removing secret
//!   fields from a card is the runtime's job.
//! - **Audit** records are append-only (triggers refuse `UPDATE` and `DELETE`) and hold an
//!   [`argument_digest`], never the arguments.
//! - **The perception cache** ([`Store::cached_result`], [`Store::cache_result`]) lives in
//!   the file, so every process on it shares it; rows are keyed by a digest the runtime
//!   computes from everything a result depends on, an expired row is never read, and at most
//!   [`CACHED_RESULTS`] are kept.
//! - **PostgreSQL** ([`PostgresStore`]): the same semantics, each write one transaction
//!   (session mutations behind the session row's lock, resolutions by conditional update);
//!   every change other processes should look at (an approval, a run, an event, a switch) is
//!   announced by `NOTIFY` from its transaction ([`Store::changes`]); a restart of the server
//!   costs a pause, not an error. Why its synchronous methods over an async driver cannot
//!   deadlock a tokio worker is in its module's doc.
//! - **Schema** versions (SQLite) are `PRAGMA user_version`, migrated in one transaction at open; a file
//!   with a newer version is refused untouched ([`StoreError::SchemaTooNew`]), and a file with a
//!   foreign `application_id` is not touched either.

mod card_state;
pub mod changes;
mod codec;
mod digest;
mod error;
pub mod instances;
mod notify;
mod postgres;
pub mod request_states;
mod sets;
mod sqlite;
pub mod turns;
mod types;
pub mod waiter;
pub mod workflow;

use std::time::Duration;

use serde_json::Value;

pub use card_state::OperatorCardState;
pub use changes::{Change, ChangeKind, Changes, Heard};
pub use digest::{argument_digest, canonical_json};
pub use error::{Result, StoreError};
pub use postgres::{PG_SCHEMA_VERSION, PostgresOptions, PostgresStore, is_postgres_url};
pub use request_states::Spend;
pub use sqlite::{SCHEMA_VERSION, SqliteStore, StoreOptions, Synchronous};
pub use turns::{Claim, HeldTurns, SharedQuestion};
pub use types::{
    Approval, ApprovalCard, ApprovalStatus, AuditDecision, AuditEntry, AuditKind, AuditQuery,
    AuditRecord, AuditStatus, AuditStep, CardQuestion, Consent, DEFAULT_LOADED_TOOLS, Decision,
    EndedSkill, NewSession, OnceApproval, OperatorCard, PresenceStamp, Purged, Session,
    SessionFilter, SessionPresence, SessionStatus, TurnStart, UnknownAuditStep, now_ms,
};
pub use workflow::WorkflowStore;

/// Everything the runtime keeps between calls, keyed by session id. Object-safe and
/// `Send + Sync`: share one `Arc<dyn Store>`. Write methods return once the write is durable.
pub trait Store: Send + Sync {
    // --- sessions ---

    /// Creates a session, stamped now. [`StoreError::AlreadyExists`] if the id is taken,
    /// [`StoreError::NotFound`] if its parent does not exist.
    fn create_session(&self, new: &NewSession) -> Result<Session>;

    /// The session with this id, if any.
    fn session(&self, id: &str) -> Result<Option<Session>>;

    /// Sessions matching the filter, most recently updated first.
    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>>;

    /// Sets the session's `updated_at` to now.
    fn touch_session(&self, id: &str) -> Result<()>;

    /// Replaces the session's opaque state and sets `updated_at` to now.
    fn set_session_state(&self, id: &str, state: &Value) -> Result<()>;

    // --- the operator's switches ---

    /// Sets one of the operator's runtime-wide switches (`control`, `disabled_packages`), shared
    /// by every process on this store.
    fn set_operator_value(&self, key: &str, value: &Value, by: &str) -> Result<()>;

    /// Every operator switch that has been set, by key.
    fn operator_values(&self) -> Result<std::collections::BTreeMap<String, Value>>;

    /// Ends the session now. `true` if it was active, `false` if it had already ended.
    fn end_session(&self, id: &str) -> Result<bool>;

    /// Deletes up to `limit` top-level sessions of `agent` not updated since `before` (Unix
    /// ms), with everything they hold (their child sessions, loaded tools, consents, cards,
    /// kept outputs; the audit log keeps their records). Returns how many were deleted and the
    /// skills that were still active in them (for their `skill_ended` records).
    fn purge_idle_sessions(&self, agent: &str, before: i64, limit: usize) -> Result<Purged>;

    /// Deletes the session `id` with everything it holds, as
    /// [`Store::purge_idle_sessions`] does; `sessions` is 0 when there was none.
    fn delete_session(&self, id: &str) -> Result<Purged>;

    // --- loaded tools (LRU) ---

    /// Loads a tool into the session's loaded set, or marks it most recently used if it is
    /// already there, then evicts least recently used tools until at most `capacity` remain.
    /// Returns the evicted tools, least recently used first: at most one, unless the capacity
    /// shrank since the last load. A capacity of 0 is [`StoreError::Invalid`].
    fn load_tool(&self, session: &str, tool: &str, capacity: usize) -> Result<Vec<String>>;

    /// The session's loaded tools, most recently used first.
    fn loaded_tools(&self, session: &str) -> Result<Vec<String>>;

    /// Marks a loaded tool most recently used. `false` if it is not loaded.
    fn touch_tool(&self, session: &str, tool: &str) -> Result<bool>;

    /// Removes a tool from the loaded set. `false` if it was not loaded.
    fn unload_tool(&self, session: &str, tool: &str) -> Result<bool>;

    // --- opened (pinned) packages ---

    /// Opens a package in the session. `true` if it was not open before.
    fn open_package(&self, session: &str, package: &str) -> Result<bool>;

    /// Closes a package (it was switched off, say). `false` if it was not open.
    fn close_package(&self, session: &str, package: &str) -> Result<bool>;

    /// The session's opened packages, in the order they were opened.
    fn opened_packages(&self, session: &str) -> Result<Vec<String>>;

    // --- active skills ---

    /// Marks a skill active. `true` if it is newly active, `false` if it already was.
    fn activate_skill(&self, session: &str, skill: &str) -> Result<bool>;

    /// Ends one active skill. `false` if it was not active.
    fn end_skill(&self, session: &str, skill: &str) -> Result<bool>;

    /// Ends every active skill of the session (`/reset`, compaction) and returns them, in the
    /// order they were activated.
    fn end_all_skills(&self, session: &str) -> Result<Vec<String>>;

    /// The session's active skills, in the order they were activated.
    fn active_skills(&self, session: &str) -> Result<Vec<String>>;

    /// The stamp of the session's presence now (`None` for an unknown session, or a store that
    /// keeps none): every change of its loaded tools, opened packages or active skills, by any
    /// method or process, gives a new stamp. Read before [`Store::presence`], a stamp that did
    /// not move since an earlier read means that read still holds (one integer read instead of
    /// three set reads); the default keeps no stamp, so callers always read the sets.
    fn presence_stamp(&self, session: &str) -> Result<Option<PresenceStamp>> {
        let _ = session;
        Ok(None)
    }

    /// The session's opened packages, loaded tools and active skills, read together (the call
    /// pipeline needs all three for every call).
    fn presence(&self, session: &str) -> Result<SessionPresence> {
        Ok(SessionPresence {
            opened: self.opened_packages(session)?,
            loaded: self.loaded_tools(session)?,
            active_skills: self.active_skills(session)?,
        })
    }

    /// The session's presence stamp and its presence, read together: by default
    /// [`Store::presence_stamp`] then [`Store::presence`] (a write between the two leaves an
    /// older stamp on a newer copy, which a later stamp only makes read again); a store that
    /// can reads both from one snapshot.
    fn stamped_presence(&self, session: &str) -> Result<(Option<PresenceStamp>, SessionPresence)> {
        Ok((self.presence_stamp(session)?, self.presence(session)?))
    }

    /// What a turn of `session` starts from, read together (in one round trip where the store
    /// can): the session, the operator's values, and the session's consents and `once`
    /// approvals.
    fn turn_start(&self, session: &str) -> Result<TurnStart> {
        Ok(TurnStart {
            session: self.session(session)?,
            operator: self.operator_values()?,
            consents: self.consents(session)?,
            once_approvals: self.once_approvals(session)?,
        })
    }

    // --- package consent ---

    /// Records that `by` granted (or refused) package `package` in the session, now. A later
    /// answer replaces an earlier one.
    fn set_consent(&self, session: &str, package: &str, granted: bool, by: &str)
    -> Result<Consent>;

    /// The session's consent answer for a package, if it was asked.
    fn consent(&self, session: &str, package: &str) -> Result<Option<Consent>>;

    /// Every consent answer of the session, by package id.
    fn consents(&self, session: &str) -> Result<Vec<Consent>>;

    // --- `once` approvals ---

    /// Records that `by` approved the first call of `tool` in the session (approval mode
    /// `once`). Recording it again keeps the first record.
    fn grant_once(&self, session: &str, tool: &str, by: &str) -> Result<OnceApproval>;

    /// The session's `once` approval for a tool, if any.
    fn once_approval(&self, session: &str, tool: &str) -> Result<Option<OnceApproval>>;

    /// Every `once` approval of the session.
    fn once_approvals(&self, session: &str) -> Result<Vec<OnceApproval>>;

    // --- trimmed results ---

    /// Keeps the whole text of call `call_id`'s trimmed result in the session, for
    /// `tool_output`; the session keeps its [`KEPT_OUTPUTS`] latest.
    fn keep_output(&self, session: &str, call_id: &str, text: &str) -> Result<()>;

    /// The kept text of call `call_id` in the session, if any.
    fn kept_output(&self, session: &str, call_id: &str) -> Result<Option<String>>;

    // --- the perception cache ---

    /// The result cached under `key` that is still fresh at `now` (Unix ms), if any: a result
    /// whose expiry is at or before `now` is never returned.
    fn cached_result(&self, key: &str, now: i64) -> Result<Option<Value>>;

    /// Caches `result` under `key`, stored at `now` and fresh until `expires_at` (Unix ms),
    /// replacing an earlier result under the same key; then drops every expired result and,
    /// past [`CACHED_RESULTS`], the oldest stored first. `key` must name everything the result
    /// depends on (the runtime's is a digest of the tool, the canonical arguments, the
    /// principal and the origin): the store hands the result to whoever asks with the same key.
    /// An empty key is [`StoreError::Invalid`].
    fn cache_result(&self, key: &str, result: &Value, now: i64, expires_at: i64) -> Result<()>;

    // --- the pending approval queue ---

    /// Puts a card in the queue as pending. [`StoreError::AlreadyExists`] if the id is taken,
    /// [`StoreError::NotFound`] if the session does not exist.
    fn enqueue_approval(&self, card: &ApprovalCard) -> Result<Approval>;

    /// The approval with this id, if any (for polling).
    fn approval(&self, id: &str) -> Result<Option<Approval>>;

    /// Pending approvals, oldest first, of one session or (`None`) of all.
    fn pending_approvals(&self, session: Option<&str>) -> Result<Vec<Approval>>;

    /// Answers a pending approval. Exactly once: a second answer, or an answer after it
    /// expired, is [`StoreError::AlreadyAnswered`].
    fn answer_approval(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        note: Option<&str>,
    ) -> Result<Approval>;

    /// Marks a pending approval expired (nobody answered in time). Like an answer, exactly
    /// once: if it was answered first, [`StoreError::AlreadyAnswered`] carries that answer.
    fn expire_approval(&self, id: &str) -> Result<Approval>;

    /// Withdraws every pending approval whose waiting process ([`ApprovalCard::waiter`]) is
    /// gone, and returns them: nothing would run on an answer, so none may be recorded. Runs
    /// when a console approver starts and whenever the queue is listed or answered.
    fn withdraw_orphaned_approvals(&self) -> Result<Vec<Approval>>;

    /// The newest card asked for the very call `card` describes (same session, question,
    /// tool and canonical arguments) whose answer is not used yet: still pending, or answered.
    /// A client that cannot ask retries the call; the retry finds its card here.
    fn card_for_call(&self, card: &ApprovalCard) -> Result<Option<Approval>>;

    /// Uses the answer of card `id`, exactly once: `false` when it was used already or is not
    /// answered (so two retries of one approved call never both run).
    fn use_answer(&self, id: &str) -> Result<bool>;

    /// Waits until the approval is resolved or `timeout` passes, and returns it as it then
    /// stands (still pending after a timeout). Answers from this process wake it at once;
    /// answers from another process are seen within a poll interval.
    fn wait_approval(&self, id: &str, timeout: Duration) -> Result<Approval>;

    // --- operator cards ---

    /// Stores an operator card, unused. [`StoreError::Invalid`] if its id, tool or creator is
    /// empty, it is already used, or it expires at or before it was made;
    /// [`StoreError::AlreadyExists`] if the id is taken.
    fn create_operator_card(&self, card: &OperatorCard) -> Result<OperatorCard>;

    /// The operator cards still usable at `now` (Unix ms: unused, unrevoked and not expired),
    /// and those used, revoked or expired within the last [`OPERATOR_CARDS_KEPT_MS`] before it,
    /// newest first.
    fn operator_cards(&self, now: i64) -> Result<Vec<OperatorCard>>;

    /// Uses, exactly once, the oldest operator card for call `call_id` of `session`: same tool,
    /// same canonical arguments, made for this session or for any, unused, unrevoked and
    /// expiring after `now` (Unix ms). Returns it as used, or `None` when no card matches (so a
    /// second call with the same arguments finds none, and of two racing calls only one gets
    /// it).
    fn use_operator_card(
        &self,
        tool: &str,
        arguments: &Value,
        session: &str,
        call_id: &str,
        now: i64,
    ) -> Result<Option<OperatorCard>>;

    /// Revokes the operator card `id` at `now` (Unix ms), naming `by`: from then on it matches
    /// no call. Returns it as revoked. Only a live card is revoked: [`StoreError::NotFound`]
    /// when there is no such card, [`StoreError::Conflict`] when it was already used, revoked
    /// or expired (nothing changes). Of a revoke and a use racing for one card, one wins.
    fn revoke_operator_card(&self, id: &str, by: &str, now: i64) -> Result<OperatorCard>;

    // --- audit ---

    /// Appends an audit record and returns its id.
    fn append_audit(&self, entry: &AuditEntry) -> Result<i64>;

    /// Audit records matching the query, newest first.
    fn query_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>>;

    /// The [`AuditKind::CallStarted`] records of calls that have no `call` record yet (still
    /// running, or interrupted), oldest first. A start is kept apart from the log, in calls in
    /// flight, and removed by the call's record (one transaction).
    fn unfinished_calls(&self) -> Result<Vec<AuditRecord>>;

    // --- request states (crate::request_states) ---

    /// Spends a request state's one-time `nonce`, kept `ttl_ms` on the store's clock: one
    /// conditional insert, so of several spenders (on any instance) exactly one gets
    /// [`Spend::First`]; the others read the call's stored result or that it still runs.
    /// Expired nonces are pruned.
    fn spend_request_state(&self, nonce: &str, ttl_ms: i64) -> Result<Spend>;

    /// Stores the result of the call that spent `nonce`, once: `false` when the nonce is
    /// unknown (expired) or its result was stored already.
    fn finish_request_state(&self, nonce: &str, result: &Value) -> Result<bool>;

    // --- turns and shared questions (crate::turns) ---

    /// The turns held for session `session`'s conversation, with their version; `None` when
    /// none were stored (or the session is unknown).
    fn held_turns(&self, session: &str) -> Result<Option<HeldTurns>>;

    /// Stores `turns` as the session's held turns if their version is still `expected`
    /// (`None`: none are stored yet), one conditional write: `false` when another writer came
    /// first, and then nothing changed (read again, merge, write again).
    /// [`StoreError::NotFound`] when the session does not exist. The row goes with its
    /// session.
    fn put_held_turns(&self, session: &str, expected: Option<i64>, turns: &Value) -> Result<bool>;

    /// Claims question `key` of the session (`consent:<package>`) for the request `id`, open
    /// `ttl_ms` on the store's clock: one conditional insert, so of requests claiming it at
    /// once (on any instance) exactly one gets [`Claim::Asks`] and the others share its
    /// question. A question expired or answered is claimed anew. [`StoreError::NotFound`]
    /// when the session does not exist.
    fn claim_question(&self, session: &str, key: &str, id: &str, ttl_ms: i64) -> Result<Claim>;

    /// Records `answer` to question `key` of the session, once: `false` when it has an answer
    /// already or nobody asks it.
    fn answer_question(&self, session: &str, key: &str, answer: &str) -> Result<bool>;

    /// Question `key` of the session as it stands, if it is asked.
    fn question(&self, session: &str, key: &str) -> Result<Option<SharedQuestion>>;

    /// Withdraws question `key` that request `id` asked and nobody answered (its asker got no
    /// answer: dismissed, timed out), so the next request asks anew; `false` when it is not
    /// that request's, or is answered.
    fn release_question(&self, session: &str, key: &str, id: &str) -> Result<bool>;

    // --- wake-ups (module changes) ---

    /// A subscription to the changes heard from now on: those written through this store and,
    /// on PostgreSQL, those every other store on the database announces. A hint to look at
    /// the rows sooner, never a substitute for reading them (see the module `changes`).
    fn changes(&self) -> Changes;

    /// Tells every listener `change` without writing a row (an instance reloaded its
    /// catalog): on PostgreSQL a `NOTIFY`, on SQLite this process's subscribers only.
    fn announce(&self, change: &Change) -> Result<()>;
}

/// A store that keeps workflow runs too: what a host opens ([`SqliteStore`],
/// [`PostgresStore`]) and hands to the runtime as both traits.
pub trait StateStore: Store + WorkflowStore {}

impl<T: Store + WorkflowStore> StateStore for T {}

/// How long used and expired operator cards stay listed ([`Store::operator_cards`]): an hour.
pub const OPERATOR_CARDS_KEPT_MS: i64 = 60 * 60 * 1000;

/// Trimmed results a session keeps for `tool_output` (the oldest is dropped first).
pub const KEPT_OUTPUTS: usize = 32;

/// Perception results the store keeps at most ([`Store::cache_result`]): expired ones are
/// dropped first, then the oldest.
pub const CACHED_RESULTS: usize = 1024;
