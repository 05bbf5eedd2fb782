//! [`Admin`]: what a person at the operator's end does with Quiver's state outside any
//! conversation (`quiver session`, `quiver audit`, `quiver approvals`, `quiver control`,
//! `quiver enable`, `quiver runs`, and later the console). The store stays private to the
//! runtime crate: a front gets an `Admin` from the host and reads and changes state only
//! through it, each change applying its rule and leaving its audit record.

use std::sync::Arc;

use quiver_policy::ControlPlane;
use quiver_store::workflow::{Attempt, Run, RunFilter, Wait};
use quiver_store::{
    Approval, AuditQuery, AuditRecord, Consent, Decision, OperatorCard, Session, SessionFilter,
    Store, WorkflowStore,
};
use quiver_workflow::Parked;
use serde::Serialize;

use crate::RuntimeError;
use crate::operator::{self, OperatorState};

/// The longest an operator card lives: fifteen minutes.
pub const OPERATOR_CARD_MAX_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The operator's door to the state.
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn Store>,
    workflows: Arc<dyn WorkflowStore>,
}

/// A session and what it holds, as `quiver session show` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    /// The session's row.
    pub session: Session,
    /// Its loaded slots (a package's id for its exposed items, or an item's qualified name),
    /// least recently used first: the first is evicted next.
    pub loaded_tools: Vec<String>,
    /// The packages it opened.
    pub opened_packages: Vec<String>,
    /// Its active skills.
    pub active_skills: Vec<String>,
    /// Its package consents.
    pub consents: Vec<Consent>,
}

/// A workflow run with its attempts and waits, as `quiver runs show` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    /// The run's row.
    pub run: Run,
    /// Every attempt of its steps.
    pub attempts: Vec<Attempt>,
    /// What it waited and waits for.
    pub waits: Vec<Wait>,
}

impl Admin {
    /// The operator's door over `store` and the workflow runs in `workflows` (one database).
    pub fn new(store: Arc<dyn Store>, workflows: Arc<dyn WorkflowStore>) -> Admin {
        Admin { store, workflows }
    }

    /// A subscription to the changes the store hears (see [`quiver_store::changes`]): what
    /// the console's live updates follow.
    pub fn changes(&self) -> quiver_store::Changes {
        self.store.changes()
    }

    /// The sessions `filter` selects.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<Session>, RuntimeError> {
        Ok(self.store.list_sessions(filter)?)
    }

    /// The session `id` with what it holds (`None` when there is none).
    pub fn session(&self, id: &str) -> Result<Option<SessionView>, RuntimeError> {
        let Some(session) = self.store.session(id)? else {
            return Ok(None);
        };
        Ok(Some(SessionView {
            session,
            // The store lists them most recently used first.
            loaded_tools: self.store.loaded_tools(id)?.into_iter().rev().collect(),
            opened_packages: self.store.opened_packages(id)?,
            active_skills: self.store.active_skills(id)?,
            consents: self.store.consents(id)?,
        }))
    }

    /// Ends the active session `id` by hand (its skills end with records, and an operator
    /// record names `by`); `false` when no such session is active.
    pub fn end_session(&self, id: &str, by: &str) -> Result<bool, RuntimeError> {
        Ok(operator::end_session_by(self.store.as_ref(), id, by)?)
    }

    /// The audit records `query` selects, newest first.
    pub fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, RuntimeError> {
        Ok(self.store.query_audit(query)?)
    }

    /// Withdraws the pending cards whose asking process is gone, and returns them.
    pub fn withdraw_orphaned_approvals(&self) -> Result<Vec<Approval>, RuntimeError> {
        Ok(self.store.withdraw_orphaned_approvals()?)
    }

    /// The pending approval cards (of `session` only, when given).
    pub fn pending_approvals(&self, session: Option<&str>) -> Result<Vec<Approval>, RuntimeError> {
        Ok(self.store.pending_approvals(session)?)
    }

    /// The workflow runs parked on a person's answer.
    pub fn parked_runs(&self) -> Result<Vec<Parked>, RuntimeError> {
        Ok(quiver_workflow::parked(self.workflows.as_ref())?)
    }

    /// Answers the pending card `id` from the console, exactly once (a second answer is
    /// [`quiver_store::StoreError::AlreadyAnswered`]).
    pub fn answer_approval(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        note: Option<&str>,
    ) -> Result<Approval, RuntimeError> {
        Ok(self.store.answer_approval(id, decision, by, note)?)
    }

    /// The approval card `id`, pending or resolved (`None` when there is none).
    pub fn approval(&self, id: &str) -> Result<Option<Approval>, RuntimeError> {
        Ok(self.store.approval(id)?)
    }

    /// Leaves the audit record of an operator's `action` outside the switches (an answer
    /// given or a sign-in in the console), naming `by`.
    pub fn record(&self, action: operator::Action<'_>, by: &str) -> Result<(), RuntimeError> {
        Ok(operator::record(self.store.as_ref(), action, by)?)
    }

    /// Makes an operator card approving ahead one call of `tool` with exactly `arguments`
    /// (in `session` only, or any), usable once within `ttl` (at most
    /// [`OPERATOR_CARD_MAX_TTL`]), and audits it naming `by`.
    pub fn create_operator_card(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        session: Option<&str>,
        ttl: std::time::Duration,
        by: &str,
    ) -> Result<OperatorCard, RuntimeError> {
        if ttl.is_zero() || ttl > OPERATOR_CARD_MAX_TTL {
            return Err(quiver_store::StoreError::Invalid(format!(
                "an operator card lives more than 0 and at most {} minutes",
                OPERATOR_CARD_MAX_TTL.as_secs() / 60
            ))
            .into());
        }
        let now = quiver_store::now_ms();
        let card = self.store.create_operator_card(&OperatorCard {
            id: crate::ids::new_id("opc"),
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            session: session.map(str::to_owned),
            created_by: by.to_owned(),
            created_at: now,
            expires_at: now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)),
            used_at: None,
            used_session: None,
            used_call: None,
            revoked_at: None,
            revoked_by: None,
        })?;
        let digest = quiver_store::argument_digest(arguments, &[]);
        let action = operator::Action::OperatorCard {
            card: &card.id,
            tool,
            digest: &digest,
            session,
            expires_at: card.expires_at,
        };
        operator::record(self.store.as_ref(), action, by)?;
        Ok(card)
    }

    /// Revokes the live operator card `id` before it expires (it then matches no call), and
    /// audits it naming `by`. A card already used, revoked or expired is
    /// [`quiver_store::StoreError::Conflict`]; an unknown one
    /// [`quiver_store::StoreError::NotFound`]: nothing changes.
    pub fn revoke_operator_card(&self, id: &str, by: &str) -> Result<OperatorCard, RuntimeError> {
        let card = self
            .store
            .revoke_operator_card(id, by, quiver_store::now_ms())?;
        let action = operator::Action::RevokeOperatorCard {
            card: &card.id,
            tool: &card.tool,
            session: card.session.as_deref(),
        };
        operator::record(self.store.as_ref(), action, by)?;
        Ok(card)
    }

    /// The operator cards still usable, and those used, revoked or expired in the last hour, newest
    /// first.
    pub fn operator_cards(&self) -> Result<Vec<OperatorCard>, RuntimeError> {
        Ok(self.store.operator_cards(quiver_store::now_ms())?)
    }

    /// The operator's switches.
    pub fn switches(&self) -> Result<OperatorState, RuntimeError> {
        Ok(operator::read(self.store.as_ref())?)
    }

    /// Sets the control plane for every process on this state (audited, naming `by`).
    pub fn set_control(&self, control: ControlPlane, by: &str) -> Result<(), RuntimeError> {
        Ok(operator::set_control(self.store.as_ref(), control, by)?)
    }

    /// [`Admin::set_control`], keeping the reason the operator gave in the audit record.
    pub fn set_control_because(
        &self,
        control: ControlPlane,
        by: &str,
        why: Option<&str>,
    ) -> Result<(), RuntimeError> {
        Ok(operator::set_control_because(
            self.store.as_ref(),
            control,
            by,
            why,
        )?)
    }

    /// Switches `package` on or off for everyone (audited, naming `by`).
    pub fn set_enabled(&self, package: &str, enabled: bool, by: &str) -> Result<(), RuntimeError> {
        Ok(operator::set_enabled(
            self.store.as_ref(),
            package,
            enabled,
            by,
        )?)
    }

    /// The workflow runs `filter` selects.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, RuntimeError> {
        Ok(self.workflows.runs(filter)?)
    }

    /// The run `id` with its attempts and waits (`None` when there is none).
    pub fn run(&self, id: &str) -> Result<Option<RunView>, RuntimeError> {
        let Some(run) = self.workflows.run(id)? else {
            return Ok(None);
        };
        Ok(Some(RunView {
            run,
            attempts: self.workflows.attempts(id)?,
            waits: self.workflows.waits(id)?,
        }))
    }
}
