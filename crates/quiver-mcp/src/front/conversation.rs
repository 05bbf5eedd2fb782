//! Which conversation a request belongs to: sealed handles, a connection's own conversation,
//! a handle-less client's default conversation,
//! the delivered skills a connection remembers, keeping conversations in use alive and
//! deleting idle ones.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quiver_runtime::{Profile, SessionRequest};
use serde::{Deserialize, Serialize};

use super::questions::PendingState;
use super::{Caller, Front, FrontError, MCP_AGENT, now_ms};

pub(super) const CONVERSATION: &str = "conversation";

/// A connection's own conversation (stdio, or a 2025-11-25 HTTP session): the first request
/// that needs one creates it, and every later request of the connection reuses it.
#[derive(Debug, Default)]
pub struct ConnectionSlot {
    pub(super) session: Mutex<Option<String>>,
    pub(super) bound: bool,
    /// Whether the client's transcript is known to hold what this slot delivered (a lasting
    /// connection); a client's default conversation is shared by requests that may come from
    /// several transcripts, so it gives instructions again.
    pub(super) transcript: bool,
    /// When the connection last marked its conversation as in use (Unix ms).
    pub(super) touched: AtomicI64,
    /// The skills whose instructions this connection delivered, by conversation (with when it
    /// was last used, for eviction): the client's transcript holds them, so reading one again
    /// answers "already active". At most [`MAX_REMEMBERED_CONVERSATIONS`]; a forgotten one
    /// gets its instructions again, never fewer.
    pub(super) delivered: Mutex<HashMap<String, (u64, BTreeSet<String>)>>,
    pub(super) uses: AtomicU64,
}

/// Conversations per connection whose delivered skills are remembered.
pub const MAX_REMEMBERED_CONVERSATIONS: usize = 64;

impl ConnectionSlot {
    /// A slot for a connection that lasts (stdio, an HTTP session).
    pub fn connection() -> ConnectionSlot {
        ConnectionSlot {
            session: Mutex::new(None),
            bound: true,
            transcript: true,
            touched: AtomicI64::new(0),
            delivered: Mutex::default(),
            uses: AtomicU64::new(0),
        }
    }

    /// The skills whose instructions this connection delivered in `session` (none for a
    /// stateless request: its transcript is unknown, so they are given again).
    pub(super) fn delivered(&self, session: &str) -> BTreeSet<String> {
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .map(|(_, skills)| skills.clone())
            .unwrap_or_default()
    }

    /// Remembers what the connection's transcript holds in `session` after a request,
    /// forgetting the least recently used conversation past the bound.
    pub(super) fn remember(&self, session: &str, skills: &BTreeSet<String>) {
        if !self.transcript {
            return;
        }
        let used = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut delivered = self
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        delivered.insert(session.to_owned(), (used, skills.clone()));
        if delivered.len() > MAX_REMEMBERED_CONVERSATIONS
            && let Some(oldest) = delivered
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone())
        {
            delivered.remove(&oldest);
        }
    }

    /// No connection: a stateless request (2026-07-28), whose conversation comes only from
    /// its handle.
    pub fn stateless() -> ConnectionSlot {
        ConnectionSlot::default()
    }

    /// A client's default conversation (see [`Front::client_slot`]): bound to one
    /// conversation, with no transcript of its own.
    fn client() -> ConnectionSlot {
        ConnectionSlot {
            bound: true,
            ..ConnectionSlot::default()
        }
    }
}

/// How long a client's default conversation ([`Front::client_slot`]) is kept without a
/// request; the next request after that starts a new conversation.
pub const CLIENT_CONVERSATION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Most clients' default conversations held at once; past it the least recently used is
/// forgotten (its next request starts a new conversation).
pub const MAX_CLIENT_CONVERSATIONS: usize = 4096;

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HandleBody {
    pub(super) s: String,
    pub(super) u: Option<String>,
}

/// How often a conversation in use is marked so (its `updated_at`), and idle ones are looked
/// for: at most once a minute (or half the idle time, if shorter), so a request costs no extra
/// write.
pub(super) const KEEP_ALIVE_MS: i64 = 60_000;
/// Idle conversations deleted at most per look.
pub(super) const PURGE_BATCH: usize = 1_000;

impl Front {
    /// The default conversation of a client that keeps no handle (a 2026-07-28 client over
    /// HTTP, such as an SDK's default client), by `key`: the bearer token, the address the
    /// client connects from and its name and version (docs/mcp.md "The conversation handle"). Requests
    /// under one key share a conversation until it is idle for [`CLIENT_CONVERSATION_IDLE`];
    /// keys never span tokens.
    pub fn client_slot(&self, key: &str) -> Arc<ConnectionSlot> {
        let now = Instant::now();
        let mut slots = self
            .client_slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, slot)) = slots.get_mut(key)
            && now.duration_since(*seen) < CLIENT_CONVERSATION_IDLE
        {
            *seen = now;
            return slot.clone();
        }
        slots.retain(|_, (seen, _)| now.duration_since(*seen) < CLIENT_CONVERSATION_IDLE);
        if slots.len() >= MAX_CLIENT_CONVERSATIONS
            && let Some(oldest) = slots
                .iter()
                .min_by_key(|(_, (seen, _))| *seen)
                .map(|(k, _)| k.clone())
        {
            slots.remove(&oldest);
        }
        let slot = Arc::new(ConnectionSlot::client());
        slots.insert(key.to_owned(), (now, slot.clone()));
        slot
    }

    pub(super) fn handle_for(&self, session: &str, caller: &Caller) -> String {
        self.sealer.seal(
            CONVERSATION,
            &HandleBody {
                s: session.to_owned(),
                u: caller.principal.user_id.clone(),
            },
            0,
        )
    }

    /// The session of a request: its handle, else the connection's, else a new one.
    pub(super) fn conversation(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        handle: Option<&str>,
    ) -> Result<String, FrontError> {
        if let Some(handle) = handle {
            let body: HandleBody = self
                .sealer
                .open(CONVERSATION, handle)
                .map_err(|e| FrontError::BadHandle(e.to_string()))?;
            if body.u != caller.principal.user_id {
                return Err(FrontError::BadHandle("it belongs to another user".into()));
            }
            // Named again: a conversation of its own now, kept as long as any.
            self.provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&body.s);
            let active = self.runtime.session_last_used(&body.s)?;
            let Some(updated) = active else {
                return Err(FrontError::BadHandle(
                    "its conversation has ended; leave `conversation` out to start a new one"
                        .into(),
                ));
            };
            if now_ms() - updated > self.keep_alive_every() {
                self.keep_alive(&body.s)?;
            }
            return Ok(body.s);
        }
        let mut bound = slot.session.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = bound.as_ref() {
            let now = now_ms();
            if now - slot.touched.swap(now, Ordering::Relaxed) > self.keep_alive_every() {
                self.keep_alive(session)?;
            }
            return Ok(session.clone());
        }
        self.purge_idle()?;
        let session = self.runtime.create_session(&SessionRequest {
            origin: caller.origin.clone(),
            agent: MCP_AGENT.into(),
            principal: caller.principal.clone(),
            profile: Profile::Interactive,
        })?;
        if slot.bound {
            slot.touched.store(now_ms(), Ordering::Relaxed);
            *bound = Some(session.clone());
        } else {
            self.provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(session.clone(), now_ms());
        }
        Ok(session)
    }

    pub(super) fn idle_ms(&self) -> i64 {
        i64::try_from(self.config.conversation_idle.as_millis()).unwrap_or(i64::MAX)
    }

    /// How often a conversation in use is marked so, and idle ones are looked for.
    pub(super) fn keep_alive_every(&self) -> i64 {
        KEEP_ALIVE_MS.min(self.idle_ms() / 2)
    }

    /// Marks `session` as in use now, so it is not taken for idle.
    pub(super) fn keep_alive(&self, session: &str) -> Result<(), FrontError> {
        self.runtime.touch_session(session)?;
        Ok(())
    }

    /// Deletes the conversations idle for longer than `conversation_idle`, and those a
    /// stateless request started without a handle that no request named again within
    /// `provisional_idle` (at most once a minute): a stateless request whose client never
    /// comes back leaves no row for long.
    pub(super) fn purge_idle(&self) -> Result<(), FrontError> {
        let now = now_ms();
        let provisional_ms =
            i64::try_from(self.config.provisional_idle.as_millis()).unwrap_or(i64::MAX);
        let every = self.keep_alive_every().min(provisional_ms / 2);
        if now - self.purged.load(Ordering::Relaxed) < every {
            return Ok(());
        }
        self.purged.store(now, Ordering::Relaxed);
        let expired: Vec<String> = {
            let mut provisional = self
                .provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let expired = provisional
                .iter()
                .filter(|(_, started)| now - **started >= provisional_ms)
                .map(|(session, _)| session.clone())
                .collect::<Vec<_>>();
            for session in &expired {
                provisional.remove(session);
            }
            expired
        };
        for session in &expired {
            self.runtime.delete_session(
                session,
                "a stateless request's conversation no request named again",
            )?;
        }
        let idle = self.idle_ms();
        let deleted =
            self.runtime
                .purge_idle_sessions(MCP_AGENT, now.saturating_sub(idle), PURGE_BATCH)?;
        if deleted > 0 {
            tracing::info!(deleted, "deleted idle MCP conversations");
        }
        Ok(())
    }

    /// The conversation a resumed call continues: the one sealed in its state. A handle or a
    /// connection's own conversation, when the request has one, must be that same one; a
    /// stateless retry without a handle (the SDK's own `input_required` retry) continues it.
    pub(super) fn resumed_conversation(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        handle: Option<&str>,
        state: &PendingState,
    ) -> Result<String, FrontError> {
        let connection = slot
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let session = match (handle, connection) {
            (Some(handle), _) => self.conversation(caller, slot, Some(handle))?,
            (None, Some(session)) => session,
            (None, None) => {
                let active = self.runtime.session_last_used(&state.s)?.is_some();
                if !active {
                    return Err(FrontError::BadRequestState(
                        "its conversation has ended; call the tool again".into(),
                    ));
                }
                state.s.clone()
            }
        };
        if session != state.s {
            return Err(FrontError::BadRequestState(
                "it belongs to another call or conversation".into(),
            ));
        }
        Ok(session)
    }

    /// Starts a conversation for `caller` and returns its session id and handle (benchmarks,
    /// a console that hands a client a conversation in advance).
    pub fn open_conversation(&self, caller: &Caller) -> Result<(String, String), FrontError> {
        let session = self.conversation(caller, &ConnectionSlot::stateless(), None)?;
        let handle = self.handle_for(&session, caller);
        Ok((session, handle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_remembers_a_bounded_number_of_conversations() {
        let slot = ConnectionSlot::connection();
        let skills: BTreeSet<String> = ["a/s".to_owned()].into();
        for n in 0..=MAX_REMEMBERED_CONVERSATIONS {
            slot.remember(&format!("ses-{n}"), &skills);
            // The first stays in use, so it is never the one forgotten.
            slot.remember("ses-0", &skills);
        }
        let remembered = slot.delivered.lock().unwrap().len();
        assert_eq!(remembered, MAX_REMEMBERED_CONVERSATIONS);
        assert_eq!(slot.delivered("ses-0"), skills);
        assert!(
            slot.delivered("ses-1").is_empty(),
            "the least recently used is forgotten"
        );
        assert_eq!(
            slot.delivered(&format!("ses-{MAX_REMEMBERED_CONVERSATIONS}")),
            skills
        );
        // A stateless request remembers nothing.
        let stateless = ConnectionSlot::default();
        stateless.remember("ses-x", &skills);
        assert!(stateless.delivered("ses-x").is_empty());
    }
}
