//! The runtime: sessions, turns, the meta-tools and the governed call pipeline.
//!
//! A [`Runtime`] holds the current catalog snapshot, the store, the executor and the
//! approvers. [`Runtime::begin_turn`] admits a turn for its sender and pins the snapshot; the
//! [`Turn`] offers the model its tools ([`Turn::tools`]), assembles its system prompt
//! ([`Turn::system_prompt`]) and runs every call through the steps of DESIGN.md §3
//! ([`Turn::call`]), writing one audit record per call.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use quiver_catalog::{Catalog, Entry, EntryKind, Item, ItemKind};
use quiver_package::tool::{Category, Tool, ToolScope};
use quiver_policy::{
    Approver as PolicyApprover, Approvers, CallRequest, Caller, ControlPlane, Decision, Denial,
    Evaluation, OperatorSettings, Origin, Presence, Principal, Restrictions, SessionGrants,
    SkillTurnRules, Stage, ToolFacts, TurnState, Visibility, admit, evaluate_call,
};
use quiver_store::{
    AuditDecision, AuditEntry, AuditKind, AuditStatus, NewSession, Store, StoreError,
    argument_digest,
};
use serde::Serialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::approver::{Answer, Approver, Card, Question};
use crate::executor::{CallContext, ExecError, Execution, Executor};
use crate::hooks::{CommandHook, CommandHookSpec, Hook, HookEvent, HookVerdict, run_hook};
use crate::ids::new_id;
use crate::output::page;
use crate::presence::{
    OperatorAlwaysLoaded, SessionView, always_loaded, is_offered, offered, reach,
};
use crate::prompt::{NamedSection, PromptBudget, PromptError, PromptReport, assemble_sections};

mod agent_calls;
mod authorize;
mod cache;
mod skill_script;
pub use agent_calls::{AgentReply, AgentRunner, AgentTask};

/// The meta-tools, by wire name.
pub const META_TOOLS: [&str; 6] = [
    "read_skill",
    "tool_search",
    "load_tool",
    "ask_user",
    "run_skill_script",
    "tool_output",
];

/// Largest skill file `read_skill` returns, in bytes.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// Settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Loaded tools per session (least recently used evicted first).
    pub max_loaded: usize,
    /// Results of `tool_search`.
    pub search_results: usize,
    /// Invalid-argument retries per tool per turn before the model is told to ask the user.
    pub max_retries: u32,
    /// Prompt budgets.
    pub budget: PromptBudget,
    /// The operator's dangerous names and `funds` switch.
    pub operator: OperatorSettings,
    /// The operator's `always_loaded` list.
    pub always_loaded: OperatorAlwaysLoaded,
    /// Meta-tools each agent profile has; profiles not listed have none. The default chat
    /// agent `chat` has `read_skill` and `tool_search` (and the other meta-tools).
    pub agent_meta_tools: HashMap<String, Vec<String>>,
    /// Package settings (`config` in quiver.yaml), by package id.
    pub settings: HashMap<String, serde_json::Map<String, Value>>,
    /// The operator's command hooks, run before every call they match.
    pub hooks: Vec<CommandHookSpec>,
    /// Whether package tools may run without the sandbox where this machine cannot enforce it
    /// (the operator's explicit choice; the audit record of each such call notes it).
    pub allow_unsandboxed: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        let mut agent_meta_tools = HashMap::new();
        agent_meta_tools.insert(
            "chat".to_owned(),
            META_TOOLS.iter().map(|s| (*s).to_owned()).collect(),
        );
        Self {
            max_loaded: 12,
            search_results: 5,
            max_retries: 3,
            budget: PromptBudget::default(),
            operator: OperatorSettings::default(),
            always_loaded: OperatorAlwaysLoaded::None,
            agent_meta_tools,
            settings: HashMap::new(),
            hooks: Vec::new(),
            allow_unsandboxed: false,
        }
    }
}

/// Who answers questions, by kind. Unattended turns use none of them but the reviewer.
#[derive(Clone, Default)]
pub struct ApproverSet {
    /// The person in the conversation (terminal, chat, MCP elicitation).
    pub person: Option<Arc<dyn Approver>>,
    /// The console's queue, answered by an operator.
    pub console: Option<Arc<dyn Approver>>,
    /// A reviewing model (never for `human` or dangerous tools).
    pub reviewer: Option<Arc<dyn Approver>>,
}

/// Errors of the runtime's own operations (a call's problems are results, not errors).
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// No such session, or it has ended.
    #[error("no active session `{0}`")]
    NoSession(String),
    /// A file could not be written (benchmark fixtures).
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or folder.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A worker thread of a benchmark panicked.
    #[error("a benchmark thread panicked")]
    ThreadPanicked,
    /// The system prompt cannot be assembled.
    #[error(transparent)]
    Prompt(#[from] PromptError),
}

/// Whether a person is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// A person is there.
    Interactive,
    /// Nobody is (schedules, workflows).
    Schedule,
}

/// What a new session needs.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// Where the conversation is.
    pub origin: Origin,
    /// The agent profile (`chat` by default).
    pub agent: String,
    /// Who started it.
    pub principal: Principal,
    /// Interactive or unattended.
    pub profile: Profile,
}

/// The runtime.
pub struct Runtime {
    catalog: RwLock<Arc<Catalog>>,
    store: Arc<dyn Store>,
    executor: Arc<dyn Executor>,
    approvers: ApproverSet,
    config: RuntimeConfig,
    control: RwLock<ControlPlane>,
    disabled: RwLock<BTreeSet<String>>,
    validators: Mutex<Validators>,
    always: Mutex<Option<AlwaysLoaded>>,
    outputs: Mutex<HashMap<(String, String), String>>,
    cache: cache::PerceptionCache,
    clock: Arc<dyn Fn() -> NaiveDate + Send + Sync>,
    hooks: Vec<Arc<dyn Hook>>,
    agent_runner: std::sync::OnceLock<Arc<dyn AgentRunner>>,
}

impl Runtime {
    /// A runtime over `catalog`, keeping state in `store` and running tools with `executor`.
    pub fn new(
        catalog: Catalog,
        store: Arc<dyn Store>,
        executor: Arc<dyn Executor>,
        approvers: ApproverSet,
        config: RuntimeConfig,
    ) -> Runtime {
        let hooks = config
            .hooks
            .iter()
            .map(|spec| Arc::new(CommandHook::new(spec.clone())) as Arc<dyn Hook>)
            .collect();
        Runtime {
            catalog: RwLock::new(Arc::new(catalog)),
            store,
            executor,
            approvers,
            config,
            control: RwLock::new(ControlPlane::default()),
            disabled: RwLock::new(BTreeSet::new()),
            validators: Mutex::new((0, HashMap::new())),
            always: Mutex::new(None),
            outputs: Mutex::new(HashMap::new()),
            cache: cache::PerceptionCache::default(),
            clock: Arc::new(|| chrono::Local::now().date_naive()),
            hooks,
            agent_runner: std::sync::OnceLock::new(),
        }
    }

    /// Adds an in-process hook, run after the configured ones (see [`crate::hooks`]).
    pub fn add_hook(&mut self, hook: Arc<dyn Hook>) {
        self.hooks.push(hook);
    }

    /// Replaces the clock that dates resolve against (tests, replays).
    pub fn set_clock(&mut self, clock: impl Fn() -> NaiveDate + Send + Sync + 'static) {
        self.clock = Arc::new(clock);
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .map_or_else(|e| e.into_inner().clone(), |c| c.clone())
    }

    /// Swaps in a new catalog; running turns keep the one they started with.
    pub fn swap_catalog(&self, catalog: Catalog) {
        if let Ok(mut current) = self.catalog.write() {
            *current = Arc::new(catalog);
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Sets the control plane for every process on this store (durable before it returns;
    /// other processes see it from their next turn). `by` names the operator.
    pub fn set_control(&self, control: ControlPlane, by: &str) -> Result<(), RuntimeError> {
        crate::operator::set_control(self.store.as_ref(), control, by)?;
        if let Ok(mut c) = self.control.write() {
            *c = control;
        }
        Ok(())
    }

    /// Re-reads the operator's switches from the store, where another process may have changed
    /// them.
    fn refresh_operator_state(&self) -> Result<(), RuntimeError> {
        let state = crate::operator::read(self.store.as_ref())?;
        if let Ok(mut c) = self.control.write() {
            *c = state.control;
        }
        if let Ok(mut d) = self.disabled.write() {
            *d = state.disabled;
        }
        Ok(())
    }

    /// Switches a package off (absent from the catalog, its tools unknown) or on, for every
    /// session and every process on this store; `by` names the operator.
    pub fn set_enabled(&self, package: &str, enabled: bool, by: &str) -> Result<(), RuntimeError> {
        crate::operator::set_enabled(self.store.as_ref(), package, enabled, by)?;
        if let Ok(mut disabled) = self.disabled.write() {
            if enabled {
                disabled.remove(package);
            } else {
                disabled.insert(package.to_owned());
            }
        }
        Ok(())
    }

    /// The user switches a package off (or back on) in one conversation only.
    pub fn set_enabled_in_session(
        &self,
        session: &str,
        package: &str,
        enabled: bool,
    ) -> Result<(), RuntimeError> {
        let record = self
            .store
            .session(session)?
            .filter(|s| s.is_active())
            .ok_or_else(|| RuntimeError::NoSession(session.to_owned()))?;
        let mut state = record.state;
        let mut off = session_disabled(&state);
        if enabled {
            off.remove(package);
        } else {
            off.insert(package.to_owned());
        }
        if let Value::Object(map) = &mut state {
            map.insert(SESSION_DISABLED_KEY.to_owned(), json!(off));
        }
        self.store.set_session_state(session, &state)?;
        Ok(())
    }

    fn is_enabled(&self, package: &str) -> bool {
        self.disabled.read().map_or(true, |d| !d.contains(package))
    }

    /// The packages the operator switched off, read from the store now (a switch made by any
    /// process counts): what the pipeline's enabled check refuses, for fronts that list what
    /// is offered outside a turn (the MCP front's `skills/list`, `resources/*`, `tools/list`).
    pub fn disabled_packages(&self) -> Result<BTreeSet<String>, RuntimeError> {
        self.refresh_operator_state()?;
        Ok(self
            .disabled
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone())
    }

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
        for skill in self.store.end_all_skills(session)? {
            self.audit_skill(session, &skill, AuditKind::SkillEnded, "session ended")?;
        }
        Ok(self.store.end_session(session)?)
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

    fn audit_skill(
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

    /// Begins a turn of `session` for `sender` (who may change from turn to turn in a group),
    /// whose message is `message`.
    pub fn begin_turn(
        &self,
        session: &str,
        sender: Principal,
        message: &str,
    ) -> Result<Turn<'_>, RuntimeError> {
        let record = self
            .store
            .session(session)?
            .filter(|s| s.is_active())
            .ok_or_else(|| RuntimeError::NoSession(session.to_owned()))?;
        self.refresh_operator_state()?;
        let origin = origin_from(&record.origin);
        let unattended = record.state.get("profile").and_then(Value::as_str) == Some("schedule");
        let mut grants = SessionGrants::new(session);
        for consent in self.store.consents(session)? {
            if consent.granted {
                grants.grant_consent(&consent.package);
            } else {
                grants.refuse_consent(&consent.package);
            }
        }
        let catalog = self.catalog();
        let agent = record.agent.clone();
        let own_agent = agent
            .split_once('.')
            .map(|(p, a)| (p.to_owned(), a.to_owned()));
        Ok(Turn {
            runtime: self,
            catalog,
            session: session.to_owned(),
            agent,
            own_agent,
            origin,
            sender,
            message: message.to_owned(),
            unattended,
            grants,
            state: TurnState::new(),
            retries: HashMap::new(),
            prompt_sections: record.prompt_versions.clone(),
            person: None,
            session_disabled: session_disabled(&record.state),
            model: None,
        })
    }

    /// The `always_loaded` tools of `catalog`, computed once per catalog version; the overflow
    /// beyond 8 is logged once per catalog.
    fn always_loaded(&self, catalog: &Catalog) -> Arc<AlwaysLoadedSet> {
        let mut cached = self
            .always
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((version, set)) = cached.as_ref()
            && *version == catalog.version()
        {
            return set.clone();
        }
        let (resident, deferred) = always_loaded(catalog, &self.config.always_loaded);
        if !deferred.is_empty() {
            tracing::warn!(
                deferred = ?deferred,
                "more than {} tools declare `always_loaded`; these stay deferred and searchable",
                crate::presence::MAX_ALWAYS_LOADED
            );
        }
        let set = Arc::new(AlwaysLoadedSet { resident, deferred });
        *cached = Some((catalog.version(), set.clone()));
        set
    }

    /// The `always_loaded` tools of the current catalog left deferred by the limit of 8.
    pub fn deferred_always_loaded(&self) -> Vec<String> {
        self.always_loaded(&self.catalog()).deferred.clone()
    }

    /// Creates a child session (a sub-agent, a forked skill) of `parent`: same origin, its own
    /// state, so nothing it loads, opens or activates touches the parent.
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
        Ok(id)
    }

    fn validator(
        &self,
        catalog: &Catalog,
        qualified: &str,
        schema: &Value,
    ) -> Result<Arc<jsonschema::Validator>, String> {
        let version = catalog.version();
        if let Some(v) = self
            .validators
            .lock()
            .ok()
            .filter(|m| m.0 == version)
            .and_then(|m| m.1.get(qualified).cloned())
        {
            return Ok(v);
        }
        let compiled = Arc::new(quiver_package::schema::compile(schema)?);
        if let Ok(mut m) = self.validators.lock() {
            // Only the current catalog's validators are kept: bounded by its tools.
            if m.0 != version {
                *m = (version, HashMap::new());
            }
            m.1.insert(qualified.to_owned(), compiled.clone());
        }
        Ok(compiled)
    }
}

/// The key, in a session's state, of the packages its user switched off.
const SESSION_DISABLED_KEY: &str = "disabled";

/// The packages a session's user switched off, from its state.
fn session_disabled(state: &Value) -> BTreeSet<String> {
    state
        .get(SESSION_DISABLED_KEY)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The compiled input validators of one catalog version, by qualified tool name.
type Validators = (u64, HashMap<String, Arc<jsonschema::Validator>>);

/// A catalog version's resident and deferred `always_loaded` items.
type AlwaysLoaded = (u64, Arc<AlwaysLoadedSet>);

/// The `always_loaded` items of one catalog.
#[derive(Debug)]
struct AlwaysLoadedSet {
    resident: Vec<usize>,
    deferred: Vec<String>,
}

/// The origin kept in the store, read back (the runtime's own record, never message text).
fn origin_from(value: &Value) -> Origin {
    #[derive(serde::Deserialize, Default)]
    struct Stored {
        platform: Option<String>,
        scope: Option<StoredScope>,
        channel: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct StoredScope {
        kind: String,
        id: String,
    }
    let stored: Stored = serde_json::from_value(value.clone()).unwrap_or_default();
    let scope = stored.scope.and_then(|s| {
        let kind = match s.kind.as_str() {
            "group" => quiver_policy::ScopeKind::Group,
            "private" => quiver_policy::ScopeKind::Private,
            "channel" => quiver_policy::ScopeKind::Channel,
            _ => return None,
        };
        Some(quiver_policy::ConversationScope { kind, id: s.id })
    });
    Origin {
        platform: stored.platform,
        scope,
        channel: stored.channel,
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Wire name.
    pub name: String,
    /// Every description part, joined.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
}

/// What a caller is offered in a turn ([`Turn::offer`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    /// The tools the model gets: meta-tools first, then the admitted items on offer.
    pub tools: Vec<ToolDefinition>,
    /// Skill ids the model may open with `read_skill` (or read as a resource), catalog order.
    pub skills: Vec<String>,
    /// Tools left out because a required package setting is unset.
    pub not_configured: Vec<NotConfigured>,
}

/// A tool that is off until its package's setting is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotConfigured {
    /// Its wire name.
    pub name: String,
    /// Its package id.
    pub package: String,
    /// The name of the first required setting that is unset (never a value).
    pub setting: String,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// It ran (or a meta-tool answered).
    Ok,
    /// It ran and failed; the model may re-plan.
    Error,
    /// A policy refused it; final for the turn.
    Refused,
    /// Its arguments did not validate.
    Invalid,
    /// No such tool for this caller.
    Unknown,
    /// It ran out of time.
    TimedOut,
    /// Nothing ran: it waits for a person's answer that a later request brings
    /// ([`Answer::Pending`]).
    Pending,
}

/// A call's result, as the model reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallOutcome {
    /// The call's id (for `tool_output`).
    pub call_id: String,
    /// How it ended.
    pub status: CallStatus,
    /// What the model reads: the tool's JSON result, or a message.
    pub content: Value,
    /// Whether the result came from the perception cache.
    pub cached: bool,
}

impl CallOutcome {
    /// The outcome of call `call_id`, not answered from the cache.
    pub fn new(call_id: &str, status: CallStatus, content: Value) -> CallOutcome {
        CallOutcome {
            call_id: call_id.to_owned(),
            status,
            content,
            cached: false,
        }
    }

    /// Whether the model should read this as an error.
    pub fn is_error(&self) -> bool {
        self.status != CallStatus::Ok
    }
}

/// One turn: a sender, the pinned snapshot, and turn-scoped state.
pub struct Turn<'r> {
    runtime: &'r Runtime,
    catalog: Arc<Catalog>,
    session: String,
    agent: String,
    own_agent: Option<(String, String)>,
    origin: Origin,
    sender: Principal,
    message: String,
    unattended: bool,
    grants: SessionGrants,
    state: TurnState,
    retries: HashMap<String, u32>,
    prompt_sections: Value,
    person: Option<Arc<dyn Approver>>,
    session_disabled: BTreeSet<String>,
    model: Option<String>,
}

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

    /// Tells the runtime which model this turn talks to: skills bound to a `model` are shown
    /// only to that model (until this is called, to none).
    pub fn set_model(&mut self, model: &str) {
        self.model = Some(model.to_owned());
    }

    /// Whether `package` is on: neither the operator nor this conversation's user switched
    /// it off.
    fn enabled(&self, package: &str) -> bool {
        self.runtime.is_enabled(package) && !self.session_disabled.contains(package)
    }

    /// The context a tool or script of this turn gets with its arguments (DESIGN.md §3 step 6).
    fn call_context(&self, call_id: &str, policy: Value, idempotency_key: String) -> CallContext {
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

    fn person(&self) -> Option<&Arc<dyn Approver>> {
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

    fn view(&self) -> Result<SessionView, RuntimeError> {
        let presence = self.runtime.store.presence(&self.session)?;
        Ok(SessionView {
            opened: presence.opened.into_iter().collect(),
            loaded: presence.loaded,
            active_skills: presence.active_skills.into_iter().collect(),
            agent: self.own_agent.clone(),
        })
    }

    fn package_of(&self, item: &Item) -> &quiver_package::Package {
        &self.catalog.packages()[item.package].package
    }

    /// This turn's admission of an item: its package is on, its settings are set, and the
    /// origin and this turn's sender meet its restrictions.
    fn admitted(&self, item: &Item) -> bool {
        self.admitted_unconfigured(item)
            && self
                .catalog
                .tool(item)
                .is_none_or(|tool| self.missing_setting(self.package_of(item), tool).is_none())
    }

    /// This turn's admission of an item, whether or not its package's settings are set: a
    /// call of such a tool is told which setting is missing instead of "unknown tool".
    fn admitted_unconfigured(&self, item: &Item) -> bool {
        let package = self.package_of(item);
        if !self.enabled(package.id.as_str()) {
            return false;
        }
        self.catalog.tool(item).is_none_or(|tool| {
            admit(&Restrictions::of_tool(tool), &self.origin, &self.sender).admitted
        })
    }

    /// A required package setting that is unset, if any.
    fn missing_setting(&self, package: &quiver_package::Package, _tool: &Tool) -> Option<String> {
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

    fn entry_admitted(&self, entry: &Entry) -> bool {
        if let Some(p) = entry.package
            && !self.enabled(self.catalog.packages()[p].package.id.as_str())
        {
            return false;
        }
        match entry.kind {
            EntryKind::Builtin => self.meta_tools().iter().any(|m| *m == entry.id),
            EntryKind::Skill => self.skill_visible(&entry.id).is_some(),
            EntryKind::Package => true,
            _ => entry
                .item
                .is_some_and(|i| self.admitted(&self.catalog.items()[i])),
        }
    }

    /// The meta-tools this turn offers: the agent profile's, without `ask_user` when unattended.
    fn meta_tools(&self) -> Vec<&str> {
        let listed = self.runtime.config.agent_meta_tools.get(&self.agent);
        META_TOOLS
            .iter()
            .copied()
            .filter(|m| listed.is_some_and(|l| l.iter().any(|x| x == m)))
            .filter(|m| !(self.unattended && *m == "ask_user"))
            .collect()
    }

    /// The skill with `id` if the model may see it this turn.
    fn skill_visible(
        &self,
        id: &str,
    ) -> Option<(&quiver_package::Package, &quiver_package::skill::Skill)> {
        self.skill_admitted(id, Invoker::Model)
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
    fn skill_admitted(
        &self,
        id: &str,
        invoker: Invoker,
    ) -> Option<(&quiver_package::Package, &quiver_package::skill::Skill)> {
        let package_id = id.split('/').next()?;
        let cp = self.catalog.package(package_id)?;
        if !self.enabled(package_id) {
            return None;
        }
        let skill = cp.package.all_skills().find(|s| s.id == id)?;
        // `model` hides a skill from other models; until the front names the turn's model
        // (`set_model`), a skill bound to a model stays hidden.
        let hidden_by_model = skill
            .meta
            .model
            .as_deref()
            .is_some_and(|m| self.model.as_deref() != Some(m));
        let hidden_from_invoker = match invoker {
            Invoker::Model => skill.meta.disable_model_invocation,
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
        Some((&cp.package, skill))
    }

    /// The tools offered this turn: meta-tools, then resident, pinned, always-loaded and loaded
    /// items, each admitted afresh for this turn's sender.
    pub fn tools(&self) -> Result<Vec<ToolDefinition>, RuntimeError> {
        let mut out: Vec<ToolDefinition> =
            self.meta_tools().into_iter().map(meta_definition).collect();
        let view = self.view()?;
        let always = self.runtime.always_loaded(&self.catalog);
        for index in offered(&self.catalog, &view, &always.resident, &|i| {
            self.admitted(i)
        }) {
            let item = &self.catalog.items()[index];
            if let Some(def) = self.definition(item) {
                out.push(def);
            }
        }
        Ok(out)
    }

    /// What this caller is offered now: the tools of [`Turn::tools`], the skills the model may
    /// open, and the tools that would be offered but for an unset package setting (marked
    /// "not configured", with the setting's name, never its value). Computed by the same
    /// admission the pipeline uses, so fronts (MCP `tools/list`, `skills/list`, the agent
    /// loop, the CLI) translate it instead of admitting items themselves: every tool offered
    /// is one [`Turn::call`] accepts, and nothing else is.
    pub fn offer(&self) -> Result<Offer, RuntimeError> {
        let tools = self.tools()?;
        let view = self.view()?;
        let always = self.runtime.always_loaded(&self.catalog);
        let not_configured = offered(&self.catalog, &view, &always.resident, &|i| {
            self.admitted_unconfigured(i)
        })
        .into_iter()
        .filter_map(|index| {
            let item = &self.catalog.items()[index];
            let tool = self.catalog.tool(item)?;
            let setting = self.missing_setting(self.package_of(item), tool)?;
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

    fn definition(&self, item: &Item) -> Option<ToolDefinition> {
        let wire = item.wire.clone()?;
        let package = self.package_of(item);
        let (description, input_schema) = match item.kind {
            ItemKind::Tool => {
                let tool = self.catalog.tool(item)?;
                (tool.description.full(), tool.input.clone())
            }
            ItemKind::Agent => {
                let agent = package.agents.get(item.index)?;
                (
                    agent.description.clone(),
                    json!({"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}),
                )
            }
            ItemKind::Workflow => {
                let workflow = package.workflows.get(item.index)?;
                (workflow.description.clone(), workflow.input.clone())
            }
        };
        Some(ToolDefinition {
            name: wire,
            description,
            input_schema,
        })
    }

    /// The system prompt: admitted prompt sections under their budget, today's date, and the
    /// package catalog for agents that have `read_skill`.
    pub fn system_prompt(&self) -> Result<(String, PromptReport), RuntimeError> {
        let mut report = PromptReport::default();
        let mut sections = Vec::new();
        let mut names = Vec::new();
        for cp in self
            .catalog
            .packages()
            .iter()
            .filter(|p| !p.shadowed && self.enabled(p.package.id.as_str()))
        {
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
        let mut text = assemble_sections(&named, self.runtime.config.budget.sections, &mut report)?;
        let today = (self.runtime.clock)();
        text.push_str(&format!(
            "\n\nToday's date is {}.",
            today.format("%Y-%m-%d")
        ));
        if self.meta_tools().contains(&"read_skill") && self.own_agent.is_none() {
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

    /// Runs one call of `name` (a wire name or a meta-tool) with `arguments` through the
    /// pipeline, and writes its audit record.
    pub fn call(&mut self, name: &str, arguments: Value) -> Result<CallOutcome, RuntimeError> {
        let call_id = new_id("call");
        let started = Instant::now();
        let mut audit = self.call_audit(&call_id, name, &arguments);
        let outcome = if self.meta_tools().contains(&name) {
            audit
                .decisions
                .push(decision("visibility", "allow", "a meta-tool of this agent"));
            self.meta_call(&call_id, name, &arguments, &mut audit)?
        } else {
            self.tool_call(&call_id, name, arguments, &mut audit)?
        };
        self.finish_audit(audit, &outcome, started)?;
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
        audit.decisions.push(decision("resolve", "unknown", why));
        let outcome = CallOutcome::new(
            &call_id,
            CallStatus::Unknown,
            json!({"error": format!("unknown tool: {name}")}),
        );
        self.finish_audit(audit, &outcome, started)?;
        Ok(outcome)
    }

    /// The audit record of a call of `name` as it starts: who, where, and a digest of the
    /// arguments without their secret fields.
    fn call_audit(&self, call_id: &str, name: &str, arguments: &Value) -> AuditEntry {
        let mut audit = AuditEntry::new(AuditKind::Call, self.session.clone());
        audit.call_id = Some(call_id.to_owned());
        audit.principal = serde_json::to_value(&self.sender).unwrap_or_default();
        audit.origin = serde_json::to_value(&self.origin).unwrap_or_default();
        audit.tool = Some(name.to_owned());
        let secrets = self
            .catalog
            .item_by_wire(name)
            .and_then(|item| self.catalog.tool(item))
            .map(|tool| secret_fields(&tool.input))
            .unwrap_or_default();
        let secret_refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        audit.argument_digest = Some(argument_digest(arguments, &secret_refs));
        audit
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
            .push(decision("invoker", "user", "started by the user"));
        let outcome = self.read_skill(&call_id, id, Invoker::User, &mut audit)?;
        self.finish_audit(audit, &outcome, started)?;
        Ok(outcome)
    }

    /// Records how a call ended and writes its audit record.
    fn finish_audit(
        &self,
        mut audit: AuditEntry,
        outcome: &CallOutcome,
        started: Instant,
    ) -> Result<(), RuntimeError> {
        audit.status = match outcome.status {
            CallStatus::Ok => AuditStatus::Ok,
            CallStatus::Error => AuditStatus::Error,
            CallStatus::Refused | CallStatus::Unknown => AuditStatus::Refused,
            CallStatus::Invalid => AuditStatus::Invalid,
            CallStatus::TimedOut => AuditStatus::TimedOut,
            CallStatus::Pending => AuditStatus::Pending,
        };
        audit.cached = outcome.cached;
        audit.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.runtime.store.append_audit(&audit)?;
        Ok(())
    }

    fn tool_call(
        &mut self,
        call_id: &str,
        wire: &str,
        mut arguments: Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let outcome = |status, content| CallOutcome::new(call_id, status, content);
        // Steps 1–2: resolve the name; what the caller may not load is unknown.
        let view = self.view()?;
        // The answer names the tool as the caller gave it, whether it exists or not.
        let unknown = || json!({"error": format!("unknown tool: {wire}")});
        let resolved = self
            .catalog
            .item_by_wire(wire)
            .or_else(|| self.catalog.item(wire));
        let Some(index) = resolved.and_then(|item| {
            reach(&self.catalog, &view, item.wire.as_deref()?, &|i| {
                self.admitted_unconfigured(i)
            })
        }) else {
            audit.decisions.push(decision(
                "resolve",
                "unknown",
                "no such tool for this caller",
            ));
            return Ok(outcome(CallStatus::Unknown, unknown()));
        };
        let catalog = self.catalog.clone();
        let item = &catalog.items()[index];
        audit.tool = Some(item.qualified.clone());
        let package = &catalog.packages()[item.package].package;
        let Some(tool) = catalog.tool(item) else {
            return self.agent_call(call_id, wire, index, &arguments, audit);
        };
        let always = self.runtime.always_loaded(&catalog);
        let in_list = is_offered(&catalog, &view, &always.resident, index, &|i| {
            self.admitted_unconfigured(i)
        });
        let mut facts = ToolFacts::of_tool(package.id.as_str(), tool);
        facts.package_permission = Some(&package.manifest.permissions);
        if tool.scope != ToolScope::Package {
            // A skill unlocks its tools for the model; an agent's tools are its own.
            facts.visibility = Visibility::Exposed;
        }
        let first_string = first_string_argument(&tool.input, &arguments);
        let evaluation = self.evaluate(
            facts,
            if in_list {
                Presence::Offered
            } else {
                Presence::Loadable
            },
            first_string.as_deref(),
        );
        audit.decisions.extend(trace(&evaluation));
        if matches!(
            evaluation.deciding_stage(),
            Some(Stage::Visibility | Stage::Admission)
        ) {
            return Ok(self.refused(call_id, &evaluation));
        }
        if matches!(evaluation.decision, Decision::Unknown) {
            return Ok(outcome(CallStatus::Unknown, unknown()));
        }
        // A direct call loads the tool.
        if !in_list {
            self.runtime.store.load_tool(
                &self.session,
                &item.qualified,
                self.runtime.config.max_loaded,
            )?;
        } else if view.loaded.first() != Some(&item.qualified)
            && view.loaded.contains(&item.qualified)
        {
            // Keep the least-recently-used order; a write only when the order changes.
            self.runtime
                .store
                .touch_tool(&self.session, &item.qualified)?;
        }
        if let Some(setting) = self.missing_setting(package, tool) {
            audit.decisions.push(decision(
                "settings",
                "refuse",
                &format!("setting `{setting}` is unset"),
            ));
            return Ok(outcome(
                CallStatus::Error,
                json!({"error": format!("`{wire}` needs the package setting `{setting}`, which is not set; ask the operator to set it")}),
            ));
        }
        // Step 4: relative dates, then validation with retries.
        let today = (self.runtime.clock)();
        let date_changes =
            crate::dates::resolve_dates(&mut arguments, &tool.input, today, &self.message);
        if !date_changes.is_empty() {
            audit.decisions.push(decision(
                "dates",
                "resolve",
                &serde_json::to_string(&date_changes).unwrap_or_default(),
            ));
        }
        let validator = match self
            .runtime
            .validator(&catalog, &item.qualified, &tool.input)
        {
            Ok(v) => v,
            Err(message) => {
                audit
                    .decisions
                    .push(decision("validate", "error", &message));
                return Ok(outcome(
                    CallStatus::Error,
                    json!({"error": format!("`{wire}` has an input schema that cannot be used: {message}")}),
                ));
            }
        };
        if let Some(message) = quiver_package::schema::first_error(&validator, &arguments) {
            let tries = self.retries.entry(item.qualified.clone()).or_insert(0);
            *tries += 1;
            audit
                .decisions
                .push(decision("validate", "invalid", &message));
            let max = self.runtime.config.max_retries;
            if *tries > max {
                let refusal = format!(
                    "refused: the arguments of `{wire}` were invalid {max} times; do not retry"
                );
                if self.unattended {
                    self.state.record_refusal(&quiver_policy::Refusal::new(
                        quiver_policy::RefusalReason::Declined,
                        quiver_policy::Lockout {
                            tool: item.qualified.clone(),
                            categories: Vec::new(),
                        },
                    ));
                    return Ok(outcome(CallStatus::Refused, json!({"error": refusal})));
                }
                return Ok(outcome(
                    CallStatus::Invalid,
                    json!({"error": format!("invalid arguments: {message}. You have tried {max} times: stop and ask the user what they want.")}),
                ));
            }
            return Ok(outcome(
                CallStatus::Invalid,
                json!({"error": format!("invalid arguments: {message}")}),
            ));
        }
        // Step 5, with the operator's hooks first.
        let redacted = redact(&arguments, &secret_fields(&tool.input));
        let category = format!("{:?}", tool.category).to_lowercase();
        if let Some(stop) = self.authorize(
            &authorize::Authorize {
                call_id,
                qualified: &item.qualified,
                package: package.id.as_str(),
                category: &category,
                arguments: &redacted,
                evaluation: &evaluation,
            },
            audit,
        )? {
            return Ok(stop);
        }
        // Perception cache.
        let cache_key = cache::CacheKey {
            tool: item.qualified.clone(),
            arguments: quiver_store::canonical_json(&arguments),
            principal: quiver_store::canonical_json(
                &serde_json::to_value(&self.sender).unwrap_or_default(),
            ),
            origin: quiver_store::canonical_json(
                &serde_json::to_value(&self.origin).unwrap_or_default(),
            ),
        };
        if tool.category == Category::Perception
            && let Some(seconds) = tool.cache
            && let Some(value) = self
                .runtime
                .cache
                .get(&cache_key, Duration::from_secs(seconds))
        {
            audit.decisions.push(decision(
                "cache",
                "hit",
                &format!("identical call within {seconds} s"),
            ));
            let mut out = self.finish(call_id, tool, value);
            out.cached = true;
            return Ok(out);
        }
        // Step 6: execute.
        let context = self.call_context(
            call_id,
            serde_json::to_value(&evaluation.trace).unwrap_or_default(),
            format!("{}:{}", item.qualified, argument_digest(&arguments, &[])),
        );
        let answer = |q: &str| self.person().and_then(|p| p.answer_question(q));
        let execution = Execution {
            package: package.id.as_str(),
            tool: tool.name.as_str(),
            run: &tool.run,
            package_dir: &package.root,
            arguments: &arguments,
            context: &context,
            timeout: tool.timeout,
            tool_dir: tool.file.parent().unwrap_or(&package.root),
            limits: tool.limits,
            permissions: &tool.permission,
            settings: self.runtime.config.settings.get(package.id.as_str()),
            ask: (!self.unattended).then_some(crate::executor::Ask(&answer)),
            script: false,
            mcp_command: match &tool.run {
                quiver_package::tool::Run::Mcp { server, .. } => package
                    .manifest
                    .mcp_servers
                    .get(server)
                    .map(|s| s.command.as_slice()),
                _ => None,
            },
        };
        if let Some(note) = self.runtime.executor.isolation_note() {
            audit.decisions.push(decision("sandbox", "off", &note));
        }
        let result = match self.runtime.executor.execute(&execution) {
            Ok(value) => value,
            Err(ExecError::Denied(reason)) => {
                audit
                    .decisions
                    .push(decision("sandbox", "refused", &reason));
                // Final for the turn (DESIGN.md §3): later calls of this tool are refused at once.
                let refusal = quiver_policy::Refusal::new(
                    quiver_policy::RefusalReason::SandboxDenied { why: reason },
                    quiver_policy::Lockout {
                        tool: item.qualified.clone(),
                        categories: Vec::new(),
                    },
                );
                self.state.record_refusal(&refusal);
                return Ok(outcome(
                    CallStatus::Refused,
                    json!({"error": refusal.message}),
                ));
            }
            Err(ExecError::TimedOut(d)) => {
                audit
                    .decisions
                    .push(decision("execute", "timed_out", &format!("{d:?}")));
                return Ok(outcome(
                    CallStatus::TimedOut,
                    json!({"error": format!("`{wire}` timed out after {} s and was stopped", d.as_secs_f64())}),
                ));
            }
            Err(err) => {
                audit
                    .decisions
                    .push(decision("execute", "error", &err.to_string()));
                audit.detail = Some(json!({"error": err.to_string()}));
                return Ok(outcome(
                    CallStatus::Error,
                    json!({"error": err.to_string()}),
                ));
            }
        };
        // Step 7: output schema.
        if let Some(schema) = &tool.output
            && let Ok(v) = quiver_package::schema::compile(schema)
            && let Some(message) = quiver_package::schema::first_error(&v, &result)
        {
            audit
                .decisions
                .push(decision("output", "invalid", &message));
            return Ok(outcome(
                CallStatus::Error,
                json!({"error": format!("the tool's output does not match its declared schema: {message}")}),
            ));
        }
        if tool.category == Category::Perception && tool.cache.is_some() {
            self.runtime.cache.insert(cache_key, result.clone());
        }
        let mut out = self.finish(call_id, tool, result);
        if !date_changes.is_empty()
            && let Value::Object(map) = &mut out.content
        {
            map.insert("_dates".into(), json!(date_changes));
        }
        Ok(out)
    }

    /// Trims long output (step 7), keeping the rest for `tool_output`.
    fn finish(&self, call_id: &str, tool: &Tool, result: Value) -> CallOutcome {
        let text = match &result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let content = if text.chars().count() > tool.max_output {
            let first = page(&text, 0, tool.max_output);
            if let Ok(mut outputs) = self.runtime.outputs.lock() {
                outputs.insert((self.session.clone(), call_id.to_owned()), text);
            }
            json!({"summary": first.text, "has_more": true, "call_id": call_id, "next_offset": first.next_offset, "total_chars": first.total_chars})
        } else {
            result
        };
        CallOutcome::new(call_id, CallStatus::Ok, content)
    }

    fn evaluate(
        &self,
        facts: ToolFacts<'_>,
        presence: Presence,
        first_string: Option<&str>,
    ) -> Evaluation {
        let control = self
            .runtime
            .control
            .read()
            .map_or_else(|e| *e.into_inner(), |c| *c);
        let person = !self.unattended && self.person().is_some();
        let caller = match &self.own_agent {
            // The policy knows an agent by its package: its own package's private tools are
            // its own, without a consent question.
            Some((package, _)) if package == facts.package => Caller::Agent(package),
            _ => Caller::Model,
        };
        let mut request =
            CallRequest::new(facts, &self.origin, &self.sender, &self.grants, &self.state);
        request.presence = presence;
        request.caller = caller;
        request.first_string_argument = first_string;
        request.control = control;
        request.operator = &self.runtime.config.operator;
        request.unattended = self.unattended;
        request.approvers = Approvers {
            person,
            console: self.runtime.approvers.console.is_some(),
            model_reviewer: self.runtime.approvers.reviewer.is_some(),
        };
        evaluate_call(&request)
    }

    /// Runs the hooks that match `qualified`, in order; the first block or failure refuses the
    /// call (final for the turn). Each hook's answer is in the audit record.
    fn run_hooks(
        &self,
        call_id: &str,
        qualified: &str,
        package: &str,
        category: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Option<quiver_policy::Refusal> {
        let mut hooks = self
            .runtime
            .hooks
            .iter()
            .filter(|h| h.applies_to(qualified))
            .peekable();
        hooks.peek()?;
        let event = HookEvent {
            event: "before_call",
            session: self.session.clone(),
            call_id: call_id.to_owned(),
            tool: qualified.to_owned(),
            package: package.to_owned(),
            arguments: arguments.clone(),
            principal: serde_json::to_value(&self.sender).unwrap_or_default(),
            origin: serde_json::to_value(&self.origin).unwrap_or_default(),
            unattended: self.unattended,
            category: category.to_owned(),
        };
        for hook in hooks {
            let reason = match run_hook(hook.as_ref(), &event) {
                Ok(HookVerdict::Continue) => {
                    audit.decisions.push(decision(
                        "hook",
                        "allow",
                        &format!("`{}` let it go on", hook.name()),
                    ));
                    continue;
                }
                Ok(HookVerdict::Block(why)) => quiver_policy::RefusalReason::HookBlocked {
                    hook: hook.name().to_owned(),
                    why,
                },
                Err(error) => quiver_policy::RefusalReason::HookFailed {
                    hook: hook.name().to_owned(),
                    why: error.0,
                },
            };
            audit
                .decisions
                .push(decision("hook", "refuse", &reason.to_string()));
            return Some(quiver_policy::Refusal::new(
                reason,
                quiver_policy::Lockout {
                    tool: qualified.to_owned(),
                    categories: Vec::new(),
                },
            ));
        }
        None
    }

    fn refused(&mut self, call_id: &str, evaluation: &Evaluation) -> CallOutcome {
        self.state.record(evaluation);
        let message = evaluation
            .refusal()
            .map_or_else(|| "refused; do not retry".to_owned(), |r| r.message.clone());
        let (status, content) = match evaluation.decision {
            Decision::Unknown => (CallStatus::Unknown, json!({"error": "unknown tool"})),
            _ => (CallStatus::Refused, json!({"error": message})),
        };
        CallOutcome::new(call_id, status, content)
    }

    /// Step 5's questions for an `Ask` or `Park` decision: `None` when every answer is yes,
    /// else what the model reads — a refusal, final for the turn, or a call that waits for a
    /// later request's answer.
    fn ask_or_stop(
        &mut self,
        call_id: &str,
        ask: &quiver_policy::Ask,
        qualified: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Option<CallOutcome>, RuntimeError> {
        Ok(match self.ask(ask, qualified, arguments, audit)? {
            Asked::Yes => None,
            Asked::Refused(refusal) => {
                self.state.record_refusal(&refusal);
                Some(CallOutcome::new(
                    call_id,
                    CallStatus::Refused,
                    json!({"error": refusal.message}),
                ))
            }
            Asked::Pending => Some(CallOutcome::new(
                call_id,
                CallStatus::Pending,
                json!({"pending": "waiting for the user's answer; nothing ran"}),
            )),
        })
    }

    /// Asks the policy's questions in order (consent, then approval), stopping at the first
    /// answer that is not yes.
    fn ask(
        &mut self,
        ask: &quiver_policy::Ask,
        qualified: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<Asked, RuntimeError> {
        let base = Card {
            question: Question::Consent,
            session: self.session.clone(),
            package: ask.package.clone(),
            tool: qualified.to_owned(),
            arguments: redact(
                arguments,
                &self
                    .catalog
                    .item(qualified)
                    .and_then(|item| self.catalog.tool(item))
                    .map(|tool| secret_fields(&tool.input))
                    .unwrap_or_default(),
            ),
            reasons: Vec::new(),
            risk_categories: ask
                .risk_categories
                .iter()
                .map(|c| format!("{c:?}").to_lowercase())
                .collect(),
            // Consent and ordinary approvals may be answered by `--yes`-style approvers.
            needs_person: false,
            permissions: ask.tool_permissions.clone(),
        };
        if let Some(who) = ask.consent {
            let mut card = base.clone();
            card.permissions = ask.package_permissions.clone();
            card.reasons = vec![format!(
                "the first use of package `{}` in this conversation",
                ask.package
            )];
            let answer = self.route(who, &card);
            audit
                .decisions
                .push(decision("consent", answer_word(answer), &card.reasons[0]));
            match answer {
                Answer::Allow | Answer::AllowForSession => {
                    self.grants.grant_consent(&ask.package);
                    self.runtime.store.set_consent(
                        &self.session,
                        &ask.package,
                        true,
                        &principal_name(&self.sender),
                    )?;
                }
                Answer::Deny => {
                    self.grants.refuse_consent(&ask.package);
                    self.runtime.store.set_consent(
                        &self.session,
                        &ask.package,
                        false,
                        &principal_name(&self.sender),
                    )?;
                    return Ok(Asked::Refused(ask.refusal(Denial::Consent)));
                }
                Answer::TimedOut => return Ok(Asked::Refused(ask.refusal(Denial::TimedOut))),
                Answer::Pending => return Ok(Asked::Pending),
            }
        }
        if let Some(question) = &ask.approval {
            let mut card = base;
            card.question = Question::Approval;
            card.reasons = question.reasons.iter().map(ToString::to_string).collect();
            card.needs_person = ask.is_dangerous()
                || question
                    .reasons
                    .contains(&quiver_policy::AskReason::HumanOnly);
            let answer = self.route(question.who, &card);
            audit.decisions.push(decision(
                "approval",
                answer_word(answer),
                &card.reasons.join("; "),
            ));
            match answer {
                Answer::Allow | Answer::AllowForSession => {
                    if question.reuse == quiver_policy::Reuse::Session {
                        self.grants.approve_once(qualified);
                        self.runtime.store.grant_once(
                            &self.session,
                            qualified,
                            &principal_name(&self.sender),
                        )?;
                    }
                }
                Answer::Deny => return Ok(Asked::Refused(ask.refusal(Denial::Approval))),
                Answer::TimedOut => return Ok(Asked::Refused(ask.refusal(Denial::TimedOut))),
                Answer::Pending => return Ok(Asked::Pending),
            }
        }
        Ok(Asked::Yes)
    }

    fn route(&self, who: PolicyApprover, card: &Card) -> Answer {
        let approvers = &self.runtime.approvers;
        let approver = match who {
            PolicyApprover::Person if !self.unattended => self.person(),
            PolicyApprover::Person => None,
            PolicyApprover::Console => approvers.console.as_ref(),
            PolicyApprover::ModelReviewer => approvers.reviewer.as_ref(),
        };
        approver.map_or(Answer::Deny, |a| a.decide(card))
    }

    fn meta_call(
        &mut self,
        call_id: &str,
        name: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let text_arg = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let ok = |content: Value| CallOutcome::new(call_id, CallStatus::Ok, content);
        let err =
            |status, message: String| CallOutcome::new(call_id, status, json!({"error": message}));
        Ok(match name {
            "read_skill" => match text_arg("id") {
                Some(id) => self.read_skill(call_id, &id, Invoker::Model, audit)?,
                None => err(
                    CallStatus::Invalid,
                    "invalid arguments: `id` is required".into(),
                ),
            },
            "tool_search" => match text_arg("query") {
                Some(query) => ok(self.tool_search(&query)?),
                None => err(
                    CallStatus::Invalid,
                    "invalid arguments: `query` is required".into(),
                ),
            },
            "load_tool" => {
                let view = self.view()?;
                match text_arg("name")
                    .and_then(|n| reach(&self.catalog, &view, &n, &|i| self.admitted(i)))
                {
                    Some(index) => {
                        let item = &self.catalog.items()[index];
                        self.runtime.store.load_tool(
                            &self.session,
                            &item.qualified,
                            self.runtime.config.max_loaded,
                        )?;
                        ok(json!({"loaded": item.wire}))
                    }
                    None => err(
                        CallStatus::Unknown,
                        format!("unknown tool: {}", text_arg("name").unwrap_or_default()),
                    ),
                }
            }
            "ask_user" => {
                let question = text_arg("question").unwrap_or_default();
                match self.person().and_then(|p| p.answer_question(&question)) {
                    Some(answer) => ok(json!({"answer": answer})),
                    None => err(
                        CallStatus::Error,
                        "nobody answered; continue without the answer or end the turn".into(),
                    ),
                }
            }
            "tool_output" => {
                let call = text_arg("call").unwrap_or_default();
                let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
                let stored = self
                    .runtime
                    .outputs
                    .lock()
                    .ok()
                    .and_then(|o| o.get(&(self.session.clone(), call.clone())).cloned());
                match stored {
                    Some(text) => {
                        let p = page(&text, offset, 4000);
                        ok(
                            json!({"text": p.text, "has_more": p.next_offset.is_some(), "next_offset": p.next_offset, "total_chars": p.total_chars}),
                        )
                    }
                    None => err(
                        CallStatus::Error,
                        format!("no trimmed output for call `{call}` in this session"),
                    ),
                }
            }
            _ => self.run_skill_script(call_id, arguments, audit)?,
        })
    }

    fn read_skill(
        &mut self,
        call_id: &str,
        id: &str,
        invoker: Invoker,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let ok = |content: Value| CallOutcome::new(call_id, CallStatus::Ok, content);
        let no_such = || {
            CallOutcome::new(
                call_id,
                CallStatus::Error,
                json!({"error": format!("no such skill: {id}")}),
            )
        };
        let id = id.trim().trim_end_matches('/');
        // A file under a skill: `<skill id>/references/x.md`, `<skill id>/assets/...`, or seed
        // 000's `<package>/skill/references/x.md`.
        for marker in [
            "/references/",
            "/assets/",
            "/skill/references/",
            "/skill/assets/",
        ] {
            if let Some(pos) = id.find(marker) {
                let skill_id = &id[..pos];
                let rel = id[pos + 1..].trim_start_matches("skill/");
                let Some((_, skill)) = self.skill_visible(skill_id) else {
                    return Ok(no_such());
                };
                if !skill.files.iter().any(|f| f == rel) {
                    return Ok(no_such());
                }
                return Ok(match skill.read_file(rel, MAX_SKILL_FILE_BYTES) {
                    Ok(text) => ok(json!({"file": format!("{skill_id}/{rel}"), "text": text})),
                    Err(d) => CallOutcome::new(
                        call_id,
                        CallStatus::Error,
                        json!({"error": format!("cannot read {skill_id}/{rel}: {}", d.message)}),
                    ),
                });
            }
        }
        let package_id = id.split('/').next().unwrap_or(id);
        let Some(cp) = self.catalog.package(package_id) else {
            return Ok(no_such());
        };
        if !self.enabled(package_id) {
            return Ok(no_such());
        }
        let package = &cp.package;
        let exposed = self.exposed_items(package_id);
        match self.skill_admitted(id, invoker).map(|(_, s)| s.clone()) {
            Some(skill) => {
                if let Some(forked) = self.forked_skill(call_id, &skill, audit) {
                    return Ok(forked);
                }
                if !self
                    .runtime
                    .store
                    .activate_skill(&self.session, &skill.id)?
                {
                    return Ok(ok(
                        json!({"skill": skill.id, "status": "already active; its instructions are above"}),
                    ));
                }
                let body = skill.body.clone();
                self.runtime.store.open_package(&self.session, package_id)?;
                self.state.activate_skill(SkillTurnRules::new(
                    &skill.id,
                    package_id,
                    &skill.meta.allowed_tools,
                    &skill.meta.disallowed_tools,
                ));
                self.runtime.audit_skill(
                    &self.session,
                    &skill.id,
                    AuditKind::SkillActivated,
                    match invoker {
                        Invoker::Model => "read_skill",
                        Invoker::User => "started by the user",
                    },
                )?;
                audit
                    .decisions
                    .push(decision("skill", "activate", &skill.id));
                let files: Vec<String> = skill
                    .files
                    .iter()
                    .map(|f| format!("{}/{f}", skill.id))
                    .collect();
                let unlocked: Vec<String> = self
                    .catalog
                    .items()
                    .iter()
                    .filter(|i| {
                        self.catalog
                            .tool(i)
                            .is_some_and(|t| t.scope == ToolScope::Skill(skill.id.clone()))
                    })
                    .filter_map(|i| i.wire.clone())
                    .collect();
                Ok(ok(json!({
                    "skill": skill.id,
                    "status": "activated",
                    "instructions": body,
                    "files": files,
                    "tools": exposed,
                    "unlocked_tools": unlocked,
                })))
            }
            None if invoker == Invoker::Model && id == package_id && package.skill.is_none() => {
                self.runtime.store.open_package(&self.session, package_id)?;
                audit
                    .decisions
                    .push(decision("package", "open", package_id));
                Ok(ok(
                    json!({"package": package_id, "status": "opened", "description": package.description, "tools": exposed}),
                ))
            }
            None => Ok(no_such()),
        }
    }

    fn exposed_items(&self, package_id: &str) -> Vec<Value> {
        self.catalog
            .items()
            .iter()
            .filter(|i| {
                i.exposed
                    && !i.hidden
                    && self.package_of(i).id.as_str() == package_id
                    && self.admitted(i)
            })
            .filter_map(|i| {
                i.wire
                    .as_ref()
                    .map(|w| json!({"name": w, "kind": i.kind, "summary": i.summary}))
            })
            .collect()
    }

    fn tool_search(&mut self, query: &str) -> Result<Value, RuntimeError> {
        let view = self.view()?;
        let found = self
            .catalog
            .search(query, self.runtime.config.search_results, &|e| {
                self.entry_admitted(e)
                    && match e.kind {
                        EntryKind::Tool | EntryKind::Agent | EntryKind::Workflow => {
                            e.wire.as_deref().is_some_and(|w| {
                                reach(&self.catalog, &view, w, &|i| self.admitted(i)).is_some()
                            })
                        }
                        _ => true,
                    }
            });
        let mut results = Vec::new();
        for f in found {
            let e = f.entry;
            if let (Some(index), Some(wire)) = (e.item, &e.wire) {
                let qualified = &self.catalog.items()[index].qualified;
                self.runtime.store.load_tool(
                    &self.session,
                    qualified,
                    self.runtime.config.max_loaded,
                )?;
                results.push(
                    json!({"kind": e.kind, "name": wire, "summary": e.summary, "loaded": true}),
                );
            } else {
                let hint = match e.kind {
                    EntryKind::Skill | EntryKind::Package => {
                        format!("open with read_skill(\"{}\")", e.id)
                    }
                    _ => String::new(),
                };
                results.push(
                    json!({"kind": e.kind, "name": e.id, "summary": e.summary, "next": hint}),
                );
            }
        }
        Ok(json!({"results": results}))
    }
}

/// Who starts a skill: the model (`read_skill`) or a person by hand (`/<skill>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Invoker {
    Model,
    User,
}

fn meta_definition(name: &str) -> ToolDefinition {
    let (description, schema) = match name {
        "read_skill" => (
            "Open a skill or package from the catalog by id (`weather`, `weather/cities`), or read a file under a skill (`weather/references/cities.md`). Returns its instructions and tools.",
            json!({"type": "object", "properties": {"id": {"type": "string", "description": "skill id, package id, or skill file"}}, "required": ["id"]}),
        ),
        "tool_search" => (
            "Search the catalog for tools, skills and packages that fit a request. Tools found become callable.",
            json!({"type": "object", "properties": {"query": {"type": "string", "description": "what the user wants, in their words"}}, "required": ["query"]}),
        ),
        "load_tool" => (
            "Load a tool by name so it can be called.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        "ask_user" => (
            "Ask the user a question and wait for the answer.",
            json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
        ),
        "run_skill_script" => (
            "Run a script from the scripts/ folder of an active skill.",
            json!({"type": "object", "properties": {"skill": {"type": "string"}, "script": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}, "required": ["skill", "script"]}),
        ),
        _ => (
            "Read more of a tool result that was trimmed (`has_more`).",
            json!({"type": "object", "properties": {"call": {"type": "string"}, "offset": {"type": "integer", "minimum": 0}}, "required": ["call"]}),
        ),
    };
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

fn decision(step: &str, decision: &str, reason: &str) -> AuditDecision {
    AuditDecision {
        step: step.to_owned(),
        decision: decision.to_owned(),
        reason: reason.to_owned(),
    }
}

fn trace(evaluation: &Evaluation) -> Vec<AuditDecision> {
    evaluation
        .trace
        .iter()
        .map(|s| {
            decision(
                &format!("{:?}", s.check).to_lowercase(),
                &format!("{:?}", s.effect).to_lowercase(),
                &s.why,
            )
        })
        .collect()
}

fn answer_word(answer: Answer) -> &'static str {
    match answer {
        Answer::Allow => "allow",
        Answer::AllowForSession => "allow-session",
        Answer::Deny => "deny",
        Answer::TimedOut => "timed-out",
        Answer::Pending => "pending",
    }
}

/// How the policy's questions about a call were answered.
enum Asked {
    /// Every answer was yes.
    Yes,
    /// One was no (or nobody answered): final for the turn.
    Refused(quiver_policy::Refusal),
    /// One waits for a later request's answer.
    Pending,
}

fn principal_name(p: &Principal) -> String {
    p.user_id.clone().unwrap_or_else(|| "anonymous".to_owned())
}

/// Property names, at any depth, that the schema marks secret (`secret: true`,
/// `writeOnly: true` or `format: password`): never stored in the audit, hidden on cards.
fn secret_fields(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    collect_secrets(schema, &mut out, 0);
    out
}

fn collect_secrets(schema: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        return;
    }
    if let Some(items) = schema.get("items") {
        collect_secrets(items, out, depth + 1);
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        let secret = prop.get("secret").and_then(Value::as_bool) == Some(true)
            || prop.get("writeOnly").and_then(Value::as_bool) == Some(true)
            || prop.get("format").and_then(Value::as_str) == Some("password");
        if secret && !out.contains(name) {
            out.push(name.clone());
        }
        collect_secrets(prop, out, depth + 1);
    }
}

/// `arguments` with the values of `secrets` (at any depth) replaced by `"[secret]"`.
fn redact(arguments: &Value, secrets: &[String]) -> Value {
    match arguments {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if secrets.contains(k) {
                        json!("[secret]")
                    } else {
                        redact(v, secrets)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, secrets)).collect()),
        other => other.clone(),
    }
}

/// The first property of the schema, in declaration order, whose value is a string.
fn first_string_argument(schema: &Value, arguments: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    props
        .keys()
        .find_map(|k| arguments.get(k).and_then(Value::as_str).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runtime_is_shared_across_threads() {
        fn is<T: Send + Sync>() {}
        is::<super::Runtime>();
    }
}
