//! A [`Turn`]: what its caller is admitted to and offered (tools, skills, the system prompt),
//! and its entry points into the call pipeline.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use quiver_catalog::{Catalog, Entry, EntryKind, Item};
use quiver_policy::{Restrictions, TurnState, admit};
use quiver_store::AuditStep;
use serde_json::{Value, json};

use super::call::audit::decision;
use super::call::resolve::agent_input;
use super::definitions;
use super::meta::MetaTool;
use super::meta::read_skill::Invoker;
use super::{CallKind, CallOutcome, NotConfigured, Offer, RuntimeError, ToolDefinition, Turn};
use crate::approver::Approver;
use crate::executor::CallContext;
use crate::ids::new_id;
use crate::presence::{SessionView, offered};
use crate::prompt::{NamedSection, PromptReport, assemble_sections};
use quiver_store::SessionPresence;

impl Turn<'_> {
    /// Makes `person` the one who answers this turn's questions (the front's own channel to the
    /// user: an MCP client's elicitation, a chat terminal), instead of the runtime's default.
    pub fn set_person(&mut self, person: Arc<dyn Approver>) {
        self.person = Some(person);
    }

    /// This turn's restrictions and lockouts (active skills' lists, refusals), for a front
    /// whose turn spans several requests (an MCP conversation) to carry to the next.
    pub fn turn_state(&self) -> &TurnState {
        &self.state
    }

    /// Continues an earlier request's restrictions and lockouts in this turn (see
    /// [`Turn::turn_state`]).
    pub fn continue_turn(&mut self, state: TurnState) {
        self.state = state;
    }

    /// Tells the turn which active skills' instructions the caller's transcript still holds
    /// (a chat loop's conversation, an MCP connection). Reading one of them again answers
    /// "already active"; any other active skill's instructions are given again, since a front
    /// that does not carry its transcript (`quiver call`, a new MCP client on a handle) has
    /// not seen them.
    pub fn transcript_holds<I, S>(&mut self, skills: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.in_transcript
            .extend(skills.into_iter().map(Into::into));
    }

    /// The skills whose instructions the transcript holds after this turn: those the front
    /// told [`Turn::transcript_holds`] and those this turn delivered.
    pub fn skills_in_transcript(&self) -> &BTreeSet<String> {
        &self.in_transcript
    }

    /// Tells the runtime which model this turn talks to: skills bound to a `model` are shown
    /// only to that model (until this is called, to none).
    pub fn set_model(&mut self, model: &str) {
        self.model = Some(model.to_owned());
    }

    /// Whether `package` is on: neither the operator nor this conversation's user switched
    /// it off.
    pub(in crate::runtime) fn enabled(&self, package: &str) -> bool {
        self.runtime.is_enabled(package) && !self.session_disabled.contains(package)
    }

    /// The context a tool or script of this turn gets with its arguments (DESIGN.md §3 step 6).
    pub(in crate::runtime) fn call_context(
        &self,
        call_id: &str,
        policy: Value,
        idempotency_key: String,
    ) -> CallContext {
        CallContext {
            call_id: call_id.to_owned(),
            session_id: self.session.clone(),
            origin: serde_json::to_value(&self.origin).unwrap_or_default(),
            principal: serde_json::to_value(&self.sender).unwrap_or_default(),
            unattended: self.unattended,
            policy,
            idempotency_key,
        }
    }

    pub(in crate::runtime) fn person(&self) -> Option<&Arc<dyn Approver>> {
        self.person
            .as_ref()
            .or(self.runtime.approvers.person.as_ref())
    }

    /// The session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The snapshot this turn pinned.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The session's presence state as this turn sees it: an active skill counts (its tools
    /// unlocked, its lists applied) only while it admits this turn's sender and origin. A
    /// turn outside any session ([`Runtime::offer_outside_session`]) has nothing open.
    pub(in crate::runtime) fn view(&self) -> Result<SessionView, RuntimeError> {
        if self.session.is_empty() {
            return Ok(SessionView {
                agent: self.own_agent.clone(),
                declared: self.declared_by_agent(),
                ..SessionView::default()
            });
        }
        let presence = self.presence()?;
        let active_skills: BTreeSet<String> = presence
            .active_skills
            .iter()
            .filter(|id| self.skill_holds(id))
            .cloned()
            .collect();
        let unlocked = active_skills
            .iter()
            .filter_map(|id| {
                let package = id.split('/').next().unwrap_or(id);
                let (_, skill) = self.find_skill(id)?;
                Some(
                    skill
                        .unlocks
                        .iter()
                        .map(move |name| format!("{package}.{name}")),
                )
            })
            .flatten()
            .collect();
        Ok(SessionView {
            opened: presence.opened.iter().cloned().collect(),
            loaded: presence.loaded.clone(),
            active_skills,
            unlocked,
            agent: self.own_agent.clone().or_else(|| self.step_package()),
            declared: self.declared_by_agent(),
        })
    }

    /// For a session of a package's agent, the items its `tools:` declares (qualified names;
    /// a declared name that is no item, or a meta-tool, adds nothing).
    fn declared_by_agent(&self) -> Option<BTreeSet<String>> {
        let (package, agent) = self.own_agent.as_ref()?;
        let declared = &self.agent_definition(package, agent)?.tools;
        Some(
            declared
                .iter()
                .filter_map(|name| {
                    self.catalog
                        .item(name)
                        .or_else(|| self.catalog.item_by_wire(name))
                        .or_else(|| self.catalog.item(&format!("{package}.{name}")))
                        .map(|item| item.qualified.clone())
                })
                .collect(),
        )
    }

    /// The definition of `package`'s agent `agent` in this turn's snapshot.
    fn agent_definition(
        &self,
        package: &str,
        agent: &str,
    ) -> Option<&quiver_package::agent::Agent> {
        self.catalog
            .package(package)
            .filter(|cp| !cp.shadowed)?
            .package
            .agents
            .iter()
            .find(|a| a.name.as_str() == agent)
    }

    /// Whether this session's package agent may read the skill `id`: one of its own skills, or
    /// one its `skills:` lists (by id, or by name within its package). Any other caller may.
    fn agent_may_read(&self, id: &str) -> bool {
        let Some((package, agent)) = &self.own_agent else {
            return true;
        };
        let Some(definition) = self.agent_definition(package, agent) else {
            return false;
        };
        id.starts_with(&format!("{package}/{agent}/"))
            || definition.skills.iter().any(|s| {
                s == id || format!("{package}/{s}") == id || (s == package && id == package)
            })
    }

    /// The session's opened packages, loaded tools and active skills as the store holds them
    /// now. The three sets are read again only when the session's presence stamp moved since
    /// this turn last read them: any write to them (this turn's `load_tool`, `read_skill`, a
    /// direct call's load or touch, another turn or process on the same session, a reset)
    /// moves the stamp, so a turn never acts on a stale copy, and a call or an offer costs one
    /// integer read while nothing changed. A store that keeps no stamp is read every time.
    fn presence(&self) -> Result<Arc<SessionPresence>, RuntimeError> {
        let mut cached = self
            .presence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, presence)) = cached.as_ref()
            && self.runtime.store.presence_stamp(&self.session)? == Some(*seen)
        {
            return Ok(presence.clone());
        }
        // The first read of the turn, or the stamp moved: the stamp and the sets together
        // (the stamp read first, or from the same snapshot, so it is never newer than them).
        let (stamp, presence) = self.runtime.store.stamped_presence(&self.session)?;
        let presence = Arc::new(presence);
        *cached = stamp.map(|stamp| (stamp, presence.clone()));
        Ok(presence)
    }

    /// Loads item `index` into the session's loaded slots: its whole package for an exposed
    /// item (see [`crate::presence::slot`]), least recently used evicted first.
    pub(in crate::runtime) fn load_item(&self, index: usize) -> Result<(), RuntimeError> {
        let item = &self.catalog.items()[index];
        self.runtime.store.load_tool(
            &self.session,
            crate::presence::slot(&self.catalog, item),
            self.runtime.config.max_loaded,
        )?;
        Ok(())
    }

    /// For a workflow step's turn, the run's package as the session's own (its private items
    /// may be named; agent-scoped tools stay closed: no agent is named).
    fn step_package(&self) -> Option<(String, String)> {
        self.step
            .as_ref()
            .map(|step| (step.package.clone(), String::new()))
    }

    /// Whether the active skill `id` still has effect in this turn: its package is on and it
    /// admits this turn's sender and origin (a skill a trusted sender opened does nothing for
    /// a plain user of the same session).
    pub(in crate::runtime) fn skill_holds(&self, id: &str) -> bool {
        let package_id = id.split('/').next().unwrap_or(id);
        self.enabled(package_id)
            && self.find_skill(id).is_some_and(|(_, skill)| {
                admit(
                    &Restrictions::of_skill(&skill.meta),
                    &self.origin,
                    &self.sender,
                )
                .admitted
            })
    }

    pub(in crate::runtime) fn package_of(&self, item: &Item) -> &quiver_package::Package {
        &self.catalog.packages()[item.package].package
    }

    /// This turn's admission of an item: its package is on, its settings are set, and the
    /// origin and this turn's sender meet its restrictions.
    pub(in crate::runtime) fn admitted(&self, item: &Item) -> bool {
        self.admitted_unconfigured(item)
            && self
                .catalog
                .tool(item)
                .is_none_or(|_| self.missing_setting(self.package_of(item)).is_none())
    }

    /// This turn's admission of an item, whether or not its package's settings are set: a
    /// call of such a tool is told which setting is missing instead of "unknown tool".
    pub(in crate::runtime) fn admitted_unconfigured(&self, item: &Item) -> bool {
        let package = self.package_of(item);
        if !self.enabled(package.id.as_str()) {
            return false;
        }
        self.catalog.tool(item).is_none_or(|tool| {
            admit(&Restrictions::of_tool(tool), &self.origin, &self.sender).admitted
        })
    }

    /// A required package setting that is unset, if any.
    pub(in crate::runtime) fn missing_setting(
        &self,
        package: &quiver_package::Package,
    ) -> Option<String> {
        let required = package
            .manifest
            .config
            .as_ref()?
            .get("required")?
            .as_array()?;
        let set = self.runtime.config.settings.get(package.id.as_str());
        required
            .iter()
            .filter_map(Value::as_str)
            .find(|key| set.is_none_or(|s| !s.contains_key(*key)))
            .map(str::to_owned)
    }

    pub(in crate::runtime) fn entry_admitted(&self, entry: &Entry) -> bool {
        if let Some(p) = entry.package
            && !self.enabled(self.catalog.packages()[p].package.id.as_str())
        {
            return false;
        }
        match entry.kind {
            EntryKind::Builtin => self.meta_tools().iter().any(|m| m.name() == entry.id),
            EntryKind::Skill => self.skill_visible(&entry.id).is_some(),
            EntryKind::Package => true,
            // Only items shown outside their package: a skill's or an agent's own tool is
            // offered once its skill is read (or to its agent), never listed before.
            _ => entry.item.is_some_and(|i| {
                let item = &self.catalog.items()[i];
                crate::presence::public(&self.catalog, item) && self.admitted(item)
            }),
        }
    }

    /// The meta-tools this turn offers: the agent profile's, without `ask_user` when unattended.
    pub(in crate::runtime) fn meta_tools(&self) -> Vec<MetaTool> {
        let listed = self.runtime.config.agent_meta_tools.get(&self.agent);
        MetaTool::ALL
            .into_iter()
            .filter(|m| listed.is_some_and(|l| l.iter().any(|x| x == m.name())))
            .filter(|m| !(self.unattended && *m == MetaTool::AskUser))
            .filter(|m| *m != MetaTool::GetRun || self.runtime.workflow_store().is_some())
            .collect()
    }

    /// The skill with `id` if the model may see it this turn.
    pub(in crate::runtime) fn skill_visible(
        &self,
        id: &str,
    ) -> Option<(&quiver_package::Package, &quiver_package::skill::Skill)> {
        self.skill_admitted(id, Invoker::Model)
    }

    /// The skill with `id` in this turn's snapshot (see [`find_skill`]).
    pub(in crate::runtime) fn find_skill(
        &self,
        id: &str,
    ) -> Option<(&quiver_package::Package, &quiver_package::skill::Skill)> {
        find_skill(&self.catalog, self.own_agent.as_ref(), id)
    }

    /// The skills a person may start by hand this turn ([`Turn::start_skill_by_user`]), in
    /// catalog order.
    pub fn skills_for_user(&self) -> Vec<&quiver_package::skill::Skill> {
        self.catalog
            .packages()
            .iter()
            .filter(|cp| !cp.shadowed)
            .flat_map(|cp| cp.package.all_skills())
            .filter(|s| self.skill_admitted(&s.id, Invoker::User).is_some())
            .collect()
    }

    /// The skill with `id` if `invoker` may start it this turn: its package is on, the origin
    /// and sender meet its restrictions, and this turn's model is the one it is bound to (if
    /// any). `disable-model-invocation` hides it from the model only; `user-invocable: false`
    /// from the user only.
    pub(in crate::runtime) fn skill_admitted(
        &self,
        id: &str,
        invoker: Invoker,
    ) -> Option<(&quiver_package::Package, &quiver_package::skill::Skill)> {
        let package_id = id.split('/').next()?;
        if !self.enabled(package_id) {
            return None;
        }
        let (package, skill) = self.find_skill(id)?;
        // `model` hides a skill from other models; until the front names the turn's model
        // (`set_model`), a skill bound to a model stays hidden.
        let hidden_by_model = skill
            .meta
            .model
            .as_deref()
            .is_some_and(|m| self.model.as_deref() != Some(m));
        let hidden_from_invoker = match invoker {
            // A package's agent reads only its own skills and those its `skills:` lists.
            Invoker::Model => skill.meta.disable_model_invocation || !self.agent_may_read(id),
            Invoker::User => !skill.meta.user_invocable,
        };
        if hidden_from_invoker
            || hidden_by_model
            || !admit(
                &Restrictions::of_skill(&skill.meta),
                &self.origin,
                &self.sender,
            )
            .admitted
        {
            return None;
        }
        Some((package, skill))
    }

    /// The tools offered this turn: meta-tools, then resident, pinned, always-loaded and loaded
    /// items, each admitted afresh for this turn's sender. Definitions are shared with every
    /// other turn of the same catalog snapshot.
    pub fn tools(&self) -> Result<Vec<Arc<ToolDefinition>>, RuntimeError> {
        let view = self.view()?;
        let always = self.runtime.always_loaded(&self.catalog);
        let offered = self.offered_unconfigured(&view, &always.resident);
        Ok(self.tools_in(&offered))
    }

    /// The items on offer this turn whether or not their package's settings are set, in offer
    /// order: one pass of [`offered`] that both the tool list and "not configured" take from
    /// (with first-seen deduplication, leaving out the unconfigured ones keeps the others'
    /// order, so the list is exactly `offered` over [`Turn::admitted`]).
    fn offered_unconfigured(&self, view: &SessionView, always: &[usize]) -> Vec<usize> {
        offered(&self.catalog, view, always, &|i| {
            self.admitted_unconfigured(i)
        })
    }

    /// Whether an active skill's `disallowed-tools` takes `item` out for the rest of the
    /// turn: then it is neither listed, nor found, nor named by `read_skill`.
    pub(in crate::runtime) fn removed_this_turn(&self, item: &quiver_catalog::Item) -> bool {
        let (package, local) = item
            .qualified
            .split_once('.')
            .unwrap_or((item.qualified.as_str(), ""));
        self.state.removes(package, local)
    }

    /// The tool list of [`Turn::tools`] from the items [`Turn::offered_unconfigured`] gave.
    fn tools_in(&self, offered: &[usize]) -> Vec<Arc<ToolDefinition>> {
        let mut out: Vec<Arc<ToolDefinition>> = self
            .meta_tools()
            .into_iter()
            .map(definitions::meta)
            .collect();
        for &index in offered {
            let item = &self.catalog.items()[index];
            if self.catalog.tool(item).is_some()
                && self.missing_setting(self.package_of(item)).is_some()
            {
                continue;
            }
            if self.removed_this_turn(item) {
                continue;
            }
            if let Some(def) = self.definitions.item(&self.catalog, index) {
                out.push(def);
            }
        }
        out
    }

    /// What this caller is offered now: the tools of [`Turn::tools`], the skills the model may
    /// open, and the tools that would be offered but for an unset package setting (marked
    /// "not configured", with the setting's name, never its value). Computed by the same
    /// admission the pipeline uses, so fronts (MCP `tools/list`, `skills/list`, the agent
    /// loop, the CLI) translate it instead of admitting items themselves: every tool offered
    /// is one [`Turn::call`] accepts, and nothing else is.
    pub fn offer(&self) -> Result<Offer, RuntimeError> {
        let view = self.view()?;
        let always = self.runtime.always_loaded(&self.catalog);
        let offered = self.offered_unconfigured(&view, &always.resident);
        let tools = self.tools_in(&offered);
        let not_configured = offered
            .iter()
            .filter_map(|&index| {
                let item = &self.catalog.items()[index];
                self.catalog.tool(item)?;
                let setting = self.missing_setting(self.package_of(item))?;
                Some(NotConfigured {
                    name: item.wire.clone()?,
                    package: self.package_of(item).id.as_str().to_owned(),
                    setting,
                })
            })
            .collect();
        let skills = self
            .catalog
            .packages()
            .iter()
            .filter(|cp| !cp.shadowed)
            .flat_map(|cp| cp.package.all_skills())
            .filter(|s| self.skill_visible(&s.id).is_some())
            .map(|s| s.id.clone())
            .collect();
        Ok(Offer {
            tools,
            skills,
            not_configured,
        })
    }

    /// The prompt sections this turn delivers, assembled under their budget: those the origin
    /// and this turn's sender are admitted to whose `profiles` include the turn's (`schedule`
    /// when unattended, else `interactive`); for a package's agent, only its own package's
    /// (it sees no other package's sections). Fails, as every front must, when the `required`
    /// ones alone exceed the budget: a required section is never silently left out.
    pub fn prompt_sections(&self) -> Result<(String, PromptReport), RuntimeError> {
        let mut report = PromptReport::default();
        let mut sections = Vec::new();
        let mut names = Vec::new();
        let own_package = self.own_agent.as_ref().map(|(p, _)| p.as_str());
        for cp in self.catalog.packages().iter().filter(|p| {
            !p.shadowed
                && self.enabled(p.package.id.as_str())
                && own_package.is_none_or(|own| own == p.package.id.as_str())
        }) {
            for s in &cp.package.prompts {
                let name = format!("{}.{}", cp.package.id, s.name);
                let profile_ok = s.profiles.is_empty()
                    || s.profiles.contains(&if self.unattended {
                        quiver_package::prompt::Profile::Schedule
                    } else {
                        quiver_package::prompt::Profile::Interactive
                    });
                if profile_ok
                    && admit(&Restrictions::of_section(s), &self.origin, &self.sender).admitted
                {
                    // A running session keeps the text it started with.
                    let mut section = s.clone();
                    if let Some(kept) = self.prompt_sections.get(&name).and_then(Value::as_str) {
                        kept.clone_into(&mut section.content);
                    }
                    sections.push(section);
                    names.push(name);
                }
            }
        }
        let named: Vec<NamedSection<'_>> = names
            .iter()
            .zip(&sections)
            .map(|(name, section)| NamedSection { name, section })
            .collect();
        let text = assemble_sections(&named, self.runtime.config.budget.sections, &mut report)?;
        Ok((text, report))
    }

    /// The system prompt: the prompt sections of [`Turn::prompt_sections`], today's date, and
    /// the package catalog for agents that have `read_skill`.
    pub fn system_prompt(&self) -> Result<(String, PromptReport), RuntimeError> {
        let (mut text, mut report) = self.prompt_sections()?;
        let today = (self.runtime.clock)();
        text.push_str(&format!(
            "\n\nToday's date is {}.",
            today.format("%Y-%m-%d")
        ));
        if self.meta_tools().contains(&MetaTool::ReadSkill) && self.own_agent.is_none() {
            let rendered = quiver_catalog::render::package_list(
                &self.catalog,
                &|e| self.entry_admitted(e),
                self.runtime.config.budget.catalog,
            );
            report.catalog_dropped = rendered.dropped.clone();
            text.push_str("\n\nPackages you can use (open one with `read_skill`, or find a tool with `tool_search`):\n");
            text.push_str(&rendered.text);
        }
        Ok((text.trim_start().to_owned(), report))
    }
    /// Runs one call of `name` (a wire name, a qualified name or a meta-tool) with
    /// `arguments` through the pipeline, and writes its audit record.
    pub fn call(&mut self, name: &str, arguments: Value) -> Result<CallOutcome, RuntimeError> {
        let call_id = new_id("call");
        // One span per call, with its id: `RUST_LOG=quiver=debug` follows it through the
        // pipeline, the sandbox and the audit.
        let span = tracing::info_span!("call", id = %call_id, tool = name, session = %self.session);
        let _entered = span.enter();
        tracing::debug!("call received");
        let started = Instant::now();
        let mut audit = self.call_audit(&call_id, name, &arguments);
        let meta = MetaTool::from_name(name).filter(|m| self.meta_tools().contains(m));
        let mut outcome = if let Some(meta) = meta {
            audit.decisions.push(decision(
                AuditStep::Visibility,
                "allow",
                "a meta-tool of this agent",
            ));
            let mut out = meta.apply(self, &call_id, &arguments, &mut audit)?;
            out.kind.get_or_insert(CallKind::Meta);
            out
        } else {
            let catalog = self.catalog.clone();
            let agent_input = agent_input();
            match self.resolve(&catalog, name, &arguments, &agent_input)? {
                Some(target) => {
                    let mut out = self.run_target(&call_id, &target, arguments, &mut audit)?;
                    out.kind = Some(target.kind);
                    out
                }
                None => {
                    audit.decisions.push(decision(
                        AuditStep::Resolve,
                        "unknown",
                        "no such tool for this caller",
                    ));
                    self.unknown(&call_id, name)
                }
            }
        };
        self.finish_audit(audit, &mut outcome, started)?;
        tracing::debug!(status = ?outcome.status, kind = ?outcome.kind, elapsed_ms = started.elapsed().as_millis() as u64, "call ended");
        Ok(outcome)
    }

    /// Answers a call the front does not let this agent make (a tool outside a sub-agent's
    /// declared set) as an unknown tool, exactly as for a name that does not exist, and writes
    /// its audit record with `why`.
    pub fn refuse_as_unknown(
        &mut self,
        name: &str,
        arguments: &Value,
        why: &str,
    ) -> Result<CallOutcome, RuntimeError> {
        let call_id = new_id("call");
        let started = Instant::now();
        let mut audit = self.call_audit(&call_id, name, arguments);
        audit
            .decisions
            .push(decision(AuditStep::Resolve, "unknown", why));
        let mut outcome = self.unknown(&call_id, name);
        self.finish_audit(audit, &mut outcome, started)?;
        Ok(outcome)
    }

    /// A person starts the skill `id` by hand (`/<skill>` in a chat). The skill is admitted as
    /// `read_skill` admits it (package on; platforms, scopes, permissions and `model` met),
    /// except that `disable-model-invocation` does not hide it and `user-invocable: false`
    /// does; anything else is "no such skill". It is activated (or, with `context: fork`, run
    /// in a sub-agent with this turn's message as the request) and audited, and the outcome
    /// carries what `read_skill` returns (`instructions` when newly activated).
    pub fn start_skill_by_user(&mut self, id: &str) -> Result<CallOutcome, RuntimeError> {
        let call_id = new_id("call");
        let started = Instant::now();
        let mut audit = self.call_audit(&call_id, "read_skill", &json!({"id": id}));
        audit.skill = Some(id.to_owned());
        audit
            .decisions
            .push(decision(AuditStep::Invoker, "user", "started by the user"));
        let mut outcome = self.read_skill(&call_id, id, Invoker::User, &mut audit)?;
        self.finish_audit(audit, &mut outcome, started)?;
        Ok(outcome)
    }
}

impl super::Runtime {
    /// The prompt sections `sender` at `origin`, running as `agent`, gets before any
    /// conversation exists (an MCP client's `initialize` instructions), as
    /// [`Turn::prompt_sections`] assembles them for an interactive turn: an error when the
    /// required ones exceed the budget, so the front fails as chat does.
    pub fn prompt_sections_outside_session(
        &self,
        sender: quiver_policy::Principal,
        origin: quiver_policy::Origin,
        agent: &str,
    ) -> Result<String, RuntimeError> {
        self.refresh_operator_state()?;
        let turn = self.blank_turn("", agent, origin, sender, self.catalog());
        Ok(turn.prompt_sections()?.0)
    }
}

/// The skill with `id` in `catalog`: a package's skill, or, for a session of a package's own
/// agent (`own_agent`), one of that agent's own skills (`<package>/<agent>/<skill>`, which no
/// other caller can name).
pub(in crate::runtime) fn find_skill<'c>(
    catalog: &'c Catalog,
    own_agent: Option<&(String, String)>,
    id: &str,
) -> Option<(
    &'c quiver_package::Package,
    &'c quiver_package::skill::Skill,
)> {
    let package_id = id.split('/').next()?;
    let package = &catalog.package(package_id)?.package;
    if let Some(skill) = package.all_skills().find(|s| s.id == id) {
        return Some((package, skill));
    }
    let (own_package, own_agent) = own_agent?;
    if own_package != package_id {
        return None;
    }
    package
        .agents
        .iter()
        .filter(|a| a.name.as_str() == own_agent)
        .flat_map(|a| &a.own_skills)
        .find(|s| s.id == id)
        .map(|skill| (package, skill))
}
