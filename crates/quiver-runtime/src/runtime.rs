//! The runtime: sessions, turns, the meta-tools and the governed call pipeline.
//!
//! A [`Runtime`] holds the current catalog snapshot, the store, the executor and the
//! approvers. [`Runtime::begin_turn`] admits a turn for its sender and pins the snapshot; the
//! [`Turn`] offers the model what it may see ([`Turn::offer`]), assembles its system prompt
//! ([`Turn::system_prompt`]) and runs every call through the steps of DESIGN.md §3
//! ([`Turn::call`]): the steps live in `call/`, one file each, and the meta-tools in `meta/`.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use chrono::NaiveDate;
use quiver_catalog::Catalog;
use quiver_policy::{ControlPlane, OperatorSettings, Origin, Principal, SessionGrants, TurnState};
use quiver_store::{PresenceStamp, SessionPresence, Store, StoreError};
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::approver::Approver;
use crate::executor::Executor;
use crate::hooks::{CommandHook, CommandHookSpec, Hook};
use crate::presence::{OperatorAlwaysLoaded, always_loaded};
use crate::prompt::{PromptBudget, PromptError};

mod agent_calls;
mod cache;
mod call;
mod conversation;
mod definitions;
mod meta;
mod outcome;
mod request_states;
mod sessions;
mod shared;
mod switches;
mod turn;
mod workflow;

pub use agent_calls::{AgentReply, AgentRunner, AgentTask};
pub use call::CallKind;
pub use conversation::TURN_TOKENS_KIND;
pub use meta::get_run::{GET_RUN, get_run_tool};
pub use meta::{META_TOOLS, MetaTool};
pub use outcome::{CallOutcome, CallStatus, NotConfigured, Offer, ToolDefinition, Trimmed};
use switches::session_disabled;
pub use workflow::run_ops::{Answerer, Cancelled, Emitted, RunError, RunOps, ScheduleEntry};
pub use workflow::steps::{WorkflowSteps, run_session_id};
pub use workflow::triggers::{RunWaker, SCHEDULER_USER};
pub use workflow::webhooks::{
    Delivery, HookError, REPLAY_WINDOW, SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK_USER,
};

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
    /// How long a call of a workflow waits for its run in a long-running front
    /// ([`Runtime::drive_workflow_calls_in_background`]) before it returns `{run_id, status}`.
    pub workflow_call_wait: std::time::Duration,
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
            workflow_call_wait: std::time::Duration::from_secs(10),
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
    /// The workflow engine failed (the workflow benchmark's runs).
    #[error("workflow: {0}")]
    Workflow(#[from] quiver_workflow::WorkflowError),
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
    catalog: arc_swap::ArcSwap<Catalog>,
    store: Arc<dyn Store>,
    executor: Arc<dyn Executor>,
    approvers: ApproverSet,
    config: RuntimeConfig,
    control: RwLock<ControlPlane>,
    disabled: RwLock<BTreeSet<String>>,
    validators: Mutex<Validators>,
    always: Mutex<Option<AlwaysLoaded>>,
    /// The definitions of the latest catalog snapshot a turn began on.
    definitions: Mutex<Option<Arc<definitions::Definitions>>>,
    clock: Arc<dyn Fn() -> NaiveDate + Send + Sync>,
    hooks: Vec<Arc<dyn Hook>>,
    agent_runner: std::sync::OnceLock<Arc<dyn AgentRunner>>,
    workflow_store: std::sync::OnceLock<Arc<dyn quiver_store::WorkflowStore>>,
    workflow_owner: std::sync::OnceLock<String>,
    run_waker: std::sync::OnceLock<workflow::triggers::RunWaker>,
    background: std::sync::OnceLock<std::sync::Weak<Runtime>>,
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
            catalog: arc_swap::ArcSwap::from_pointee(catalog),
            store,
            executor,
            approvers,
            config,
            control: RwLock::new(ControlPlane::default()),
            disabled: RwLock::new(BTreeSet::new()),
            validators: Mutex::new((0, HashMap::new())),
            always: Mutex::new(None),
            definitions: Mutex::new(None),
            clock: Arc::new(|| chrono::Local::now().date_naive()),
            hooks,
            agent_runner: std::sync::OnceLock::new(),
            workflow_store: std::sync::OnceLock::new(),
            workflow_owner: std::sync::OnceLock::new(),
            run_waker: std::sync::OnceLock::new(),
            background: std::sync::OnceLock::new(),
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
        self.catalog.load_full()
    }

    /// Swaps in a new catalog, whole or not at all (readers load the old or the new pointer,
    /// never wait on a lock); running turns keep the one they started with.
    pub fn swap_catalog(&self, catalog: impl Into<Arc<Catalog>>) {
        self.catalog.store(catalog.into());
    }

    /// A subscription to the changes the store hears (approvals, runs, events, catalogs, the
    /// operator's switches, this process's audit records; see [`quiver_store::changes`]): hints
    /// to read sooner, never the state itself.
    pub fn changes(&self) -> quiver_store::Changes {
        self.store.changes()
    }

    /// Tells every process on the store that this one, named `instance`, swapped in a new
    /// catalog (their schedulers look again at once).
    pub fn announce_catalog(&self, instance: &str) -> Result<(), RuntimeError> {
        let change = quiver_store::Change::new(quiver_store::ChangeKind::Catalog, instance);
        Ok(self.store.announce(&change)?)
    }

    /// How many loaded slots a session has (`max_loaded`): each holds a whole package's exposed
    /// items, or one item named exactly, the least recently used evicted first.
    pub fn max_loaded(&self) -> usize {
        self.config.max_loaded
    }

    /// The store: private to the runtime, whose operations apply the rules and audit (the
    /// fronts reach state only through them).
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Begins a turn of `session` for `sender` (who may change from turn to turn in a group),
    /// whose message is `message`, on the current catalog snapshot.
    pub fn begin_turn(
        &self,
        session: &str,
        sender: Principal,
        message: &str,
    ) -> Result<Turn<'_>, RuntimeError> {
        self.begin_turn_on(session, sender, message, self.catalog())
    }

    /// [`Runtime::begin_turn`] on the snapshot `catalog` rather than the current one: the turns
    /// of an agent or forked skill run for a parent turn hold the parent's snapshot
    /// ([`AgentTask::catalog`]), so a reload during the parent turn changes nothing its child
    /// sees.
    pub fn begin_turn_on(
        &self,
        session: &str,
        sender: Principal,
        message: &str,
        catalog: Arc<Catalog>,
    ) -> Result<Turn<'_>, RuntimeError> {
        // The session, the operator's switches (read every turn: a store that cannot be read
        // fails the turn) and the session's grants, in one read.
        let start = self.store.turn_start(session)?;
        let record = start
            .session
            .filter(|s| s.is_active())
            .ok_or_else(|| RuntimeError::NoSession(session.to_owned()))?;
        self.apply_operator_state(crate::operator::from_values(&start.operator));
        let origin = origin_from(&record.origin);
        let unattended = record.state.get("profile").and_then(Value::as_str) == Some("schedule");
        let mut grants = SessionGrants::new(session);
        for consent in start.consents {
            if consent.granted {
                grants.grant_consent(&consent.package);
            } else {
                grants.refuse_consent(&consent.package);
            }
        }
        // A `once` approval holds for the session, in whichever process it continues.
        for approval in start.once_approvals {
            grants.approve_once(&approval.tool);
        }
        let mut turn = self.blank_turn(session, &record.agent, origin, sender, catalog);
        turn.message = message.to_owned();
        turn.unattended = unattended;
        turn.grants = grants;
        turn.prompt_sections = record.prompt_versions;
        turn.session_disabled = session_disabled(&record.state);
        Ok(turn)
    }

    /// A turn of `session` (empty: outside any session) as `agent`, for `sender` at `origin`,
    /// on `catalog`, with nothing granted, restricted or switched off yet.
    fn blank_turn(
        &self,
        session: &str,
        agent: &str,
        origin: Origin,
        sender: Principal,
        catalog: Arc<Catalog>,
    ) -> Turn<'_> {
        Turn {
            runtime: self,
            session: session.to_owned(),
            agent: agent.to_owned(),
            own_agent: agent
                .split_once('.')
                .map(|(p, a)| (p.to_owned(), a.to_owned())),
            origin,
            sender,
            message: String::new(),
            unattended: false,
            grants: SessionGrants::new(session),
            state: TurnState::new(),
            retries: HashMap::new(),
            prompt_sections: Value::Null,
            person: None,
            session_disabled: BTreeSet::new(),
            model: None,
            in_transcript: BTreeSet::new(),
            step: None,
            presence: Mutex::new(None),
            definitions: self.definitions(&catalog),
            catalog,
        }
    }

    /// What `sender` at `origin`, running as `agent`, is offered outside any session (a front
    /// listing before a conversation exists: MCP's `tools/list`, `skills/list`,
    /// `resources/*`): the same admission as a turn's [`Turn::offer`], with nothing opened,
    /// loaded or active, and the operator's switches read from the store now.
    pub fn offer_outside_session(
        &self,
        sender: Principal,
        origin: Origin,
        agent: &str,
    ) -> Result<Offer, RuntimeError> {
        self.refresh_operator_state()?;
        let turn = self.blank_turn("", agent, origin, sender, self.catalog());
        turn.offer()
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

    /// The shared definitions of `catalog`'s snapshot: those of the latest snapshot a turn began
    /// on are kept (a turn keeps its own while it lives).
    fn definitions(&self, catalog: &Catalog) -> Arc<definitions::Definitions> {
        let mut kept = self
            .definitions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match kept.as_ref() {
            Some(d) if d.version() == catalog.version() => d.clone(),
            _ => {
                let d = Arc::new(definitions::Definitions::new(catalog));
                *kept = Some(d.clone());
                d
            }
        }
    }

    /// Whether `package`'s setting `key` is set (its value is never handed out: the console
    /// shows settings as set or unset only).
    pub fn setting_is_set(&self, package: &str, key: &str) -> bool {
        self.config
            .settings
            .get(package)
            .is_some_and(|s| s.contains_key(key))
    }

    /// The `always_loaded` tools of the current catalog left deferred by the limit of 8.
    pub fn deferred_always_loaded(&self) -> Vec<String> {
        self.always_loaded(&self.catalog()).deferred.clone()
    }

    /// Keeps the whole text of a trimmed result in the session's stored state, for
    /// `tool_output` in this process or another. A failure to keep it is logged: the trimmed
    /// answer stands, and `tool_output` says nothing was kept.
    fn keep_output(&self, session: &str, call_id: &str, text: String) {
        if let Err(error) = self.store.keep_output(session, call_id, &text) {
            tracing::warn!(%error, call_id, "the whole result could not be kept for tool_output");
        }
    }

    /// The kept text of call `call_id`'s trimmed result in `session`.
    fn kept_output(&self, session: &str, call_id: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self.store.kept_output(session, call_id)?)
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
    /// Skills whose instructions the caller's transcript holds (told by the front, plus those
    /// this turn delivered): reading one of them again answers "already active".
    in_transcript: BTreeSet<String>,
    /// Set when the turn runs one step of a workflow run.
    step: Option<workflow::steps::StepContext>,
    /// The session's presence as this turn last read it, with the store's stamp of that read:
    /// kept while the stamp does not move (see [`Turn::presence`]).
    presence: Mutex<Option<(PresenceStamp, Arc<SessionPresence>)>>,
    /// The offered definitions of `catalog`, shared by every turn on that snapshot.
    definitions: Arc<definitions::Definitions>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_runtime_is_shared_across_threads() {
        fn is<T: Send + Sync>() {}
        is::<super::Runtime>();
    }
}
