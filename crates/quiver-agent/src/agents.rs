//! Package agents: their profile (prompt, tools, model), the automatic choice of an agent for
//! a platform, and the [`SubAgents`] runner that the runtime calls for an exposed agent or a
//! skill with `context: fork`.
//!
//! A run gets a child session of the caller's session with its own system prompt, only its
//! declared tools (loaded into the child session; the parent's meta-tools only when
//! declared), the model the user chose for it, and only its task as the first message. The
//! child's last reply is the call's result. Runs nest at most `limits.max_depth` deep, and at
//! most `limits.max_parallel` run at once in the process (a run over the limit is refused at
//! once rather than queued, so a nested run can never wait on its own ancestor).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use quiver_catalog::Catalog;
use quiver_package::Package;
use quiver_package::agent::Agent;
use quiver_runtime::Runtime;
use quiver_runtime::runtime::{AgentReply, AgentRunner, AgentTask, META_TOOLS};

use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::provider::{self, Provider};
use crate::session::{
    CallRecord, ChatSession, LoopOptions, Observer, Quiet, SystemPrompt, ToolScope,
};

/// Tools loaded into an agent's session when it starts, at most.
const MAX_DECLARED: usize = 64;

/// What an agent runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    /// `<package>.<agent>`.
    pub agent: String,
    /// Its system prompt (`AGENTS.md`, then its own text).
    pub system: String,
    /// Wire names and meta-tools it may use.
    pub tools: BTreeSet<String>,
    /// Items to load into its session (qualified names).
    pub loads: Vec<String>,
    /// Its step limit (`max_turns`).
    pub max_steps: Option<usize>,
    /// The model it declares.
    pub model: Option<String>,
}

/// The package and agent named `<package>.<agent>`.
pub fn find_agent<'c>(catalog: &'c Catalog, qualified: &str) -> Option<(&'c Package, &'c Agent)> {
    let (package, name) = qualified.split_once('.')?;
    let cp = catalog.package(package).filter(|p| !p.shadowed)?;
    let agent = cp.package.agents.iter().find(|a| a.name.as_str() == name)?;
    Some((&cp.package, agent))
}

/// Resolves declared tool names (`pkg.tool`, `pkg__tool`, a local name, a meta-tool) to
/// `(wire names and meta-tools, qualified names to load)`.
fn resolve_tools(
    catalog: &Catalog,
    package: &str,
    names: &[String],
) -> (BTreeSet<String>, Vec<String>) {
    let mut wires = BTreeSet::new();
    let mut loads = Vec::new();
    for name in names {
        if META_TOOLS.contains(&name.as_str()) {
            wires.insert(name.clone());
            continue;
        }
        let item = catalog
            .item(name)
            .or_else(|| catalog.item_by_wire(name))
            .or_else(|| catalog.item(&format!("{package}.{name}")));
        match item.and_then(|i| i.wire.clone().map(|w| (w, i.qualified.clone()))) {
            Some((wire, qualified)) => {
                wires.insert(wire);
                if !loads.contains(&qualified) {
                    loads.push(qualified);
                }
            }
            None => {
                tracing::warn!(package, tool = %name, "an agent declares a tool the catalog does not have")
            }
        }
    }
    (wires, loads)
}

/// The profile of `<package>.<agent>`.
pub fn profile(catalog: &Catalog, qualified: &str) -> Result<AgentProfile, AgentError> {
    let (package, agent) = find_agent(catalog, qualified)
        .ok_or_else(|| AgentError::UnknownAgent(qualified.to_owned()))?;
    let (tools, loads) = resolve_tools(catalog, package.id.as_str(), &agent.tools);
    Ok(AgentProfile {
        agent: qualified.to_owned(),
        system: crate::prompt::agent_prompt(package, agent),
        tools,
        loads,
        max_steps: agent.max_turns.map(|n| n as usize),
        model: agent.model.clone(),
    })
}

/// The meta-tools each package agent declares, by `<package>.<agent>`, for
/// [`quiver_runtime::RuntimeConfig::agent_meta_tools`] (the runtime offers an agent only the
/// meta-tools listed there).
pub fn agent_meta_tools(catalog: &Catalog) -> HashMap<String, Vec<String>> {
    let mut out = HashMap::new();
    for cp in catalog.packages().iter().filter(|p| !p.shadowed) {
        for agent in &cp.package.agents {
            let metas: Vec<String> = agent
                .tools
                .iter()
                .filter(|t| META_TOOLS.contains(&t.as_str()))
                .cloned()
                .collect();
            out.insert(format!("{}.{}", cp.package.id, agent.name), metas);
        }
    }
    out
}

/// The agent that serves sessions from `platform`: the one agent declaring it, `None` when
/// none does, an error naming the candidates when several do.
pub fn agent_for_platform(catalog: &Catalog, platform: &str) -> Result<Option<String>, AgentError> {
    let candidates: Vec<String> = catalog
        .packages()
        .iter()
        .filter(|p| !p.shadowed)
        .flat_map(|cp| {
            cp.package
                .agents
                .iter()
                .filter(|a| {
                    a.platforms
                        .as_ref()
                        .is_some_and(|ps| ps.iter().any(|p| p == platform))
                })
                .map(move |a| format!("{}.{}", cp.package.id, a.name))
        })
        .collect();
    match candidates.len() {
        0 => Ok(None),
        1 => Ok(candidates.into_iter().next()),
        _ => Err(AgentError::AmbiguousPlatform {
            platform: platform.to_owned(),
            candidates: candidates
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Loads `profile`'s declared tools into `session` so the runtime offers them.
pub fn load_declared(runtime: &Runtime, session: &str, loads: &[String]) -> Result<(), AgentError> {
    let capacity = loads.len().clamp(12, MAX_DECLARED);
    let declared: Vec<String> = loads.iter().take(MAX_DECLARED).cloned().collect();
    runtime.load_for_profile(session, &declared, capacity)?;
    Ok(())
}

/// Providers by name, built once each from the configuration.
pub struct Providers {
    config: AgentConfig,
    built: Mutex<HashMap<String, Arc<dyn Provider>>>,
}

impl Providers {
    /// Providers of `config`.
    pub fn new(config: AgentConfig) -> Self {
        Self {
            config,
            built: Mutex::new(HashMap::new()),
        }
    }

    /// Uses `provider` for the name `name` instead of building one (tests, embedders).
    pub fn insert(&self, name: &str, provider: Arc<dyn Provider>) {
        if let Ok(mut built) = self.built.lock() {
            built.insert(name.to_owned(), provider);
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The provider and loop options for `agent` (`None`: the chat agent) declaring
    /// `declared_model`.
    pub fn for_agent(
        &self,
        agent: Option<&str>,
        declared_model: Option<&str>,
    ) -> Result<(Arc<dyn Provider>, LoopOptions), AgentError> {
        let (name, model) = self.config.choice_for(agent, declared_model)?;
        let config = self.config.provider(&name)?;
        let provider = {
            let mut built = self
                .built
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match built.get(&name) {
                Some(p) => p.clone(),
                None => {
                    let p: Arc<dyn Provider> = Arc::from(provider::from_config(&name, config)?);
                    built.insert(name.clone(), p.clone());
                    p
                }
            }
        };
        let mut options = LoopOptions::new(&model);
        options.mode = config.tools;
        options.stream = config.stream;
        options.max_steps = self.config.limits.max_steps;
        options.context_chars = self.config.limits.context_chars;
        options.max_tokens = config.max_tokens;
        options.temperature = config.temperature;
        Ok((provider, options))
    }
}

/// A line about a sub-agent's work, for fronts that show it.
pub type Progress = Arc<dyn Fn(usize, &str, &CallRecord) + Send + Sync>;

/// Runs agents and forked skills for the runtime.
pub struct SubAgents {
    providers: Arc<Providers>,
    running: Mutex<usize>,
    progress: Option<Progress>,
}

impl SubAgents {
    /// A runner using `providers`.
    pub fn new(providers: Arc<Providers>) -> Self {
        Self {
            providers,
            running: Mutex::new(0),
            progress: None,
        }
    }

    /// Calls `progress(depth, agent, call)` after each tool call of a sub-agent.
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    fn run_task(&self, runtime: &Runtime, task: &AgentTask) -> Result<AgentReply, AgentError> {
        // The parent turn's snapshot, never a newer one a reload swapped in meanwhile.
        let catalog = task.catalog.clone();
        let (agent_profile, skill) = match (&task.agent, &task.skill) {
            (Some(agent), _) => (Some(profile(&catalog, agent)?), task.skill.clone()),
            (None, Some(skill)) => (None, Some(skill.clone())),
            (None, None) => return Err(AgentError::UnknownAgent(String::new())),
        };
        let name = task.agent.clone().unwrap_or_else(|| "fork".to_owned());
        let child = runtime.create_child_session(&task.parent_session, &name, &task.sender)?;
        let mut system = String::new();
        let mut tools = BTreeSet::new();
        let mut loads = Vec::new();
        let mut max_steps = None;
        let mut declared_model = None;
        if let Some(p) = &agent_profile {
            system.clone_from(&p.system);
            tools.clone_from(&p.tools);
            loads.clone_from(&p.loads);
            max_steps = p.max_steps;
            declared_model.clone_from(&p.model);
        }
        if let Some(skill_id) = &skill {
            let package = skill_id.split('/').next().unwrap_or(skill_id);
            if let Some(s) = catalog
                .package(package)
                .and_then(|cp| cp.package.all_skills().find(|s| &s.id == skill_id))
            {
                let mut named = s.meta.tools.clone().unwrap_or_default();
                named.extend(s.meta.allowed_tools.iter().map(|t| {
                    t.split_once('(')
                        .map_or(t.as_str(), |(name, _)| name)
                        .to_owned()
                }));
                let (more, more_loads) = resolve_tools(&catalog, package, &named);
                tools.extend(more);
                loads.extend(more_loads);
            }
            runtime.activate_forked_skill(&child, skill_id)?;
            if system.is_empty() {
                system = format!(
                    "You run the skill `{skill_id}` on your own: follow its instructions in the task and reply with the result only."
                );
            }
        }
        load_declared(runtime, &child, &loads)?;
        let (provider, mut options) = self
            .providers
            .for_agent(task.agent.as_deref(), declared_model.as_deref())?;
        if let Some(steps) = max_steps {
            options.max_steps = steps.max(1);
        }
        options.deadline = task.deadline;
        let mut chat = ChatSession::new(runtime, provider, options, &child, task.sender.clone())
            .with_scope(ToolScope::Only(tools))
            .with_system(SystemPrompt::Fixed(system))
            .with_catalog(catalog);
        if let Some(person) = &task.person {
            chat = chat.with_person(person.clone());
        }
        let depth = runtime.session_depth(&child);
        let result = match &self.progress {
            Some(progress) => chat.send(
                &task.task,
                &mut Forward {
                    depth,
                    agent: &name,
                    progress,
                },
            ),
            None => chat.send(&task.task, &mut Quiet),
        };
        runtime.end_session(&child)?;
        let report = result?;
        Ok(AgentReply {
            session: child,
            reply: report.reply,
        })
    }
}

struct Forward<'a> {
    depth: usize,
    agent: &'a str,
    progress: &'a Progress,
}

impl Observer for Forward<'_> {
    fn call_finished(&mut self, record: &CallRecord) {
        (self.progress)(self.depth, self.agent, record);
    }
}

impl AgentRunner for SubAgents {
    fn run(&self, runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String> {
        let max_depth = self.providers.config.limits.max_depth;
        let depth = runtime.session_depth(&task.parent_session) + 1;
        if depth > max_depth {
            return Err(format!(
                "sub-agents may nest at most {max_depth} deep; do this task yourself"
            ));
        }
        let max_parallel = self.providers.config.limits.max_parallel.max(1);
        {
            let mut running = self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *running >= max_parallel {
                return Err(format!(
                    "{max_parallel} sub-agents are already running; try again when one has finished"
                ));
            }
            *running += 1;
        }
        let result = self.run_task(runtime, &task);
        if let Ok(mut running) = self.running.lock() {
            *running = running.saturating_sub(1);
        }
        result.map_err(|e| e.to_string())
    }
}
