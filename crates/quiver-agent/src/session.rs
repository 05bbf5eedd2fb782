//! The loop: one [`ChatSession`] per conversation, whose [`ChatSession::send`] runs a turn —
//! ask the model, run each tool call through the runtime's pipeline, feed the results back —
//! until the model answers or the step limit is reached.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_catalog::Catalog;
use quiver_package::tool::ToolScope as ItemScope;
use quiver_policy::Principal;
use quiver_runtime::approver::Approver;
use quiver_runtime::{CallStatus, Runtime, Turn};
use serde::Serialize;
use serde_json::Value;

use crate::action::{self, Action};
use crate::config::ToolMode;
use crate::error::AgentError;
use crate::prompt;
use crate::provider::{ChatRequest, Message, Provider, ToolCall, ToolChoice, ToolSpec, Usage};
use crate::tokens;

/// Which of the runtime's offered tools this conversation may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolScope {
    /// Everything the runtime offers (the chat agent).
    All,
    /// Only these wire names and meta-tools, plus tools scoped to the agent or unlocked by a
    /// skill it read (a package's agent).
    Only(BTreeSet<String>),
}

/// Where the system prompt comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemPrompt {
    /// The runtime's assembly (sections, date, catalog), then the rules.
    Runtime,
    /// This text (an agent's own prompt), then the prompt sections the runtime delivers to
    /// its session (a package's agent: its own package's, for the turn's profile), then the
    /// date and the rules.
    Fixed(String),
}

/// How the loop talks to the model.
#[derive(Debug, Clone)]
pub struct LoopOptions {
    /// The model name.
    pub model: String,
    /// Native tool calls or the JSON action format.
    pub mode: ToolMode,
    /// Stream replies.
    pub stream: bool,
    /// Model requests per turn.
    pub max_steps: usize,
    /// Invalid-argument retries per tool per turn (the runtime's rule, DESIGN.md §3 step 4);
    /// once a tool has used them, the next request allows no tool call so the model asks the
    /// user.
    pub max_retries: u32,
    /// Characters of conversation kept before older turns are compacted away.
    pub context_chars: usize,
    /// Most tokens per reply.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Count the tokens of each turn's system prompt and tool definitions
    /// ([`TurnReport::prompt_tokens`]); loading the tokenizer takes a moment once per process.
    pub count_tokens: bool,
    /// When a turn must end (a workflow step's `timeout`): no model request starts after it,
    /// and the turn ends with [`AgentError::OutOfTime`].
    pub deadline: Option<Instant>,
}

impl LoopOptions {
    /// Options for `model` with the default limits.
    pub fn new(model: &str) -> Self {
        let limits = crate::config::Limits::default();
        Self {
            model: model.to_owned(),
            mode: ToolMode::Native,
            stream: true,
            max_steps: limits.max_steps,
            max_retries: 3,
            context_chars: limits.context_chars,
            max_tokens: None,
            temperature: None,
            count_tokens: false,
            deadline: None,
        }
    }
}

/// What a front sees while a turn runs.
pub trait Observer {
    /// A piece of the model's answer.
    fn text(&mut self, _delta: &str) {}
    /// A tool call is about to run.
    fn call_started(&mut self, _name: &str, _arguments: &Value) {}
    /// A tool call ended.
    fn call_finished(&mut self, _record: &CallRecord) {}
    /// The model's reply ended (a step of the turn).
    fn step_finished(&mut self) {}
}

/// An observer that sees nothing.
pub struct Quiet;

impl Observer for Quiet {}

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    /// The runtime's call id (`None` when the loop answered without the runtime).
    pub call_id: Option<String>,
    /// The wire name the model used.
    pub name: String,
    /// The arguments it sent.
    pub arguments: Value,
    /// How it ended.
    pub status: CallStatus,
    /// What the model read back.
    pub result: Value,
    /// The pipeline's decisions about it, in order (as its audit record holds them).
    pub decisions: Vec<quiver_store::AuditDecision>,
}

/// What a turn did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TurnReport {
    /// The final answer.
    pub reply: String,
    /// Every tool call, in order.
    pub calls: Vec<CallRecord>,
    /// Tokens the server reported, summed over the turn's requests.
    pub usage: Usage,
    /// Model requests made.
    pub steps: usize,
    /// Tokens of the first request's system prompt and tool definitions (o200k_base; 0 unless
    /// [`LoopOptions::count_tokens`]).
    pub prompt_tokens: usize,
    /// Replies in the action format that could not be read.
    pub malformed_actions: usize,
    /// Whether the turn ended at the step limit instead of with an answer.
    pub stopped: bool,
    /// Whether older turns were compacted away before this one (active skills ended).
    pub compacted: bool,
    /// Wall time of the turn.
    #[serde(serialize_with = "millis")]
    pub latency: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// Whether `scope` lets the model use the tool with wire name `name` this turn.
fn allowed(scope: &ToolScope, turn: &Turn<'_>, name: &str) -> bool {
    match scope {
        ToolScope::All => true,
        ToolScope::Only(names) => {
            names.contains(name)
                || turn
                    .catalog()
                    .item_by_wire(name)
                    .and_then(|item| turn.catalog().tool(item))
                    .is_some_and(|t| t.scope != ItemScope::Package)
        }
    }
}

/// The system prompt and the tools a request of `turn` carries before the conversation.
pub fn request_parts(
    turn: &Turn<'_>,
    scope: &ToolScope,
    system: &SystemPrompt,
    mode: ToolMode,
) -> Result<(String, Vec<ToolSpec>), AgentError> {
    let tools: Vec<ToolSpec> = turn
        .tools()?
        .into_iter()
        .filter(|t| allowed(scope, turn, &t.name))
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect();
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    let mut text = match system {
        SystemPrompt::Runtime => prompt::with_rules(&turn.system_prompt()?.0, &today),
        SystemPrompt::Fixed(text) => {
            let (sections, _) = turn.prompt_sections()?;
            let text = if sections.is_empty() {
                text.clone()
            } else {
                format!("{}\n\n{sections}", text.trim())
            };
            prompt::with_rules(&text, &today)
        }
    };
    if mode == ToolMode::Json {
        text.push_str("\n\n");
        text.push_str(&action::instructions(&tools));
    }
    Ok((text, tools))
}

/// One conversation with a model over the runtime.
pub struct ChatSession<'r> {
    runtime: &'r Runtime,
    provider: Arc<dyn Provider>,
    options: LoopOptions,
    session: String,
    sender: Principal,
    person: Option<Arc<dyn Approver>>,
    conversation: Vec<Message>,
    /// The active skills whose instructions [`ChatSession::conversation`] holds.
    skills_in_conversation: BTreeSet<String>,
    scope: ToolScope,
    system: SystemPrompt,
    /// The eager baseline's tokens, measured at the first counted turn.
    eager_tokens: Option<Option<usize>>,
    /// The catalog snapshot every turn holds; `None`: the current one at each turn's start.
    catalog: Option<Arc<Catalog>>,
}

impl<'r> ChatSession<'r> {
    /// A conversation in the runtime's `session`, as `sender`, with the model behind
    /// `provider`.
    pub fn new(
        runtime: &'r Runtime,
        provider: Arc<dyn Provider>,
        options: LoopOptions,
        session: &str,
        sender: Principal,
    ) -> Self {
        Self {
            runtime,
            provider,
            options,
            session: session.to_owned(),
            sender,
            person: None,
            conversation: Vec::new(),
            skills_in_conversation: BTreeSet::new(),
            scope: ToolScope::All,
            system: SystemPrompt::Runtime,
            eager_tokens: None,
            catalog: None,
        }
    }

    /// Records a counted turn's prompt tokens against the eager baseline (measured once per
    /// conversation; left out with a warning when it cannot be) in the audit, kind `turn`.
    fn record_tokens(&mut self, prompt_tokens: usize) -> Result<(), AgentError> {
        let eager = *self.eager_tokens.get_or_insert_with(|| {
            crate::cost::eager_tokens(self.runtime, &self.sender)
                .inspect_err(|e| tracing::warn!("cannot measure the eager baseline: {e}"))
                .ok()
        });
        self.runtime
            .record_turn_tokens(&self.session, prompt_tokens, eager)?;
        Ok(())
    }

    /// Makes `person` answer consent, approvals and `ask_user` in this conversation.
    pub fn with_person(mut self, person: Arc<dyn Approver>) -> Self {
        self.person = Some(person);
        self
    }

    /// Restricts the tools.
    pub fn with_scope(mut self, scope: ToolScope) -> Self {
        self.scope = scope;
        self
    }

    /// Sets the system prompt's source.
    pub fn with_system(mut self, system: SystemPrompt) -> Self {
        self.system = system;
        self
    }

    /// Makes every turn hold `catalog` instead of the snapshot current at its start (a
    /// sub-agent's turns hold their parent turn's).
    pub fn with_catalog(mut self, catalog: Arc<Catalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Begins a runtime turn of this conversation for `message`, with its sender, its person
    /// and its model (so skills bound to that model are shown, and no other model's).
    pub fn begin_turn(&self, message: &str) -> Result<Turn<'r>, AgentError> {
        let catalog = self
            .catalog
            .clone()
            .unwrap_or_else(|| self.runtime.catalog());
        let mut turn =
            self.runtime
                .begin_turn_on(&self.session, self.sender.clone(), message, catalog)?;
        if let Some(person) = &self.person {
            turn.set_person(person.clone());
        }
        turn.set_model(&self.options.model);
        turn.transcript_holds(self.skills_in_conversation.iter().cloned());
        Ok(turn)
    }

    /// Notes what `turn` put into the conversation: the skills whose instructions it now
    /// holds, so reading one again answers "already active".
    pub fn end_turn(&mut self, turn: &Turn<'_>) {
        self.skills_in_conversation = turn.skills_in_transcript().clone();
    }

    /// The runtime session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The conversation so far.
    pub fn conversation(&self) -> &[Message] {
        &self.conversation
    }

    /// `/reset`: forgets the conversation and ends every active skill (audited).
    pub fn reset(&mut self) -> Result<Vec<String>, AgentError> {
        self.conversation.clear();
        self.skills_in_conversation.clear();
        Ok(self
            .runtime
            .reset_skills(&self.session, "reset by the user")?)
    }

    /// The tools the model is offered this turn, and the system prompt.
    pub fn prepare(&self, turn: &Turn<'_>) -> Result<(String, Vec<ToolSpec>), AgentError> {
        request_parts(turn, &self.scope, &self.system, self.options.mode)
    }

    fn allowed(&self, turn: &Turn<'_>, name: &str) -> bool {
        allowed(&self.scope, turn, name)
    }

    /// Drops the oldest turns when the conversation is longer than the limit; active skills
    /// end so the model can read them again.
    fn compact(&mut self) -> Result<bool, AgentError> {
        let size = |m: &Message| match m {
            Message::User { text } => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.arguments.to_string().len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        };
        let total: usize = self.conversation.iter().map(size).sum();
        if total <= self.options.context_chars {
            return Ok(false);
        }
        // Keep the newest messages within half the limit, starting at a user message so no
        // tool result loses its call.
        let mut kept = 0;
        let mut cut = self.conversation.len();
        for (i, m) in self.conversation.iter().enumerate().rev() {
            kept += size(m);
            if kept > self.options.context_chars / 2 {
                break;
            }
            if matches!(m, Message::User { .. }) {
                cut = i;
            }
        }
        self.conversation.drain(..cut);
        self.conversation.insert(
            0,
            Message::User {
                text: "[Earlier messages were removed to save space. Skills you had read have ended: read them again if you need them.]".into(),
            },
        );
        self.skills_in_conversation.clear();
        self.runtime
            .reset_skills(&self.session, "the agent loop compacted its context")?;
        Ok(true)
    }

    /// Runs one turn for `message`.
    pub fn send(
        &mut self,
        message: &str,
        observer: &mut dyn Observer,
    ) -> Result<TurnReport, AgentError> {
        let started = Instant::now();
        let mut report = TurnReport {
            compacted: self.compact()?,
            ..TurnReport::default()
        };
        let mut turn = self.begin_turn(message)?;
        self.conversation.push(Message::User {
            text: message.to_owned(),
        });
        let mut invalid: HashMap<String, u32> = HashMap::new();
        let mut must_answer = false;
        let native = self.options.mode == ToolMode::Native;
        let mut answered = false;
        while report.steps < self.options.max_steps {
            if let Some(deadline) = self.options.deadline
                && Instant::now() >= deadline
            {
                return Err(AgentError::OutOfTime {
                    steps: report.steps,
                    seconds: (deadline - started).as_secs_f64(),
                });
            }
            let (system, tools) = self.prepare(&turn)?;
            if report.steps == 0 && self.options.count_tokens {
                report.prompt_tokens =
                    tokens::count(&system) + if native { tokens::tools(&tools) } else { 0 };
                self.record_tokens(report.prompt_tokens)?;
            }
            let request = ChatRequest {
                model: self.options.model.clone(),
                system,
                messages: self.conversation.clone(),
                tools: if native { tools.clone() } else { Vec::new() },
                tool_choice: if must_answer {
                    ToolChoice::None
                } else {
                    ToolChoice::Auto
                },
                stream: self.options.stream,
                max_tokens: self.options.max_tokens,
                temperature: self.options.temperature,
            };
            let reply = self.provider.complete(&request, &mut |delta| {
                if native {
                    observer.text(delta);
                }
            })?;
            observer.step_finished();
            report.steps += 1;
            report.usage.add(reply.usage);
            if native {
                self.conversation.push(Message::Assistant {
                    text: reply.text.clone(),
                    tool_calls: reply.tool_calls.clone(),
                });
                if reply.tool_calls.is_empty() || must_answer {
                    report.reply = reply.text;
                    answered = true;
                    break;
                }
                for call in &reply.tool_calls {
                    let record = self.run_call(&mut turn, call, observer);
                    let record = record?;
                    must_answer |= self.count_invalid(&mut invalid, &record);
                    self.conversation.push(Message::Tool {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        content: record.result.to_string(),
                        is_error: record.status != CallStatus::Ok,
                    });
                    report.calls.push(record);
                }
                continue;
            }
            self.conversation.push(Message::Assistant {
                text: reply.text.clone(),
                tool_calls: Vec::new(),
            });
            match action::parse(&reply.text) {
                Action::Answer(text) => {
                    observer.text(&text);
                    report.reply = text;
                    answered = true;
                    break;
                }
                Action::Malformed(why) => {
                    report.malformed_actions += 1;
                    self.conversation.push(Message::User {
                        text: action::feedback(&why),
                    });
                }
                Action::Call {
                    tool,
                    as_skill,
                    args,
                    ..
                } => {
                    let (name, args) = action::route(tool, as_skill, args, &tools, turn.catalog());
                    let call = ToolCall {
                        id: format!("action_{}", report.steps),
                        name,
                        arguments: args,
                    };
                    let record = self.run_call(&mut turn, &call, observer)?;
                    must_answer |= self.count_invalid(&mut invalid, &record);
                    let mut text = format!("Result of `{}`: {}", call.name, record.result);
                    if must_answer {
                        text.push_str("\nDo not call a tool now: ask the user.");
                    }
                    self.conversation.push(Message::User { text });
                    report.calls.push(record);
                }
            }
        }
        if !answered {
            report.stopped = true;
            report.reply = format!(
                "I stopped after {} steps without finishing; tell me how to go on.",
                self.options.max_steps
            );
            observer.text(&report.reply);
            self.conversation.push(Message::Assistant {
                text: report.reply.clone(),
                tool_calls: Vec::new(),
            });
        }
        self.end_turn(&turn);
        report.latency = started.elapsed();
        Ok(report)
    }

    /// Counts an invalid-argument result; true once a tool has used its retries.
    fn count_invalid(&self, invalid: &mut HashMap<String, u32>, record: &CallRecord) -> bool {
        if record.status != CallStatus::Invalid {
            return false;
        }
        let n = invalid.entry(record.name.clone()).or_insert(0);
        *n += 1;
        *n > self.options.max_retries
    }

    fn run_call(
        &self,
        turn: &mut Turn<'_>,
        call: &ToolCall,
        observer: &mut dyn Observer,
    ) -> Result<CallRecord, AgentError> {
        observer.call_started(&call.name, &call.arguments);
        let outcome = if self.allowed(turn, &call.name) {
            turn.call(&call.name, call.arguments.clone())?
        } else {
            // Outside this agent's tools: the same answer as a name that does not exist,
            // audited by the runtime.
            turn.refuse_as_unknown(
                &call.name,
                &call.arguments,
                "outside this agent's declared tools",
            )?
        };
        let record = CallRecord {
            call_id: (!outcome.call_id.is_empty()).then_some(outcome.call_id),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            status: outcome.status,
            result: outcome.content,
            decisions: outcome.decisions,
        };
        observer.call_finished(&record);
        Ok(record)
    }
}
