//! The front's logic, free of protocol types: which conversation a request belongs to, the
//! fixed tool list, running calls through the runtime (off the async threads), and the state
//! machine of consent and approval questions asked through elicitation.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quiver_catalog::Catalog;
use quiver_package::tool::{Category, Tool};
use quiver_policy::{Origin, Principal, classify};
use quiver_runtime::approver::Approver;
use quiver_runtime::runtime::META_TOOLS;
use quiver_runtime::{CallOutcome, CallStatus, Offer, Runtime, RuntimeError};
use quiver_store::ApprovalCard;
use serde_json::{Value, json};

use crate::config::McpConfig;
use crate::seal::Sealer;
use crate::skills::{SkillEntry, SkillIndex};

mod changes;
mod conversation;
mod links;
mod questions;
mod replay;
mod shared;
mod suspended;
mod turns;

pub use conversation::{
    CLIENT_CONVERSATION_IDLE, ConnectionSlot, MAX_CLIENT_CONVERSATIONS,
    MAX_REMEMBERED_CONVERSATIONS,
};
pub use links::{LINK_RETRY_WAIT, LinkShower, Way, way_to_ask};
use links::{LinkApprover, LinkSuspender};
pub use questions::{Asker, Decision, Link, PendingQuestion, Response, card_message};
use questions::{
    CardKey, PendingState, REQUEST_STATE, REQUEST_STATE_TTL, digest, nonce, now_nanos,
};
use shared::{SharedAsk, SharedQuestions};
pub use suspended::MAX_SUSPENDED_CALLS;
use suspended::{Finished, InFlight, Place, Step, Suspended};

/// The `_meta` key (and result field) that carries the conversation handle.
pub const CONVERSATION_META: &str = "io.quiver/conversation";
/// The `_meta` key set (`true`) on a result replayed for a retried `requestState`: the stored
/// answer of the call that ran for the first request with it, not a second run.
pub const REPLAYED_META: &str = "io.quiver/replayed";
/// The `_meta` key a client may send to say which turn of the conversation a request belongs
/// to: requests with the same id share one turn (the active skills' `allowed-tools` and
/// `disallowed-tools`, the turn's lockouts); a new id starts a new turn; without one, the
/// current turn's skill lists go on (fail safe: never lifted by the next request).
pub const TURN_META: &str = "io.quiver/turn";
/// How many turns of one conversation are held in the store (those written most recently);
/// a request naming a turn id no longer held starts that turn afresh.
pub const MAX_HELD_TURNS: usize = 8;
/// The agent profile MCP conversations run as.
pub const MCP_AGENT: &str = "chat";

/// What every client's `instructions` start with.
pub const INSTRUCTIONS: &str = "Quiver serves a catalog of skills and tools. Find a tool with `tool_search`, open a skill with `read_skill`, and run a tool with `call_tool`. When a result carries `conversation`, pass it on later calls so consent is asked once per conversation.";

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
    /// The call a `requestState` answered is still running (on this instance or another):
    /// the same request sent again later gets its result.
    #[error(
        "the call this requestState answered is still running: send the same request again in a moment to get its result"
    )]
    StillRunning,
    /// The conversation's turn could not be read or stored: the request's answer is not
    /// given without its turn (a refusal's lockout) stored.
    #[error("{0}")]
    Turn(String),
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

/// A call's request.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool: a wire name or a meta-tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// A conversation handle the client passed.
    pub handle: Option<String>,
    /// Resuming a pending question: the sealed state and the client's reply.
    pub resume: Option<(String, Response)>,
    /// The client's turn id ([`TURN_META`]), when it sent one.
    pub turn: Option<String>,
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
        /// Whether this is the stored answer of a call that ran for an earlier request with
        /// the same `requestState`, replayed rather than run again.
        replayed: bool,
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
    /// When idle conversations were last deleted (Unix ms).
    purged: AtomicI64,
    /// Conversations a stateless request without a handle started, with when (Unix ms): each
    /// is deleted after `provisional_idle` unless a request names it by its handle.
    provisional: Mutex<HashMap<String, i64>>,
    /// Calls waiting for the answer to a question returned to the client.
    suspended: Suspended,
    /// Handle-less clients' default conversations, by client key, with when last used.
    client_slots: Mutex<HashMap<String, (Instant, Arc<ConnectionSlot>)>>,
    /// Counts the catalog swaps, for the connections that tell their clients.
    swaps: tokio::sync::watch::Sender<u64>,
}

fn now_ms() -> i64 {
    i64::try_from(now_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// Where a call starts: the answers its sealed state carries, the console card a link showed
/// (and whether the person opened it), and its conversation.
struct Begun {
    done: Vec<(CardKey, Decision)>,
    shown: Option<(String, bool)>,
    session: String,
}

impl Front {
    /// A front over `runtime`, sealing handles and request states with `secret`.
    pub fn new(runtime: Arc<Runtime>, config: McpConfig, secret: Vec<u8>) -> Front {
        Front {
            runtime,
            config,
            sealer: Sealer::new(secret),
            skills: Mutex::new(None),
            purged: AtomicI64::new(0),
            provisional: Mutex::new(HashMap::new()),
            suspended: Suspended::default(),
            client_slots: Mutex::new(HashMap::new()),
            swaps: tokio::sync::watch::Sender::new(0),
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

    /// Runs a call through the pipeline on a blocking thread. With [`Asker::Deferred`] a
    /// question suspends the call and is returned to the client; the retry carrying its
    /// answer continues the same call (or, when it is no longer held, runs it again with the
    /// answers sealed in its state). A state is spent once across every instance on the
    /// store: the answer of the call it resumed is stored under it, and the same request sent
    /// again gets that answer replayed ([`FrontError::StillRunning`] until there is one).
    pub async fn call(
        self: &Arc<Self>,
        caller: &Caller,
        slot: &Arc<ConnectionSlot>,
        request: CallRequest,
        asker: Asker,
    ) -> Result<CallResult, FrontError> {
        let args_digest = digest(&request.arguments);
        let Some((sealed, response)) = &request.resume else {
            let session = self.conversation(caller, slot, request.handle.as_deref())?;
            let begun = Begun {
                done: Vec::new(),
                shown: None,
                session,
            };
            return self
                .run(caller, slot, &request, asker, args_digest, begun)
                .await;
        };
        let state = self.open_state(caller, sealed, &request, &args_digest)?;
        let session = self.resumed_conversation(caller, slot, request.handle.as_deref(), &state)?;
        if let Some(replayed) = self.spend(&state)? {
            return Ok(replayed);
        }
        // Spent: the call's answer must reach the store even when this request is dropped
        // (the client's connection lost), so its retry finds it; the work runs in a task.
        let (front, caller, slot, response) =
            (self.clone(), caller.clone(), slot.clone(), response.clone());
        let task = tokio::spawn(async move {
            let nonce = state.n.clone();
            let result = match front.suspended.take(&nonce) {
                Some(mut call) => {
                    match &state.c {
                        Some(_) => call.opened(response.opened()),
                        None => call.answer(response.decision()),
                    }
                    front
                        .drive(&caller, &slot, &request, args_digest, call)
                        .await
                }
                None => {
                    let mut done = state.done;
                    // A link's reply is not an answer: the card in the console holds that.
                    let shown = match state.c {
                        Some(card) => Some((card, response.opened())),
                        None => {
                            done.push((state.ask, response.decision()));
                            None
                        }
                    };
                    let begun = Begun {
                        done,
                        shown,
                        session,
                    };
                    front
                        .run(&caller, &slot, &request, asker, args_digest, begun)
                        .await
                }
            };
            front.keep_answer(&nonce, &result);
            result
        });
        task.await
            .map_err(|e| FrontError::Interrupted(e.to_string()))?
    }

    /// Runs a call where `begun` says it stands, answering its questions from `begun.done`
    /// first.
    async fn run(
        self: &Arc<Self>,
        caller: &Caller,
        slot: &ConnectionSlot,
        request: &CallRequest,
        asker: Asker,
        args_digest: String,
        begun: Begun,
    ) -> Result<CallResult, FrontError> {
        let Begun {
            done,
            shown,
            session,
        } = begun;
        let (given, read) = self.held_turn(&session, request.turn.as_deref())?;
        let place = Place {
            given,
            read,
            session,
        };
        // An anonymous caller is never asked a card only a person may answer (dangerous and
        // `human` tools): the runtime refuses such a call before asking, on every front.
        let mut retry = None;
        let mut link = None;
        let shared = SharedQuestions {
            runtime: self.runtime.clone(),
            wait: self.config.approval_wait,
        };
        let (person, channels): (Arc<dyn Approver>, _) = match &asker {
            Asker::Now(approver) => {
                let asks = SharedAsk {
                    inner: approver.clone(),
                    shared,
                };
                (Arc::new(asks) as Arc<dyn Approver>, None)
            }
            Asker::Console => {
                let approver = self.runtime.retry_approver();
                retry = Some(approver.clone());
                (approver, None)
            }
            Asker::Link(shower) => {
                let approver = self.runtime.retry_approver();
                retry = Some(approver.clone());
                let console = self.config.console_url.clone().unwrap_or_default();
                let link = LinkApprover {
                    retry: approver,
                    shower: shower.clone(),
                    console,
                    wait: self.config.approval_wait,
                };
                (Arc::new(link) as Arc<dyn Approver>, None)
            }
            Asker::Deferred => {
                let wait = Duration::from_secs(REQUEST_STATE_TTL);
                let (suspender, questions, answers) =
                    InFlight::channels(done.clone(), wait, Some(shared));
                (Arc::new(suspender), Some((questions, answers)))
            }
            Asker::DeferredLink => {
                let approver = self.runtime.retry_approver();
                link = Some(approver.clone());
                let wait = Duration::from_secs(REQUEST_STATE_TTL);
                let (suspender, questions, answers) = InFlight::channels(done.clone(), wait, None);
                let linked = LinkSuspender {
                    retry: approver,
                    suspender,
                    poll: LINK_RETRY_WAIT.min(self.config.approval_wait),
                    shown,
                };
                (
                    Arc::new(linked) as Arc<dyn Approver>,
                    Some((questions, answers)),
                )
            }
        };
        // The call holds the runtime, not the front: a front dropped (shutdown) lets go of
        // the calls it holds, which then stop waiting.
        let runtime = self.runtime.clone();
        let principal = caller.principal.clone();
        let session = place.session.clone();
        let name = request.name.clone();
        let arguments = request.arguments.clone();
        let held = place.given.clone();
        let delivered = slot.delivered(&session);
        let task = tokio::task::spawn_blocking(move || {
            let mut turn = runtime.begin_turn(&session, principal, "")?;
            turn.continue_turn(held);
            turn.transcript_holds(delivered);
            turn.set_person(person);
            let outcome = turn.call(&name, arguments)?;
            let delivered = turn.skills_in_transcript().clone();
            Ok((outcome, turn.turn_state().clone(), delivered))
        });
        match channels {
            Some((questions, answers)) => {
                let call = InFlight {
                    task,
                    questions,
                    answers,
                    asking: None,
                    done,
                    place,
                    link: link.map(|queue| (queue, None)),
                };
                self.drive(caller, slot, request, args_digest, call).await
            }
            None => {
                let finished = task
                    .await
                    .map_err(|e| FrontError::Interrupted(e.to_string()))?;
                let waiting = retry.map(|r| r.waiting()).unwrap_or_default();
                self.finish(caller, slot, &request.name, &waiting, &place, finished)
            }
        }
    }

    /// Lets a suspendable call go on until it finishes, or asks a question: then the call
    /// is held and the question returned with its sealed state.
    async fn drive(
        self: &Arc<Self>,
        caller: &Caller,
        slot: &ConnectionSlot,
        request: &CallRequest,
        args_digest: String,
        call: InFlight,
    ) -> Result<CallResult, FrontError> {
        let step = call
            .next()
            .await
            .map_err(|e| FrontError::Interrupted(e.to_string()))?;
        let (card, mut call) = match step {
            Step::Finished(finished, call) => {
                let waiting = (call.link.as_ref()).map_or_else(Vec::new, |(q, _)| q.waiting());
                return self.finish(
                    caller,
                    slot,
                    &request.name,
                    &waiting,
                    &call.place,
                    *finished,
                );
            }
            Step::Asks(card, call) => (*card, call),
        };
        let link = self.link_for(&mut call);
        // The widening the call was given stays open for its retry, should the call have to
        // run again.
        let place = &call.place;
        let given = place.given.clone();
        let open: Vec<&str> = given.skills().iter().map(|r| r.skill.as_str()).collect();
        let written = self.hold_turn(&place.session, &place.read, &open, &given, given.clone())?;
        // The call goes on from what it wrote: its own write is no other request's.
        call.place.read = written;
        let place = &call.place;
        let state = PendingState {
            s: place.session.clone(),
            u: caller.principal.user_id.clone(),
            t: request.name.clone(),
            a: args_digest,
            done: call.done.clone(),
            ask: CardKey::of(&card),
            c: link.as_ref().map(|(link, _)| link.id.clone()),
            n: nonce(),
        };
        let sealed = self.sealer.seal(REQUEST_STATE, &state, REQUEST_STATE_TTL);
        let until = Instant::now() + Duration::from_secs(REQUEST_STATE_TTL);
        self.suspended.hold(state.n, call, until);
        let message = match &link {
            Some((link, again)) => links::link_message(&card, &link.url, *again),
            None => card_message(&card),
        };
        Ok(CallResult::NeedsInput(PendingQuestion {
            message,
            card,
            state: sealed,
            link: link.map(|(link, _)| link),
        }))
    }

    /// The console page a call asking through links shows for its question (the card it left
    /// waiting), and whether it showed that card before.
    fn link_for(&self, call: &mut InFlight) -> Option<(Link, bool)> {
        let (queue, last) = call.link.as_mut()?;
        let waiting = queue.waiting().last()?.id.clone();
        let again = last.as_deref() == Some(waiting.as_str());
        *last = Some(waiting.clone());
        let console = self.config.console_url.as_deref().unwrap_or_default();
        let url = links::card_page(console, &waiting);
        Some((Link { id: waiting, url }, again))
    }

    /// A finished call: its turn held, what the transcript holds remembered, and for a client
    /// that cannot ask, the questions `waiting` for a person said with where to answer them.
    fn finish(
        &self,
        caller: &Caller,
        slot: &ConnectionSlot,
        name: &str,
        waiting: &[ApprovalCard],
        place: &Place,
        finished: Finished,
    ) -> Result<CallResult, FrontError> {
        let (mut outcome, state, delivered) = finished?;
        let session = &place.session;
        // A skill read (again) renews its widening until the next call.
        let read = (name == "read_skill")
            .then(|| outcome.content["skill"].as_str())
            .flatten();
        self.hold_turn(session, &place.read, read.as_slice(), &place.given, state)?;
        slot.remember(session, &delivered);
        if outcome.status == CallStatus::Pending
            && let Some(card) = waiting.last()
        {
            outcome.content =
                questions::waiting_for_a_person(name, card, self.config().console_url.as_deref());
        }
        Ok(CallResult::Done {
            handle: self.handle_for(session, caller),
            outcome,
            replayed: false,
        })
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
        let (held, turn_read) = self.held_turn(&session, turn_id.as_deref())?;
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
        let read = outcome.content["skill"].as_str();
        self.hold_turn(&session, &turn_read, read.as_slice(), &given, state)?;
        if let Some(skill) = read {
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
