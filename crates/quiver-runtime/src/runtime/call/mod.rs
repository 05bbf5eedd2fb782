//! The call pipeline of DESIGN.md §3, one file per step, in the manner of mini-redis's `cmd/`:
//! [`resolve`] (step 1), [`visibility`] (step 2), [`restrictions`] (step 3), [`validate`]
//! (step 4), [`authorize`] (step 5, hooks first), [`execute`] (step 6), [`output`] (step 7) and
//! [`audit`] (step 8).
//!
//! Every kind of call ([`CallKind`]) is a [`Target`] of this one pipeline: a package tool, an
//! external MCP tool, an agent or a forked skill (as `decision` calls), a skill script (as an
//! `action` call with its package's permissions). Nothing runs that did not pass every step,
//! so the control plane, consent, approval, hooks, lockouts and the audit apply to all of them.
//! Meta-tools (`crate::runtime::meta`) answer from the runtime itself; the one that runs
//! something, `run_skill_script`, builds a [`Target`] and hands it here.

pub(super) mod audit;
pub(super) mod authorize;
pub(super) mod execute;
pub(super) mod output;
pub(super) mod resolve;
pub(super) mod restrictions;
pub(super) mod validate;
pub(super) mod visibility;

use quiver_package::Package;
use quiver_package::skill::Skill;
use quiver_package::tool::Tool;
use quiver_policy::ToolFacts;
use quiver_store::AuditEntry;
use serde::Serialize;
use serde_json::Value;

use super::{CallOutcome, RuntimeError, Turn};

/// The kind of a call, as its outcome and the audit name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A package's tool, run by its command in the package's sandbox.
    PackageTool,
    /// A tool of an external MCP server (a package of the `mcp_servers` config, or a package's
    /// own `run: {mcp: ...}` tool).
    McpTool,
    /// A meta-tool (`read_skill`, `tool_search`, `load_tool`, `ask_user`, `tool_output`),
    /// answered by the runtime itself.
    Meta,
    /// An agent, a `decision` call run by the agent loop in a child session.
    Agent,
    /// A skill with `context: fork`, a `decision` call run in a child session.
    ForkedSkill,
    /// A script of an active skill, an `action` call with its package's permissions.
    SkillScript,
    /// A workflow of a package.
    Workflow,
}

/// What runs when a call has passed steps 1–5.
pub(super) enum Runs<'c> {
    /// A tool's `run` (a command or an MCP server's tool).
    Tool(&'c Tool),
    /// A skill's script: the command that runs it, in the skill's folder.
    Script {
        /// The skill the script belongs to.
        skill: &'c Skill,
        /// Interpreter, script and arguments.
        command: Vec<String>,
        /// The script as named under `scripts/`.
        script: String,
    },
    /// An agent (`<package>.<agent>`), with the call's `task`.
    Agent,
    /// A skill with `context: fork`, with the turn's message as the request.
    ForkedSkill(&'c Skill),
    /// A workflow.
    Workflow,
}

/// A call resolved to what it runs, with the facts the policy decides on.
pub(super) struct Target<'c> {
    /// Its kind.
    pub kind: CallKind,
    /// The name as the caller gave it (answers about it say this name).
    pub asked_as: String,
    /// `<package>.<name>`: the name in the policy, hooks, cards and the audit.
    pub qualified: String,
    /// Its package.
    pub package: &'c Package,
    /// What the policy knows of it.
    pub facts: ToolFacts<'c>,
    /// Its catalog item, when it has one (a direct call loads it into the session).
    pub item: Option<usize>,
    /// Whether the item is in the caller's tool list now (else it is only loadable).
    pub offered: bool,
    /// Whether a call moves it to the front of the session's loaded tools (it is loaded, but
    /// not the most recently used).
    pub touch: bool,
    /// Its input schema, validated in step 4 (`None`: the arguments were checked already).
    pub input: Option<&'c Value>,
    /// The string that `allowed-tools` patterns such as `Bash(git:*)` match.
    pub first_string: Option<String>,
    /// What runs.
    pub runs: Runs<'c>,
}

impl Turn<'_> {
    /// Steps 2–7 for a resolved `target` with `arguments`: what the model reads. The caller
    /// (step 1, and step 8's record) is [`Turn::call`] or a meta-tool that runs something.
    pub(super) fn run_target(
        &mut self,
        call_id: &str,
        target: &Target<'_>,
        mut arguments: Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        Turn::audit_target(audit, target, &arguments);
        // Steps 2–3: visibility, admission and the turn's restrictions, as the policy decides.
        let evaluation = self.evaluate(target);
        audit.decisions.extend(audit::trace(&evaluation));
        if let Some(stop) = self.stop_unreachable(call_id, target, &evaluation) {
            return Ok(stop);
        }
        self.load_into_session(target)?;
        if let Some(stop) = self.stop_unconfigured(call_id, target, audit) {
            return Ok(stop);
        }
        // Step 4.
        let dates = match self.validate(call_id, target, &mut arguments, audit)? {
            Ok(dates) => dates,
            Err(stop) => return Ok(stop),
        };
        // Step 5.
        if let Some(stop) = self.authorize(call_id, target, &arguments, &evaluation, audit)? {
            return Ok(stop);
        }
        // Step 6.
        let ran = match self.execute(call_id, target, &arguments, &evaluation, audit)? {
            Ok(ran) => ran,
            Err(stop) => return Ok(stop),
        };
        // Step 7.
        Ok(self.output(call_id, target, ran, &dates, audit))
    }
}
