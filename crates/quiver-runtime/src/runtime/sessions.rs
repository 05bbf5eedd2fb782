//! Sessions: created, ended (their active skills ending on the record), idle ones purged, a
//! skill list reset, and calls left running by a process that ended closed as interrupted.

use quiver_store::{AuditEntry, AuditKind, AuditStep, NewSession};
use serde_json::{Value, json};

use crate::ids::new_id;

use super::{Runtime, RuntimeError, SessionRequest};

impl Runtime {
    /// Creates a session and returns its id.
    pub fn create_session(&self, request: &SessionRequest) -> Result<String, RuntimeError> {
        let catalog = self.catalog();
        let id = new_id("ses");
        let mut new = NewSession::new(id.clone(), request.agent.clone());
        new.origin = serde_json::to_value(&request.origin).unwrap_or_default();
        new.principal = serde_json::to_value(&request.principal).unwrap_or_default();
        new.catalog_version = catalog.version().to_string();
        // New sessions see the sections as they are now; running sessions keep theirs.
        let mut sections = serde_json::Map::new();
        for cp in catalog.packages().iter().filter(|p| !p.shadowed) {
            for s in &cp.package.prompts {
                sections.insert(format!("{}.{}", cp.package.id, s.name), json!(s.content));
            }
        }
        new.prompt_versions = Value::Object(sections);
        new.state = json!({ "profile": request.profile });
        self.store.create_session(&new)?;
        Ok(id)
    }

    /// Ends a session: its active skills end (audited) and it takes no more turns.
    pub fn end_session(&self, session: &str) -> Result<bool, RuntimeError> {
        Ok(crate::operator::end_session(
            self.store.as_ref(),
            session,
            "session ended",
        )?)
    }

    /// Deletes up to `limit` idle top-level sessions of `agent` not used since `before` (Unix
    /// ms); each skill still active in them ends with a `skill_ended` record. Returns how many
    /// sessions went.
    pub fn purge_idle_sessions(
        &self,
        agent: &str,
        before: i64,
        limit: usize,
    ) -> Result<usize, RuntimeError> {
        let purged = self.store.purge_idle_sessions(agent, before, limit)?;
        for ended in &purged.ended_skills {
            crate::operator::skill_ended(self.store.as_ref(), ended, "idle session deleted")?;
        }
        Ok(purged.sessions)
    }

    /// Deletes the session `session` with everything it holds; each skill still active in it
    /// ends with a `skill_ended` record saying `why`. Whether it existed.
    pub fn delete_session(&self, session: &str, why: &str) -> Result<bool, RuntimeError> {
        let purged = self.store.delete_session(session)?;
        for ended in &purged.ended_skills {
            crate::operator::skill_ended(self.store.as_ref(), ended, why)?;
        }
        Ok(purged.sessions > 0)
    }

    /// `/reset`, or the front reporting a compacted context: every active skill ends (audited),
    /// so its text can be read again.
    pub fn reset_skills(&self, session: &str, why: &str) -> Result<Vec<String>, RuntimeError> {
        let ended = self.store.end_all_skills(session)?;
        for skill in &ended {
            self.audit_skill(session, skill, AuditKind::SkillEnded, why)?;
        }
        Ok(ended)
    }

    pub(super) fn audit_skill(
        &self,
        session: &str,
        skill: &str,
        kind: AuditKind,
        why: &str,
    ) -> Result<(), RuntimeError> {
        let mut entry = AuditEntry::new(kind, session);
        entry.skill = Some(skill.to_owned());
        entry.detail = Some(json!({ "why": why }));
        self.store.append_audit(&entry)?;
        Ok(())
    }

    /// Closes, as `interrupted`, every call recorded as started by a process known to be gone
    /// (killed or crashed mid-call; see [`quiver_store::waiter`]), and returns their call ids. Run at start by every
    /// command that opens the runtime; calls of live processes (another `quiver` on the same
    /// store) are left alone.
    pub fn close_interrupted_calls(&self) -> Result<Vec<String>, RuntimeError> {
        let mut closed = Vec::new();
        for record in self.store.unfinished_calls()? {
            let process = started_by(&record);
            // The same test as for a console card's waiter: a process not known to be gone
            // (another PID namespace, an unreadable record) is left alone.
            if process.as_str().is_none_or(quiver_store::waiter::alive) {
                continue;
            }
            let entry = interrupted(record, process);
            // Once, when another process (an instance's reaper) closes it too.
            let wrote = match self.workflow_store() {
                Some(store) => store.close_call(&entry)?,
                None => {
                    self.store.append_audit(&entry)?;
                    true
                }
            };
            if wrote {
                closed.extend(entry.call_id);
            }
        }
        Ok(closed)
    }

    /// Closes, as `interrupted`, every call in flight that the process `process` (a waiter
    /// string: a `quiver serve` instance the registry reaped, on this machine or another)
    /// recorded as started, and returns their call ids. Each is closed once however many
    /// instances try (a conditional write); without a workflow store, nothing is closed.
    pub fn close_calls_of(&self, process: &str) -> Result<Vec<String>, RuntimeError> {
        let Some(store) = self.workflow_store() else {
            return Ok(Vec::new());
        };
        let mut closed = Vec::new();
        for record in self.store.unfinished_calls()? {
            let by = started_by(&record);
            if by.as_str() != Some(process) {
                continue;
            }
            let entry = interrupted(record, by);
            if store.close_call(&entry)? {
                closed.extend(entry.call_id);
            }
        }
        Ok(closed)
    }
}

/// The process that recorded a call as started (its `detail.process`).
fn started_by(record: &quiver_store::AuditRecord) -> Value {
    record
        .entry
        .detail
        .as_ref()
        .and_then(|d| d.get("process"))
        .cloned()
        .unwrap_or_default()
}

/// The `call` record that ends a started call whose process ended first.
fn interrupted(record: quiver_store::AuditRecord, process: Value) -> AuditEntry {
    // A call killed while a person was asked about it never ran.
    let asking = record
        .entry
        .detail
        .as_ref()
        .and_then(|d| d.get("phase"))
        .and_then(Value::as_str)
        == Some("asking");
    let mut entry = record.entry;
    entry.kind = AuditKind::Call;
    entry.status = quiver_store::AuditStatus::Interrupted;
    entry.decisions.push(quiver_store::AuditDecision {
        step: if asking {
            AuditStep::Approval
        } else {
            AuditStep::Execute
        },
        decision: "interrupted".into(),
        reason: if asking {
            "the process asking about the call ended before anyone answered; nothing ran"
        } else {
            "the process running the call ended before the call did"
        }
        .into(),
    });
    entry.detail = Some(json!({"process": process}));
    entry
}
