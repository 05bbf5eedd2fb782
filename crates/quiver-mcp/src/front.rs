//! The front's logic, free of protocol types: which conversation a request belongs to, the
//! fixed tool list, running calls through the runtime (off the async threads), and the state
//! machine of consent and approval questions asked through elicitation.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use quiver_catalog::Catalog;
use quiver_package::tool::{Category, Tool};
use quiver_policy::{Origin, Principal, TurnState, classify};
use quiver_runtime::approver::{Answer, Approver, Card, Question};
use quiver_runtime::runtime::META_TOOLS;
use quiver_runtime::{
    CallOutcome, CallStatus, Offer, Profile, Runtime, RuntimeError, SessionRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::McpConfig;
use crate::seal::Sealer;
use crate::skills::{SkillEntry, SkillIndex};

/// The `_meta` key (and result field) that carries the conversation handle.
pub const CONVERSATION_META: &str = "io.quiver/conversation";
/// The `_meta` key a client may send to say which turn of the conversation a request belongs
/// to: requests with the same id share one turn (the active skills' `allowed-tools` and
/// `disallowed-tools`, the turn's lockouts); a new id starts a new turn; without one, the
/// current turn's skill lists go on (fail safe: never lifted by the next request).
pub const TURN_META: &str = "io.quiver/turn";
/// How many conversations' turns are held in memory; past it the least recently used
/// conversation is ended (its handle then says so) rather than silently losing its lists.
pub const MAX_HELD_TURNS: usize = 4096;
/// The agent profile MCP conversations run as.
pub const MCP_AGENT: &str = "chat";

/// What every client's `instructions` start with.
pub const INSTRUCTIONS: &str = "Quiver serves a catalog of skills and tools. Find a tool with `tool_search`, open a skill with `read_skill`, and run a tool with `call_tool`. When a result carries `conversation`, pass it on later calls so consent is asked once per conversation.";
const CONVERSATION: &str = "conversation";
const REQUEST_STATE: &str = "request-state";
/// How long a pending question's `requestState` stays valid, in seconds.
const REQUEST_STATE_TTL: u64 = 15 * 60;

/// A failure of the front (the protocol layer maps it to an error response).
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// The runtime failed (store, I/O).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A conversation handle that is forged, expired, another user's, or for an ended session.
    #[error("invalid conversation handle: {0}")]
    BadHandle(String),
    /// A `requestState` that is forged, expired, replayed or for another call.
    #[error("invalid requestState: {0}")]
    BadRequestState(String),
    /// The blocking worker panicked or was cancelled.
    #[error("the call was interrupted: {0}")]
    Interrupted(String),
}

/// Who is calling, as the transport established it.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// The principal (stdio's local owner, a bearer token's user, or anonymous).
    pub principal: Principal,
    /// Where the conversation comes from: no platform, unless the bearer token names one.
    pub origin: Origin,
}

impl Caller {
    /// A caller with no platform (stdio, an anonymous or plain-token HTTP request).
    pub fn local(principal: Principal) -> Caller {
        Caller {
            principal,
            origin: Origin::default(),
        }
    }
}

/// A connection's own conversation (stdio, or a 2025-11-25 HTTP session): the first request
/// that needs one creates it, and every later request of the connection reuses it.
#[derive(Debug, Default)]
pub struct ConnectionSlot {
    session: Mutex<Option<String>>,
    bound: bool,
    /// When the connection last marked its conversation as in use (Unix ms).
    touched: AtomicI64,
    /// The skills whose instructions this connection delivered, by conversation (with when it
    /// was last used, for eviction): the client's transcript holds them, so reading one again
    /// answers "already active". At most [`MAX_REMEMBERED_CONVERSATIONS`]; a forgotten one
    /// gets its instructions again, never fewer.
    delivered: Mutex<HashMap<String, (u64, BTreeSet<String>)>>,
    uses: AtomicU64,
}

/// Conversations per connection whose delivered skills are remembered.
pub const MAX_REMEMBERED_CONVERSATIONS: usize = 64;

impl ConnectionSlot {
    /// A slot for a connection that lasts (stdio, an HTTP session).
    pub fn connection() -> ConnectionSlot {
        ConnectionSlot {
            session: Mutex::new(None),
            bound: true,
            touched: AtomicI64::new(0),
            delivered: Mutex::default(),
            uses: AtomicU64::new(0),
        }
    }

    /// The skills whose instructions this connection delivered in `session` (none for a
    /// stateless request: its transcript is unknown, so they are given again).
    fn delivered(&self, session: &str) -> BTreeSet<String> {
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .map(|(_, skills)| skills.clone())
            .unwrap_or_default()
    }

    /// Remembers what the connection's transcript holds in `session` after a request,
    /// forgetting the least recently used conversation past the bound.
    fn remember(&self, session: &str, skills: &BTreeSet<String>) {
        if !self.bound {
            return;
        }
        let used = self.uses.fetch_add(1, Ordering::Relaxed);
        let mut delivered = self
            .delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        delivered.insert(session.to_owned(), (used, skills.clone()));
        if delivered.len() > MAX_REMEMBERED_CONVERSATIONS
            && let Some(oldest) = delivered
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(id, _)| id.clone())
        {
            delivered.remove(&oldest);
        }
    }

    /// No connection: a stateless request (2026-07-28), whose conversation comes only from
    /// its handle.
    pub fn stateless() -> ConnectionSlot {
        ConnectionSlot::default()
    }
}

/// How this request can reach the person.
#[derive(Clone)]
pub enum Asker {
    /// Ask now and wait (2025-11-25 elicitation: a request to the client in the middle of
    /// the call).
    Now(Arc<dyn Approver>),
    /// Return the question to the client and resume when it answers (2026-07-28
    /// `input_required` with a sealed `requestState`).
    Deferred,
    /// The client cannot ask: the console approval queue, then a readable error.
    Console,
}

/// The user's answer to an elicited question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Accept: "allow once".
    AllowOnce,
    /// Accept: "allow for this conversation".
    AllowConversation,
    /// Accept with "deny", or the client's `decline`.
    Deny,
    /// The client's `cancel`: dismissed; nothing is recorded, the call does not run.
    Cancel,
}

impl Decision {
    /// The runtime's answer for this choice to `card`. A card that needs a person (the
    /// dangerous gate, `human`) offers only "allow once" and "deny": "allow for this
    /// conversation", not one of its choices, is no yes.
    pub(crate) fn answer_to(self, card: &Card) -> Answer {
        if card.needs_person && self == Decision::AllowConversation {
            return Answer::Deny;
        }
        self.answer()
    }

    /// The runtime's answer for this choice.
    fn answer(self) -> Answer {
        match self {
            Decision::AllowOnce => Answer::Allow,
            Decision::AllowConversation => Answer::AllowForSession,
            Decision::Deny => Answer::Deny,
            Decision::Cancel => Answer::Unanswered,
        }
    }

    /// The form's choice values, in order.
    pub const CHOICES: [(&'static str, &'static str); 3] = [
        ("allow_once", "Allow once"),
        ("allow_conversation", "Allow for this conversation"),
        ("deny", "Deny"),
    ];

    /// Parses a form choice.
    pub fn from_choice(choice: &str) -> Option<Decision> {
        match choice {
            "allow_once" => Some(Decision::AllowOnce),
            "allow_conversation" => Some(Decision::AllowConversation),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

/// A question waiting for the person, as sealed into `requestState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CardKey {
    consent: bool,
    package: String,
    tool: String,
}

impl CardKey {
    fn of(card: &Card) -> CardKey {
        CardKey {
            consent: card.question == Question::Consent,
            package: card.package.clone(),
            tool: card.tool.clone(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct PendingState {
    /// Session.
    s: String,
    /// User id of the caller.
    u: Option<String>,
    /// Tool name as called.
    t: String,
    /// Digest of the arguments.
    a: String,
    /// Answers given so far.
    done: Vec<(CardKey, Decision)>,
    /// The question being asked.
    ask: CardKey,
    /// One-time nonce.
    n: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct HandleBody {
    s: String,
    u: Option<String>,
}

/// A call's request.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool: a wire name or a meta-tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// A conversation handle the client passed.
    pub handle: Option<String>,
    /// Resuming a pending question: the sealed state and the user's decision.
    pub resume: Option<(String, Decision)>,
    /// The client's turn id ([`TURN_META`]), when it sent one.
    pub turn: Option<String>,
}

/// A question for the person.
#[derive(Debug, Clone)]
pub struct PendingQuestion {
    /// The card.
    pub card: Card,
    /// The message to show.
    pub message: String,
    /// The sealed state to echo back.
    pub state: String,
}

/// How a call ended at the front.
#[derive(Debug, Clone)]
pub enum CallResult {
    /// The pipeline finished (ran, refused, failed).
    Done {
        /// The runtime's outcome.
        outcome: CallOutcome,
        /// The conversation handle to pass on later requests.
        handle: String,
    },
    /// The person must answer first (2026-07-28).
    NeedsInput(PendingQuestion),
}

/// The fixed tool list entry, protocol-free.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Wire name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Input schema.
    pub input_schema: Value,
    /// Output schema, where declared.
    pub output_schema: Option<Value>,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
}

/// The MCP front over one runtime.
pub struct Front {
    runtime: Arc<Runtime>,
    config: McpConfig,
    sealer: Sealer,
    skills: Mutex<Option<(u64, Arc<SkillIndex>)>>,
    used_states: Mutex<HashMap<String, u64>>,
    turns: Mutex<HashMap<String, HeldTurn>>,
    /// When idle conversations were last deleted (Unix ms).
    purged: AtomicI64,
    /// Conversations a stateless request without a handle started, with when (Unix ms): each
    /// is deleted after `provisional_idle` unless a request names it by its handle.
    provisional: Mutex<HashMap<String, i64>>,
}

/// How often a conversation in use is marked so (its `updated_at`), and idle ones are looked
/// for: at most once a minute (or half the idle time, if shorter), so a request costs no extra
/// write.
const KEEP_ALIVE_MS: i64 = 60_000;
/// Idle conversations deleted at most per look.
const PURGE_BATCH: usize = 1_000;

fn now_ms() -> i64 {
    i64::try_from(now_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// A conversation's current turn, carried between its requests.
struct HeldTurn {
    id: Option<String>,
    state: TurnState,
    /// Skills whose lists the last request applied (read, or read again): their
    /// `allowed-tools` pre-approval may still serve the next request when it names no turn.
    widening: Vec<String>,
    seen: u128,
}

/// What a request naming no turn id continues of the held turn: every skill's restriction
/// (`disallowed-tools`, never lifted silently), and the pre-approval (`allowed-tools`) only
/// of the skills the previous request applied, so a widening ends at the latest with the next
/// call. Lockouts last one request.
fn unmarked_continuation(held: &HeldTurn) -> TurnState {
    let mut lists = TurnState::new();
    for rules in held.state.skills() {
        let mut rules = rules.clone();
        if !held.widening.contains(&rules.skill) {
            rules.allowed.clear();
        }
        lists.activate_skill(rules);
    }
    lists
}

/// The skills whose lists a request applied: those it left with a pre-approval that differs
/// from what it was given (a skill read, or read again after its widening had lapsed).
fn applied_widenings(given: &TurnState, after: &TurnState) -> Vec<String> {
    after
        .skills()
        .iter()
        .filter(|rules| !rules.allowed.is_empty())
        .filter(|rules| !given.skills().iter().any(|g| g == *rules))
        .map(|rules| rules.skill.clone())
        .collect()
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn digest(value: &Value) -> String {
    let canonical = quiver_store::canonical_json(value);
    let hash = Sha256::digest(canonical.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

fn nonce() -> String {
    // Unique per process and time; unguessability is not needed (the state is sealed).
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{t:x}-{n:x}-{:x}", std::process::id())
}

/// Answers cards from a list of decisions; the first unanswered card is kept as pending and
/// answered [`Answer::Pending`], so the pipeline stops without running, refusing or locking out
/// anything.
struct Deferred {
    done: Vec<(CardKey, Decision)>,
    pending: Mutex<Option<Card>>,
}

impl Approver for Deferred {
    fn decide(&self, card: &Card) -> Answer {
        let key = CardKey::of(card);
        if let Some((_, decision)) = self.done.iter().rev().find(|(k, _)| *k == key) {
            return decision.answer_to(card);
        }
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.is_none() {
            *pending = Some(card.clone());
        }
        Answer::Pending
    }
}

/// Refuses, without asking, every card that needs a person; passes the rest on.
struct AnonymousGuard {
    inner: Arc<dyn Approver>,
    refused: Mutex<bool>,
}

impl Approver for AnonymousGuard {
    fn decide(&self, card: &Card) -> Answer {
        if card.needs_person {
            *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = true;
            return Answer::Deny;
        }
        self.inner.decide(card)
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        self.inner.answer_question(question)
    }
}

impl AnonymousGuard {
    /// Whether a card needing a person was refused.
    fn refused(&self) -> bool {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The message a form shows for a card.
pub fn card_message(card: &Card) -> String {
    let what = match card.question {
        Question::Consent => format!(
            "Allow the assistant to use the package `{}` in this conversation? (first use: `{}`)",
            card.package, card.tool
        ),
        Question::Approval => format!("Run `{}`?", card.tool),
    };
    let mut text = format!(
        "{what}\narguments: {}\nwhy: {}\n{}",
        card.arguments,
        card.reasons.join("; "),
        quiver_runtime::approver::permissions_text(card, "")
    );
    if !card.risk_categories.is_empty() {
        text.push_str(&format!("\nrisk: {}", card.risk_categories.join(", ")));
    }
    if card.needs_person {
        text.push_str("\nThis needs your own approval for this one call.");
    }
    text
}

impl Front {
    /// A front over `runtime`, sealing handles and request states with `secret`.
    pub fn new(runtime: Arc<Runtime>, config: McpConfig, secret: Vec<u8>) -> Front {
        Front {
            runtime,
            config,
            sealer: Sealer::new(secret),
            skills: Mutex::new(None),
            used_states: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
            purged: AtomicI64::new(0),
            provisional: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The skills of the current catalog (rebuilt when the catalog changes).
    pub fn skill_index(&self) -> Arc<SkillIndex> {
        let catalog = self.runtime.catalog();
        let mut cached = self.skills.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((version, index)) = cached.as_ref()
            && *version == catalog.version()
        {
            return index.clone();
        }
        let index = Arc::new(SkillIndex::build(&catalog, &|_| true));
        *cached = Some((catalog.version(), index.clone()));
        index
    }

    /// What `caller` is offered now, as the runtime's pipeline decides it (packages switched
    /// off are absent); `None` when the store cannot say, and then nothing of any package is
    /// shown (fail safe).
    fn offer(&self, caller: &Caller) -> Option<Offer> {
        self.runtime
            .offer_outside_session(caller.principal.clone(), caller.origin.clone(), MCP_AGENT)
            .inspect_err(
                |error| tracing::warn!(%error, "cannot compute what the caller is offered"),
            )
            .ok()
    }

    /// The server's `instructions` for `caller` (docs/mcp.md "Prompt sections"): how to use
    /// the server, then the prompt sections the runtime delivers to this caller, assembled as
    /// for a chat turn. An error when the required sections exceed the budget: `initialize`
    /// fails then, as a chat turn does, rather than leave a required section out.
    pub fn instructions(&self, caller: &Caller) -> Result<String, FrontError> {
        let sections = self.runtime.prompt_sections_outside_session(
            caller.principal.clone(),
            caller.origin.clone(),
            MCP_AGENT,
        )?;
        let mut text = INSTRUCTIONS.to_owned();
        if !sections.is_empty() {
            text.push_str("\n\n");
            text.push_str(&sections);
        }
        Ok(text)
    }

    /// Whether `caller` may see the skill with Quiver id `id` (the runtime offers it).
    pub fn skill_visible(&self, caller: &Caller, id: &str) -> bool {
        self.offer(caller)
            .is_some_and(|offer| offer.skills.iter().any(|s| s == id))
    }

    /// The skills `caller` may see now, as the runtime offers them.
    pub fn visible_skills(&self, caller: &Caller) -> Vec<SkillEntry> {
        let Some(offer) = self.offer(caller) else {
            return Vec::new();
        };
        self.skill_index()
            .skills
            .iter()
            .filter(|s| offer.skills.contains(&s.id))
            .cloned()
            .collect()
    }

    /// The fixed tool list: `read_skill`, `tool_search`, `call_tool`, `get_run` (where the
    /// runtime runs workflows), then the `always_loaded` tools the caller is admitted to.
    pub fn tools(&self, caller: &Caller) -> Vec<ToolSpec> {
        let handle_prop = json!({
            "type": "string",
            "description": "The `conversation` value of an earlier result, so this call continues that conversation (consent is asked once per conversation). Leave out on the first call."
        });
        let mut out = vec![
            ToolSpec {
                name: "read_skill".into(),
                description: "Open a skill or package from the catalog by id (`weather`, `daily-report/weekly`), or read a file under a skill (`weather/references/cities.md`). Returns its instructions and the tools it makes available; call those with `call_tool`.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "id": {"type": "string", "description": "skill id, package id, or skill file"},
                    "conversation": handle_prop,
                }, "required": ["id"]}),
                output_schema: None,
                read_only: true,
                destructive: false,
            },
            ToolSpec {
                name: "tool_search".into(),
                description: "Search the catalog for tools, skills and packages that fit a request, in the user's words (Chinese or English). Call a tool found with `call_tool`; open a skill found with `read_skill`.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "what the user wants, in their words"},
                    "conversation": handle_prop,
                }, "required": ["query"]}),
                output_schema: None,
                read_only: true,
                destructive: false,
            },
            ToolSpec {
                name: "call_tool".into(),
                description: "Call a tool found with `tool_search` or listed by `read_skill`, by its name (`weather__forecast`), with its arguments. Quiver checks who may call it and asks the user for consent or approval when its policy says so.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "the tool's name as found"},
                    "arguments": {"type": "object", "description": "the tool's arguments, matching its input schema"},
                    "conversation": handle_prop,
                }, "required": ["name"]}),
                output_schema: None,
                read_only: false,
                destructive: true,
            },
        ];
        if self.runtime.workflow_store().is_some() {
            out.push(crate::runs::spec());
        }
        // The package tools the runtime offers a caller outside any conversation (the
        // `always_loaded` ones it is admitted to), translated; the runtime's own meta-tools
        // are replaced by the three above.
        let Some(offer) = self.offer(caller) else {
            return out;
        };
        let catalog = self.runtime.catalog();
        for definition in offer.tools {
            if META_TOOLS.contains(&definition.name.as_str()) {
                continue;
            }
            let Some(tool) = catalog
                .item_by_wire(&definition.name)
                .and_then(|item| catalog.tool(item))
            else {
                continue;
            };
            out.push(tool_spec(definition.name.clone(), tool));
        }
        out
    }

    fn handle_for(&self, session: &str, caller: &Caller) -> String {
        self.sealer.seal(
            CONVERSATION,
            &HandleBody {
                s: session.to_owned(),
                u: caller.principal.user_id.clone(),
            },
            0,
        )
    }

    /// The session of a request: its handle, else the connection's, else a new one.
    fn conversation(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        handle: Option<&str>,
    ) -> Result<String, FrontError> {
        if let Some(handle) = handle {
            let body: HandleBody = self
                .sealer
                .open(CONVERSATION, handle)
                .map_err(|e| FrontError::BadHandle(e.to_string()))?;
            if body.u != caller.principal.user_id {
                return Err(FrontError::BadHandle("it belongs to another user".into()));
            }
            // Named again: a conversation of its own now, kept as long as any.
            self.provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&body.s);
            let active = self.runtime.session_last_used(&body.s)?;
            let Some(updated) = active else {
                return Err(FrontError::BadHandle(
                    "its conversation has ended; leave `conversation` out to start a new one"
                        .into(),
                ));
            };
            if now_ms() - updated > self.keep_alive_every() {
                self.keep_alive(&body.s)?;
            }
            return Ok(body.s);
        }
        let mut bound = slot.session.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = bound.as_ref() {
            let now = now_ms();
            if now - slot.touched.swap(now, Ordering::Relaxed) > self.keep_alive_every() {
                self.keep_alive(session)?;
            }
            return Ok(session.clone());
        }
        self.purge_idle()?;
        let session = self.runtime.create_session(&SessionRequest {
            origin: caller.origin.clone(),
            agent: MCP_AGENT.into(),
            principal: caller.principal.clone(),
            profile: Profile::Interactive,
        })?;
        if slot.bound {
            slot.touched.store(now_ms(), Ordering::Relaxed);
            *bound = Some(session.clone());
        } else {
            self.provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(session.clone(), now_ms());
        }
        Ok(session)
    }

    fn idle_ms(&self) -> i64 {
        i64::try_from(self.config.conversation_idle.as_millis()).unwrap_or(i64::MAX)
    }

    /// How often a conversation in use is marked so, and idle ones are looked for.
    fn keep_alive_every(&self) -> i64 {
        KEEP_ALIVE_MS.min(self.idle_ms() / 2)
    }

    /// Marks `session` as in use now, so it is not taken for idle.
    fn keep_alive(&self, session: &str) -> Result<(), FrontError> {
        self.runtime.touch_session(session)?;
        Ok(())
    }

    /// Deletes the conversations idle for longer than `conversation_idle`, and those a
    /// stateless request started without a handle that no request named again within
    /// `provisional_idle` (at most once a minute): a stateless request whose client never
    /// comes back leaves no row for long.
    fn purge_idle(&self) -> Result<(), FrontError> {
        let now = now_ms();
        let provisional_ms =
            i64::try_from(self.config.provisional_idle.as_millis()).unwrap_or(i64::MAX);
        let every = self.keep_alive_every().min(provisional_ms / 2);
        if now - self.purged.load(Ordering::Relaxed) < every {
            return Ok(());
        }
        self.purged.store(now, Ordering::Relaxed);
        let expired: Vec<String> = {
            let mut provisional = self
                .provisional
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let expired = provisional
                .iter()
                .filter(|(_, started)| now - **started >= provisional_ms)
                .map(|(session, _)| session.clone())
                .collect::<Vec<_>>();
            for session in &expired {
                provisional.remove(session);
            }
            expired
        };
        for session in &expired {
            self.runtime.delete_session(
                session,
                "a stateless request's conversation no request named again",
            )?;
        }
        let idle = self.idle_ms();
        let deleted =
            self.runtime
                .purge_idle_sessions(MCP_AGENT, now.saturating_sub(idle), PURGE_BATCH)?;
        if deleted > 0 {
            tracing::info!(deleted, "deleted idle MCP conversations");
        }
        Ok(())
    }

    /// The turn state a request of `session` continues (docs/mcp.md "Turns"): all of the held
    /// turn (skill lists and lockouts) for a request naming the held turn's id; for a request
    /// naming none, the held restrictions, and the pre-approvals only of skills the previous
    /// request applied (a widening never outlives the next call); nothing for a new turn id.
    fn held_turn(&self, session: &str, turn: Option<&str>) -> TurnState {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        match (turns.get(session), turn) {
            (Some(held), Some(id)) if held.id.as_deref() == Some(id) => held.state.clone(),
            (Some(held), None) => unmarked_continuation(held),
            _ => TurnState::new(),
        }
    }

    /// Holds `state`, what a request given `given` left, as `session`'s current turn, with the
    /// pre-approvals of `kept` (a call still waiting for an answer) still open; past
    /// [`MAX_HELD_TURNS`] the least recently used conversation is ended.
    fn hold_turn(
        &self,
        session: &str,
        turn: Option<&str>,
        kept: &TurnState,
        given: &TurnState,
        state: TurnState,
    ) {
        let mut widening = applied_widenings(given, &state);
        widening.extend(
            kept.skills()
                .iter()
                .filter(|rules| !rules.allowed.is_empty())
                .map(|rules| rules.skill.clone()),
        );
        let evicted = {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            let id = match turn {
                Some(turn) => Some(turn.to_owned()),
                None => turns.get(session).and_then(|h| h.id.clone()),
            };
            turns.insert(
                session.to_owned(),
                HeldTurn {
                    id,
                    state,
                    widening,
                    seen: now_nanos(),
                },
            );
            let oldest = (turns.len() > MAX_HELD_TURNS)
                .then(|| {
                    turns
                        .iter()
                        .min_by_key(|(_, h)| h.seen)
                        .map(|(s, _)| s.clone())
                })
                .flatten();
            if let Some(oldest) = &oldest {
                turns.remove(oldest);
            }
            oldest
        };
        if let Some(oldest) = evicted
            && let Err(error) = self.runtime.end_session(&oldest)
        {
            tracing::warn!(%error, session = %oldest, "cannot end an evicted MCP conversation");
        }
    }

    /// Opens a resumed call's sealed state and checks it belongs to `caller` and this call.
    fn open_state(
        &self,
        caller: &Caller,
        sealed: &str,
        request: &CallRequest,
        args_digest: &str,
    ) -> Result<PendingState, FrontError> {
        let state: PendingState = self
            .sealer
            .open(REQUEST_STATE, sealed)
            .map_err(|e| FrontError::BadRequestState(e.to_string()))?;
        if state.u != caller.principal.user_id || state.t != request.name || state.a != args_digest
        {
            return Err(FrontError::BadRequestState(
                "it belongs to another call or conversation".into(),
            ));
        }
        Ok(state)
    }

    /// Spends a state's one-time nonce.
    fn spend(&self, state: &PendingState) -> Result<(), FrontError> {
        let mut used = self
            .used_states
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = now_secs();
        used.retain(|_, exp| *exp > now);
        if used
            .insert(state.n.clone(), now + REQUEST_STATE_TTL)
            .is_some()
        {
            return Err(FrontError::BadRequestState(
                "it was already used; call the tool again".into(),
            ));
        }
        Ok(())
    }

    /// The conversation a resumed call continues: the one sealed in its state. A handle or a
    /// connection's own conversation, when the request has one, must be that same one; a
    /// stateless retry without a handle (the SDK's own `input_required` retry) continues it.
    fn resumed_conversation(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        handle: Option<&str>,
        state: &PendingState,
    ) -> Result<String, FrontError> {
        let connection = slot
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let session = match (handle, connection) {
            (Some(handle), _) => self.conversation(caller, slot, Some(handle))?,
            (None, Some(session)) => session,
            (None, None) => {
                let active = self.runtime.session_last_used(&state.s)?.is_some();
                if !active {
                    return Err(FrontError::BadRequestState(
                        "its conversation has ended; call the tool again".into(),
                    ));
                }
                state.s.clone()
            }
        };
        if session != state.s {
            return Err(FrontError::BadRequestState(
                "it belongs to another call or conversation".into(),
            ));
        }
        Ok(session)
    }

    /// Runs a call through the pipeline on a blocking thread.
    pub async fn call(
        self: &Arc<Self>,
        caller: &Caller,
        slot: &ConnectionSlot,
        request: CallRequest,
        asker: Asker,
    ) -> Result<CallResult, FrontError> {
        let args_digest = digest(&request.arguments);
        let mut done = Vec::new();
        let session = if let Some((sealed, decision)) = &request.resume {
            let state = self.open_state(caller, sealed, &request, &args_digest)?;
            let session =
                self.resumed_conversation(caller, slot, request.handle.as_deref(), &state)?;
            self.spend(&state)?;
            done = state.done;
            done.push((state.ask, *decision));
            session
        } else {
            self.conversation(caller, slot, request.handle.as_deref())?
        };
        let deferred = Arc::new(Deferred {
            done: done.clone(),
            pending: Mutex::new(None),
        });
        let person: Arc<dyn Approver> = match &asker {
            Asker::Now(approver) => approver.clone(),
            Asker::Deferred => deferred.clone(),
            Asker::Console => self.runtime.console_approver(self.config.approval_wait),
        };
        // An anonymous caller may be anyone, a tool of another package included: it never
        // answers a card only a person may answer (dangerous and `human` tools).
        let guarded =
            (caller.principal.is_anonymous() && !matches!(asker, Asker::Console)).then(|| {
                Arc::new(AnonymousGuard {
                    inner: person.clone(),
                    refused: Mutex::new(false),
                })
            });
        let person: Arc<dyn Approver> = match &guarded {
            Some(guard) => guard.clone(),
            None => person,
        };
        let front = self.clone();
        let principal = caller.principal.clone();
        let session_for_call = session.clone();
        let name = request.name.clone();
        let arguments = request.arguments.clone();
        let held = self.held_turn(&session, request.turn.as_deref());
        let given = held.clone();
        let delivered = slot.delivered(&session);
        let (outcome, state, delivered) = tokio::task::spawn_blocking(move || {
            let mut turn = front.runtime.begin_turn(&session_for_call, principal, "")?;
            turn.continue_turn(held);
            turn.transcript_holds(delivered);
            turn.set_person(person);
            let outcome = turn.call(&name, arguments)?;
            let delivered = turn.skills_in_transcript().clone();
            Ok::<_, RuntimeError>((outcome, turn.turn_state().clone(), delivered))
        })
        .await
        .map_err(|e| FrontError::Interrupted(e.to_string()))??;
        let pending = deferred
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|_| matches!(asker, Asker::Deferred));
        // A call waiting for the person's answer is not over: its resumption is the same call
        // and keeps the widening it was given.
        let keep = if pending.is_some() {
            &given
        } else {
            &TurnState::new()
        };
        self.hold_turn(&session, request.turn.as_deref(), keep, &given, state);
        slot.remember(&session, &delivered);
        if let Some(card) = pending {
            let state = PendingState {
                s: session,
                u: caller.principal.user_id.clone(),
                t: request.name,
                a: args_digest,
                done,
                ask: CardKey::of(&card),
                n: nonce(),
            };
            return Ok(CallResult::NeedsInput(PendingQuestion {
                message: card_message(&card),
                card,
                state: self.sealer.seal(REQUEST_STATE, &state, REQUEST_STATE_TTL),
            }));
        }
        let mut outcome = outcome;
        if guarded.is_some_and(|g| g.refused()) && outcome.status == CallStatus::Refused {
            outcome.content = json!({"error": format!(
                "refused: `{}` needs a person's approval, and an anonymous MCP caller cannot give it; connect with a bearer token",
                request.name
            )});
        }
        if matches!(asker, Asker::Console) && outcome.status == CallStatus::Refused {
            explain_console(
                &mut outcome,
                &request.name,
                self.config.approval_wait.as_secs(),
            );
        }
        Ok(CallResult::Done {
            handle: self.handle_for(&session, caller),
            outcome,
        })
    }

    /// Starts a conversation for `caller` and returns its session id and handle (benchmarks,
    /// a console that hands a client a conversation in advance).
    pub fn open_conversation(&self, caller: &Caller) -> Result<(String, String), FrontError> {
        let session = self.conversation(caller, &ConnectionSlot::stateless(), None)?;
        let handle = self.handle_for(&session, caller);
        Ok((session, handle))
    }

    /// A conversation's handle for `caller`, creating the conversation when needed (a
    /// `resources/read` of a `SKILL.md` activates the skill in it).
    pub fn resolve(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        handle: Option<&str>,
    ) -> Result<String, FrontError> {
        self.conversation(caller, slot, handle)
    }

    /// Activates the skill `id` in `session` exactly as `read_skill` does (dedup, allowed and
    /// disallowed tools, the package opened, audited). The file read carries the instructions, so the connection's transcript holds them
    /// afterwards.
    pub async fn activate_skill(
        self: &Arc<Self>,
        caller: &Caller,
        slot: &ConnectionSlot,
        session: String,
        id: String,
        turn_id: Option<String>,
    ) -> Result<CallOutcome, FrontError> {
        let front = self.clone();
        let principal = caller.principal.clone();
        let held = self.held_turn(&session, turn_id.as_deref());
        let given = held.clone();
        let for_call = session.clone();
        let (outcome, state) = tokio::task::spawn_blocking(move || {
            let mut turn = front.runtime.begin_turn(&for_call, principal, "")?;
            turn.continue_turn(held);
            let outcome = turn.call("read_skill", json!({ "id": id }))?;
            Ok::<_, RuntimeError>((outcome, turn.turn_state().clone()))
        })
        .await
        .map_err(|e| FrontError::Interrupted(e.to_string()))??;
        self.hold_turn(
            &session,
            turn_id.as_deref(),
            &TurnState::new(),
            &given,
            state,
        );
        if let Some(skill) = outcome.content["skill"].as_str() {
            let mut delivered = slot.delivered(&session);
            delivered.insert(skill.to_owned());
            slot.remember(&session, &delivered);
        }
        Ok(outcome)
    }

    /// The catalog currently served.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.runtime.catalog()
    }
}

/// The readable error for a client that cannot show questions.
fn explain_console(outcome: &mut CallOutcome, name: &str, waited: u64) {
    let reason = outcome
        .content
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("refused")
        .to_owned();
    if reason.contains("no answer") || reason.contains("timed out") || reason.contains("nobody") {
        outcome.content = json!({"error": format!(
            "{reason}. `{name}` needs the user's consent or approval, and this MCP client cannot show questions, so the request waited {waited} s in Quiver's approval queue. Tell the user, then call `{name}` again: while that call waits, they approve it in the Quiver console (`quiver approvals list`, then `quiver approvals approve <id>`). Or ask them to use an MCP client that supports elicitation."
        )});
    }
}

fn tool_spec(wire: String, tool: &Tool) -> ToolSpec {
    let dangerous = classify(tool.name.as_str(), tool.risk, tool.risk_category, &[]).is_some();
    ToolSpec {
        name: wire,
        description: tool.description.full(),
        input_schema: tool.input.clone(),
        output_schema: tool.output.clone(),
        read_only: tool.category == Category::Perception && !dangerous,
        destructive: tool.category == Category::Action || dangerous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_remembers_a_bounded_number_of_conversations() {
        let slot = ConnectionSlot::connection();
        let skills: BTreeSet<String> = ["a/s".to_owned()].into();
        for n in 0..=MAX_REMEMBERED_CONVERSATIONS {
            slot.remember(&format!("ses-{n}"), &skills);
            // The first stays in use, so it is never the one forgotten.
            slot.remember("ses-0", &skills);
        }
        let remembered = slot.delivered.lock().unwrap().len();
        assert_eq!(remembered, MAX_REMEMBERED_CONVERSATIONS);
        assert_eq!(slot.delivered("ses-0"), skills);
        assert!(
            slot.delivered("ses-1").is_empty(),
            "the least recently used is forgotten"
        );
        assert_eq!(
            slot.delivered(&format!("ses-{MAX_REMEMBERED_CONVERSATIONS}")),
            skills
        );
        // A stateless request remembers nothing.
        let stateless = ConnectionSlot::default();
        stateless.remember("ses-x", &skills);
        assert!(stateless.delivered("ses-x").is_empty());
    }
}
