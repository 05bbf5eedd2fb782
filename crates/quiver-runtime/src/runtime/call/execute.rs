//! Step 6: execute. A perception tool with `cache` may answer from the perception cache in
//! the store (keyed by tool, arguments, sender and origin; never for secret arguments).
//! Otherwise the call is recorded as started and run: a tool or a skill script by the executor
//! in its package's sandbox, with the call's context; an agent or a forked skill by the agent
//! loop in a child session. What the sandbox refuses is final for the turn.

use std::time::{Duration, Instant};

use quiver_package::tool::{Category, Run};
use quiver_policy::{Evaluation, Lockout, Refusal, RefusalReason};
use quiver_store::{AuditEntry, AuditStep, argument_digest};
use serde_json::{Value, json};

use super::audit::{decision, redact, secret_fields};
use super::{Runs, Target};
use crate::executor::{Ask, ExecError, Execution, Started};
use crate::runtime::agent_calls::AgentTask;
use crate::runtime::cache::CacheKey;
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

/// How long a skill script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a call that ran returned.
pub(in crate::runtime) struct Ran {
    /// Its result.
    pub value: Value,
    /// Whether it came from the perception cache.
    pub cached: bool,
    /// The perception cache's key for it, when the result may be cached.
    pub cache_key: Option<CacheKey>,
}

impl Ran {
    fn fresh(value: Value) -> Ran {
        Ran {
            value,
            cached: false,
            cache_key: None,
        }
    }
}

impl Turn<'_> {
    /// Runs `target` with `arguments`: its result, or what the model reads instead.
    pub(in crate::runtime) fn execute(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        evaluation: &Evaluation,
        audit: &mut AuditEntry,
    ) -> Result<Result<Ran, CallOutcome>, RuntimeError> {
        match &target.runs {
            Runs::Tool(tool) => {
                let cache_key = tool
                    .cache
                    .filter(|_| tool.category == Category::Perception)
                    .and_then(|seconds| self.cache_key(target, &tool.input, arguments, seconds));
                if let Some(key) = &cache_key
                    && let Some(value) = self.runtime.cached_result(key)
                {
                    audit.decisions.push(decision(
                        AuditStep::Cache,
                        "hit",
                        &format!("identical call within {} s", key.seconds()),
                    ));
                    return Ok(Ok(Ran {
                        value,
                        cached: true,
                        cache_key: None,
                    }));
                }
                let mcp_command = match &tool.run {
                    Run::Mcp { server, .. } => target
                        .package
                        .manifest
                        .mcp_servers
                        .get(server)
                        .map(|s| s.command.as_slice()),
                    _ => None,
                };
                let sandboxed = Sandboxed {
                    run: &tool.run,
                    name: tool.name.as_str(),
                    // A workflow step's own `timeout` is its attempt's limit.
                    timeout: self
                        .step
                        .as_ref()
                        .and_then(|s| s.timeout)
                        .unwrap_or(tool.timeout),
                    dir: tool.file.parent().unwrap_or(&target.package.root),
                    permissions: &tool.permission,
                    script: false,
                    mcp_command,
                    limits: tool.limits,
                };
                let ran =
                    self.run_sandboxed(call_id, target, arguments, evaluation, &sandboxed, audit)?;
                Ok(ran.map(|value| Ran {
                    value,
                    cached: false,
                    cache_key,
                }))
            }
            Runs::Script {
                skill,
                command,
                script,
            } => {
                audit.decisions.push(decision(
                    AuditStep::Script,
                    "run",
                    &format!("{}: scripts/{script}", skill.id),
                ));
                let run = Run::Command(command.clone());
                let sandboxed = Sandboxed {
                    run: &run,
                    name: target.facts.name,
                    timeout: SCRIPT_TIMEOUT,
                    dir: &skill.dir,
                    permissions: &target.package.manifest.permissions,
                    script: true,
                    mcp_command: None,
                    limits: Default::default(),
                };
                let ran =
                    self.run_sandboxed(call_id, target, arguments, evaluation, &sandboxed, audit)?;
                Ok(ran.map(Ran::fresh))
            }
            Runs::Agent => {
                let task = arguments
                    .get("task")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let task = self.agent_task(call_id, Some(target.qualified.clone()), None, task);
                self.record_started(audit, super::audit::Phase::Running)?;
                Ok(self
                    .hand_over(call_id, task, audit)
                    .map(Ran::fresh)
                    .map_err(|e| *e))
            }
            Runs::ForkedSkill(skill) => {
                let package = target.package.id.as_str();
                let agent = skill.meta.agent.as_ref().map(|name| {
                    if name.contains('.') {
                        name.clone()
                    } else {
                        format!("{package}.{name}")
                    }
                });
                audit
                    .decisions
                    .push(decision(AuditStep::Skill, "fork", &skill.id));
                let request = if self.message.trim().is_empty() {
                    String::new()
                } else {
                    format!("\n\nThe request: {}", self.message.trim())
                };
                let text = format!("{}{request}", skill.body.trim());
                let task = self.agent_task(call_id, agent, Some(skill.id.clone()), text);
                self.record_started(audit, super::audit::Phase::Running)?;
                Ok(self
                    .hand_over(call_id, task, audit)
                    .map(|mut value| {
                        if let Value::Object(map) = &mut value {
                            map.insert("skill".into(), json!(skill.id));
                        }
                        Ran::fresh(value)
                    })
                    .map_err(|e| *e))
            }
            Runs::Workflow if self.runtime.workflow_store().is_some() => {
                self.start_workflow(call_id, target, arguments, audit)
            }
            Runs::Workflow => {
                audit.decisions.push(decision(
                    AuditStep::Execute,
                    "error",
                    "workflows run with the workflow engine",
                ));
                Ok(Err(CallOutcome::new(
                    call_id,
                    CallStatus::Error,
                    json!({"error": format!("`{}` is a workflow; calling it needs the workflow engine, which this runtime does not run yet", target.asked_as)}),
                )))
            }
        }
    }

    /// The perception cache's key for a call, fresh for `seconds`: the same result never
    /// answers another sender or origin. `None` when the arguments hold a field that `input`
    /// marks secret: such a call is never cached.
    fn cache_key(
        &self,
        target: &Target<'_>,
        input: &Value,
        arguments: &Value,
        seconds: u64,
    ) -> Option<CacheKey> {
        let secrets = secret_fields(input);
        if !secrets.is_empty() && redact(arguments, &secrets) != *arguments {
            return None;
        }
        Some(CacheKey::new(
            &target.qualified,
            arguments,
            &serde_json::to_value(&self.sender).unwrap_or_default(),
            &serde_json::to_value(&self.origin).unwrap_or_default(),
            seconds,
        ))
    }

    /// Runs a tool or a script in its package's sandbox, recorded as started first.
    fn run_sandboxed(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        arguments: &Value,
        evaluation: &Evaluation,
        sandboxed: &Sandboxed<'_>,
        audit: &mut AuditEntry,
    ) -> Result<Result<Value, CallOutcome>, RuntimeError> {
        // A workflow step's key is the run's (the same across retries and restarts).
        let key = match &self.step {
            Some(step) => step.idempotency_key.clone(),
            None => format!("{}:{}", target.qualified, argument_digest(arguments, &[])),
        };
        let context = self.call_context(
            call_id,
            serde_json::to_value(&evaluation.trace).unwrap_or_default(),
            key,
        );
        let answer = |q: &str| self.person().and_then(|p| p.answer_question(q));
        let step = self.step.as_ref().zip(self.runtime.workflow_store());
        let record = |pgid: u32| {
            if let Some((step, store)) = step {
                step.record_process(store.as_ref(), pgid);
            }
        };
        let execution = Execution {
            package: target.package.id.as_str(),
            tool: sandboxed.name,
            run: sandboxed.run,
            package_dir: &target.package.root,
            arguments,
            context: &context,
            timeout: sandboxed.timeout,
            tool_dir: sandboxed.dir,
            permissions: sandboxed.permissions,
            settings: self.runtime.config.settings.get(target.package.id.as_str()),
            ask: (!self.unattended && !sandboxed.script).then_some(Ask(&answer)),
            script: sandboxed.script,
            mcp_command: sandboxed.mcp_command,
            limits: sandboxed.limits,
            started: step.is_some().then_some(Started(&record)),
        };
        if let Some(note) = self.runtime.executor.isolation_note() {
            audit
                .decisions
                .push(decision(AuditStep::Sandbox, "off", &note));
        }
        if !self.runtime.executor.in_process(&execution) {
            self.record_started(audit, super::audit::Phase::Running)?;
        }
        let error = match self.runtime.executor.execute(&execution) {
            Ok(value) => return Ok(Ok(value)),
            Err(error) => error,
        };
        let name = &target.asked_as;
        Ok(Err(match error {
            ExecError::Denied(reason) => {
                audit
                    .decisions
                    .push(decision(AuditStep::Sandbox, "refused", &reason));
                // Final for the turn (DESIGN.md §3): later calls of it are refused at once.
                let refusal = Refusal::new(
                    RefusalReason::SandboxDenied { why: reason },
                    Lockout {
                        tool: target.qualified.clone(),
                        categories: Vec::new(),
                    },
                );
                self.state.record_refusal(&refusal);
                CallOutcome::refused(call_id, &refusal)
            }
            ExecError::TimedOut(d) => {
                audit
                    .decisions
                    .push(decision(AuditStep::Execute, "timed_out", &format!("{d:?}")));
                CallOutcome::new(
                    call_id,
                    CallStatus::TimedOut,
                    json!({"error": format!("`{name}` timed out after {} s and was stopped", d.as_secs_f64())}),
                )
            }
            err => {
                audit
                    .decisions
                    .push(decision(AuditStep::Execute, "error", &err.to_string()));
                audit.detail = Some(json!({"error": err.to_string()}));
                CallOutcome::new(
                    call_id,
                    CallStatus::Error,
                    json!({"error": err.to_string()}),
                )
            }
        }))
    }

    /// What the agent loop runs for a call: `task` for `agent` (or the forked `skill`), in a
    /// child session of this one, asking this turn's person.
    fn agent_task(
        &self,
        call_id: &str,
        agent: Option<String>,
        skill: Option<String>,
        task: String,
    ) -> AgentTask {
        AgentTask {
            call_id: call_id.to_owned(),
            parent_session: self.session.clone(),
            agent,
            skill,
            task,
            sender: self.sender.clone(),
            person: if self.unattended {
                None
            } else {
                self.person().cloned()
            },
            deadline: self
                .step
                .as_ref()
                .and_then(|s| s.timeout)
                .map(|t| Instant::now() + t),
            catalog: self.catalog.clone(),
        }
    }

    /// Hands `task` to the agent loop: its reply, or what the model reads instead.
    fn hand_over(
        &self,
        call_id: &str,
        task: AgentTask,
        audit: &mut AuditEntry,
    ) -> Result<Value, Box<CallOutcome>> {
        let error = |message: &str| {
            Box::new(CallOutcome::new(
                call_id,
                CallStatus::Error,
                json!({"error": message}),
            ))
        };
        let Some(runner) = self.runtime.agent_runner.get() else {
            audit.decisions.push(decision(
                AuditStep::Execute,
                "error",
                "no agent loop is running in this front",
            ));
            return Err(error(
                "running an agent needs Quiver's agent loop (`quiver chat`); this front has none",
            ));
        };
        match runner.run(self.runtime, task) {
            Ok(reply) => {
                audit.decisions.push(decision(
                    AuditStep::Execute,
                    "agent",
                    &format!("ran in child session {}", reply.session),
                ));
                audit.detail = Some(json!({"child_session": reply.session}));
                Ok(json!({"result": reply.reply, "session": reply.session}))
            }
            Err(message) => {
                audit
                    .decisions
                    .push(decision(AuditStep::Execute, "error", &message));
                Err(error(&message))
            }
        }
    }
}

/// How a tool or a script runs in the sandbox.
struct Sandboxed<'a> {
    run: &'a Run,
    name: &'a str,
    timeout: Duration,
    dir: &'a std::path::Path,
    permissions: &'a quiver_package::common::Permissions,
    script: bool,
    mcp_command: Option<&'a [String]>,
    limits: quiver_package::limits::ResourceLimits,
}
