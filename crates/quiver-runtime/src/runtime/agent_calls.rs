//! Calls of agents and forked skills: the runtime governs them like any item (resolution,
//! visibility, admission, package consent, audit) and hands the run itself to the
//! [`AgentRunner`] the front set with [`Runtime::set_agent_runner`] (the agent loop of
//! `quiver-agent`), which runs it in a child session and returns its last reply.

use std::sync::Arc;

use quiver_catalog::ItemKind;
use quiver_package::skill::Skill;
use quiver_package::tool::{Approval, Category};
use quiver_policy::{Decision, Presence, Principal, Stage, ToolFacts, Visibility};
use quiver_store::AuditEntry;
use serde_json::{Value, json};

use super::authorize::Authorize;
use super::{CallOutcome, CallStatus, Runtime, RuntimeError, Turn, decision, trace};
use crate::approver::Approver;
use crate::presence::is_offered;

/// A run the runtime hands to the agent loop: an exposed agent called with `{task}`, or a
/// skill with `context: fork`.
pub struct AgentTask {
    /// The call's id in the parent session.
    pub call_id: String,
    /// The session that made the call; the run gets a child session of it.
    pub parent_session: String,
    /// The agent, `<package>.<agent>`; `None` for a forked skill that names no agent.
    pub agent: Option<String>,
    /// The forked skill's id, when a skill runs.
    pub skill: Option<String>,
    /// What the run is asked to do: the agent's `task`, or the skill's instructions and the
    /// request.
    pub task: String,
    /// Who is talking in the parent turn.
    pub sender: Principal,
    /// Who answers the parent turn's questions (the child asks the same person).
    pub person: Option<Arc<dyn Approver>>,
}

/// What a run returns: the child session and its last reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentReply {
    /// The child session it ran in.
    pub session: String,
    /// Its last reply: the call's result.
    pub reply: String,
}

/// Runs agents and forked skills (set by the agent loop; without one, such calls end with a
/// clear error).
pub trait AgentRunner: Send + Sync {
    /// Runs `task` on `runtime` and returns the last reply, or why it could not run.
    fn run(&self, runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String>;
}

impl Runtime {
    /// Sets who runs agents and forked skills; the first runner set stays.
    pub fn set_agent_runner(&self, runner: Arc<dyn AgentRunner>) -> bool {
        self.agent_runner.set(runner).is_ok()
    }
}

impl Turn<'_> {
    /// Steps 1–8 for an item that is not a tool: an agent runs through the runner, a workflow
    /// needs the workflow engine.
    pub(super) fn agent_call(
        &mut self,
        call_id: &str,
        wire: &str,
        index: usize,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let outcome = |status, content| CallOutcome::new(call_id, status, content);
        let catalog = self.catalog.clone();
        let item = &catalog.items()[index];
        let package = &catalog.packages()[item.package].package;
        let agent = match item.kind {
            ItemKind::Agent => package.agents.get(item.index),
            _ => None,
        };
        let Some(agent) = agent else {
            audit.decisions.push(decision(
                "execute",
                "error",
                "workflows run with the workflow engine",
            ));
            return Ok(outcome(
                CallStatus::Error,
                json!({"error": format!("`{wire}` is a workflow; calling it needs the workflow engine, which this runtime does not run yet")}),
            ));
        };
        // An agent only reasons; each tool it calls is governed on its own in its session.
        let mut facts = ToolFacts::new(package.id.as_str(), agent.name.as_str());
        facts.category = Category::Decision;
        facts.approval = Approval::Never;
        facts.visibility = if agent.expose {
            Visibility::Exposed
        } else {
            Visibility::Private
        };
        let view = self.view()?;
        let always = self.runtime.always_loaded(&catalog);
        let in_list = is_offered(&catalog, &view, &always.resident, index, &|i| {
            self.admitted(i)
        });
        let evaluation = self.evaluate(
            facts,
            if in_list {
                Presence::Offered
            } else {
                Presence::Loadable
            },
            None,
        );
        audit.decisions.extend(trace(&evaluation));
        if matches!(
            evaluation.deciding_stage(),
            Some(Stage::Visibility | Stage::Admission)
        ) || matches!(evaluation.decision, Decision::Unknown)
        {
            return Ok(self.refused(call_id, &evaluation));
        }
        if !in_list {
            self.runtime.store.load_tool(
                &self.session,
                &item.qualified,
                self.runtime.config.max_loaded,
            )?;
        }
        let Some(task) = arguments
            .get("task")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
        else {
            audit.decisions.push(decision(
                "validate",
                "invalid",
                "`task` is a required string",
            ));
            return Ok(outcome(
                CallStatus::Invalid,
                json!({"error": "invalid arguments: `task` is required: a string saying what the agent should do"}),
            ));
        };
        // Step 5, with the operator's hooks first, as for every call.
        if let Some(stop) = self.authorize(
            &Authorize {
                call_id,
                qualified: &item.qualified,
                package: package.id.as_str(),
                category: "decision",
                arguments,
                evaluation: &evaluation,
            },
            audit,
        )? {
            return Ok(stop);
        }
        let task = AgentTask {
            call_id: call_id.to_owned(),
            parent_session: self.session.clone(),
            agent: Some(item.qualified.clone()),
            skill: None,
            task: task.to_owned(),
            sender: self.sender.clone(),
            person: if self.unattended {
                None
            } else {
                self.person().cloned()
            },
        };
        Ok(self.hand_over(call_id, task, audit))
    }

    /// A skill with `context: fork` runs in a child session with its `agent` instead of
    /// becoming active here; `None` for any other skill.
    pub(super) fn forked_skill(
        &mut self,
        call_id: &str,
        skill: &Skill,
        audit: &mut AuditEntry,
    ) -> Option<CallOutcome> {
        if !skill.meta.fork {
            return None;
        }
        let package = skill.id.split('/').next().unwrap_or(&skill.id);
        let agent = skill.meta.agent.as_ref().map(|name| {
            if name.contains('.') {
                name.clone()
            } else {
                format!("{package}.{name}")
            }
        });
        let instructions = skill.body.clone();
        audit.decisions.push(decision("skill", "fork", &skill.id));
        let request = if self.message.trim().is_empty() {
            String::new()
        } else {
            format!("\n\nThe request: {}", self.message.trim())
        };
        let task = AgentTask {
            call_id: call_id.to_owned(),
            parent_session: self.session.clone(),
            agent,
            skill: Some(skill.id.clone()),
            task: format!("{}{request}", instructions.trim()),
            sender: self.sender.clone(),
            person: if self.unattended {
                None
            } else {
                self.person().cloned()
            },
        };
        let mut out = self.hand_over(call_id, task, audit);
        if let Value::Object(map) = &mut out.content {
            map.insert("skill".into(), json!(skill.id));
        }
        Some(out)
    }

    fn hand_over(&self, call_id: &str, task: AgentTask, audit: &mut AuditEntry) -> CallOutcome {
        let mut out = CallOutcome::new(call_id, CallStatus::Error, Value::Null);
        let Some(runner) = self.runtime.agent_runner.get() else {
            audit.decisions.push(decision(
                "execute",
                "error",
                "no agent loop is running in this front",
            ));
            out.content = json!({"error": "running an agent needs Quiver's agent loop (`quiver chat`); this front has none"});
            return out;
        };
        match runner.run(self.runtime, task) {
            Ok(reply) => {
                audit.decisions.push(decision(
                    "execute",
                    "agent",
                    &format!("ran in child session {}", reply.session),
                ));
                audit.detail = Some(json!({"child_session": reply.session}));
                out.status = CallStatus::Ok;
                out.content = json!({"result": reply.reply, "session": reply.session});
            }
            Err(message) => {
                audit.decisions.push(decision("execute", "error", &message));
                out.content = json!({"error": message});
            }
        }
        out
    }
}
