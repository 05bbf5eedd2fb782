//! What a front may do with a conversation's state, through the runtime: child sessions for
//! sub-agents and forks, a conversation's liveness for the MCP front's handles, tools a
//! front loads on a profile's behalf, and the session's audit trail. The store stays private
//! to the runtime; these are its only doors to it for fronts.

use std::sync::Arc;
use std::time::Duration;

use quiver_policy::Principal;
use quiver_store::{AuditEntry, AuditKind, AuditQuery, AuditRecord, NewSession};

use super::{Runtime, RuntimeError};
use crate::approver::{Approver, QueueApprover, RetryApprover};
use crate::ids::new_id;

/// The audit kind of a counted turn's tokens ([`Runtime::record_turn_tokens`]).
pub const TURN_TOKENS_KIND: &str = "turn";

/// How far [`Runtime::session_depth`] follows parents at most.
const MAX_DEPTH: usize = 64;

impl Runtime {
    /// Creates a child session (a sub-agent, a forked skill) of `parent`: same origin, its own
    /// state, so nothing it loads, opens or activates touches the parent. It acts on the
    /// conversation's behalf, so the packages the conversation consented to are consented in
    /// it too (and nothing else).
    pub fn create_child_session(
        &self,
        parent: &str,
        agent: &str,
        principal: &Principal,
    ) -> Result<String, RuntimeError> {
        let record = self
            .store
            .session(parent)?
            .filter(|s| s.is_active())
            .ok_or_else(|| RuntimeError::NoSession(parent.to_owned()))?;
        let id = new_id("ses");
        let mut new = NewSession::new(id.clone(), agent);
        new.parent = Some(parent.to_owned());
        new.origin = record.origin;
        new.principal = serde_json::to_value(principal).unwrap_or_default();
        new.catalog_version = record.catalog_version;
        new.prompt_versions = record.prompt_versions;
        new.state = record.state;
        self.store.create_session(&new)?;
        for consent in self.store.consents(parent)? {
            self.store
                .set_consent(&id, &consent.package, consent.granted, &consent.by)?;
        }
        Ok(id)
    }

    /// Activates the skill `skill` in the child session of a forked skill (`context: fork`)
    /// and records its start; `false` when it was already active there.
    pub fn activate_forked_skill(&self, session: &str, skill: &str) -> Result<bool, RuntimeError> {
        let activated = self.store.activate_skill(session, skill)?;
        if activated {
            self.audit_skill(session, skill, AuditKind::SkillActivated, "context: fork")?;
        }
        Ok(activated)
    }

    /// How many parents `session` has (0 for a conversation), counted up to 64.
    pub fn session_depth(&self, session: &str) -> usize {
        let mut depth = 0;
        let mut current = session.to_owned();
        while let Ok(Some(record)) = self.store.session(&current) {
            match record.parent {
                Some(parent) if depth < MAX_DEPTH => {
                    depth += 1;
                    current = parent;
                }
                _ => break,
            }
        }
        depth
    }

    /// When `session` was last used (milliseconds since the epoch), if it is still active.
    pub fn session_last_used(&self, session: &str) -> Result<Option<i64>, RuntimeError> {
        Ok(self
            .store
            .session(session)?
            .filter(|s| s.is_active())
            .map(|s| s.updated_at))
    }

    /// Marks `session` as used now, so an idle clean-up does not take it.
    pub fn touch_session(&self, session: &str) -> Result<(), RuntimeError> {
        Ok(self.store.touch_session(session)?)
    }

    /// Loads `tools` (qualified names) into `session`, as a profile that declares them does
    /// (an agent's `tools:`, the eager baseline of `quiver eval`), in `capacity` slots. What
    /// is loaded is still admitted and authorized call by call.
    pub fn load_for_profile(
        &self,
        session: &str,
        tools: &[String],
        capacity: usize,
    ) -> Result<(), RuntimeError> {
        for qualified in tools {
            self.store.load_tool(session, qualified, capacity)?;
        }
        Ok(())
    }

    /// Records what the first request of a turn in `session` carried before the conversation:
    /// `prompt_tokens` (its system prompt and tool definitions) against `eager_tokens` (the
    /// same with every exposed tool's definition, the eager baseline; `None` when not
    /// measured), as an audit record of kind [`TURN_TOKENS_KIND`] (the console charts them).
    pub fn record_turn_tokens(
        &self,
        session: &str,
        prompt_tokens: usize,
        eager_tokens: Option<usize>,
    ) -> Result<(), RuntimeError> {
        let mut entry = AuditEntry::new(AuditKind::from(TURN_TOKENS_KIND.to_owned()), session);
        entry.detail = Some(serde_json::json!({
            "prompt_tokens": prompt_tokens,
            "eager_tokens": eager_tokens,
        }));
        self.store.append_audit(&entry)?;
        Ok(())
    }

    /// The latest `limit` audit records of `session`, newest first.
    pub fn session_audit(
        &self,
        session: &str,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, RuntimeError> {
        let query = AuditQuery {
            session: Some(session.to_owned()),
            limit: Some(limit),
            ..AuditQuery::default()
        };
        Ok(self.store.query_audit(&query)?)
    }

    /// An operator (`by`) allows `package` in `session` without asking its user, as the
    /// user's own answer would (an audited operator action; `quiver bench mcp` measures calls
    /// after the first).
    pub fn grant_consent(
        &self,
        session: &str,
        package: &str,
        by: &str,
    ) -> Result<(), RuntimeError> {
        self.store.set_consent(session, package, true, by)?;
        crate::operator::record(
            self.store.as_ref(),
            crate::operator::Action::GrantConsent(session, package),
            by,
        )?;
        Ok(())
    }

    /// The console's queue as an approver: a card waits there for a person up to `wait`.
    pub fn console_approver(&self, wait: Duration) -> Arc<dyn Approver> {
        Arc::new(QueueApprover::new(self.store.clone(), wait))
    }

    /// The console's queue for a client that cannot ask: the card is left there and the call
    /// stops at once; its retry uses the answer ([`RetryApprover`]).
    pub fn retry_approver(&self) -> Arc<RetryApprover> {
        Arc::new(RetryApprover::new(self.store.clone()))
    }
}
