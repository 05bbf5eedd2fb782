//! What ran and what it left on record, checked after every step: every tool, script and
//! agent run (nothing private outside its package, its package's consent when it runs on the
//! conversation's behalf, nothing under the emergency stop), and each call's one audit record
//! without a secret in it.

use quiver_model::rules::Session;
use quiver_model::world::Target;
use quiver_runtime::CallOutcome;
use quiver_store::{AuditKind, AuditQuery, Store, WorkflowStore};
use serde_json::Value;

use super::check::Invariant;
use super::harness::{Checker, SECRET};
use super::players::Task;

impl Checker<'_> {
    /// Exactly one call record for the outcome, without the secret in it.
    pub(super) fn check_audit(
        &mut self,
        out: &CallOutcome,
        target: Option<&Target>,
        args: &Value,
        name: &str,
    ) {
        let records: Vec<_> = self
            .h
            .store
            .query_audit(&AuditQuery {
                session: Some(self.session.clone()),
                kind: Some(AuditKind::Call),
                ..AuditQuery::default()
            })
            .unwrap()
            .into_iter()
            .filter(|r| r.entry.call_id.as_deref() == Some(out.call_id.as_str()))
            .collect();
        if records.len() != 1 {
            self.report(
                Invariant::OneAuditRecord,
                "audit-record-count",
                format!("call {} has {} records", out.call_id, records.len()),
            );
        }
        let secret = target
            .and_then(|t| self.world.tool(t))
            .is_some_and(|t| t.secret);
        for record in records {
            let text = serde_json::to_string(&record.entry).unwrap();
            let digest_without = quiver_store::argument_digest(args, &["token"]);
            let leaked_digest =
                secret && record.entry.argument_digest.as_deref() != Some(digest_without.as_str());
            if text.contains(SECRET) || leaked_digest {
                let by_qualified = name.contains('.');
                self.report(
                    Invariant::OneAuditRecord,
                    if by_qualified {
                        "secret-in-audit-qualified-name"
                    } else {
                        "secret-in-audit"
                    },
                    format!(
                        "the record of {:?} holds the secret argument",
                        record.entry.tool
                    ),
                );
            }
        }
    }

    pub fn consented(&self, session: &str, package: usize) -> bool {
        self.h
            .store
            .consents(session)
            .unwrap()
            .iter()
            .any(|c| c.granted && c.package == format!("p{package}"))
    }

    /// The package a session acts for: `None` for the conversation, `Some(p)` for a child
    /// session of one of `p`'s agents.
    pub fn acting(&self, session: &str) -> Option<usize> {
        if let Some(p) = self.h.runner.children.lock().unwrap().get(session) {
            return Some(*p);
        }
        // A child session the agent loop made: its agent is `p{n}.a{m}`; a workflow run's
        // session (`ses-<run id>`) acts for the run's package.
        let record = self.h.store.session(session).ok().flatten()?;
        let owner = if record.agent == "workflow" {
            let run = session.strip_prefix("ses-")?;
            WorkflowStore::run(self.h.store.as_ref(), run)
                .ok()
                .flatten()?
                .workflow
        } else {
            record.agent
        };
        let (package, _) = owner.split_once('.')?;
        package.strip_prefix('p')?.parse().ok()
    }

    /// Every tool run and agent run since the last look: nothing private outside its package,
    /// consent for every exposed item run on another's behalf, nothing under the stop.
    pub fn check_runs(&mut self) {
        let runs: Vec<(String, String)> = self.h.runs.lock().unwrap()[self.seen_runs..].to_vec();
        self.seen_runs += runs.len();
        for (qualified, session) in runs {
            let Some(target) = self.world.resolve(&qualified) else {
                continue;
            };
            let acting = self.acting(&session);
            self.check_one_run(&target, acting, &session, None);
        }
        let tasks: Vec<Task> = self.h.runner.tasks.lock().unwrap()[self.seen_tasks..].to_vec();
        self.seen_tasks += tasks.len();
        for task in tasks {
            let Some(agent) = task.agent.as_deref().and_then(|a| self.world.resolve(a)) else {
                continue;
            };
            let by_skill = task
                .skill
                .as_deref()
                .and_then(|s| self.world.skill(s))
                .map(|(p, _, _)| p);
            let acting = by_skill.or_else(|| self.acting(&task.parent));
            self.check_one_run(&agent, acting, &task.parent, task.skill.as_deref());
        }
    }

    pub fn check_one_run(
        &mut self,
        target: &Target,
        acting: Option<usize>,
        session: &str,
        fork: Option<&str>,
    ) {
        let what = match fork {
            Some(skill) => format!("fork of {skill} into {}", target.qualified()),
            None => format!(
                "{} in {}",
                target.qualified(),
                if acting.is_some() {
                    "a sub-agent"
                } else {
                    "the conversation"
                }
            ),
        };
        if self.model.stopped {
            self.report(
                Invariant::NothingUnderStop,
                "ran-under-stop",
                format!("{what} ran under the emergency stop"),
            );
        }
        let home = acting == Some(target.package());
        if home {
            return;
        }
        if Session::private(self.world, target) {
            let tag = match (fork, target) {
                (Some(_), _) => "fork-into-private-agent",
                (None, Target::Agent(..)) => "private-agent-ran-outside",
                _ => "private-tool-ran-outside",
            };
            self.report(
                Invariant::PrivateStaysHome,
                tag,
                format!("{what}: private to p{}", target.package()),
            );
        } else if !self.consented(session, target.package()) {
            let tag = match (fork, acting) {
                (Some(_), _) => "fork-without-consent",
                (None, Some(_)) => "sub-agent-call-without-consent",
                (None, None) => "exposed-ran-without-consent",
            };
            self.report(
                Invariant::ConsentBeforeExposed,
                tag,
                format!("{what}: no consent for p{}", target.package()),
            );
        }
    }
}
